"""Every chapter with the gpu profile's shapes and a few steps, on a CPU: the gpu profile's errors without a GPU.

    python -m scripts.gpu_shapes [--out runs/gpu-shapes] [--steps 8] [--workers 2] [--only 05 11]

Colab runs the ``gpu`` profile, which no CPU build executes. This runs every chapter in it as a fresh
Colab runtime would (``scripts.run_chapters``: a new kernel and an empty leaderboard per chapter), with two
changes made by each kernel's startup file: every model and tensor sits on the virtual CUDA device of
the tests (``tests/virtual_device.py``: a CPU tensor fed to a model on the device fails as on CUDA,
every value is still computed), and every training run of the gpu profile stops after ``--steps`` steps
(the profile's ``unchecked`` then says so, so the chapters print their readings instead of asserting
them). Everything else is the gpu profile's: the model sizes, contexts, batches and the prose's numbers.
So a shape, size, device or text error of the gpu profile shows up here, in minutes, on 2 cores.
The per-chapter ledger is ``--out``; run again to complete it. Exit status 1 when a chapter failed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts import ROOT

# run in every kernel before the chapter's first cell
STARTUP = """
import os, sys
from dataclasses import replace
sys.path.insert(0, {tests!r})
from virtual_device import VirtualDevice
os.environ["MUSICTX_DEVICE"] = "meta"       # the pretend accelerator (tests/conftest.py says why "meta")
VirtualDevice("meta").__enter__()
from musictx_lite.engine import profiles
_g, _few = profiles.PROFILES["gpu"], dict(max_steps={steps}, warmup_steps=1, eval_every={half},
                                           ckpt_every={half})
profiles.PROFILES["gpu"] = replace(
    _g, train=replace(_g.train, **_few), sizes={{k: {{**v, **_few}} for k, v in _g.sizes.items()}},
    comparison={{**_g.comparison, **_few}},
    unchecked="the gpu profile's shapes with {steps} training steps (scripts.gpu_shapes)")
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-shapes", help="the per-chapter ledger")
    ap.add_argument("--steps", type=int, default=8, help="training steps of every run (default 8)")
    ap.add_argument("--workers", type=int, default=2, help="chapters at once (default 2)")
    ap.add_argument("--only", nargs="*", default=None, help="chapter numbers, e.g. 05 11 (default: all)")
    args = ap.parse_args(argv)
    if args.steps < 2:
        print(f"error: --steps must be at least 2, got {args.steps}", file=sys.stderr)
        return 2
    ipython = Path(tempfile.mkdtemp(prefix="musictx-gpu-shapes-"))
    (ipython / "profile_default" / "startup").mkdir(parents=True)
    (ipython / "profile_default" / "startup" / "00-gpu-shapes.py").write_text(
        STARTUP.format(tests=str(ROOT / "tests"), steps=args.steps, half=max(1, args.steps // 2)))
    jsb = ROOT.parent / "shared" / "data" / "jsb" / "Jsb16thSeparated.json"
    env = {**os.environ, "IPYTHONDIR": str(ipython), "MUSICTX_PROGRESS": "0", "OMP_NUM_THREADS": "1",
           **({"MUSICTX_JSB_PATH": str(jsb)} if jsb.is_file() and not os.environ.get("MUSICTX_JSB_PATH") else {})}
    cmd = [sys.executable, "-m", "scripts.run_chapters", "--profile", "gpu", "--out", str(args.out),
           "--workers", str(args.workers), *(["--only", *args.only] if args.only else [])]
    return subprocess.run(cmd, env=env, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
