import numpy as np
import pytest
import torch
from musictx_solutions import exercise_13_1, exercise_13_2, exercise_13_3
from musictx_solutions.ch13 import sustain, time_shifts, transpose_events

from musictx_lite.classroom.checks.ch13 import check_13_1, check_13_2, check_13_3
from musictx_lite.io import performance as perf
from musictx_lite.models.tasks import transposed_events


def _written_between(ticks):
    """The events encode writes between C4's note-off and D4's note-on, ``ticks`` later."""
    tokens = perf.encode(np.array([[0.0, 0.1, 60, 80], [0.1 + ticks * perf.TICK, 0.2 + ticks * perf.TICK, 62, 80]]))
    tokens = tokens.tolist()
    return tokens[tokens.index(perf.NOTE_OFF + 60) + 1: tokens.index(perf.NOTE_ON + 62)]


def test_time_shifts_are_what_encode_writes():
    assert time_shifts(0) == []
    assert perf.describe(time_shifts(250)) == ["SHIFT 1000ms", "SHIFT 1000ms", "SHIFT 500ms"]
    assert time_shifts(100) == [perf.TIME_SHIFT + 99] and time_shifts(1) == [perf.TIME_SHIFT]
    for ticks in (0, 1, 7, 99, 100, 101, 200, 250, 1234):
        assert time_shifts(ticks) == _written_between(ticks)
        assert sum(t - perf.TIME_SHIFT + 1 for t in time_shifts(ticks)) == ticks
    assert exercise_13_1(250) == time_shifts(250)


def test_sustain_is_the_package_pedal():
    notes = np.array([[0.0, 0.5, 60, 80], [1.0, 1.2, 64, 80], [1.5, 1.7, 60, 80]])
    pedal = [(0.2, 127), (2.0, 0)]
    held = sustain(notes, pedal)
    np.testing.assert_array_equal(held[:, 1], [1.5, 2.0, 2.0])             # a re-strike, then the pedal
    np.testing.assert_array_equal(held, perf.sustained(notes, pedal))
    np.testing.assert_array_equal(notes[:, 1], [0.5, 1.2, 1.7])             # the input is left as it was
    np.testing.assert_array_equal(sustain(notes, [(0.8, 127), (1.5, 0)])[0], notes[0])   # down after the release
    np.testing.assert_array_equal(exercise_13_2(), held)
    rng = np.random.default_rng(1)
    for _ in range(10):
        starts = rng.uniform(0, 5, 30)
        n = np.column_stack([starts, starts + rng.exponential(0.5, 30), rng.integers(60, 64, 30), np.full(30, 64.0)])
        p = [(float(t), int(v)) for t, v in zip(np.sort(rng.uniform(0, 6, 8)), rng.integers(0, 128, 8))]
        np.testing.assert_allclose(sustain(n, p), perf.sustained(n, p), atol=1e-12)


def test_transpose_events_moves_the_keys_only():
    events = torch.tensor([perf.BOS, perf.VELOCITY + 20, perf.NOTE_ON + 60, perf.TIME_SHIFT + 49,
                           perf.NOTE_OFF + 60, perf.PAD])
    before = events.clone()
    up = transpose_events(events, 3)
    assert up.tolist() == [perf.BOS, perf.VELOCITY + 20, perf.NOTE_ON + 63, perf.TIME_SHIFT + 49,
                           perf.NOTE_OFF + 63, perf.PAD]
    assert torch.equal(events, before)
    out = exercise_13_3(events, 3)
    assert torch.equal(out, transposed_events(events, 3))
    tokens = torch.as_tensor(perf.encode(np.array([[0.0, 0.4, 60, 70], [0.1, 0.3, 67, 100]])))
    assert torch.equal(exercise_13_3(tokens.numpy(), -2), transposed_events(tokens, -2))


def test_each_checker_passes_the_reference(capsys):
    assert check_13_1(time_shifts) and check_13_2(sustain) and check_13_3(transpose_events)
    assert capsys.readouterr().out.count(": pass (") == 3


def test_an_answer_as_an_array_or_a_tensor_in_another_order_passes(capsys):
    assert check_13_1(lambda ticks: np.array(time_shifts(ticks)))
    assert check_13_1(lambda ticks: torch.tensor(time_shifts(ticks), dtype=torch.long))
    assert check_13_2(lambda notes, pedal: perf.sustained(notes, pedal)[::-1])             # order aside
    assert check_13_2(lambda notes, pedal: torch.as_tensor(perf.sustained(notes, pedal)).tolist())
    assert check_13_3(lambda tokens, shift: transposed_events(tokens, shift).numpy())
    assert capsys.readouterr().out.count(": pass (") == 5


