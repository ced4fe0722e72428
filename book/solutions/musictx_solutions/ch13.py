"""Chapter 13 exercises: the time shifts of a gap, the sustain pedal folded into the notes, and what a
transposition moves in a stream of events.

Notebook: notebooks/13_piano.ipynb
"""
from __future__ import annotations

import textwrap

import numpy as np
import torch

from musictx_lite import settings
from musictx_lite.classroom.checks.ch13 import (
    SUSTAIN_MISTAKES,
    _by_start,
    _gap_events,
    _random_performance,
    _sustain_cases,
)
from musictx_lite.io.midi import note_name
from musictx_lite.io.performance import (
    BOS,
    MAX_SHIFT,
    NOTE_ON,
    TICK,
    TIME_SHIFT,
    decode,
    describe,
    encode,
    sustained,
)
from musictx_lite.models.tasks import transposed_events

__all__ = ["time_shifts", "sustain", "transpose_events", "exercise_13_1", "exercise_13_2", "exercise_13_3"]


def time_shifts(ticks: int) -> list[int]:
    """The events that move time on by ``ticks`` ticks of 10 ms, as ``encode`` writes them: a shift of 100
    ticks (1 s, the longest) while more than that is left, then one shift of the rest; [] for 0."""
    out = []
    while ticks > 0:
        n = min(ticks, MAX_SHIFT)                     # 1 .. 100 ticks in one event
        out.append(TIME_SHIFT + n - 1)                # TIME_SHIFT + n - 1 moves time on by n ticks
        ticks -= n
    return out


def sustain(notes: np.ndarray, pedal: list[tuple[float, int]]) -> np.ndarray:
    """Notes (n, 4) [start s, end s, pitch, velocity] with the sustain pedal applied, sorted by start.

    ``pedal``: (time s, value) changes of controller 64, in time order, down at 64 and above. A note whose
    key comes up while the pedal is down (its last change at or before the release says so) ends when the
    pedal next comes up; if it never does, at the pedal's last change, when that comes after the release.
    Then a key struck again ends the note before it at that strike; a note left with no length is dropped."""
    out = np.array(notes, dtype=np.float64).reshape(-1, 4)
    out = out[np.argsort(out[:, 0], kind="stable")]                  # by start
    for i, end in enumerate(out[:, 1].tolist()):
        before = [v for t, v in pedal if t <= end]                   # the pedal's changes up to the release
        if before and before[-1] >= 64:                              # down when the key comes up
            ups = [t for t, v in pedal if t > end and v < 64]
            out[i, 1] = ups[0] if ups else max(end, pedal[-1][0])
    ends = out[:, 1].copy()                                          # the ends with the pedal, before any cut
    for i in range(len(out)):
        later = [j for j in range(i + 1, len(out)) if out[j, 2] == out[i, 2]]
        if later and out[later[0], 0] < ends[i]:                     # struck again while still sounding
            out[i, 1] = out[later[0], 0]
    return out[out[:, 1] > out[:, 0]]


