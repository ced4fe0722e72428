"""Values between the grader and a submission's process, as JSON only (never pickle: a submission's process is not
trusted): numbers, strings, lists and dicts as they are, arrays and tensors as nested lists with their dtype."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def to_wire(obj: Any, depth: int = 0) -> Any:
    """``obj`` as plain JSON values; what cannot be sent becomes {"__unsendable__": its type}."""
    if depth > 20:
        return {"__unsendable__": "nested too deep"}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if type(obj).__module__.startswith("torch") and hasattr(obj, "detach"):
        obj = obj.detach().cpu().numpy()
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            return {"__unsendable__": f"array of {obj.dtype}"}
        return {"__array__": [to_wire(x, depth + 1) for x in obj.astype(float).ravel().tolist()],
                "shape": list(obj.shape), "dtype": str(obj.dtype)}
    if isinstance(obj, (list, tuple)):
        return [to_wire(x, depth + 1) for x in obj]
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {k: to_wire(v, depth + 1) for k, v in obj.items()}
    return {"__unsendable__": type(obj).__name__}


def from_wire(obj: Any, tensors: bool = False) -> Any:
    """The inverse of ``to_wire``: arrays come back as numpy arrays (torch tensors with ``tensors``)."""
    if isinstance(obj, list):
        return [from_wire(x, tensors) for x in obj]
    if isinstance(obj, dict):
        if "__float__" in obj:
            return float(obj["__float__"])
        if "__array__" in obj:
            flat = [float(x["__float__"]) if isinstance(x, dict) else x for x in obj["__array__"]]
            a = np.asarray(flat, dtype=float).reshape(obj["shape"]).astype(obj["dtype"])
            if tensors:
                import torch

                return torch.from_numpy(a)
            return a
        if "__unsendable__" in obj:
            raise ValueError(f"the answer returned something that is not a number or an array "
                             f"({obj['__unsendable__']})")
        return {k: from_wire(v, tensors) for k, v in obj.items()}
    return obj
