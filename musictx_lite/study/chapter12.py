"""Chapter 12's study: three ways to harmonise a soprano, measured on the official split, and the prose that
reads them.

Notebook: notebooks/12_harmonise.ipynb

``python -m scripts.harmonise_study`` trains the two trained ways over three seeds (or resumes their runs),
scores every run on the validation split, chooses each way's seed there, scores the chosen ones on the test
split once, harmonises every test soprano with each way and measures the music against Bach's own
harmonisations of the same melodies. It writes ``pretrained/harmonise.json`` (``RESULTS``), which the chapter
reads. The functions here do the measuring; the ``*_reading`` functions write the chapter's sentences from a
results file, so that what the text says follows from the numbers it prints.

The three ways, and what each NLL is:

- ``decoder``: chapter 8's shipped causal decoder, every soprano token forced. Its NLL of the alto, tenor
  and bass tokens given everything before them (``tasks.voice_nlls``), computed exactly: the product of the
  conditionals the sampler draws from (it never draws PAD, BOS, HOLD or MASK, and slides its window at other
  steps than the scorer on a piece longer than the context).
- ``harmoniser``: the encoder-decoder (``models.harmoniser``), the same tokens given the melody of the window
  as well. Computed exactly too, with the same two provisos.
- ``coconet``: Coconet's fill model. Its Gibbs sampler has no likelihood that can be computed; what can be
  computed is the NLL of the alto, tenor and bass when all of them are hidden and each is predicted from the
  melody alone (``coconet.melody_only_nll``): the exact NLL of a model whose lower notes are independent given
  the soprano, which is not the distribution the sampler draws from, so it is not ranked against the others.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch.nn as nn

from ..engine.harmonise import harmonise
from ..io.data import Piece
from ..io.stats import STATS, bootstrap_interval, chorale_stats, complete_chords, stats_intervals
from ..models.tasks import NEXT_TOKEN, token_nlls, voice_nlls
from .compare import seed_interval

RESULTS = Path(__file__).parents[1] / "pretrained" / "harmonise.json"
WAYS = ("decoder", "harmoniser", "coconet")
LABELS = {"decoder": "decoder (soprano forced)", "harmoniser": "encoder-decoder", "coconet": "Coconet (Gibbs)",
          "bach": "Bach"}
NLL_LABELS = {**LABELS, "coconet": "Coconet (melody-only NLL)"}
NLL_KIND = {"decoder": "the sampler's conditionals", "harmoniser": "the sampler's conditionals",
            "coconet": "each lower note from the soprano alone: not the sampler's distribution"}
# Issue 39's targets: the encoder-decoder at least 10 % below the decoder on valid; the shipped harmoniser's
# rare events within 3x Bach's rate; 16 bars in at most a second on the project's 2-core CPU.
NLL_GAIN, RATE_FACTOR, SECONDS = 0.10, 3.0, 1.0
RARE = ("parallel_fifths", "parallel_octaves", "out_of_range", "crossings")
MUSIC = (*STATS, "complete_chords")


def way_nll(model: nn.Module, pieces: list[Piece]) -> float:
    """NLL per alto, tenor and bass token of whole ``pieces`` given their soprano, as the way ``model`` can
    be scored (see the module docstring): a decoder's ``voice_nlls``, else its task's evaluator."""
    if model.task is NEXT_TOKEN:
        return voice_nlls(model, pieces)["ATB"]
    return model.task.evaluate(model, pieces)


def harmonise_pieces(model: nn.Module, pieces: list[Piece], temperature: float = 1.0, seed: int = 0,
                     n_iter: int = 64) -> list[np.ndarray]:
    """The (steps, 4) harmonisation of each piece's soprano, piece i sampled with seed ``seed + i``."""
    return [harmonise(model, p.pitches[:, 0], temperature, seed + i, n_iter=n_iter) for i, p in enumerate(pieces)]


