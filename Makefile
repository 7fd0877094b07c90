# The workbook's two commands:
#   make reproduce   set everything up, then run every notebook in order (WORKBOOK_PROFILE, default cpu/gpu)
#   make test        set everything up, then the unit tests and every notebook under nbmake (smoke profile)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU wheel of this version lies on the offline machines' disk; override for other platforms.
TORCH_SPEC ?= torch==2.13.0
WORKBOOK_PROFILE ?=

.PHONY: setup reproduce test benchmark strip clean

setup: $(VENV)/.installed
	$(PY) -m helpers.assets

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
