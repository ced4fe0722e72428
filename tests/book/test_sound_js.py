"""book/play/sound.js, the piano roll and organ of the in-browser widget, in Debian's headless Chromium
(driven by Playwright; its own browser download is never used). Without Chromium these tests skip,
except in CI, where they fail. A drawn roll of a real chorale lands in _build/screenshots/sound-roll.png.
"""
from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest
from test_offline import chromium_or_skip

from musictx_lite.io.audio import ATTACK, HARMONICS, PEAK, RELEASE, organ
from musictx_lite.io.midi import grid_to_midi, notes_of
from musictx_lite.io.tokens import decode, encode

ROOT = Path(__file__).resolve().parents[2]
SOUND_JS = ROOT / "book" / "play" / "sound.js"
SCREENSHOT = ROOT / "_build" / "screenshots" / "sound-roll.png"
RATE = 22050
COLORS = ("#d62728", "#2ca02c", "#1f77b4", "#9467bd")   # S A T B, as musictx_lite.classroom.plots
WIDTH = 640                                              # the canvas's CSS width on the test page
PAGE = f"""<!doctype html><meta charset="utf-8"><body style="margin:8px">
<div style="width:{WIDTH}px; overflow-x:auto"><canvas id="roll" style="width:{WIDTH}px"></canvas></div>
<script src="{SOUND_JS.as_uri()}"></script>"""

# pixels of a colour on the canvas, drawn at alpha over white (notes: 0.85 over white or a faint grey)
COUNT_COLOR = """([hex, alpha]) => {
  const c = document.getElementById("roll"), d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  const rgb = [1, 3, 5].map(i => alpha * parseInt(hex.slice(i, i + 2), 16) + (1 - alpha) * 255);
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (Math.abs(d[i] - rgb[0]) < 12 && Math.abs(d[i + 1] - rgb[1]) < 12 && Math.abs(d[i + 2] - rgb[2]) < 12) n++;
  }
  return n;
}"""
DRAW = """([grid, onsets, opts]) => {
  const c = document.getElementById("roll");
  const layout = MusictxSound.drawRoll(c, grid, onsets, opts);
  return {css: c.getBoundingClientRect().width, pixels: c.width, stepWidth: layout.stepWidth};
}"""
RENDER = "([grid, onsets, opts]) => MusictxSound.render(grid, onsets, opts).then(s => Array.from(s))"


@pytest.fixture(scope="module")
def browser():
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # the autoplay switch stands in for the reader's click on Play
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    html = tmp_path_factory.mktemp("sound") / "page.html"
    html.write_text(PAGE)
    context = browser.new_context(device_scale_factor=2, viewport={"width": 800, "height": 600})
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.goto(html.as_uri())
    pg.wait_for_function("window.MusictxSound !== undefined")
    yield pg
    context.close()


@pytest.fixture(autouse=True)
def no_js_errors(request):
    yield
    if "page" in request.fixturenames:
        pg = request.getfixturevalue("page")
        errors, pg.errors[:] = list(pg.errors), []
        assert not errors, f"JavaScript errors: {errors}"


def one_voice(pitch_steps, voice=0):
    """A grid with one voice sounding: pitch_steps is a list of (pitch, onset) per step."""
    grid = [[-1] * 4 for _ in pitch_steps]
    onsets = [[False] * 4 for _ in pitch_steps]
    for t, (p, o) in enumerate(pitch_steps):
        grid[t][voice], onsets[t][voice] = p, o
    return grid, onsets


def real_chorale(steps=64):
    """The first steps of a test chorale of the official JSB split (the embedded chorales without it)."""
    from musictx_lite.io.data import load_chorales, load_jsb

    try:
        piece = load_jsb().test[0]
    except Exception:       # no local copy of the official split and no network
        piece = load_chorales().test[0]
    grid = piece.pitches[:steps]
    _, onsets = decode(encode(grid), return_onsets=True)
    return grid.tolist(), onsets.tolist(), piece.name


