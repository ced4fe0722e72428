"""Chapter 5 exercises: blocks (RMSNorm, gradients through deep stacks, where the parameters are).

Notebook: notebooks/05_blocks.ipynb
"""
from __future__ import annotations

import textwrap

import torch
import torch.nn as nn

from musictx_lite.classroom.checks.ch5 import STORED_C, _inputs
from musictx_lite.io.data import Splits, load_data
from musictx_lite.models.blocks import LayerNorm
from musictx_lite.models.config import ModelConfig
from musictx_lite.models.registry import build_model, n_params
from musictx_lite.models.tasks import Crops, token_nll

__all__ = ["RMSNorm", "exercise_5_1", "exercise_5_2", "exercise_5_3"]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gamma, over the last (feature) axis: LayerNorm without the centring."""

    def __init__(self, C: int, eps: float = 1e-5):
        super().__init__()
        self.gamma, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)    # (B, T, 1)
        return x / rms * self.gamma


def exercise_5_1(C: int = 64, seed: int = 0) -> RMSNorm:
    """RMSNorm against LayerNorm: equal on centred tokens, different under a shift, half the parameters."""
    torch.manual_seed(seed)
    rms, ln = RMSNorm(C), LayerNorm(C)
    x = torch.randn(2, 5, C) * 3 + 1                                      # (B, T, C)
    y = rms(x)
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(2, 5), atol=1e-4)  # every token has RMS 1
    xc = x - x.mean(-1, keepdim=True)                                      # centred tokens
    assert torch.allclose(rms(xc), ln(xc), atol=1e-5)                      # there they agree
    shift = 10.0
    d_ln = (ln(x + shift) - ln(x)).abs().max().item()
    d_rms = (rms(x + shift) - rms(x)).abs().max().item()
    assert d_ln < 1e-4 < d_rms
    print("RMS of every output token: 1; on centred tokens RMSNorm == LayerNorm")
    print(f"adding {shift} to every feature changes LayerNorm's output by {d_ln:.1e}, RMSNorm's by {d_rms:.2f}")
    print(f"parameters per norm: LayerNorm {n_params(ln)} (gamma, beta), RMSNorm {n_params(rms)} (gamma)")
    return rms


def exercise_5_2(n_layers: int = 12, data: Splits | None = None, C: int = 64, seed: int = 0) -> dict[str, list[float]]:
    """Gradient norm of each block's parameters at initialisation, pre-LN against post-LN."""
    data = data or load_data()
    cfg = ModelConfig(n_embd=C, n_heads=4, n_layers=n_layers, context=64)
    x, y = Crops(data.train, cfg.context, seed).batch(16)              # (B, T) each
    out = {}
    for name, pre_ln in (("pre-LN", True), ("post-LN", False)):
        torch.manual_seed(seed)
        model = build_model("transformer" if pre_ln else "transformer-post-ln", cfg)
        loss = token_nll(model, x, y) / (y != 0).sum()
        loss.backward()
        out[name] = [torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in model.blocks]
    print("block:  " + " ".join(f"{i:5d}" for i in range(1, n_layers + 1)))
    for name, g in out.items():
        print(f"{name:7s} " + " ".join(f"{v:5.3f}" for v in g))
    ratio = {name: g[-1] / g[0] for name, g in out.items()}
    print(f"last block / first block: pre-LN {ratio['pre-LN']:.2f}, post-LN {ratio['post-LN']:.2f}.")
    if ratio["post-LN"] > 1 > ratio["pre-LN"]:
        print("As Xiong et al. (2020) show, at initialisation post-LN's gradients grow towards the\n"
              "output, so a large learning rate hits its top blocks hardest; pre-LN's do not grow. In\n"
              "the chapter's stacks post-LN's ratio rose from 3 blocks to 8, which were also half as\n"
              f"wide; here the width stays C = {C} at every depth, so only the depth changes.")
    return out


def exercise_5_3(widths=(64, 192, 512), n_layers: int = 4, vocab_size: int = 54) -> dict[int, dict[str, float]]:
    """Where are the parameters? Shares of attention, feed-forward, norms and embedding + read-out."""
    out = {}
    print(f"{n_layers} blocks, vocabulary {vocab_size}")
    print("    C   attention  feed-forward  LayerNorms  embed+readout  total")
    for C in widths:
        m = build_model("transformer", ModelConfig(n_embd=C, n_heads=4, n_layers=n_layers, vocab_size=vocab_size))
        parts = {
            "attention": sum(n_params(b.mixer) for b in m.blocks),
            "feed-forward": sum(n_params(b.ff) for b in m.blocks),
            "LayerNorms": sum(n_params(b.ln1) + n_params(b.ln2) for b in m.blocks) + n_params(m.ln_f),
            "embed+readout": n_params(m.tok_emb) + n_params(m.readout),
        }
        total = n_params(m)
        assert sum(parts.values()) == total
        assert (parts["feed-forward"] == n_layers * (8 * C * C + 5 * C)
                and parts["attention"] == n_layers * (4 * C * C + C))
        out[C] = {k: v / total for k, v in parts.items()}
        print(f"{C:5d}   " + "  ".join(f"{out[C][k]:10.1%}" for k in parts) + f"  {total:10,d}")
    print("Inside a block the feed-forward holds 8C^2 of the 12C^2 weights: two thirds, any width.")
    # why the embedding and read-out shrink: they hold about 2VC weights, the blocks about 12 L C^2, so their
    # share is about 1 / (1 + 6 L C / V): it falls as C grows
    approx = {C: 1 / (1 + 6 * n_layers * C / vocab_size) for C in widths}
    print(textwrap.fill(
        f"Why the last share shrinks: the embedding and the read-out hold V x C weights each (V = {vocab_size}), "
        f"so they grow with C, while the blocks grow with C^2. Their share is about 2VC / (2VC + 12LC^2) = "
        f"1 / (1 + 6LC/V), which falls as the width grows: " + ", ".join(f"{approx[C]:.1%} at C = {C}" for C in widths)
        + " (measured: " + ", ".join(f"{out[C]['embed+readout']:.1%}" for C in widths) + ").", 88))
    for C in widths:
        assert abs(approx[C] - out[C]["embed+readout"]) < 0.01     # the formula explains the shares
    return out


def expected() -> dict:
    """What ``check_5_1`` compares with (``musictx_solutions.expected``): the scale 1 / sqrt(mean(x^2) + eps) that
    the reference RMSNorm(16) gives every token of the checker's inputs (its output with gamma = 1, over x)."""
    norm = RMSNorm(STORED_C)
    _, xs = _inputs(STORED_C, torch.Generator().manual_seed(0))
    with torch.no_grad():
        scales = [((norm(x) * x).sum(-1) / (x * x).sum(-1)).tolist() for x in xs]   # (...,): y = scale * x
    return {"scales": scales}
