"""Piano continuations judged against the real performances, with the grammar and without (chapter 13).

Notebook: notebooks/13_piano.ipynb

``scripts/piano_study.py`` continues the opening of every held-out piece of the piano sample, with and without the
performance grammar (``engine.grammar``), at two temperatures and three seeds, and measures each continuation and
the real performance over the same window; its record ships as ``pretrained/piano-continuations.json``. This module
reads it: one continuation as a line, the record as a table, and what a pianist would hear, in sentences computed
from the numbers.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

RECORD = Path(__file__).parents[1] / "pretrained" / "piano-continuations.json"
COLUMNS = {"longest_s": ("longest note", "{:.1f} s"), "over_p999": ("notes > real 99.9 %", "{:.1f}"),
           "most_keys_down": ("most notes sounding", "{:.0f}"), "left_down": ("left sounding", "{:.1f}"),
           "notes_per_s": ("notes/s", "{:.1f}"), "velocity_drift": ("velocity drift", "{:+.1f}")}


def load(path: str | Path = RECORD) -> dict:
    return json.loads(Path(path).read_text())


def measure(notes: np.ndarray, prompt: np.ndarray, start: float, seconds: float, p999: float | None = None,
            left_down: int | None = None) -> dict:
    """One continuation as a pianist hears it: the notes that start in the ``seconds`` after ``start`` (the
    prompt's end); the notes longer than ``p999`` (the real performances' 99.9th percentile), the keys left down
    at the end, and the velocity drift: the mean velocity of the notes that start in the last 10 s minus that of
    the ``prompt``'s notes."""
    from ..engine.grammar import keys_down

    cont = notes[(notes[:, 0] >= start) & (notes[:, 0] < start + seconds)]
    lengths = cont[:, 1] - cont[:, 0]
    last = cont[cont[:, 0] >= start + seconds - 10]
    drift = float(last[:, 3].mean() - prompt[:, 3].mean()) if len(last) and len(prompt) else float("nan")
    return {"notes": len(cont), "longest_s": float(lengths.max(initial=0.0)),
            "over_p999": None if p999 is None else int((lengths > p999).sum()),
            "most_keys_down": int(keys_down(cont).max(initial=0)), "notes_per_s": len(cont) / seconds,
            "velocity_drift": drift, "left_down": left_down}


def line(name: str, m: dict, info: dict | None = None) -> str:
    """One continuation in a line: what its numbers are."""
    out = (f"{name}: {m['notes']} notes, longest {m['longest_s']:.1f} s, at most {m['most_keys_down']} sounding, "
           f"{m['notes_per_s']:.1f} notes/s, velocity {m['velocity_drift']:+.1f} in the last 10 s against the prompt")
    if info is not None:
        out += (f"; {info['left_down']} left sounding at the end, {info['released_at_end']} released there by "
                f"the grammar, {info['dead_ends']} dead ends")
    return out


def table(rec: dict) -> str:
    """Each setting's mean [min, max] over its continuations, and the real performances' over the same window."""
    rows = rec["summary"]
    head = f"{'':>16s}" + "".join(f"{label:>24s}" for label, _ in COLUMNS.values())
    lines = [head]
    for name, row in rows.items():
        cells = []
        for k, (_, fmt) in COLUMNS.items():
            if k not in row:
                cells.append(f"{'-':>24s}")
                continue
            s = row[k]
            cells.append(f"{fmt.format(s['mean'])} [{fmt.format(s['min'])}, {fmt.format(s['max'])}]".rjust(24))
        lines.append(f"{name:>16s}" + "".join(cells))
    return "\n".join(lines)


