"""Shared fixtures. Tests and notebooks run in the smoke profile unless told otherwise."""
import os
from pathlib import Path

import pytest

os.environ.setdefault("MUSICTX_PROFILE", "smoke")   # inherited by the nbval kernels too
# pytest -n 2 runs two processes on two cores: one thread each, or they fight over the cores
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
# the official split is never committed: look beside the checkout, or where MUSICTX_JSB_PATH says
JSB_CANDIDATES = [Path(os.environ.get("MUSICTX_JSB_PATH", "/nonexistent")),
                  ROOT.parent / "shared" / "data" / "jsb" / "Jsb16thSeparated.json",
                  Path("/work/shared/data/jsb/Jsb16thSeparated.json")]
JSB = next((p for p in JSB_CANDIDATES if p.exists()), JSB_CANDIDATES[1])


@pytest.fixture(scope="session")
def chorales():
    from musictx_lite import load_chorales

    return load_chorales()


@pytest.fixture(scope="session")
def jsb_path() -> Path:
    if not JSB.exists():
        pytest.skip(f"official JSB file not present at {JSB}")
    return JSB
