"""Training on two CPU processes (gloo), as torchrun runs it: the same gradients as one process on the same
examples, exact resume after an interruption, and clear errors instead of hangs.

The workers run in processes that ``torch.multiprocessing.spawn`` starts; each joins a process group through
a file in the test's tmp_path, and sets the environment torchrun would set, so the package sees the same
thing as under ``torchrun --nproc_per_node 2``.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from musictx_lite import ModelConfig, build_model, load_chorales
from musictx_lite.engine import distributed
from musictx_lite.engine.training import TrainConfig, train
from musictx_lite.io.tokens import PAD
from musictx_lite.models.tasks import token_nll

ROOT = Path(__file__).resolve().parents[2]
CFG = ModelConfig(n_embd=32, n_heads=4, n_layers=2, context=32)
B = 8


def join(rank: int, size: int, tmp: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(size), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    Path(tmp).mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=size,
                            timeout=distributed.TIMEOUT)


def batch():
    """The B examples of the test: the same on every process."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(4, 50, (B, CFG.context), generator=g)
    y = torch.randint(4, 50, (B, CFG.context), generator=g)
    y[0, -5:] = PAD                                             # uneven token counts across ranks
    return x, y


def model():
    torch.manual_seed(0)
    return build_model("relative", CFG)


def gradients_worker(rank: int, size: int, tmp: str) -> None:
    join(rank, size, tmp)
    m = model()
    net = torch.nn.parallel.DistributedDataParallel(m)
    x, y = batch()
    half = slice(rank * B // size, (rank + 1) * B // size)
    n = (y != PAD).sum()                                        # the whole batch's targets, as train() counts them
    loss = token_nll(net, x[half], y[half]) / (n / size)
    loss.backward()
    if rank == 0:
        torch.save({k: p.grad for k, p in m.named_parameters()}, f"{tmp}/grads.pt")
    dist.destroy_process_group()


def test_two_processes_on_half_batches_give_the_gradients_of_one_on_the_batch(tmp_path):
    mp.spawn(gradients_worker, args=(2, str(tmp_path)), nprocs=2)
    two = torch.load(tmp_path / "grads.pt", weights_only=True)
    m = model()
    x, y = batch()
    (token_nll(m, x, y) / (y != PAD).sum()).backward()
    assert two.keys() == dict(m.named_parameters()).keys()
    for k, p in m.named_parameters():
        torch.testing.assert_close(two[k], p.grad, atol=1e-6, rtol=1e-5, msg=k)
    assert max(p.grad.abs().max() for p in m.parameters()) > 1e-3        # gradients that say something


TCFG = TrainConfig(batch_size=8, max_steps=6, lr=3e-3, warmup_steps=2, eval_every=3, ckpt_every=2,
                   eval_pieces=2, micro_batch=2)


class Stop(Exception):
    pass


def train_worker(rank: int, size: int, tmp: str, out: str, stop_at: int | None) -> None:
    join(rank, size, tmp)
    data = load_chorales()
    m = model()

    def on_step(step, loss):
        if step == stop_at:
            raise KeyboardInterrupt                             # Ctrl-C, on every rank at the same step

    try:
        hist = train(m, data, TCFG, out_dir=out, device="cpu", progress=False, on_step=on_step)
        if rank == 0:
            torch.save({"state": m.state_dict(), "loss": hist.train_loss, "nll": hist.valid_nll}, f"{out}/end.pt")
    except KeyboardInterrupt:
        pass
    finally:
        dist.destroy_process_group()


def test_an_interrupted_two_process_run_resumes_to_the_uninterrupted_weights(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    mp.spawn(train_worker, args=(2, str(tmp_path / "a"), str(whole), None), nprocs=2)
    mp.spawn(train_worker, args=(2, str(tmp_path / "b"), str(cut), 3), nprocs=2)    # stops after step 3
    ck = torch.load(cut / "ckpt.pt", weights_only=True)
    assert ck["step"] == 2 and ck["world"] == 2 and len(ck["rank_rngs"]) == 2          # the last checkpoint
    assert not (ck["rank_rngs"][0][1] == ck["rank_rngs"][1][1]).all()                  # each rank its own crops
    mp.spawn(train_worker, args=(2, str(tmp_path / "c"), str(cut), None), nprocs=2)   # resumes from step 2
    a, b = torch.load(whole / "end.pt", weights_only=True), torch.load(cut / "end.pt", weights_only=True)
    assert a["loss"] == b["loss"] and a["nll"] == b["nll"] and len(a["loss"]) == TCFG.max_steps
    for k in a["state"]:
        assert torch.equal(a["state"][k], b["state"][k]), k
    with pytest.raises(ValueError, match="written by 2 process"):            # resumed by one process
        train(model(), load_chorales(), TCFG, out_dir=cut, device="cpu", progress=False)


def disagree_worker(rank: int, size: int, tmp: str, what: str) -> None:
    join(rank, size, tmp)
    try:
        cfg = TCFG if what != "batch" else TrainConfig(**{**TCFG.__dict__, "batch_size": 7, "micro_batch": None})
        m = build_model("relative" if what != "model" or rank == 0 else "alibi", CFG)
        try:
            train(m, load_chorales(), cfg, device="cpu", progress=False)
        except ValueError as e:
            Path(tmp, f"error{rank}").write_text(str(e))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("what, message", [("model", "the ranks disagree about model_name"),
                                           ("batch", "does not split over 2 ranks")])
def test_a_mismatch_is_an_error_on_every_rank_not_a_hang(tmp_path, what, message):
    mp.spawn(disagree_worker, args=(2, str(tmp_path), what), nprocs=2)
    for rank in (0, 1):
        assert message in (tmp_path / f"error{rank}").read_text()


def test_torchrun_trains_from_the_command_line(tmp_path):
    """The launch the appendix shows: torchrun, two CPU processes, the package's own train command."""
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUSICTX_PROGRESS": "0"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        "--standalone", "-m", "musictx_lite", "train", "--model", "transformer",
                        "--profile", "smoke", "--steps", "4", "--batch-size", "8", "--micro-batch", "2",
                        "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("valid NLL:") == 1 and "2 ranks on cpu" in r.stdout    # rank 0 alone speaks
    ck = torch.load(out / "ckpt.pt", weights_only=True)
    assert ck["step"] == 4 and ck["world"] == 2 and ck["train_config"]["batch_size"] == 8


def test_the_appendix_table_is_the_measurement_it_names():
    """book/results/ddp-cpu.md is what scripts/bench_ddp.py wrote from the numbers in ddp-cpu.json."""
    import json

    rec = json.loads((ROOT / "book" / "results" / "ddp-cpu.json").read_text())
    md = (ROOT / "book" / "results" / "ddp-cpu.md").read_text()
    assert rec["command"].startswith("python -m scripts.bench_ddp") and len(rec["commit"]) >= 40
    assert [(r["processes"], r["threads"]) for r in rec["rows"]] == [(1, 1), (1, 2), (2, 1)]
    base = rec["rows"][0]["tokens_per_s"]
    for r in rec["rows"]:
        assert r["speedup"] == round(r["tokens_per_s"] / base, 2)
        assert f"| {r['processes']} | {r['threads']} | {r['tokens_per_s']:,} | {r['speedup']:.2f}x |" in md
    assert rec["commit"] in md and "{include} results/ddp-cpu.md" in (ROOT / "book" / "multi_gpu.md").read_text()
