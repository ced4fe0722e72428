"""Export the shipped models for the book's pages, one command (``study.web``):

    python -m scripts.export_web --data PATH/Jsb16thSeparated.json [--out book/play]

writes ``relative.onnx``, ``harmoniser-encoder.onnx``, ``harmoniser-decoder.onnx``, ``chorales.json`` (the
held-out chorales' openings, the page's prompts) and ``models.json`` (the record) into ``book/play/``, and
checks each graph in ONNX Runtime against PyTorch on held-out chorales. Run it again whenever a shipped model
or the export code changes: ``tests/study/test_web.py`` fails while the export is stale. Needs the packages
onnx, onnxscript and onnxruntime (requirements.txt).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from pathlib import Path

from musictx_lite import load_jsb
from musictx_lite.study.web import WEB, export_web


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="jsb", help="'jsb' or a path to Jsb16thSeparated.json (the official split)")
    p.add_argument("--out", default=str(WEB), help="the folder of the page's files (default book/play)")
    a = p.parse_args(argv)
    data = load_jsb() if a.data == "jsb" else load_jsb(a.data)
    command = "python -m scripts.export_web " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = export_web(data, Path(a.out), command=command)
    for name, m in rec["models"].items():
        sizes = ", ".join(f"{g['file']} {g['bytes'] / 1e6:.2f} MB" for g in m["graphs"])
        print(f"{name}: {sizes}; ONNX Runtime against PyTorch: max |logit difference| {m['max_abs_logit_diff']:.2e}")
    print(f"wrote {a.out}/models.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
