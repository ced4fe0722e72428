"""The install CI, ``make test`` and ``make book`` make (scripts/setup-env): inside colab-constraints.txt and at
requirements-lock.txt's versions, so a new upstream release never changes what CI tests by itself.

Checked three ways: the lock against both files (``scripts.lock check``); the environment these tests run in
against the lock, package by package; and setup-env's own plan for an empty environment, made against PyPI as it
is today (``MUSICTX_INSTALL=dry-run``), against the lock. And each check is shown to fail where it should."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_constraints import pypi_reachable

from scripts import lock

ROOT = Path(__file__).resolve().parents[2]
THIS_PYTHON = "%d.%d" % sys.version_info[:2]
LOCK_PYTHON, PINS = lock.read_lock()
# torch is the machine's (a CPU wheel, or the CUDA build with its own nvidia/cuda/triton packages); pyfluidsynth
# is installed only where the FluidSynth library is
MACHINES = re.compile(r"^(torch|nvidia-.*|cuda-.*|triton|pyfluidsynth)$")
needs_lock_python = pytest.mark.skipif(THIS_PYTHON != LOCK_PYTHON, reason=f"the lock is for Python {LOCK_PYTHON}, "
                                                                          f"these tests run on {THIS_PYTHON}")


def outside_the_lock(versions: dict[str, str]) -> list[str]:
    """Each package of ``versions`` (name -> version) that the lock does not pin, or pins at another version."""
    out = []
    for name, v in sorted(versions.items()):
        name = lock.canon(name)
        if name in lock.NOT_LOCKED and name != "torch" or MACHINES.match(name):
            continue
        if name not in PINS:
            out.append(f"{name} {v}: not in the lock")
        elif v != PINS[name]:
            out.append(f"{name} {v}: the lock has {PINS[name]}")
    return out


def test_the_lock_is_inside_the_constraints_and_the_ranges_and_names_its_python():
    assert lock.check() == []
    assert re.fullmatch(r"3\.1[0-3]", LOCK_PYTHON) and len(PINS) > 100
    for name in ("ipython", "ipywidgets", "matplotlib", "music21", "jupyter-book", "nbval", "numpy"):
        assert name in PINS, name


def test_the_lock_check_fails_on_a_pin_outside_the_constraints_or_a_missing_one(tmp_path):
    text = (ROOT / "requirements-lock.txt").read_text()
    text = re.sub(r"^ipython==.*$", "ipython==9.19.1", text, flags=re.M)          # above colab-constraints' <9.19
    text = re.sub(r"^music21==.*\n", "", text, flags=re.M)                        # a dependency left floating
    (tmp_path / "requirements-lock.txt").write_text(text + "torch==2.13.0\n")     # the machine's to choose
    problems = lock.check(tmp_path / "requirements-lock.txt")
    assert any(p.startswith("ipython 9.19.1 is outside colab-constraints.txt") for p in problems), problems
    assert "music21: in colab-constraints.txt but not pinned in requirements-lock.txt" in problems
    assert any(p.startswith("torch: pinned") for p in problems)


@needs_lock_python
def test_the_environment_the_tests_run_in_is_the_lock():
    """Every package installed here, torch aside, is in the lock at the lock's version: nothing floats."""
    from importlib import metadata

    here = {d.metadata["Name"]: d.version for d in metadata.distributions()}
    assert len(here) > 100
    assert outside_the_lock(here) == []


def test_outside_the_lock_finds_a_newer_release():
    assert outside_the_lock({"ipython": "9.19.1", "left-pad": "1.0", "torch": "2.13.0", "nvidia-cublas": "13"}) == [
        "ipython 9.19.1: the lock has " + PINS["ipython"], "left-pad 1.0: not in the lock"]


@needs_lock_python
def test_setup_envs_plan_for_an_empty_environment_is_the_lock(tmp_path):
    """scripts/setup-env, the project's way, into a new environment, resolved against PyPI as it is today (a dry
    run: pip's report of what it would install): every package at the lock's version, whatever is newer upstream."""
    if not pypi_reachable():
        pytest.skip("PyPI cannot be reached from here")
    venv = tmp_path / "venv"
    env = {**os.environ, "MUSICTX_INSTALL": "dry-run", "PYTHON": sys.executable}
    env.pop("VIRTUAL_ENV", None)
    run = subprocess.run(["bash", str(ROOT / "scripts" / "setup-env"), str(venv)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=540)
    assert run.returncode == 0, run.stderr[-2000:]
    plan = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads((venv / "report.json").read_text())
            ["install"]}
    assert {"ipython", "music21", "jupyter-book", "nbval"} <= {lock.canon(n) for n in plan}
    assert outside_the_lock(plan) == []
    assert not list(venv.glob("lib/python*/site-packages/IPython"))                    # planned, not installed


def test_setup_env_refuses_an_unknown_install_mode(tmp_path):
    run = subprocess.run(["bash", str(ROOT / "scripts" / "setup-env"), str(tmp_path / "v")], cwd=ROOT,
                         env={**os.environ, "MUSICTX_INSTALL": "newest", "PYTHON": sys.executable},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stderr.strip() == ("error: MUSICTX_INSTALL is pinned, latest or dry-run, "
                                                          "not 'newest'")
