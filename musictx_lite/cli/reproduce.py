"""The paper's runs and the shipped models: ``reproduce`` (Table 2's rows on the official JSB split, with
distillation; the recipe's ablation), ``compare`` (chapter 11's comparison over seeds, into a results file or a
ledger that resumes anywhere) and ``export`` (a finished run as a shipped model). Notebook: book/using.md; chapter 11.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .args import PIANO_SAMPLE, _number, check_writable, default_device, jsb_data, positive_int


def add_reproduce(sub, o) -> argparse.ArgumentParser:
    """``reproduce``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..study.hub import NAMES as PRETRAINED

    r = sub.add_parser("reproduce", help="train absolute and relative decoders on the official JSB split and "
                                         "compare them with the Music Transformer paper",
                       parents=[o.profile, o.jsb, o.device, o.quiet, o.note])
    r.add_argument("what", choices=["jsb", "ablation"],
                   help="jsb: the paper's Table 2 rows; ablation: what each ingredient of the recipe buys")
    r.add_argument("--out", required=True,
                   help="directory: one run per model goes in it; an interrupted run is resumed")
    r.add_argument("--distil", type=_number(int, lambda v: v >= 2, "an integer >= 2"), default=None, metavar="N",
                   help="jsb: also train seeds 1..N-1 of each model and distil the N runs into one model of the "
                        "same size, which --export then ships (the recipe's last step, chapter 11)")
    r.add_argument("--models", nargs="+", choices=PRETRAINED, default=None,
                   metavar="NAME", help="train only these rows (default all three), e.g. one per process")
    r.add_argument("--seeds", type=positive_int, default=1, help="ablation: seeds per variant (default 1)")
    r.add_argument("--export", default=None, metavar="DIR",
                   help="write each trained model in float16 with its record into DIR "
                        "(musictx_lite/pretrained ships them: the 'paper' profile's models)")
    r.set_defaults(func=run_reproduce)
    return r


def add_compare(sub, o) -> argparse.ArgumentParser:
    """``compare``'s options; ``o``: the shared ones (``args.shared_options``)."""
    from ..study.compare import compared

    m = sub.add_parser("compare", help="train every compared model of chapter 11 over several seeds and write "
                                       "a results file (NLL per piece, for a bootstrap)",
                       parents=[o.profile, o.jsb, o.device, o.quiet, o.note])
    m.add_argument("--out", required=True, help="directory: one run per seed and model; an interrupted run resumes")
    m.add_argument("--seeds", type=positive_int, default=3, help="seeds per model (default 3)")
    m.add_argument("--steps", type=positive_int, default=None, help="override the budget's number of steps")
    m.add_argument("--models", nargs="+", choices=sorted(compared()), default=None, metavar="NAME",
                   help="models to train (default every compared one)")
    m.add_argument("--export", default=None, metavar="FILE.json", help="write the results file here")
    m.add_argument("--ledger", default=None, metavar="DIR",
                   help="a folder of finished runs, one file each: runs found there are taken, runs finished here "
                        "are added at once (a comparison longer than one machine's session, or split between "
                        "processes with --models)")
    m.add_argument("--claim", action="store_true",
                   help="share the --ledger's unfinished runs with other processes: each claims a run before it "
                        "trains it and skips those another holds (several processes on one GPU)")
    m.set_defaults(func=run_compare)
    return m


def add_export(sub, o) -> argparse.ArgumentParser:
    """``export``'s options; ``o``: the shared ones (``args.shared_options``)."""
    e = sub.add_parser("export", help="ship a finished run: its best weights in float16 and a record with "
                                      "its provenance and NLL (as reproduce --export); a piano model: "
                                      "--data piano:giantmidi", parents=[o.jsb, o.note])
    e.add_argument("run", help="a run directory written by 'train'")
    e.add_argument("--to", default="musictx_lite/pretrained", metavar="DIR",
                   help="where <model>.pt and <model>.json go (default musictx_lite/pretrained)")
    e.set_defaults(func=run_export)
    return e


def run_reproduce(a: argparse.Namespace) -> None:
    from .. import get_profile
    from ..study.hub import git_commit
    from ..study.reproduce import JSB_MODELS, format_table, reproduce_jsb

    check_writable(a.out, "--out", directory=True)
    device = a.device if a.device is not None else default_device()
    if a.what == "ablation":
        if a.distil is not None:
            raise ValueError("--distil belongs to reproduce jsb, not to the ablation")
        return _ablation(a, device)
    p = get_profile(a.profile)
    if a.export is not None:
        check_writable(a.export, "--export", directory=True)
    commit = git_commit()                                            # the code the runs start from
    data = jsb_data(a)      # sha256-checked: the official file only
    names = a.models or [name for name, _ in JSB_MODELS]
    print(f"profile {p.name}: {', '.join(names)}; data: {data.source}")
    print(f"checkpoints: {a.out}/<model> (a second run resumes them)")
    rows = reproduce_jsb(p, a.out, data, device, progress=not a.quiet, names=names)
    print(format_table(rows))
    if a.distil is not None:
        from ..study.reproduce import distil_jsb

        rows = distil_jsb(p, a.out, data, device, progress=not a.quiet, names=names, teachers=a.distil)
        print(f"distilled, each from {a.distil} runs of itself (seeds 0-{a.distil - 1}):")
        print(format_table(rows))
        for r in rows:
            print(f"{r['name']}: its teachers' mean predictions score {r['summary']['teachers_valid_nll']:.4f} "
                  f"on valid")
    if a.export is not None:
        from ..study.hub import export

        for r in rows:
            extra = {"commit": commit, **({"note": a.note} if a.note else {})}
            extra.update(r.get("summary", {}))                      # a distilled model: its teachers
            rec = export(r["model"], r["history"], r["train_config"], data, a.export, device=device,
                         extra=extra)
            print(f"exported {a.export}/{rec['file']} ({rec['bytes'] / 2**20:.1f} MiB, float16): "
                  f"valid {rec['valid_nll']:.4f}, test {rec['test_nll']:.4f}")


