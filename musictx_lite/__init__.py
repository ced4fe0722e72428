"""musictx-lite: build a music transformer in PyTorch, one idea per chapter.

Each module's docstring names the chapter of the book that explains it.
"""
from __future__ import annotations

from .version import __version__
from .data import Piece, Splits, load_chorales, load_data, load_jsb
from .tokens import BOS, HOLD, MASK, PAD, REST, VOCAB_SIZE, decode, encode
from .music import grid_to_midi, midi_to_grid, piano_roll, play, read_midi, write_midi
from .device import model_device, pick_device, to_model
from .config import ModelConfig
from .tasks import evaluate_nll, evaluate_prefix_nll
from .training import History, TrainConfig, train
from .models import MODELS, build_model, load_checkpoint, n_params
from .chapter import setup
from .profiles import Profile, get_profile
from .sample import generate, prompt_from
from .hub import pretrained

__all__ = [
    "__version__", "Piece", "Splits", "load_chorales", "load_data", "load_jsb",
    "BOS", "HOLD", "MASK", "PAD", "REST", "VOCAB_SIZE", "decode", "encode",
    "grid_to_midi", "midi_to_grid", "piano_roll", "play", "read_midi", "write_midi",
    "model_device", "pick_device", "to_model", "ModelConfig", "evaluate_nll", "evaluate_prefix_nll",
    "History", "TrainConfig", "train", "MODELS", "build_model", "load_checkpoint", "n_params",
    "Profile", "get_profile", "setup",
    "generate", "prompt_from", "pretrained",
]
