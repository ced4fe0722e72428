"""``harmonise``: alto, tenor and bass under a melody (a file, or tinyNotation), by one of chapter 12's three
ways, into MIDI and MusicXML. Notebook: book/using.md; chapter 12.
"""
from __future__ import annotations

import argparse
import time

from ..engine.harmonise import DEFAULT_CANDIDATES, DEFAULT_RULES, RULE_SETS
from .args import check_writable, nonnegative_int, positive_float, positive_int, seed_int

# harmonise --method: the shipped model each way of chapter 12 uses
METHODS = {"decoder": "relative", "harmoniser": "harmoniser", "coconet": "coconet"}


def add_harmonise(sub, o) -> argparse.ArgumentParser:
    """``harmonise``'s options; ``o``: the shared ones (``args.shared_options``)."""
    h = sub.add_parser("harmonise", help="write alto, tenor and bass under a melody (chapter 12) into a MIDI file",
                       parents=[o.cpu])
    h.add_argument("melody_file", nargs="?", default=None, metavar="MELODY",
                   help="a melody file: MIDI (one line; --track if it has several), MusicXML or ABC")
    h.add_argument("--melody", default=None, help="the melody as music21 tinyNotation, e.g. \"4/4 c'4 d' e' f' g'2\"")
    h.add_argument("--out", required=True, help="the .mid file to write")
    h.add_argument("--musicxml", default=None, metavar="FILE", help="also write the harmonisation as MusicXML")
    h.add_argument("--method", choices=sorted(METHODS), default="decoder",
                   help="decoder: the shipped relative model, the melody given note by note (default); "
                        "harmoniser: the encoder-decoder, which reads the whole melody; coconet: fill-in "
                        "by Gibbs sampling")
    h.add_argument("--temperature", type=positive_float, default=1.0, help="softmax temperature (default 1.0)")
    h.add_argument("--top-k", type=positive_int, default=None, help="sample only among the k likeliest tokens")
    h.add_argument("--seed", type=seed_int, default=0, help="sampling seed")
    h.add_argument("--rules", choices=RULE_SETS, default="default",
                   help="the rules applied while sampling (chapter 12): all (voice ranges, no crossing, no parallel "
                        "fifths or octaves, spacing, the melody's key, a cadence on its last note), four (the first "
                        f"four), none (plain sampling); default {DEFAULT_RULES} (none for coconet)")
    h.add_argument("--no-rules", dest="rules", action="store_const", const="none", help="the same as --rules none")
    h.add_argument("--candidates", type=positive_int, default=None,
                   help=f"draw N harmonisations and keep the one the model finds likeliest (default "
                        f"{DEFAULT_CANDIDATES}; not for coconet)")
    h.add_argument("--track", type=nonnegative_int, default=None, help="the melody's track in a MIDI file")
    h.add_argument("--transpose", type=int, default=None,
                   help="semitones to move the melody (default: the whole octaves that put it in the soprano's "
                        "range)")
    h.set_defaults(func=run_harmonise)
    return h


def run_harmonise(a: argparse.Namespace) -> None:
    from ..engine.harmonise import grid_onsets, harmonise
    from ..io.melody import read_melody
    from ..io.midi import write_midi
    from ..study.hub import pretrained

    if (a.melody_file is None) == (a.melody is None):
        raise ValueError("give the melody once: a file (MIDI, MusicXML, ABC) or --melody \"tinyNotation\"")
    check_writable(a.out, "--out")
    if a.musicxml is not None:
        check_writable(a.musicxml, "--musicxml")
    melody = read_melody(a.melody_file or a.melody, track=a.track, transpose=a.transpose)   # fails before the model
    for line in melody.log:
        print(line)
    model = pretrained(METHODS[a.method], device=a.device)
    t0 = time.perf_counter()
    info = {}
    grid = harmonise(model, melody.pitches, a.temperature, a.seed, a.top_k, rules=a.rules, candidates=a.candidates,
                     info=info, metre=melody.metre, pickup=melody.pickup)
    seconds = time.perf_counter() - t0
    onsets = grid_onsets(grid, melody.onsets)                        # the melody's repeated notes restruck
    metre = melody.metre or "4/4"                                   # the melody's metre and upbeat, kept
    path = write_midi(grid, a.out, onsets, metre=metre, pickup=melody.pickup)
    print(f"wrote {path}: {len(grid)} steps harmonised by the shipped {METHODS[a.method]} model "
          f"({a.method}) in {seconds:.2f} s, T = {a.temperature}, seed {a.seed}, rules {info.get('rules', 'none')}"
          + (f", the likeliest of {len(info['logp'])}" if len(info.get("logp", [])) > 1 else "")
          + (f"; {info['dead_ends']} dead end(s), rules relaxed: {', '.join(info['dropped'])}"
             if info.get("dead_ends") else ""))
    if a.musicxml is not None:
        from ..io.score import to_musicxml

        to_musicxml(grid, onsets, a.musicxml, title="harmonised by musictx-lite", metre=metre, pickup=melody.pickup)
        print(f"wrote {a.musicxml}")
