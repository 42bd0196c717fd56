# Two entry points do all set-up on a fresh machine:
#   make book   — venv + pinned requirements + markovlib, execute every chapter at the paper's settings
#                 from the shipped runs (data/paper), two at a time into the build's cache
#                 (tools/prebuild.py; each worker's kernels forked from one warm process that imported
#                 torch, pandas, matplotlib and markovlib once: markovlib.companion.warm_ipykernel),
#                 build _build/html
#   make test   — the same set-up, then lint, unit tests, verify, every chapter executed once at smoke scale
#                 with a reader's chain into a strict build, and a headless-browser check of every page of
#                 that build (screenshots in _build/screenshots)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# CPU results are bit-reproducible only with a fixed thread count
export OMP_NUM_THREADS ?= 2
# The edition `make book` builds: paper (the authors' settings; every run is read from the shipped data in
# data/paper, none is trained). SCALE=cpu re-trains everything at a quarter of the length (about an hour).
SCALE ?= paper
# Trained models of the chapters go to results/ here (markovlib's own default is the user's cache).
export MARKOVLIB_RESULTS ?= $(CURDIR)/results

.PHONY: book test install lint unit notebooks book-strict browser verify bench pdf clean

# The pins are installed by uv (pinned here; pip installs it), which compiles their bytecode too (where
# $PYTHONDONTWRITEBYTECODE is set, as here, nothing else would, and every process would compile torch
# afresh): 40 s against pip's 117 s in a fresh clone on 2 cores (2026-11-27). pip's own find-links (a
# folder of local wheels) reach uv too.
UV_PIN := uv==0.13.9
ifdef PIP_FIND_LINKS
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(UV_PIN)
	$(UV) -r requirements.txt
	$(UV) --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (markovlib)" >/dev/null
	touch $(STAMP)

install: $(STAMP)

# the build's cache keys on code only: emptied when SCALE changes (make book, make pdf)
SCALE_CACHE = mkdir -p _build; if [ "$$(cat _build/.scale 2>/dev/null)" != "$(SCALE)" ]; then \
	  rm -rf _build/.jupyter_cache .jupyter_cache; echo "$(SCALE)" > _build/.scale; fi

book: $(STAMP)
	@$(SCALE_CACHE)
	@start=$$(date +%s); \
	MARKOVLIB_SCALE=$(SCALE) $(BIN)/python tools/prebuild.py --jobs 2 || exit 1; \
	MARKOVLIB_SCALE=$(SCALE) $(BIN)/jupyter-book build . --path-output . || exit 1; \
	echo "Book built in $$(( $$(date +%s) - start )) s. Open: file://$(CURDIR)/_build/html/index.html"

# The stages in turn, each one's wall-clock seconds on a line of its own as it passes (CI's log shows where
# the time goes); verify, which needs none of them, runs beside book-strict and browser (they leave a core
# idle part of the time), its output printed when it ends (tools/test_stages.py)
TEST_STAGES := lint unit book-strict browser
BESIDE := verify
test: $(STAMP)
	@$(BIN)/python tools/test_stages.py $(TEST_STAGES) --beside $(BESIDE) --from book-strict

# ruff format (88 columns) and ruff check over the library, tests, tools and the notebooks (pyproject.toml);
# import-linter's contracts on the library's layers
lint: $(STAMP)
	$(BIN)/ruff format --check markovlib tests benchmarks tools book
	$(BIN)/ruff check markovlib tests benchmarks tools book
	$(BIN)/lint-imports  # the layers and no import cycle: [tool.importlinter] in pyproject.toml

# two pytest-xdist workers, one torch thread each (tests/conftest.py)
unit: $(STAMP)
	$(BIN)/python -m pytest tests -q --ignore=tests/browser --ignore=tests/edition \
	  -n 2 --dist worksteal --durations=25

# Each chapter with its default parameters, cell by cell (nbval), two notebooks at a time; not part of
# `make test`, whose book-strict stage executes every chapter once
notebooks: $(STAMP)
	MARKOVLIB_SCALE=smoke OMP_NUM_THREADS=1 $(BIN)/python -m pytest --nbval-lax book -q \
	  -p no:cacheprovider -n 2 --dist loadfile

# Every chapter executed once, at smoke scale with a reader's chain, two at a time (one torch thread each),
# then a strict build (any Sphinx warning fails) into a separate folder so that it never poisons the
# reader's cache; tests/edition checks the executed notebooks, `make browser` the pages.
book-strict: $(STAMP)
	rm -rf _build/strict
	$(BIN)/markovlib book --p 0.3 --q 0.9 --seed 1 --scale smoke --jobs 2 --strict --out _build/strict
	MARKOVLIB_EDITION=_build/strict $(BIN)/python -m pytest tests/edition -q -p no:cacheprovider \
	  --confcutdir tests/edition

# Every page of the strict build in headless Chromium (installs Debian's chromium if missing and run as root),
# two browsers at a time (pytest-xdist; 118 s against 149 s for one, 2026-11-27); each page loaded once
# for the desktop, phone (the viewport resized) and dark-mode checks: 92 -> 60 s alone (2026-11-28)
# SHOTS=screen: screenshots of the first screen only (`make test`), else of whole pages. Neither suite
# loads tests/conftest.py (--confcutdir) nor imports markovlib's package: each of the three processes
# started 8 s sooner (torch, seaborn; 2026-11-27)
SHOTS ?= full
browser: $(STAMP)
	MARKOVLIB_SITE=_build/strict/_build/html MARKOVLIB_SHOTS=$(SHOTS) \
	  $(BIN)/python -m pytest tests/browser -q -rs -n 2 --confcutdir tests/browser

# The shipped paper-edition runs: manifest, every SHA-256 and spec key, every run checked without training
# (two processes; test losses within 6 standard errors: by control variates on 8 paths for a first-order
# chain from its stationary law, for the final weights the learnt kernel's own continued by one state, else
# fresh batches to 0.02 nats), then one run drawn at random among those of at most 60 s
# produced on a CPU like this one, re-trained to its end bit for bit (issue 51: one short run proves the
# property; three runs took 4-8 min). The sample seed changes from run to run.
verify: $(STAMP)
	$(BIN)/markovlib verify --sample 1 --max-seconds 60 --exact-only --jobs 2

# The book as a PDF (_build/latex/book.pdf) with Jupyter Book's LaTeX builder and XeLaTeX; needs TeX Live:
# apt-get install texlive-xetex texlive-latex-extra texlive-fonts-recommended texlive-fonts-extra
#   texlive-plain-generic latexmk fonts-freefont-otf (bbm.sty is in texlive-fonts-extra)
pdf: $(STAMP)
	@$(SCALE_CACHE)
	MARKOVLIB_SCALE=$(SCALE) $(BIN)/python tools/prebuild.py --jobs 2  # the chapters, and the build's facts
	MARKOVLIB_SCALE=$(SCALE) $(BIN)/jupyter-book build . --path-output . --builder pdflatex

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf _build .jupyter_cache
