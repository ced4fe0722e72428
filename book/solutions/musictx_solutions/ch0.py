"""Chapter 0 exercises: music as tokens.

Notebook: notebooks/00_music_as_tokens.ipynb
"""
from __future__ import annotations

import textwrap

import numpy as np

from musictx_lite.io.data import Splits, load_data
from musictx_lite.io.stats import voice_stats
from musictx_lite.io.tokens import VOICES, encode
from musictx_lite.study.baselines import SameVoice, TwoTokens


def exercise_0_1(data: Splits | None = None) -> float:
    """Held or repeated? The share of sounding steps that re-strike the pitch the voice already holds.

    This is what the plain raster encoding cannot represent.
    """
    data = data or load_data()
    restruck = sounding = 0
    for p in data.train:
        if p.onsets is None:
            raise ValueError("this data set has no onsets (the official JSB split does not keep them)")
        prev = np.vstack([np.full((1, 4), -2), p.pitches[:-1]])
        restruck += int((p.onsets & (p.pitches == prev)).sum())
        sounding += int((p.pitches >= 0).sum())
    share = restruck / sounding
    print(f"{restruck} of {sounding} sounding steps re-strike the held pitch: {share:.2%}")
    return share


def same_voice_nll(data: Splits) -> dict[str, float]:
    """The same-voice predictor's valid NLL (nats/token), voice by voice: each voice from its own previous
    step."""
    sv = SameVoice().fit(data.train)
    table = sv._table(sv.alpha)
    per_voice = {v: [] for v in VOICES}
    for p in data.valid:
        y = encode(p.pitches)[1:]
        nll = -np.log(np.r_[sv.unigram[y[:4]], table[y[:-4], y[4:]]])
        for v, name in enumerate(VOICES):
            per_voice[name].append(nll[v::4])
    return {k: float(np.concatenate(v).mean()) for k, v in per_voice.items()}


def exercise_0_2(data: Splits | None = None) -> dict[str, float]:
    """Which voice is hardest to predict? The same-voice predictor's valid NLL, voice by voice, and why.

    The why is in how each voice moves (``stats.voice_stats`` on train): a voice
    that changes pitch more often, and by wider leaps, is harder to predict from
    its own previous step.
    """
    data = data or load_data()
    out = same_voice_nll(data)
    motion = {name: voice_stats([p.pitches[:, [v]] for p in data.train]) for v, name in enumerate(VOICES)}
    print("voice     NLL  moves on  mean move (semitones)")
    for name in VOICES:
        print(f"{name:8s} {out[name]:.3f}  {motion[name]['moves']:7.0%}  {motion[name]['leap']:8.2f}")
    hard, easy = max(out, key=out.get), min(out, key=out.get)
    why = (f"Hardest: the {hard}; easiest: the {easy}. Musically, the {hard} changes pitch on "
           f"{motion[hard]['moves']:.0%} of steps and moves by {motion[hard]['leap']:.1f} semitones on "
           f"average (the {easy}: {motion[easy]['moves']:.0%}, {motion[easy]['leap']:.1f}).")
    if hard == "bass":
        why += (" A chorale bass moves with the harmony, often from chord root to chord root, so it "
                "moves more often and leaps further than the upper voices, which mostly hold or move "
                "by step: its previous note says less about its next.")
    print(textwrap.fill(why, 88))
    return out


def exercise_0_3(data: Splits | None = None) -> dict[str, tuple[float, float]]:
    """Melody and harmony, voice by voice: the valid NLL of ``SameVoice`` and of ``TwoTokens`` per voice.

    x_{t-4} is the voice's previous step (melody). x_{t-1} is the token just
    before: for the alto, tenor and bass the voice above at the same step
    (harmony), for the soprano the bass of the previous step. Returns, per voice,
    (same voice, two tokens) in nats per token.
    """
    data = data or load_data()
    two = TwoTokens().fit(data.train)
    pair = np.concatenate([two.token_nll([p]) for p in data.valid])
    alone = same_voice_nll(data)
    voice = np.concatenate([np.arange(len(encode(p.pitches)) - 1) % 4 for p in data.valid])   # target i: voice i mod 4
    out = {name: (alone[name], float(pair[voice == v].mean())) for v, name in enumerate(VOICES)}
    print(f"two tokens: {pair.mean():.3f} nats/token; same voice alone: {two.same.nll(data.valid):.3f}")
    for name, (a, b) in out.items():
        print(f"  {name:8s} same voice {a:.3f} -> with x_t-1 {b:.3f} ({b - a:+.3f})")
    least = min(out, key=lambda k: out[k][0] - out[k][1])
    why = f"The {least} gains least."
    if least == "soprano":
        why += (" Its x_t-1 is not a voice of its own chord: it is the bass of the step before, which says"
                " little about the melody's next note. For the alto, tenor and bass, x_t-1 is the voice"
                " just above at the same step, and a chorale's voices move in chords.")
    print(textwrap.fill(why, 88))
    return out
