/* The rules of four-part writing as masks, for the page's harmoniser: musictx_lite.engine.rules and the key finder
 * of musictx_lite.io.harmony, line for line (tests/book/test_rules_js.py checks every mask against Python's).
 *
 * A rule looks at the pitches written so far (an array of steps, each [S, A, T, B], the last one holding the
 * voices above voice v) and says which tokens voice v (1 alto, 2 tenor, 3 bass) may take: an array of V booleans.
 * The sampler draws only among the tokens every rule allows; where none is left (a dead end), rules are dropped in
 * RELAX_ORDER until one is, and each drop is counted. MIT licence, part of musictx-lite. */
(function () {
  "use strict";
  // io.stats.RANGES (S A T B, MIDI, inclusive), io.tokens' layout, io.stats' chords, io.harmony's profiles
  const RANGES = [[60, 79], [55, 74], [48, 67], [40, 60]];
  const TOK = {REST: 2, N_SPECIAL: 5, LOWEST: 36};
  const TRIADS = {major: [0, 4, 7], minor: [0, 3, 7], diminished: [0, 3, 6], augmented: [0, 4, 8]};
  const SEVENTHS = [[0, 4, 7, 10], [0, 4, 7, 11], [0, 3, 7, 10], [0, 3, 6, 10], [0, 3, 6, 9]];
  const MAJOR = [0, 2, 4, 5, 7, 9, 11], MINOR = [0, 2, 3, 5, 7, 8, 9, 10, 11];
  const AARDEN_MAJOR = [17.7661, 0.145624, 14.9265, 0.160186, 19.8049, 11.3587, 0.291248, 22.062, 0.145624, 8.15494,
    0.232998, 4.95122];
  const AARDEN_MINOR = [18.2648, 0.737619, 14.0499, 16.8599, 0.702494, 14.4362, 0.702494, 18.6161, 4.56621, 1.93186,
    7.37619, 1.75623];
  const RELAX_ORDER = ["chord", "spacing", "key", "parallels", "crossing", "cadence", "range"];

  const mod = (a, n) => ((a % n) + n) % n;
  const chordKey = (pcs) => [...new Set(pcs.map((p) => mod(p, 12)))].sort((a, b) => a - b).join(",");
  const CHORDS = new Set();
  for (const shape of [...Object.values(TRIADS), ...SEVENTHS]) {
    for (let r = 0; r < 12; r++) CHORDS.add(chordKey(shape.map((i) => r + i)));
  }
  const completeChord = (pitches) => CHORDS.has(chordKey(pitches.filter((p) => p >= 0)));   // stats.complete_chord

  function keyOf(melody) {                        // io.harmony.key_of: Krumhansl-Schmuckler, Aarden-Essen profiles
    const hist = new Array(12).fill(0);
    for (const p of melody) if (p >= 0) hist[p % 12] += 1;
    if (hist.every((h) => h === 0)) throw new Error("a melody with no notes has no key");
    const corr = (x, y) => {
      const mx = x.reduce((a, b) => a + b) / 12, my = y.reduce((a, b) => a + b) / 12;
      let num = 0, sx = 0, sy = 0;
      for (let i = 0; i < 12; i++) { num += (x[i] - mx) * (y[i] - my); sx += (x[i] - mx) ** 2; sy += (y[i] - my) ** 2; }
      return sx > 0 && sy > 0 ? num / Math.sqrt(sx * sy) : 0;
    };
    let best = -Infinity, out = [0, "major"];
    for (let tonic = 0; tonic < 12; tonic++) {
      for (const [mode, profile] of [["major", AARDEN_MAJOR], ["minor", AARDEN_MINOR]]) {
        const rolled = hist.map((_, pc) => profile[mod(pc - tonic, 12)]);
        const r = corr(hist, rolled);
        if (r > best + 1e-12) { best = r; out = [tonic, mode]; }
      }
    }
    return out;
  }
  const scale = (tonic, mode) => new Set((mode === "major" ? MAJOR : MINOR).map((i) => mod(tonic + i, 12)));

  function finalNote(melody) {                    // rules.final_note: [first step, last step, pitch]
    let end = melody.length - 1;
    while (end >= 0 && melody[end] < 0) end--;
    if (end < 0) throw new Error("the melody has no notes");
    let start = end;
    while (start > 0 && melody[start - 1] === melody[end]) start--;
    return [start, end, melody[end]];
  }

  // each rule: allowed(grid, v, V) -> array of V booleans; pitch(k) is token k's pitch (specials: not pitches)
  const pitch = (k) => k - TOK.N_SPECIAL + TOK.LOWEST, isPitch = (k) => k >= TOK.N_SPECIAL;
  const mask = (V, f) => Array.from({length: V}, (_, k) => f(k));
  const last = (grid) => grid[grid.length - 1];

  const voiceRange = {name: "range", allowed(grid, v, V) {
    const [lo, hi] = RANGES[v], now = last(grid);
    return mask(V, (k) => (isPitch(k) ? pitch(k) >= lo && pitch(k) <= hi : k === TOK.REST && now[0] < 0));
  }};
  const noCrossing = {name: "crossing", allowed(grid, v, V) {
    const now = last(grid);
    let above = -1;
    for (let u = 0; u < v; u++) if (now[u] >= 0) above = now[u];
    return mask(V, (k) => !isPitch(k) || above < 0 || pitch(k) <= above);
  }};
  const spacing = {name: "spacing", allowed(grid, v, V) {
    const upper = last(grid)[v - 1];
    return mask(V, (k) => !(v === 1 || v === 2) || !isPitch(k) || upper < 0 || pitch(k) >= upper - 12);
  }};
  const noParallels = {name: "parallels", allowed(grid, v, V) {
    const ok = new Array(V).fill(true);
    if (grid.length < 2) return ok;
    const prev = grid[grid.length - 2], now = last(grid);
    for (let u = 0; u < v; u++) {
      const before = mod(Math.abs(prev[u] - prev[v]), 12);
      const moves = prev[u] >= 0 && prev[v] >= 0 && now[u] >= 0 && now[u] !== prev[u];
      if (!moves || (before !== 7 && before !== 0)) continue;
      for (let k = TOK.N_SPECIAL; k < V; k++) {
        if (pitch(k) !== prev[v] && mod(Math.abs(now[u] - pitch(k)), 12) === before) ok[k] = false;
      }
    }
    return ok;
  }};
  const completeChordRule = (offset = 0, every = 4) => ({name: "chord", allowed(grid, v, V) {
    const ok = new Array(V).fill(true), now = last(grid);
    if (v !== 3 || mod(grid.length - 1 - offset, every) !== 0 || now.slice(0, 3).some((p) => p < 0)) return ok;
    const fits = new Set();
    for (let pc = 0; pc < 12; pc++) if (completeChord([...now.slice(0, 3), pc])) fits.add(pc);
    return fits.size ? mask(V, (k) => !isPitch(k) || fits.has(mod(pitch(k), 12))) : ok;
  }});
  const inKey = (tonic, mode, until) => {
    const pcs = scale(tonic, mode);
    return {name: "key", allowed(grid, v, V) {
      if (until !== null && grid.length - 1 >= until) return new Array(V).fill(true);
      return mask(V, (k) => !isPitch(k) || pcs.has(mod(pitch(k), 12)));
    }};
  };
  const cadence = (melody, key, picardy = true) => {
    const [start, end, p] = finalNote(melody), lastPc = p % 12;
    const root = key && key[1] === "major" && lastPc === (key[0] + 4) % 12 ? key[0] : lastPc, minor = (root + 3) % 12;
    const inKeyPcs = key ? scale(...key) : new Set([minor]);
    const thirds = [(root + 4) % 12, ...(!picardy && inKeyPcs.has(minor) ? [minor] : [])];
    const chords = thirds.map((third) => new Set([root, third, (root + 7) % 12]));
    return {name: "cadence", start, end, root, thirds, allowed(grid, v, V) {
      const t = grid.length - 1;
      if (t < start || t > end) return new Array(V).fill(true);
      if (t > start) return mask(V, (k) => pitch(k) === grid[t - 1][v] && isPitch(k));   // the final chord is held
      const pc = (k) => mod(pitch(k), 12);
      if (v === 3) return mask(V, (k) => isPitch(k) && pc(k) === root);
      const written = new Set(last(grid).slice(0, v).filter((x) => x >= 0).map((x) => x % 12));
      const fits = new Set();
      for (let x = 0; x < 12; x++) {
        for (const chord of chords) {
          const left = [...chord].filter((c) => !written.has(c) && c !== x && c !== root);
          if ([...written].every((w) => chord.has(w)) && chord.has(x) && left.length <= 2 - v) fits.add(x);
        }
      }
      return mask(V, (k) => isPitch(k) && fits.has(pc(k)));
    }};
  };

  function beatSteps(metre) {                     // io.midi.beat_steps: a dotted quarter in 6/8, 9/8, 12/8
    const [num, den] = (metre || "4/4").split("/").map(Number);
    return den === 8 && num % 3 === 0 ? 6 : Math.max(Math.floor(16 / den), 1);
  }
  const HARMONY = [voiceRange, noCrossing, noParallels, spacing];
  function harmonyRules(melody, key = null, metre = null, pickup = 0) {   // rules.harmony_rules: "all"
    key = key || keyOf(melody);
    const every = beatSteps(metre);
    return [...HARMONY, completeChordRule(mod(pickup, every), every), inKey(key[0], key[1], finalNote(melody)[0]),
            cadence(melody, key)];
  }
  function rulesFor(name, melody, metre = null, pickup = 0) {   // harmonise.rules_for
    if (name === null || name === undefined || name === "none") return null;
    if (name === "all") return harmonyRules(melody, null, metre, pickup);
    if (name === "four") return HARMONY;
    throw new Error(`the rules are all, four or none, not ${JSON.stringify(name)}`);
  }

  /* rules.rule_mask for one candidate: every rule's mask and `usable`; at a dead end the rules are dropped in
   * RELAX_ORDER, each drop counted in relaxed.dropped */
  function ruleMask(rules, grid, v, usable, relaxed) {
    const V = usable.length, masks = new Map(rules.map((r) => [r.name, r.allowed(grid, v, V)]));
    const combine = (names) => usable.map((u, k) => u && names.every((n) => masks.get(n)[k]));
    let kept = [...masks.keys()], ok = combine(kept);
    for (const name of RELAX_ORDER) {
      if (ok.some(Boolean)) break;
      if (!kept.includes(name)) continue;
      kept = kept.filter((n) => n !== name);
      if (relaxed) relaxed.dropped[name] = (relaxed.dropped[name] || 0) + 1;
      ok = combine(kept);
    }
    if (relaxed) relaxed.tokens += 1;
    return ok;
  }

  window.MusictxRules = {RANGES, RELAX_ORDER, keyOf, finalNote, beatSteps, harmonyRules, rulesFor, ruleMask, completeChord,
    rules: {voiceRange, noCrossing, spacing, noParallels, completeChordRule, inKey, cadence}};
})();
