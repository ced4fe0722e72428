"""Relative attention's time and memory, and the paper's Table 1 measured; for chapters 8 and 9.

    python -m scripts.bench_relative [--lengths 1024 2048 4096 8192] [--max-gib GIB] [--device cpu]
                                     [--out musictx_lite/pretrained/bench-relative-cpu]

(--max-gib: 16 on a GPU, 4 on a CPU by default.)

1. ``bench attention`` at ``--lengths`` (width 128, 4 heads, batch 1; forward + backward of one
   layer; every implementation at a length one after the other, so the ratios are measured in one
   run), and the ratios the book reads from it.
2. The longest L at which one relative layer of the paper's sizes (D = 512, 8 heads of 64, batch 1)
   trains within ``--max-gib``: direct Shaw, the readable skew, the public code's way, the chunked
   skew. On a GPU the allocator is capped at that size; on a CPU the profiler's peak is compared with it.

3. Training tokens per second of the relative decoder at the recipe's size and context (the ``paper``
   profile's model, its batch), ``--train-steps`` steps on the embedded chorales, with each way of
   computing relative attention that runs on the device (``MUSICTX_RELATIVE``'s choices).

Writes ``OUT.json`` (the numbers and their provenance: command, commit, device, versions, date) and
``OUT.md`` (the tables the chapters show, through ``bench.measured``); both ship with the package.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from scripts import ROOT

TABLE = ["batched", "SDPA", "skew", "gwinndr-style", "SDPA + relative bias", "chunked, no S^rel", "chunked skew",
         "local skew", "direct Shaw"]
LONGEST = ["direct Shaw", "skew", "gwinndr-style", "chunked skew"]
PAPER = {"direct Shaw": 650, "skew": 3500}          # the Music Transformer's Table 1, one 16 GB GPU


def ratios(rows: list[dict]) -> dict:
    """The ratios issue 21 and chapters 8 and 9 read, each within one length of one run."""
    ms = {(r["impl"], r["L"]): r["ms"] for r in rows if r["fits"]}
    Ls = sorted({r["L"] for r in rows})
    out = {}
    for L in Ls:
        get = lambda n: ms.get((n, L), float("nan"))
        out[L] = {"chunked skew / SDPA": get("chunked skew") / get("SDPA"),
                  "gwinndr-style / SDPA": get("gwinndr-style") / get("SDPA"),
                  "gwinndr-style / chunked skew": get("gwinndr-style") / get("chunked skew"),
                  "skew / batched": get("skew") / get("batched"),
                  "chunked skew / batched": get("chunked skew") / get("batched"),
                  "chunked skew / chunked, no S^rel": get("chunked skew") / get("chunked, no S^rel"),
                  "local skew, us per token": 1000 * get("local skew") / L}
    per_token = [v["local skew, us per token"] for v in out.values()]
    out["local skew, spread of us per token"] = max(per_token) / min(per_token)
    return out


def train_speed(impl: str, steps: int, device: str) -> dict:
    """Training tokens/s of the ``relative`` model of the ``paper`` profile with relative attention computed
    by ``impl`` (evaluation left out), and its final training loss."""
    import torch

    from musictx_lite.engine.profiles import get_profile
    from musictx_lite.engine.training import train
    from musictx_lite.io.data import load_chorales
    from musictx_lite.models.registry import build_model
    from musictx_lite.models.relative_fast import RelativeGlobalAttention

    p = get_profile("paper")
    torch.manual_seed(0)
    model = build_model("relative", p.model_config("relative"))
    for m in model.modules():
        if isinstance(m, RelativeGlobalAttention):
            m.impl = impl
    cfg = p.train_config("relative", max_steps=steps, eval_every=10**6, ckpt_every=10**6, eval_pieces=1,
                         keep_best=False, patience=None)
    hist = train(model, load_chorales(), cfg, device=device, progress=False)
    return {"impl": impl, "steps": steps, "batch_size": cfg.batch_size, "context": model.cfg.context,
            "tokens_per_s": hist.tokens_per_s, "last_loss": hist.train_loss[-1]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_relative", description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-gib", type=float, default=None,
                    help="the memory allowance of the longest-L search (default: 16, the paper's GPU, on CUDA; "
                         "4 on a CPU, where the process needs room beyond the tensors it measures)")
    ap.add_argument("--start", type=int, default=256, help="the length the search starts from")
    ap.add_argument("--max-length", type=int, default=32768, help="the longest L the search tries")
    ap.add_argument("--train-steps", type=int, default=30, help="steps of each training-speed run")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="musictx_lite/pretrained/bench-relative-cpu")
    a = ap.parse_args(argv)
    import torch

    if a.max_gib is None:
        a.max_gib = 16.0 if torch.device(a.device).type == "cuda" else 4.0

    from musictx_lite.study.bench import bench_attention, format_table, longest_length
    from musictx_lite.study.hub import provenance

    t0 = time.perf_counter()
    rows = bench_attention(a.lengths, 128, 4, 1, a.repeats, a.device, TABLE, max_gib=8.0)
    table = format_table(rows)
    print(table, flush=True)
    rat = ratios(rows)
    longest = []
    for name in LONGEST:
        r = longest_length(name, a.max_gib, device=a.device, start=a.start, max_length=a.max_length)
        print(f"{name}: longest L {r['L']}{'+' if r['capped'] else ''} at {r['MiB']:,.0f} MiB", flush=True)
        longest.append(r)
    impls = ["skew", "chunked"] + (["flex"] if torch.device(a.device).type == "cuda" else [])
    speed = [train_speed(impl, a.train_steps, a.device) for impl in impls]
    for r in speed:
        print(f"training, {r['impl']}: {r['tokens_per_s']:,.0f} tokens/s", flush=True)
    rec = {**provenance(a.device), "command": " ".join(["python -m scripts.bench_relative", *(argv or sys.argv[1:])]),
           "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "seconds": round(time.perf_counter() - t0),
           "bench": {"n_embd": 128, "n_heads": 4, "batch": 1, "repeats": a.repeats, "rows": rows, "table": table},
           "ratios": {str(k): v for k, v in rat.items()},
           "longest": {"max_gib": a.max_gib, "n_embd": 512, "n_heads": 8, "batch": 1, "rows": longest,
                       "paper": PAPER},
           "train": speed}
    out = ROOT / a.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(rec) + "\n")
    print(markdown(rec))


def markdown(rec: dict) -> str:
    """The tables the chapters include, with the provenance above them."""
    b, lg = rec["bench"], rec["longest"]
    cpu = rec["device"].startswith("cpu")
    lines = [f"Measured by `{rec['command']}` at commit {rec['commit'][:12]} on {rec['device']}, "
             f"{rec['threads']} threads, torch {rec['torch']}, {rec['date']}.", "",
             f"**Forward + backward of one layer** (width {b['n_embd']}, {b['n_heads']} heads, batch {b['batch']}; "
             f"milliseconds, the best of {b['repeats']}; peak MiB):", ""]
    names = list(dict.fromkeys(r["impl"] for r in b["rows"]))
    Ls = sorted({r["L"] for r in b["rows"]})
    by = {(r["impl"], r["L"]): r for r in b["rows"]}
    lines += ["| implementation | " + " | ".join(f"L = {L:,}" for L in Ls) + " |", "|---" * (len(Ls) + 1) + "|"]
    for n in names:
        cells = [(f"{by[n, L]['ms']:,.0f} ms, {by[n, L]['MiB']:,.0f} MiB" if by[n, L]["fits"]
                  else f"not run ({by[n, L]['MiB']:,.0f} MiB predicted)") for L in Ls]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    rat = rec["ratios"]
    keys = [k for k in rat[str(Ls[0])] if k != "local skew, us per token"]
    lines += ["", "**Ratios**, each of two times at the same length in this run:", "",
              "| ratio | " + " | ".join(f"L = {L:,}" for L in Ls) + " |", "|---" * (len(Ls) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(f"{rat[str(L)][k]:.2f}" for L in Ls) + " |" for k in keys]
    lines.append("| local skew, µs per token | " + " | ".join(f"{rat[str(L)]['local skew, us per token']:.1f}"
                                                        for L in Ls) + " |")
    lines += ["", f"Local skew: the slowest length costs {rat['local skew, spread of us per token']:.2f}x the "
                  "fastest per token.", "",
              f"**The longest L that trains one layer of the paper's sizes** (D = {lg['n_embd']}, "
              f"{lg['n_heads']} heads "
              f"of {lg['n_embd'] // lg['n_heads']}, batch {lg['batch']}) within {lg['max_gib']:g} GiB"
              + (" of measured peak tensor memory, on a CPU" if cpu else f", the allocator capped on {rec['device']}")
              + ":", "", "| implementation | longest L | its peak | shortest L that did not fit | paper (16 GB GPU) |",
              "|---|---|---|---|---|"]
    for r in lg["rows"]:
        L = f"{r['L']:,}" + (f" or more (the search stopped there; growth predicts {r['predicted']:,})"
                             if r["capped"] else "")
        nxt = "-" if r["next"] is None else f"{r['next']:,}"
        lines.append(f"| {r['impl']} | {L} | {r['MiB']:,.0f} MiB | {nxt} | {lg['paper'].get(r['impl'], '-')} |")
    tr = rec["train"]
    base = next(r["tokens_per_s"] for r in tr if r["impl"] == "skew")
    lines += ["", f"**Training the relative decoder** of the recipe (the `paper` profile: context {tr[0]['context']}, "
                  f"batch {tr[0]['batch_size']}, {tr[0]['steps']} steps), by `MUSICTX_RELATIVE`:", "",
              "| relative attention | training tokens/s | against the readable skew |", "|---|---|---|"]
    lines += [f"| {r['impl']} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / base:.2f}x |" for r in tr]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
