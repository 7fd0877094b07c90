# The workbook's two commands:
#   make reproduce   set everything up, then run every notebook in order (WORKBOOK_PROFILE, default cpu/gpu; runs
#                    that extend train a prefix of the study's length, STOPS=1 the full length)
#   make test        set everything up, then the unit tests and every notebook under nbmake (smoke profile)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU wheel of this version lies on the offline machines' disk; override for other platforms.
TORCH_SPEC ?= torch==2.13.0
WORKBOOK_PROFILE ?=

.PHONY: setup git-filter reproduce study ledger carry test benchmark strip clean clean-runs

setup: $(VENV)/.installed git-filter
	$(PY) -m helpers.assets

# nbstripout as a git filter (.gitattributes names it for *.ipynb): outputs that JupyterLab autosaves into a
# notebook never reach a commit, and cell ids stay as they are. The filter is scripts/nbstripout_filter.sh, which
# passes a notebook through (with a warning) when .venv is gone, so git keeps working after `make clean`.
# Skipped outside a git checkout.
git-filter: $(VENV)/.installed
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		git config filter.nbstripout.clean 'sh scripts/nbstripout_filter.sh' && \
		git config filter.nbstripout.smudge cat && \
		git config filter.nbstripout.required true && \
		git config diff.ipynb.textconv 'sh scripts/nbstripout_filter.sh -t' && \
		echo "nbstripout installed as the git filter for *.ipynb"; \
	else echo "not a git checkout: nbstripout git filter not installed (run make strip before committing)"; fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,notebooks]"
	touch $@

# make reproduce trains each run that can stop at a prefix at a quarter of its length (helpers.profiles.REPRODUCE_PREFIX,
# a prefix of the study's runs: they extend); STOPS=1 trains every run to the study's full length.
STOPS ?=
reproduce: setup
	WORKBOOK_PROFILE=$(WORKBOOK_PROFILE) $(if $(strip $(STOPS)),WORKBOOK_PREFIX=1) $(PY) scripts/reproduce.py

# The seed study: the notebooks whose trained rows record their point estimate, once per seed, then the ledger.
# By default the sequential plan (looks after STUDY_LOOKS seeds, Pocock's boundary, futility stops); STUDY_SEEDS
# set runs exactly those seeds at 95% instead; STUDY_THROUGH_LOOK=N stops after look N (a later make study resumes).
STUDY_LOOKS ?= 3 5 8
STUDY_SEEDS ?=
STUDY_THROUGH_LOOK ?=
STUDY_NOTEBOOKS ?= notebooks/02_mntp_vs_mtp.ipynb notebooks/03_magnet.ipynb notebooks/04_sequence_repetition.ipynb \
	notebooks/05_mask_predict_ltd.ipynb notebooks/06_emat_multi_token_completion.ipynb notebooks/07_masked_diffusion.ipynb
study: setup
	WORKBOOK_PROFILE=$(WORKBOOK_PROFILE) $(PY) scripts/study.py $(STUDY_NOTEBOOKS) \
		$(if $(strip $(STUDY_SEEDS)),--seeds $(STUDY_SEEDS),--plan --looks $(STUDY_LOOKS) \
		$(if $(strip $(STUDY_THROUGH_LOOK)),--through-look $(STUDY_THROUGH_LOOK)))

# The committed ledger rebuilt from the committed per-seed claims files (claims/study/cpu/): the looks they complete
# are combined and gathered; no notebook runs.
ledger: setup
	WORKBOOK_PROFILE=cpu $(PY) scripts/study.py $(STUDY_NOTEBOOKS) --plan --looks $(STUDY_LOOKS) --rebuild

# Equal numbers keep the study: every notebook whose code changed since its slice record runs at the slice scale
# (smoke sizes, the embedded model, the cpu profile's precision) and every number it writes is compared bit for bit
# with the record; equal numbers carry its study rows to this code (claims/carried.json), a moved number is named and
# the notebook is stale. CARRY_NOTEBOOKS picks notebooks; `python -m helpers.equal_numbers --record` records anew.
CARRY_NOTEBOOKS ?= 01 02 03 04 05 06 07
carry: setup
	$(PY) -m helpers.equal_numbers --notebooks $(CARRY_NOTEBOOKS)

# Two pytest-xdist workers, each with its share of the cores for torch; the items that run notebooks in this checkout
# (or read what they wrote) stay together in one worker (conftest.py's notebook group).
TEST_WORKERS ?= 2
test: setup
	WORKBOOK_PROFILE=smoke $(PY) -m pytest tests notebooks --nbmake -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup

benchmark: setup
	$(PY) benchmarks/attention_masks.py

# Each notebook through the filter's own form (stdin to stdout: keys sorted as git's clean filter writes them), so a
# committed notebook never shows as modified once the filter is installed.
strip:
	@for notebook in notebooks/*.ipynb; do \
		$(PY) -m nbstripout --keep-id < "$$notebook" > "$$notebook.stripped" && mv "$$notebook.stripped" "$$notebook" \
		|| { rm -f "$$notebook.stripped"; exit 1; }; \
	done; echo "stripped notebooks/*.ipynb in the git filter's form"

# Removes the environment, the smoke figures and the git filter configuration that setup installed; trained runs
# (runs/) and cached assets (data/cache/) stay. `make clean-runs` deletes the trained runs.
clean:
	rm -rf $(VENV) figures/smoke
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		git config --remove-section filter.nbstripout 2>/dev/null; \
		git config --unset diff.ipynb.textconv 2>/dev/null; \
		echo "removed .venv, figures/smoke and the nbstripout git filter; kept runs/ (make clean-runs deletes it)"; \
	else echo "removed .venv and figures/smoke; kept runs/ (make clean-runs deletes it)"; fi

clean-runs:
	@echo "deleting every trained run, checkpoint, adapter run folder and claims file under runs/"
	rm -rf runs
