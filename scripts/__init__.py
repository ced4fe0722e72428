"""The repository's tools, one module each, run from the repository root as ``python -m scripts.NAME``:

- ``build_chorales``: rebuild the chorales embedded in the package from music21;
- ``student_notebooks``: the chapters without their solutions, for students;
- ``build_slides``: a reveal.js deck per chapter from the executed notebooks;
- ``run_chapters``: every chapter in a fresh runtime of a profile, in parallel, into a per-chapter ledger;
- ``gpu_shapes``: every chapter with the gpu profile's shapes and a few steps, on the virtual CUDA device;
- ``colab_env``: the install cell run in an environment built from Colab's published package list (Python 3.13):
  it adds packages and changes none; then every chapter runs in that environment's kernel;
- ``bench_ddp``: training speed on one process against several under torchrun (the appendix);
- ``compare_parallel``: several processes fill one comparison ledger (``compare --ledger --claim``), then export it;
- ``time_recipe``: the recipe's steps timed on the device, projected to its budget and scaled to a T4;
- ``harmonise_study``: chapter 12's study (the three ways to harmonise, over seeds, against Bach);
- ``export_web``: the shipped models to ONNX for the book's pages (``book/play``), checked in ONNX Runtime.

``setup-env`` (bash) makes the virtual environment. The book's Sphinx extensions live in
``book/_ext``, where the book build loads them; ``book_extension`` loads one the same way.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def book_extension(name: str) -> ModuleType:
    """The Sphinx extension ``book/_ext/<name>.py``, imported under the name the book build gives it."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "book" / "_ext" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def into_ledger(job, tasks: list, log: Path, workers: int = 2, every: int = 10, chunksize: int = 1) -> list[dict]:
    """Run ``job`` on every task in ``workers`` processes; append each result to the JSON-lines ``log`` as it
    finishes (a run stopped halfway keeps what it did: the studies skip the tasks their log holds), printing
    progress every ``every`` results. Returns the new results, in the tasks' order."""
    out = []
    with ProcessPoolExecutor(workers) as pool, Path(log).open("a") as f:
        for k, r in enumerate(pool.map(job, tasks, chunksize=chunksize)):
            f.write(json.dumps(r) + "\n")
            f.flush()
            out.append(r)
            if (k + 1) % every == 0:
                print(f"{k + 1}/{len(tasks)}", flush=True)
    return out
