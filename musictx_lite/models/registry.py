"""Every model the book has defined so far: one record per model, read by everything else.

Notebook: notebooks/01_attention_in_rnns.ipynb (the list grows with each chapter).

From chapter 3 on, a record's ``build`` is a composition of the one ``Decoder``:
which positions, which mixer, which block. The record also says where the book
builds the model, its size class (``profiles`` sizes classes, not models),
whether chapter 11 compares it, and which of its mixers ``bench attention``
times. The profiles, the comparison, the benchmarks, the command line and the
tests read ``MODELS`` and nothing else, so a new chapter adds one line here
and, at most, one small module.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Callable

import torch
import torch.nn as nn

from ..checkpoint import read_checkpoint
from ..io.performance import VOCAB_SIZE as EVENT_VOCAB
from .attention import CausalHead, Head, MultiHeadAttention, MultiHeadLoop
from .blocks import block_decoder
from .cache import with_cache
from .coconet import Coconet
from .config import ModelConfig
from .decoder import Decoder
from .fill import VoiceFill
from .fnet import CausalFourierMatrix, CausalLongConv, FourierMixer
from .harmoniser import Harmoniser
from .local import LocalAttention
from .positions import LearnedPositions, SinusoidalPositions
from .relative import ALiBi, BiasedAttention, RelativeGlobal, RotaryAttention, ShawAttention
from .relative_fast import RelativeGlobalAttention
from .rnn import LSTMAttention, LSTMModel
from .tasks import EVENTS
from .voices import VoiceEmbedding


def one_head(causal: bool = True) -> Callable[[ModelConfig], nn.Module]:
    """A single head as wide as the model (no W_O), the mixer of chapter 3."""
    return lambda cfg: (CausalHead if causal else Head)(cfg.n_embd, cfg.n_embd)


def heads(cfg: ModelConfig) -> nn.Module:
    """Causal multi-head attention (chapter 4)."""
    return MultiHeadAttention(cfg, causal=True)


def relative_global(cfg: ModelConfig) -> nn.Module:
    """The Music Transformer's relative global attention (chapters 7-8), computed fast (chapter 8)."""
    return RelativeGlobalAttention(cfg)


SHAW_K = 16       # Shaw's clipping distance: 16 tokens = 4 steps of four voices (chapter 7)
LOCAL_N = 32      # the block length of relative local attention (chapter 9)
LOCAL_BENCH_N = 128   # ... and of the local rows that ``bench attention`` times
PIANO_N = 128         # the block length of chapter 13's relative local attention over 2,048 events


def performances(mixer: Callable[[ModelConfig], nn.Module]) -> Callable[[ModelConfig], nn.Module]:
    """Chapter 13: chapter 8's decoder of ``mixer`` over the performance events (its vocabulary, whatever
    ``cfg.vocab_size`` says), learning the next event (``tasks.EVENTS``)."""
    def build(cfg: ModelConfig) -> nn.Module:
        model = block_decoder(replace(cfg, vocab_size=EVENT_VOCAB), mixer)
        model.task = EVENTS
        return model
    return build


@dataclass(frozen=True)
class Timed:
    """A mixer that ``bench attention`` times (forward + backward of one layer), built for each length."""

    build: Callable[[ModelConfig], nn.Module]
    cuda_only: bool = False            # it runs on a CUDA GPU only


@dataclass(frozen=True)
class Spec:
    """Everything the package needs to know about one model: its line in ``MODELS``."""

    build: Callable[[ModelConfig], nn.Module]
    chapter: int                       # where the book builds it
    size: str                          # its size class: each profile sizes a class, not a model (profiles.SIZES)
    left_out: str | None = None        # why chapter 11 does not compare it; None: it is compared
    timed: dict[str, Timed] = field(default_factory=dict)   # the implementations that ``bench attention`` times
    paper: str | None = None           # its row in chapter 11's reproduction of the paper's Table 2, if any


