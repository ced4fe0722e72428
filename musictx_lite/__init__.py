"""musictx-lite: build a music transformer in PyTorch, one idea per chapter.

Each module's docstring names the chapter of the book that explains it.
"""
from __future__ import annotations

from .classroom.chapter import setup
from .classroom.plots import piano_roll
from .device import model_device, pick_device, to_model
from .engine.profiles import Profile, get_profile
from .engine.sample import generate, prompt_from
from .engine.training import History, TrainConfig, train
from .io.audio import play
from .io.data import Piece, Splits, load_chorales, load_data, load_jsb
from .io.midi import grid_to_midi, midi_to_grid, read_midi, write_midi
from .io.tokens import BOS, HOLD, MASK, PAD, REST, VOCAB_SIZE, decode, encode
from .models.config import ModelConfig
from .models.registry import MODELS, build_model, load_checkpoint, n_params
from .models.tasks import evaluate_nll, evaluate_prefix_nll
from .study.hub import pretrained
from .version import __version__

__all__ = [
    "__version__", "Piece", "Splits", "load_chorales", "load_data", "load_jsb",
    "BOS", "HOLD", "MASK", "PAD", "REST", "VOCAB_SIZE", "decode", "encode",
    "grid_to_midi", "midi_to_grid", "piano_roll", "play", "read_midi", "write_midi",
    "model_device", "pick_device", "to_model", "ModelConfig", "evaluate_nll", "evaluate_prefix_nll",
    "History", "TrainConfig", "train", "MODELS", "build_model", "load_checkpoint", "n_params",
    "Profile", "get_profile", "setup",
    "generate", "prompt_from", "pretrained",
]
