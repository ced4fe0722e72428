/* sound.js: draw and play a four-voice chorale in the browser. No modules, no dependencies, no network.
 *
 * A chorale is a grid: an array of steps on a 16th-note grid, each [S, A, T, B] MIDI pitches, -1 for a
 * rest. `onsets` has the same shape, true where a note starts; a voice holds its note while the pitch
 * stays the same and no onset comes (without onsets, a note starts wherever the pitch changes).
 *
 *   MusictxSound.notesOf(grid, onsets)                     -> [{voice, pitch, start, end}] (in steps)
 *   MusictxSound.drawRoll(canvas, grid, onsets, {title, given, cursor, width})
 *   MusictxSound.play(grid, onsets, {bpm, gains, onStep})   -> {stop(), done: Promise}
 *   MusictxSound.render(grid, onsets, {bpm, gains, rate})   -> Promise<Float32Array> (mono, 22050 Hz)
 *   MusictxSound.toWav(samples, rate)                      -> Blob (16-bit PCM WAV)
 *
 * The sound is the additive organ of musictx_lite/io/audio.py (`organ`), made with the Web Audio API.
 */
(function () {
  "use strict";

  const VOICES = ["soprano", "alto", "tenor", "bass"];
  const COLORS = ["#d62728", "#2ca02c", "#1f77b4", "#9467bd"];   // S A T B, as the book's figures

  // The organ of audio.py: the loudness of harmonics 1, 2, 3, 4, 6 and 8, and its envelope in seconds
  const HARMONICS = {1: 1.0, 2: 0.55, 3: 0.35, 4: 0.3, 6: 0.15, 8: 0.1};
  const ATTACK = 0.015, RELEASE = 0.08;
  const VELOCITY = 80 / 127;   // every note of the package's MIDI has velocity 80
  const PEAK = 0.9;            // render() scales its audio to this peak, as audio.py does
  // play() cannot scale afterwards: four voices at their loudest stay below PEAK
  const LEVEL = PEAK / (4 * VELOCITY * Object.values(HARMONICS).reduce((a, b) => a + b));

  /* The notes of a grid, as notes_of in musictx_lite/io/midi.py: a note ends at a rest, where the pitch
     changes, or where an onset starts the next note. The roll and the synth both draw on this. */
  function notesOf(grid, onsets) {
    const notes = [];
    for (let v = 0; v < 4; v++) {
      let start = -1;
      for (let t = 0; t <= grid.length; t++) {
        const p = t < grid.length ? grid[t][v] : -1;
        const onset = Boolean(onsets && t < grid.length && onsets[t][v]);
        if (start >= 0 && (p !== grid[start][v] || onset)) {
          notes.push({voice: v, pitch: grid[start][v], start: start, end: t});
          start = -1;
        }
        if (start < 0 && p >= 0) start = t;
      }
    }
    return notes;
  }

  // ---- Sound ------------------------------------------------------------------------------------

  function stepSeconds(opts) {                   // one 16th note: a quarter is 60 / bpm seconds
    const bpm = opts.bpm === undefined ? 80 : opts.bpm;
    if (!(bpm > 0)) throw new Error("bpm must be a positive number, got " + bpm);
    return 60 / bpm / 4;
  }

  const waves = new WeakMap();                   // the organ's timbre, one PeriodicWave per context
  function organWave(ctx) {
    if (!waves.has(ctx)) {
      const imag = new Float32Array(9);          // sine amplitudes of harmonics 0..8
      for (const k in HARMONICS) imag[k] = HARMONICS[k];
      waves.set(ctx, ctx.createPeriodicWave(new Float32Array(9), imag, {disableNormalization: true}));
    }
    return waves.get(ctx);
  }

  /* Schedule the notes on `ctx` from time t0 into `out`: one oscillator per note, with the organ's
     harmonics (the browser drops those above half the sample rate), faded in over ATTACK and out over
     RELEASE after the note ends, so that nothing clicks. Returns the oscillators. */
  function schedule(ctx, out, notes, t0, dt, gains) {
    const wave = organWave(ctx);
    return notes.map(n => {
      const osc = ctx.createOscillator(), env = ctx.createGain();
      const start = t0 + n.start * dt, end = Math.max(t0 + n.end * dt, start + ATTACK);
      const level = VELOCITY * (gains ? gains[n.voice] : 1);
      osc.setPeriodicWave(wave);
      osc.frequency.value = 440 * Math.pow(2, (n.pitch - 69) / 12);
      env.gain.setValueAtTime(0, start);
      env.gain.linearRampToValueAtTime(level, start + ATTACK);
      env.gain.setValueAtTime(level, end);
      env.gain.linearRampToValueAtTime(0, end + RELEASE);
      osc.connect(env).connect(out);
      osc.start(start);
      osc.stop(end + RELEASE);
      return osc;
    });
  }

  let shared = null;     // the page's one AudioContext, made on the first play()
  let playing = null;    // what plays now: a new play() stops it

  async function startedContext() {
    const Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) throw new Error("This browser has no Web Audio API, so it cannot play the chorale.");
    shared = shared || new Context();
    if (shared.state !== "running") {            // resume() may wait for a click forever: wait 1 s
      await Promise.race([shared.resume().catch(() => {}), new Promise(r => setTimeout(r, 1000))]);
    }
    if (shared.state !== "running") {
      throw new Error("The browser did not start the sound (audio is " + shared.state + "): browsers " +
                      "allow sound only after a click or key press on the page, so click Play.");
    }
    return shared;
  }

  /* Play a grid now. opts: bpm (quarter notes per minute, default 80), gains (per voice, S A T B,
     default [1, 1, 1, 1]), onStep(step) called as each step starts and with -1 at the end.
     Returns {stop(), done}: done resolves when the music ends or stops, and rejects if the sound
     cannot start. */
  function play(grid, onsets, opts = {}) {
    if (playing) playing.stop();
    let stopped = false, finish = null, halt = null;
    const done = startedContext().then(ctx => new Promise(resolve => {
      if (stopped) return resolve();
      const dt = stepSeconds(opts), t0 = ctx.currentTime + 0.05;
      const master = ctx.createGain();
      master.gain.value = LEVEL;
      master.connect(ctx.destination);
      const oscillators = schedule(ctx, master, notesOf(grid, onsets), t0, dt, opts.gains);
      let frame = 0, shown = -1;
      const tick = () => {                        // the cursor follows the audio clock
        const step = Math.floor((ctx.currentTime - t0) / dt);
        if (step !== shown && step >= 0 && step < grid.length) opts.onStep((shown = step));
        frame = requestAnimationFrame(tick);
      };
      if (opts.onStep) frame = requestAnimationFrame(tick);
      const timer = setTimeout(() => finish(), (t0 - ctx.currentTime + grid.length * dt + RELEASE) * 1000);
      halt = () => {                              // fade out quickly, then let go of the nodes
        const now = ctx.currentTime;
        master.gain.setTargetAtTime(0, now, 0.01);
        oscillators.forEach(o => o.stop(now + 0.1));
      };
      finish = () => {
        clearTimeout(timer);
        cancelAnimationFrame(frame);
        finish = () => {};
        halt = null;
        setTimeout(() => master.disconnect(), 200);
        if (opts.onStep) opts.onStep(-1);
        resolve();
      };
    }));
    const handle = {
      stop() {
        stopped = true;
        if (halt) { halt(); halt = null; }
        if (finish) finish();
      },
      done: done.finally(() => { if (playing === handle) playing = null; }),
    };
    playing = handle;
    return handle;
  }

  /* The same sound rendered offline: mono samples at opts.rate (default 22050 Hz), scaled to a peak
     of 0.9 like the package's audio; the grid's length plus the last release. */
  async function render(grid, onsets, opts = {}) {
    const rate = opts.rate || 22050, dt = stepSeconds(opts);
    const ctx = new OfflineAudioContext(1, Math.ceil((grid.length * dt + RELEASE) * rate) + 1, rate);
    schedule(ctx, ctx.destination, notesOf(grid, onsets), 0, dt, opts.gains);
    const samples = (await ctx.startRendering()).getChannelData(0);
    const peak = samples.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    if (peak > 0) samples.forEach((x, i) => { samples[i] = x * PEAK / peak; });
    return samples;
  }

  /* Samples in [-1, 1] as a 16-bit PCM mono WAV file. */
  function toWav(samples, rate = 22050) {
    const n = samples.length, view = new DataView(new ArrayBuffer(44 + 2 * n));
    const text = (at, s) => [...s].forEach((c, i) => view.setUint8(at + i, c.charCodeAt(0)));
    text(0, "RIFF"); view.setUint32(4, 36 + 2 * n, true); text(8, "WAVE");
    text(12, "fmt "); view.setUint32(16, 16, true);              // the format chunk: 16 bytes
    view.setUint16(20, 1, true); view.setUint16(22, 1, true);     // PCM, one channel
    view.setUint32(24, rate, true); view.setUint32(28, 2 * rate, true);   // samples, bytes per second
    view.setUint16(32, 2, true); view.setUint16(34, 16, true);    // bytes per sample, bits per sample
    text(36, "data"); view.setUint32(40, 2 * n, true);
    for (let i = 0; i < n; i++) {
      view.setInt16(44 + 2 * i, Math.round(32767 * Math.max(-1, Math.min(1, samples[i]))), true);
    }
    return new Blob([view], {type: "audio/wav"});
  }

  // ---- Piano roll -------------------------------------------------------------------------------

  const LEFT = 34, RIGHT = 8, TOP = 38, BOTTOM = 6;   // margins in CSS pixels: labels left and top
  const MIN_STEP = 6;                                 // px per 16th at least: long rolls scroll

  /* Draw a piano roll of the grid on `canvas`. opts: title; given (an array of booleans per step,
     shaded, e.g. a continuation's prompt; or a voice index, whose notes are outlined, e.g. the given
     melody); cursor (a step, marked by a line); width (CSS px, default the canvas's own CSS width).
     The canvas is sized to its CSS width and the device's pixel ratio, wider if the steps need it.
     Returns {stepWidth, left}: a step t starts at x = left + t * stepWidth (CSS px). */
  function drawRoll(canvas, grid, onsets, opts = {}) {
    const notes = notesOf(grid, onsets), steps = Math.max(grid.length, 1);
    const pitches = notes.map(n => n.pitch);
    // the pitches drawn: the notes' range and 2 semitones more, at least 15 rows (so at least one C)
    let lo = (pitches.length ? Math.min(...pitches) : 60) - 2, hi = (pitches.length ? Math.max(...pitches) : 60) + 2;
    while (hi - lo < 14) { lo--; hi++; }
    const row = 6;                                      // px per semitone

    // the first draw remembers the CSS width, so a redraw (a moving cursor) keeps the same layout
    const base = opts.width || Number(canvas.dataset.baseWidth) || canvas.clientWidth || 640;
    canvas.dataset.baseWidth = base;
    const stepWidth = Math.max(MIN_STEP, (base - LEFT - RIGHT) / steps);
    const width = LEFT + steps * stepWidth + RIGHT, height = TOP + (hi - lo + 1) * row + BOTTOM;
    const ratio = window.devicePixelRatio || 1;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    const x = t => LEFT + t * stepWidth, y = p => TOP + (hi - p) * row;   // a pitch's row: y(p)..y(p) + row
    const bottom = y(lo) + row;

    g.fillStyle = "#ffffff";
    g.fillRect(0, 0, width, height);
    g.font = "11px sans-serif";
    g.textBaseline = "middle";

    // the given steps shaded; rows of the black keys a shade darker; a line and a label at every C
    if (Array.isArray(opts.given)) {
      g.fillStyle = "#e4e4e4";
      opts.given.forEach((on, t) => { if (on) g.fillRect(x(t), TOP, stepWidth + 0.5, bottom - TOP); });
    }
    for (let p = lo; p <= hi; p++) {
      if ([1, 3, 6, 8, 10].includes(p % 12)) {
        g.fillStyle = "rgba(0, 0, 0, 0.035)";
        g.fillRect(LEFT, y(p), width - LEFT - RIGHT, row);
      }
      if (p % 12 === 0) {
        g.fillStyle = "#bbbbbb";
        g.fillRect(LEFT, y(p) + row - 0.5, width - LEFT - RIGHT, 0.5);
        g.fillStyle = "#444444";
        g.textAlign = "right";
        g.fillText("C" + (p / 12 - 1), LEFT - 5, y(p) + row / 2);
      }
    }

    // a faint line every beat, a darker one and the bar's number every bar (16 steps)
    g.textAlign = "left";
    for (let t = 0; t <= grid.length; t += 4) {
      const bar = t % 16 === 0;
      g.fillStyle = bar ? "#999999" : "#e6e6e6";
      g.fillRect(Math.round(x(t)) - 0.5, TOP, 1, bottom - TOP);
      if (bar && t < grid.length) {
        g.fillStyle = "#666666";
        g.fillText(String(t / 16 + 1), x(t) + 2, TOP - 8);
      }
    }

    // the notes: one bar each, a hair short so that repeated notes show as two; the given voice outlined
    notes.forEach(n => {
      const nx = x(n.start) + 0.5, nw = Math.max(1, (n.end - n.start) * stepWidth - 1.5);
      g.globalAlpha = 0.85;
      g.fillStyle = COLORS[n.voice];
      g.fillRect(nx, y(n.pitch) + 0.5, nw, row - 1);
      g.globalAlpha = 1;
      if (opts.given === n.voice) {
        g.strokeStyle = "#000000";
        g.lineWidth = 1.2;
        g.strokeRect(nx, y(n.pitch) + 0.5, nw, row - 1);
      }
    });

    // the title, then the legend, at the top left (it stays in view when the roll scrolls)
    let lx = 4;
    g.fillStyle = "#000000";
    if (opts.title) {
      g.font = "bold 12px sans-serif";
      g.fillText(opts.title, lx, 10);
      lx += g.measureText(opts.title).width + 14;
      g.font = "11px sans-serif";
    }
    VOICES.forEach((name, v) => {
      g.fillStyle = COLORS[v];
      g.fillRect(lx, 6, 10, 8);
      if (opts.given === v) { g.strokeStyle = "#000000"; g.lineWidth = 1.2; g.strokeRect(lx, 6, 10, 8); }
      const label = opts.given === v ? name + " (given)" : name;
      g.fillStyle = "#333333";
      g.fillText(label, lx + 13, 10);
      lx += 13 + g.measureText(label).width + 10;
    });
    if (Array.isArray(opts.given)) {
      g.fillStyle = "#e4e4e4";
      g.fillRect(lx, 5, 14, 10);
      g.fillStyle = "#333333";
      g.fillText("given", lx + 17, 10);
    }

    // the play cursor
    if (opts.cursor !== undefined && opts.cursor !== null && opts.cursor >= 0) {
      g.fillStyle = "rgba(0, 0, 0, 0.08)";
      g.fillRect(x(opts.cursor), TOP, stepWidth, bottom - TOP);
      g.fillStyle = "#000000";
      g.fillRect(x(opts.cursor) - 1, TOP - 3, 2, bottom - TOP + 3);
    }
    return {stepWidth: stepWidth, left: LEFT};
  }

  window.MusictxSound = {notesOf, drawRoll, play, render, toWav, VOICES, COLORS};
})();
