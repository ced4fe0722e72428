"""Chapter 12's study, one command: train (or resume) the trained ways over seeds, choose on valid, score test
once, harmonise every test soprano with each way and measure the music against Bach's.

    python -m scripts.harmonise_study --runs runs/harm --data PATH/Jsb16thSeparated.json
        [--seeds 3] [--steps 1500] [--temperature 1.0] [--out musictx_lite/pretrained/harmonise.json]
        [--export musictx_lite/pretrained] [--pieces N]

The trained ways (``study.chapter12``): the encoder-decoder (``harmoniser``), started from the shipped
``relative`` decoder (``train --start-from relative --freeze``: the decoder's weights stay as shipped, the
encoder and the cross-attentions learn), and Coconet (``coconet``) from
scratch at the recipe's learning rate; both at the paper profile's size, ``--steps`` steps, batch 16, with
transposition. Each run is ``runs/<way>-s<seed>``: a run that exists resumes (a finished one only re-scores),
so an interrupted study completes where it stopped. The decoder is the shipped ``relative`` model.

``--export DIR`` also exports the encoder-decoder's chosen run as ``pretrained("harmoniser")`` with its record.
``--pieces N`` scores and harmonises the first N pieces of each split only (a quick check; not for the book).
The results file holds the provenance (command, commit, device, versions, date, seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from musictx_lite import load_jsb, pretrained
from musictx_lite.engine.distil import load_teacher
from musictx_lite.files import atomic_write
from musictx_lite.study import chapter12 as c12
from musictx_lite.study.bench import bench_harmonise
from musictx_lite.study.hub import git_commit, provenance

TRAINED = {"harmoniser": ["--start-from", "relative", "--freeze"], "coconet": []}


def train_run(way: str, seed: int, steps: int, data: str, runs: Path) -> Path:
    out = runs / f"{way}-s{seed}"
    cmd = [sys.executable, "-m", "musictx_lite", "train", "--model", way, "--profile", "paper", "--steps", str(steps),
           "--seed", str(seed), "--data", data, "--out", str(out), "--quiet", *TRAINED[way]]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--data", required=True, help="the official split, Jsb16thSeparated.json")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--ways", nargs="+", choices=sorted(TRAINED), default=sorted(TRAINED, reverse=True))
    ap.add_argument("--out", default=str(c12.RESULTS))
    ap.add_argument("--export", default=None, metavar="DIR")
    ap.add_argument("--pieces", type=int, default=None)
    a = ap.parse_args(argv)
    t0, commit = time.time(), git_commit()
    runs, n = Path(a.runs), a.pieces
    data = load_jsb(a.data)
    valid, test = data.valid[:n], data.test[:n]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))

    res = {"temperature": a.temperature, "n_test": len(test), "n_valid": len(valid), "steps": a.steps,
           "seeds": a.seeds, "data": data.source, "nll": {}, "music": {}, "melody_kept": {},
           "runs": {way: " ".join(["train --model", way, "--profile paper --steps", str(a.steps), *TRAINED[way]])
                    for way in a.ways}}
    models = {"decoder": pretrained("relative", device="cpu")}
    d = models["decoder"]
    res["nll"]["decoder"] = c12.nll_summary({"0": c12.way_nll(d, valid)}, {"0": c12.way_nll(d, test)})
    print(c12.nll_table(res), flush=True)
    chosen_runs = {}
    for way in a.ways:
        scores = {}
        for seed in range(a.seeds):
            run = train_run(way, seed, a.steps, a.data, runs)
            scores[str(seed)] = c12.way_nll(load_teacher(run), valid)
            print(f"{way} seed {seed}: valid {scores[str(seed)]:.4f}", flush=True)
        s = c12.nll_summary(scores)
        chosen_runs[way] = runs / f"{way}-s{s['chosen_seed']}"
        models[way] = load_teacher(chosen_runs[way])
        s["test"] = c12.way_nll(models[way], test)                    # the chosen seed, scored once
        res["nll"][way] = s
        print(c12.nll_table(res), flush=True)

    if "harmoniser" in models:
        res["where"] = c12.gain_where(models["decoder"], models["harmoniser"], valid)
        print(c12.where_reading(res), flush=True)
    bach = [p.pitches for p in test]
    res["music"]["bach"] = c12.music_row(bach)
    for way, model in models.items():
        t1 = time.time()
        grids = c12.harmonise_pieces(model, test, a.temperature, seed=0)
        res["melody_kept"][way] = bool(all((g[:, 0] == b[:, 0]).all() for g, b in zip(grids, bach)))
        res["music"][way] = c12.music_row(grids)
        print(f"{way}: harmonised {len(grids)} test melodies in {time.time() - t1:.0f} s", flush=True)
    print(c12.music_table(res), flush=True)

    names = {"relative": "decoder", "harmoniser": "harmoniser", "coconet": "coconet"}
    rows = bench_harmonise(names=("relative", "harmoniser", "coconet"), bars=16, profile="paper")
    res["speed"] = {"device": provenance("cpu")["device"], "threads": torch.get_num_threads(),
                    "rows": [{**r, "way": names[r["model"]]} for r in rows]}
    print(c12.speed_reading(res), flush=True)

    if a.export:
        note = (f"trained by: python -m musictx_lite {res['runs']['harmoniser']} --seed "
                f"{res['nll']['harmoniser']['chosen_seed']} (one of {a.seeds} seeds, chosen on valid by "
                f"python -m scripts.harmonise_study), then exported by it")
        subprocess.run([sys.executable, "-m", "musictx_lite", "export", str(chosen_runs["harmoniser"]), "--to",
                        a.export, "--data", a.data, "--note", note], check=True)
        rec = json.loads((Path(a.export) / "harmoniser.json").read_text())
        res["shipped"] = {k: rec[k] for k in ("name", "params", "bytes", "valid_nll", "test_nll", "seed", "steps")}
    res.update(provenance("cpu", commit))
    res["command"] = " ".join(["python -m scripts.harmonise_study"] + sys.argv[1:])
    res["seconds"] = round(time.time() - t0, 1)
    atomic_write(Path(a.out), lambda tmp: Path(tmp).write_text(json.dumps(res, indent=1) + "\n"))
    print(c12.nll_reading(res))
    print(c12.music_reading(res))
    print(f"wrote {a.out} in {res['seconds']:.0f} s")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
