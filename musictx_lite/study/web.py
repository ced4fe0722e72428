"""The shipped models on the book's pages: exported to ONNX, run in the reader's browser (chapters 11 and 12).

Notebook: notebooks/11_comparison.ipynb ("The model in your browser"); book/play.md.

``python -m scripts.export_web`` writes, into ``book/play/`` (``WEB``):

- ``relative.onnx``: the shipped ``relative`` model as one sampler step
  (``models.export_step.DecoderStep``): the keys and values kept in, the new
  tokens' out, for 1 to ``context`` new tokens: the prompt in one call, then
  one token per call;
- ``harmoniser-encoder.onnx`` (``MelodyMemory``) and ``harmoniser-decoder.onnx``
  (``HarmoniserStep``): the harmoniser split the same way;
- ``chorales.json``: the opening bars of every held-out (test) chorale, the prompts
  the page offers;
- ``models.json``: the record: what each graph was made from (the checkpoint's
  sha256, the export code's sha256), with which versions, when, by which command,
  and how far ONNX Runtime's logits were from PyTorch's on held-out chorales.

Graphs are exported by ``torch.onnx.export(dynamo=True)``. The shipped weights
are float16 values (``hub.export``), so each graph stores them in float16 with a
``Cast`` to float32 in front, which ONNX Runtime folds away when it loads the
graph: the same numbers, half the download. ``stale()`` says what no longer
matches the record (a test fails on it): export again after a shipped model or
the export code changes.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from ..io.data import Splits
from ..io.melody import MAX_STEPS, SOPRANO
from ..io.tokens import BOS, HIGHEST, HOLD, LOWEST, MASK, N_SPECIAL, PAD, REST, VOCAB_SIZE, encode
from ..models import export_step
from ..models.export_step import DecoderStep, HarmoniserStep, MelodyMemory, empty_cache
from .hub import HERE, git_commit, pretrained

WEB = Path(__file__).resolve().parents[2] / "book" / "play"
GRAPHS = {"relative": ("relative.onnx",), "harmoniser": ("harmoniser-encoder.onnx", "harmoniser-decoder.onnx")}
PROMPT_STEPS = 64                    # the opening 4 bars of each held-out chorale (prompts use up to 3)
N_CHECKED = 8                        # the chorales the export checks ONNX Runtime on
OPSET = 18


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def code_sha256() -> str:
    """What the graphs compute comes from these two modules: their source's sha256."""
    import sys

    return hashlib.sha256("".join(inspect.getsource(m) for m in (export_step, sys.modules[__name__])).encode()
                          ).hexdigest()


def cache_names(n_layers: int, prefix: str = "") -> list[str]:
    """The graph's names of each layer's keys and values: keys_0, values_0, keys_1, ..."""
    return [f"{prefix}{kind}_{i}" for i in range(n_layers) for kind in ("keys", "values")]