def reading(rec: dict) -> str:
    """What a pianist would hear, read from the record: the grammar against the raw sampler and the real playing."""
    s, real = rec["summary"], rec["summary"]["real"]
    kept, raw = s.get("grammar, T=1"), s.get("raw, T=1")
    if kept is None or raw is None:
        return "The record has no continuations at temperature 1 to compare."
    n = kept["continuations"]
    said = [f"Over {rec['pieces']} held-out pieces and {len(rec['seeds'])} seeds ({n} continuations of "
            f"{rec['continuation_s']:g} s each, at temperature 1): the raw sampler's longest note lasts up to "
            f"{raw['longest_s']['max']:.1f} s and up to {raw['most_keys_down']['max']:.0f} notes sound at once, "
            f"with {raw['left_down']['mean']:.1f} notes on average still sounding when it stops; the real "
            f"performances' longest note over the same window is {real['longest_s']['max']:.1f} s and the most "
            f"notes they sound at once {real['most_keys_down']['max']:.0f} (notes, not fingers: the pedal holds "
            "many of them)."]
    within = kept["longest_s"]["max"] <= real["longest_s"]["max"] + 1e-9 and \
        kept["most_keys_down"]["max"] <= real["most_keys_down"]["max"] and kept["left_down"]["max"] == 0
    said.append(f"With the grammar, the longest note is {kept['longest_s']['max']:.1f} s, at most "
                f"{kept['most_keys_down']['max']:.0f} notes sound at once, and none is left sounding (the "
                "grammar releases what is still down when it stops, a cut-off too): "
                + ("all inside what the real performances do at their most." if within else
                   "not all inside what the real performances do."))
    hold = rec.get("limits", {}).get("note_s_p999")
    if hold is not None and kept["longest_s"]["min"] >= hold - 0.011:
        said.append(f"But every one of these continuations reaches the hold limit ({hold:.1f} s) at least once, "
                    f"where the real performances' longest note is {real['longest_s']['mean']:.1f} s on average: "
                    "those notes end because the rule ends them, and a pianist hears them cut off. A key struck "
                    "again starts a new note and a new count, so a key the model keeps re-striking is heard "
                    "again and again, each note within the limit.")
    lo, hi = real["velocity_drift"]["min"], real["velocity_drift"]["max"]
    drift, rdrift = kept["velocity_drift"], raw["velocity_drift"]
    inside = lo <= drift["min"] and drift["max"] <= hi
    said.append(f"The loudness drifts by {drift['min']:+.1f} to {drift['max']:+.1f} velocity steps between the "
                f"prompt and the last 10 s with the grammar, against {lo:+.1f} to {hi:+.1f} in the real "
                f"performances: " + ("inside their range, " if inside else "partly outside their range, ")
                + f"but {drift['max'] - drift['min']:.0f} steps wide against their {hi - lo:.0f}: the band keeps "
                "the model from the real players' big crescendos and diminuendos too. Without the grammar the "
                f"model gets louder on average ({rdrift['mean']:+.1f}; {rdrift['min']:+.1f} to "
                f"{rdrift['max']:+.1f}).")
    dense, rdense = (x["notes_per_s"]["mean"] / real["notes_per_s"]["mean"] for x in (kept, raw))
    said.append(f"The model plays {kept['notes_per_s']['mean']:.1f} notes per second with the grammar and "
                f"{raw['notes_per_s']['mean']:.1f} without, against {real['notes_per_s']['mean']:.1f} in the real "
                f"performances ({dense:.1f} and {rdense:.1f} times as dense), and it does not slow down for a slow "
                "piece: the "
                f"slowest real piece plays {real['notes_per_s']['min']:.1f} notes a second, the sparsest grammar "
                f"continuation {kept['notes_per_s']['min']:.1f}.")
    mine, theirs = kept["logp_per_event"]["mean"], raw["logp_per_event"]["mean"]
    said.append(f"Scored by the model itself, unmasked and at temperature 1, the events drawn with the grammar "
                f"have a log-probability of {mine:.3f} nats per event and those drawn without it {theirs:.3f}. "
                "They are different events, so this is no price of the rules; "
                + ("the model finds the grammar's events no less likely than the raw sampler's own." if mine >= theirs
                   else f"the grammar's are {theirs - mine:.3f} nats per event less likely to the model."))
    return " ".join(said)
