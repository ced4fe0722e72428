"""engine/rules.py: each rule's mask on hand-made chords; sampling under the rules keeps them (judged by
io/harmony.py, which counts independently); dead ends are relaxed in the stated order and counted; the best of
several candidates is the likeliest under the model."""
import numpy as np
import pytest
import torch

import musictx_lite as mtx
from musictx_lite.engine import rules as R
from musictx_lite.engine.harmonise import harmonise
from musictx_lite.engine.sample import generate
from musictx_lite.io import harmony as H
from musictx_lite.io.tokens import BOS, LOWEST, N_SPECIAL, REST, VOCAB_SIZE


def allowed_pitches(mask_row: np.ndarray) -> set[int]:
    return {int(t - N_SPECIAL + LOWEST) for t in np.flatnonzero(mask_row) if t >= N_SPECIAL}


def state(*rows) -> np.ndarray:
    """(1, steps, 4): the rows so far, -1 where a voice is not written yet."""
    return np.array(rows, dtype=np.int64)[None]


def test_range_allows_the_voice_range_and_a_rest_only_under_a_rest():
    m = R.VoiceRange().allowed(state([72, -1, -1, -1]), 3)[0]
    assert allowed_pitches(m) == set(range(40, 61)) and not m[REST]
    assert R.VoiceRange().allowed(state([-1, -1, -1, -1]), 1)[0, REST]


def test_no_crossing_keeps_a_voice_under_the_nearest_sounding_voice_above():
    assert max(allowed_pitches(R.NoCrossing().allowed(state([72, 64, -1, -1]), 2)[0])) == 64
    assert max(allowed_pitches(R.NoCrossing().allowed(state([72, -1, -1, -1]), 2)[0])) == 72   # the alto rests


def test_spacing_keeps_alto_and_tenor_within_an_octave_of_the_voice_above():
    assert min(allowed_pitches(R.Spacing().allowed(state([72, -1, -1, -1]), 1)[0])) == 60
    assert min(allowed_pitches(R.Spacing().allowed(state([72, 64, -1, -1]), 2)[0])) == 52
    assert min(allowed_pitches(R.Spacing().allowed(state([72, 64, 55, -1]), 3)[0])) == LOWEST      # bass: free


def test_no_parallels_bans_similar_and_contrary_fifths_and_octaves_and_allows_holding():
    # soprano C5 -> D5; the bass was C3 (an octave below, compound): D in any octave repeats it, unless held
    banned = set(range(LOWEST, 85)) - allowed_pitches(R.NoParallels().allowed(state([72, 67, 64, 48],
                                                                                    [74, 67, 64, -1]), 3)[0])
    assert banned == {p for p in range(LOWEST, 85) if p % 12 == 2}                      # D2, D3 (similar), D4 ...
    held = R.NoParallels().allowed(state([72, 67, 64, 48], [72, 67, 64, -1]), 3)[0]         # soprano held: free
    assert held.all()
    # alto G4 -> A4 over the tenor C4: a fifth; the tenor may not go to D (up: similar, down: contrary)
    m = R.NoParallels().allowed(state([72, 67, 60, 48], [72, 69, -1, -1]), 2)[0]
    assert not {50, 62} & allowed_pitches(m) and {60, 64} <= allowed_pitches(m)


def test_cadence_is_a_complete_root_triad_on_the_last_note_then_held():
    melody = np.r_[np.full(4, 74), np.full(8, 67)]                    # the last note, G4, from step 4 to step 11
    c = R.Cadence(melody)
    assert (c.start, c.end, c.root) == (4, 11, 7)
    assert {p % 12 for p in allowed_pitches(c.allowed(state(*[[74] * 4] * 4, [67, -1, -1, -1]), 1)[0])} == {11, 2}
    in_g_minor = R.Cadence(melody, (7, "minor"), picardy=False)
    alto = in_g_minor.allowed(state(*[[74] * 4] * 4, [67, -1, -1, -1]), 1)[0]
    assert {p % 12 for p in allowed_pitches(alto)} == {10, 11, 2}                    # B-flat too, in G minor
    assert R.Cadence(melody, (7, "major"), picardy=False).thirds == [11]             # not in G major
    tenor = c.allowed(state(*[[74] * 4] * 4, [67, 71, -1, -1]), 2)[0]                 # the alto took the third
    assert {p % 12 for p in allowed_pitches(tenor)} == {2}
    assert {p % 12 for p in allowed_pitches(c.allowed(state(*[[74] * 4] * 4, [67, 71, 62, -1]), 3)[0])} == {7}
    held = c.allowed(state(*[[74] * 4] * 4, [67, 71, 62, 55], [67, -1, -1, -1]), 1)[0]
    assert allowed_pitches(held) == {71}
    assert c.allowed(state([74, -1, -1, -1]), 1).all()                  # before the last note: no constraint


