"""A chapter shows only what it and the chapters before it have taught.

Every code cell of a chapter that shows the package's source (``Code(inspect.getsource(...))``) is run
here with the chapter's imports, and what it would show is checked against the concepts of the
later chapters: no displayed source may mention one. ``CONCEPTS`` names each chapter's concepts by the
words that give them away in code.
"""
import ast
import inspect
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[01]*.ipynb"))

CONCEPTS = {
    3: [r"\bcausal", r"\bprobe"],
    4: [r"n_heads", r"MultiHead", r"split_heads", r"attention_fast", r"scaled_dot_product", r"\bSDPA"],
    5: [r"\bBlock\b", r"LayerNorm", r"FeedForward", r"residual", r"pre_ln"],
    6: [r"[sS]inusoid"],
    7: [r"[rR]elative", r"[rR]otary", r"RoPE", r"score_bias", r"ALiBi", r"Shaw", r"Biased"],
    8: [r"\bskew", r"_skew"],
    9: [r"\blocal\b", r"Local", r"band_mask"],
    10: [r"Fourier", r"\bfft", r"FFT", r"[cC]ache"],
    11: [r"key/value", r"KVCache", r"remember\(", r"with_cache", r"VoiceEmbedding"],
}

def chapter(path: Path) -> int:
    return int(path.name[:2])


def displays(path: Path) -> dict[str, str]:
    """What each source-showing cell of a notebook shows: {cell id: source text}."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    imports = []
    for c in cells:
        src = "".join(c["source"])
        if re.search(r"^\s*[!%]", src, re.M):                       # the install cell: shell lines
            continue
        for node in ast.parse(src).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                imports.append(ast.unparse(node))
    namespace: dict = {}
    exec("\n".join(imports), namespace)
    shown: dict[str, str] = {}
    for c in cells:
        src = "".join(c["source"])
        if "inspect.getsource(" in src and "Code(" in src:
            namespace["Code"] = lambda text, language=None, _id=c["id"]: shown.__setitem__(_id, text)
            exec(src, namespace)
    return shown


def names(text: str) -> list[str]:
    return re.findall(r"^\s*(?:class|def) (\w+)", text, re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_displayed_source_mentions_a_later_chapter(path):
    ch = chapter(path)
    shown = displays(path)
    later = [(c, w) for c, words in CONCEPTS.items() if c > ch for w in words]
    found = []
    for cell, text in shown.items():
        for block in re.split(r"\n(?=class |def |@)", text):              # each top-level class or function
            name = (names(block) or ["?"])[0]
            for c, word in later:
                if re.search(word, block):
                    line = next(ln for ln in block.splitlines() if re.search(word, ln))
                    found.append(f"{cell}: {name} mentions chapter {c}'s {word!r}: {line.strip()}")
    assert found == []


def test_every_chapter_from_1_shows_the_package_source():
    counts = {chapter(p): len(displays(p)) for p in NOTEBOOKS}
    assert all(counts[c] > 0 for c in range(1, 12)), counts


def test_the_check_can_fail():
    """A later concept in a shown source is caught: the decoder with its cache, shown in chapter 3."""
    from musictx_lite.models.cache import DecoderWithCache

    text = inspect.getsource(DecoderWithCache)
    assert any(re.search(w, text) for w in CONCEPTS[10] + CONCEPTS[11])
    assert not any(re.search(w, inspect.getsource(__import__("musictx_lite.models.decoder",
                                                              fromlist=["Decoder"]).Decoder))
                   for w in CONCEPTS[10] + CONCEPTS[11])
