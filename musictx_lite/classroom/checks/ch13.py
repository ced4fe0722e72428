"""Chapter 13's exercise checkers: the time shifts of a gap (13.1), the sustain pedal folded into the notes (13.2),
what a transposition moves in a stream of events (13.3).

Notebook: notebooks/13_piano.ipynb
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ...io.midi import note_name
from ...io.performance import (
    BOS,
    NOTE_OFF,
    NOTE_ON,
    PAD,
    TICK,
    TIME_SHIFT,
    VELOCITY,
    VOCAB_SIZE,
    describe,
    encode,
    sustained,
)
from ...models.tasks import transposed_events
from .. import grading

__all__ = ["check_13_1", "check_13_2", "check_13_3"]


def _gap_events(ticks: int) -> list[int]:
    """What ``encode`` writes between two notes ``ticks`` ticks apart: C4 for 10 ticks, then D4 ``ticks``
    after C4 comes up, both of one velocity (so no velocity event comes between them)."""
    on = 10 + ticks
    tokens = encode(np.array([[0.0, 10 * TICK, 60, 80], [on * TICK, (on + 5) * TICK, 62, 80]])).tolist()
    return tokens[tokens.index(NOTE_OFF + 60) + 1: tokens.index(NOTE_ON + 62)]


def _words(ids: list[int], limit: int = 6) -> str:
    """Event ids in words (``describe``), a token outside the vocabulary by its number; long lists cut."""
    words = [describe([t])[0] if 0 <= t < VOCAB_SIZE else f"token {t}" for t in ids[:limit]]
    if len(ids) > limit:
        words.append(f"... ({len(ids)} events)")
    return "[" + ", ".join(words) + "]"


def _ids(what: str, x) -> list[int]:
    """``x`` (a list, an array, a tensor of whole numbers) as a list of ints, or a fail line."""
    if x is None:
        raise grading.Fail(f"{what} is None: return the list of event ids")
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise grading.Fail(f"{what} should be a list of event ids (ints), got {type(x).__name__}") from None
    if a.ndim != 1:
        raise grading.Fail(f"{what} should be a flat list of event ids, got " +
                           ("one number: return a list, even of one event" if a.ndim == 0 else f"shape {a.shape}"))
    if not np.all(a == np.round(a)):
        raise grading.Fail(f"{what} holds numbers that are not whole: {a[a != np.round(a)][0]:g}")
    return [int(v) for v in a]


def _ticks(ids: list[int]) -> int:
    return sum(t - TIME_SHIFT + 1 for t in ids if TIME_SHIFT <= t < VELOCITY)


@grading.checker
def check_13_1(time_shifts: Callable) -> str:
    """Exercise 13.1: the time shifts that move time on by a gap.

    ``time_shifts(ticks)``: your function. ``ticks`` is a whole number >= 0 of 10 ms ticks; it returns the
    list of event ids (a list, array or 1-D tensor of ints) that move time on by ``ticks``, as
    ``performance.encode`` writes them: a shift of 100 ticks (1 s, token TIME_SHIFT + 99) while more than
    100 are left, then one shift of the rest (n ticks: token TIME_SHIFT + n - 1); [] for 0.

    Checks: equal to what ``encode`` writes between two notes that far apart, for 0, 1, 99, 100, 101, 199,
    200, 250, 1234 ticks and 12 random gaps of up to 30 s. Returns True or False.
    """
    rng = np.random.default_rng(0)
    gaps = (0, 1, 99, 100, 101, 199, 200, 250, 1234) + tuple(int(g) for g in rng.integers(0, 3001, 12))
    for ticks in gaps:
        want = _gap_events(ticks)
        shown = f"time_shifts({ticks})"
        got = _ids(f"{shown}'s result", grading.call(shown, time_shifts, ticks))
        if got == want:
            continue
        said = f"{shown} gives {_words(got)}, encode writes {_words(want)}"
        bad = [t for t in got if not TIME_SHIFT <= t < VELOCITY]
        if got == [t + 1 for t in want]:
            raise grading.Fail(f"{said} (it matches TIME_SHIFT + n: a shift of n ticks is token "
                               f"TIME_SHIFT + n - 1, n = 1..100)")
        if bad == [TIME_SHIFT - 1] and got[:-1] == want:
            raise grading.Fail(f"{said}: token {TIME_SHIFT - 1} = TIME_SHIFT - 1 would be a shift of 0 ticks "
                               "(it is OFF G9): when the ticks are a multiple of 100, no shift of the rest")
        if bad:
            raise grading.Fail(f"{said}: token {bad[0]} is not a time shift (those are {TIME_SHIFT}.."
                               f"{VELOCITY - 1}, TIME_SHIFT + n - 1 for n ticks)")
        if _ticks(got) != ticks:
            raise grading.Fail(f"{said}: yours move time on by {_ticks(got)} tick{'s' * (_ticks(got) != 1)}, "
                               f"not {ticks}")
        if got == want[::-1]:
            raise grading.Fail(f"{said} (it matches the rest first, then the full seconds): write the shifts of "
                               "100 ticks first, the rest last")
        if len(got) > len(want):
            raise grading.Fail(f"{said}: {len(got)} events where encode needs {len(want)}; take the longest shift, "
                               "100 ticks, while more than 100 are left")
        raise grading.Fail(f"{said}: the same {ticks} ticks, split another way; shifts of 100 ticks while more than "
                           "100 are left, then one shift of the rest")
    return ("equals what encode writes between two notes, for gaps of 0, 1, 99, 100, 101, 199, 200, 250, 1234 ticks "
            "and 12 random ones up to 30 s")


def _random_performance(rng: np.random.Generator, n: int = 40) -> tuple[np.ndarray, list[tuple[float, int]]]:
    """``n`` notes on 8 keys (so keys are struck again while they sound) over about 8 s, and a pedal that
    changes 12 times, with values 0..127 (a change may keep it down or up), in time order. No two times
    coincide."""
    starts = rng.uniform(0, 8, n)
    notes = np.column_stack([starts, starts + 0.02 + rng.exponential(0.4, n), rng.integers(58, 66, n),
                             rng.integers(20, 120, n)]).astype(np.float64)
    pedal = [(float(t), int(v)) for t, v in zip(np.sort(rng.uniform(0, 9, 12)), rng.integers(0, 128, 12))]
    return notes, pedal


def _notes(what: str, x) -> np.ndarray:
    """``x`` (an array, a tensor, a list of rows) as a float64 array, or a fail line."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    try:
        return np.array(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise grading.Fail(f"{what} should be notes (n, 4), an array, got {type(x).__name__}") from None


def _by_start(notes: np.ndarray) -> np.ndarray:
    """Rows sorted by (start, pitch): two answers that differ only in their order compare equal."""
    return notes[np.lexsort((notes[:, 2], notes[:, 0]))]


SUSTAIN_MISTAKES = {                  # the first that matches is named: the narrowest first
    "never": "a note left as it was when the pedal never comes up",
    "no_pedal": "the pedal ignored",
    "no_restrike": "no re-strike: a note sounds on through the next strike of its key",
    "next_change": "notes held to the pedal's next change, not to when it next comes up (below 64)",
    "state_at_start": "the pedal's state when the key went down, not when it came up",
}


def _sustain_cases() -> list[tuple[str, np.ndarray, list[tuple[float, int]]]]:
    """check_13_2's cases, (name, notes (n, 4), pedal): 7 hand cases, then 4 random performances (seed 0)."""
    C4, E4 = 60, 64
    cases = [
        ("no pedal", [[0.0, 0.5, C4, 80], [0.25, 1.0, E4, 70]], []),
        ("the pedal held over a release", [[0.0, 0.5, C4, 80], [0.25, 1.0, E4, 70]], [(0.2, 127), (2.0, 0)]),
        ("a re-strike under the pedal", [[0.0, 0.5, C4, 80], [1.0, 1.2, E4, 80], [1.5, 1.7, C4, 80]],
         [(0.2, 127), (2.0, 0)]),
        ("the pedal down only after the release", [[0.0, 0.5, C4, 80], [0.6, 0.7, E4, 80]], [(0.8, 127), (1.5, 0)]),
        ("the pedal at 64 (down) and 63 (up)", [[0.0, 0.5, C4, 80], [1.0, 1.5, E4, 80]],
         [(0.3, 64), (0.9, 63), (1.2, 64), (1.8, 63)]),
        ("a pedal that never comes up", [[0.0, 0.5, C4, 80], [0.6, 0.7, E4, 80]], [(0.2, 127), (0.9, 100)]),
        ("a key struck again while down, no pedal", [[0.0, 1.0, C4, 80], [0.4, 0.8, C4, 90]], []),
    ]
    rng = np.random.default_rng(0)
    cases += [(f"random performance {k} (seed 0)", *_random_performance(rng)) for k in range(1, 5)]
    return [(name, np.array(notes, dtype=np.float64), list(pedal)) for name, notes, pedal in cases]


@grading.checker
def check_13_2(sustain: Callable) -> str:
    """Exercise 13.2: the sustain pedal folded into the notes.

    ``sustain(notes, pedal)``: your function. ``notes`` is a float64 array (n, 4), rows [start s, end s,
    pitch, velocity]; ``pedal`` a list of (time s, value) changes of controller 64 in time order, down at
    64 and above. A note whose key comes up while the pedal is down ends when the pedal next comes up (a
    value below 64); if it never does, at the pedal's last change, when that comes after the release. A key
    struck again ends the note before it at that strike. It returns the notes (n, 4) (an array, a tensor or a
    list of rows): the same contract as ``performance.sustained``.

    Checks: equal to ``performance.sustained`` within 1e-9 on hand cases (no pedal; the pedal held over a
    release; a re-strike under the pedal; the pedal down only after the release; the pedal at 64 and 63;
    a pedal that never comes up; a key struck again with no pedal) and on 4 random performances of 40 notes
    on 8 keys. The order of the rows does not matter: both are sorted by (start, pitch) before they are
    compared. ``sustained`` drops notes left with no length; no note here starts where another of its key
    does, so none is. Returns True or False.
    """
    stored = grading.expected(13)["sustain_mistakes"]
    for case, (name, notes, pedal) in enumerate(_sustain_cases()):
        want = _by_start(sustained(notes.copy(), list(pedal)))
        out = grading.call(f"your function on {name}", sustain, notes.copy(), list(pedal))
        got = _notes(f"the result on {name}", out)
        if got.ndim != 2 or got.shape[1:] != (4,):
            raise grading.Fail(f"on {name} the result has shape {got.shape}, expected (n, 4): rows [start, end, "
                               "pitch, velocity]")
        if len(got) != len(want):
            raise grading.Fail(f"on {name} you return {len(got)} note{'s' * (len(got) != 1)}, expected {len(want)}: "
                               "the pedal and a re-strike change when a note ends, never how many there are")
        got = _by_start(got)
        if np.allclose(got, want, rtol=0, atol=1e-9):
            continue
        which = [k for k in (0, 2, 3) if not np.allclose(got[:, k], want[:, k], rtol=0, atol=1e-9)]
        if which:
            i = int(np.flatnonzero(np.abs(got[:, which] - want[:, which]).max(1) > 1e-9)[0])
            column = ("start", "", "pitch", "velocity")[which[0]]
            raise grading.Fail(f"on {name}, note {i} (sorted by start) has {column} {got[i, which[0]]:g}, expected "
                               f"{want[i, which[0]]:g}: only the ends change")
        i = int(np.argmax(np.abs(got[:, 1] - want[:, 1])))
        why = next((f" (it matches {m})" for key, m in SUSTAIN_MISTAKES.items() if str(case) in stored[key]
                    and np.allclose(stored[key][str(case)], got[:, 1], rtol=0, atol=1e-9)), "")
        raise grading.Fail(f"on {name}, the {note_name(want[i, 2])} struck at {want[i, 0]:.3f} s ends at "
                           f"{got[i, 1]:.3f} s, expected {want[i, 1]:.3f} s{why}")
    return "equals perf.sustained (order aside) on 7 hand cases and 4 random performances of 40 notes"


def _event_sequences() -> list[tuple[str, torch.Tensor, range]]:
    """(name, events, shifts) to transpose: random events of every kind (keys 3..124, so a shift of up to 3
    keeps them on the keyboard), BOS first, a PAD tail and each kind's first and last tokens among them; the
    events of random notes as ``encode`` writes them; and the keyboard's lowest and highest keys, moved
    only inwards."""
    g = torch.Generator().manual_seed(0)
    seqs = []
    for k in range(1, 4):
        T = 80
        kind = torch.randint(4, (T,), generator=g)
        choices = torch.stack([NOTE_ON + torch.randint(3, 125, (T,), generator=g),
                               NOTE_OFF + torch.randint(3, 125, (T,), generator=g),
                               TIME_SHIFT + torch.randint(100, (T,), generator=g),
                               VELOCITY + torch.randint(32, (T,), generator=g)])
        events = choices[kind, torch.arange(T)]
        edges = torch.tensor([NOTE_ON + 3, NOTE_OFF + 124, TIME_SHIFT, TIME_SHIFT + 99, VELOCITY, VELOCITY + 31])
        seqs.append((f"random events {k}", torch.cat([torch.tensor([BOS]), edges, events, torch.full((5,), PAD)]),
                     range(-3, 4)))
    rng = np.random.default_rng(0)
    starts = np.sort(rng.uniform(0, 6, 30))
    notes = np.column_stack([starts, starts + rng.uniform(0.05, 1.5, 30), rng.integers(30, 100, 30),
                             rng.integers(20, 120, 30)])
    seqs.append(("the events of 30 random notes", torch.as_tensor(encode(notes)), range(-3, 4)))
    for name, keys, shifts in (("the lowest keys, C-1 to D-1", (0, 1, 2), range(0, 4)),
                               ("the highest keys, F9 to G9", (125, 126, 127), range(-3, 1))):
        events = [BOS]
        for p in keys:
            events += [VELOCITY + 20, NOTE_ON + p, TIME_SHIFT + 9, NOTE_OFF + p, TIME_SHIFT]
        seqs.append((name, torch.tensor(events + [PAD, PAD]), shifts))
    return seqs


def _transpose_variants(x: torch.Tensor, shift: int) -> dict[str, torch.Tensor]:
    on, off = (x >= NOTE_ON) & (x < NOTE_OFF), (x >= NOTE_OFF) & (x < TIME_SHIFT)
    shifts, vel = (x >= TIME_SHIFT) & (x < VELOCITY), x >= VELOCITY
    move = lambda mask, by=shift: torch.where(mask, x + by, x)
    return {"every event moved, PAD and BOS too": x + shift,
            "every event from NOTE_ON up moved, time shifts and velocities too": move(x >= NOTE_ON),
            "the velocities moved too: a velocity is a loudness, not a pitch": move(on | off | vel),
            "the time shifts moved too: a time shift is a duration, not a pitch": move(on | off | shifts),
            "the note-ons only: a note-off must move with its note-on, or the key that comes up is another": move(on),
            "a move by -shift": 2 * x - transposed_events(x, shift)}


def _word(t: int) -> str:
    return f"{describe([t])[0]}, {t}" if 0 <= t < VOCAB_SIZE else f"{t}, outside the vocabulary"


@grading.checker
def check_13_3(transpose_events: Callable) -> str:
    """Exercise 13.3: what a transposition moves in a stream of events.

    ``transpose_events(tokens, shift)``: your function. ``tokens`` is a 1-D LongTensor of event ids (BOS,
    PAD, note-ons, note-offs, time shifts, velocities), ``shift`` a whole number of semitones; it returns a
    new tensor of the same shape and an integer dtype in which every NOTE_ON p and NOTE_OFF p is moved to p +
    shift and every other event is as it was, and leaves ``tokens`` as it was.

    Checks: equal to ``tasks.transposed_events`` for every shift -3..3 on 3 random sequences of events
    (keys 3..124, so every shift keeps them on the keyboard, each kind's first and last tokens among them,
    BOS first and PAD at the end) and on the events of 30 random notes, and on the keyboard's three lowest
    keys moved up by 0..3 and its three highest moved down by 0..3; the input tensor unchanged after each
    call. Returns True or False.
    """
    for seq, tokens, shifts in _event_sequences():
        for shift in shifts:
            shown = f"{seq} with shift {shift}"
            x = tokens.clone()
            got = grading.tensor("the result", grading.call(f"your function on {shown}", transpose_events, x, shift))
            want = transposed_events(tokens, shift)
            if tuple(got.shape) != tuple(want.shape):
                raise grading.Fail(f"on {shown} the result has shape {tuple(got.shape)}, expected "
                                   f"{tuple(want.shape)}: one event for each event of the input")
            if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
                raise grading.Fail(f"on {shown} the result has dtype {got.dtype}: event ids are integers "
                                   "(torch.long), as the model's embedding needs")
            got = got.long()
            if not torch.equal(got, want):
                i = int((got != want).nonzero()[0])
                why = next((f" (it matches {m})" for m, v in _transpose_variants(tokens, shift).items()
                            if torch.equal(v, got)), "")
                raise grading.Fail(f"on {shown}, event {i} ({_word(int(tokens[i]))}) became {_word(int(got[i]))}, "
                                   f"expected {_word(int(want[i]))}{why}")
            if not torch.equal(x, tokens):
                i = int((x != tokens).nonzero()[0])
                raise grading.Fail(f"on {shown} your function changed the tensor it was given (event {i} is now "
                                   f"{_word(int(x[i]))}, was {_word(int(tokens[i]))}): return a new tensor "
                                   "(torch.where, or tokens.clone() first)")
    return ("equals transposed_events for every shift -3..3 on 4 sequences of events and at both ends of the "
            "keyboard, the input left as it was")