def test_a_dead_end_drops_rules_in_order_and_counts_them():
    relaxed = R.Relaxed()
    usable = np.ones((1, VOCAB_SIZE), bool)
    # the alto must be above 72 - 12 = 60 (spacing) and at most 59 (a made-up range): no pitch keeps both
    narrow = R.VoiceRange({"s": (60, 80), "a": (50, 59), "t": (40, 60), "b": (30, 50)})
    m = R.rule_mask((narrow, R.Spacing()), state([72, -1, -1, -1]), 1, usable, relaxed)
    assert relaxed.dropped == {"spacing": 1} and relaxed.dead_ends == 1 and relaxed.tokens == 1
    assert allowed_pitches(m[0]) == set(range(50, 60))
    with pytest.raises(ValueError, match="is not a rule"):
        R.check_rules([object()])


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return mtx.build_model("relative", mtx.ModelConfig(n_embd=16, n_heads=2, n_layers=1, context=64)).eval()


MELODY = np.repeat([67, 67, 69, 71, 72, 71, 69, 67, 66, 67, 69, 67], 4)      # G major, 12 beats


def test_sampling_under_the_rules_keeps_them(model):
    key, clean = H.key_of(MELODY), 0
    for seed in range(3):
        info = {}
        g = harmonise(model, MELODY, seed=seed, rules=R.harmony_rules(MELODY), info=info)
        c = dict(zip(H.COUNTS, H.piece_counts(g, key, (7, "major"))))
        if info["dead_ends"] == 0:
            clean += 1
            assert c["fifths"] == c["octaves"] == c["contrary_fifths"] == c["contrary_octaves"] == 0
            assert c["crossed"] == c["outside"] == c["wide"] == 0
            assert c["off_key"] == 0 and c["final_complete"] == c["final_root"] == 1
        assert info["masked"] == 3 * len(MELODY)                      # alto, tenor, bass of every step
    assert clean >= 1
    plain = [harmonise(model, MELODY, seed=s, rules="none") for s in range(3)]   # without rules it breaks them
    assert sum(H.piece_counts(g, key, (7, "major"))[H.COUNTS.index("outside")] for g in plain) > 0


def test_the_best_candidate_is_the_likeliest_and_its_score_is_the_models(model):
    info = {}
    g = harmonise(model, MELODY[:12], seed=1, candidates=4, info=info)            # 49 tokens: one window
    assert len(info["logp"]) == 4 and info["chosen"] == int(np.argmax(info["logp"]))
    tokens = mtx.encode(g)                                             # BOS, then S A T B per step
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor(tokens[None, :-1])).float(), -1)[0]   # (T, V)
    mine = sum(float(logp[i - 1, tokens[i]]) for i in range(1, len(tokens)) if (i - 1) % 4)   # A, T, B only
    assert info["logp"][info["chosen"]] == pytest.approx(mine, abs=1e-3)


def test_a_batch_of_greedy_continuations_equals_one(model):
    one = generate(model, np.array([BOS]), 6, temperature=1e-6, seed=0)
    three = generate(model, np.array([BOS]), 6, temperature=1e-6, seed=0, batch=3)
    assert three.shape == (3, len(one)) and (three == one).all()
    with pytest.raises(ValueError, match="batch must be at least 1"):
        generate(model, np.array([BOS]), 2, batch=0)
    with pytest.raises(ValueError, match="candidates must be a whole number"):
        harmonise(model, MELODY, candidates=0)
