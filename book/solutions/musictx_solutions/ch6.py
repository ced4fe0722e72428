"""Chapter 6 exercises: offsets as linear maps, a period-4 sinusoid, a voice embedding.

Notebook: notebooks/06_positions.ipynb
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from musictx_lite.models.blocks import block_decoder
from musictx_lite.models.config import ModelConfig
from musictx_lite.models.positions import sinusoids, voice_accuracy
from musictx_lite.models.registry import heads

__all__ = ["quarter_table", "VoicePositions", "exercise_6_1", "exercise_6_2", "exercise_6_3"]


def _offset_residual(P: torch.Tensor, k: int) -> float:
    """Relative residual of the least-squares fit P[t + k] ~ P[t] M over all t."""
    A, B = P[:-k].double(), P[k:].double()
    M = torch.linalg.lstsq(A, B).solution                               # (C, C)
    return ((A @ M - B).norm() / B.norm()).item()


def exercise_6_1(model: nn.Module, offsets=(1, 4, 16)) -> dict[str, list[float]]:
    """Fit P_{t+k} ~ P_t M_k for the sinusoidal and the trained learned table; print the residuals."""
    learned = model.positions.table.weight.detach().float().cpu()       # (L, C)
    L, C = learned.shape
    tables = {"sinusoidal": sinusoids(L, C), "learned": learned}
    res = {name: [_offset_residual(P, k) for k in offsets] for name, P in tables.items()}
    print("relative residual of the best linear map P[t + k] ~ P[t] M_k:")
    for name, r in res.items():
        print(f"  {name:>10s}: " + ", ".join(f"k={k}: {v:.1e}" for k, v in zip(offsets, r)))
    assert max(res["sinusoidal"]) < 1e-3                               # one exact rotation per k
    print("sinusoids: an exact linear map for every offset (a rotation);")
    worst = max(res["learned"])
    print(f"learned positions: {'approximately' if worst < 0.1 else 'not'} one linear map "
          f"(relative residual up to {worst:.2f})")
    return res


def quarter_table(L: int, C: int) -> torch.Tensor:
    """The sinusoid table (L, C) with a first pair that turns by pi/2 per token (period 4, one step),
    in place of the standard table's last (slowest) pair."""
    t = torch.arange(L, dtype=torch.float)[:, None]
    quarter = torch.cat([torch.sin(t * math.pi / 2), torch.cos(t * math.pi / 2)], dim=1)   # (L, 2)
    return torch.cat([quarter, sinusoids(L, C)[:, : C - 2]], dim=1)


def exercise_6_2(C: int = 64, L: int = 128) -> dict[str, float]:
    """The fastest standard pair has period 2 pi tokens; a pair turning by pi/2 has period 4."""
    period = 2 * math.pi / 1.0
    print(f"fastest standard pair: 1 radian per token, period {period:.2f} tokens; the others are slower,")
    print("so no pair of the standard table has period 4 (it would need pi/2 radians per token)")
    standard = sinusoids(L, C)
    with_voice = quarter_table(L, C)                                    # a pi/2 pair replaces the last one
    acc = {"standard": voice_accuracy(standard), "with a pi/2 pair": voice_accuracy(with_voice)}
    print("voice read off the position vector (linear probe, chance 0.25):")
    print("   ", {k: round(v, 2) for k, v in acc.items()})
    assert acc["with a pi/2 pair"] > 0.9 > 0.5 > acc["standard"]
    return acc


class VoicePositions(nn.Module):
    """x + V[(t - 1) mod 4]: one of four learned vectors, chosen by the voice of position t."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.voice = nn.Embedding(4, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[1], device=x.device)
        return x + self.voice((t - 1) % 4)                              # (B, T, C) + (T, C)


def exercise_6_3(C: int = 64, L: int = 128, seed: int = 0) -> dict[str, bool]:
    """A voice embedding: 4 C parameters instead of L C; with one block, shuffles within a voice are invisible."""
    cfg = ModelConfig(n_embd=C, n_heads=4, n_layers=1, context=L)
    torch.manual_seed(seed)
    model = block_decoder(cfg, heads, VoicePositions).eval()
    print(f"voice embedding: {4 * C:,} parameters; learned positions: {L * C:,}")
    idx = torch.randint(5, 50, (1, 21))                                 # BOS slot + 5 steps of 4 voices
    last = idx.shape[1] - 1
    same_voice = idx.clone()                                            # swap two earlier tokens of one voice
    same_voice[0, [2, 6]] = idx[0, [6, 2]]
    other_voice = idx.clone()                                           # swap tokens of two voices
    other_voice[0, [2, 3]] = idx[0, [3, 2]]
    with torch.no_grad():
        ref = model(idx)[0, last]
        found = {"swap within a voice": torch.allclose(model(same_voice)[0, last], ref, atol=1e-5),
                 "swap across voices": torch.allclose(model(other_voice)[0, last], ref, atol=1e-5)}
    for k, v in found.items():
        print(f"{k}: last prediction {'unchanged' if v else 'changes'}")
    assert found["swap within a voice"] and not found["swap across voices"]
    print("one block sees which voice each earlier token had, but not when:")
    print("the order within a voice is lost")
    return found
