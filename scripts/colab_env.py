"""Test the Colab constraints in a fresh environment: install as a chapter's Colab cell does, run every chapter.

    python -m scripts.colab_env --python python3.12 [--profile smoke] [--only 00 11] [--out colab-env.json]

Colab ships Python 3.12 with torch and numpy, and every chapter's install cell leaves those two alone.
This tool makes a new virtual environment with the interpreter given, installs torch, numpy and a
Jupyter kernel first, unconstrained (what a Colab runtime has), then, with ``PIP_CONSTRAINT`` set to
``colab-constraints.txt`` as the cell sets it, FluidSynth's binding and the package from this checkout
(the cell installs the release's tag). It runs ``pip check``, plays a chord (FluidSynth where the
system library is installed, as the cell installs it; else the organ), then runs every chapter in a fresh kernel of
that environment (``scripts.run_chapters``). It writes a record: the interpreter, the sha256 of the
constraints file it tested, the version of every constrained package it got, each chapter's result,
and the provenance. ``tests/book/test_constraints.py`` checks that the record is of today's constraints
file, and that everything in it passed. Exit status 1 when something failed, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import ROOT

CONSTRAINTS = ROOT / "colab-constraints.txt"
COLAB_HAS = ["torch", "numpy", "ipykernel", "nbclient", "nbformat"]      # preinstalled on Colab
# what plays a chord in that environment: FluidSynth where its system library is installed (the Colab
# cell installs it with apt), else the additive organ, and why
SOUND = ("import numpy as np, musictx_lite as mtx; c = mtx.play(np.array([[72, 67, 64, 48]] * 16), "
         "name='check'); print(c.synth); print(c.note)")


def versions(python: Path) -> dict[str, str]:
    """Every distribution installed for ``python``: normalised name -> version."""
    code = ("import json, importlib.metadata as m; print(json.dumps({d.metadata['Name'].lower()"
            ".replace('_', '-'): d.version for d in m.distributions()}))")
    return json.loads(subprocess.check_output([str(python), "-c", code], text=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default="python3.12", help="the interpreter (default python3.12, Colab's)")
    ap.add_argument("--profile", default="smoke", choices=("smoke", "cpu", "gpu"), help="chapters' profile")
    ap.add_argument("--only", nargs="*", default=None, help="chapter numbers, e.g. 00 11 (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "colab-env.json", help="the record (JSON)")
    args = ap.parse_args(argv)
    python = shutil.which(args.python)
    if python is None:
        print(f"error: no interpreter {args.python!r} on this machine", file=sys.stderr)
        return 2

    from packaging.requirements import Requirement

    from musictx_lite.experiments.hub import git_commit

    commit = git_commit()
    pinned = sorted(Requirement(ln.split("#")[0]).name.lower().replace("_", "-")
                    for ln in CONSTRAINTS.read_text().splitlines() if ln.split("#")[0].strip())
    work = Path(tempfile.mkdtemp(prefix="musictx-colab-"))
    try:
        t0 = time.time()
        subprocess.run([python, "-m", "venv", str(work / "venv")], check=True)
        py = work / "venv" / "bin" / "python"
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + COLAB_HAS, check=True)                              # Colab's own
        cell = {**os.environ, "PIP_CONSTRAINT": str(CONSTRAINTS)}                 # %env PIP_CONSTRAINT=...
        subprocess.run(pip + ["pyfluidsynth", str(ROOT)], check=True, env=cell)
        install_s = time.time() - t0
        check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True)
        got = versions(py)
        sound = subprocess.run([str(py), "-c", SOUND], capture_output=True, text=True, cwd=work)
        lines = sound.stdout.splitlines()
        played = ({"synth": lines[0], "note": lines[1]} if sound.returncode == 0 and len(lines) >= 2
                  else {"error": (sound.stderr.strip().splitlines() or ["no output"])[-1]})
        run = subprocess.run([str(py), "-m", "scripts.run_chapters", "--profile", args.profile,
                              "--out", str(work / "chapters"), *(["--only", *args.only] if args.only else [])],
                             cwd=ROOT)
        chapters = json.loads((work / "chapters" / "chapters.json").read_text())
    except subprocess.CalledProcessError as e:                   # pip's own output says why, above
        print(f"error: {' '.join(map(str, e.cmd))} failed with exit status {e.returncode}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    python_version = chapters["python"]
    record = {"command": " ".join(["python -m scripts.colab_env", *(argv if argv is not None else sys.argv[1:])]),
              "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "python": python_version, "device": chapters["device"],
              "constraints_sha256": hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest(),
              "install_seconds": round(install_s), "pip_check": check.stdout.strip() or check.stderr.strip(),
              "pip_check_ok": check.returncode == 0,
              "versions": {n: got.get(n) for n in sorted({*pinned, "torch", "numpy", "musictx-lite"})},
              "sound": played,
              "profile": args.profile, "chapters": chapters["chapters"]}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    failed = [r["chapter"] for r in record["chapters"] if not r["ok"]]
    print(f"Python {python_version}: installed in {install_s:.0f} s; pip check "
          f"{'ok' if check.returncode == 0 else 'FAILED'}; {len(record['chapters']) - len(failed)} of "
          f"{len(record['chapters'])} chapters ran" + (f" (failed: {', '.join(failed)})" if failed else "")
          + f"; wrote {args.out}")
    print(f"a chord played by: {played.get('note') or played}")
    return 0 if check.returncode == 0 and not failed and run.returncode == 0 and "error" not in played else 1


if __name__ == "__main__":
    sys.exit(main())
