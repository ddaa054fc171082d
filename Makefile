# Esper: every target sets up its own virtual environment first, so each works on a fresh clone.
#   make run    - train on the embedded default task (MNIST-1D, CPU, offline data)
#   make test   - check notebooks and esper/ agree, run nbdev_test, then pytest tests
#   make lab    - open the notebooks in JupyterLab
#   make docs   - render an offline HTML preview of every notebook into _preview/
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.esper-installed
RUN_DIR ?= runs/baseline
EPOCHS ?= 30

.PHONY: install run test check-export nbdev-test pytest lab docs export clean-nbs

$(STAMP): setup.py settings.ini .ci/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -c .ci/constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/esper-train baseline --task mnist1d --epochs $(EPOCHS) --seed 0 --out $(RUN_DIR)

# The notebooks are the source: exporting and cleaning them must not change any tracked file.
check-export: $(STAMP)
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean
	@if [ -n "$$(git status --porcelain -- esper nbs)" ]; then \
		echo "nbdev_export/nbdev_clean changed files: notebooks and esper/ disagree:"; \
		git status --porcelain -- esper nbs; exit 1; \
	else echo "notebooks and esper/ agree"; fi

nbdev-test: $(STAMP)
	cd nbs && ../$(BIN)/nbdev_test --path . --n_workers 2

pytest: $(STAMP)
	$(BIN)/python -m pytest tests

test: check-export nbdev-test pytest

lab: $(STAMP)
	$(BIN)/jupyter lab nbs

docs: $(STAMP)
	$(BIN)/python -m esper._docs_preview nbs _preview

export: $(STAMP)
	$(BIN)/nbdev_export && $(BIN)/nbdev_clean