MODELS: dict[str, Spec] = {
    "lstm": Spec(LSTMModel, 1, "lstm"),
    "lstm-attention": Spec(LSTMAttention, 1, "lstm"),
    "fill": Spec(VoiceFill, 2, "fill", left_out="fills in a hidden voice, another task (chapter 2)"),
    # chapter 3: one bare attention layer; without the mask it leaks (positions let it find the answer)
    "attention": Spec(lambda cfg: Decoder(cfg, one_head()), 3, "one-head"),
    "attention-positions": Spec(lambda cfg: Decoder(cfg, one_head(), LearnedPositions), 3, "one-head"),
    "attention-unmasked": Spec(lambda cfg: Decoder(cfg, one_head(causal=False), LearnedPositions), 3, "one-head",
                               left_out="sees the future (chapter 3)"),
    "multi-head": Spec(lambda cfg: Decoder(cfg, heads), 4, "multi-head",
                       timed={"per-head loop": Timed(MultiHeadLoop),
                              "batched": Timed(lambda cfg: MultiHeadAttention(cfg, fast=False)),
                              "SDPA": Timed(lambda cfg: MultiHeadAttention(cfg, fast=True))}),
    "transformer": Spec(lambda cfg: block_decoder(cfg, heads), 5, "transformer"),              # pre-LN, no positions
    "transformer-post-ln": Spec(lambda cfg: block_decoder(cfg, heads, pre_ln=False), 5, "transformer"),
    "learned-positions": Spec(lambda cfg: block_decoder(cfg, heads, LearnedPositions), 6, "decoder"),
    "sinusoidal": Spec(lambda cfg: block_decoder(cfg, heads, SinusoidalPositions), 6, "decoder",
                       paper="absolute positions"),
    "shaw": Spec(lambda cfg: block_decoder(cfg, lambda c: ShawAttention(c, k=SHAW_K)), 7, "decoder",
                 # every distance its own vectors: (L, L, hs) tensors for a^K and a^V
                 timed={"direct Shaw": Timed(lambda cfg: ShawAttention(cfg, k=cfg.context - 1))}),
    "relative": Spec(lambda cfg: block_decoder(cfg, relative_global), 8, "decoder",   # chapters 7-8
                     paper="relative attention",
                     timed={"skew": Timed(lambda cfg: BiasedAttention(cfg, RelativeGlobal(cfg), fast=False)),
                            "chunked skew": Timed(lambda cfg: RelativeGlobalAttention(cfg, impl="chunked")),
                            "FlexAttention": Timed(lambda cfg: RelativeGlobalAttention(cfg, impl="flex"),
                                                   cuda_only=True)}),
    "rope": Spec(lambda cfg: block_decoder(cfg, RotaryAttention), 7, "decoder"),
    "alibi": Spec(lambda cfg: block_decoder(cfg, lambda c: BiasedAttention(c, ALiBi(c))), 7, "decoder"),
    "local": Spec(lambda cfg: block_decoder(cfg, lambda c: LocalAttention(c, N=LOCAL_N)), 9, "decoder",
                  timed={"local skew": Timed(lambda cfg: LocalAttention(cfg, N=LOCAL_BENCH_N))}),
    # chapter 10: no attention and no positions part. FNet's Fourier sublayer leaks (it mixes in the
    # future); the causal matrix knows absolute positions, the causal conv relative offsets
    "fnet": Spec(lambda cfg: block_decoder(cfg, FourierMixer), 10, "decoder", left_out="sees the future (chapter 10)",
                 timed={"FNet (fft2)": Timed(FourierMixer)}),
    "fnet-matrix": Spec(lambda cfg: block_decoder(cfg, CausalFourierMatrix), 10, "decoder",   # an (L, L) matrix
                        timed={"causal matrix": Timed(CausalFourierMatrix)}),
    "fnet-conv": Spec(lambda cfg: block_decoder(cfg, CausalLongConv), 10, "decoder",
                      timed={"causal FFT conv": Timed(CausalLongConv)}),
    "relative-voice": Spec(lambda cfg: block_decoder(cfg, relative_global, VoiceEmbedding), 11, "decoder",
                           paper="+ voice embedding"),
    # chapter 12: an encoder over the melody and chapter 8's decoder with cross-attention to it
    "harmoniser": Spec(Harmoniser, 12, "harmoniser", left_out="harmonises a given melody, another task (chapter 12)"),
    # chapter 12, Coconet's way: fill in any hidden notes, harmonise by Gibbs sampling
    "coconet": Spec(Coconet, 12, "decoder", left_out="fills in hidden notes, another task (chapter 12)"),
    # chapter 13: piano performances as events, 2,048 at a time: global against local relative attention
    "piano-relative": Spec(performances(relative_global), 13, "piano",
                           left_out="models piano performances, another data set (chapter 13)"),
    "piano-local": Spec(performances(lambda c: LocalAttention(c, N=PIANO_N)), 13, "piano",
                        left_out="models piano performances, another data set (chapter 13)"),
}


def build_model(name: str, cfg: ModelConfig) -> nn.Module:
    """Instantiate the model called ``name`` with ``cfg``, able to sample with a cache where its mixers
    are causal (``cache.with_cache``); it remembers its name for checkpoints."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    model = with_cache(MODELS[name].build(cfg))
    model.name = name
    return model


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load_checkpoint(path: str | os.PathLike, device: torch.device | str = "cpu",
                    model: nn.Module | None = None) -> tuple[nn.Module, dict]:
    """Rebuild a trained model from a run directory (or a ckpt.pt file) written by ``train``.

    A model that is not in ``MODELS`` cannot be rebuilt by name: pass one built
    the same way as ``model``, and its weights are loaded into it.
    """
    ck = read_checkpoint(path, device)
    if model is None:
        if ck["model_name"] not in MODELS:
            raise ValueError(f"{path} holds an unregistered model ({ck.get('model_class', '?')}); build it "
                             f"yourself and pass it: load_checkpoint(path, model=...)")
        model = build_model(ck["model_name"], ModelConfig(**ck["model_config"]))
    try:
        model.load_state_dict(ck["model"])
    except RuntimeError as e:
        raise ValueError(f"{path} does not fit this model: {str(e).splitlines()[0]}") from e
    return model.to(device).eval(), ck
