"""Chapter 3 exercises: masking.

Notebook: notebooks/03_masking.ipynb
"""
from __future__ import annotations

import numpy as np
import torch

from musictx_lite.engine.profiles import get_profile
from musictx_lite.engine.training import train
from musictx_lite.io.data import Piece, Splits, load_data
from musictx_lite.models.attention import Head, attention, causal_mask
from musictx_lite.models.decoder import Decoder
from musictx_lite.models.positions import LearnedPositions
from musictx_lite.models.probes import future_effect, is_causal
from musictx_lite.models.registry import build_model
from musictx_lite.models.tasks import evaluate_nll, evaluate_prefix_nll

__all__ = ["exercise_3_1", "exercise_3_2"]


class PeekHead(Head):
    """A head whose query i may see the keys j <= i + 1: its own past and one token of the future."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        peek = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(1)        # j <= i + 1
        q, k, v = self.query(x), self.key(x), self.value(x)                       # (B, T, hs) each
        out, _ = attention(q, k, v, peek)                                         # (B, T, hs)
        return out


def exercise_3_1(data: Splits | None = None, profile: str | None = None, steps: int | None = None,
                 seed: int = 0) -> dict[str, tuple[float, float, float]]:
    """A softer leak: a model whose head sees one future token (j <= t + 1), against its masked twin.

    Both are chapter 3's `attention-positions` model (learned positions, one
    head, no blocks); only the mask differs. The perturbation probe finds the
    leak; then both train for ``steps`` steps (a fifth of the profile's by
    default) and are scored on their training loss, on whole validation
    sequences, and token by token from the prefix alone.
    """
    data = data or load_data()
    P = get_profile(profile)
    cfg = P.model_config("attention-positions")
    base = P.train_config("attention-positions")
    steps = steps or max(2, base.max_steps // 5)
    tcfg = P.train_config("attention-positions", max_steps=steps, eval_every=steps, seed=seed,
                          warmup_steps=base.warmup_steps * steps // base.max_steps)
    torch.manual_seed(seed)
    peek = Decoder(cfg, lambda c: PeekHead(c.n_embd, c.n_embd), LearnedPositions)
    torch.manual_seed(seed)
    masked = build_model("attention-positions", cfg)
    past, future = future_effect(peek)
    print(f"perturbation probe: the outputs up to t move by {past:.3f} when the tokens after t\n"
          f"change: {'not causal' if not is_causal(peek) else 'causal'}")
    few = data.valid[:4]
    short = [Piece(p.name, p.pitches[:32]) for p in few]                         # their first 128 tokens
    out = {}
    for name, model in (("sees t + 1", peek), ("masked", masked)):
        losses = []
        train(model, data, tcfg, progress=False, on_step=lambda step, loss: losses.append(loss))
        out[name] = (float(np.mean(losses[-10:])), evaluate_nll(model, short),
                     evaluate_prefix_nll(model, few, 128))
    print(f"{steps} training steps each; NLL in nats/token")
    print(f"{'':>11s} {'train loss':>10s} {'whole sequence':>15s} {'prefix only':>12s}")
    for name, (tl, whole, prefix) in out.items():
        print(f"{name:>11s} {tl:10.3f} {whole:15.3f} {prefix:12.3f}")
    (tl_p, whole_p, prefix_p), (tl_m, whole_m, prefix_m) = out["sees t + 1"], out["masked"]
    print(f"train loss, leaky minus masked: {tl_p - tl_m:+.3f}")
    print(f"prefix only minus whole sequence: leaky {prefix_p - whole_p:+.3f}, "
          f"masked {prefix_m - whole_m:+.3f}")
    if tl_p < tl_m and prefix_p > whole_p + 0.1:
        print("So the loss falls below the masked twin's: the next token is in the input, and the\n"
              "model learns to copy it. From the prefix alone, as at generation time, there is\n"
              "nothing to copy, and its NLL rises: one token of the future is a leak, as all of it was.")
    else:
        print(f"After {steps} steps the leak does not show yet in these numbers; train longer (steps=...).")
    return out


def renormalise(weights: torch.Tensor) -> torch.Tensor:
    """Exercise 3.2's repair: zero the future of softmax weights (..., T, T), then renormalise the rows."""
    zeroed = weights * causal_mask(weights.shape[-1], weights.device)
    return zeroed / zeroed.sum(-1, keepdim=True)


def exercise_3_2(T: int = 8, seed: int = 0) -> float:
    """Zeroing after the softmax breaks the sum to 1; renormalising recovers the masked weights."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(T, 4) for _ in range(3))
    full = attention(q, k, v)[1]
    zeroed = full * causal_mask(T)
    right = attention(q, k, v, causal_mask(T))[1]
    renorm = renormalise(full)
    assert torch.allclose(renorm, right, atol=1e-6)
    print("row sums after zeroing:", zeroed.sum(-1).numpy().round(3))
    print("renormalised == masked before the softmax:", torch.allclose(renorm, right, atol=1e-6))
    return float(zeroed.sum(-1).min())
