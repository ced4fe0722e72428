/* melody.js: read a melody typed in music21's tinyNotation, as musictx_lite/io/melody.py reads it.
 * No modules, no dependencies, no network.
 *
 *   MusictxMelody.parse("3/4 e4 d c d e e e2", {transpose: null, maxSteps: 1024})
 *     -> {pitches, onsets, shift, metre, log, notes, ignored}
 *
 * `pitches` has a MIDI pitch per 16th step (-1 for a rest), already moved `shift` semitones into the
 * soprano's range; `onsets` is true where a note starts; `log` says what was done, in the words of
 * read_melody. A melody that cannot be harmonised throws MusictxMelody.MelodyError, with the message
 * read_melody gives. `ignored` lists the tokens music21 would drop without a word (a typo such as
 * "x9" or "d3"); `log` names them, and a note whose octave marks music21 drops ("g#'" is G#4), as
 * read_melody's log does. A chord ("chord{c' e' g'}", "<c' e' g'>") is refused, as in Python.
 *
 * The reading follows music21's tinyNotation.Converter token by token: its regular expressions, its
 * states (a tie "~" reaches the next note; "trip{" and "quad{" last to their "}"), and its habit of
 * skipping a token it cannot read. Lengths are exact fractions of a quarter note, as in music21, so
 * that a triplet lands on the 16th grid exactly where the Python puts it.
 */
