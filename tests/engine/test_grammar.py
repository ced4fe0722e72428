"""engine/grammar.py: a performance's grammar as masks, on hand-made event streams, a dead end, and a sampler kept
to it."""
import numpy as np
import pytest
import torch

from musictx_lite import ModelConfig, build_model
from musictx_lite.engine.grammar import (
    IS_ON,
    IS_SHIFT,
    Grammar,
    Keyboard,
    Keys,
    Loudness,
    MaxHold,
    MaxKeys,
    ReleaseDown,
    keys_down,
    limits_of,
    performance_rules,
)
from musictx_lite.engine.sample import generate_events
from musictx_lite.io.performance import BOS, NOTE_OFF, NOTE_ON, TIME_SHIFT, VELOCITY, VOCAB_SIZE, decode

ON, OFF = (lambda p: NOTE_ON + p), (lambda p: NOTE_OFF + p)
SHIFT = lambda n: TIME_SHIFT + n - 1                                # n ticks of 10 ms


def test_keys_follow_the_events_as_decode_reads_them():
    k = Keys.after([BOS, VELOCITY + 10, ON(60), ON(64), OFF(64), SHIFT(5), OFF(60), ON(67), SHIFT(3), ON(67)])
    assert k.now == 8
    assert k.down == {64: 0, 67: 8}              # the off of 64 came in its own tick: not a release; 67 re-struck
    notes = decode([BOS, ON(60), SHIFT(5), OFF(60)])
    assert notes.tolist() == [[0.0, 0.05, 60.0, notes[0, 3]]]
    assert Keys.after([BOS, ON(60), SHIFT(5), OFF(60)]).down == {}


def test_a_note_on_only_for_a_key_a_piano_has():
    ok = Keyboard().allowed(Keys.after([BOS, ON(60)]))
    assert ok[ON(21)] and ok[ON(108)] and not ok[ON(20)] and not ok[ON(109)] and not ok[ON(127)]
    assert ok[NOTE_ON:NOTE_OFF].sum() == 88 and ok[NOTE_OFF:].all()      # note-offs, shifts, velocities: free


def test_a_note_off_only_for_a_key_down_that_has_sounded():
    ok = ReleaseDown().allowed(Keys.after([BOS, ON(60), SHIFT(2), ON(62)]))
    assert ok[OFF(60)] and not ok[OFF(62)] and not ok[OFF(61)]        # 62 went down in this tick
    assert ok[ON(61)] and ok[SHIFT(100)] and ok[VELOCITY]


def test_the_longest_hold_bans_long_shifts_then_forces_the_release():
    hold = MaxHold(0.10)                                              # 10 ticks
    ok = hold.allowed(Keys.after([BOS, ON(60), SHIFT(4), ON(64)]))
    assert ok[SHIFT(6)] and not ok[SHIFT(7)] and ok[ON(70)] and ok[OFF(64)]
    due = hold.allowed(Keys.after([BOS, ON(60), SHIFT(4), ON(64), SHIFT(6)]))
    assert due.sum() == 1 and due[OFF(60)]                            # only the due key's release
    assert hold.allowed(Keys.after([BOS])).all()
    with pytest.raises(ValueError):
        MaxHold(0)


def test_at_most_so_many_keys_down_and_a_restrike_adds_none():
    ok = MaxKeys(2).allowed(Keys.after([BOS, ON(60), ON(64)]))
    assert not ok[ON(67)] and ok[ON(60)] and ok[ON(64)] and ok[OFF(60)] and ok[SHIFT(1)]
    assert MaxKeys(3).allowed(Keys.after([BOS, ON(60), ON(64)])).all()
    with pytest.raises(ValueError):
        MaxKeys(0)


class NoRelease:
    """A rule that bans every NOTE_OFF: with a key due, nothing is left."""
    name = "no release"

    def allowed(self, keys):
        return ~((np.arange(VOCAB_SIZE) >= NOTE_OFF) & (np.arange(VOCAB_SIZE) < TIME_SHIFT))


def test_a_dead_end_drops_rules_in_the_stated_order_and_is_counted():
    g = Grammar((MaxHold(0.05), NoRelease()), Keys.after([BOS, ON(60), SHIFT(5)]))
    usable = np.ones(VOCAB_SIZE, dtype=bool)
    ok = g.mask(usable)
    assert g.dead_ends == 1 and dict(g.dropped) == {"hold": 1}       # the hold goes, the other rule stays
    assert ok[SHIFT(50)] and not ok[OFF(60)]
    g2 = Grammar(performance_rules({"note_s_p999": 1.0, "keys_down_p995": 4}), Keys.after([BOS]))
    assert g2.mask(usable).any() and g2.dead_ends == 0


