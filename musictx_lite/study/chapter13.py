"""Chapter 13's study: piano performances at 2,048 events, relative global against relative local attention.

Notebook: notebooks/13_piano.ipynb

- ``piano_data``: the data a profile trains on (the shared sample on a CPU, MAESTRO in Colab);
- ``event_baselines``: the unigram and smoothed n-grams over events, scored like the models;
- ``step_cost``: the time and peak memory of one training step at 2,048 events, on the device at hand;
- ``train_pair``: both decoders, several seeds, the same crops and budget; ``seed_table``, ``reading``;
- ``expression``: the shipped model's NLL on the same held-out pieces as performance and as score, per
  piece, and ``expression_differences``: their per-note differences with a paired bootstrap over pieces;
- ``pedal_use``: what a file's pedals do that the codec's on/off sustain pedal drops;
- ``midilike_vocab``: miditok's ``MIDILike`` vocabulary counted from its definition (miditok not needed);
- ``PAPER_TABLE3`` and ``table3``: the paper's Piano-e-Competition numbers beside ours.
"""
from __future__ import annotations

import ast
import inspect
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
from ..models.tasks import piece_nlls, sequence
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
    """Each model's valid NLL per event over seeds (mean, and the lowest and highest seed), its parameters,
    steps, training seconds per seed (evaluations excluded) and events per second of training, under the
    baselines."""
    from ..models.registry import n_params

    lines = [f"{'model':17s} {'NLL/event':>9s}  {'seeds (min..max)':>17s} {'params':>8s} {'steps':>5s} "
             f"{'s/seed':>7s} {'events/s':>9s}"]
    for name, runs in results.items():
        v = [r["valid"] for r in runs]
        lines.append(f"{LABELS[name]:17s} {np.mean(v):9.4f}  {min(v):8.4f}..{max(v):.4f} "
                     f"{n_params(runs[0]['model']):8,d} {runs[0]['hist'].step[-1]:5d} "
                     f"{np.mean([r['seconds'] for r in runs]):7.0f} "
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
    """The pieces of the shared sample's ``split`` in all three versions (performance, transcription,
    score): those of ``data``'s ``split`` where ``data`` is the sample (the split is by piece name, so the
    same), else (MAESTRO in the gpu profile) all of the sample's ``split``, which the shipped model, trained
    on the sample's transcriptions, never saw. A FileNotFoundError where the sample is not on this machine."""
    both = load_piano_sample(("maestro", "giantmidi", "scores"))
    keep = {q.piece for q in data[split]}
    return [p for p in both[split] if p.piece in keep] or list(both[split])


def expression(model, perfs: list, max_events: int | None = None) -> list[dict]:
    """The NLL of ``model`` on each version of held-out pieces: per version, the pieces, notes, events,
    events per note, NLL per event and per note (the same music, written with and without expression), and
    per piece (in the order of ``pieces``, the same for every version) the summed NLL (``piece_nll``), the
    notes (``piece_notes``: note-ons) and the events: what ``expression_differences`` resamples.
    ``max_events``: score only each performance's first events (quick runs)."""
    from ..io.performance import NOTE_OFF, NOTE_ON, VELOCITY, Performance

    rows = []
    for version in ("maestro", "giantmidi", "scores"):
        ps = sorted((p for p in perfs if p.name.startswith(version + "/")), key=lambda p: p.piece)
        if max_events is not None:
            ps = [Performance(p.name, p.notes, p.tokens[:max_events], p.piece, p.source) for p in ps]
        sums, counts = piece_nlls(model, ps)                               # nats and events per piece
        notes = np.array([int(((sequence(p) >= NOTE_ON) & (sequence(p) < NOTE_OFF)).sum()) for p in ps])
        events, total = int(counts.sum()), int(notes.sum())
        velocities = sum(int((sequence(p)[1:] >= VELOCITY).sum()) for p in ps)   # velocity events
        nll = float(sums.sum()) / events
        rows.append({"version": version, "pieces": len(ps), "notes": total, "events": events,
                     "events_per_note": events / total, "velocities_per_note": velocities / total,
                     "nll_event": nll, "nll_note": nll * events / total,
                     "piece_names": [p.piece for p in ps], "piece_nll": sums, "piece_notes": notes,
                     "piece_events": counts})
    return rows


def per_note_bootstrap(a: np.ndarray, a_notes: np.ndarray, b: np.ndarray, b_notes: np.ndarray,
                       n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """NLL per note of version a minus version b of the same pieces, and a 95% paired bootstrap interval
    over pieces: ``compare.paired_bootstrap`` with each version's own note counts (the versions of a piece
    have different numbers of notes). ``a``, ``b``: summed NLL per piece; ``a_notes``, ``b_notes``: notes
    per piece. Each resample draws pieces with replacement and keeps a piece's two versions together.
    With equal counts it is ``paired_bootstrap`` exactly."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a_notes, b_notes = np.asarray(a_notes, float), np.asarray(b_notes, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), (n, len(a)))                           # (n, pieces)
    diffs = a[idx].sum(1) / a_notes[idx].sum(1) - b[idx].sum(1) / b_notes[idx].sum(1)
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    return float(a.sum() / a_notes.sum() - b.sum() / b_notes.sum()), float(lo), float(hi)


PAIRS = (("scores", "maestro"), ("scores", "giantmidi"), ("maestro", "giantmidi"))


def expression_differences(rows: list[dict], n: int = 2000, seed: int = 0) -> list[dict]:
    """For each pair of versions in ``PAIRS``: NLL per note of the first minus the second, its 95% paired
    bootstrap interval over the pieces (``per_note_bootstrap``), and ``apart``: whether the interval
    excludes 0 (with one piece there is no interval, and nothing is apart)."""
    by = {r["version"]: r for r in rows}
    out = []
    for a, b in PAIRS:
        assert by[a]["piece_names"] == by[b]["piece_names"], "the versions must cover the same pieces"
        d, lo, hi = per_note_bootstrap(by[a]["piece_nll"], by[a]["piece_notes"], by[b]["piece_nll"],
                                       by[b]["piece_notes"], n=n, seed=seed)
        k = by[a]["pieces"]
        out.append({"a": a, "b": b, "diff": d, "low": lo, "high": hi, "pieces": k,
                    "apart": bool(k > 1 and (lo > 0 or hi < 0))})
    return out


def differences_table(diffs: list[dict]) -> str:
    """``expression_differences`` as a table."""
    lines = [f"{'NLL per note, a minus b':52s} {'a - b':>7s}  {'95% interval (pieces)':>21s}"]
    for r in diffs:
        what = f"{VERSION_LABELS[r['a']]} - {VERSION_LABELS[r['b']]}"
        ci = f"[{r['low']:+.3f}, {r['high']:+.3f}]" if r["pieces"] > 1 else "(one piece: none)"
        lines.append(f"{what:52s} {r['diff']:+7.3f}  {ci:>21s}")
    return "\n".join(lines)


def expression_reading(rows: list[dict], diffs: list[dict]) -> str:
    """What the per-note differences support, in words: a difference is named only where its interval
    over pieces excludes 0; the note counts and the model's training domain are said beside it."""
    by = {r["version"]: r for r in rows}
    k = by["scores"]["pieces"]
    counts = ", ".join(f"{SHORT[v]} {by[v]['notes']:,}" for v in ("maestro", "giantmidi", "scores"))
    same = len({by[v]["notes"] for v in by}) == 1
    text = (f"The three versions {'have' if same else 'do not have'} the same number of notes ({counts} "
            f"over {k} piece{'s' * (k != 1)}): per note makes their costs comparable, not the music "
            f"equal. ")
    said = []
    for r in diffs:
        a, b = SHORT[r["a"]], SHORT[r["b"]]
        if r["apart"]:
            said.append(f"a note of the {a} costs {abs(r['diff']):.2f} nats "
                        f"{'less' if r['diff'] < 0 else 'more'} than one of the {b} "
                        f"(95% interval over pieces {r['low']:+.2f} to {r['high']:+.2f})")
        elif k > 1:
            said.append(f"the {a} and the {b} are not ranked (their interval, {r['low']:+.2f} to "
                        f"{r['high']:+.2f}, holds 0)")
    if k < 2:
        text += "With one piece there is no interval over pieces, and this run ranks nothing. "
    else:
        text += f"Over these {k} pieces, " + "; ".join(said) + ". "
        if k < 10:
            text += (f"An interval from {k} pieces is itself rough: a few more pieces could move it. ")
    text += ("And the model trained on transcriptions only (GiantMIDI-Piano's, of other pieces): the MAESTRO "
             "performances (captured by the piano's own sensors, not transcribed from a recording) and the "
             "scores (MIDI files made from the scores, not played) are outside its training domain, so their costs "
             "mix what each version writes down with how unfamiliar it is to this model, and these numbers "
             "do not separate the two.")
    return text


def pedal_use(perfs: list) -> list[dict]:
    """Per performance (its ``source`` file read again): the changes of the sustain pedal (controller 64),
    how many of them lie strictly between fully up (0) and fully down (127), a half pedal the codec reads
    as up or down (at 64), and the changes of the sostenuto (66) and una corda (67) pedals, which it drops."""
    from ..io.midi import open_midi

    out = []
    for p in perfs:
        cc = [c for i in open_midi(p.source).instruments if not i.is_drum for c in i.control_changes]
        sustain = [c.value for c in cc if c.number == 64]
        out.append({"name": p.name, "sustain": len(sustain), "between": sum(0 < v < 127 for v in sustain),
                    "sostenuto": sum(c.number == 66 for c in cc), "una_corda": sum(c.number == 67 for c in cc)})
    return out


VERSION_LABELS = {"maestro": "MAESTRO performance", "giantmidi": "GiantMIDI transcription",
                  "scores": "score (MIDI)"}
SHORT = {"maestro": "MAESTRO performance", "giantmidi": "transcription", "scores": "score"}


def expression_table(rows: list[dict]) -> str:
    """``expression`` rows as a table: notes, events, events and velocity events per note, NLL."""
    lines = [f"{'version':24s} {'notes':>7s} {'events':>8s} {'ev/note':>7s} {'vel/note':>8s} "
             f"{'NLL/event':>9s} {'NLL/note':>8s}"]
    for r in rows:
        lines.append(f"{VERSION_LABELS[r['version']]:24s} {r['notes']:7,d} {r['events']:8,d} "
                     f"{r['events_per_note']:7.2f} {r['velocities_per_note']:8.2f} "
                     f"{r['nll_event']:9.3f} {r['nll_note']:8.3f}")
    return "\n".join(lines)


def version_traits(perfs: list) -> list[dict]:
    """Per version of ``perfs`` (``maestro``, ``giantmidi``, ``scores``): the pieces, how many of their files
    move the sustain pedal (``pedal_use``), and the fewest and most distinct velocities a file's notes use."""
    uses = {u["name"]: u for u in pedal_use(perfs)}
    out = []
    for version in ("maestro", "giantmidi", "scores"):
        ps = [p for p in perfs if p.name.startswith(version + "/")]
        levels = [len(np.unique(p.notes[:, 3])) for p in ps]
        out.append({"version": version, "pieces": len(ps), "pedal": sum(uses[p.name]["sustain"] > 0 for p in ps),
                    "levels_min": min(levels), "levels_max": max(levels)})
    return out


def midilike_vocab(pitch_range=(0, 127), num_velocities: int = 32, beat_res=None,
                   special_tokens=("PAD", "BOS"), use_pitchdrum_tokens: bool = False,
                   drums_pitch_range=(27, 88)) -> dict[str, int]:
    """The size of miditok's ``MIDILike`` vocabulary (version 3), counted from its definition, miditok not
    needed: a NoteOn and a NoteOff per pitch of ``pitch_range`` (both ends included, as miditok 3.0.4 on
    reads it), one Velocity per bin, a TimeShift per duration of ``beat_res`` (miditok's duration tuples:
    every (beat, position) of each range of beats at its resolution, plus the range's end, less the
    duration 0), the special tokens, and, where ``use_pitchdrum_tokens`` (miditok's default: on), a
    DrumOn and a DrumOff per drum pitch. Chords, rests, tempos, time signatures, programs, pedals and pitch
    bends are off, as miditok's defaults have them."""
    beat_res = beat_res or {(0, 2): 50}
    durations = [(beat, pos, res) for (b0, b1), res in beat_res.items() for beat in range(b0, b1)
                 for pos in range(res)]
    last = max(max(beat_res))
    durations.append((last, 0, beat_res[max(beat_res)]))        # the range's end: 2 beats here
    del durations[0]                                             # no shift of 0
    pitches = pitch_range[1] - pitch_range[0] + 1
    drums = drums_pitch_range[1] - drums_pitch_range[0] + 1 if use_pitchdrum_tokens else 0
    out = {"special": len(special_tokens), "NoteOn": pitches, "NoteOff": pitches,
           "TimeShift": len(durations), "Velocity": num_velocities, "DrumOn/DrumOff": 2 * drums}
    out["total"] = sum(out.values())
    out["shortest shift (beats)"] = min(b + p / r for b, p, r in durations)
    out["longest shift (beats)"] = max(b + p / r for b, p, r in durations)
    return out


def source_without_docstring(fn) -> str:
    """``fn``'s source with its docstring left out: the code alone."""
    src = textwrap.dedent(inspect.getsource(fn))
    body = ast.parse(src).body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        lines = src.splitlines(keepends=True)
        del lines[body[0].lineno - 1: body[0].end_lineno]
        src = "".join(lines)
    return src


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
    shipped piano model (its record) and this run's two decoders (the mean over their seeds, never the best
    seed: choosing the best on the split it reports would flatter it), each with its data, size and steps."""
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
        valid = [r["valid"] for r in runs]
        lines.append(f"  {'this run: ' + LABELS[name] + ' (valid)':34s} {np.mean(valid):6.3f} "
                     f"{n_params(runs[0]['model']):10,d} {runs[0]['hist'].step[-1]:6d}  "
                     f"[{min(valid):.3f}, {max(valid):.3f}]")
    n_seeds = {len(runs) for runs in results.values()}
    lines.append(f"  this run's rows: the mean over {'/'.join(map(str, sorted(n_seeds)))} "
                 f"seed{'' if n_seeds == {1} else 's'}, "
                 "[the lowest, the highest] beside it")
    lines += textwrap.wrap(f"the shipped model: {rec['data']}", settings.WIDTH, initial_indent="  ",
                           subsequent_indent="    ")
    lines += textwrap.wrap(f"this run: {data.source}", settings.WIDTH, initial_indent="  ",
                           subsequent_indent="    ")
    return "\n".join(lines)