def spectrum(x):
    """(frequencies, amplitudes) of samples, Hann-windowed, amplitudes relative to the largest."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return np.fft.rfftfreq(len(x), 1 / RATE), a / a.max()


def amplitude_at(freqs, amps, f, width=3.0):
    return amps[np.abs(freqs - f) <= width].max()


def test_notes_of_hand_made_grid(page):
    # S: C4 held two steps, then C4 again (an onset); A: G3, a rest, A3 after the rest with no onset
    # flag (a note still starts); T: all rests; B: C3, D3 held, then C3 (pitch change without onset)
    grid = [[60, 55, -1, 48], [60, 55, -1, 50], [60, -1, -1, 50], [60, 57, -1, 48]]
    onsets = [[True, True, False, True], [False, False, False, True],
              [True, False, False, False], [False, False, False, False]]
    expected = [{"voice": 0, "pitch": 60, "start": 0, "end": 2}, {"voice": 0, "pitch": 60, "start": 2, "end": 4},
                {"voice": 1, "pitch": 55, "start": 0, "end": 2}, {"voice": 1, "pitch": 57, "start": 3, "end": 4},
                {"voice": 3, "pitch": 48, "start": 0, "end": 1}, {"voice": 3, "pitch": 50, "start": 1, "end": 3},
                {"voice": 3, "pitch": 48, "start": 3, "end": 4}]
    assert page.evaluate("([g, o]) => MusictxSound.notesOf(g, o)", [grid, onsets]) == expected
    python = [{"voice": v, "pitch": p, "start": s, "end": e}
              for v, notes in enumerate(notes_of(np.array(grid), np.array(onsets))) for s, e, p in notes]
    assert python == expected                             # the same notes as the package's own
    # without onsets, a note starts only where the pitch changes: the soprano's C4 is one note
    plain = page.evaluate("([g]) => MusictxSound.notesOf(g, null)", [grid])
    assert [n for n in plain if n["voice"] == 0] == [{"voice": 0, "pitch": 60, "start": 0, "end": 4}]


def test_notes_of_agrees_with_the_package_on_a_chorale(page):
    grid, onsets, _ = real_chorale()
    js = page.evaluate("([g, o]) => MusictxSound.notesOf(g, o)", [grid, onsets])
    python = [{"voice": v, "pitch": p, "start": s, "end": e}
              for v, notes in enumerate(notes_of(np.array(grid), np.array(onsets))) for s, e, p in notes]
    assert len(js) > 40 and js == python


def test_render_a4_lasts_four_seconds_at_440_hz(page):
    grid, onsets = one_voice([(69, t == 0) for t in range(16)])     # one A4 over a bar of 16ths
    x = np.array(page.evaluate(RENDER, [grid, onsets, {"bpm": 60}]))  # a 16th is 0.25 s: 4 s
    assert len(x) == int(np.ceil((4 + RELEASE) * RATE)) + 1
    assert abs(np.abs(x).max() - PEAK) < 1e-3
    freqs, amps = spectrum(x[: 4 * RATE])
    f0 = freqs[amps.argmax()]
    assert abs(f0 - 440) / 440 < 0.02, f"dominant frequency {f0:.1f} Hz"
    # the organ's partials, as audio.py's HARMONICS (relative to the fundamental)
    for k, a in HARMONICS.items():
        assert abs(amplitude_at(freqs, amps, k * 440) - a) < 0.05 * a + 0.01, f"harmonic {k}"
    # no click: a fade in over ATTACK, then a fade out over RELEASE after 4 s, then silence
    assert np.abs(x[: int(ATTACK * RATE / 3)]).max() < 0.5 * PEAK
    assert np.abs(x[int((4 + RELEASE) * RATE) - 1:]).max() < 1e-3
    assert np.abs(x[int(4 * RATE): int((4 + RELEASE / 4) * RATE)]).max() > 0.2   # the release tail sounds


def test_render_matches_the_package_organ(page):
    grid, onsets, _ = real_chorale(32)
    x = np.array(page.evaluate(RENDER, [grid, onsets, {"bpm": 90}]))
    y = organ(grid_to_midi(np.array(grid), np.array(onsets), tempo=90), RATE)
    y = y / np.abs(y).max() * PEAK
    n = min(len(x), len(y))
    assert abs(len(x) - len(y)) <= 2
    assert np.corrcoef(x[:n], y[:n])[0, 1] > 0.98
    assert np.abs(x[:n] - y[:n]).max() < 0.1


def test_render_is_silent_where_the_grid_rests(page):
    grid, onsets = one_voice([(69, t == 0) if t < 8 else (-1, False) for t in range(16)])
    x = np.array(page.evaluate(RENDER, [grid, onsets, {"bpm": 60}]))   # sound 0-2 s, rest 2-4 s
    rms = np.sqrt(np.mean(x[int(0.1 * RATE): int(1.9 * RATE)] ** 2))
    assert rms > 0.2
    assert np.abs(x[int((2 + RELEASE + 0.005) * RATE):]).max() < 1e-4


def test_render_a_chord_has_its_four_fundamentals(page):
    # B4, F#4, C#4, D3: no fundamental is a harmonic of another voice's note
    chord = [71, 66, 61, 50]
    grid = [chord] * 16
    onsets = [[True] * 4] + [[False] * 4] * 15
    x = np.array(page.evaluate(RENDER, [grid, onsets, {"bpm": 60}]))
    freqs, amps = spectrum(x[: 4 * RATE])
    for p in chord:
        assert amplitude_at(freqs, amps, 440 * 2 ** ((p - 69) / 12)) > 0.3, f"no energy at MIDI {p}"
    for f in (200.0, 330.0, 415.0, 520.0):         # between the partials: nothing
        assert amplitude_at(freqs, amps, f) < 0.01, f"energy at {f} Hz"
    # a per-voice gain of 0 silences that voice
    x = np.array(page.evaluate(RENDER, [grid, onsets, {"bpm": 60, "gains": [1, 1, 1, 0]}]))
    freqs, amps = spectrum(x[: 4 * RATE])
    assert amplitude_at(freqs, amps, 440 * 2 ** ((50 - 69) / 12)) < 0.01


def test_draw_roll_paints_each_voice_and_grows_with_steps(page):
    grid, onsets = one_voice([(60 + t % 5, True) for t in range(64)], voice=0)
    for t in range(64):                                    # add a bass, no alto or tenor
        grid[t][3], onsets[t][3] = 43, t % 16 == 0
    size = page.evaluate(DRAW, [grid, onsets, {"title": "two voices"}])
    notes = [page.evaluate(COUNT_COLOR, [c, 0.85]) for c in COLORS]
    assert notes[0] > 2000 and notes[3] > 2000 and notes[1] < 50 and notes[2] < 50, notes
    legend = [page.evaluate(COUNT_COLOR, [c, 1.0]) for c in COLORS]    # every voice, 10 x 8 CSS px
    assert all(n >= 0.8 * 10 * 8 * 4 for n in legend), legend
    assert size["css"] == WIDTH and size["pixels"] == 2 * WIDTH    # fits its CSS width, sharp at 2x

    widths = []
    for steps in (64, 512, 1024):
        g, o = one_voice([(60, t % 4 == 0) for t in range(steps)])
        widths.append(page.evaluate(DRAW, [g, o, {}]))
    assert widths[0]["css"] == WIDTH
    assert widths[1]["css"] >= 512 * 6 and widths[2]["css"] >= 1024 * 6 > widths[1]["css"]
    assert all(w["stepWidth"] >= 6 and w["pixels"] == round(2 * w["css"]) for w in widths)


def test_draw_roll_marks_the_given_part_and_the_cursor(page):
    grid, onsets, _ = real_chorale()
    shade = "([]) => { const c = document.getElementById('roll'), g = c.getContext('2d');" \
            " const d = g.getImageData(0, 0, c.width, c.height).data; let n = 0;" \
            " for (let i = 0; i < d.length; i += 4) if (d[i] === 228 && d[i + 1] === 228 && d[i + 2] === 228) n++;" \
            " return n; }"
    page.evaluate(DRAW, [grid, onsets, {}])
    assert page.evaluate(shade, []) < 100                    # a few anti-aliased pixels at most
    size = page.evaluate(DRAW, [grid, onsets, {"given": [t < 32 for t in range(64)]}])
    assert page.evaluate(shade, []) > 0.5 * (32 * size["stepWidth"] * 2) * 400   # the prompt's 32 steps
    column = "([x]) => { const c = document.getElementById('roll');" \
             " const d = c.getContext('2d').getImageData(Math.round(x * 2), 0, 1, c.height).data; let n = 0;" \
             " for (let i = 0; i < d.length; i += 4) if (d[i] < 40 && d[i + 1] < 40 && d[i + 2] < 40) n++;" \
             " return n; }"
    size = page.evaluate(DRAW, [grid, onsets, {"cursor": 20}])
    x = 34 + 20 * size["stepWidth"] - 0.5                    # LEFT margin + 20 steps, in the cursor's line
    with_cursor = page.evaluate(column, [x])
    page.evaluate(DRAW, [grid, onsets, {}])
    without = page.evaluate(column, [x])
    assert with_cursor > 300 and without < 20, (with_cursor, without)    # the roll is ~500 px high at 2x


def test_screenshot_of_a_chorale(page):
    grid, onsets, name = real_chorale()
    page.evaluate(DRAW, [grid, onsets, {"title": f"{name}, first 4 bars", "given": 0, "cursor": 20}])
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.locator("#roll").screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 5000


def test_to_wav(page):
    samples = [0.0, 0.5, -1.0, 1.0, 2.0, -0.25] * 100
    out = page.evaluate("""async ([s]) => {
      const blob = MusictxSound.toWav(new Float32Array(s), 22050);
      return {type: blob.type, size: blob.size, bytes: Array.from(new Uint8Array(await blob.arrayBuffer()))};
    }""", [samples])
    data = bytes(out["bytes"])
    assert out["type"] == "audio/wav" and out["size"] == len(data) == 44 + 2 * len(samples)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and data[36:40] == b"data"
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 22050, len(samples))
        pcm = np.frombuffer(w.readframes(len(samples)), dtype="<i2")
    assert pcm[:6].tolist() == [0, 16384, -32767, 32767, 32767, -8192]   # clipped to [-1, 1]


def test_play_calls_on_step_and_ends(page):
    grid, onsets = one_voice([(69, t % 2 == 0) for t in range(8)])
    steps = page.evaluate("""async ([g, o]) => {
      const seen = [];
      const p = MusictxSound.play(g, o, {bpm: 240, onStep: s => seen.push(s)});   // 8 16ths: 0.5 s
      await p.done;
      return seen;
    }""", [grid, onsets])
    assert steps[-1] == -1 and steps[0] == 0 and steps[:-1] == sorted(set(steps[:-1])), steps
    assert max(steps) >= 5                                   # the cursor saw most of the steps
    # stop() ends a long piece at once; a bad tempo rejects with a message
    took = page.evaluate("""async ([g, o]) => {
      const p = MusictxSound.play(g, o, {bpm: 10});          // 8 16ths: 12 s
      await new Promise(r => setTimeout(r, 300));
      const t = performance.now();
      p.stop();
      await p.done;
      return performance.now() - t;
    }""", [grid, onsets])
    assert took < 200
    message = page.evaluate("""([g, o]) => MusictxSound.play(g, o, {bpm: 0}).done.then(() => "resolved",
                                                                                  e => e.message)""",
                            [grid, onsets])
    assert "bpm" in message
