# `make demo` and `make test` set up .venv themselves on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test lint bench clean

install: $(STAMP)

# torch first and alone: pip then takes the pinned CPU wheel from local disk, and nothing later
# can pull a CUDA build in its place.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: LoRA recovery fine-tuning of MiniLM-L6 on SST-2, verified and rendered into
# runs/minilm-none-sst2/. Reads GLUE_DIR when set, else the Hub (nyu-mll/glue).
demo: install
	$(BIN)/publish --model minilm --module none --task sst2

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m pytest -q -m benchmark -s

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
