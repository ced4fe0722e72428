"""What chapter 11 says that depends on its run, one function per passage: the data it trained on, whether
the shipped models were scored again, what the sprint can be set beside. A build that cannot load the
official JSB split (offline, no local copy) trains on the embedded chorales, and every passage must read
true there too; tests/study/test_chapter11.py builds both.

Notebook: notebooks/11_comparison.ipynb (each passage is printed by a cell whose input the book hides).
"""
from __future__ import annotations

import numpy as np

from ..io.data import Splits


def is_official(data: Splits) -> bool:
    """Whether ``data`` is the official JSB split (``load_jsb``), the data of the paper's table."""
    return data.source.startswith("official")


def _sizes(data: Splits) -> str:
    return f"{len(data.train)} chorales to train on, {len(data.valid)} to validate, {len(data.test)} to test"


def data_passage(data: Splits) -> str:
    """The contenders' data."""
    if is_official(data):
        return ("All of them train on the same data: the official JSB split of Boulanger-Lewandowski et al. "
                f"({_sizes(data)}), the data of the paper's table at the end of the chapter, rather than the "
                "chorales embedded in the package that chapters 0-10 use.")
    return ("All of them train on the same data. The official JSB split, the data of the paper's table at the "
            "end of the chapter, could not be loaded in this build (no internet and no local copy), so they "
            f"train on the chorales embedded in the package, as chapters 0-10 do ({_sizes(data)}). The sprint below is "
            "therefore not on the paper's data, and nothing in it can be set beside the paper's numbers or "
            "the shipped models', which were made on the official split.")


def sprint_and_shipped(data: Splits) -> str:
    """What the sprint's relative row can be set beside."""
    if is_official(data):
        return ("The shipped relative model further down, trained with a recipe for far longer on the same "
                "data, scores far below its sprint row (the paper's table prints both).")
    return ("The shipped relative model further down was trained with a recipe for far longer on the official "
            "split, not on this build's data, so its number is not set beside this sprint (the paper's table "
            "has no sprint row in such a build).")


def rescored(data: Splits, smoke: bool) -> str:
    """Whether this build scored the shipped models again."""
    if is_official(data) and not smoke:
        return ("The paper's table scores the shipped models again in this build, on this machine, on the "
                "official split, and its cell checks that each number is its record's to 0.001.")
    why = ("the smoke profile scores a few pieces only" if is_official(data) else
           "this build could not load the official split, the data they were scored on")
    return (f"In this build the paper's table prints the shipped models' recorded numbers, not scored again: "
            f"{why}. `tests/study/test_pretrained.py` scores them again in every CI run and fails if a number "
            "moved by more than 0.001.")


def copying_share(far: float) -> str:
    """What copying from a longer context could buy, in words, from the measured share of steps."""
    return (f"The steps a longer context lets the model copy are {far:.1%} of all steps, and the cell above turns "
            "that share into nats: free copying of every such step would save about that much.")


def sprint_against_file(data: Splits) -> str:
    """What the comparison of the sprint's ranks with the file's compares."""
    if is_official(data):
        return "Both the sprint and the file trained on the official split."
    return (f"The sprint of this build trained on {data.source}, the file on the official split: the moves "
            "below set runs on different data side by side, and say how the rank depends on data and budget "
            "together.")


def sprint_data(data: Splits) -> str:
    """What to add where a sentence sets a number of the sprint beside one of the file: nothing on the official
    split, else that the two come from different data."""
    return "" if is_official(data) else " (on this build's data, not the file's)"


def prompts(data: Splits) -> str:
    """Where the shipped model's prompts come from."""
    if is_official(data):
        return ("The shipped relative model continues the first bar of validation chorales of the official "
                "split, held out of its training, for four bars.")
    return (f"The shipped relative model continues the first bar of validation chorales of {data.source}, for "
            "four bars. It trained on the official split's chorales, another selection of the same Bach "
            "chorales, so it has probably seen some of these: the continuations below are not of music held "
            "out of its training.")


def _at_share(curve: dict, share: float = 0.75) -> float:
    """The last validation NLL of ``curve`` at or before ``share`` of its steps."""
    return [v for st, v in zip(curve["eval_step"], curve["valid_nll"]) if st <= share * curve["eval_step"][-1]][-1]


