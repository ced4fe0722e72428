"""The self-checks for the exercises (musictx_lite/classroom/checkers.py and each chapter's exercises module):
every reference solution passes, and planted wrong answers fail with a line that names the problem, never with
an exception."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import VIRTUAL_DEVICE  # noqa: E402
from musictx_solutions import ch1, ch3, ch4, ch5, ch6, ch8, ch9, ch10, ch11, ch12, ch13
from virtual_device import VirtualDevice  # tests/virtual_device.py

from musictx_lite import ModelConfig, build_model
from musictx_lite.classroom import checkers
from musictx_lite.classroom.checkers import CHECKERS, checkers_for
from musictx_lite.models.attention import CausalHead, Head, MultiHeadAttention, attention, causal_mask
from musictx_lite.models.fnet import causal_fft_conv
from musictx_lite.models.positions import LearnedPositions, sinusoids
from musictx_lite.models.relative import skew

# the exercises whose text asks for a function or a module
WITH_CODE = ["1.1", "3.1", "3.2", "4.1", "4.2", "5.1", "6.2", "6.3", "8.1", "9.1", "9.2", "9.3", "10.1", "10.2", "10.3",
             "11.1", "11.2", "12.1", "12.2", "12.3", "13.1", "13.2", "13.3"]


def run(capsys, key: str, *args, **kwargs) -> tuple[bool, str]:
    """Run checker ``key``; return its result and what it printed."""
    ok = CHECKERS[key](*args, **kwargs)
    return ok, capsys.readouterr().out


# ----------------------------------------------------------------------------- correct answers

REFERENCES = {
    "1.1": (ch1.AdditiveAttention,), "3.1": (ch3.PeekHead,), "3.2": (ch3.renormalise,), "4.1": (ch4.mha_einsum,),
    "4.2": (ch4.GroupedQueryAttention,), "5.1": (ch5.RMSNorm,), "6.2": (ch6.quarter_table,),
    "6.3": (ch6.VoicePositions,),
    "8.1": (skew, ch8.skew_unmasked), "9.1": (ch9.keys_per_query,), "9.2": (ch9.reach,), "9.3": (ch9.my_skew_local,),
    "10.1": (ch10.fourier_by_matmul,), "10.2": (ch10.fft_conv_n,), "10.3": (ch10.cached_logits,),
    "11.1": (ch11.unpaired_bootstrap,), "11.2": (ch11.fit_cost, ch11.predicted_speedup),
    "12.1": (ch12.cross_attention,), "12.2": (ch12.harmonise_greedy,), "12.3": (ch12.future_moves,),
    "13.1": (ch13.time_shifts,), "13.2": (ch13.sustain,), "13.3": (ch13.transpose_events,),
}


def test_checkers_cover_exactly_the_exercises_that_ask_for_code():
    assert sorted(CHECKERS, key=lambda k: tuple(map(int, k.split(".")))) == WITH_CODE
    assert sorted(REFERENCES) == sorted(WITH_CODE)
    for key, fn in CHECKERS.items():
        assert fn.__name__ == "check_" + key.replace(".", "_") and fn.__doc__.startswith(f"Exercise {key}:")
        assert getattr(checkers, fn.__name__) is fn and fn.__name__ in checkers.__all__


def test_checkers_for_a_chapter():
    assert checkers_for(9) == ["check_9_1", "check_9_2", "check_9_3"]
    assert checkers_for(10) == ["check_10_1", "check_10_2", "check_10_3"]
    assert checkers_for(0) == [] and checkers_for(7) == []
    assert checkers_for(12) == ["check_12_1", "check_12_2", "check_12_3"]
    assert checkers_for(13) == ["check_13_1", "check_13_2", "check_13_3"]
    assert sum(len(checkers_for(c)) for c in range(14)) == len(CHECKERS)
    for bad in (14, -1, "5", 5.0):
        with pytest.raises(ValueError, match="chapter must be an integer from 0 to 13"):
            checkers_for(bad)


@pytest.mark.parametrize("key", WITH_CODE)
def test_the_reference_solution_passes(capsys, key):
    ok, out = run(capsys, key, *REFERENCES[key])
    assert ok is True
    name = "check_" + key.replace(".", "_")
    assert out.startswith(f"{name}: pass (") and out.count("\n") == 1, out


def test_reference_details_in_the_pass_line(capsys):
    assert "equals the reference AdditiveAttention" in run(capsys, "1.1", ch1.AdditiveAttention)[1]
    assert "n_groups = n_heads equals MultiHeadAttention" in run(capsys, "4.2", ch4.GroupedQueryAttention)[1]
    assert "not causal" in run(capsys, "3.1", ch3.PeekHead)[1]
    assert "unmasked" not in run(capsys, "8.1", skew)[1]                   # the second function is optional
    assert "speed-up" not in run(capsys, "11.2", ch11.fit_cost)[1]


# ----------------------------------------------------------------------------- planted mistakes

class NoMask(ch1.AdditiveAttention):
    def forward(self, h):
        e = self.v(torch.tanh(self.W1(h)[:, :, None] + self.W2(h)[:, None, :])).squeeze(-1)
        a = F.softmax(e, dim=-1)
        return a @ h, a


class ColumnSoftmax(ch1.AdditiveAttention):
    def forward(self, h):
        e = self.v(torch.tanh(self.W1(h)[:, :, None] + self.W2(h)[:, None, :])).squeeze(-1)
        a = F.softmax(e.masked_fill(~causal_mask(h.shape[1]), float("-inf")), dim=-2)
        return a @ h, a


class NoTanh(ch1.AdditiveAttention):
    def forward(self, h):
        e = self.v(self.W1(h)[:, :, None] + self.W2(h)[:, None, :]).squeeze(-1)
        a = F.softmax(e.masked_fill(~causal_mask(h.shape[1]), float("-inf")), dim=-1)
        return a @ h, a


class ContextsOnly(ch1.AdditiveAttention):
    def forward(self, h):
        return super().forward(h)[0]


class Raises(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.w = nn.Linear(16, 16)

    def forward(self, x, *args):
        raise RuntimeError("a bug in my forward")


class TwoAhead(Head):
    def forward(self, x):
        T = x.shape[1]
        out, _ = attention(self.query(x), self.key(x), self.value(x), torch.ones(T, T, dtype=torch.bool).tril(2))
        return out


class GQANoMask(ch4.GroupedQueryAttention):
    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.hs).transpose(1, 2)
        k, v = (t.view(B, T, self.n_groups, self.hs).transpose(1, 2).repeat_interleave(self.n_heads // self.n_groups, 1)
                for t in self.kv(x).split(self.n_groups * self.hs, dim=-1))
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C))


class GQANoScale(ch4.GroupedQueryAttention):
    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.hs).transpose(1, 2)
        k, v = (t.view(B, T, self.n_groups, self.hs).transpose(1, 2).repeat_interleave(self.n_heads // self.n_groups, 1)
                for t in self.kv(x).split(self.n_groups * self.hs, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class GQAUnshared(nn.Module):
    """Computes K and V for every head and keeps only n_groups of them: no parameters saved."""

    def __init__(self, cfg, n_groups):
        super().__init__()
        self.mha, self.n_groups = MultiHeadAttention(cfg), n_groups

    def forward(self, x):
        return self.mha(x)


class CentredNorm(nn.Module):
    """LayerNorm with gamma only."""

    def __init__(self, C):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gamma)


class NoSqrt(ch5.RMSNorm):
    def forward(self, x):
        return x / (x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gamma


class PeriodThree(ch6.VoicePositions):
    def forward(self, x):
        return x + self.voice(torch.arange(x.shape[1]) % 3)


class Scales(ch6.VoicePositions):
    def forward(self, x):
        return x * self.voice((torch.arange(x.shape[1]) - 1) % 4)


def _skew_right(rel):
    L = rel.shape[-1]
    return F.pad(rel, (0, 1)).reshape(L + 1, L)[1:]


def _skew_keeps_row_0(rel):
    L = rel.shape[-1]
    return F.pad(rel, (1, 0)).reshape(L + 1, L)


def _keys_no_clamp(L, N=None):
    i = torch.arange(L)
    return i + 1 if N is None else i - (i // N - 1) * N + 1


def _reach_one_short(T, N, n):
    return ch9.reach(T, N, n - 1) if n > 1 else torch.eye(T, dtype=torch.bool)


def _skew_local_unbatched(rel):
    N = rel.shape[-2]
    x = F.pad(F.pad(rel, (0, 1)).flatten(), (0, N - 1)).reshape(N + 1, 2 * N - 1)
    return x[:N, N - 1:]


def _fourier_sequence_only(x):
    T = x.shape[-2]
    a = 2 * math.pi * torch.outer(torch.arange(T), torch.arange(T)).double() / T
    return torch.cos(a).to(x.dtype) @ x


def _fourier_plus(x):
    def cs(n):
        a = 2 * math.pi * torch.outer(torch.arange(n), torch.arange(n)).double() / n
        return torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype)
    (cT, sT), (cC, sC) = cs(x.shape[-2]), cs(x.shape[-1])
    return cT @ x @ cC + sT @ x @ sC


def _conv_no_padding(u, h, n):
    T = u.shape[1]
    y = torch.fft.irfft(torch.fft.rfft(u.transpose(1, 2)) * torch.fft.rfft(h, n=T), n=T)
    return y.transpose(1, 2)


def _cached_without_cache(model, tokens, prefill=1):
    with torch.no_grad():
        full = [model(tokens[None, :prefill])[0]]
        full += [model(tokens[None, : t + 1])[0, -1:] for t in range(prefill, len(tokens))]
    return torch.cat(full)


def _cached_without_final_norm(model, tokens, prefill=1):
    caches = [block.mixer.new_cache() for block in model.blocks]
    out = []
    with torch.no_grad():
        for a, b in [(0, prefill)] + [(t, t + 1) for t in range(prefill, len(tokens))]:
            x = model.tok_emb(tokens[None, a:b])
            for block, cache in zip(model.blocks, caches):
                x = x + block.mixer(block.ln1(x), cache=cache)
                x = x + block.ff(block.ln2(x))
            out.append(model.readout(x)[0])
    return torch.cat(out)


def _bootstrap_paired_other_draws(a, b, counts, n=2000, seed=0):
    rng = np.random.default_rng(seed + 1)
    idx = rng.integers(0, len(counts), (n, len(counts)))
    lo, hi = np.quantile((a[idx] - b[idx]).sum(1) / counts[idx].sum(1), [0.025, 0.975])
    return (a - b).sum() / counts.sum(), lo, hi


def _bootstrap_unweighted(a, b, counts, n=2000, seed=0):
    _, lo, hi = ch11.unpaired_bootstrap(a, b, counts, n, seed)
    return float(((a - b) / counts).mean()), lo, hi


def _bootstrap_unseeded(a, b, counts, n=2000, seed=0):
    return ch11.unpaired_bootstrap(a, b, counts, n, seed=None)


def _fit_polyfit_order(rows, mode, degree):
    coef = np.polyfit([r["t"] for r in rows], [r[mode] for r in rows], degree)
    return tuple(np.pad(coef, (0, 3 - len(coef))))


def _speedup_from_zero(cached, reencoded, n):
    t = np.arange(n)
    return sum(reencoded[k] * (t ** k).sum() for k in range(3)) / sum(cached[k] * (t ** k).sum() for k in range(3))


def _cross_causal(x, memory, Wq, Wk, Wv, n_heads):
    (B, T, C), S = x.shape, memory.shape[1]
    hs = C // n_heads
    q = (x @ Wq).view(B, T, n_heads, hs).transpose(1, 2)
    k, v = ((memory @ W).view(B, S, n_heads, hs).transpose(1, 2) for W in (Wk, Wv))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(hs)).masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(),
                                                                  float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)


def _cross_keys_from_x(x, memory, Wq, Wk, Wv, n_heads):
    return ch12.cross_attention(x, x, Wq, Wk, Wv, n_heads)


def _cross_queries_from_memory(x, memory, Wq, Wk, Wv, n_heads):
    return ch12.cross_attention(memory, x, Wq, Wk, Wv, n_heads)


@torch.no_grad()
def _greedy(model, soprano, ban=(0, 1, 3, 4), force=True):
    idx = torch.tensor([[1]])                                               # BOS
    for i in range(4 * len(soprano)):
        logits = model(idx)[0, -1]
        logits[list(ban)] = float("-inf")
        nxt = soprano[i // 4].view(1, 1) if force and i % 4 == 0 else logits.argmax().view(1, 1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx[0]


def _greedy_overwritten(model, soprano):
    out = _greedy(model, soprano, force=False)
    out[1::4] = soprano
    return out


@torch.no_grad()
def _greedy_sampled(model, soprano):
    torch.manual_seed(0)
    idx = torch.tensor([[1]])
    for i in range(4 * len(soprano)):
        logits = model(idx)[0, -1]
        logits[[0, 1, 3, 4]] = float("-inf")
        nxt = soprano[i // 4].view(1, 1) if i % 4 == 0 else torch.multinomial(logits.softmax(-1), 1).view(1, 1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx[0]


def _moved(model, tokens, t, fixed_memory=True, steps=None, upto=0):
    x, p = tokens[None], 4 * (t + 1) + 1
    x2 = x.clone()
    x2[:, p::4] += (x2[:, p::4] >= 5).long()
    with torch.no_grad():
        m, m2 = model.encode(x[:, 1::4]), model.encode(x2[:, 1::4])
        y2 = model(x2, melody=x[:, 1::4]) if fixed_memory else model(x2)
        enc = (m2 - m)[:, : (t + 1 if steps is None else steps)].abs().max().item()
        return enc, (y2 - model(x))[:, : p + upto].abs().max().item()


def _transpose_in_place(tokens, shift):
    tokens[(tokens >= 2) & (tokens < 258)] += shift
    return tokens


def _raise(*args, **kwargs):
    raise ValueError("not written yet")


PLANTED = [
    ("1.1", (NoMask,), "not causal"),
    ("1.1", (ColumnSoftmax,), "rows do not sum to 1"),
    ("1.1", (NoTanh,), "differs from the reference AdditiveAttention with the same seeded weights by"),
    ("1.1", (ContextsOnly,), "should return (contexts, weights), got Tensor"),
    ("1.1", (Raises,), "your module raised RuntimeError: a bug in my forward"),
    ("3.1", (CausalHead,), "does not see t + 1"),
    ("3.1", (Head,), "sees more than one token of the future"),
    ("3.1", (TwoAhead,), "output 0 depends on input 2 = 0 + 2"),
    ("3.2", (lambda w: w * torch.ones_like(w).tril(),), "rows do not sum to 1"),
    ("3.2", (lambda w: (w * w.new_ones(w.shape).tril(1)) / (w * w.new_ones(w.shape).tril(1)).sum(-1, keepdim=True),),
     "not causal"),
    ("3.2", (_raise,), "your function raised ValueError: not written yet"),
    ("4.1", (lambda mha, x: ch4.mha_einsum(mha, x, scale=False),),
     "differs from MultiHeadAttention's forward by"),
    ("4.1", (lambda mha, x: ch4.mha_einsum(mha, x, scale=False),),
     "it matches attention without the 1/sqrt(head size)"),
    ("4.1", (lambda mha, x: ch4.mha_einsum(mha, x, mask=False),), "it matches attention without the causal mask"),
    ("4.2", (GQANoMask,), "not causal with n_groups = 4"),
    ("4.2", (GQANoScale,), "differs from MultiHeadAttention by"),
    ("4.2", (GQAUnshared,), "sharing should save the 2 (n_heads - n_groups) head_size C = 1,024 weights"),
    ("4.2", (ch4.GroupedQueryAttention(ModelConfig(n_embd=32, n_heads=4), 2),), "pass your class itself"),
    ("5.1", (nn.LayerNorm,), "(gamma and beta: that is LayerNorm's)"),
    ("5.1", (CentredNorm,), "it subtracts the mean, as LayerNorm does"),
    ("5.1", (NoSqrt,), "differs from the reference RMSNorm by"),
    ("5.1", (NoSqrt,), "it matches x / mean(x^2): no square root"),
    ("5.1", (Raises(),), "your module has 272 parameters"),
    ("5.1", (42,), "expected your nn.Module class or an instance of it, got int"),
    ("6.2", (lambda L, C: sinusoids(L, C),), "it is the standard table"),
    ("6.2", (lambda L, C: ch6.quarter_table(L, C).T,), "has shape (64, 128), expected (128, 64)"),
    ("6.2", (lambda L, C: ch6.quarter_table(L, C) * 2,), "sines and cosines stay within [-1, 1]"),
    ("6.3", (LearnedPositions,), "(one per position: that is learned positions)"),
    ("6.3", (PeriodThree,), "not periodic with period 4"),
    ("6.3", (Scales,), "output minus input depends on the input"),
    ("8.1", (_skew_right,), "differs from relative_logits_direct on the entries j <= i by"),
    ("8.1", (_skew_keeps_row_0,), "for L = 1, your S has shape (2, 1), expected (1, 1)"),
    ("8.1", (skew, lambda rel: rel[:, : rel.shape[0]]), "the unmasked skew differs from rel[i, L - 1 + j - i]"),
    ("9.1", (_keys_no_clamp,), "keys_per_query(1, 4): query 0 sees 1 keys, you say 5"),
    ("9.1", (lambda L, N=None: torch.arange(L),), "keys_per_query(1): query 0 sees 1 keys, you say 0"),
    ("9.2", (_reach_one_short,), "yours says the opposite"),
    ("9.3", (_skew_local_unbatched,), "your function on rel of shape (2, 6, 11) raised RuntimeError"),
    ("10.1", (_fourier_sequence_only,), "it matches the DFT over the sequence axis only"),
    ("10.1", (_fourier_plus,), "differs from fft2(x, dim=(-2, -1)).real by"),
    ("10.1", (lambda x: torch.fft.fft2(x).real,), "your function calls torch.fft.fft2"),
    ("10.1", (lambda x: torch.fft.fft2(x, dim=(0, 1)).real,), "it matches fft2 over the batch and sequence axes"),
    ("10.1", (lambda x: torch.fft.fft2(x),), "is complex, expected real numbers"),
    ("10.2", (lambda u, h, n: causal_fft_conv(u, h),), "is n used as the FFT length?"),
    ("10.2", (_conv_no_padding,), "with n = 31 (T = 16, K = 16) the output differs from causal_conv_direct by"),
    ("10.2", (lambda u, h: causal_fft_conv(u, h),), "your function with n = 31 raised TypeError"),
    ("10.3", (_cached_without_cache,), "the mixer of block 0 got [1, 2, 3, 4, 5, 6, 7, 8, ...] tokens per call"),
    ("10.3", (_cached_without_final_norm,), "the logit matrix differs from one full call of the model by"),
    ("11.1", (ch11.paired_bootstrap,), "is the paired bootstrap's"),
    ("11.1", (_bootstrap_paired_other_draws,), "is as narrow as the paired bootstrap's"),
    ("11.1", (_bootstrap_unweighted,), "it matches the unweighted mean"),
    ("11.1", (_bootstrap_unseeded,), "two calls with seed=0 give different intervals"),
    ("11.2", (_fit_polyfit_order,), "highest power first: reverse it"),
    ("11.2", (ch11.fit_cost, _speedup_from_zero), "it matches a sum over t = 0 .. n - 1"),
    ("11.2", (_raise,), "fit(rows, 'cached', 1) raised ValueError: not written yet"),
    ("12.1", (_cross_causal,), "it matches a causal mask"),
    ("12.1", (_cross_keys_from_x,), "it matches keys and values from x, not from the memory"),
    ("12.1", (_cross_queries_from_memory,), "the output has shape (2, 5, 8), the memory's: the queries come from x"),
    ("12.1", (lambda x, m, Wq, Wk, Wv, nh: ch12.cross_attention(x, m, Wq, Wk, Wv, 1),),
     "it matches one head as wide as the model: n_heads unused"),
    ("12.2", (lambda model, soprano: _greedy(model, soprano, ban=()),), "which generate never samples"),
    ("12.2", (_greedy_overwritten,), "force each soprano token before the model writes the voices under it"),
    ("12.2", (_greedy_sampled,), "(the argmax given the tokens before it, as generate(top_k=1) picks)"),
    ("12.2", (lambda model, soprano: _greedy(model, soprano, force=False),), "force every soprano token"),
    ("12.2", (lambda model, soprano: ch12.harmonise_greedy(model, soprano)[1:],), "without BOS"),
    ("12.3", (lambda model, tokens, t: _moved(model, tokens, t, fixed_memory=False),),
     "it matches the full model, whose memory follows the new melody"),
    ("12.3", (lambda model, tokens, t: _moved(model, tokens, t, steps=99),),
     "it matches the encoder's outputs of every step, the changed ones too"),
    ("12.3", (lambda model, tokens, t: _moved(model, tokens, t, upto=1),), "position p the changed token itself"),
    ("12.3", (lambda model, tokens, t: (0.0, 0.0),), "with t = 4 your encoder number is 0, the encoder's outputs"),
    ("12.3", (_raise,), "your probe with t = 4 raised ValueError: not written yet"),
    ("13.1", (lambda ticks: ch13.time_shifts(ticks)[::-1],), "(it matches the rest first, then the full seconds)"),
    ("13.1", (lambda ticks: [t + 1 for t in ch13.time_shifts(ticks)],), "(it matches TIME_SHIFT + n"),
    ("13.1", (_raise,), "time_shifts(0) raised ValueError: not written yet"),
    ("13.2", (lambda notes, pedal: ch13.sustain(notes, []),), "(it matches the pedal ignored)"),
    ("13.2", (lambda notes, pedal: ch13._sustain_variant(notes, pedal, restrike=False),), "(it matches no re-strike"),
    ("13.3", (lambda tokens, shift: torch.where(tokens >= 2, tokens + shift, tokens),),
     "time shifts and velocities too)"),
    ("13.3", (_transpose_in_place,), "your function changed the tensor it was given"),
]


@pytest.mark.parametrize("key, args, problem", PLANTED, ids=[f"{k}-{p[:30]}" for k, _, p in PLANTED])
def test_a_planted_mistake_fails_with_a_useful_line(capsys, key, args, problem):
    ok, out = run(capsys, key, *args)
    assert ok is False
    name = "check_" + key.replace(".", "_")
    assert out.startswith(f"{name}: fail: ") and problem in out.splitlines()[0], out
    assert len(out.splitlines()) <= 2


def test_every_checker_has_a_planted_mistake():
    assert sorted({key for key, _, _ in PLANTED}) == sorted(WITH_CODE)


def test_an_exception_in_student_code_says_where(capsys):
    ok, out = run(capsys, "9.1", _raise)
    assert not ok
    first, second = out.splitlines()
    assert first == "check_9_1: fail: keys_per_query(1) raised ValueError: not written yet"
    assert second.strip().startswith("in _raise, line ") and 'raise ValueError("not written yet")' in second


def test_an_answer_of_the_wrong_kind_is_a_fail_line(capsys):
    assert run(capsys, "9.1", lambda L, N=None: "many")[0] is False
    assert run(capsys, "11.1", lambda *a, **k: 0.5)[1].startswith("check_11_1: fail: the result (diff, low, high)")
    assert run(capsys, "4.1", lambda mha, x: None)[1].startswith("check_4_1: fail: the output for x of shape")


# ----------------------------------------------------------------------------- what a checker leaves alone

def test_the_students_random_state_and_instance_are_left_alone(capsys):
    norm = ch5.RMSNorm(24)                                                  # instance: C read from gamma
    pos = ch6.VoicePositions(ModelConfig(n_embd=8, n_heads=1, context=32))
    before = [p.detach().clone() for p in (*norm.parameters(), *pos.parameters())]
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert run(capsys, "5.1", norm)[0] and run(capsys, "6.3", pos)[0] and run(capsys, "4.1", ch4.mha_einsum)[0]
    assert torch.equal(torch.rand(3), expected)
    after = [p.detach() for p in (*norm.parameters(), *pos.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(before, after))


def test_instances_are_checked_on_their_device(capsys):
    """On a (pretend) accelerator: a checker that fed CPU tensors to the module would fail here."""
    torch.manual_seed(0)
    model = build_model("fnet-conv", ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=32))
    with VirtualDevice(VIRTUAL_DEVICE):
        for key, obj in (("1.1", ch1.AdditiveAttention(16)), ("3.1", ch3.PeekHead(16, 16)),
                         ("5.1", ch5.RMSNorm(16)), ("6.3", ch6.VoicePositions(ModelConfig(n_embd=16)))):
            ok, out = run(capsys, key, obj.to(VIRTUAL_DEVICE))
            assert ok, out
        ok, out = run(capsys, "10.3", ch10.cached_logits, model.to(VIRTUAL_DEVICE))
        assert ok, out
        bad = lambda m, tokens, prefill=1: ch10.cached_logits(m, tokens.tolist(), prefill)[:, :3]
        ok, out = run(capsys, "10.3", bad, model)
        assert not ok and "has shape (20, 3), expected (20, 54)" in out


# ----------------------------------------------------------------------------- answers found in review

class GQAPerGroup(nn.Module):
    """Right, with kv's rows as [K | V] per group rather than [all K | all V]."""

    def __init__(self, cfg, n_groups):
        super().__init__()
        C, self.nh, self.ng, self.hs = cfg.n_embd, cfg.n_heads, n_groups, cfg.n_embd // cfg.n_heads
        self.q, self.proj = nn.Linear(C, C, bias=False), nn.Linear(C, C)
        self.kv = nn.Linear(C, 2 * n_groups * self.hs, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.nh, self.hs).transpose(1, 2)
        kv = self.kv(x).view(B, T, self.ng, 2, self.hs)
        k, v = (kv[..., i, :].transpose(1, 2).repeat_interleave(self.nh // self.ng, 1) for i in (0, 1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def test_a_right_answer_in_another_layout_or_mode_passes(capsys):
    assert run(capsys, "4.2", GQAPerGroup)[0]
    torch.manual_seed(0)
    model = build_model("fnet-conv", ModelConfig(n_embd=16, n_heads=2, n_layers=2, context=32, dropout=0.3))
    assert run(capsys, "10.3", ch10.cached_logits, model.train())[0]       # as left by train(): dropout on
    assert model.training, "the checker gives the model back in the mode it found it"


def test_a_90_percent_interval_is_not_the_95_percent_one(capsys):
    def bootstrap_90(a, b, counts, n=2000, seed=0):
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, len(a), (2, n, len(a)))                     # unpaired: one draw per model
        s = a[i].sum(1) / counts[i].sum(1) - b[j].sum(1) / counts[j].sum(1)
        return (a - b).sum() / counts.sum(), np.percentile(s, 5), np.percentile(s, 95)

    ok, out = run(capsys, "11.1", bootstrap_90)
    assert not ok and "2.5 and 97.5 percentiles" in out
