"""The piano grammar's limits, from real performances: chapter 13's sampler keeps to them (``engine.grammar``).

    python -m scripts.piano_grammar [--out musictx_lite/pretrained/piano-grammar.json]

Reads the shared piano sample's MAESTRO performances (real players on a Disklavier), keeps the training pieces
(the split by piece that chapter 13 uses; validation and test pieces stay for judging continuations), folds the
pedal into the notes as the codec does (each performance's notes decoded from its events), and records the longest
note, its 99.9th percentile, the most keys down at once (and its 99.5th and 99.9th percentiles), the notes per
second, and the range of the loudness drift between a performance's opening (its first 5 s of music) and the 30 s
after it (the mean velocity of the notes starting in the last 10 s against the opening's), with provenance. Only
numbers are written: the sample itself is never copied.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "musictx_lite" / "pretrained" / "piano-grammar.json"


def main(argv=None) -> int:
    import numpy as np

    from musictx_lite.engine.grammar import limits_of
    from musictx_lite.io.corpus import load_piano_sample
    from musictx_lite.io.performance import decode, opening
    from musictx_lite.study.continuations import measure
    from musictx_lite.study.hub import git_commit, provenance

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    start, commit = time.time(), git_commit()
    try:
        data = load_piano_sample(("maestro",))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    notes = [decode(p.tokens) for p in data.train]
    limits = limits_of(notes)
    drifts = []
    for n in notes:                                          # the windows of scripts/piano_study.py
        shifted = n.copy()
        shifted[:, :2] -= n[:, 0].min()
        drifts.append(measure(shifted, opening(n, 5.0), 5.0, 30.0)["velocity_drift"])
    limits.update(drift_min=float(np.nanmin(drifts)), drift_max=float(np.nanmax(drifts)))
    rec = {**provenance("cpu", commit), "command": " ".join(["python -m scripts.piano_grammar", *sys.argv[1:]]),
           "seconds": round(time.time() - start), "source": data.source + ", training pieces, pedal folded",
           "limits": limits}
    a.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(limits, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