def _wrappers(name: str, model: nn.Module) -> list[tuple[str, nn.Module, tuple, dict, list, list]]:
    """(file, module, example inputs, dynamic shapes, input names, output names) of each graph of ``name``."""
    n = model.cfg.n_layers
    T = torch.export.Dim("T", min=1, max=model.context)
    P = torch.export.Dim("P", min=1, max=model.context)                # the rows kept
    tokens, pos = torch.full((1, 5), BOS), torch.tensor(3)
    cache = [c[:, :3] for c in empty_cache(model)]                      # (1, P, nh, hs)
    rows = [{1: P}] * len(cache)
    ins, outs = ["tokens", "pos"] + cache_names(n), ["logits"] + cache_names(n, "new_")
    if name == "relative":
        return [("relative.onnx", DecoderStep(model), (tokens, pos, cache),
                 {"idx": {1: T}, "pos": None, "cache": rows}, ins, outs)]
    S = torch.export.Dim("S", min=1, max=-(-model.context // 4))
    melody = torch.full((1, 7), N_SPECIAL + 12)
    memory = MelodyMemory(model)(melody)
    mem = cache_names(n, "memory_")
    return [("harmoniser-encoder.onnx", MelodyMemory(model), (melody,), {"melody": {1: S}}, ["melody"], mem),
            ("harmoniser-decoder.onnx", HarmoniserStep(model), (tokens, pos, cache, memory),
             {"idx": {1: T}, "pos": None, "cache": rows, "memory": [{2: S}] * len(memory)}, ins + mem, outs)]


def half_weights(path: Path) -> int:
    """Store the graph's float32 weights that are float16 values as float16, each behind a ``Cast`` to
    float32 (folded by ONNX Runtime when it loads the graph); return how many were converted."""
    import onnx
    from onnx import helper, numpy_helper

    graph_model = onnx.load(str(path))
    g = graph_model.graph
    casts, n = [], 0
    for init in g.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        w = numpy_helper.to_array(init)
        if w.size < 64 or not np.array_equal(w.astype(np.float16).astype(np.float32), w):
            continue                                                    # small, or not a float16 value
        name = init.name
        init.CopyFrom(numpy_helper.from_array(w.astype(np.float16), name + "_f16"))
        casts.append(helper.make_node("Cast", [name + "_f16"], [name], to=onnx.TensorProto.FLOAT))
        n += 1
    nodes = casts + list(g.node)                                        # the casts before every use
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, str(path))
    return n


def held_out(data: Splits, n_steps: int = PROMPT_STEPS) -> list[dict]:
    """The prompts of the page: the opening ``n_steps`` steps of every test chorale."""
    return [{"name": p.name, "steps": int(len(p.pitches)), "grid": p.pitches[:n_steps].tolist()} for p in data.test]


def session(path: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


@torch.no_grad()
def check(name: str, grids: list[np.ndarray], folder: Path = WEB, prompt: int = 129) -> float:
    """The largest |logit| difference between ONNX Runtime (the graphs in ``folder``) and PyTorch's model on
    chorales ``grids`` ((steps, 4) each): the first ``prompt`` tokens in one call, then one token at a time,
    up to the context, as the page calls the graphs. PyTorch's side is the model itself, without a cache."""
    model = pretrained(name).float().eval()
    worst = 0.0
    files = [session(folder / f) for f in GRAPHS[name]]
    for grid in grids:
        tokens = encode(np.asarray(grid))[None, :model.context]         # (1, T)
        want = model(torch.from_numpy(tokens)).numpy()                  # (1, T, V)
        cache = [t.numpy() for t in empty_cache(model)]                 # the page's buffers
        feeds = {}
        if name == "harmoniser":
            memory = files[0].run(None, {"melody": tokens[:, 1::4]})
            feeds = dict(zip(cache_names(model.cfg.n_layers, "memory_"), memory))
        got = []
        for start, end in [(0, prompt)] + [(t, t + 1) for t in range(prompt, tokens.shape[1])]:
            kept = [c[:, :max(start, 1)] for c in cache]                # rows 0..start-1 (one unused)
            logits, *new = files[-1].run(None, {"tokens": tokens[:, start:end], "pos": np.array(start),
                                                **dict(zip(cache_names(model.cfg.n_layers), kept)), **feeds})
            for c, rows in zip(cache, new):
                c[:, start:end] = rows                                  # as the page keeps them
            got.append(logits)
        worst = max(worst, float(np.abs(np.concatenate(got, axis=1) - want).max()))
    return worst


def prompts(folder: Path = WEB) -> list[np.ndarray]:
    """The held-out chorales' openings the page offers (``chorales.json``), (steps, 4) each."""
    return [np.array(c["grid"]) for c in json.loads((folder / "chorales.json").read_text())["chorales"]]


def export_web(data: Splits, folder: Path = WEB, names=("relative", "harmoniser"), command: str = "") -> dict:
    """Export the shipped ``names`` to ONNX in ``folder``, write the page's prompts and the record; return it."""
    import onnx
    import onnxruntime
    import onnxscript

    folder.mkdir(parents=True, exist_ok=True)
    chorales = folder / "chorales.json"
    chorales.write_text(json.dumps({"source": data.source, "split": "test", "steps": PROMPT_STEPS,
                                    "chorales": held_out(data)}, separators=(",", ":")) + "\n")
    record = {"command": command, "commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                 time.gmtime()),
              "torch": torch.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__,
              "onnxruntime": onnxruntime.__version__, "opset": OPSET, "code_sha256": code_sha256(),
              "tokens": {"PAD": PAD, "BOS": BOS, "REST": REST, "HOLD": HOLD, "MASK": MASK, "N_SPECIAL": N_SPECIAL,
                         "LOWEST": LOWEST, "HIGHEST": HIGHEST, "VOCAB_SIZE": VOCAB_SIZE},
              "banned": [PAD, BOS, HOLD, MASK], "soprano": list(SOPRANO), "max_steps": MAX_STEPS, "models": {}}
    for name in names:
        model = pretrained(name).float().eval()
        cfg = model.cfg
        graphs = []
        for file, module, inputs, dynamic, ins, outs in _wrappers(name, model):
            t = time.perf_counter()
            program = torch.onnx.export(module.eval(), inputs, dynamo=True, opset_version=OPSET,
                                        dynamic_shapes=dynamic, input_names=ins, output_names=outs,
                                        external_data=False, verbose=False)
            program.save(str(folder / file))
            halved = half_weights(folder / file)
            graphs.append({"file": file, "bytes": (folder / file).stat().st_size, "sha256": sha256(folder / file),
                           "inputs": ins, "outputs": outs, "float16_weights": halved,
                           "seconds": round(time.perf_counter() - t, 1)})
        record["models"][name] = {
            "checkpoint": f"{name}.pt", "checkpoint_sha256": sha256(HERE / f"{name}.pt"), "graphs": graphs,
            "params": sum(p.numel() for p in model.parameters()), "context": cfg.context, "n_layers": cfg.n_layers,
            "n_heads": cfg.n_heads, "head_size": cfg.n_embd // cfg.n_heads,
            "max_abs_logit_diff": check(name, prompts(folder)[:N_CHECKED], folder)}
    record["chorales"] = {"file": chorales.name, "sha256": sha256(chorales)}
    (folder / "models.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def stale(folder: Path = WEB) -> list[str]:
    """What in ``folder`` no longer matches its record, the shipped checkpoints or the export code."""
    path = folder / "models.json"
    if not path.exists():
        return [f"{path} is missing"]
    rec, found = json.loads(path.read_text()), []
    if rec["code_sha256"] != code_sha256():
        found.append("the export code (models/export_step.py, study/web.py) changed since the export")
    for name, m in rec["models"].items():
        if sha256(HERE / m["checkpoint"]) != m["checkpoint_sha256"]:
            found.append(f"the shipped {m['checkpoint']} changed since it was exported")
        for g in m["graphs"]:
            f = folder / g["file"]
            if not f.exists() or sha256(f) != g["sha256"]:
                found.append(f"{g['file']} is not the file the record describes")
    c = folder / rec["chorales"]["file"]
    if not c.exists() or sha256(c) != rec["chorales"]["sha256"]:
        found.append(f"{c.name} is not the file the record describes")
    return found
