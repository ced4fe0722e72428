"""Chapter 12's rules study, one command: harmonise every soprano of the official test split with the shipped
models (the decoder, and the encoder-decoder that sees the melody's end) in several settings (plain sampling and the
rules as masks, each at two temperatures; the best of N candidates) over
seeds, judge each harmonisation as a harmony teacher does (``io.harmony``) against Bach's own harmonisation of the
same melody, and write one record.

    python -m scripts.rules_study --data PATH/Jsb16thSeparated.json [--workers 2] [--pieces N]
        [--out musictx_lite/pretrained/harmonise-rules.json]

Each harmonisation is one line of ``results/<out's name>.jsonl`` as it finishes (a second run takes what is there
and does the rest). The record holds, per setting, the statistics with bootstrap intervals over melodies on all the
test melodies and on those whose tune is not a training melody's (``io.harmony.known_tunes``: the first 12
intervals), Bach's row on the same melodies, the seconds per melody, the dead ends per 1,000 masked tokens, and the
model's own log-probability of its choices per added token (what the masks cost); and its provenance (command,
commit, device, versions, date, seconds).
One CPU thread per worker.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from scripts import into_ledger

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "musictx_lite" / "pretrained" / "harmonise-rules.json"
# name -> (model, temperature, rules: none / harmony (the four of HARMONY) / all (harmony_rules), candidates, seeds)
SETTINGS = {
    "plain T=1": ("relative", 1.0, "none", 1, (0, 1, 2)),
    "plain T=0.7": ("relative", 0.7, "none", 1, (0,)),
    "four rules": ("relative", 1.0, "harmony", 1, (0,)),
    "all rules": ("relative", 1.0, "all", 1, (0, 1, 2)),
    "all rules T=0.7": ("relative", 0.7, "all", 1, (0, 1, 2)),
    "all rules, best of 4": ("relative", 1.0, "all", 4, (0, 1, 2)),
    "all rules, best of 8": ("relative", 1.0, "all", 8, (0,)),
    "enc-dec plain T=1": ("harmoniser", 1.0, "none", 1, (0, 1, 2)),
    "enc-dec, all rules": ("harmoniser", 1.0, "all", 1, (0, 1, 2)),
    "enc-dec, all rules, best of 4": ("harmoniser", 1.0, "all", 4, (0,)),
}
_MODELS: dict = {}


def job(task: tuple) -> dict:
    """One harmonisation: (setting, seed, index, melody) -> its counts and what sampling it cost."""
    import torch

    from musictx_lite.engine.harmonise import harmonise
    from musictx_lite.engine.rules import HARMONY, harmony_rules
    from musictx_lite.io import harmony as H
    from musictx_lite.study.hub import pretrained

    torch.set_num_threads(1)
    name, seed, index, melody, reference = task
    model_name, temperature, rules, n, _ = SETTINGS[name]
    if model_name not in _MODELS:
        _MODELS[model_name] = pretrained(model_name, device="cpu")
    melody = np.asarray(melody)
    key = H.key_of(melody)
    chosen = {"none": None, "harmony": HARMONY, "all": harmony_rules(melody, key)}[rules]
    info = {}
    t0 = time.perf_counter()
    grid = harmonise(_MODELS[model_name], melody, temperature, seed, rules=chosen, candidates=n, info=info)
    seconds = time.perf_counter() - t0
    counts = H.piece_counts(grid, key, tuple(reference))
    return {"setting": name, "seed": seed, "index": index, "counts": counts.tolist(), "seconds": seconds,
            "logp": info["logp"][info["chosen"]], "added": 3 * len(melody), "masked": info["masked"],
            "dead_ends": info["dead_ends"], "dropped": info["dropped"]}


def folk(candidates: int, seeds=(0, 1, 2)) -> list[dict]:
    """Chapter 12's eight tunes from outside the corpus (``study.chapter12.folk_tunes``), each harmonised by the
    shipped decoder with every rule and the best of ``candidates``, in its own metre and upbeat: where each
    harmonisation ends (the final chord's root against the tune's key, complete or not) and its counts."""
    import torch

    from musictx_lite.engine.harmonise import harmonise
    from musictx_lite.io import harmony as H
    from musictx_lite.io.midi import beat_steps
    from musictx_lite.study.chapter12 import folk_tunes
    from musictx_lite.study.hub import pretrained

    torch.set_num_threads(1)
    model, out = pretrained("relative", device="cpu"), []
    for number, title, m in folk_tunes():
        key = H.key_of(m.pitches)
        for seed in seeds:
            info = {}
            grid = harmonise(model, m.pitches, seed=seed, rules="all", candidates=candidates, info=info,
                             metre=m.metre, pickup=m.pickup)
            root, quality, complete = H.final_chord(grid)
            degree = (root - key[0]) % 12 if root is not None else None
            ends = {0: "on the tonic", 7: "a half cadence, on the dominant"}.get(degree, f"on degree +{degree}")
            out.append({"number": number, "title": title, "metre": m.metre, "pickup": m.pickup, "seed": seed,
                        "key": list(key), "final": [root, quality, complete], "ends": ends,
                        "dead_ends": info["dead_ends"],
                        "counts": H.piece_counts(grid, key, (key[0], None), -m.pickup,
                                                 beat_steps(m.metre or "4/4")).tolist()})
    return out


def summarise(lines: list[dict], bach: np.ndarray, unknown: np.ndarray) -> dict:
    from musictx_lite.io import harmony as H

    out = {"Bach": {"all": H.harmony_stats(bach), "unknown tunes": H.harmony_stats(bach[unknown])}}
    for name, (*_, seeds) in SETTINGS.items():
        rows = [r for r in lines if r["setting"] == name]
        if not rows:
            continue
        counts = np.zeros((len(bach), len(H.COUNTS)))
        for r in rows:                                              # pooled over seeds, per melody
            counts[r["index"]] += r["counts"]
        masked = sum(r["masked"] for r in rows)
        out[name] = {"all": H.harmony_stats(counts), "unknown tunes": H.harmony_stats(counts[unknown]),
                     "harmonisations": len(rows), "seeds": sorted({r["seed"] for r in rows}),
                     "seconds_per_melody": float(np.mean([r["seconds"] for r in rows])),
                     "seconds_per_step": float(sum(r["seconds"] for r in rows) / sum(r["added"] / 3 for r in rows)),
                     "dead_ends_per_1000": 1000 * sum(r["dead_ends"] for r in rows) / max(masked, 1),
                     "dropped": {k: sum(r["dropped"].get(k, 0) for r in rows)
                                 for k in sorted({k for r in rows for k in r["dropped"]})},
                     "logp_per_added_token": sum(r["logp"] for r in rows) / sum(r["added"] for r in rows)}
    return out


def main(argv=None) -> int:
    from musictx_lite import load_jsb
    from musictx_lite.files import atomic_write
    from musictx_lite.io import harmony as H
    from musictx_lite.study.hub import git_commit, provenance

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="the official split, Jsb16thSeparated.json")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pieces", type=int, default=None, help="the first N test melodies only (a quick check)")
    ap.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--note", default=None, help="a line of provenance stored in the record")
    ap.add_argument("--folk", type=int, default=None, metavar="N",
                    help="also harmonise chapter 12's eight folk tunes with every rule and the best of N")
    a = ap.parse_args(argv)
    commit, start = git_commit(), time.time()
    data = load_jsb(a.data)
    pieces = data.test[: a.pieces]
    melodies = [p.pitches[:, 0] for p in pieces]
    unknown = ~np.array(H.known_tunes([p.pitches[:, 0] for p in data.train], melodies))
    refs = [H.final_chord(p.pitches)[:2] for p in pieces]
    bach = np.stack([H.piece_counts(p.pitches, H.key_of(m), r) for p, m, r in zip(pieces, melodies, refs)])
    log = ROOT / "results" / f"{a.out.stem}.jsonl"                   # the raw lines beside the other ledgers
    lines = [json.loads(ln) for ln in log.read_text().splitlines()] if log.is_file() else []
    done = {(r["setting"], r["seed"], r["index"]) for r in lines}
    tasks = [(name, seed, i, melodies[i].tolist(), refs[i]) for name in a.settings for seed in SETTINGS[name][-1]
             for i in range(len(pieces)) if (name, seed, i) not in done]
    print(f"{len(pieces)} test melodies ({int(unknown.sum())} with tunes not in training), {len(tasks)} "
          f"harmonisations to do, {len(done)} done", flush=True)
    lines += into_ledger(job, tasks, log, a.workers, every=50, chunksize=4)
    rec = {**provenance("cpu", commit), "command": " ".join(["python -m scripts.rules_study", *sys.argv[1:]]),
           "seconds": round(time.time() - start), "pieces": len(pieces),
           "unknown_tunes": int(unknown.sum()), "known_rule": "the first 12 intervals open a training melody",
           "settings": {k: dict(zip(("model", "temperature", "rules", "candidates", "seeds"), v))
                        for k, v in SETTINGS.items()},
           "rows": summarise(lines, bach, unknown),
           "bach_final": {"melodies": len(pieces), "root_is_last_note": int(sum(
               H.final_chord(p.pitches)[0] == m[m >= 0][-1] % 12 for p, m in zip(pieces, melodies)))}}
    if a.note:
        rec["note"] = a.note
    if a.folk is not None:
        rec["folk"] = folk(a.folk)
    atomic_write(a.out, lambda tmp: Path(tmp).write_text(json.dumps(rec, indent=1) + "\n"))
    print(H.format_rows({k: v["unknown tunes"] for k, v in rec["rows"].items()}))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
