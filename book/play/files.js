/* files.js: a four-part result of the page as files to keep: a standard MIDI file and MusicXML.
 * No modules, no dependencies, no network.
 *
 *   MusictxFiles.midi(grid, onsets, {bpm})          -> Uint8Array (format 1: a tempo track, then S A T B)
 *   MusictxFiles.musicxml(grid, onsets, {title})    -> string (score-partwise 4.0: one part per voice)
 *   MusictxFiles.fileName(words)                    -> "musictx-..." without spaces or odd characters
 *
 * `grid` is (steps, 4) MIDI pitches per 16th step, -1 for a rest; `onsets` (steps, 4) true where a note
 * starts, as musictx_lite.io.midi.grid_to_midi reads them, so that a held note is one note. The tests read
 * both files back with pretty_midi and music21 (tests/book/test_play.py).
 */
(function () {
  "use strict";

  const VOICES = ["Soprano", "Alto", "Tenor", "Bass"];
  const TPQ = 480;                                     // MIDI ticks per quarter note; a 16th is 120

  /* Each voice's notes [start step, end step, pitch], a new note where the pitch changes or an onset says */
  function notesOf(grid, onsets) {
    return VOICES.map((_, v) => {
      const out = [];
      grid.forEach((step, t) => {
        const p = step[v], last = out[out.length - 1];
        const starts = onsets ? onsets[t][v] : !(t && grid[t - 1][v] === p);
        if (p < 0) return;
        if (last && last[1] === t && last[2] === p && !starts) last[1] = t + 1;
        else out.push([t, t + 1, p]);
      });
      return out;
    });
  }

  // -- MIDI ----------------------------------------------------------------------------------------

  function varLen(n) {                                 // a MIDI variable-length quantity
    const bytes = [n & 0x7f];
    for (n >>= 7; n > 0; n >>= 7) bytes.unshift((n & 0x7f) | 0x80);
    return bytes;
  }

  function track(events) {                             // events [tick, bytes]: an MTrk chunk
    events.sort((a, b) => a[0] - b[0] || a[2] - b[2]);
    const body = [];
    let now = 0;
    for (const [tick, bytes] of events) { body.push(...varLen(tick - now), ...bytes); now = tick; }
    body.push(0, 0xff, 0x2f, 0);                        // end of track
    const n = body.length;
    return [0x4d, 0x54, 0x72, 0x6b, (n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255, ...body];
  }

  function midi(grid, onsets, opts = {}) {
    const bpm = opts.bpm ?? 80, tempo = Math.round(60e6 / bpm), step = TPQ / 4;
    const text = (s) => Array.from(new TextEncoder().encode(s));
    const head = [[0, [0xff, 0x51, 3, (tempo >> 16) & 255, (tempo >> 8) & 255, tempo & 255], 0],
                  [0, [0xff, 0x58, 4, 4, 2, 24, 8], 0]];                 // 4/4
    const tracks = [track(head)];
    notesOf(grid, onsets).forEach((notes, v) => {
      const name = text(VOICES[v]);
      const ev = [[0, [0xff, 0x03, name.length, ...name], 0], [0, [0xc0 | v, 19], 0]];   // church organ
      for (const [a, b, p] of notes) ev.push([a * step, [0x90 | v, p, 80], 1], [b * step, [0x80 | v, p, 0], 0]);
      tracks.push(track(ev));
    });
    const header = [0x4d, 0x54, 0x68, 0x64, 0, 0, 0, 6, 0, 1, 0, tracks.length, (TPQ >> 8) & 255, TPQ & 255];
    return Uint8Array.from([...header, ...tracks.flat()]);
  }

  // -- MusicXML ------------------------------------------------------------------------------------

  const STEPS = [["C", 0], ["C", 1], ["D", 0], ["E", -1], ["E", 0], ["F", 0], ["F", 1], ["G", 0], ["A", -1],
                 ["A", 0], ["B", -1], ["B", 0]];
  const TYPES = {1: ["16th", 0], 2: ["eighth", 0], 3: ["eighth", 1], 4: ["quarter", 0], 6: ["quarter", 1],
                 7: ["quarter", 2], 8: ["half", 0], 12: ["half", 1], 14: ["half", 2], 16: ["whole", 0]};
  const CLEFS = ["G", "G", "G", "F"].map((sign, v) => `<clef><sign>${sign}</sign><line>${v < 3 ? 2 : 4}</line>` +
    (v === 2 ? "<clef-octave-change>-1</clef-octave-change>" : "") + "</clef>");   // the tenor an octave down
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  /* A length in 16ths as written values that add up to it: 5 -> [4, 1] (tied) */
  function pieces(n) {
    const out = [];
    for (const v of [16, 14, 12, 8, 7, 6, 4, 3, 2, 1]) while (n >= v) { out.push(v); n -= v; }
    return out;
  }

  function noteXml(pitch, len, tie) {
    const [type, dots] = TYPES[len];
    let x = "<note>";
    if (pitch < 0) x += "<rest/>";
    else {
      const [step, alter] = STEPS[pitch % 12];
      x += `<pitch><step>${step}</step>${alter ? `<alter>${alter}</alter>` : ""}<octave>${Math.floor(pitch / 12) - 1}</octave></pitch>`;
    }
    x += `<duration>${len}</duration>`;
    if (tie.stop) x += '<tie type="stop"/>';
    if (tie.start) x += '<tie type="start"/>';
    x += `<type>${type}</type>` + "<dot/>".repeat(dots);
    if (tie.start || tie.stop) {
      x += "<notations>" + (tie.stop ? '<tied type="stop"/>' : "") + (tie.start ? '<tied type="start"/>' : "") + "</notations>";
    }
    return x + "</note>";
  }

  function musicxml(grid, onsets, opts = {}) {
    const bars = Math.max(1, Math.ceil(grid.length / 16)), voices = notesOf(grid, onsets);
    const parts = VOICES.map((name, v) => {
      // the voice as (start, end, pitch) spans that cover every step, rests included, cut at bar lines
      const spans = [];
      let t = 0;
      for (const [a, b, p] of [...voices[v], [bars * 16, bars * 16, -1]]) {
        if (a > t) spans.push([t, a, -1]);
        if (b > a) spans.push([a, b, p]);
        t = b;
      }
      let xml = "";
      for (let bar = 0; bar < bars; bar++) {
        xml += `<measure number="${bar + 1}">`;
        if (bar === 0) {
          xml += "<attributes><divisions>4</divisions><key><fifths>0</fifths></key><time><beats>4</beats>" +
            `<beat-type>4</beat-type></time>${CLEFS[v]}</attributes>`;
        }
        for (const [a, b, p] of spans) {
          const s = Math.max(a, bar * 16), e = Math.min(b, bar * 16 + 16);
          if (e <= s) continue;
          const lens = pieces(e - s);
          lens.forEach((len, k) => {
            const first = s === a && k === 0, last = e === b && k === lens.length - 1;
            xml += noteXml(p, len, p < 0 ? {} : {stop: !first, start: !last});
          });
        }
        xml += "</measure>";
      }
      return `<part id="P${v + 1}">${xml}</part>`;
    });
    const list = VOICES.map((name, v) => `<score-part id="P${v + 1}"><part-name>${name}</part-name></score-part>`).join("");
    return '<?xml version="1.0" encoding="UTF-8"?>\n' +
      '<!DOCTYPE score-partwise PUBLIC "-//Recordare//DTD MusicXML 4.0 Partwise//EN" ' +
      '"http://www.musicxml.org/dtds/partwise.dtd">\n' +
      `<score-partwise version="4.0"><work><work-title>${esc(opts.title || "musictx")}</work-title></work>` +
      `<part-list>${list}</part-list>${parts.join("")}</score-partwise>\n`;
  }

  /* A file name from words (a chorale's name, a melody's first notes): "musictx-jsb-test-003-seed-7" */
  function fileName(words) {
    const slug = String(words).normalize("NFKD").replace(/#/g, "s").replace(/[^A-Za-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "").toLowerCase().slice(0, 60).replace(/-+$/, "");
    return "musictx" + (slug ? "-" + slug : "");
  }

  window.MusictxFiles = {midi, musicxml, fileName, notesOf};
})();
