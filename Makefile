# The two commands of the README. Each sets up .venv first (scripts/setup-env: inside colab-constraints.txt and at
# requirements-lock.txt's versions), so nothing has to be installed by hand: `make book` builds the book, `make test`
# runs the linter and the tests (what CI runs).
# `make book` also writes a slide deck per chapter, with speaker notes, into the book (_build/html/slides);
# `make slides` rebuilds only the decks, into _build/slides (the book first if there is none).
VENV ?= .venv
PYTHON ?= python3
export PYTHON
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
# chapter 11 reads the official JSB split: a copy beside the checkout saves the download (offline builds)
MUSICTX_JSB_PATH ?= $(wildcard $(CURDIR)/../shared/data/jsb/Jsb16thSeparated.json)
export MUSICTX_JSB_PATH
# chapter 13 reads the shared piano sample the same way (never committed: MAESTRO is non-commercial)
MUSICTX_PIANO_PATH ?= $(wildcard $(CURDIR)/../shared/data/piano)
export MUSICTX_PIANO_PATH

.PHONY: book test env clean slides latest

book: $(VENV)/.ready       ## execute every chapter (cpu profile without a GPU), build _build/html, then the decks in it
	jupyter-book build . -W --keep-going
	python -m scripts.build_slides --out _build/html/slides

test: $(VENV)/.ready       ## the linter, unit tests, and every chapter under nbval in the smoke profile
	ruff check .
	pytest --nbval-lax -n 2 --dist loadfile --junitxml=_build/junit.xml --durations=10

slides: $(VENV)/.ready     ## the decks alone, in _build/slides, from the book's executed chapters (`make book` first if none)
	@test -d _build/html || $(MAKE) book
	python -m scripts.build_slides --out _build/slides

env: $(VENV)/.ready

# not a gate: the newest releases inside pyproject's ranges (no constraints, no lock) in .venv-latest, the tests
# there, then which bound of colab-constraints.txt or requirements-lock.txt to move (.github/workflows/latest.yml, weekly)
latest:
	rm -f .venv-latest/.ready
	MUSICTX_INSTALL=latest $(MAKE) test VENV=.venv-latest; status=$$?; \
	  .venv-latest/bin/python -m scripts.lock moves --venv .venv-latest --tests-exit $$status

$(VENV)/.ready: requirements.txt requirements-lock.txt colab-constraints.txt pyproject.toml scripts/setup-env
	bash scripts/setup-env $(VENV)
	touch $@

clean:                     ## remove the built book and its execution cache (not the environment)
	rm -rf _build
