"""Chapter 13's continuations measured against the real performances, with and without the performance grammar.

    python -m scripts.piano_study [--seconds 30] [--prompt 5] [--workers 2]
        [--out musictx_lite/pretrained/piano-continuations.json]

For every validation and test piece of the shared piano sample (its MAESTRO performances: real players, pedal
folded into the notes as the codec does), the shipped ``piano-local`` model continues the performance's opening
(``io.performance.opening``: the first ``--prompt`` seconds of music from the first note) for ``--seconds`` seconds,
with the grammar (``engine.grammar``, the shipped limits) and without, at two temperatures, over three seeds. Each
continuation is measured as a pianist would hear it: its longest note, the notes longer than the real performances'
99.9th percentile, the most notes sounding at once, those left sounding at the end, the notes per second, the velocity
drift (the mean velocity of the notes that start in its last 10 s minus that of the prompt's notes), and the model's
own log-probability of the events it drew (what the grammar costs). The real performances are measured the same way
over the same window after the same opening. Each continuation is a line of ``results/piano-continuations.jsonl``
as it finishes, with the grammar's rules (a second run does the rest, and a line made with other rules again);
the record holds the summary and its provenance. Numbers only: the
sample is never copied.
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
OUT = ROOT / "musictx_lite" / "pretrained" / "piano-continuations.json"
SETTINGS = {"grammar, T=1": (True, 1.0), "grammar, T=0.9": (True, 0.9),
            "raw, T=1": (False, 1.0), "raw, T=0.9": (False, 0.9)}
SEEDS = (0, 1, 2)
_MODEL: dict = {}


def job(task: tuple) -> dict:
    import torch

    from musictx_lite.engine.grammar import performance_rules
    from musictx_lite.engine.sample import generate_events
    from musictx_lite.io.performance import decode, encode
    from musictx_lite.study.continuations import measure
    from musictx_lite.study.hub import pretrained

    torch.set_num_threads(1)
    name, setting, seed, prompt, seconds, p999 = task
    if "model" not in _MODEL:
        _MODEL["model"] = pretrained("piano-local", device="cpu")
    use, temperature = SETTINGS[setting]
    prompt = np.asarray(prompt)
    tokens = encode(prompt)
    info = {}
    t0 = time.perf_counter()
    out = generate_events(_MODEL["model"], tokens, 4000, temperature, None, seed,
                          rules=performance_rules(prompt_velocity=float(prompt[:, 3].mean())) if use else None,
                          info=info, seconds=seconds)
    took = time.perf_counter() - t0
    start = float(prompt[:, 1].max()) if len(prompt) else 0.0
    row = measure(decode(out), prompt, start, seconds, p999, info["left_down"])
    return {"piece": name, "setting": setting, "seed": seed, "rules": rule_names(use), **row, "events": info["drawn"],
            "seconds": took,
            "logp_per_event": info["logp"] / max(info["drawn"], 1), "dead_ends": info["dead_ends"],
            "released_at_end": info["released_at_end"]}


def rule_names(use: bool) -> list[str]:
    """The grammar's rules as the package ships them (none for the raw sampler): a ledger line made with other
    rules is done again."""
    from musictx_lite.engine.grammar import performance_rules

    return [r.name for r in performance_rules(prompt_velocity=64.0)] if use else []


def summarise(lines: list[dict], real: list[dict]) -> dict:
    keys = ("longest_s", "over_p999", "most_keys_down", "left_down", "notes_per_s", "velocity_drift",
            "logp_per_event", "events", "seconds", "dead_ends")
    out = {"real": {k: {"min": float(np.nanmin([r[k] for r in real])), "max": float(np.nanmax([r[k] for r in real])),
                        "mean": float(np.nanmean([r[k] for r in real]))}
                    for k in ("longest_s", "over_p999", "most_keys_down", "notes_per_s", "velocity_drift")}}
    for name in SETTINGS:
        rows = [r for r in lines if r["setting"] == name]
        if rows:
            out[name] = {k: {"min": float(np.nanmin([r[k] for r in rows])),
                             "max": float(np.nanmax([r[k] for r in rows])),
                             "mean": float(np.nanmean([r[k] for r in rows]))} for k in keys}
            out[name]["continuations"] = len(rows)
    return out


def main(argv=None) -> int:
    from musictx_lite.engine.grammar import shipped_limits
    from musictx_lite.io.corpus import load_piano_sample
    from musictx_lite.io.performance import decode, opening
    from musictx_lite.study.continuations import measure
    from musictx_lite.study.hub import git_commit, provenance

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--prompt", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    commit, start = git_commit(), time.time()
    try:
        data = load_piano_sample(("maestro",))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    pieces = [(p.name, decode(p.tokens)) for p in data.valid + data.test]
    all_lengths = np.concatenate([n[:, 1] - n[:, 0] for _, n in pieces])
    p999 = float(np.quantile(all_lengths, 0.999))
    real = []
    for name, notes in pieces:
        first = notes[:, 0].min()
        shifted = notes.copy()
        shifted[:, :2] -= first
        prompt = opening(notes, a.prompt)
        real.append({"piece": name, **measure(shifted, prompt, a.prompt, a.seconds, p999)})
    log = ROOT / "results" / f"{a.out.stem}.jsonl"
    lines = [json.loads(ln) for ln in log.read_text().splitlines()] if log.is_file() else []
    rules = {s: rule_names(use) for s, (use, _) in SETTINGS.items()}
    lines = [r for r in lines if r.get("rules", []) == rules[r["setting"]]]     # made with today's grammar
    done = {(r["piece"], r["setting"], r["seed"]) for r in lines}
    tasks = [(name, s, seed, opening(notes, a.prompt).tolist(), a.seconds, p999)
             for name, notes in pieces for s in SETTINGS for seed in SEEDS if (name, s, seed) not in done]
    print(f"{len(pieces)} held-out pieces; {len(tasks)} continuations to do, {len(done)} done", flush=True)
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))   # the lines of an older grammar go
    lines += into_ledger(job, tasks, log, a.workers, every=10)
    rec = {**provenance("cpu", commit), "command": " ".join(["python -m scripts.piano_study", *sys.argv[1:]]),
           "seconds": round(time.time() - start), "source": data.source + ", validation and test pieces",
           "pieces": len(pieces), "prompt_s": a.prompt, "continuation_s": a.seconds, "seeds": list(SEEDS),
           "real_note_s_p999": p999, "limits": shipped_limits(), "summary": summarise(lines, real),
           "real": real}
    a.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec["summary"], indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
