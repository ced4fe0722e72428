"""Chapter 13's study: piano performances at 2,048 events, relative global against relative local attention.

Notebook: notebooks/13_piano.ipynb

- ``piano_data``: the data a profile trains on (the shared sample on a CPU, MAESTRO in Colab);
- ``event_baselines``: the unigram and smoothed n-grams over events, scored like the models;
- ``step_cost``: the time and peak memory of one training step at 2,048 events, on the device at hand;
- ``train_pair``: both decoders, several seeds, the same crops and budget; ``seed_table``, ``reading``;
- ``expression``: the shipped model's NLL on the same held-out pieces as performance and as score;
- ``PAPER_TABLE3`` and ``table3``: the paper's Piano-e-Competition numbers beside ours.
"""
from __future__ import annotations

import math
import textwrap
import time

import numpy as np
import torch

from .. import settings
from ..engine.profiles import Profile
from ..engine.training import train
from ..io.corpus import Performances, load_piano_sample, sample_root
from ..models.registry import PIANO_N, build_model
from ..models.tasks import evaluate_nll, sequence
from .baselines import NGram
from .bench import peak_bytes

MODELS13 = ("piano-relative", "piano-local")      # relative global attention (the chunked skew), relative local
LABELS = {"piano-relative": "relative global", "piano-local": "relative local"}
SMOKE_PIECES = 8                                  # the smoke profile reads a few pieces only
LOCAL_N = PIANO_N                                 # piano-local's block length