def run_export(a: argparse.Namespace) -> None:
    """``export``: a finished run as a shipped model (float16 weights and a record), as reproduce --export."""
    from ..checkpoint import read_checkpoint
    from ..study.hub import export_run

    read_checkpoint(a.run)                                          # a clear error before anything else
    check_writable(a.to, "--to", directory=True)
    extra = {"note": a.note} if a.note else {}
    if a.data.startswith(PIANO_SAMPLE):                             # chapter 13: the shared piano sample
        from ..io.corpus import ATTRIBUTION, load_piano_sample

        versions = tuple(v for v in a.data[len(PIANO_SAMPLE):].split(",") if v)
        data = load_piano_sample(versions)
        if set(versions) - {"giantmidi"}:
            raise ValueError("a shipped model trains on the CC BY transcriptions only (piano:giantmidi): "
                             "MAESTRO is non-commercial and the scores' licence is not stated")
        extra["attribution"] = ATTRIBUTION
    else:
        data = jsb_data(a)
    rec = export_run(a.run, data, a.to, extra=extra or None)
    print(f"exported {a.to}/{rec['file']} ({rec['bytes'] / 2**20:.1f} MiB, float16): "
          f"valid {rec['valid_nll']:.4f}, test {rec['test_nll']:.4f}"
          + (f"; its teachers' mean: valid {rec['teachers_valid_nll']:.4f}" if "teachers_valid_nll" in rec else ""))


def _check_results_path(path: str | None) -> None:
    if path is not None and not path.endswith(".json"):
        raise ValueError(f"--export names a .json results file, got {path}")


def _write_results(path: str, content: dict, device, commit: str) -> None:
    """A results file: ``content`` with its provenance (command, device, versions, date, and ``commit``, the
    one the run started from), atomically."""
    import json

    from ..files import atomic_write
    from ..study.hub import provenance

    out = {**provenance(device, commit), **content}
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(out, indent=1) + "\n"))
    print(f"wrote {path}")


def run_compare(a: argparse.Namespace) -> None:
    """``compare``: every compared model over several seeds at a profile's comparison budget; a results file."""
    from .. import get_profile
    from ..study.compare import code_fingerprint, compare_seeds, compared, format_seeds
    from ..study.hub import git_commit

    check_writable(a.out, "--out", directory=True)
    _check_results_path(a.export)
    device = a.device if a.device is not None else default_device()
    p = get_profile(a.profile)
    data = jsb_data(a)
    over = {"max_steps": a.steps} if a.steps is not None else {}
    commit = git_commit()                                        # the code this run starts from
    print(f"profile {p.name}: {len(a.models) if a.models else 'every compared'} model(s) x {a.seeds} seeds"
          + (f", {a.steps} steps" if a.steps else "") + f"; data: {data.source}")
    if a.ledger is not None:
        check_writable(a.ledger, "--ledger", directory=True)
        print(f"ledger: {a.ledger} (runs found there are taken, runs finished here are added)")
    if a.claim and a.ledger is None:
        raise ValueError("--claim shares the runs of a --ledger: name one")
    results = compare_seeds(data, p, range(a.seeds), a.models, a.out, device, progress=not a.quiet,
                            ledger=a.ledger, claims=a.claim, **over)
    print(format_seeds(results))
    missing = [f"{n} seed {s}" for n in a.models or compared() for s in range(a.seeds)
               if s not in {r["seed"] for r in results["models"].get(n, [])}]
    if missing:                                     # held by other processes (--claim)
        print(f"{len(missing)} run(s) held by other processes: {', '.join(missing)}")
        if a.export is not None:
            raise ValueError(f"not exported: {len(missing)} run(s) are not in the ledger yet; run the same "
                             f"command again when the other processes have finished")
    if a.export is not None:
        made = [r["made"] for runs in results["models"].values() for r in runs if "made" in r]
        for r in (r for runs in results["models"].values() for r in runs):
            r.pop("rekeyed", None)                  # the ledger's bookkeeping, not the run's
            if "made" in r:                         # each run keeps where, in what and when it trained
                r["made"] = {k: r["made"][k] for k in ("device", "precision", "date") if k in r["made"]}
        if made:                                    # where the ledger's runs were trained, and when
            results["ledger"] = {"runs": len(made), "code": code_fingerprint(),
                                 **{k: sorted({m[k] for m in made})
                                    for k in ("commit", "device", "torch", "precision")},
                                 "first": min(m["date"] for m in made), "last": max(m["date"] for m in made)}
        _write_results(a.export, {**({"note": a.note} if a.note else {}), **results}, device, commit)


def _ablation(a: argparse.Namespace, device) -> None:
    """``reproduce ablation``: what each ingredient of the recipe buys; with --export, a results file."""
    from ..engine.profiles import ABLATION_BUDGET
    from ..study.hub import git_commit
    from ..study.reproduce import ABLATION, ablation, format_ablation

    _check_results_path(a.export)
    data = jsb_data(a)
    seeds = list(range(a.seeds))
    commit = git_commit()
    print(f"ablation: relative attention, {len(ABLATION)} variants x {len(seeds)} seeds, "
          f"{ABLATION_BUDGET['max_steps']} steps each; data: {data.source}")
    rows = ablation(data, a.out, seeds, device=device, progress=not a.quiet)
    print(format_ablation(rows))
    if a.export is not None:
        _write_results(a.export, {"budget": ABLATION_BUDGET, "variants": ABLATION, "rows": rows}, device, commit)