def music_row(grids: list[np.ndarray], n: int = 1000, seed: int = 0) -> dict:
    """``chorale_stats`` of ``grids`` and the share of beats sounding a complete chord (``complete_chords``),
    each with its bootstrap interval over pieces: ``{"value": {...}, "interval": {...}}``."""
    value = {**chorale_stats(grids), "complete_chords": complete_chords(grids)}
    interval = {**stats_intervals(grids, n=n, seed=seed),
                "complete_chords": bootstrap_interval(grids, complete_chords, n=n, seed=seed)}
    return {"value": value, "interval": {k: list(v) for k, v in interval.items()}}


def gain_where(decoder: nn.Module, harmoniser: nn.Module, pieces: list[Piece]) -> dict[str, dict]:
    """Where each model pays: the alto, tenor and bass tokens split by whether that voice starts a note at
    its step (Bach's pitch differs from the step before: a decision, where the melody's future could help)
    or holds one, each group's share of the tokens and both models' NLL on it."""
    a, b = np.concatenate(token_nlls(decoder, pieces)), np.concatenate(token_nlls(harmoniser, pieces))
    kinds = []
    for p in pieces:
        g = p.pitches
        starts = np.vstack([np.ones((1, 4), bool), g[1:] != g[:-1]])    # (T, 4): a note (or rest) begins
        target = np.arange(4 * len(g))                                   # target j: voice j % 4 of step j // 4
        kinds.append(np.where(target % 4 == 0, -1, starts[target // 4, target % 4]))
    k = np.concatenate(kinds)
    out = {}
    for name, sel in (("starts", k == 1), ("holds", k == 0)):
        out[name] = {"share": float(sel.sum() / (k >= 0).sum()), "decoder": float(a[sel].mean()),
                     "harmoniser": float(b[sel].mean())}
    return out


def nll_summary(valid: dict[str, float], test: dict[str, float] | None = None) -> dict:
    """One way's NLLs: each seed's on valid (``{seed: nll}``), their mean and Student-t interval, the seed
    validation chooses, and the test NLL of the chosen seed (``test``: ``{seed: nll}``, that seed only)."""
    seeds = sorted(valid, key=int)
    mean, lo, hi = seed_interval([valid[s] for s in seeds])
    chosen = min(seeds, key=lambda s: valid[s])
    out = {"valid": {str(s): valid[s] for s in seeds}, "valid_mean": mean, "valid_interval": [lo, hi],
           "chosen_seed": int(chosen)}
    if test is not None:
        out["test"] = test[chosen]
    return out


# ------------------------------------------------------------------ the chapter's sentences

def load(path: str | Path = RESULTS) -> dict:
    """The committed results file (``RESULTS``)."""
    return json.loads(Path(path).read_text())


def _fmt_interval(s: dict) -> str:
    lo, hi = s["valid_interval"]
    n = len(s["valid"])
    return f"{s['valid_mean']:.4f}" + (f" (95% interval {lo:.4f} to {hi:.4f}, {n} seeds)" if n > 1 else "")


def nll_table(res: dict) -> str:
    """The NLL table: each way's valid NLL (mean and interval over seeds for the trained ways), the chosen
    seed's valid and test NLL, and what kind of number it is."""
    lines = [f"{'way':34s} {'valid (mean over seeds)':>44s} {'chosen: valid':>14s} {'test':>8s}  kind"]
    for way in WAYS:
        s = res["nll"].get(way)
        if s is None:
            continue
        chosen = s["valid"][str(s["chosen_seed"])]
        lines.append(f"{NLL_LABELS[way]:34s} {_fmt_interval(s):>44s} {chosen:14.4f} {s['test']:8.4f}  "
                     f"{NLL_KIND[way].split(':')[0]}")
    return "\n".join(lines)


def nll_reading(res: dict) -> str:
    """What the NLL table says, in the chapter's words: the encoder-decoder against the decoder (and the
    target of a 10 % gain), on validation and, once, on test; and what Coconet's number can and cannot say."""
    dec, enc = res["nll"]["decoder"], res["nll"]["harmoniser"]
    gain = 1 - enc["valid_mean"] / dec["valid_mean"]
    lo, hi = enc["valid_interval"]
    below = hi < dec["valid_mean"]
    target = dec["valid_mean"] * (1 - NLL_GAIN)
    n = len(enc["valid"])
    seeds = f"the mean of {n} seeds" if n > 1 else "one seed"
    if gain <= 0:
        verdict = "The encoder-decoder did not improve on the decoder in this run. "
    elif n < 2:
        verdict = "One seed gives no interval, so this run cannot say that the encoder-decoder is better. "
    elif below:
        verdict = ("The 95% interval over seeds lies wholly below the decoder's number: the encoder-decoder "
                   "is better. ")
    else:
        verdict = ("The 95% interval over seeds reaches the decoder's number, so this run cannot say that the "
                   "encoder-decoder is better. ")
    parts = [
        f"The encoder-decoder scores {enc['valid_mean']:.4f} nats per alto, tenor and bass token on the "
        f"validation split, {seeds}, against the causal decoder's {dec['valid_mean']:.4f} on the same tokens: "
        f"{abs(gain):.1%} " + ("lower" if gain > 0 else "higher") + ". " + verdict,
        f"The target was 10 % lower, {target:.3f} or less: "
        + ("reached. " if enc["valid_mean"] <= target else
           f"not reached (the gain is {gain:.1%}). "),
        f"On the test split, scored once for the seed that validation chose, the decoder scores "
        f"{dec['test']:.4f} and the encoder-decoder {enc['test']:.4f}.",
    ]
    if "coconet" in res["nll"]:
        c = res["nll"]["coconet"]
        parts.append(
            f" Coconet's {c['valid_mean']:.4f} is another kind of number: every lower note predicted from the "
            f"melody alone, none of the others in view, the exact NLL of a model whose lower notes are "
            f"independent given the soprano. That is not the distribution its Gibbs sampler draws from, so "
            f"the chapter does not rank it against the other two.")
    return "".join(parts)


def where_reading(res: dict) -> str:
    """Where the two models pay, and where the encoder-decoder gained or lost (``gain_where``, on valid)."""
    w = res["where"]
    said = []
    for key, what in (("starts", "a lower voice starts a note"), ("holds", "it holds one")):
        g = w[key]
        said.append(f"where {what} ({g['share']:.0%} of the lower voices' tokens), the decoder pays "
                    f"{g['decoder']:.3f} nats per token and the encoder-decoder {g['harmoniser']:.3f} "
                    f"({abs(1 - g['harmoniser'] / g['decoder']):.1%} "
                    + ("less" if g["harmoniser"] < g["decoder"] else "more") + ")")
    cost = w["starts"]["share"] * w["starts"]["decoder"]
    total = cost + w["holds"]["share"] * w["holds"]["decoder"]
    return ("On the validation split, " + "; ".join(said) + f". The notes' beginnings carry {cost / total:.0%} "
            "of the decoder's NLL: the decisions are there, and so is what the melody's future could change.")


def music_table(res: dict, keys=("parallel_fifths", "parallel_octaves", "out_of_range", "crossings",
                                 "complete_chords", "on_beat", "mean_length")) -> str:
    """The music table: each way's statistics over the harmonisations of every test soprano, and Bach's own,
    each with its 95% bootstrap interval over pieces on the line below."""
    heads = {"parallel_fifths": "par. 5ths", "parallel_octaves": "par. 8ves", "out_of_range": "out of range",
             "crossings": "crossed", "complete_chords": "full chords", "on_beat": "on beat",
             "mean_length": "mean len.", "above_bass_distance": "above bass", "half_beat": "half beat",
             "odd_16th": "odd 16th", "sixteenths": "16th notes"}

    def cell(k, v):
        return f"{v:.3f}" if k == "above_bass_distance" else f"{v:.2f}" if k == "mean_length" else f"{v:.2%}"

    lines = [f"{'':34s}" + "".join(f"{heads[k]:>14s}" for k in keys)]
    for name in (*WAYS, "bach"):
        row = res["music"].get(name)
        if row is None:
            continue
        lines.append(f"{LABELS[name]:34s}" + "".join(f"{cell(k, row['value'][k]):>14s}" for k in keys))
        lines.append(f"{'  95% interval':34s}" + "".join(
            f"{cell(k, row['interval'][k][0]).rstrip('%') + '-' + cell(k, row['interval'][k][1]):>14s}"
            for k in keys))
    return "\n".join(lines)


def rate_ratios(res: dict, way: str = "harmoniser") -> dict[str, float]:
    """Each rare event's rate (``RARE``) in ``way``'s harmonisations over Bach's rate on the same melodies."""
    mine, bach = res["music"][way]["value"], res["music"]["bach"]["value"]
    return {k: mine[k] / bach[k] if bach[k] > 0 else float("inf") if mine[k] > 0 else 1.0 for k in RARE}


def music_reading(res: dict, way: str = "harmoniser") -> str:
    """The music against Bach: the rare events of ``way`` as multiples of Bach's rate (the target: within
    3x), which way comes nearest his share of complete chords, and whether every melody was kept."""
    ratios = rate_ratios(res, way)
    names = {"parallel_fifths": "parallel fifths", "parallel_octaves": "parallel octaves",
             "out_of_range": "notes out of range", "crossings": "crossings"}
    within = [k for k in RARE if ratios[k] <= RATE_FACTOR]
    over = [k for k in RARE if ratios[k] > RATE_FACTOR]
    mine = res["music"][way]["value"]
    said = ", ".join(f"{names[k]} {ratios[k]:.1f}x" if np.isfinite(ratios[k]) else
                     f"{names[k]} {mine[k]:.2%} where Bach has none" for k in RARE)
    bach = res["music"]["bach"]["value"]["complete_chords"]
    chords = {w: res["music"][w]["value"]["complete_chords"] for w in WAYS if w in res["music"]}
    nearest = min(chords, key=lambda w: abs(chords[w] - bach))
    kept = res.get("melody_kept", {})
    return (f"At temperature {res['temperature']:g}, the {LABELS[way]}'s harmonisations of the "
            f"{res['n_test']} test melodies have, as multiples of Bach's rate on the same melodies: {said}. "
            + (f"All four stay within {RATE_FACTOR:g}x Bach's rate. " if not over else
               f"{len(within)} of four stay within {RATE_FACTOR:g}x Bach's rate; "
               + ", ".join(names[k] for k in over) + " do not. ")
            + f"Bach sounds a complete triad or seventh chord on {bach:.1%} of his beats; "
            + ", ".join(f"the {LABELS[w]} {v:.1%}" for w, v in chords.items())
            + f", the nearest to him being the {LABELS[nearest]}. "
            + ("Every harmonisation keeps its melody exactly." if kept and all(kept.values()) else
               "Some harmonisation changed its melody: " + ", ".join(w for w, k in kept.items() if not k) + "."))


def speed_reading(res: dict) -> str:
    """The seconds to harmonise 16 bars on the measuring CPU, against the target of a second."""
    rows = res["speed"]["rows"]
    said = ", ".join(f"{LABELS.get(r['way'], r['way'])} {r['seconds']:.2f} s" for r in rows)
    fast = [r for r in rows if r["seconds"] <= SECONDS]
    return (f"Harmonising {rows[0]['bars']} bars on {res['speed']['device']} took: {said}. "
            + (f"The target, {SECONDS:g} s, is met by " + ", ".join(LABELS.get(r['way'], r['way']) for r in fast)
               + "." if fast else f"None meets the target of {SECONDS:g} s."))


# A melody from outside the corpus: a German folk song of the Essen collection, in music21's corpus.
FOLK = ("essenFolksong/altdeu10", 31)


def folk_melody(opus: str = FOLK[0], number: int = FOLK[1]):
    """(title, ``Melody``) of tune ``number`` of a music21 corpus collection, read as a musician's file is:
    written as MusicXML, then ``read_melody``."""
    import tempfile

    from music21 import corpus

    from ..io.melody import read_melody

    tune = corpus.parse(opus).scores[number]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tune.musicxml"
        tune.write("musicxml", fp=str(path))
        return tune.metadata.title, read_melody(path)