(function () {
  "use strict";

  const SOPRANO = [60, 81];          // the soprano's range in the training chorales: C4 to A5
  const MAX_STEPS = 64 * 16;         // 64 bars of 4/4
  const STEPS_PER_QUARTER = 4;
  const NAMES = ["C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B"];
  const STEP_PC = {C: 0, D: 2, E: 4, F: 5, G: 7, A: 9, B: 11};
  const TUPLETS = {trip: [2, 3], quad: [3, 4]};      // a note in trip{} lasts 2/3 of its written length
  const M21 = "the tinyNotation melody is not a melody music21 can read: ";

  class MelodyError extends Error {
    constructor(message) { super(message); this.name = "MelodyError"; }
  }

  /* -- exact fractions [numerator, denominator] ------------------------------------------------- */
  const gcd = (a, b) => (b ? gcd(b, a % b) : Math.abs(a));
  const frac = (n, d = 1) => { const g = gcd(n, d) || 1; return [n / g, d / g]; };
  const add = (a, b) => frac(a[0] * b[1] + b[0] * a[1], a[1] * b[1]);
  const sub = (a, b) => add(a, [-b[0], b[1]]);
  const mul = (a, b) => frac(a[0] * b[0], a[1] * b[1]);
  const less = (a, b) => a[0] * b[1] < b[0] * a[1];
  const same = (a, b) => a[0] === b[0] && a[1] === b[1];
  const isPow2 = (n) => n > 0 && Number.isInteger(Math.log2(n));
  const plain = (f) => isPow2(f[0]) && isPow2(f[1]);                             // whole, half, quarter...
  const dotted = (q, dots) => mul(q, frac(2 ** (dots + 1) - 1, 2 ** dots));    // x 1, 3/2, 7/4, ...
  const undot = (q, dots) => mul(q, frac(2 ** dots, 2 ** (dots + 1) - 1));
  function roundHalfEven(f) {        // Python's round() of a Fraction
    const q = Math.floor(f[0] / f[1]), twice = 2 * (f[0] - q * f[1]);
    return twice > f[1] || (twice === f[1] && q % 2 !== 0) ? q + 1 : q;
  }

  /* Python's format(x, "g"): six significant digits, ties to even, no trailing zeros */
  function g(x) {
    if (x === 0) return "0";
    const [mant, exp] = x.toExponential(30).split("e"), all = mant.replace(".", "");   // exact digits
    let e = Number(exp), head = Number(all.slice(0, 6));
    const tail = all.slice(6);
    if (tail[0] > "5" || (tail[0] === "5" && (/[1-9]/.test(tail.slice(1)) || head % 2))) head++;
    if (head === 1e6) { head = 1e5; e++; }
    const digits = String(head);
    if (e < -4 || e >= 6) {
      const m = (digits[0] + "." + digits.slice(1)).replace(/\.?0+$/, "");
      return m + "e" + (e < 0 ? "-" : "+") + String(Math.abs(e)).padStart(2, "0");
    }
    const whole = e >= 0 ? digits.slice(0, e + 1) : "0";
    const part = (e >= 0 ? digits.slice(e + 1) : "0".repeat(-e - 1) + digits).replace(/0+$/, "");
    return part ? whole + "." + part : whole;
  }
  const signed = (n) => (n >= 0 ? "+" : "") + n;                          // Python's {n:+d}
  const noteName = (p) => NAMES[p % 12] + (Math.floor(p / 12) - 1);      // 60 -> "C4"
  const TINY = ["c", "c#", "d", "e-", "e", "f", "f#", "g", "a-", "a", "b-", "b"];
  /* A MIDI pitch in tinyNotation, written so that music21 reads it back as that pitch: 61 -> "c#",
     73 -> "c'#" (octave marks before the accidental: "c#'" is C#4), 48 -> "C", 37 -> "CC#" */
  function tinyName(p) {
    const octave = Math.floor(p / 12) - 1, name = TINY[p % 12], letter = name[0], acc = name.slice(1);
    if (octave >= 4) return letter + "'".repeat(octave - 4) + acc;
    return letter.toUpperCase().repeat(4 - octave) + acc;
  }

  /* -- music21's token grammar (tinyNotation._getDefaultTokenMap) ------------------------------- */
  const ACC = "\\((?:#+|-+|n)\\)|#+|-+|n";
  const NOTE_NAME = `(?:A+|B+|C+|D+|E+|F+|G+)(?:${ACC})?|[a-g](?:(?:${ACC})?'*|'*(?:${ACC})?)`;
  const DURATION = "\\d+\\.*|\\.*\\d+|\\.+";
  const MODIFIER = "=[^\\s_]*|\\*.*?\\*|<.*?>|\\(.*?\\)|\\[.*?]|_[^\\s=]";
  const TIME_RE = /^(\d+)\/(\d+)$/;
  const REST_RE = new RegExp(`^r(?:${DURATION})?(?:${MODIFIER})*$`);
  const NOTE_RE = new RegExp(`^(?:${NOTE_NAME})(?:${DURATION})?~?(?:${MODIFIER})*$`);

  /* music21's name for a length: [plain value, dots] (3/2: a dotted quarter, [1, 1]), or null where
     it has none (5 quarters: "complex") */
  function named(q) {
    for (let d = 0; d <= 4; d++) {
      const b = undot(q, d);
      if (plain(b) && !less(b, [1, 512]) && !less([64, 1], b)) return [b, d];
    }
    return null;
  }

  /* The length of a note or rest from what is left of its token (NoteOrRestToken.applyDuration):
     "4" a quarter, "8." a dotted eighth, "0" a whole bar; no number: the previous length. Returns
     {q, named} (named: music21 knows its note value, which a tuplet needs), or null for a length
     music21 does not know ("3"), which drops the token. */
  function length(t, st) {
    const num = /\d+/.exec(t), dots = /\.+/.exec(t.replace(/\d+/g, ""));
    if (!num) return {q: st.last, named: !!named(st.last)};      // dots without a number: ignored
    const n = Number(num[0]), d = dots ? dots[0].length : 0;
    let q, known = true;
    if (n === 0 && st.bar) {                      // "0": the whole bar of the time signature
      const v = named(st.bar);                    // dots re-dot the bar's note value (3/4: a half)
      q = d ? dotted(v ? v[0] : st.bar, d) : st.bar;
      known = !!v;
    } else if (n === 0 || (isPow2(n) && n <= 2048)) {
      q = dotted(n === 0 ? [1, 1] : frac(4, n), d);     // "0" with no time signature: a quarter
    } else {
      return null;
    }
    st.last = q;
    return {q: q, named: known};
  }

  /* A note's MIDI pitch, by music21's NoteToken.processPitchMap: each pattern is searched for in turn
     and cut out; returns [pitch, what is left of the token] */
  function notePitch(t, refuse) {
    let step = "C", octave = 4, alter = 0, editorial = false, m;
    if ((m = /[A-G]+/.exec(t))) { step = m[0][0]; octave = 4 - m[0].length; t = t.replace(/[A-G]+/g, ""); }
    if ((m = /([a-g])('*)/.exec(t))) {
      step = m[1].toUpperCase(); octave = 4 + m[2].length; t = t.replace(/[a-g]'*/g, "");
    }
    if ((m = /\(([#\-n]+)\)(.*)/.exec(t))) { editorial = true; t = m[1] + m[2]; }   // (#): ficta only
    for (const [re, alt] of [[/#+/, (s) => s.length], [/-+/, (s) => -s.length], [/n/, () => 0]]) {
      if ((m = re.exec(t))) {
        if (Math.abs(alt(m[0])) > 4) refuse(`has "${m[0]}", more than music21's quadruple accidentals`);
        if (!editorial) alter = alt(m[0]);
        t = t.replace(new RegExp(re.source, "g"), "");
      }
    }
    let ps = 12 * (octave + 1) + STEP_PC[step] + alter;
    if (ps > 127) ps = 108 + (ps % 12) + (ps % 12 < 7 ? 12 : 0);     // music21 folds MIDI into 0..127
    if (ps < 0) ps = ((ps % 12) + 12) % 12;
    return [ps, t];
  }

  /* A state ends: a tie marks its first item "start" (or "continue"), the second "stop" (TieState.end) */
  function endState(s, refuse) {
    if (!s.tie) return;
    const [a, b] = s.items;
    if (!a) refuse("closes a tie that reached no note");
    if (a.ts) refuse("ends a tie that starts on a time signature");
    a.tie = a.tie ? "continue" : "start";
    if (b) b.tie = "stop";
  }

  /* One token (Converter.parseOne): open states, close them, drop modifiers, read what is left */
  function parseOne(tok, k, st) {
    let t = tok, m, obj = null;
    const refuse = (why) => { throw new MelodyError(`${M21}"${tok}" (token ${k}) ${why}`); };
    const BRACKET = /(\w+)\{/;
    while ((m = BRACKET.exec(t))) {                             // "trip{": a state until its "}"
      t = t.replace(BRACKET, "");
      if (TUPLETS[m[1]]) st.active.push({ratio: TUPLETS[m[1]], items: []});    // others: music21 warns
    }
    if (t.includes("~")) { t = t.replace(/~/g, ""); st.active.push({tie: true, items: []}); }
    let ends = (t.match(/\}/g) || []).length;
    t = t.replace(/\}/g, "").replace(/=[A-Za-z0-9]*/g, "").replace(/_.*/, "");   // "=id" and "_lyric"

    if ((m = TIME_RE.exec(t))) {                                // "3/4"
      const [num, den] = [Number(m[1]), Number(m[2])];
      if (!num || !den || den > 128) refuse("is not a time signature music21 accepts");
      obj = {ts: `${num}/${den}`};
      st.bar = frac(4 * num, den);
      if (!st.started) st.metre = obj.ts;                       // the last one before any note: bar 1's
    } else if (REST_RE.test(t)) {                               // "r8"
      const len = length(t.slice(1), st);
      if (len) obj = {rest: true, q: len.q, named: len.named};
    } else if (NOTE_RE.test(t)) {                               // "f#'8."
      const [pitch, left] = notePitch(t, refuse), len = length(left, st);
      if (len) obj = {pitch: pitch, q: len.q, named: len.named};
    }
    if (!obj && t) st.ignored.push(tok);                        // music21 skips it without a word

    if (obj) {
      for (const s of st.active.slice()) {                      // the open states take the object
        s.items.push(obj);
        if (s.ratio) {
          if (obj.ts) refuse("puts a time signature inside a tuplet");
          if (!obj.named) refuse("puts a length with no note value (a whole 5/4 bar, say) inside a tuplet");
          obj.q = mul(obj.q, frac(s.ratio[0], s.ratio[1]));
        } else if (s.items.length === 2) {                      // a tie reaches one object further
          endState(s, refuse);
          st.active.splice(st.active.lastIndexOf(s), 1);
        }
      }
      if (!obj.ts) {
        obj.start = st.time;
        st.time = add(st.time, obj.q);
        st.started = true;
        st.items.push(obj);
      }
    }
    for (ends = Math.min(ends, st.active.length); ends > 0; ends--) endState(st.active.pop(), refuse);
  }

  /* The notes of tinyNotation text and its metre, as read_notes / notes_from_music21 give them */
  function readNotes(text) {
    const at = text.indexOf("tinyNotation:");
    const body = (at >= 0 ? text.slice(at + "tinyNotation:".length) : text).trim();
    if (!body) throw new MelodyError("the melody is empty");
    // music21's state: open ties and tuplets, what was read, the time so far, the last length (a quarter
    // to begin with), the bar of the time signature; with none at the start, music21 writes 4/4
    const st = {active: [], items: [], time: [0, 1], last: [1, 1], bar: null, metre: "4/4",
                started: false, ignored: []};
    const tokens = body.split(/\s+/);
    tokens.forEach((tok, k) => {                  // a chord is refused (tiny_notation_notes)
      const state = /(\w+)\{/.exec(tok);
      if ((state && !TUPLETS[state[1]]) || tok.includes("<") || tok.includes(">")) {
        throw new MelodyError(`the tinyNotation melody has "${tok}" (token ${k + 1}): a chord is not a melody, ` +
          "one note at a time (tinyNotation knows no chord; music21 would play its notes one after another)");
      }
    });
    tokens.forEach((tok, i) => parseOne(tok, i + 1, st));
    // what is not taken as written, for the log (tiny_notation_notes): skipped tokens, late octave marks
    const said = st.ignored.length ? [`not tinyNotation, skipped: ${st.ignored.join(" ")}`] : [];
    for (const tok of tokens) {
      const m = /[a-g](#+|-+|n)('+)/.exec(tok);
      if (!m || st.ignored.includes(tok)) continue;
      const letter = m[0][0], name = letter.toUpperCase() + m[1].replace(/-/g, "b").replace("n", "");
      said.push(`"${tok}" reads as ${name}4: octave marks go before the accidental (${letter}${m[2]}${m[1]} ` +
                `is ${name}${4 + m[2].length})`);
    }
    const notes = [];
    for (const n of st.items) {
      if (n.rest) continue;
      const end = add(n.start, n.q), last = notes[notes.length - 1];
      const tied = n.tie === "continue" || n.tie === "stop";
      if (tied && last && last.pitch === n.pitch && same(last.end, n.start)) last.end = end;   // tied on
      else notes.push({start: n.start, end: end, pitch: n.pitch});
    }
    return {notes: notes, metre: st.metre, ignored: st.ignored, said: said};
  }

  /* Notes on the 16th grid, from the first note (to_grid) */
  function toGrid(notes, maxSteps) {
    if (!notes.length) throw new MelodyError("the melody holds no notes");
    const origin = notes[0].start, steps = (f) => mul(sub(f, origin), [STEPS_PER_QUARTER, 1]);
    let moved = 0;
    const grid = notes.map((n) => {
      const a = roundHalfEven(steps(n.start)), b = roundHalfEven(steps(n.end));
      moved += !(same(steps(n.start), [a, 1]) && same(steps(n.end), [b, 1]));
      return [a, b];
    });
    grid.forEach(([a, b], k) => {
      if (b <= a || (k && a < grid[k - 1][1])) {
        const n = notes[k], len = sub(n.end, n.start);
        throw new MelodyError(`note ${k + 1} (${noteName(n.pitch)} at quarter ${g(n.start[0] / n.start[1])}, ` +
          `${g(len[0] / len[1])} quarters long) does not fit the 16th-note grid: the harmoniser writes 16ths, ` +
          "and this rhythm is finer");
      }
    });
    const nSteps = grid[grid.length - 1][1];
    if (nSteps > maxSteps) {
      throw new MelodyError(`the melody is ${nSteps} 16th steps long; the limit is ${maxSteps} ` +
        `(${Math.floor(maxSteps / 16)} bars of 4/4): harmonise it in parts`);
    }
    const pitches = new Array(nSteps).fill(-1), onsets = new Array(nSteps).fill(false);
    notes.forEach((n, k) => {
      pitches.fill(n.pitch, grid[k][0], grid[k][1]);
      onsets[grid[k][0]] = true;
    });
    return {pitches: pitches, onsets: onsets, moved: moved};
  }

  /* The semitones that move the melody into the soprano's range (fit_range) */
  function fitRange(pitches, transpose) {
    const sounding = pitches.filter((p) => p >= 0);
    const lo = Math.min(...sounding), hi = Math.max(...sounding);
    const [low, high] = SOPRANO, name = `${noteName(low)}-${noteName(high)}`;
    if (hi - lo > high - low) {
      throw new MelodyError(`the melody spans ${hi - lo} semitones (${noteName(lo)} to ${noteName(hi)}), ` +
        `more than the soprano's ${high - low} (${name}): no transposition fits`);
    }
    const from = low - lo, to = high - hi;                     // every shift from..to fits
    if (transpose !== null) {
      if (transpose < from || transpose > to) {
        throw new MelodyError(`moved ${signed(transpose)} semitones the melody (${noteName(lo)} to ` +
          `${noteName(hi)}) leaves the soprano's range ${name}; shifts that fit: ${signed(from)} to ${signed(to)}`);
      }
      return transpose;
    }
    let best = null;                                           // the smallest whole-octave move
    for (let s = from; s <= to; s++) if (s % 12 === 0 && (best === null || Math.abs(s) < Math.abs(best))) best = s;
    if (best === null) {
      throw new MelodyError(`no whole octave moves the melody (${noteName(lo)} to ${noteName(hi)}) into the ` +
        `soprano's range ${name}; give a transposition: from ${signed(from)} to ${signed(to)} semitones fit`);
    }
    return best;
  }

  /* The melody, ready to harmonise (read_melody) */
  function parse(text, opts) {
    opts = opts || {};
    const transpose = opts.transpose === undefined ? null : opts.transpose;
    const maxSteps = opts.maxSteps === undefined || opts.maxSteps === null ? MAX_STEPS : opts.maxSteps;
    if (transpose !== null && !Number.isInteger(transpose)) {
      throw new MelodyError(`the transposition must be a whole number of semitones, not ${transpose}`);
    }
    const {notes, metre, ignored, said} = readNotes(String(text));
    const grid = toGrid(notes, maxSteps);
    const shift = fitRange(grid.pitches, transpose);
    const pitches = grid.pitches.map((p) => (p >= 0 ? p + shift : -1));
    const bars = pitches.length / 16;
    const log = [`${notes.length} note${notes.length !== 1 ? "s" : ""}, ${pitches.length} 16th steps ` +
                 `(${g(bars)} bar${bars !== 1 ? "s" : ""} of 4/4)`];
    if (grid.moved) log.push(`${grid.moved} of them moved to the nearest 16th`);
    if (shift) {
      const how = transpose !== null ? "as asked" :
        `${signed(Math.floor(shift / 12))} octave${Math.abs(shift) > 12 ? "s" : ""}`;
      log.push(`moved ${signed(shift)} semitones (${how}) into the soprano's range ` +
               `${noteName(SOPRANO[0])}-${noteName(SOPRANO[1])}`);
    }
    if (metre !== null && metre !== "4/4") {
      log.push(`its metre is ${metre}; the chorales the harmoniser learnt from are in 4/4, and it reads the ` +
               "melody step by step, so its bar lines are not the model's: expect cadences out of place");
    }
    log.push(...said);
    // the 16th steps before the first barline (read_melody's pickup): where the first note falls in its bar
    const [num, den] = (metre || "4/4").split("/").map(Number), bar = (num * 16) / den / 4;   // quarters
    const into = ((notes[0].start[0] / notes[0].start[1]) % bar + bar) % bar;
    const pickup = into ? Math.round((bar - into) * 4) % Math.round(bar * 4) : 0;
    return {pitches: pitches, onsets: grid.onsets, shift: shift, metre: metre, log: log, notes: notes.length,
            ignored: ignored, pickup: pickup};
  }

  window.MusictxMelody = {parse, noteName, tinyName, MelodyError, SOPRANO, MAX_STEPS};
})();
