#!/bin/sh
# git's clean filter (and, with -t, diff textconv) for *.ipynb, set by `make setup`: nbstripout from the workbook's
# .venv strips outputs and keeps cell ids. Without that interpreter (after `make clean`, or before `make setup`)
# the notebook passes through unchanged with a warning, so `git status`, `git diff` and `git stash` keep working.
top=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
python="$top/.venv/bin/python"
if [ -x "$python" ] && "$python" -c "import nbstripout" 2>/dev/null; then
    exec "$python" -m nbstripout --keep-id "$@"
fi
echo "nbstripout filter: $python not found; notebook passed through unstripped (run make setup, or make strip before committing)" >&2
if [ $# -gt 0 ] && [ "$1" = "-t" ]; then shift; fi
if [ $# -gt 0 ]; then exec cat "$@"; fi
exec cat
