"""Chapter 11's numbers and verdicts that depend on its files and records, one function per printout: the
paper's table read with one threshold, the comparison over seeds by families of models, the two precisions
of its ledger. Each returns what its cell prints (numbers and short verdicts); the prose around them is
written in the notebook.

Notebooks: notebooks/11_comparison.ipynb (part 1) and notebooks/11_paper.ipynb (part 2, where these are read).
"""
from __future__ import annotations

import numpy as np

from ..io.data import Splits


def is_official(data: Splits) -> bool:
    """Whether ``data`` is the official JSB split (``load_jsb``), the data of the paper's table."""
    return data.source.startswith("official")


def verdict(nll: float, paper: float, tau: float) -> str:
    """One rule for every comparison with a paper's number: "beats" below it by more than ``tau`` (the spread of
    seeds), "reaches" within ``tau`` of it, "does not reach" above it by more."""
    if nll < paper - tau:
        return "beats"
    return "reaches" if nll <= paper + tau else "does not reach"


def verdicts(record: dict, paper: float, tau: float) -> str:
    """A shipped record's valid and test NLL, each with its ``verdict`` against ``paper``."""
    return ", ".join(f"{split} {record[f'{split}_nll']:.3f} {verdict(record[f'{split}_nll'], paper, tau)}"
                     for split in ("valid", "test"))


def _at_share(curve: dict, share: float = 0.75) -> float:
    """The last validation NLL of ``curve`` at or before ``share`` of its steps."""
    return [v for st, v in zip(curve["eval_step"], curve["valid_nll"]) if st <= share * curve["eval_step"][-1]][-1]


def paper_reading(rec: dict[str, dict], recipe: dict, recipe_steps: int) -> str:
    """The shipped models' records read beside the paper, as printed lines: each row against relative attention
    by the same recipe, the steps each had, which were still at their best at the end, and the book's second
    target (``BEST_TARGET``) for its best model.

    ``rec`` holds the shipped models' records by name (``relative``, ``sinusoidal`` and ``relative-voice`` at
    least); ``recipe`` is relative attention's record by the recipe alone (``hub.recipe_record``), the like
    for like of the others where the shipped ``relative`` was distilled; ``recipe_steps`` is the recipe's.
    """
    from .reproduce import BEST_TARGET, PAPER

    paper = dict(PAPER)
    p_abs, p_rel = paper["Transformer, absolute positions"], paper["Transformer, relative attention"]
    ab, voice = rec["sinusoidal"]["valid_nll"], rec["relative-voice"]["valid_nll"]
    plain = recipe["valid_nll"]
    other = {n: r["steps"] for n, r in rec.items() if r["steps"] != recipe_steps}
    falling = [n for n, r in rec.items() if r["best_step"] == r["steps"]]
    gain = _at_share(recipe["curve"]) - recipe["curve"]["valid_nll"][-1]
    best_name = min(rec, key=lambda n: rec[n]["valid_nll"])
    best, b_curve = rec[best_name]["valid_nll"], rec[best_name]["curve"]
    b_gain = _at_share(b_curve) - min(b_curve["valid_nll"])
    b_mean = rec[best_name].get("teachers_valid_nll")
    return "\n".join([
        f"absolute positions: valid {ab:.3f}, {ab - plain:+.3f} against relative attention by the same recipe "
        f"(the paper: {p_abs - p_rel:+.3f})",
        f"voice embedding: valid {voice:.3f}, {voice - plain:+.3f} against relative attention by the same recipe",
        f"training steps: the recipe's {recipe_steps:,}"
        + "".join(f"; {n} {s:,}" for n, s in other.items()),
        f"at their best at their last evaluation: {', '.join(falling) or 'none'}",
        f"relative, the recipe alone: valid NLL {_at_share(recipe['curve']):.4f} at three quarters of its steps, "
        f"{recipe['curve']['valid_nll'][-1]:.4f} at the end ({gain:.4f} gained)",
        f"best shipped model: {best_name}, valid {best:.4f}; the book's target for it, {BEST_TARGET}: "
        + ("reached" if best <= BEST_TARGET else f"not reached ({best - BEST_TARGET:.4f} above)"),
        f"  gained {b_gain:.4f} over its last quarter of steps"
        + (f"; its teachers' mean prediction: {b_mean:.4f}" if b_mean else "")])


def file_header(res: dict, recipe_steps: int) -> str:
    """Where the comparison over seeds (``compare.json``) comes from: the command, the machine, the budget."""
    steps = sorted({r["steps"] for runs in res["models"].values() for r in runs})
    verb = "exported" if "ledger" in res else "recorded"              # a ledger: runs made elsewhere
    lines = [f"{verb} by `{res['command'].split(' --note ')[0]}`",
             f"  on {res['device']}, {res['date']} (not this build): {'/'.join(map(str, steps))} steps, "
             f"seeds {res['seeds']}"]
    if "note" in res:
        lines.append(f"  note: {res['note']}")
    if "ledger" in res:                    # runs trained by several processes or sessions, into a ledger
        led = res["ledger"]
        lines.append(f"  its {led['runs']} runs trained on {' and '.join(led['device'])}, in "
                     f"{' and '.join(led['precision'])}, from {led['first']} to {led['last']}, by "
                     f"{len(led['commit'])} commit(s); the ledger checked that their code was the same")
    if max(steps) < 3000:
        lines.append(f"  fewer steps than the 3,000 of the command above: a longer sprint over seeds, "
                     f"{max(steps) / recipe_steps:.0%} of the recipe's budget")
    return "\n".join(lines)


