"""The shipped models' graphs for the book's pages (study/web.py, book/play/): ONNX Runtime gives PyTorch's
logits on held-out chorales, the export is not stale, and the record says what the page must mirror."""
import inspect
import json
import shutil

import numpy as np
import pytest

from musictx_lite.engine.sample import generate
from musictx_lite.io import melody, tokens
from musictx_lite.study import web

pytest.importorskip("onnxruntime")
RECORD = json.loads((web.WEB / "models.json").read_text())


def test_the_export_is_not_stale():
    assert web.stale() == [], "run: python -m scripts.export_web --data PATH/Jsb16thSeparated.json"


@pytest.mark.parametrize("name", ["relative", "harmoniser"])
def test_onnx_runtime_gives_pytorchs_logits_on_held_out_chorales(name):
    held_out = web.prompts()[web.N_CHECKED:web.N_CHECKED + 3]          # not the ones the export checked
    assert len(held_out) == 3 and all(g.shape == (64, 4) for g in held_out)
    worst = web.check(name, held_out, prompt=97)
    assert worst < 1e-4, f"{name}: ONNX Runtime is {worst:.2e} from PyTorch"
    assert RECORD["models"][name]["max_abs_logit_diff"] < 1e-4


def test_the_record_holds_what_the_page_mirrors():
    for key in ("PAD", "BOS", "REST", "HOLD", "MASK", "N_SPECIAL", "LOWEST", "HIGHEST", "VOCAB_SIZE"):
        assert RECORD["tokens"][key] == getattr(tokens, key), key
    banned = inspect.signature(generate).parameters["banned"].default
    assert RECORD["banned"] == list(banned)
    assert RECORD["soprano"] == list(melody.SOPRANO) and RECORD["max_steps"] == melody.MAX_STEPS
    for name, m in RECORD["models"].items():
        model = web.pretrained(name)
        assert (m["context"], m["n_layers"], m["n_heads"]) == (model.context, model.cfg.n_layers, model.cfg.n_heads)
        assert m["params"] == sum(p.numel() for p in model.parameters())
        assert all(g["float16_weights"] > 10 for g in m["graphs"])       # stored as float16, exactly
    chorales = json.loads((web.WEB / "chorales.json").read_text())
    assert chorales["split"] == "test" and len(chorales["chorales"]) == 77          # the official test set


def test_stale_names_what_changed(tmp_path):
    folder = tmp_path / "play"
    shutil.copytree(web.WEB, folder)
    assert web.stale(folder) == []
    graph = folder / "relative.onnx"
    graph.write_bytes(graph.read_bytes()[:-1] + b"\0")
    rec = json.loads((folder / "models.json").read_text())
    rec["models"]["harmoniser"]["checkpoint_sha256"] = "0" * 64
    rec["code_sha256"] = "0" * 64
    (folder / "models.json").write_text(json.dumps(rec))
    found = web.stale(folder)
    assert any("relative.onnx" in f for f in found)
    assert any("harmoniser.pt changed" in f for f in found)
    assert any("export code" in f for f in found)
    (folder / "models.json").unlink()
    assert web.stale(folder) == [f"{folder / 'models.json'} is missing"]
    assert np.isfinite(RECORD["models"]["relative"]["max_abs_logit_diff"])