def test_release_all_ends_with_no_key_down():
    g = Grammar((ReleaseDown(),), Keys.after([BOS, ON(60), SHIFT(3), ON(64)]))
    tail = g.release_all()
    assert tail == [SHIFT(1), OFF(60), OFF(64)] and g.keys.down == {}
    notes = decode([BOS, ON(60), SHIFT(3), ON(64), *tail])
    assert notes[:, 1].max() == pytest.approx(0.04)


def test_limits_of_real_notes():
    notes = np.array([[0.0, 1.0, 60, 64], [0.5, 3.0, 64, 64], [0.5, 0.6, 67, 64], [2.0, 2.5, 72, 64]])
    lim = limits_of([notes])
    assert lim["longest_note_s"] == 2.5 and lim["most_keys_down"] == 3 and lim["pieces"] == 1
    assert lim["keys_down_p999"] == 3 and 1.0 < lim["note_s_p999"] <= 2.5
    assert lim["notes_per_s"] == pytest.approx(4 / 3.0)
    assert keys_down(notes).tolist() == [1, 2, 3, 2, 1, 2, 1, 0]


def test_a_sampler_kept_to_the_grammar_breaks_none_of_it():
    torch.manual_seed(0)
    model = build_model("piano-local", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=64,
                                                   vocab_size=VOCAB_SIZE)).eval()
    limits = {"note_s_p999": 0.5, "keys_down_p995": 4}
    plain = decode(generate_events(model, None, 300, seed=1))
    assert keys_down(plain).max() > 4                                 # random weights break it
    assert ((plain[:, 2] < 21) | (plain[:, 2] > 108)).any()          # and play keys no piano has
    for seed in (0, 1):
        info = {}
        ev = generate_events(model, None, 300, seed=seed, rules=performance_rules(limits), info=info)
        notes = decode(ev)
        assert (notes[:, 1] - notes[:, 0]).max() <= 0.5 + 1e-9 and keys_down(notes).max() <= 4
        assert notes[:, 2].min() >= 21 and notes[:, 2].max() <= 108                 # on the keyboard
        assert Keys.after(ev).down == {} and len(ev) == 301 + info["released_at_end"]
        assert info["dead_ends"] == 0 and info["masked"] == 300 and np.isfinite(info["logp"])
    assert IS_ON.sum() == 128 and IS_SHIFT.sum() == 100


def test_an_opening_starts_at_the_first_note_and_holds_what_it_says():
    from musictx_lite.io.performance import opening

    notes = np.array([[2.0, 9.0, 60, 80], [2.5, 3.0, 64, 70], [6.0, 6.5, 67, 60], [8.0, 8.2, 72, 50]])
    five = opening(notes, 5.0)                                        # 2 s of silence first: not music
    assert five[:, 0].tolist() == [0.0, 0.5, 4.0] and five[0, 1] == 5.0 and five[2, 1] == 4.5
    two = opening(notes, n_notes=2)
    assert two[:, 2].tolist() == [60, 64] and two[:, 1].max() <= 0.51 + 1e-9
    with pytest.raises(ValueError):
        opening(notes, 5.0, n_notes=2)
    with pytest.raises(ValueError):
        opening(notes, None)


def test_a_continuation_stops_after_so_many_seconds():
    torch.manual_seed(0)
    model = build_model("piano-local", ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=64,
                                                   vocab_size=VOCAB_SIZE)).eval()
    info = {}
    ev = generate_events(model, None, 5000, seed=0, seconds=2.0, info=info)
    assert info["drawn"] < 5000 and 200 <= Keys.after(ev).now <= 200 + 100       # 2 s, the last shift at most 1 s
    assert info["left_down"] == len(Keys.after(ev).down)


def test_loudness_keeps_velocities_in_the_band_and_a_note_waits_for_one():
    from musictx_lite.io.performance import bin_velocity

    rule = Loudness(40, 80)
    ok = rule.allowed(Keys.after([BOS, VELOCITY + 12]))                # bin 12: velocity 50, inside
    inside = bin_velocity(np.arange(32))
    assert (ok[VELOCITY:] == ((inside >= 40) & (inside <= 80))).all() and ok[ON(60)]
    loud = rule.allowed(Keys.after([BOS, VELOCITY + 30]))             # 122: outside, so a velocity event first
    assert not loud[ON(60)] and loud[VELOCITY + 12] and loud[SHIFT(3)]
    rules = performance_rules({"note_s_p999": 1.0, "keys_down_p995": 4, "drift_min": -10, "drift_max": 10},
                              prompt_velocity=60)
    assert [r.name for r in rules] == ["keyboard", "release", "hold", "keys", "loudness"]
    with pytest.raises(ValueError):
        Loudness(80, 40)
