"""book/play/rules.js, the page's rules of four-part writing, agrees with musictx_lite.engine.rules mask for mask,
and its key finder with io.harmony.key_of, on chorale steps: every rule, every voice, the dead ends relaxed in the
same order. The page's defaults are the package's.

The script runs in Debian's headless Chromium (Playwright, its own browser download never used), from a file://
page. Without Chromium these tests skip, except in CI, where they fail.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_offline import script_page

from musictx_lite.engine import rules as R
from musictx_lite.engine.harmonise import DEFAULT_CANDIDATES, DEFAULT_RULES
from musictx_lite.io import harmony as H
from musictx_lite.io.stats import RANGES
from musictx_lite.io.tokens import VOCAB_SIZE

ROOT = Path(__file__).resolve().parents[2]
RULES_JS = ROOT / "book" / "play" / "rules.js"
PAGE = f'<!doctype html><meta charset="utf-8"><body><script src="{RULES_JS.as_uri()}"></script>'
# every rule of harmony_rules, in the order it lists them, by the name the page gives it
MASKS = """([grid, v, melody, key, metre, pickup]) => {
  const rules = MusictxRules.harmonyRules(melody, key, metre ?? null, pickup ?? 0);
  return rules.map((r) => [r.name, r.allowed(grid, v, %d)]);
}""" % VOCAB_SIZE


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    yield from script_page(tmp_path_factory.mktemp("rules"), PAGE, "window.MusictxRules !== undefined")


def partial_steps(chorales, n: int = 120, seed: int = 0):
    """(grid so far with the voices from v on blank in its last row, v, melody) at random steps of chorales."""
    rng = np.random.default_rng(seed)
    pieces = chorales.valid + chorales.test
    for _ in range(n):
        piece = pieces[rng.integers(len(pieces))]
        t, v = int(rng.integers(len(piece.pitches))), int(rng.integers(1, 4))
        if rng.random() < 0.2:                                  # the final chord: the cadence's own steps
            t = len(piece.pitches) - int(rng.integers(1, 3))
        grid = piece.pitches[: t + 1].astype(np.int64).copy()
        grid[t, v:] = -1
        yield grid, v, piece.pitches[:, 0]


def test_every_mask_equals_pythons_on_chorale_steps(page, chorales):
    checked = set()
    for grid, v, melody in partial_steps(chorales):
        key = H.key_of(melody)
        want = {r.name: r.allowed(grid[None], v)[0] for r in R.harmony_rules(melody, key)}
        got = dict(page.evaluate(MASKS, [grid.tolist(), v, melody.tolist(), list(key)]))
        assert set(got) == set(want)
        for name in want:
            assert np.array_equal(np.array(got[name], bool), want[name]), (name, v, len(grid))
            checked.add((name, bool((~want[name]).any())))
    assert {name for name, bans in checked if bans} == set(R.RELAX_ORDER)   # every rule banned something


def test_the_key_finder_and_the_final_note_equal_pythons(page, chorales):
    melodies = [p.pitches[:, 0] for p in chorales.valid[:40]]
    got = page.evaluate("ms => ms.map((m) => [MusictxRules.keyOf(m), MusictxRules.finalNote(m)])",
                        [m.tolist() for m in melodies])
    for m, (key, final) in zip(melodies, got):
        assert tuple(key) == H.key_of(m) and tuple(final) == R.final_note(m)


def test_a_dead_end_is_relaxed_in_the_same_order(page):
    grid = np.array([[72, 67, 64, 48], [74, 71, -1, -1]])              # the tenor: under B4, no parallels, ...
    narrow = R.VoiceRange({"s": (60, 80), "a": (50, 59), "t": (75, 80), "b": (30, 50)})   # ... and above D5: none
    relaxed = R.Relaxed()
    want = R.rule_mask((narrow, R.NoCrossing(), R.NoParallels(), R.Spacing()), grid[None], 2,
                       np.ones((1, VOCAB_SIZE), bool), relaxed)[0]
    got = page.evaluate("""([grid]) => {
      const r = MusictxRules.rules, narrow = {name: "range", allowed: (g, v, V) => Array.from({length: V},
        (_, k) => k >= 5 && k - 5 + 36 >= 75 && k - 5 + 36 <= 80)};
      const relaxed = {tokens: 0, dropped: {}};
      const ok = MusictxRules.ruleMask([narrow, r.noCrossing, r.noParallels, r.spacing], grid, 2,
                                       new Array(%d).fill(true), relaxed);
      return {ok, relaxed};
    }""" % VOCAB_SIZE, [grid.tolist()])
    assert got["relaxed"]["dropped"] == dict(relaxed.dropped) and relaxed.dead_ends >= 1
    assert np.array_equal(np.array(got["ok"], bool), want)


def test_the_pages_constants_and_defaults_are_the_packages(page):
    got = page.evaluate("() => ({ranges: MusictxRules.RANGES, order: MusictxRules.RELAX_ORDER})")
    assert got == {"ranges": [list(r) for r in RANGES.values()], "order": list(R.RELAX_ORDER)}
    play = (ROOT / "book" / "play" / "musictx-play.js").read_text()
    m = re.search(r'const DEFAULTS = \{rules: "(\w+)", candidates: (\d+)\};', play)
    assert m and (m.group(1), int(m.group(2))) == (DEFAULT_RULES, DEFAULT_CANDIDATES)


def test_a_tune_ending_on_the_third_of_a_major_key_cadences_on_the_tonic_as_in_python(page):
    """A folk tune in G major ending on B: the final chord is G major (not B major), in the page as in Python."""
    melody = np.repeat([67, 71, 74, 72, 71, 69, 67, 71], 4)            # G major, ending on its third
    key = H.key_of(melody)
    assert key == (7, "major") and R.Cadence(melody, key).root == 7
    for v in (1, 2, 3):
        grid = np.repeat(melody[:, None], 4, axis=1)[:29].copy()       # the last note's first step, t = 28
        grid[:, 1:] = [62, 55, 43]
        grid[-1, v:] = -1
        want = {r.name: r.allowed(grid[None], v)[0] for r in R.harmony_rules(melody, key)}
        got = dict(page.evaluate(MASKS, [grid.tolist(), v, melody.tolist(), list(key)]))
        assert np.array_equal(np.array(got["cadence"], bool), want["cadence"]), v


@pytest.mark.parametrize("metre,pickup", [("3/4", 4), ("6/8", 2), ("2/4", 0)])
def test_the_chord_rules_beats_follow_the_metre_and_upbeat_as_in_python(page, chorales, metre, pickup):
    """In 3/4 with an upbeat, 6/8 and 2/4 the page asks for complete chords on the beats Python does."""
    from musictx_lite.io.midi import beat_steps

    assert page.evaluate("m => MusictxRules.beatSteps(m)", metre) == beat_steps(metre)
    for grid, _, melody in partial_steps(chorales, n=40, seed=1):
        key = H.key_of(melody)
        grid[-1, :3] = np.where(grid[-1, :3] < 0, 60, grid[-1, :3])    # the bass is the one written now
        want = {r.name: r.allowed(grid[None], 3)[0] for r in R.harmony_rules(melody, key, metre=metre,
                                                                            pickup=pickup)}
        got = dict(page.evaluate(MASKS, [grid.tolist(), 3, melody.tolist(), list(key), metre, pickup]))
        assert np.array_equal(np.array(got["chord"], bool), want["chord"]), (metre, len(grid))
