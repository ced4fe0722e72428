"""Week 12: piano performances as events (chapter 13): the time a window of events spans, nats per note, how
many keys are down, and a chorale played as a performance."""
from __future__ import annotations

import numpy as np

from ..spec import Assignment, Question, Written

VOCAB = ("PAD 0, BOS 1, `NOTE_ON` of key p: 2 + p, `NOTE_OFF` of key p: 130 + p (p = 0..127), `TIME_SHIFT` of n "
         "ticks of 10 ms: 258 + n - 1 (n = 1..100), `VELOCITY` bin b: 358 + b (b = 0..31); the same numbers as "
         "`musictx_lite.io.performance` (`NOTE_ON`, `NOTE_OFF`, `TIME_SHIFT`, `VELOCITY`)")


def performance_tokens(rng, n_notes, chords=False):
    """Events of a random performance (BOS first), as ``encode`` writes them: for the hidden cases."""
    from musictx_lite.io import performance as perf

    gaps = rng.exponential(0.12, n_notes)
    gaps[rng.random(n_notes) < 0.05] *= 12                           # now and then a silence of over a second
    starts = np.cumsum(gaps)
    if chords:                                                        # notes struck together, held long
        starts = np.repeat(starts[: (n_notes + 3) // 4], 4)[:n_notes]
    ends = starts + rng.uniform(0.03, 2.5 if chords else 1.2, n_notes)
    notes = np.column_stack([starts, ends, rng.integers(30, 100, n_notes), rng.integers(15, 127, n_notes)])
    return perf.encode(notes.astype(float))


# ----------------------------------------------------------------------------- q1: seconds in a window of events


def window_seconds(tokens, n):
    """The reference: for each position i, the seconds of time shift among the events max(1, i - n + 1)..i."""
    import numpy as np

    t = np.asarray(tokens, dtype=np.int64)
    ticks = np.where((t >= 258) & (t < 358), t - 257, 0)
    ticks[0] = 0
    c = np.concatenate([[0], np.cumsum(ticks)])                       # c[i + 1]: ticks of positions 0..i
    i = np.arange(len(t))
    first = np.maximum(i - n + 1, 1)
    return (c[i + 1] - c[first]) * 0.01


def window_cases(variant, rng):
    out = [{"tokens": np.array([1], dtype=np.int64), "n": 4}]
    for n_notes, n in ((3, 1), (40, 16), (int(rng.integers(80, 150)), 128)):
        out.append({"tokens": performance_tokens(rng, n_notes), "n": n})
    return out


# ----------------------------------------------------------------------------- q2: nats per note


def nats_per_note(event_nll, tokens):
    """The reference: a performance's NLL per event, per note, and the shares of it spent on time shifts and on
    velocity events."""
    import numpy as np

    t = np.asarray(tokens, dtype=np.int64)[1:]
    nll = np.asarray(event_nll, dtype=float)
    total = nll.sum()
    notes = int(((t >= 2) & (t < 130)).sum())
    shift = (t >= 258) & (t < 358)
    velocity = t >= 358
    return {"per_event": float(total / len(t)), "per_note": float(total / notes),
            "timing": float(nll[shift].sum() / total), "velocity": float(nll[velocity].sum() / total)}


def note_cases(variant, rng):
    out = []
    for n_notes in (1, 5, 60, int(rng.integers(100, 200))):
        tokens = performance_tokens(rng, n_notes)
        out.append({"event_nll": rng.gamma(2.0, 1.5, len(tokens) - 1), "tokens": tokens})
    return out


# ----------------------------------------------------------------------------- q3: a chorale as a performance


def chorale_events(pieces, tick16, velocities):
    """The reference: the training chorales ``pieces`` played as performances (a 16th is ``tick16`` ticks, voice
    v at ``velocities[v]``), encoded as events: the events of each kind, and events per second."""
    import numpy as np

    from musictx_lite import load_data
    from musictx_lite.io import performance as perf

    data = load_data("chorales")
    counts = {"note_on": 0, "note_off": 0, "time_shift": 0, "velocity": 0}
    seconds = 0.0
    for i in pieces:
        g = data.train[i].pitches
        notes = []
        for v in range(4):
            line, t = g[:, v], 0
            while t < len(line):
                u = t
                while u + 1 < len(line) and line[u + 1] == line[t]:
                    u += 1
                if line[t] >= 0:
                    notes.append([t * tick16 / 100, (u + 1) * tick16 / 100, line[t], velocities[v]])
                t = u + 1
        ev = perf.encode(np.array(notes, dtype=float))[1:]
        counts["note_on"] += int(((ev >= 2) & (ev < 130)).sum())
        counts["note_off"] += int(((ev >= 130) & (ev < 258)).sum())
        counts["time_shift"] += int(((ev >= 258) & (ev < 358)).sum())
        counts["velocity"] += int((ev >= 358).sum())
        seconds += len(g) * tick16 / 100
    return {**counts, "per_second": sum(counts.values()) / seconds}


def events_variant(rng):
    return {"pieces": sorted(rng.choice(197, size=4, replace=False).tolist()),
            "tick16": int(rng.integers(10, 31)),
            "velocities": [int(v) for v in rng.integers(30, 111, 4)]}


# ----------------------------------------------------------------------------- q4: keys down


def polyphony(tokens):
    """The reference: the most keys down at once, and the mean number of keys down over the performance's time."""
    down, peak, area, ticks = set(), 0, 0, 0
    for tok in [int(x) for x in tokens][1:]:
        if 2 <= tok < 130:
            down.add(tok - 2)
        elif 130 <= tok < 258:
            down.discard(tok - 130)
        elif 258 <= tok < 358:
            area += len(down) * (tok - 257)
            ticks += tok - 257
        peak = max(peak, len(down))
    return {"max": peak, "mean": area / ticks if ticks else 0.0}


def polyphony_cases(variant, rng):
    out = [{"tokens": np.array([1], dtype=np.int64)}]
    for n_notes, chords in ((1, False), (30, False), (int(rng.integers(60, 120)), True)):
        out.append({"tokens": performance_tokens(rng, n_notes, chords)})
    return out


ASSIGNMENT = Assignment(
    week=12, title="Piano performances as events", chapters=(13,),
    intro="Chapter 13 writes a performance as a stream of events. This assignment reads such streams: the time "
          "a window of events spans, what a note costs in nats, how many keys are down, and what a Bach chorale "
          "costs when it is played as a performance.",
    variant=events_variant,
    setup="import numpy as np\nimport torch",
    questions=(
        Question(
            "q1", 2, "How much music does a model see in a window of events? The events of a performance: "
            f"{VOCAB}. `tokens` is a 1-D NumPy int array of events, BOS first, as `encode` writes them. For each "
            "position i, the window of the last `n` events up to i is positions max(1, i - n + 1) .. i (BOS "
            "is never in it; for i = 0 it is empty). Write `window_seconds(tokens, n)` returning a float array "
            "(len(tokens),): at each position, the seconds that the time shifts in its window add up to.",
            "window_seconds",
            "def window_seconds(tokens, n):\n    raise NotImplementedError",
            "tok = np.array([1, 372, 62, 307, 357, 190, 258])   # BOS, velocity, C4 on, 50 ticks, 100 ticks, off, 1\n"
            "assert np.allclose(window_seconds(tok, 2), [0, 0, 0, 0.5, 1.5, 1.0, 0.01])\n"
            "assert np.allclose(window_seconds(tok, 100), [0, 0, 0, 0.5, 1.5, 1.5, 1.51])\n"
            "assert np.allclose(window_seconds(np.array([1]), 3), [0.0])\n"
            "print('q1: public tests pass')",
            window_seconds, window_cases),
        Question(
            "q2", 2, "Per event, a performance and a score are not comparable; per note they are (chapter 13, "
            f"*What expression adds*). The events: {VOCAB}. `tokens` is a 1-D NumPy int array of a "
            "performance's events, BOS first, with at least one note-on; `event_nll` a float array (len(tokens) "
            "- 1,): the NLL, in nats, that a model gave each event after BOS. Write `nats_per_note(event_nll, "
            "tokens)` returning a dict of floats: `'per_event'`, the mean NLL per event; `'per_note'`, the summed "
            "NLL over the number of note-on events; `'timing'` and `'velocity'`, the shares of the summed NLL "
            "spent on time-shift events and on velocity events.",
            "nats_per_note",
            "def nats_per_note(event_nll, tokens):\n    raise NotImplementedError",
            "tok = np.array([1, 372, 62, 66, 307, 190, 194])\n"
            "out = nats_per_note(np.array([1.0, 2.0, 1.0, 4.0, 0.5, 0.5]), tok)\n"
            "assert set(out) == {'per_event', 'per_note', 'timing', 'velocity'}\n"
            "assert np.isclose(out['per_event'], 1.5) and np.isclose(out['per_note'], 4.5)\n"
            "assert np.isclose(out['timing'], 4 / 9) and np.isclose(out['velocity'], 1 / 9)\n"
            "print('q2: public tests pass')",
            nats_per_note, note_cases),
        Question(
            "q3", 3, "A chorale played as a performance. Take the training chorales numbered "
            "`VARIANT['pieces']` of the embedded corpus (`musictx_lite.load_data('chorales').train[i].pitches`, "
            "(steps, 4), S A T B, -1 for a rest). In each voice v, a note is a run of one pitch (>= 0) over "
            "consecutive steps: the same pitch on consecutive steps is one note, a change of pitch or a rest ends "
            "it. A note from step a to step b - 1 (b the step after its last) becomes the row `[a * tick16 / "
            "100, b * tick16 / 100, pitch, VARIANT['velocities'][v]]` (seconds: a 16th lasts "
            "`VARIANT['tick16']` ticks of 10 ms). Encode each piece's notes of all four voices, a float array "
            "(n, 4), with `musictx_lite.io.performance.encode`, and drop its BOS. Set `CHORALE_EVENTS` to a "
            "dict: `'note_on'`, `'note_off'`, `'time_shift'` and `'velocity'`, the number of events of each "
            "kind (ints, summed over your pieces), and `'per_second'`, a float: all those events over the total "
            "duration, a piece lasting `len(pitches) * tick16 / 100` seconds.",
            "CHORALE_EVENTS",
            "from musictx_lite import load_data\nfrom musictx_lite.io import performance as perf\n\n"
            "CHORALE_EVENTS = None   # a dict, for your VARIANT",
            "assert isinstance(CHORALE_EVENTS, dict)\n"
            "assert set(CHORALE_EVENTS) == {'note_on', 'note_off', 'time_shift', 'velocity', 'per_second'}\n"
            "assert CHORALE_EVENTS['note_on'] == CHORALE_EVENTS['note_off'] > 0\n"
            "assert 0 < CHORALE_EVENTS['velocity'] <= CHORALE_EVENTS['note_on']\n"
            "print('q3: public tests pass')",
            chorale_events, timeout=20),
        Question(
            "q4", 3, "How many keys are down? The events: "
            f"{VOCAB}. `tokens` is a 1-D NumPy int array, BOS first. Read the events in order, keeping the set "
            "of keys that are down: a note-on puts its key down (a key already down stays down: one string per "
            "key), a note-off lifts it (a key that is not down: nothing changes), a velocity event changes no "
            "key, and a time shift of n ticks lets n ticks pass with the keys as they are. Write "
            "`polyphony(tokens)` returning a dict: `'max'`, an int, the most keys down after any event (0 if "
            "none), and `'mean'`, a float, the number of keys down averaged over the time that the time shifts "
            "let pass (each shift weighted by its ticks), 0.0 if there is no time shift.",
            "polyphony",
            "def polyphony(tokens):\n    raise NotImplementedError",
            "tok = np.array([1, 372, 62, 66, 267, 69, 267, 194, 197, 276, 201, 190])   # C4 E4, 10 ticks, G4, ...\n"
            "out = polyphony(tok)\n"
            "assert out == {'max': 3, 'mean': (2 * 10 + 3 * 10 + 1 * 19) / 39}\n"
            "assert polyphony(np.array([1])) == {'max': 0, 'mean': 0.0}\n"
            "print('q4: public tests pass')",
            polyphony, polyphony_cases),
    ),
    written=Written(
        "Read your `CHORALE_EVENTS` against chapter 13. In at most 200 words: how many events per second does "
        "your chorale cost as a performance, against the raster's tokens per second at the same tempo (4 tokens "
        "per 16th of `VARIANT['tick16']` ticks), and against the piano performances' rate that the chapter "
        "prints? Which kind of event takes the largest share in your counts, and why does a chorale played with "
        "four loudnesses spend so many velocity events, when Oore et al.'s scheme writes one only when the bin "
        "changes? Finally, how many seconds of your chorale would a local-attention window of N = 128 events "
        "cover, against the raster's 128 tokens?",
        ((1, "computes the raster's rate, 4 / (tick16 / 100) tokens per second, and sets the student's per_second "
             "beside it and beside the piano's rate printed in the chapter, with the right order between them"),
         (1, "names the largest kind correctly from the counts, and explains the velocity events: four voices at "
             "different loudnesses take turns at each chord, so the bin changes between note-ons of one tick"),
         (1, "sees that the event vocabulary spends events only where something happens (held notes cost "
             "nothing, silence costs shifts), while the raster spends 4 tokens per step whatever happens"),
         (1, "turns N = 128 into seconds with the student's own per_second (128 / per_second), and compares with "
             "128 raster tokens = 32 sixteenths = 32 * tick16 / 100 s"))),
)