def _remainder_always(ticks):
    """Whole seconds, then ticks % 100 - 1 even when the rest is 0: a shift of 0 ticks, which is no shift."""
    return [perf.TIME_SHIFT + 99] * (ticks // 100) + [perf.TIME_SHIFT + ticks % 100 - 1]


def _half_seconds(ticks):
    """Shifts of at most 50 ticks: the right time, in too many events."""
    out = []
    while ticks > 0:
        out.append(perf.TIME_SHIFT + min(ticks, 50) - 1)
        ticks -= min(ticks, 50)
    return out


def _raises(*args):
    raise NotImplementedError("my answer")


@pytest.mark.parametrize("wrong, problem", [
    (lambda ticks: time_shifts(ticks)[::-1], "(it matches the rest first, then the full seconds)"),
    (lambda ticks: [t + 1 for t in time_shifts(ticks)], "(it matches TIME_SHIFT + n: a shift of n ticks is token"),
    (lambda ticks: time_shifts(ticks + 1), "time_shifts(0) gives [SHIFT 10ms], encode writes []: yours move time "
                                           "on by 1 tick, not 0"),
    (_remainder_always, "would be a shift of 0 ticks (it is OFF G9)"),
    (_half_seconds, "time_shifts(99) gives [SHIFT 500ms, SHIFT 490ms], encode writes [SHIFT 990ms]: 2 events where"),
    (lambda ticks: None, "time_shifts(0)'s result is None"),
    (lambda ticks: perf.TIME_SHIFT, "got one number: return a list, even of one event"),
    (_raises, "time_shifts(0) raised NotImplementedError: my answer"),
])
def test_check_13_1_fails_a_wrong_answer_with_a_telling_line(capsys, wrong, problem):
    assert check_13_1(wrong) is False
    out = capsys.readouterr().out
    assert out.startswith("check_13_1: fail: ") and problem in out.splitlines()[0], out


def _no_restrike(notes, pedal):
    """The pedal, but a key struck again does not end the note before it."""
    out = notes[np.argsort(notes[:, 0], kind="stable")].copy()
    for i, end in enumerate(out[:, 1].tolist()):
        before = [v for t, v in pedal if t <= end]
        if before and before[-1] >= 64:
            ups = [t for t, v in pedal if t > end and v < 64]
            out[i, 1] = ups[0] if ups else max(end, pedal[-1][0])
    return out


def _next_change(notes, pedal):
    """A note under the pedal held to the pedal's next change, even one that keeps it down."""
    out = notes.copy()
    for i, end in enumerate(out[:, 1].tolist()):
        before = [v for t, v in pedal if t <= end]
        if before and before[-1] >= 64:
            later = [t for t, _ in pedal if t > end]
            out[i, 1] = later[0] if later else max(end, pedal[-1][0])
    return perf.sustained(out, [])                                         # the re-strikes


@pytest.mark.parametrize("wrong, problem", [
    (lambda notes, pedal: perf.sustained(notes, []),
     "on the pedal held over a release, the C4 struck at 0.000 s ends at 0.500 s, expected 2.000 s (it matches the "
     "pedal ignored)"),
    (_no_restrike, "on a re-strike under the pedal, the C4 struck at 0.000 s ends at 2.000 s, expected 1.500 s "
                   "(it matches no re-strike"),
    (_next_change, "(it matches notes held to the pedal's next change, not to when it next comes up (below 64))"),
    (lambda notes, pedal: perf.sustained(notes, pedal)[:1], "you return 1 note, expected 2"),
    (lambda notes, pedal: perf.sustained(notes, pedal)[:, :3], "the result has shape (2, 3), expected (n, 4)"),
    (lambda notes, pedal: perf.sustained(notes, pedal) * [1, 1, 1, 0], "has velocity 0, expected 80: only the ends"),
    (_raises, "your function on no pedal raised NotImplementedError: my answer"),
])
def test_check_13_2_fails_a_wrong_answer_with_a_telling_line(capsys, wrong, problem):
    assert check_13_2(wrong) is False
    out = capsys.readouterr().out
    assert out.startswith("check_13_2: fail: ") and problem in out.splitlines()[0], out


def _in_place(tokens, shift):
    tokens[(tokens >= perf.NOTE_ON) & (tokens < perf.TIME_SHIFT)] += shift
    return tokens


def _moves(tokens, shift, lo=perf.NOTE_ON, hi=perf.TIME_SHIFT, also=None):
    keys = (tokens >= lo) & (tokens < hi)
    return torch.where(keys if also is None else keys | also(tokens), tokens + shift, tokens)


@pytest.mark.parametrize("wrong, problem", [
    (lambda t, s: _moves(t, s, also=lambda t: t >= perf.VELOCITY),
     "(VEL 2, 358) became SHIFT 980ms, 355, expected VEL 2, 358 (it matches the velocities moved too"),
    (lambda t, s: _moves(t, s, hi=perf.VELOCITY), "(it matches the time shifts moved too"),
    (lambda t, s: t + s, "event 0 (BOS, 1) became -2, outside the vocabulary, expected BOS, 1 (it matches every "
                         "event moved, PAD and BOS too)"),
    (lambda t, s: _moves(t, s, hi=perf.NOTE_OFF), "(it matches the note-ons only"),
    (lambda t, s: _moves(t, s, lo=perf.NOTE_ON + 1), "on the lowest keys, C-1 to D-1 with shift 1, event 2 (ON C-1, 2) "
                                                     "became ON C-1, 2, expected ON C#-1, 3"),
    (lambda t, s: _moves(t, -s), "(it matches a move by -shift)"),
    (_in_place, "your function changed the tensor it was given (event 1 is now"),
    (lambda t, s: _moves(t, s).float(), "the result has dtype torch.float32: event ids are integers"),
    (lambda t, s: _moves(t, s)[1:], "the result has shape (91,), expected (92,)"),
    (_raises, "your function on random events 1 with shift -3 raised NotImplementedError: my answer"),
])
def test_check_13_3_fails_a_wrong_answer_with_a_telling_line(capsys, wrong, problem):
    assert check_13_3(wrong) is False
    out = capsys.readouterr().out
    assert out.startswith("check_13_3: fail: ") and problem in out.splitlines()[0], out
    assert len(out.splitlines()) <= 2