def piano_data(P: Profile, say=print) -> Performances:
    """What chapter 13 trains on in profile ``P``: MAESTRO v3 in the gpu profile (downloaded once), the
    shared sample's CC BY transcriptions (``giantmidi``) elsewhere, or wherever MAESTRO cannot be had.
    The smoke profile reads ``SMOKE_PIECES`` pieces of the sample."""
    from ..io import corpus

    if P.name == "gpu" or sample_root() is None:
        try:
            return corpus.load_maestro()
        except (OSError, ValueError) as e:
            if sample_root() is None:
                raise
            say(f"MAESTRO could not be read ({e}); using the shared sample instead")
    data = load_piano_sample(("giantmidi",))
    if P.name == "smoke":
        keep = {p.piece for s in ("train", "valid", "test") for p in data[s][:SMOKE_PIECES // 3 + 1]}
        for s in ("train", "valid", "test"):
            data[s][:] = [p for p in data[s] if p.piece in keep]
    return data


def event_baselines(data, orders=(2, 3, 4, 5), n_valid: int | None = None,
                    n_train: int | None = None) -> dict[str, float]:
    """NLL per event on ``data.valid`` (its first ``n_valid`` performances) of the add-one unigram and of
    Kneser-Ney n-grams of ``orders`` over events (``baselines.NGram``), fitted on ``data.train`` (its
    first ``n_train`` performances: counting in Python is slow on all of MAESTRO)."""
    from ..io.performance import VOCAB_SIZE

    train, valid = data.train[:n_train], data.valid[:n_valid]
    out = {"unigram": NGram(1, VOCAB_SIZE).fit(train).nll(valid)}
    for n in orders:
        out[f"{n}-gram"] = NGram(n, VOCAB_SIZE).fit(train).nll(valid)
    return out


def step_cost(name: str, P: Profile, device, L: int = 2048, batch: int | None = None, repeats: int = 3) -> dict:
    """One training step (forward, backward, AdamW) of model ``name`` at the size of profile ``P`` on crops
    of ``L`` random events: the best of ``repeats`` timings after a warm-up, tokens per second, and the
    peak memory of the forward and backward passes (``bench.peak_bytes``: CUDA's counters on a GPU, the
    profiler's allocations on a CPU)."""
    mcfg, tcfg = P.model_config(name, context=L), P.train_config(name)
    batch = batch or tcfg.batch_size
    torch.manual_seed(0)
    model = build_model(name, mcfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(2, model.cfg.vocab_size, (batch, L + 1), device=device)

    def fwd_bwd() -> None:
        logits = model(x[:, :-1])                                       # (B, L, V)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten()).backward()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        fwd_bwd()
        opt.step()

    step()                                                              # warm-up: allocations, kernel choices
    times = []
    for _ in range(repeats):
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    opt.zero_grad(set_to_none=True)
    peak = peak_bytes(fwd_bwd, device)
    s = min(times)
    return {"name": name, "L": L, "batch": batch, "seconds": s, "tokens_per_s": batch * L / s,
            "peak_bytes": peak, "device": str(device)}


def cost_table(rows: list[dict]) -> str:
    """``step_cost`` rows as a table, each against the first row."""
    base = rows[0]
    lines = [f"{'attention':17s} {'s/step':>7s} {'events/s':>9s} {'peak MiB':>9s} {'time':>6s} {'memory':>7s}"]
    for r in rows:
        lines.append(f"{LABELS.get(r['name'], r['name']):17s} {r['seconds']:7.3f} {r['tokens_per_s']:9,.0f} "
                     f"{r['peak_bytes'] / 2**20:9.1f} {r['seconds'] / base['seconds']:5.2f}x "
                     f"{r['peak_bytes'] / base['peak_bytes']:6.2f}x")
    return "\n".join(lines)


def train_pair(P: Profile, data, seeds=(0, 1), device=None, progress: bool = True) -> dict[str, list[dict]]:
    """Train both of ``MODELS13`` at profile ``P``'s chapter settings for each seed: the same crops for both
    (the seed fixes them), the same steps. Per model, one dict per seed: ``seed``, ``valid`` (the final NLL
    per event on every valid performance), ``seconds`` (training), ``tokens_per_s``, ``model``, ``hist``."""
    out: dict[str, list[dict]] = {name: [] for name in MODELS13}
    for seed in seeds:
        for name in MODELS13:
            torch.manual_seed(seed)
            model = build_model(name, P.model_config(name))
            hist = train(model, data, P.train_config(name, seed=seed), device=device, progress=progress)
            out[name].append({"seed": seed, "valid": hist.final_nll, "seconds": hist.seconds,
                              "tokens_per_s": hist.tokens_per_s, "model": model, "hist": hist})
    return out


def seed_table(results: dict[str, list[dict]], baselines: dict[str, float]) -> str:
    """Each model's valid NLL per event over seeds (mean, and the lowest and highest seed), its training
    time and speed, under the baselines."""
    lines = [f"{'model':17s} {'NLL/event':>9s}  {'seeds (min..max)':>17s} {'train s':>8s} {'events/s':>9s}"]
    for name, runs in results.items():
        v = [r["valid"] for r in runs]
        lines.append(f"{LABELS[name]:17s} {np.mean(v):9.4f}  {min(v):8.4f}..{max(v):.4f} "
                     f"{np.mean([r['seconds'] for r in runs]):8.0f} "
                     f"{np.mean([r['tokens_per_s'] for r in runs]):9,.0f}")
    for k, v in baselines.items():
        lines.append(f"{k:17s} {v:9.4f}")
    return "\n".join(lines)


def reading(results: dict[str, list[dict]]) -> tuple[str, bool, bool]:
    """The comparison in words, computed from ``results``: which NLL is lower, whether the seeds' ranges
    overlap (then this budget does not rank them), and how much faster local attention trained.
    Returns (text, local lower, ranges apart)."""
    g, loc = ([r["valid"] for r in results[n]] for n in MODELS13)
    lower = np.mean(loc) < np.mean(g)
    apart = max(loc) < min(g) or max(g) < min(loc)
    speed = np.mean([r["tokens_per_s"] for r in results["piano-local"]]) / \
        np.mean([r["tokens_per_s"] for r in results["piano-relative"]])
    gap = abs(np.mean(loc) - np.mean(g))
    apart = apart and len(g) > 1
    text = (f"Relative local attention trained {speed:.1f}x as many events per second as relative global "
            f"attention, and ended {gap:.3f} nats per event {'lower' if lower else 'higher'} "
            + (f"({len(g)} seeds each). The seeds' ranges "
               + ("do not overlap: at this budget the order holds for every seed." if apart else
                  "overlap: at this budget the two are not ranked.") if len(g) > 1 else
               "(one seed each: one run ranks nothing)."))
    return text, bool(lower), bool(apart)


def held_out_versions(data: Performances, split: str = "test") -> Performances:
    """The pieces of ``data``'s ``split`` in all three versions of the shared sample (performance,
    transcription, score), split exactly as ``data`` is (the split is by piece name)."""
    both = load_piano_sample(("maestro", "giantmidi", "scores"))
    return [p for p in both[split] if p.piece in {q.piece for q in data[split]}]


def expression(model, perfs: list, max_events: int | None = None) -> list[dict]:
    """The NLL of ``model`` on each version of held-out pieces: per version, the pieces, notes, events,
    events per note, NLL per event and per note (the same music, written with and without expression).
    ``max_events``: score only each performance's first events (quick runs)."""
    from ..io.performance import NOTE_OFF, NOTE_ON, Performance

    rows = []
    for version in ("maestro", "giantmidi", "scores"):
        ps = [p for p in perfs if p.name.startswith(version + "/")]
        if max_events is not None:
            ps = [Performance(p.name, p.notes, p.tokens[:max_events], p.piece, p.source) for p in ps]
        events = sum(len(sequence(p)) - 1 for p in ps)
        notes = sum(int(((sequence(p) >= NOTE_ON) & (sequence(p) < NOTE_OFF)).sum()) for p in ps)   # note-ons
        nll = evaluate_nll(model, ps)
        rows.append({"version": version, "pieces": len(ps), "notes": notes, "events": events,
                     "events_per_note": events / notes, "nll_event": nll, "nll_note": nll * events / notes})
    return rows


VERSION_LABELS = {"maestro": "MAESTRO performance", "giantmidi": "GiantMIDI transcription",
                  "scores": "score (quantised)"}


def expression_table(rows: list[dict]) -> str:
    lines = [f"{'version':24s} {'notes':>7s} {'events':>8s} {'ev/note':>7s} {'NLL/event':>9s} {'NLL/note':>8s}"]
    for r in rows:
        lines.append(f"{VERSION_LABELS[r['version']]:24s} {r['notes']:7,d} {r['events']:8,d} "
                     f"{r['events_per_note']:7.2f} {r['nll_event']:9.3f} {r['nll_note']:8.3f}")
    return "\n".join(lines)


def nats_to_bits(x: float) -> float:
    return x / math.log(2)


# The paper's Table 3 (Huang et al., arXiv:1809.04281v3, Sec. 4.2): what it measured, as the paper describes it.
# Its NLL values are not reproduced here: this project could not check them against the paper from its
# machines, and a number typed from memory is not a citation. Read them in the paper's Table 3.
PAPER_TABLE3 = {
    "caption": "Validation NLL for Piano-e-Competition dataset, with event-based representation with "
               "lengths L=2048",
    "data": "Piano-e-Competition performances, about 1,100 pieces, split 80/10/10",
    "crops": "random crops of 2,000-token sequences",
    "models": "6-layer Transformers, regular and relative attention, each global and local "
              "(local: blocks of 512), beside LSTM baselines",
    "finding": "relative attention (global or local) outperforms regular self-attention (global or local)",
}


def table3(rec: dict, results: dict[str, list[dict]], P: Profile, data) -> str:
    """The paper's Table 3 as the paper describes it (``PAPER_TABLE3``), then this book's rows beside it: the
    shipped piano model (its record) and this run's two decoders, each with its data, size and steps."""
    from ..models.registry import n_params

    lines = ["The paper's Table 3 (Huang et al. 2019; its values: read them in the paper):"]
    for k, v in PAPER_TABLE3.items():
        lines += textwrap.wrap(v, settings.WIDTH, initial_indent=f"  {k:8s} ", subsequent_indent=" " * 11)
    lines.append("")
    lines.append("This book: NLL in nats per event on held-out pieces, not the paper's data")
    lines.append(f"  {'model':34s} {'NLL':>6s} {'params':>10s} {'steps':>6s}")
    lines.append(f"  {'shipped piano-local (test)':34s} {rec['test_nll']:6.3f} {rec['params']:10,d} "
                 f"{rec['steps']:6d}")
    for name, runs in results.items():
        best = min(runs, key=lambda r: r["valid"])
        lines.append(f"  {'this run: ' + LABELS[name] + ' (valid)':34s} {best['valid']:6.3f} "
                     f"{n_params(best['model']):10,d} {best['hist'].step[-1]:6d}")
    lines += textwrap.wrap(f"the shipped model: {rec['data']}", settings.WIDTH, initial_indent="  ",
                           subsequent_indent="    ")
    lines += textwrap.wrap(f"this run: {data.source}", settings.WIDTH, initial_indent="  ",
                           subsequent_indent="    ")
    return "\n".join(lines)
