"""Every model the book has defined so far, by name, for the training loop, the CLI and the tests.

Notebook: notebooks/01_attention_in_rnns.ipynb (the list grows with each chapter).

From chapter 3 on, an entry names a composition of the one ``Decoder``: which
positions, which mixer, which block. A new chapter adds a line here and, at
most, one small module.
"""
from __future__ import annotations

import os
from typing import Callable

import torch
import torch.nn as nn

from .attention import Head, MultiHeadAttention
from .blocks import Block
from .config import ModelConfig
from .decoder import Decoder
from .fill import VoiceFill
from .fnet import CausalFourierMatrix, CausalLongConv, FourierMixer
from .local import LocalAttention
from .positions import LearnedPositions, SinusoidalPositions
from .relative import ALiBi, RelativeGlobal, Rotary, ShawAttention
from .rnn import LSTMAttention, LSTMModel
from .training import read_checkpoint
from .voices import VoiceEmbedding


def one_head(causal: bool = True) -> Callable[[ModelConfig], nn.Module]:
    """A single head as wide as the model (no W_O), the mixer of chapter 3."""
    return lambda cfg: Head(cfg.n_embd, cfg.n_embd, causal)


def heads(cfg: ModelConfig) -> nn.Module:
    """Causal multi-head attention (chapter 4)."""
    return MultiHeadAttention(cfg, causal=True)


def relative(cfg: ModelConfig) -> nn.Module:
    """The Music Transformer's relative global attention, computed with the skew (chapters 7-8)."""
    return MultiHeadAttention(cfg, score_bias=RelativeGlobal(cfg))


def post_ln(cfg: ModelConfig, mixer: nn.Module) -> Block:
    return Block(cfg, mixer, pre_ln=False)


SHAW_K = 16       # Shaw's clipping distance: 16 tokens = 4 steps of four voices (chapter 7)
LOCAL_N = 32      # the block length of relative local attention (chapter 9)

MODELS: dict[str, Callable[[ModelConfig], nn.Module]] = {
    "lstm": LSTMModel,                                                            # chapter 1
    "lstm-attention": LSTMAttention,                                              # chapter 1
    "fill": VoiceFill,                                                            # chapter 2: fill in a voice
    # chapter 3: one bare attention layer; without the mask it leaks (positions let it find the answer)
    "attention-unmasked": lambda cfg: Decoder(cfg, one_head(causal=False), LearnedPositions, block=None,
                                              final_norm=False),
    "attention-positions": lambda cfg: Decoder(cfg, one_head(), LearnedPositions, block=None, final_norm=False),
    "attention": lambda cfg: Decoder(cfg, one_head(), block=None, final_norm=False),
    "multi-head": lambda cfg: Decoder(cfg, heads, block=None, final_norm=False),     # chapter 4
    "transformer": lambda cfg: Decoder(cfg, heads),                                  # chapter 5: pre-LN, no positions
    "transformer-post-ln": lambda cfg: Decoder(cfg, heads, block=post_ln, final_norm=False),   # chapter 5
    "learned-positions": lambda cfg: Decoder(cfg, heads, LearnedPositions),                 # chapter 6
    "sinusoidal": lambda cfg: Decoder(cfg, heads, SinusoidalPositions),                     # chapter 6
    "shaw": lambda cfg: Decoder(cfg, lambda c: ShawAttention(c, k=SHAW_K)),                 # chapter 7
    "relative": lambda cfg: Decoder(cfg, relative),                                         # chapters 7-8
    "rope": lambda cfg: Decoder(cfg, lambda c: MultiHeadAttention(c, rotary=Rotary(c))),   # chapter 7
    "alibi": lambda cfg: Decoder(cfg, lambda c: MultiHeadAttention(c, score_bias=ALiBi(c))),   # chapter 7
    "local": lambda cfg: Decoder(cfg, lambda c: LocalAttention(c, N=LOCAL_N)),              # chapter 9
    # chapter 10: no attention and no positions part. FNet's Fourier sublayer leaks (it mixes in the
    # future); the causal matrix knows absolute positions, the causal conv relative offsets
    "fnet": lambda cfg: Decoder(cfg, FourierMixer),
    "fnet-matrix": lambda cfg: Decoder(cfg, CausalFourierMatrix),
    "fnet-conv": lambda cfg: Decoder(cfg, CausalLongConv),
    "relative-voice": lambda cfg: Decoder(cfg, relative, VoiceEmbedding),                   # chapter 11
}


def build_model(name: str, cfg: ModelConfig) -> nn.Module:
    """Instantiate the model called ``name`` with ``cfg``; it remembers its name for checkpoints."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    model = MODELS[name](cfg)
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
