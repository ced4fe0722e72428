"""Shared fixtures. Tests and notebooks run in the smoke profile unless told otherwise."""
import os
from pathlib import Path

import pytest

os.environ.setdefault("MUSICTX_PROFILE", "smoke")   # inherited by the nbval kernels too
# pytest -n 2 runs two processes on two cores: one thread each, or they fight over the cores
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
JSB = ROOT.parent / "shared" / "data" / "jsb" / "Jsb16thSeparated.json"


@pytest.fixture(scope="session")
def chorales():
    from musictx_lite import load_chorales

    return load_chorales()


@pytest.fixture(scope="session")
def jsb_path() -> Path:
    if not JSB.exists():
        pytest.skip(f"official JSB file not present at {JSB}")
    return JSB