def transpose_events(tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """Events (a 1-D LongTensor) moved by ``shift`` semitones: note-ons and note-offs move, time shifts,
    velocities, PAD and BOS stay. A new tensor; ``tokens`` is left as it was."""
    keys = (tokens >= NOTE_ON) & (tokens < TIME_SHIFT)               # NOTE_ON p and NOTE_OFF p: 2 .. 257
    out = tokens.clone()
    out[keys] += shift
    return out


def exercise_13_1(ticks: int = 250) -> list[int]:
    out = time_shifts(ticks)
    print(f"a gap of {ticks} ticks ({ticks * TICK:g} s): {', '.join(describe(out)) or 'no event'}")
    for t in sorted({*range(0, 501), ticks}):
        assert time_shifts(t) == _gap_events(t), t
    print("time_shifts equals what encode writes between two notes for every gap of 0..500 ticks"
          + (f" and {ticks}" if ticks > 500 else ""))
    for seconds in (0.01, 0.5, 1.0, 1.01, 2.5, 10.0):
        t = round(seconds / TICK)
        print(f"  {seconds:5.2f} s of silence: {len(time_shifts(t)):2d} event{'s' * (len(time_shifts(t)) != 1)}")
    for t in range(0, 501):                           # the count: one event per started second
        assert len(time_shifts(t)) == -(-t // MAX_SHIFT)
    _say(f"How many: a silence of g ticks costs ceil(g / {MAX_SHIFT}) events (0 for g = 0), checked for "
         "g = 0..500.")
    ways = _spellings(ticks)
    _say(f"Why one way only: the same {ticks} ticks could be spelt {_count(ways)} ways (any sequence of "
         f"shifts of 1 to {MAX_SHIFT} ticks adding up to them), and decode would read each as the same "
         "silence. Writing one of them only makes encode a function: each performance is one sequence "
         "of events, and its probability under a model is that sequence's.")
    _say("If it did not, the model would have to learn that all these spellings mean one silence, and "
         "share that silence's probability among them: spread evenly, the spelling written would keep "
         f"one share in {_count(ways)}, {np.log(float(ways)):.0f} nats lost on "
         "this one gap, unless the score summed over every spelling.")
    return out


def _say(text: str) -> None:
    """Print a sentence wrapped to the book's width."""
    print(textwrap.fill(text, settings.WIDTH))


def _spellings(ticks: int) -> int:
    """How many sequences of time shifts (1 to MAX_SHIFT ticks each) add up to ``ticks``."""
    ways = [1] + [0] * ticks                          # ways[t]: spellings of t ticks
    for t in range(1, ticks + 1):
        ways[t] = sum(ways[t - n] for n in range(1, min(t, MAX_SHIFT) + 1))
    return ways[ticks]


def _count(n: int) -> str:
    """A count in words a reader can take in: exact when short, else its order of magnitude."""
    return f"{n:,}" if n < 10**9 else f"about {n / 10 ** (len(str(n)) - 1):.1f} x 10^{len(str(n)) - 1}"


def _why_ended(note: np.ndarray, end: float, notes: np.ndarray, pedal) -> str:
    """Why a sustained note ends where it does, in words."""
    if end == note[1]:
        return "its own release" if pedal else "its own release: no pedal"
    if any((notes[:, 2] == note[2]) & (notes[:, 0] == end)):
        return "its key struck again"
    if any(t == end and v < 64 for t, v in pedal):
        return "the pedal comes up"
    return "the pedal's last change: it never comes up"


def exercise_13_2(notes: np.ndarray | None = None, pedal: list[tuple[float, int]] | None = None) -> np.ndarray:
    if notes is None:                                 # the chapter's example
        notes = np.array([[0.0, 0.5, 60, 80], [1.0, 1.2, 64, 80], [1.5, 1.7, 60, 80]])
        pedal = [(0.2, 127), (2.0, 0)]
    pedal = list(pedal or [])
    held = sustain(notes, pedal)
    assert np.allclose(held, sustained(np.asarray(notes, dtype=np.float64), pedal), atol=1e-9)
    print("the pedal: " + ", ".join(f"{'down' if v >= 64 else 'up'} at {t:g} s" for t, v in pedal))
    for note in np.asarray(notes, dtype=np.float64)[np.argsort(np.asarray(notes)[:, 0], kind="stable")]:
        end = held[(held[:, 0] == note[0]) & (held[:, 2] == note[2]), 1]
        now = f"{end[0]:.2f} s ({_why_ended(note, end[0], held, pedal)})" if len(end) else "dropped (no length left)"
        print(f"  {note_name(note[2]):4s} struck at {note[0]:.2f} s, key up at {note[1]:.2f} s: sounds until {now}")
    rng = np.random.default_rng(0)
    for _ in range(20):
        n, p = _random_performance(rng)
        assert np.allclose(_by_start(sustain(n, p)), _by_start(sustained(n, p)), atol=1e-9)
    print("sustain equals perf.sustained on 20 random performances of 40 notes with their pedal")
    _why_pedal_first()
    return held


def _why_pedal_first() -> None:
    """The two why questions of exercise 13.2, answered on small cases."""
    down = [(0.2, 127), (2.0, 0)]
    held_key = encode(sustain(np.array([[0.0, 2.0, 60, 80]]), []))             # key held 0 .. 2 s
    pedalled = encode(sustain(np.array([[0.0, 0.5, 60, 80]]), down))           # key up at 0.5, pedal down
    same = np.array_equal(held_key, pedalled)
    _say(f"Held or pedalled? A C4 held down for 2 s encodes as {' '.join(describe(held_key[1:]))}; a C4 "
         f"released at 0.5 s under a pedal that comes up at 2 s as "
         + ("the same events. No: once the pedal is folded in, the events cannot tell them apart, nor say "
            "when the pedal moved." if same else f"{' '.join(describe(pedalled[1:]))}."))
    notes = np.array([[0.0, 0.5, 60, 80], [1.0, 1.2, 64, 80], [1.5, 1.7, 60, 80]])     # the chapter's case
    wrong = _sustain_variant(sustain(notes, []), down, restrike=False)       # re-strike first, then the pedal
    c4 = wrong[wrong[:, 2] == 60]
    overlap = max(0.0, c4[0, 1] - c4[1, 0])
    fixed = np.array_equal(encode(wrong), encode(sustain(notes, down)))
    _say(f"Why after the pedal: the pedal is what makes a key's notes overlap. Re-strike first finds "
         f"nothing to cut in the chapter's example (C4 is up at 0.5 s, struck again at 1.5 s); then the "
         f"pedal holds the first C4 to {c4[0, 1]:.2f} s, and C4 sounds twice at once for {overlap:.2f} s, "
         f"which one key, with one hammer and one damper, cannot do. Pedal first, the re-strike ends it at "
         f"{sustain(notes, down)[0, 1]:.2f} s. "
         + ("(encode happens to write the same events either way here, as it too ends a note where its "
            "key starts again; the notes themselves, which to_midi and the piano roll read, are wrong.)"
            if fixed else "The events differ too."))


def exercise_13_3(events=None, shift: int = 2, n_show: int = 10) -> torch.Tensor:
    if events is None:                                # a C major chord, spread, then a G
        events = encode(np.array([[0.0, 0.5, 60, 70], [0.02, 0.5, 64, 60], [0.04, 0.5, 67, 60],
                                  [0.6, 1.6, 67, 90]]))
    events = torch.as_tensor(np.asarray(events)).long()
    before = events.clone()
    up = transpose_events(events, shift)
    assert torch.equal(up, transposed_events(events, shift)) and torch.equal(events, before)
    was, now = describe(events[:n_show]), describe(up[:n_show])
    print(f"the first {min(n_show, len(events))} events, then {shift:+d} semitones:")
    for a, b in zip(was, now):
        print(f"  {a:12s} -> {b}")
    keys = ((events >= NOTE_ON) & (events < TIME_SHIFT)).sum().item()
    n = len(events) - int(len(events) > 0 and int(events[0]) == BOS)            # the BOS is no event of the music
    print(f"{keys:,} of {n:,} events moved: the note-ons and note-offs; time shifts and velocities stay")
    notes = decode(events)
    pitches = notes[:, 2]
    if len(notes) and 0 <= pitches.min() + shift and pitches.max() + shift <= 127:
        moved = notes.copy()
        moved[:, 2] += shift
        assert np.array_equal(decode(up), moved)              # decode sorts; one shift keeps the order
        print(f"decoded: the same {len(notes):,} notes, at the same times and loudness, each {shift:+d} semitones")
    top = torch.tensor([NOTE_ON + 127])
    print(f"MIDI's top pitch, 127 (G9, far above the piano's top key, C8 = 108), up a semitone: "
          f"{describe(top)[0]} -> {describe(transposed_events(top, 1))[0]}: the id runs into the note-offs, "
          "so EventCrops draws only the shifts that keep every pitch in MIDI's range 0..127")
    return up


# ----------------------------------------------------------------------------- what check_13_2 compares with

def _sustain_variant(notes, pedal, use_pedal=True, restrike=True, until="up", state_at="end", never="last"):
    """``sustain`` with one of a student's likely mistakes."""
    out = np.array(notes, dtype=np.float64)
    out = out[np.argsort(out[:, 0], kind="stable")]
    for i, (start, end) in enumerate(out[:, :2].tolist()):
        at = end if state_at == "end" else start
        before = [v for t, v in pedal if t <= at]
        if use_pedal and before and before[-1] >= 64:
            later = [t for t, v in pedal if t > end and (v < 64 or until == "change")]
            out[i, 1] = later[0] if later else (max(end, pedal[-1][0]) if never == "last" else end)
    ends = out[:, 1].copy()
    for i in range(len(out) if restrike else 0):
        later = [j for j in range(i + 1, len(out)) if out[j, 2] == out[i, 2]]
        if later and out[later[0], 0] < ends[i]:
            out[i, 1] = out[later[0], 0]
    return out[out[:, 1] > out[:, 0]]


MISTAKE_ARGS = {"never": dict(never="keep"), "no_pedal": dict(use_pedal=False), "no_restrike": dict(restrike=False),
                "next_change": dict(until="change"), "state_at_start": dict(state_at="start")}


def expected() -> dict:
    """What check_13_2 names a mistake by (``musictx_solutions.expected``): per mistake of ``SUSTAIN_MISTAKES``
    ({case: the ends, sorted by (start, pitch)}), its notes' ends on each hand case where they differ from the
    right ones, and on the first random performance where they differ when no hand case shows the mistake."""
    out = {}
    for key in SUSTAIN_MISTAKES:
        out[key] = {}
        for case, (name, notes, pedal) in enumerate(_sustain_cases()):
            if name.startswith("random") and out[key]:
                break
            ends = _by_start(_sustain_variant(notes, pedal, **MISTAKE_ARGS[key]))[:, 1]
            if not np.allclose(ends, _by_start(sustain(notes, pedal))[:, 1], rtol=0, atol=1e-9):
                out[key][str(case)] = ends.tolist()
                if name.startswith("random"):
                    break
    return {"sustain_mistakes": out}