def _ticks(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def paper_reading(rec: dict[str, dict], recipe: dict, recipe_steps: int) -> tuple[str, str]:
    """The shipped models read against the paper: what the cell prints, and the passage under it.

    ``rec`` holds the shipped models' records by name (``relative``, ``sinusoidal`` and ``relative-voice`` at
    least); ``recipe`` is relative attention's record by the recipe alone (``hub.recipe_record``), the like
    for like of the others where the shipped ``relative`` was distilled; ``recipe_steps`` is the recipe's.
    """
    from .reproduce import BEST_TARGET, PAPER, TARGET

    paper = dict(PAPER)
    p_abs, p_rel = paper["Transformer, absolute positions"], paper["Transformer, relative attention"]
    rel, ab, voice = (rec[n]["valid_nll"] for n in ("relative", "sinusoidal", "relative-voice"))
    plain = recipe["valid_nll"]
    distilled = bool(rec["relative"]["train_config"].get("teachers"))
    reached = rel <= TARGET
    steps = {n: r["steps"] for n, r in rec.items()}
    falling = [n for n, r in rec.items() if r["best_step"] == r["steps"]]
    gain = _at_share(recipe["curve"]) - recipe["curve"]["valid_nll"][-1]
    best_name = min(rec, key=lambda n: rec[n]["valid_nll"])
    best, b_curve = rec[best_name]["valid_nll"], rec[best_name]["curve"]
    b_gain = _at_share(b_curve) - min(b_curve["valid_nll"])
    b_mean = rec[best_name].get("teachers_valid_nll")
    printed = "\n".join([
        f"relative attention: valid {rel:.3f}, the paper's best model {TARGET}: "
        + (f"below it by {TARGET - rel:.3f}" if reached else f"not reached ({rel - TARGET:.3f} above)"),
        f"absolute positions: valid {ab:.3f}, {ab - plain:+.3f} against relative attention by the same recipe "
        f"(the paper: {p_abs - p_rel:+.3f})",
        f"voice embedding: valid {voice:.3f}, {voice - plain:+.3f} against relative attention by the same recipe",
        f"training steps: {steps}",
        f"at their best at their last evaluation: {', '.join(falling) or 'none'}",
        f"relative, the recipe alone: valid NLL {_at_share(recipe['curve']):.4f} at three quarters of its steps, "
        f"{recipe['curve']['valid_nll'][-1]:.4f} at the end ({gain:.4f} gained)",
        f"best shipped model: {best_name}, valid {best:.4f}; the book's target for it, {BEST_TARGET}: "
        + ("reached" if best <= BEST_TARGET else f"not reached ({best - BEST_TARGET:.4f} above)"),
        f"  gained {b_gain:.4f} over its last quarter of steps"
        + (f"; its teachers' mean prediction: {b_mean:.4f}" if b_mean else "")])
    if reached:
        head = ("Relative attention, with no other change to the architecture"
                + (", distilled from its teachers," if distilled else "")
                + f" scores {rel:.3f}, {TARGET - rel:.3f} below the paper's best JSB model ({TARGET}). That is one "
                "trained model against the paper's reported number, with no interval on either: a margin this "
                "small says that the book's model reaches the paper's level, not that it beats it. ")
    else:
        head = f"The target is not reached: {rel:.3f}, {rel - TARGET:.3f} above {TARGET}. "
    other = [n for n in steps if steps[n] != recipe_steps]
    if not other:
        budget = f"All of them trained for the recipe's {recipe_steps:,} steps. "
    else:
        budget = (f"All of them trained for the recipe's {recipe_steps:,} steps except "
                  + " and ".join(f"`{n}` {steps[n]:,}" for n in other) + ": read each row at its own budget"
                  + (" (the student's steps are discussed with distillation above). "
                     if other == ["relative"] and distilled else ". "))
    if falling:
        late = (f"Still at its best at its last evaluation: {', '.join(falling)}; more steps might help, though "
                f"the recipe's relative model gained only {gain:.4f} nats over its last quarter of training.")
    else:
        late = "Every model passed its best before its last evaluation."
    if best <= BEST_TARGET:
        second = (f" The book's second target, {BEST_TARGET} for its best shipped model, is reached by "
                  f"`{best_name}`: {best:.3f}.")
    else:
        second = (f" The book's second target, {BEST_TARGET} for its best shipped model, is not reached: "
                  f"`{best_name}` scores {best:.3f}, {best - BEST_TARGET:.3f} above it. Its valid NLL gained "
                  f"{b_gain:.4f} nats over its last quarter of steps, "
                  + ("less than that gap" if b_gain < best - BEST_TARGET else "as much as that gap")
                  + (f"; its teachers' mean prediction scores {b_mean:.3f}, below the target, and the student "
                     "keeps only part of that gain (the distillation section prints how much): keeping more of "
                     "it, with more teachers or a student trained for longer still, is a way on that this book "
                     "has not tried." if b_mean and b_mean <= BEST_TARGET else "."))
    return printed, head + budget + late + second


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


def seeds_reading(real: list[dict], n_seeds: int, pieces: tuple[float, float, float], sprint: dict[str, float],
                  data: Splits) -> str:
    """The comparison over seeds read: who leads, whether the seeds and the pieces rank the first two, and how
    the ranks moved from the sprint.

    ``real`` is ``compare.seed_ranking`` of the file (best mean first, with ``tied``); ``pieces`` the paired
    bootstrap of the first two over the valid pieces (difference, low, high); ``sprint`` the sprint's valid
    NLL by model.
    """
    a, b = real[0], real[1]
    diff, lo, hi = pieces
    resolved = lo > 0 or hi < 0
    tied = [r["name"] for r in real if r["tied"]]
    real_rank = {r["name"]: i + 1 for i, r in enumerate(real)}
    sprint_rank = {n: i + 1 for i, n in enumerate(sorted(sprint, key=sprint.get))}
    moved = [n for n in sorted(real_rank, key=lambda n: real_rank[n] - sprint_rank[n])
             if abs(real_rank[n] - sprint_rank[n]) >= 4]
    text = f"In this file `{a['name']}` has the lowest mean validation NLL. "
    if len(tied) > 1:
        text += (f"The seeds' intervals of {_ticks(tied[1:])} overlap its own: {n_seeds} seeds do not rank these "
                 f"{len(tied)} models. ")
    else:
        text += "No other model's interval over seeds overlaps its own. "
    text += (f"Over the pieces, `{a['name']}` and `{b['name']}` differ by {diff:+.3f} nats per token, and the "
             "interval printed above "
             + ("is clear of zero: the pieces resolve it" if resolved else "holds zero: the pieces do not resolve it"))
    if b["tied"]:
        text += ("; the seeds' intervals overlap, though, so this file does not rank the two (exercise 11.1). "
                 if resolved else "; nor do the seeds, whose intervals overlap (exercise 11.1). ")
    else:
        text += ("; the seeds' intervals are apart too. " if resolved else
                 "; the seeds' intervals are apart, though: the seeds rank them, the pieces do not (exercise 11.1). ")
    text += (sprint_against_file(data) + " By mean, from the sprint at the top of the chapter to this file"
             + (" (whose LSTMs are larger)" if {"lstm", "lstm-attention"} & set(moved) else "") + ", "
             + ("; ".join(f"`{n}` moves from rank {sprint_rank[n]} to {real_rank[n]}" for n in moved)
                if moved else "no model moves 4 places or more") + ".")
    if any(real_rank[n] > sprint_rank[n] for n in moved if n.startswith("fnet")):
        text += (" The causal mixers of chapter 10 fall back: a fixed weight per offset (per pair of positions, "
                 "for the matrix) is what this music needs first, so they lead a sprint, but it is the same "
                 "whatever the notes are, while attention, once it has learnt its offsets, weighs them by the "
                 "notes too. That is our reading; the file shows the fall, not its cause.")
    return text


def interval_order(at: dict[str, dict], a: str, b: str) -> int:
    """-1: ``a`` ahead of ``b`` with their intervals over seeds apart, 1: behind, 0: the intervals overlap."""
    if at[a]["high"] < at[b]["low"]:
        return -1
    return 1 if at[a]["low"] > at[b]["high"] else 0


def families_reading(res: dict, real: list[dict], sprint: dict[str, float], groups: dict[str, list[str]],
                     lstm_size: tuple[int, int], layers: int, data: Splits) -> tuple[str, str]:
    """The comparison over seeds read by families of models: what the cell prints, and the passage.

    ``groups`` names the models ``offsets`` (those that can weigh a token by its offset), ``one`` and ``deep``
    (without positions: one layer, and stacks of ``layers`` blocks), ``absolute`` and ``lstms``;
    ``lstm_size`` is the file's LSTMs' (layers, units); ``sprint`` the sprint's valid NLL by model.
    """
    at = {r["name"]: r for r in real}
    offsets, one, deep, absolute, lstms = (groups[k] for k in ("offsets", "one", "deep", "absolute", "lstms"))
    runs = [run for rs in res["models"].values() for run in rs]
    still = float(sum(run["best_step"] == run["steps"] for run in runs) / len(runs))
    where: dict[str, tuple[int, float]] = {}                          # device -> (runs, hours)
    for run in runs:
        dev = run.get("made", {}).get("device", res["device"])
        n, h = where.get(dev, (0, 0.0))
        where[dev] = (n + 1, h + run["seconds"] / 3600)
    best_deep = min(deep, key=lambda n: at[n]["mean"])
    best_aware = min(offsets, key=lambda n: at[n]["mean"])
    low_one = min(one, key=lambda n: at[n]["mean"])
    gap = {"file": at[best_deep]["mean"] - at[best_aware]["mean"],
           "sprint": min(sprint[n] for n in deep) - min(sprint[n] for n in offsets)}
    steps = max(run["steps"] for run in runs)
    printed = "\n".join([
        f"the LSTMs in this file: {lstm_size[0]} layers of {lstm_size[1]} units",
        "training time in the file: " + "; ".join(f"{h:.1f} h for {n} runs on {dev}"
                                                   for dev, (n, h) in where.items()),
        f"runs at their best at their last evaluation: {still:.0%} of {len(runs)}",
        "mean valid NLL: " + ", ".join(f"{n} {at[n]['mean']:.3f}" for n in [*lstms, *absolute, "relative"]),
        f"best without positions, {layers} blocks: {best_deep} {at[best_deep]['mean']:.3f}; gap to the best "
        f"offset-aware model: file {gap['file']:.2f}, sprint {gap['sprint']:.2f}"])

    if still > 0.5:
        budget = ("the budget stopped most models while they were still learning, so the file ranks how far each "
                  "gets in that many steps, not how good it can get. ")
    else:
        budget = ("most had passed their best, and early stopping kept their best weights, so the file is close "
                  "to what each model gets at this size with the recipe. ")
    behind = sorted(n for n in offsets if all(interval_order(at, a, n) == 1 for a in absolute))
    if len(behind) == len(offsets):
        positions = "Absolute positions (`sinusoidal`, `learned-positions`) trail every offset-aware model, their " \
                    "intervals apart. "
    else:
        positions = (f"Absolute positions (`sinusoidal`, `learned-positions`) trail {len(behind)} of the "
                     f"{len(offsets)} offset-aware models with the intervals apart ({_ticks(behind) or 'none'}); "
                     "the seeds do not separate them from the rest. ")

    counting = (f"Without positions, the decoders of {layers} blocks trail every offset-aware model; the better of "
                f"them (`{best_deep}`, {at[best_deep]['mean']:.3f}) trails the best (`{best_aware}`, "
                f"{at[best_aware]['mean']:.3f}) by {gap['file']:.2f} nats, against {gap['sprint']:.2f} in the "
                f"sprint{sprint_data(data)}")
    if gap["file"] < gap["sprint"]:
        counting += (". The gap narrows from the sprint to the file, which differ in steps, width and recipe"
                     + ("" if is_official(data) else ", and here in data") + ", so the file does not say why. "
                     "One reading: given steps, a stack can learn positions through the causal mask, by counting "
                     f"(chapter 4 cites the evidence); one layer cannot, and `{low_one}`, the better one-layer "
                     f"model without positions, stays at {at[low_one]['mean']:.3f}")
    one_pos = at["attention-positions"]["mean"]
    passed, passed_sprint = one_pos > at[best_deep]["mean"], sprint["attention-positions"] > sprint[best_deep]
    if passed:
        counting += (f". `{best_deep}` also passes the one attention layer *with* positions (`attention-positions`, "
                     f"{one_pos:.3f})" + (", as in the sprint. " if passed_sprint else ", the reverse of the sprint. "))
    else:
        counting += (f". The one attention layer *with* positions (`attention-positions`, {one_pos:.3f}) is still "
                     f"ahead of `{best_deep}`" + (", the reverse of the sprint. " if passed_sprint
                                                  else ", as in the sprint. "))

    # ALiBi knows distance only as "nearer counts more", the same in every layer
    alibi_behind = all(interval_order(at, "alibi", n) == 1 for n in offsets)
    alibi_level = [n for n in absolute if interval_order(at, "alibi", n) == 0]
    alibi = (f"ALiBi (`alibi`, {at['alibi']['mean']:.3f}) "
             + ("trails every offset-aware model, its interval apart, " if alibi_behind else
                "does not trail every offset-aware model with its interval apart, ")
             + (f"level with {' and '.join(f'`{n}`' for n in alibi_level)}. " if alibi_level else
                "and its interval is apart from both absolute models'. "))
    if alibi_behind:
        alibi += ("Its bias falls with distance in every head: by position alone it can prefer 1 token back to 4, "
                  "never 4 to 1, and the same voice one step earlier is 4 back, so the notes' content must do the "
                  "rest, as it must for absolute positions. Whether it catches up with more steps, this budget "
                  "cannot say. ")

    lstm_ahead = max(at[n]["mean"] for n in lstms) < min(at[n]["mean"] for n in absolute)
    vs_rel = interval_order(at, "lstm-attention", "relative")
    tell = ["ahead of", "level with (the seeds' intervals overlap)", "behind"][vs_rel + 1]
    recurrent = (f"The LSTMs, at {lstm_size[0]} layers of {lstm_size[1]}, land "
                 + ("ahead of" if lstm_ahead else "not ahead of")
                 + f" both models with absolute positions, and the LSTM with attention lands {tell} the Music "
                 "Transformer's relative attention" + (": against this book's story (read on)." if vs_rel == -1
                                                        else "."))
    text = (f"{still:.0%} of the runs were still at their best at their last evaluation, at {steps:,} steps: "
            + budget + positions + counting + alibi + recurrent)
    return printed, text


def race_reading(to_base: dict[str, float]) -> tuple[str, str]:
    """Who crossed the best baseline first, in seconds of training: what the cell prints, and its sentence.
    ``to_base`` holds the seconds of each model that crossed it (a model that never did is absent)."""
    first = sorted(to_base, key=to_base.get)[:3]
    fnet = min((to_base[n] for n in ("fnet-matrix", "fnet-conv") if n in to_base), default=float("inf"))
    other = min((v for n, v in to_base.items() if not n.startswith("fnet")), default=float("inf"))
    printed = (f"first FNet model below the baseline after {fnet:.1f} s, first other model after {other:.1f} s"
               .replace("after inf s", "never"))
    text = ("In this run the first models below the baseline, in seconds, were "
            + (_ticks(first) if first else "none") + "; "
            + ("an FNet mixer got there first." if fnet < other else
               "an FNet mixer was not first." if fnet < float("inf") else
               "no FNet mixer got there in this budget."))
    return printed, text


def voicing_reading(times: dict[str, float], nearest: float, same_bars: float) -> str:
    """The generated music's voice leading against Bach's: ``times`` holds the median model's rate over his for
    parallel fifths, parallel octaves and onsets on odd 16ths; ``nearest`` is the nearest model's distance
    from his histogram of intervals above the bass, ``same_bars`` that of his own bars of the same length."""
    text = (f"In this run, the median model writes parallel fifths at {times['parallel_fifths']:.0f} times Bach's "
            f"rate and parallel octaves at {times['parallel_octaves']:.0f} times, and puts "
            f"{times['odd_16th']:.1f} times his share of its onsets on odd 16ths. ")
    if nearest > same_bars:
        return text + (f"No model's intervals above the bass come as close to his histogram as his own bars of "
                       f"the same length: {nearest:.3f} at best, against {same_bars:.3f}.")
    return text + (f"The nearest model's intervals above the bass come as close to his histogram as his own bars "
                   f"of the same length: {nearest:.3f}, against {same_bars:.3f}.")


def against_noise(d: float, noise: float, steps: int, what: str = "the longer context") -> str:
    """A variant's gain ``d`` (> 0: the variant is better) in words: within ``noise``, the spread of the
    recipe's seeds at ``steps``, or which way."""
    if abs(d) <= noise:
        return f"{d:+.3f}, within the {noise:.3f} by which the recipe's seeds differ at {steps:,} steps"
    return f"{abs(d):.3f} {'in favour of' if d > 0 else 'against'} {what}"


def context_reading(longer: float, full_gain: dict[str, dict[str, float]], noise: float, steps: int,
                    n_seeds: int) -> str:
    """Twice the context, and the other variants, read against the seeds' spread: ``longer`` is the mean gain of
    the context of 512 over ``n_seeds`` seeds at ``steps``; ``full_gain`` the gain per variant and model at the
    full budget (one seed each), ``context-512`` first."""
    text = (f"Twice the context, at {steps:,} steps and over {n_seeds} seeds: {against_noise(longer, noise, steps)}. "
            "At the full budget, one seed each: "
            + "; ".join(f"`{n}` {against_noise(g, noise, steps)}" for n, g in full_gain["context-512"].items()) + ".")
    for v, gains in full_gain.items():
        if v != "context-512":
            text += (f" The variant `{v}`, at the full budget: "
                     + "; ".join(f"`{n}` {against_noise(g, noise, steps, 'the variant')}" for n, g in gains.items())
                     + ".")
    return text


def precision_reading(res: dict, real: list[dict]) -> tuple[str, str | None, float, float]:
    """Whether the file's two precisions could move its reading: the models whose seeds trained in both
    (bfloat16 on a GPU, float32 on a CPU), the largest shift between their means, and the smallest gap
    between two models whose intervals over seeds are apart. Returns what the cell prints, the passage (None
    where every model trained in one precision), the largest shift and the smallest gap."""
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
    lines.append(f"smallest gap between two models whose intervals are apart: {smallest:.4f}")
    if not mixed:
        return "\n".join(lines + ["every model's seeds trained in one precision"]), None, 0.0, smallest
    shift = {n: abs(float(np.subtract(*[np.mean(v) for v in prec.values()][:2]))) for n, prec in mixed.items()}
    worst = max(shift, key=shift.get)
    n_runs = sum(len(v) for prec in mixed.values() for v in prec.values())
    text = (f"{len(mixed)} model(s) have seeds in both precisions; their means differ by at most "
            f"{shift[worst]:.4f} nats per token (`{worst}`), "
            + (f"less than the smallest gap between two models whose intervals are apart ({smallest:.4f}). "
               f"With {n_runs} runs this does not measure what the precision does; it shows no sign of an effect "
               "large enough to move the reading above." if shift[worst] < smallest else
               f"as much as the smallest gap between two models whose intervals are apart ({smallest:.4f}): "
               "the reading above may rest on the precision, not only on the models."))
    return "\n".join(lines), text, shift[worst], smallest


def listening_reading(inside: list[str], apart: dict[str, str], odd_ratio: float, temperature: float) -> str:
    """The shipped model's samples against Bach's validation set: the statistics whose intervals overlap his
    (``inside``), those apart (``apart``: statistic -> "above" or "below"), and its rate of onsets on odd
    16ths over his."""
    return (f"Against Bach's whole validation set, the shipped model's interval at T = {temperature} overlaps his "
            "for " + (", ".join(f"*{h}*" for h in inside) or "no statistic") + ", and lies apart from it for "
            + (", ".join(f"*{h}* ({s} his)" for h, s in apart.items()) or "none")
            + f". Its share of onsets on odd 16ths is {odd_ratio:.1f} times his. (*Above bass* is left out: a few "
            "bars of music read high on it, as the statistics section says.)")


def cache_reading(one: dict[int, float], ratio: dict[str, float]) -> str:
    """What the key/value cache saved in this run: ``one`` is re-encoded over cached time for one new token at
    each length t, ``ratio`` the cache's speed-up over a whole sample, per model."""
    t_lo, t_hi = min(one), max(one)
    lost = [k for k, v in ratio.items() if not v > 1]                # the cache not faster
    # the cache pays most where re-encoding costs most: by a quarter at least, or the sums do not rank them
    costliest = min(ratio["relative"], ratio["lstm"]) > 1.25 * max(ratio["local"], ratio["fnet-conv"])
    return (f"In this run one new token costs {one[t_lo]:.1f} times as much re-encoded as cached at t = {t_lo} ("
            + ("within" if one[t_lo] < 3 else "more than") + f" a factor of three), and {one[t_hi]:.1f} times as "
            f"much at t = {t_hi} (" + ("more than" if one[t_hi] > 10 else "not more than") + " ten cached tokens). "
            + ("Over a whole sample the cache was faster for every model. " if not lost else
               f"Over a whole sample the cache was not faster for {_ticks(lost)}. ")
            + ("Summed over a sample, the cache pays most for relative attention and the LSTM, less for local "
               "attention and the FFT convolution." if costliest else
               "Summed over a sample, the speed-ups do not separate relative attention and the LSTM from local "
               "attention and the FFT convolution by a quarter or more: "
               + ", ".join(f"`{k}` {v:.1f}x" for k, v in ratio.items())
               + ". Such sums vary from run to run on shared cores: read them against the one-token ratios above."))