def interval_order(at: dict[str, dict], a: str, b: str) -> int:
    """-1: ``a`` ahead of ``b`` with their intervals over seeds apart, 1: behind, 0: the intervals overlap."""
    if at[a]["high"] < at[b]["low"]:
        return -1
    return 1 if at[a]["low"] > at[b]["high"] else 0


def families_reading(res: dict, real: list[dict], groups: dict[str, list[str]], lstm_size: tuple[int, int],
                     layers: int) -> str:
    """The comparison over seeds read by families of models, as printed lines: where the runs trained, how
    many were still learning, and each family's best against the best offset-aware model.

    ``groups`` names the models ``offsets`` (those that can weigh a token by its offset), ``one`` and ``deep``
    (without positions: one layer, and stacks of ``layers`` blocks), ``absolute`` and ``lstms``;
    ``lstm_size`` is the file's LSTMs' (layers, units).
    """
    at = {r["name"]: r for r in real}
    runs = [run for rs in res["models"].values() for run in rs]
    still = float(sum(run["best_step"] == run["steps"] for run in runs) / len(runs))
    where: dict[str, tuple[int, float]] = {}                          # device -> (runs, hours)
    for run in runs:
        dev = run.get("made", {}).get("device", res["device"])
        n, h = where.get(dev, (0, 0.0))
        where[dev] = (n + 1, h + run["seconds"] / 3600)
    best_aware = min(groups["offsets"], key=lambda n: at[n]["mean"])
    lines = [f"the LSTMs in this file: {lstm_size[0]} layers of {lstm_size[1]} units",
             "training time in the file: " + "; ".join(f"{h:.1f} h for {n} runs on {dev}"
                                                        for dev, (n, h) in where.items()),
             f"runs at their best at their last evaluation: {still:.0%} of {len(runs)}, at "
             f"{max(run['steps'] for run in runs):,} steps",
             f"best offset-aware model: {best_aware} {at[best_aware]['mean']:.3f}"]
    for key, label in (("deep", f"without positions, {layers} blocks"), ("one", "without positions, one layer"),
                       ("absolute", "absolute positions"), ("lstms", "LSTMs")):
        best = min(groups[key], key=lambda n: at[n]["mean"])
        lines.append(f"best {label}: {best} {at[best]['mean']:.3f} "
                     f"({at[best]['mean'] - at[best_aware]['mean']:+.3f})")
    for name in ("alibi", "attention-positions"):
        lines.append(f"{name}: {at[name]['mean']:.3f} ({at[name]['mean'] - at[best_aware]['mean']:+.3f})")
    return "\n".join(lines)


def against_noise(d: float, noise: float, steps: int, what: str = "the longer context") -> str:
    """A variant's gain ``d`` (> 0: the variant is better) in words: within ``noise``, the spread of the
    recipe's seeds at ``steps``, or which way."""
    if abs(d) <= noise:
        return f"{d:+.3f}, within the {noise:.3f} by which the recipe's seeds differ at {steps:,} steps"
    return f"{abs(d):.3f} {'in favour of' if d > 0 else 'against'} {what}"


def precision_reading(res: dict, real: list[dict]) -> tuple[str, float, float]:
    """Whether the file's two precisions could move its reading: the models whose seeds trained in both
    (bfloat16 on a GPU, float32 on a CPU), the largest shift between their means, and the smallest gap
    between two models whose intervals over seeds are apart. Returns what the cell prints, the largest shift
    (0 where every model trained in one precision) and the smallest gap."""
    at = {r["name"]: r for r in real}
    mixed = {}
    for name, runs in res["models"].items():
        prec: dict[str, list[float]] = {}
        for r in runs:
            prec.setdefault(r.get("made", {}).get("precision", "?"), []).append(r["valid_nll"])
        if len(prec) > 1:
            mixed[name] = prec
    smallest = min(abs(at[x]["mean"] - at[y]["mean"]) for x in at for y in at
                   if x < y and interval_order(at, x, y) != 0)
    lines = [f"{name:<13s} " + "; ".join(f"{p}: " + " ".join(f"{v:.4f}" for v in vs) for p, vs in prec.items())
             for name, prec in mixed.items()]
    if not mixed:
        lines.append("every model's seeds trained in one precision")
        return "\n".join(lines + [f"smallest gap between two models whose intervals are apart: {smallest:.4f}"]), \
            0.0, smallest
    shift = {n: abs(float(np.subtract(*[np.mean(v) for v in prec.values()][:2]))) for n, prec in mixed.items()}
    worst = max(shift, key=shift.get)
    lines.append(f"largest shift between the two precisions' means: {shift[worst]:.4f} ({worst})")
    lines.append(f"smallest gap between two models whose intervals are apart: {smallest:.4f}")
    return "\n".join(lines), shift[worst], smallest
