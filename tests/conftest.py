"""Shared fixtures. Tests and notebooks run in the smoke profile unless told otherwise."""
import os
from pathlib import Path

import pytest

os.environ.setdefault("MUSICTX_PROFILE", "smoke")   # inherited by the nbval kernels too
# pytest -n 2 runs two processes on two cores: one thread each, or they fight over the cores
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]

# nbval runs every chapter with the model on a pretend accelerator (tests/virtual_device.py): each
# kernel starts with IPYTHONDIR's startup file below, so a CPU tensor fed to a model on the
# "device" fails as it would on Colab's CUDA, and every value is still computed for real.
# MUSICTX_NBVAL_DEVICE=cpu runs the chapters on the plain CPU instead.
VIRTUAL_DEVICE = "meta"   # its device type has the guard autograd needs on a CPU-only build; see virtual_device.py
KERNEL_STARTUP = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from virtual_device import VirtualDevice
os.environ["MUSICTX_DEVICE"] = {VIRTUAL_DEVICE!r}    # train() and pick_device() choose the pretend accelerator
VirtualDevice({VIRTUAL_DEVICE!r}).__enter__()
"""
if os.environ.get("MUSICTX_NBVAL_DEVICE", "virtual") == "virtual" and "IPYTHONDIR" not in os.environ:
    import tempfile

    _ipython = Path(tempfile.mkdtemp(prefix="musictx-ipython-"))
    (_ipython / "profile_default" / "startup").mkdir(parents=True)
    (_ipython / "profile_default" / "startup" / "00-virtual-device.py").write_text(KERNEL_STARTUP)
    os.environ["IPYTHONDIR"] = str(_ipython)            # inherited by the nbval kernels
# the official split is never committed: look beside the checkout, or where MUSICTX_JSB_PATH says
# (an empty MUSICTX_JSB_PATH, as make exports when ../shared is absent, names nothing)
JSB_CANDIDATES = [Path(p) for p in (os.environ.get("MUSICTX_JSB_PATH") or "/nonexistent",
                                    ROOT.parent / "shared" / "data" / "jsb" / "Jsb16thSeparated.json",
                                    "/work/shared/data/jsb/Jsb16thSeparated.json")]
JSB = next((p for p in JSB_CANDIDATES if p.is_file()), JSB_CANDIDATES[1])
if JSB.is_file():
    os.environ["MUSICTX_JSB_PATH"] = str(JSB)     # chapter 11's kernels load it without a download
# the shared piano sample (chapter 13), found the same way
PIANO_CANDIDATES = [Path(p) for p in (os.environ.get("MUSICTX_PIANO_PATH") or "/nonexistent",
                                      ROOT.parent / "shared" / "data" / "piano", "/work/shared/data/piano")]
PIANO = next((p for p in PIANO_CANDIDATES if (p / "pairs.csv").is_file()), PIANO_CANDIDATES[1])
if (PIANO / "pairs.csv").is_file():
    os.environ["MUSICTX_PIANO_PATH"] = str(PIANO)


@pytest.fixture(scope="session")
def piano_path() -> Path:
    if not (PIANO / "pairs.csv").is_file():
        pytest.skip(f"the shared piano sample is not present at {PIANO}")
    return PIANO


@pytest.fixture(scope="session")
def chorales():
    from musictx_lite import load_chorales

    return load_chorales()


@pytest.fixture(scope="session")
def jsb_path() -> Path:
    if not JSB.is_file():
        pytest.skip(f"official JSB file not present at {JSB}")
    return JSB
