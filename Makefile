# The workbook's two commands:
#   make reproduce   set everything up, then run every notebook in order (WORKBOOK_PROFILE, default cpu/gpu)
#   make test        set everything up, then the unit tests and every notebook under nbmake (smoke profile)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU wheel of this version lies on the offline machines' disk; override for other platforms.
TORCH_SPEC ?= torch==2.13.0
WORKBOOK_PROFILE ?=

.PHONY: setup git-filter reproduce test benchmark strip clean

setup: $(VENV)/.installed git-filter
	$(PY) -m helpers.assets

# nbstripout as a git filter (.gitattributes names it for *.ipynb): outputs that JupyterLab autosaves into a
# notebook never reach a commit, and cell ids stay as they are. Skipped outside a git checkout.
git-filter: $(VENV)/.installed
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		git config filter.nbstripout.clean '"$(abspath $(PY))" -m nbstripout --keep-id' && \
		git config filter.nbstripout.smudge cat && \
		git config filter.nbstripout.required true && \
		git config diff.ipynb.textconv '"$(abspath $(PY))" -m nbstripout --keep-id -t' && \
		echo "nbstripout installed as the git filter for *.ipynb"; \
	else echo "not a git checkout: nbstripout git filter not installed (run make strip before committing)"; fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,notebooks]"
	touch $@

reproduce: setup
	WORKBOOK_PROFILE=$(WORKBOOK_PROFILE) $(PY) scripts/reproduce.py

test: setup
	WORKBOOK_PROFILE=smoke $(PY) -m pytest tests notebooks --nbmake -q -p no:cacheprovider

benchmark: setup
	$(PY) benchmarks/attention_masks.py

strip:
	$(PY) -m nbstripout --keep-id notebooks/*.ipynb

clean:
	rm -rf $(VENV) runs figures/smoke
