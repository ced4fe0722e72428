"""Time the recipe's training steps on this machine's device, and scale them to a Colab T4.

    python -m scripts.time_recipe --steps 300 --out musictx_lite/pretrained/recipe-timing.json

For each model of the paper's table (``reproduce.JSB_MODELS``), trains ``--steps`` steps at the profile's
budget (``compare.budget``, as ``reproduce jsb`` does) on the official split, and measures the seconds per
step (evaluation excluded; the first steps' warm-up included, so the rate errs slow). From it: the minutes
the profile's whole budget takes on this device, a measurement scaled by steps; and, on a GPU whose peak is
in ``PEAK_TFLOPS``, two estimates for a T4: ``profiles.t4_minutes_from`` (this step as the fixed cost a T4
pays too, plus the arithmetic at a T4's speed), and those minutes times this GPU's peak over the T4's, which
treats the step as all arithmetic, an upper bound for a model this small. ``profiles.t4_minutes``, the cost
model, is printed beside them. Chapter 11 shows the file where the package ships it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# dense fp16/bf16 tensor-core peaks, TFLOP/s, from the vendors' data sheets (SXM parts for H100 and H200)
PEAK_TFLOPS = {"T4": 65, "L4": 121, "A10": 125, "V100": 125, "A100": 312, "H100": 989, "H200": 989}


def peak_of(device_name: str) -> float | None:
    """The peak of the GPU named ``device_name`` (as torch.cuda.get_device_name says it), or None."""
    words = device_name.upper().replace("-", " ").split()
    return next((v for k, v in sorted(PEAK_TFLOPS.items(), key=lambda kv: -len(kv[0])) if k in words), None)


def time_models(data, profile: str, steps: int, device=None) -> list[dict]:
    from musictx_lite.engine.profiles import t4_minutes
    from musictx_lite.study.compare import budget, train_compared
    from musictx_lite.study.reproduce import JSB_MODELS

    rows = []
    for name, _ in JSB_MODELS:
        hist = train_compared(name, data, profile, None, device, max_steps=steps, eval_every=steps,
                              ckpt_every=steps, eval_pieces=1, keep_best=False, patience=None)[1]
        full = budget(name, profile)[1].max_steps
        rows.append({"model": name, "steps": steps, "seconds": hist.seconds,
                     "s_per_step": hist.seconds / steps, "budget_steps": full,
                     "budget_minutes_here": hist.seconds / steps * full / 60,
                     "t4_minutes_cost_model": t4_minutes(name, profile)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="steps timed per model (default 300)")
    ap.add_argument("--profile", default="paper", help="the budget whose minutes are projected (default paper)")
    ap.add_argument("--data", default="jsb", help="'jsb' or a local Jsb16thSeparated.json")
    ap.add_argument("--out", required=True, type=Path, help="the timing file (.json)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")

    import torch

    from musictx_lite import load_jsb
    from musictx_lite.device import pick_device
    from musictx_lite.engine.profiles import T4_FLOPS, t4_minutes_from
    from musictx_lite.study.hub import _device_name, provenance

    device = pick_device()
    data = load_jsb() if args.data == "jsb" else load_jsb(args.data)
    name = _device_name(torch.device(device))
    peak = peak_of(name) if device.type == "cuda" else None
    rows = time_models(data, args.profile, args.steps, device)
    for r in rows:
        r["t4_minutes_scaled"] = r["budget_minutes_here"] * peak / PEAK_TFLOPS["T4"] if peak else None
        r["t4_minutes_from_step"] = t4_minutes_from(r["model"], r["s_per_step"], args.profile) if peak else None
        print(f"{r['model']:15s} {r['s_per_step'] * 1e3:7.1f} ms/step: {r['budget_steps']:,} steps take "
              f"{r['budget_minutes_here']:.1f} min here; T4 estimate: "
              + (f"{r['t4_minutes_from_step']:.0f} min from this step, {r['t4_minutes_scaled']:.0f} min scaled "
                 "by peak (all arithmetic: an upper bound), " if peak else "")
              + f"{r['t4_minutes_cost_model']:.0f} min by the cost model", flush=True)
    command = " ".join(["python -m scripts.time_recipe"] + (sys.argv[1:] if argv is None else argv))
    out = {**provenance(device), "command": command, "profile": args.profile, "peak_tflops": peak,
           "t4_peak_tflops": PEAK_TFLOPS["T4"],
           "t4_flops_cost_model": T4_FLOPS, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
