"""musictx-lite: build a music transformer in PyTorch, one idea per chapter.

Each module's docstring names the chapter of the book that explains it.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .data import Piece, Splits, load_chorales, load_data, load_jsb
from .tokens import BOS, HOLD, MASK, PAD, REST, VOCAB_SIZE, decode, encode
from .music import grid_to_midi, midi_to_grid, piano_roll, play, read_midi, write_midi
from .profiles import Profile, get_profile, pick_device, setup
from .models import MODELS, ModelConfig, build_model
from .training import History, TrainConfig, evaluate_nll, evaluate_prefix_nll, load_checkpoint, train
from .sample import generate, prompt_from

__all__ = [
    "__version__", "Piece", "Splits", "load_chorales", "load_data", "load_jsb",
    "BOS", "HOLD", "MASK", "PAD", "REST", "VOCAB_SIZE", "decode", "encode",
    "grid_to_midi", "midi_to_grid", "piano_roll", "play", "read_midi", "write_midi",
    "Profile", "get_profile", "pick_device", "setup",
    "MODELS", "ModelConfig", "build_model",
    "History", "TrainConfig", "evaluate_nll", "evaluate_prefix_nll", "load_checkpoint", "train",
    "generate", "prompt_from",
]
