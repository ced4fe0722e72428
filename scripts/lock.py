"""The lock: one exact version of every package CI installs but torch, for one Python (CI's), inside
``colab-constraints.txt`` (Colab's bounds) and ``requirements.txt`` (pyproject's ranges).

``scripts/setup-env`` installs ``-r requirements.txt -c colab-constraints.txt -c requirements-lock.txt``, so what CI
and ``make test``/``make book`` test is what the constraints allow, whatever upstream released today. Three uses:

    python -m scripts.lock write          # freeze .venv (set up by scripts/setup-env, tests passed) into the lock
    python -m scripts.lock check          # the lock against both files: exit 1, one line each, where it is outside
    python -m scripts.lock moves [--tests-exit N] [--venv .venv-latest]
                                          # `make latest`: which of that environment's versions lie above the
                                          # constraints or the lock, and so which bound to move (when the tests
                                          # passed there) or keep (when they failed)

Run with the environment's Python (it needs ``packaging``, which the book's tools bring).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"
# torch: the machine's build (setup-env); the project's own three packages: installed from this checkout
NOT_LOCKED = {"torch", "pip", "setuptools", "wheel", "musictx-lite", "musictx-solutions", "musictx-course"}
HEADER = """\
# The exact versions that scripts/setup-env installs (-c) for the Python named below, what CI runs: every package
# but torch (a CPU or CUDA build chosen by the machine). Inside colab-constraints.txt and requirements.txt's ranges
# (python -m scripts.lock check; tests/book/test_install.py). Written by `python -m scripts.lock write` from an
# environment whose tests passed; `make latest` says which bound to move. Another Python installs unlocked, inside
# colab-constraints.txt and the ranges.
"""


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_bounds(path: Path) -> dict[str, SpecifierSet]:
    """name -> its specifier in a requirements or constraints file (comments, markers and extras dropped)."""
    out: dict[str, SpecifierSet] = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            r = Requirement(line)
            out[canon(r.name)] = out.get(canon(r.name), SpecifierSet()) & r.specifier
    return out


def allows(spec: SpecifierSet, version: str) -> bool:
    return spec.contains(version, prereleases=True)


def read_lock(path: Path = LOCK) -> tuple[str, dict[str, str]]:
    """The lock's Python (``# python: 3.11``) and name -> version."""
    text = path.read_text()
    m = re.search(r"^# python: *(\d+\.\d+)", text, re.M)
    pins = {name: next(iter(spec)).version for name, spec in read_bounds(path).items()
            if len(spec) == 1 and next(iter(spec)).operator == "=="}
    return (m.group(1) if m else ""), pins


def check(lock: Path = LOCK, root: Path = ROOT) -> list[str]:
    """What is wrong with the lock: a pin outside colab-constraints.txt or requirements.txt, a requirement or a
    constraint it does not pin (torch and pyfluidsynth, installed only where the machine has its library, aside),
    or no Python named."""
    python, pins = read_lock(lock)
    problems = [] if python else [f"{lock.name}: no '# python: X.Y' line"]
    for source in ("colab-constraints.txt", "requirements.txt"):
        for name, bounds in read_bounds(root / source).items():
            if name in NOT_LOCKED or name == "pyfluidsynth":
                continue
            if name not in pins:
                problems.append(f"{name}: in {source} but not pinned in {lock.name}")
            elif not allows(bounds, pins[name]):
                problems.append(f"{name} {pins[name]} is outside {source}'s {bounds}")
    problems += [f"{name}: pinned in {lock.name}, but it is the machine's to choose" for name in pins
                 if name in NOT_LOCKED]
    return problems


def installed(python: str) -> dict[str, str]:
    """name -> version of every distribution in the environment of ``python``."""
    out = subprocess.run([python, "-c", "import json; from importlib import metadata; print(json.dumps("
                          "{d.metadata['Name']: d.version for d in metadata.distributions()}))"],
                         check=True, capture_output=True, text=True).stdout
    return {canon(k): v for k, v in json.loads(out).items()}


def write(venv: Path, lock: Path = LOCK) -> list[str]:
    have = installed(str(venv / "bin" / "python"))
    minor = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    lines = [f"{name}=={v}" for name, v in sorted(have.items()) if name not in NOT_LOCKED]
    lock.write_text(HEADER + f"# python: {minor}\n" + "\n".join(lines) + "\n")
    return check(lock)


def moves(venv: Path, tests_exit: int | None, root: Path = ROOT) -> list[str]:
    """For each package of ``venv`` above the lock or a constraint: what to do with that bound."""
    have = installed(str(venv / "bin" / "python"))
    _, pins = read_lock(root / "requirements-lock.txt")
    pins_colab = read_bounds(root / "colab-constraints.txt")
    verdict = {None: "the tests were not run", 0: "the tests passed with it"}.get(
        tests_exit, f"the tests failed with it (exit {tests_exit}): find which release broke them before moving")
    out = []
    for name, v in sorted(have.items()):
        if name in pins_colab and not allows(pins_colab[name], v):
            out.append(f"{name} {v} is outside colab-constraints.txt's {pins_colab[name]}; {verdict}"
                       + ("; then raise that bound and run python -m scripts.colab_env" if tests_exit == 0 else ""))
        elif name in pins and Version(v) > Version(pins[name]):
            out.append(f"{name} {v} is newer than the lock's {pins[name]}; {verdict}"
                       + ("; then python -m scripts.lock write" if tests_exit == 0 else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.lock", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["write", "check", "moves"])
    ap.add_argument("--venv", type=Path, default=None, help="the environment (default .venv; moves: .venv-latest)")
    ap.add_argument("--tests-exit", type=int, default=None, help="moves: the exit status of the tests run there")
    a = ap.parse_args(argv)
    venv = a.venv or ROOT / (".venv-latest" if a.what == "moves" else ".venv")
    if a.what != "check" and not (venv / "bin" / "python").exists():
        print(f"error: no environment at {venv}: run scripts/setup-env first", file=sys.stderr)
        return 2
    if a.what == "moves":
        lines = moves(venv, a.tests_exit)
        print("\n".join(lines) if lines else "every package is inside the lock and the constraints: nothing to move")
        return 0 if a.tests_exit in (None, 0) else 1
    problems = write(venv) if a.what == "write" else check()
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if a.what == "write":
        print(f"wrote {LOCK.name}: {len(read_lock()[1])} packages for Python {read_lock()[0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
