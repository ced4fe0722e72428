"""Training on several processes: ``torchrun`` and DistributedDataParallel.

Notebook: book/multi_gpu.md (the appendix after chapter 11).

``torchrun --nproc_per_node N -m musictx_lite train ...`` starts N copies of the
command, one per GPU (NCCL) or per CPU process (gloo), and tells each its rank
in the environment. ``setup`` joins them into one process group. ``train``
then sees the group and, with no other change to the loop:

- each rank draws its own crops, with a seed of its own (``rank_seed``), and takes
  ``batch_size / world`` of the global batch, in micro-batches if asked;
- ``DistributedDataParallel`` averages the gradients, so every rank takes the same step;
- only rank 0 evaluates, logs and writes checkpoints; the checkpoint holds every
  rank's random state, so a run resumes exactly, as a single process does.

Every rank checks that all ranks agree on the model, the configurations and the
world (``agree``) before the first step: a mismatch is a clear error on every
rank, never a hang.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .. import settings

TIMEOUT = timedelta(minutes=10)     # a collective that waits longer than this fails instead of hanging


@dataclass(frozen=True)
class World:
    """Where this process stands in the group: its rank, the number of ranks, and its rank on the machine."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the one that evaluates, logs and writes checkpoints."""
        return self.rank == 0

    # What ``train`` asks of the group. With one process each is the identity, so the loop is the same.
    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``model``, in DistributedDataParallel when there are several ranks: backward() then averages
        the gradients over the ranks."""
        if self.size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` summed over the ranks (in place)."""
        if self.size > 1:
            dist.all_reduce(t)
        return t

    def mean(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` averaged over the ranks."""
        return self.sum(t) / self.size

    def sync(self, net: torch.nn.Module, last: bool):
        """The context of one micro-batch's backward: the gradients are averaged over the ranks only after
        the last micro-batch of a step (DDP's ``no_sync`` before it)."""
        return net.no_sync() if self.size > 1 and not last else contextlib.nullcontext()

    def from_main(self, obj):
        """Rank 0's ``obj``, on every rank."""
        return from_main(obj) if self.size > 1 else obj

    def gather(self, obj) -> list:
        """``obj`` of every rank, in rank order, on every rank."""
        return gather(obj) if self.size > 1 else [obj]


def world() -> World:
    """This process's place: from the process group when there is one of more than one rank, else alone."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        env = settings.distributed()
        return World(dist.get_rank(), dist.get_world_size(), env[1] if env else 0)
    return World()


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s crops and dropout: rank 0 keeps ``seed``, so one process trains as before."""
    return seed + 7919 * rank


def setup(device: torch.device | None = None) -> tuple[World, torch.device] | None:
    """Join the process group that ``torchrun`` describes in the environment; None when not under torchrun
    (or with one process). NCCL with one GPU per rank where CUDA is there, else gloo on the CPU."""
    env = settings.distributed()
    if env is None or env[2] < 2:
        return None
    rank, local_rank, size = env
    cuda = torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda")
    if cuda:
        if local_rank >= torch.cuda.device_count():
            raise ValueError(f"rank {rank} needs GPU {local_rank}, but this machine has "
                             f"{torch.cuda.device_count()}: use --nproc_per_node {torch.cuda.device_count()}")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)
    return World(rank, size, local_rank), device


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def gather(obj) -> list:
    """``obj`` of every rank, in rank order, on every rank."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def from_main(obj):
    """Rank 0's ``obj``, on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def agree(what: dict) -> None:
    """Every rank must hold the same ``what`` (a dict of plain values); else a ValueError on every rank."""
    all_ = gather(what)
    for r, other in enumerate(all_):
        for key in what:
            if other.get(key) != all_[0].get(key):
                raise ValueError(f"the ranks disagree about {key}: rank 0 has {all_[0].get(key)!r}, "
                                 f"rank {r} has {other.get(key)!r}; start every rank with the same command")
