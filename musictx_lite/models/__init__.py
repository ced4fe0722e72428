"""The model: its parts (one module per idea of the book), the decoder, and the registry of named models.

The registry (``registry.py``) holds one record per model; it is re-exported here,
so ``from musictx_lite.models import MODELS, build_model`` reads as it always has.
"""
from .registry import LOCAL_BENCH_N, LOCAL_N, MODELS, SHAW_K, Spec, Timed, build_model, load_checkpoint, n_params

__all__ = ["LOCAL_BENCH_N", "LOCAL_N", "MODELS", "SHAW_K", "Spec", "Timed", "build_model", "load_checkpoint",
           "n_params"]
