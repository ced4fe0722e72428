/* The model on the page: continue a held-out chorale, or harmonise a melody, in the reader's browser.
 *
 * The book's shipped models, exported to ONNX by `python -m scripts.export_web` (musictx_lite/study/web.py),
 * run in ONNX Runtime Web (WebAssembly, one thread), bundled with the book: nothing is fetched from
 * another host. Sampling follows musictx_lite.engine.sample.generate step for step (the window that
 * slides by half a context, the banned tokens, top-k, the temperature), so that greedy decoding here
 * returns the tokens the package returns (tests/book/test_play.py checks it in Chromium); sampled ones
 * differ, for the random generator is not torch's. Two differences of form: the graph holds no state
 * (the page keeps the keys and values, models/export_step.py), and a given token (a melody's) is read
 * together with the next call instead of costing a call of its own.
 *
 * A page asks for a widget with <div class="musictx-play" data-mode="continue|harmonise|both"></div>;
 * book/_ext/play.py adds this script (with ort.wasm.min.js, melody.js, rules.js, sound.js and files.js) to
 * those pages only; a widget loads only the model its mode uses (MODELS), and says so until it is warm.
 * window.musictxPlay is the same machinery without the buttons: continueChorale, harmonise, generate.
 */
(function () {
  "use strict";
  const BASE = new URL(".", document.currentScript.src).href;     // .../_static/play/
  let basics = null;                                              // the record and the prompts
  const sessions = {};                                            // a model's graphs, loaded on first use

  // -- loading -----------------------------------------------------------------------------------

  /* The record, the prompts and the graphs of the models `names` (default: every model), each model
   * fetched, compiled and warmed once, when a page first asks for it: a page loads only what it uses. */
  async function load(names = null) {
    if (!basics) {
      basics = (async () => {
        if (location.protocol === "file:") {
          throw new Error("browsers do not run WebAssembly for a page opened from a file: serve the book " +
            "(python3 -m http.server -d _build/html 8000) and open http://localhost:8000");
        }
        if (typeof ort === "undefined") throw new Error("ONNX Runtime Web did not load (ort.wasm.min.js)");
        ort.env.wasm.wasmPaths = BASE + "ort/";
        ort.env.wasm.numThreads = 1;           // threads need cross-origin isolation, which static hosts lack
        const json = async (f) => {
          const r = await fetch(BASE + f);
          if (!r.ok) throw new Error(`could not load ${f} (${r.status})`);
          return r.json();
        };
        const [record, prompts] = await Promise.all([json("models.json"), json("chorales.json")]);
        return {record, prompts};
      })();
      basics.catch(() => { basics = null; });   // a failed load may be tried again
    }
    const {record, prompts} = await basics;
    for (const name of names || Object.keys(record.models)) {
      const m = record.models[name];
      if (!m) throw new Error(`no model called ${name}`);
      if (!sessions[name]) {
        sessions[name] = (async () => {
          const graphs = await Promise.all(m.graphs.map((g) => ort.InferenceSession.create(BASE + g.file,
            {executionProviders: ["wasm"], graphOptimizationLevel: "all"})));
          await warmUp(graphs, m);
          return graphs;
        })();
        sessions[name].catch(() => { delete sessions[name]; });
      }
    }
    const graphs = {};
    for (const name of Object.keys(sessions)) if (!names || names.includes(name)) graphs[name] = await sessions[name];
    return {record, prompts, graphs};
  }

  /* A first call is slow (WebAssembly compiles, its memory grows): call each graph as sampling will,
   * a whole window into one unused row, then one token against a full cache, before anyone waits. */
  async function warmUp(sessions, m) {
    const ctx = m.context, row = m.n_heads * m.head_size, melody = {};
    if (sessions.length > 1) Object.assign(melody, await sessions[0].run({melody: i64(Array(ctx / 4).fill(20), [1, ctx / 4])}));
    for (const [T, P] of [[ctx - 1, 1], ...Array(40).fill([1, ctx - 1])]) {
      const feeds = {tokens: i64(Array(T).fill(5), [1, T]), pos: i64([P === 1 ? 0 : P], []), ...melody};
      for (let l = 0; l < m.n_layers; l++) {
        for (const kind of ["keys", "values"]) feeds[`${kind}_${l}`] = new ort.Tensor("float32", new Float32Array(P * row), [1, P, m.n_heads, m.head_size]);
      }
      await sessions[sessions.length - 1].run(feeds);
    }
  }

  // -- tokens, as musictx_lite.io.tokens ------------------------------------------------------------

  function encode(grid, TOK) {                  // (steps, 4) pitches -> BOS, then S A T B per step
    const out = [TOK.BOS];
    for (const step of grid) for (const p of step) out.push(p >= 0 ? p - TOK.LOWEST + TOK.N_SPECIAL : TOK.REST);
    return out;
  }

  function decode(tokens, TOK) {                // tokens -> (steps, 4) pitches, -1 for rest
    const body = tokens[0] === TOK.BOS ? tokens.slice(1) : tokens, grid = [];
    for (let s = 0; s + 4 <= body.length; s += 4) {
      grid.push(body.slice(s, s + 4).map((t) => (t >= TOK.N_SPECIAL ? t - TOK.N_SPECIAL + TOK.LOWEST : -1)));
    }
    return grid;
  }

  function onsetsOf(grid, melodyOnsets) {       // a note starts where the pitch changes (and where the melody says)
    return grid.map((step, t) => step.map((p, v) => {
      if (v === 0 && melodyOnsets) return !!melodyOnsets[t];
      return p >= 0 && (t === 0 || grid[t - 1][v] !== p);
    }));
  }

  // -- sampling, as musictx_lite.engine.sample ------------------------------------------------------

  function windowStart(n, start, ctx) {          // sample.window_start
    if (n - start <= ctx) return start;
    const keep = Math.max(4, Math.floor(ctx / 2));
    return Math.ceil((n - keep) / 4) * 4;
  }

  // harmonise's defaults: engine.harmonise.DEFAULT_RULES and DEFAULT_CANDIDATES (tests/book/test_rules_js.py)
  const DEFAULTS = {rules: "all", candidates: 1};

  function random(seed) {                        // mulberry32: a small seeded generator (not torch's)
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6D2B79F5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function pick(logits, {temperature, topK, banned, rand}) {
    const l = Array.from(logits);
    for (const b of banned) l[b] = -Infinity;
    if (topK) {
      const kth = [...l].sort((x, y) => y - x)[Math.min(topK, l.length) - 1];
      for (let i = 0; i < l.length; i++) if (l[i] < kth) l[i] = -Infinity;
    }
    const max = Math.max(...l);
    const p = l.map((x) => Math.exp((x - max) / temperature));
    const total = p.reduce((a, b) => a + b, 0);
    let r = rand() * total;
    for (let i = 0; i < p.length; i++) { if (p[i] > 0 && (r -= p[i]) <= 0) return i; }
    return l.indexOf(max);
  }

  const i64 = (xs, dims) => new ort.Tensor("int64", BigInt64Array.from(xs, (x) => BigInt(x)), dims);

  /* Continue `prompt` (tokens, BOS first) by nSteps steps of 4 tokens with the model `name`
   * ("relative" or "harmoniser"); `forced` (4 nSteps entries, -1 = free) fixes tokens, as in generate.
   * `rules` (MusictxRules) mask each sampled token, dead ends counted in the result's `relaxed`; the result's
   * `logp` is the model's log-probability (unmasked, temperature 1) of the tokens it sampled. */
  async function generate(name, prompt, nSteps, opts = {}) {
    const {record, graphs} = await load([name]);
    const m = record.models[name], ctx = m.context, TOK = record.tokens;
    const temperature = opts.temperature ?? 1, topK = opts.topK ?? null, forced = opts.forced || null;
    if (!(temperature > 0 && Number.isFinite(temperature))) throw new Error(`the temperature must be a number above 0, got ${opts.temperature}`);
    if (topK !== null && !(Number.isInteger(topK) && topK >= 1)) throw new Error(`top-k must be a whole number of at least 1, got ${topK}`);
    if (prompt.length > ctx) throw new Error(`the prompt has ${prompt.length} tokens; the model's context is ${ctx}`);
    const step = graphs[name][graphs[name].length - 1], rand = random(opts.seed ?? 0);
    const row = m.n_heads * m.head_size;                      // one position's keys (or values), all heads
    const melody = name === "harmoniser" ? [...prompt, ...forced].filter((_, i) => i % 4 === 1) : null;
    const idx = [...prompt], rules = opts.rules || null, relaxed = {tokens: 0, dropped: {}};
    let start = 0, state = null, logp = 0;
    const t0 = performance.now();
    for (let i = 0; i < 4 * nSteps; i++) {
      const s = windowStart(idx.length, start, ctx);
      if (s !== start) { start = s; state = null; }           // the window slid: the cache is stale
      const given = forced ? forced[idx.length - prompt.length] : -1;
      if (given !== undefined && given >= 0) {
        idx.push(given);                                      // given, not sampled: no call needed now,
        continue;                                             // the next call reads it with the token after
      }
      const feeds = {};
      if (state === null) {                                   // the window once, into an empty cache
        state = {pos: 0, cache: {}, memory: {}};
        for (let l = 0; l < m.n_layers; l++) {                // each layer's keys and values, kept here
          for (const kind of ["keys", "values"]) state.cache[`${kind}_${l}`] = new Float32Array(ctx * row);
        }
        if (melody) {                                          // the encoder once per window
          const mel = melody.slice(start / 4, start / 4 + Math.ceil(ctx / 4));
          state.memory = await graphs[name][0].run({melody: i64(mel, [1, mel.length])});
        }
      }
      const fresh = idx.slice(start + state.pos);             // the tokens the cache has not seen
      const T = fresh.length;
      feeds.tokens = i64(fresh, [1, T]);
      feeds.pos = i64([state.pos], []);
      const P = Math.max(state.pos, 1);                       // the rows kept (a prompt passes one, unused)
      for (const [key, data] of Object.entries(state.cache)) {
        feeds[key] = new ort.Tensor("float32", data.subarray(0, P * row), [1, P, m.n_heads, m.head_size]);
      }
      Object.assign(feeds, state.memory);                     // the harmoniser: each block's memory_keys_l, memory_values_l
      const out = await step.run(feeds);
      for (const [key, data] of Object.entries(state.cache)) data.set(out["new_" + key].data, state.pos * row);
      state.pos += T;
      const V = out.logits.dims[2];
      const logits = out.logits.data.subarray((T - 1) * V, T * V);
      let allowed = logits;
      if (rules && (idx.length - 1) % 4 !== 0) {              // alto, tenor, bass: only what the rules allow
        const grid = decode([...idx, 0, 0, 0], TOK).slice(0, Math.floor((idx.length - 1) / 4) + 1);
        const usable = Array.from({length: V}, (_, k) => !record.banned.includes(k));
        const ok = MusictxRules.ruleMask(rules, grid, (idx.length - 1) % 4, usable, relaxed);
        allowed = Array.from(logits, (x, k) => (ok[k] ? x : -Infinity));
      }
      const next = pick(allowed, {temperature, topK, banned: record.banned, rand});
      const top = Math.max(...logits);
      logp += logits[next] - top - Math.log(logits.reduce((a, x) => a + Math.exp(x - top), 0));
      idx.push(next);
      if (opts.onToken && i % 64 === 63) await opts.onToken(i + 1);
    }
    const seconds = (performance.now() - t0) / 1000;
    return {tokens: idx, seconds, tokensPerSecond: (4 * nSteps) / seconds, grid: decode(idx, TOK), logp, relaxed};
  }

  // -- the two tasks ------------------------------------------------------------------------------

  async function continueChorale(opts = {}) {
    const {record, prompts} = await load(["relative"]);
    const piece = prompts.chorales[opts.chorale ?? 0];
    if (!piece) throw new Error(`there is no held-out chorale number ${opts.chorale}`);
    const promptSteps = opts.promptSteps ?? 32, steps = opts.steps ?? 64;
    if (!(Number.isInteger(promptSteps) && promptSteps >= 1 && promptSteps <= piece.grid.length)) {
      throw new Error(`the prompt is 1 to ${piece.grid.length} steps of the chorale, got ${opts.promptSteps}`);
    }
    if (!(Number.isInteger(steps) && steps >= 1 && steps <= 1024)) throw new Error(`the length to add is 1 to 1024 steps, got ${opts.steps}`);
    const prompt = encode(piece.grid.slice(0, promptSteps), record.tokens);
    const out = await generate("relative", prompt, steps, opts);
    return {...out, name: piece.name, promptSteps, onsets: onsetsOf(out.grid)};
  }

  async function harmonise(text, opts = {}) {
    const {record} = await load(["harmoniser"]);
    const TOK = record.tokens;
    const melody = MusictxMelody.parse(text, {transpose: opts.transpose ?? null, maxSteps: record.max_steps});
    const forced = [];
    for (const p of melody.pitches) forced.push(p >= 0 ? p - TOK.LOWEST + TOK.N_SPECIAL : TOK.REST, -1, -1, -1);
    const rules = MusictxRules.rulesFor(opts.rules ?? DEFAULTS.rules, melody.pitches, melody.metre, melody.pickup);
    const n = opts.candidates ?? DEFAULTS.candidates;
    if (!(Number.isInteger(n) && n >= 1 && n <= 16)) throw new Error(`the candidates are a whole number from 1 to 16, got ${opts.candidates}`);
    let out = null;                                           // the likeliest of n (engine.harmonise.harmonise)
    for (let c = 0; c < n; c++) {
      const one = await generate("harmoniser", [TOK.BOS], melody.pitches.length,
                                 {...opts, forced, rules, seed: (opts.seed ?? 0) + c});
      if (out === null || one.logp > out.logp) out = {...one, seconds: (out ? out.seconds : 0) + one.seconds};
      else out.seconds += one.seconds;
    }
    out.tokensPerSecond = (4 * n * melody.pitches.length) / out.seconds;
    out.grid.forEach((step, t) => {                          // the melody, exactly (harmonise._checked)
      if (step[0] !== melody.pitches[t]) throw new Error(`the melody was not kept at step ${t}`);
    });
    return {...out, melody, onsets: onsetsOf(out.grid, melody.onsets)};
  }

  // -- the widget ---------------------------------------------------------------------------------

  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) (k in e && k !== "list") ? (e[k] = v) : e.setAttribute(k, v);
    e.append(...kids);
    return e;
  };
  const field = (label, input) => el("label", {className: "musictx-play-field"}, label + " ", input);
  const MODELS = {continue: ["relative"], harmonise: ["harmoniser"], both: ["relative", "harmoniser"]};
  const newSeed = () => Math.floor(Math.random() * 1e6);

  /* A number field's value, or an error that names the field and what it got */
  function number(input, what, {min, max, whole = false}) {
    const text = input.value.trim(), x = Number(text);
    const ok = text !== "" && Number.isFinite(x) && (!whole || Number.isInteger(x)) && x >= min && x <= max;
    if (!ok) {
      throw new Error(`${what}: ${whole ? "a whole number" : "a number"} from ${min} to ${max}, got "${input.value}"`);
    }
    return x;
  }

  /* A seed field and its "new seed each run" box: a run with the box ticked draws a new seed and shows it,
     so that a result can be made again (untick the box, keep the seed) */
  function seedFields() {
    const seed = el("input", {type: "number", step: 1, min: 0, value: newSeed(), className: "musictx-play-seed"});
    const fresh = el("input", {type: "checkbox", checked: true, className: "musictx-play-new-seed"});
    const fields = [field("seed", seed), el("label", {className: "musictx-play-field"}, fresh, " new seed each run")];
    return {fields, next() {
      if (fresh.checked) seed.value = newSeed();
      return number(seed, "the seed", {min: 0, max: 2 ** 31 - 1, whole: true});
    }};
  }

  function download(data, name, type) {
    const a = el("a", {href: URL.createObjectURL(new Blob([data], {type})), download: name});
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  }

  function output(root) {                       // a roll, play / save buttons, a status line, a message
    const canvas = el("canvas", {className: "musictx-play-roll", height: 260, role: "img",
                                  "aria-label": "piano roll: nothing yet"});
    const playBtn = el("button", {type: "button", disabled: true, textContent: "▶ Play"});
    const saves = [["WAV", "audio/wav"], ["MIDI", "audio/midi"], ["MusicXML", "application/vnd.recordare.musicxml+xml"]]
      .map(([what, type]) => [what, type, el("button", {type: "button", disabled: true, textContent: `Save ${what}`,
                                                         className: `musictx-play-save-${what.toLowerCase()}`})]);
    const status = el("div", {className: "musictx-play-status", role: "status", "aria-live": "polite"});
    const error = el("div", {className: "musictx-play-error", role: "alert"});
    const log = el("div", {className: "musictx-play-log"});
    const scroll = el("div", {className: "musictx-play-scroll", tabIndex: 0,    // scrolls by keyboard too
                              role: "region", "aria-label": "the piano roll (scrolls sideways)"}, canvas);
    root.append(log, scroll, el("div", {}, playBtn, ...saves.map((x) => x[2])), status, error);
    let shown = null, player = null;
    const follow = (s) => {                       // keep the cursor in the middle third of the view
      const x = canvas.clientWidth * (s / Math.max(1, shown.grid.length)), w = scroll.clientWidth;
      if (x < scroll.scrollLeft + w / 3 || x > scroll.scrollLeft + (2 * w) / 3) scroll.scrollLeft = Math.max(0, x - w / 3);
    };
    playBtn.onclick = async () => {
      if (player) { player.stop(); return; }
      try {
        playBtn.textContent = "■ Stop";
        player = MusictxSound.play(shown.grid, shown.onsets, {onStep: (s) => {
          MusictxSound.drawRoll(canvas, shown.grid, shown.onsets, {...shown.draw, cursor: s});
          follow(s);
        }});
        await player.done;
      } catch (e) { error.textContent = "error: " + e.message; }
      player = null;
      playBtn.textContent = "▶ Play";
      MusictxSound.drawRoll(canvas, shown.grid, shown.onsets, shown.draw);
    };
    for (const [what, type, btn] of saves) {
      btn.onclick = async () => {
        try {
          const data = what === "WAV" ? MusictxSound.toWav(await MusictxSound.render(shown.grid, shown.onsets, {}), 22050)
            : what === "MIDI" ? MusictxFiles.midi(shown.grid, shown.onsets)
              : MusictxFiles.musicxml(shown.grid, shown.onsets, {title: shown.draw.title});
          download(data, `${shown.name}.${{WAV: "wav", MIDI: "mid", MusicXML: "musicxml"}[what]}`, type);
        } catch (e) { error.textContent = "error: " + e.message; }
      };
    }
    return {
      error, status, log,
      show(grid, onsets, draw, name) {
        shown = {grid, onsets, draw, name};
        MusictxSound.drawRoll(canvas, grid, onsets, draw);
        scroll.scrollLeft = 0;
        const bars = grid.length / 16, notes = MusictxFiles.notesOf(grid, onsets).map((v) => v.length);
        canvas.setAttribute("aria-label", `piano roll: ${draw.title}; ${bars} bar${bars === 1 ? "" : "s"} of 4/4, ` +
          `soprano ${notes[0]} notes, alto ${notes[1]}, tenor ${notes[2]}, bass ${notes[3]}`);
        playBtn.disabled = false;
        for (const [, , btn] of saves) btn.disabled = false;
      },
    };
  }

  function speed(r, what) {
    const bars = (n) => `${n / 16} bar${n === 16 ? "" : "s"}`;
    return `${what} ${bars(r.grid.length - r.given)} in ${r.seconds.toFixed(2)} s, seed ${r.seed} ` +
      `(${Math.round(r.tokensPerSecond)} choices a second in this browser: a choice is one voice's next 16th)`;
  }

  async function run(button, out, work) {
    out.error.textContent = "";
    out.log.textContent = "";                    // a failed run leaves no note of the run before
    button.disabled = true;
    out.status.textContent = "working…";
    try {
      await work();
    } catch (e) {
      out.status.textContent = "";
      out.error.textContent = "error: " + e.message;
    } finally {
      button.disabled = false;
    }
  }

  /* The panel's button says "loading…" and stays off until its model is loaded and warm */
  function whenLoaded(names, go, out, ready) {
    const label = go.textContent;
    go.disabled = true;
    go.textContent = "loading the model…";
    out.status.textContent = "loading the model into this page (a few seconds)…";
    load(names).then((got) => {
      go.disabled = false;
      go.textContent = label;
      out.status.textContent = "ready";
      if (ready) ready(got);
    }).catch((e) => {
      go.textContent = label;
      go.disabled = false;                       // a click tries the load again and says why it failed
      out.status.textContent = "";
      out.error.textContent = "error: " + e.message;
    });
  }

  function continuePanel(root) {
    const chorale = el("select", {className: "musictx-play-chorale"});
    // at most 3 bars: 4 bars of 4 voices and BOS are 257 tokens, one more than the model's context
    const bars = el("select", {className: "musictx-play-prompt"}, ...[1, 2, 3].map((b) => el("option", {value: b * 16, textContent: `${b} bar${b > 1 ? "s" : ""}`})));
    bars.value = "32";
    const length = el("input", {type: "number", min: 1, max: 16, value: 4, className: "musictx-play-length"});
    const temp = el("input", {type: "number", min: 0.05, max: 3, step: 0.05, value: 1, className: "musictx-play-temperature"});
    const seed = seedFields();
    const go = el("button", {type: "button", className: "musictx-play-go", textContent: "Continue the chorale"});
    const panel = el("fieldset", {className: "musictx-play-panel"}, el("legend", {}, "Continue a held-out chorale"),
      field("chorale", chorale), field("prompt", bars), field("bars to add", length), field("temperature", temp),
      ...seed.fields, go);
    root.append(panel);
    const out = output(panel);
    whenLoaded(MODELS.continue, go, out, ({prompts}) => {
      chorale.textContent = "";
      prompts.chorales.forEach((c, i) => chorale.append(el("option", {value: i,
        textContent: `test chorale ${i + 1} of ${prompts.chorales.length} (${c.name})`})));
    });
    go.onclick = () => run(go, out, async () => {
      const n = number(length, "bars to add", {min: 1, max: 16, whole: true});
      const t = number(temp, "the temperature", {min: 0.05, max: 3});
      const s = seed.next();
      const r = await continueChorale({chorale: Number(chorale.value || 0), promptSteps: Number(bars.value), steps: 16 * n,
        temperature: t, seed: s,
        onToken: (k) => { out.status.textContent = `writing… ${k} of ${64 * n} choices`; return new Promise((ok) => setTimeout(ok, 0)); }});
      r.given = r.promptSteps;
      r.seed = s;
      out.show(r.grid, r.onsets, {title: `${r.name}: ${r.promptSteps / 16} bar${r.promptSteps > 16 ? "s" : ""} of Bach, then the model`,
        given: r.grid.map((_, t) => t < r.promptSteps)}, MusictxFiles.fileName(`${r.name} continued seed ${s}`));
      out.status.textContent = speed(r, "continued by");
    });
  }

  /* Two octaves from middle C. Each key types its note as music21 reads it back (MusictxMelody.tinyName:
     C#5 is c'#), is named as the roll names it (C4, C#4), and sounds it. One tab stop: the arrow keys move
     between keys, Enter or Space types. */
  function keyboard(input, duration) {
    const kb = el("div", {className: "musictx-play-keyboard", role: "group",
                          "aria-label": "keyboard, C4 to C6: arrow keys choose a key, Enter types it"});
    const keys = [];
    for (let p = 60; p <= 84; p++) {
      const tiny = MusictxMelody.tinyName(p), name = MusictxMelody.noteName(p), black = name.length > 2;
      const key = el("button", {type: "button", className: black ? "black" : "white", title: `${name} (types ${tiny})`,
        "aria-label": name.replace(/^([A-G])#/, "$1 sharp ").replace(/^([A-G])b/, "$1 flat "), tabIndex: p === 60 ? 0 : -1,
        textContent: black || p % 12 ? "" : name});
      key.dataset.tiny = tiny;
      key.onclick = () => {
        input.value = (input.value.trimEnd() + " " + tiny + duration.value).trim();
        MusictxSound.play([[p, -1, -1, -1], [p, -1, -1, -1]], [[true, false, false, false], [false, false, false, false]], {bpm: 100})
          .done.catch(() => {});                             // the note, if the browser lets the page sound
      };
      keys.push(key);
      kb.append(key);
    }
    kb.addEventListener("keydown", (e) => {
      const i = keys.indexOf(document.activeElement), step = {ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1}[e.key];
      if (i < 0 || !step && e.key !== "Home" && e.key !== "End") return;
      e.preventDefault();
      const j = e.key === "Home" ? 0 : e.key === "End" ? keys.length - 1 : Math.min(keys.length - 1, Math.max(0, i + step));
      keys[i].tabIndex = -1;
      keys[j].tabIndex = 0;
      keys[j].focus();
    });
    const rest = el("button", {type: "button", className: "rest", textContent: "rest", "aria-label": "type a rest"});
    rest.onclick = () => { input.value = (input.value.trimEnd() + " r" + duration.value).trim(); };
    const undo = el("button", {type: "button", className: "rest", textContent: "⌫", title: "delete the last note",
                               "aria-label": "delete the last note"});
    undo.onclick = () => { input.value = input.value.trimEnd().replace(/\s*\S+$/, ""); };
    return el("div", {className: "musictx-play-keys"}, kb, rest, undo);
  }

  function harmonisePanel(root) {
    const text = el("textarea", {className: "musictx-play-melody", rows: 4, spellcheck: false, id: `musictx-melody-${++panels}`,
      value: "4/4 c'4 c' g' g' a' a' g'2 f'4 f' e' e' d' d' c'2"});
    const duration = el("select", {}, ...[["16", "16th"], ["8", "8th"], ["4", "quarter"], ["4.", "dotted quarter"], ["2", "half"], ["1", "whole"]]
      .map(([v, t]) => el("option", {value: v, textContent: t})));
    duration.value = "4";
    const temp = el("input", {type: "number", min: 0.05, max: 3, step: 0.05, value: 1, className: "musictx-play-temperature"});
    const seed = seedFields();
    const shift = el("input", {type: "number", step: 1, placeholder: "auto", className: "musictx-play-transpose"});
    const go = el("button", {type: "button", className: "musictx-play-go", textContent: "Harmonise"});
    const panel = el("fieldset", {className: "musictx-play-panel"}, el("legend", {}, "Harmonise a melody"),
      el("label", {htmlFor: text.id, className: "musictx-play-melody-label"}, "melody, in music21's tinyNotation (c' is C5)"),
      text, keyboard(text, duration), field("key length", duration), field("temperature", temp), ...seed.fields,
      field("transpose (semitones)", shift), go);
    root.append(panel);
    const out = output(panel);
    whenLoaded(MODELS.harmonise, go, out);
    go.onclick = () => run(go, out, async () => {
      const t = number(temp, "the temperature", {min: 0.05, max: 3});
      const s = seed.next();
      const transpose = shift.value.trim() === "" ? null : number(shift, "transpose, in semitones (empty: whole octaves)",
                                                                  {min: -48, max: 48, whole: true});
      const r = await harmonise(text.value, {temperature: t, seed: s, transpose,
        onToken: (k) => { out.status.textContent = `writing… ${k} choices`; return new Promise((ok) => setTimeout(ok, 0)); }});
      out.log.textContent = r.melody.log.join("; ");
      r.given = 0;
      r.seed = s;
      const first = MusictxFiles.notesOf(r.grid, r.onsets)[0].slice(0, 6).map((n) => MusictxMelody.noteName(n[2]));
      out.show(r.grid, r.onsets, {title: "your melody (soprano), harmonised by the model", given: 0},
        MusictxFiles.fileName(`harmonised ${first.join(" ")} seed ${s}`));
      out.status.textContent = speed(r, "harmonised");
    });
  }

  let panels = 0;
  function mount(root) {
    const mode = MODELS[root.dataset.mode] ? root.dataset.mode : "both";
    root.textContent = "";
    root.append(el("p", {className: "musictx-play-note"}, "The book's shipped models, running in this page " +
      "(ONNX Runtime Web, WebAssembly, on this computer's processor)."));
    if (mode !== "harmonise") continuePanel(root);
    if (mode !== "continue") harmonisePanel(root);
  }

  window.musictxPlay = {load, generate, continueChorale, harmonise, encode, decode, windowStart, DEFAULTS, MODELS};
  const start = () => document.querySelectorAll(".musictx-play").forEach(mount);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
