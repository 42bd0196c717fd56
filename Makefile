# Two entry points do all set-up on a fresh machine:
#   make book   — venv + pinned requirements + markovlib, execute every chapter, build _build/html
#   make test   — the same set-up, then unit tests, notebook tests, a strict smoke-scale book build and a
#                 headless-browser check of every page of that build (screenshots in _build/screenshots)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# CPU results are bit-reproducible only with a fixed thread count
export OMP_NUM_THREADS ?= 2

.PHONY: book test install unit notebooks book-strict browser bench clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (markovlib)" >/dev/null
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	@start=$$(date +%s); \
	$(BIN)/jupyter-book build . --path-output . || exit 1; \
	echo "Book built in $$(( $$(date +%s) - start )) s. Open: file://$(CURDIR)/_build/html/index.html"

test: $(STAMP) unit notebooks book-strict browser

unit: $(STAMP)
	$(BIN)/python -m pytest tests -q --ignore=tests/browser

notebooks: $(STAMP)
	MARKOVLIB_SCALE=smoke $(BIN)/python -m pytest --nbval-lax book -q -p no:cacheprovider

# Strict build at smoke scale, into a separate folder so that it never poisons the reader's cache.
book-strict: $(STAMP)
	rm -rf _build/strict
	MARKOVLIB_SCALE=smoke $(BIN)/jupyter-book build . --path-output _build/strict -W -n --keep-going

# Every page of the strict build in headless Chromium (installs Debian's chromium if missing and run as root).
browser: $(STAMP)
	MARKOVLIB_SITE=_build/strict/_build/html $(BIN)/python -m pytest tests/browser -q -rs

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf _build .jupyter_cache
