"""Chapter 12's encoder-decoder: relative positions both ways, cross-attention, the melody task, and what
the harmoniser may see (the whole melody of its window, and the lower voices only up to the present)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from musictx_lite import ModelConfig, TrainConfig, build_model, train
from musictx_lite.io.tokens import PAD, encode
from musictx_lite.models.harmoniser import CrossAttention, RelativeBoth, melody_steps
from musictx_lite.models.tasks import MELODY, Crops, MelodyCrops, voice_nlls

CFG = ModelConfig(n_embd=32, n_heads=2, n_layers=2, context=64)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("harmoniser", CFG).eval()


def test_relative_both_reads_the_vector_of_each_distance_clipped():
    torch.manual_seed(0)
    rel = RelativeBoth(ModelConfig(n_embd=8, n_heads=2), L=3)
    q = torch.randn(1, 2, 5, 4)
    got = rel(q)                                                      # (1, 2, 5, 5)
    for h in range(2):
        for i in range(5):
            for j in range(5):
                d = max(-2, min(2, j - i))                            # clipped to -(L-1)..(L-1)
                want = q[0, h, i] @ rel.E[h, d + 2] / math.sqrt(4)
                torch.testing.assert_close(got[0, h, i, j], want)
    d = torch.tensor([[0, 1], [-1, 0], [-5, 7]])                      # any (Tq, Tk) distances
    out = rel(q[:, :, :3], d)
    torch.testing.assert_close(out[0, 1, 2, 1], q[0, 1, 2] @ rel.E[1, 4] / 2)


def test_cross_attention_is_its_definition_and_caches_the_memory():
    torch.manual_seed(0)
    cfg = ModelConfig(n_embd=8, n_heads=2)
    cross = CrossAttention(cfg, L=4).eval()
    x, memory = torch.randn(2, 6, 8), torch.randn(2, 5, 8)
    steps = melody_steps(torch.arange(6))                             # -1, 0, 0, 0, 0, 1
    assert steps.tolist() == [-1, 0, 0, 0, 0, 1]
    got = cross(x, steps, memory)
    q = cross.q(x).view(2, 6, 2, 4).transpose(1, 2)
    k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in cross.kv(memory).split(8, -1))
    d = torch.arange(5)[None, :] - steps[:, None]                     # (6, 5): memory step - own step
    E = cross.rel.E[:, d.clamp(-3, 3) + 3]                            # (nh, 6, 5, hs)
    scores = (q @ k.transpose(-2, -1) + torch.einsum("bhid,hijd->bhij", q, E)) / 2   # / sqrt(hs)
    want = cross.proj((F.softmax(scores, -1) @ v).transpose(1, 2).reshape(2, 6, 8))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(cross(x, steps, kv=cross.memory_kv(memory)), got)


def test_the_harmoniser_sees_the_whole_melody_and_the_lower_voices_up_to_now(model, chorales):
    """A probe (exercise 12.3's): change a token and see which logits move. A later soprano note moves the
    logits before it (the encoder reads the future of the melody); a later alto, tenor or bass moves
    nothing before it (the decoder is causal)."""
    x = torch.as_tensor(encode(chorales.valid[0].pitches)[:64])[None]   # BOS, then 16 steps
    with torch.no_grad():
        base = model(x)
        for p, moves_the_past in [(41, True), (42, False), (43, False), (44, False)]:   # S, A, T, B of step 11
            y = x.clone()
            y[0, p] = 30 if x[0, p] != 30 else 31
            changed = (model(y) - base).abs().amax(-1)[0]             # (T,)
            assert (changed[:p].max() > 1e-4) == moves_the_past, p
            assert changed[p:].max() > 1e-4
        torch.testing.assert_close(model(x, melody=x[:, 1::4]), base)


def test_melody_crops_score_the_lower_voices_only(chorales):
    plain, melody = Crops(chorales.train, 32, seed=3), MelodyCrops(chorales.train, 32, seed=3)
    (x0, y0), (x1, y1) = plain.batch(4), melody.batch(4)
    assert torch.equal(x0, x1) and (y1[:, 0::4] == PAD).all()
    keep = torch.ones(32, dtype=torch.bool)
    keep[0::4] = False
    assert torch.equal(y0[:, keep], y1[:, keep])
    assert MELODY.transposes and MelodyCrops(chorales.train, 32, 0, transpose=True).batch(2)[0].shape == (2, 32)


def test_the_melody_task_scores_the_alto_tenor_and_bass(model, chorales):
    pieces = chorales.valid[:2]
    assert MELODY.evaluate(model, pieces) == pytest.approx(voice_nlls(model, pieces)["ATB"])
    assert MELODY.evaluate(model, pieces) == pytest.approx(math.log(54), rel=0.2)        # untrained


def test_the_harmoniser_trains_with_the_books_loop_on_its_task(chorales, tmp_path):
    torch.manual_seed(0)
    m = build_model("harmoniser", CFG)
    cfg = TrainConfig(batch_size=8, max_steps=30, lr=3e-3, warmup_steps=3, eval_every=15, ckpt_every=15,
                      eval_pieces=4, transpose=True)
    before = MELODY.evaluate(m, chorales.valid[:4])
    h = train(m, chorales, cfg, out_dir=tmp_path, progress=False)
    assert np.mean(h.train_loss[-5:]) < np.mean(h.train_loss[:5]) - 0.5
    assert h.valid_nll[-1] < before - 0.5
    from musictx_lite import load_checkpoint

    again, _ = load_checkpoint(tmp_path)                              # rebuilt by name, the same weights
    x = torch.as_tensor(encode(chorales.valid[0].pitches)[:40])[None]
    with torch.no_grad():
        torch.testing.assert_close(again(x), m.eval()(x))


def test_generate_harmonises_a_melody_with_the_whole_melody_in_view(model, chorales):
    """The sampler gives the harmoniser every soprano note of its window, the future ones too: each token's
    logits are those of the model on the finished raster, whose melody is all there."""
    from musictx_lite import generate

    soprano = encode(chorales.valid[1].pitches[:12])[1::4]                    # 12 steps
    forced = np.full(48, -1)
    forced[0::4] = soprano
    trace = []
    out = generate(model, None, 12, seed=1, forced=forced, trace=trace)
    np.testing.assert_array_equal(out[1::4], soprano)
    with torch.no_grad():
        whole = model(torch.as_tensor(out[:-1])[None])[0]                     # context 64 holds 48 tokens
    torch.testing.assert_close(torch.stack(trace), whole, rtol=1e-4, atol=1e-4)
    # a melody longer than the context: the windows slide, and the melody stays the given one
    long = encode(chorales.valid[1].pitches[:40])[1::4]
    forced = np.full(160, -1)
    forced[0::4] = long
    np.testing.assert_array_equal(generate(model, None, 40, seed=1, forced=forced)[1::4], long)
    with pytest.raises(ValueError, match="a harmoniser is given the melody"):
        generate(model, None, 12, forced=np.full(48, -1))
    with pytest.raises(ValueError, match="a harmoniser is given the melody"):
        generate(model, None, 12)


@pytest.mark.parametrize("name", ["relative", "harmoniser"])
def test_harmonise_keeps_the_melody_and_writes_three_voices(name, chorales):
    from musictx_lite.engine.harmonise import harmonise, melody_tokens

    torch.manual_seed(0)
    m = build_model(name, CFG).eval()
    melody = chorales.valid[2].pitches[:20, 0].copy()
    melody[5:7] = -1                                                         # a rest in the melody
    grid = harmonise(m, melody, seed=4)
    assert grid.shape == (20, 4)
    np.testing.assert_array_equal(grid[:, 0], melody)
    np.testing.assert_array_equal(grid, harmonise(m, melody, seed=4))        # a seed is a harmonisation
    assert not np.array_equal(grid, harmonise(m, melody, seed=5))
    assert melody_tokens(melody).shape == (20,)
    with pytest.raises(ValueError, match="leave the model's range"):
        harmonise(m, np.array([30, 60]))
    with pytest.raises(ValueError, match="a non-empty line of pitches"):
        harmonise(m, np.array([], dtype=int))


def test_the_harmonisers_cache_gives_the_logits_of_re_encoding(model, chorales):
    """The melody is read once per window and the self-attention keeps its keys and values: the same
    tokens and logits as re-encoding every window for every token, across slides of the window."""
    from musictx_lite import generate

    soprano = encode(chorales.valid[1].pitches[:40])[1::4]                    # 160 tokens: the window slides
    forced = np.full(160, -1)
    forced[0::4] = soprano
    fast, slow = [], []
    a = generate(model, None, 40, seed=3, forced=forced, trace=fast)
    b = generate(model, None, 40, seed=3, forced=forced, trace=slow, cache=False)
    np.testing.assert_array_equal(a, b)
    torch.testing.assert_close(torch.stack(fast), torch.stack(slow), rtol=1e-4, atol=1e-4)


def test_a_harmoniser_built_by_hand_samples_without_a_cache(chorales):
    from musictx_lite import generate
    from musictx_lite.models.harmoniser import Harmoniser

    torch.manual_seed(0)
    plain = Harmoniser(CFG).eval()                                    # not through build_model: no cache
    assert not plain.cacheable and build_model("harmoniser", CFG).cacheable
    soprano = encode(chorales.valid[1].pitches[:6])[1::4]
    forced = np.full(24, -1)
    forced[0::4] = soprano
    np.testing.assert_array_equal(generate(plain, None, 6, forced=forced)[1::4], soprano)


def test_a_harmoniser_started_from_a_decoder_begins_as_that_decoder(chorales):
    torch.manual_seed(0)
    decoder = build_model("relative", CFG).eval()
    h = build_model("harmoniser", CFG).start_from(decoder).eval()
    x = torch.as_tensor(encode(chorales.valid[0].pitches)[:64])[None]
    with torch.no_grad():
        torch.testing.assert_close(h(x), decoder(x))                        # the cross branch adds zero
    assert all((b.cross.proj.weight == 0).all() for b in h.blocks)
    with pytest.raises(ValueError):                                         # a decoder of another depth
        h.start_from(build_model("relative", ModelConfig(n_embd=32, n_heads=2, n_layers=1, context=64)))


def test_a_frozen_start_trains_only_the_encoder_and_the_cross_attention(chorales):
    """``start_from(freeze=True)``: the decoder's weights stay exactly as taken; the encoder and each
    cross-attention learn (one step of the book's loop moves them), and the model still starts as the decoder."""
    torch.manual_seed(0)
    decoder = build_model("relative", CFG).eval()
    h = build_model("harmoniser", CFG).start_from(decoder, freeze=True)
    learns = {n.split(".")[0] if not n.startswith("blocks") else n.split(".")[2]
              for n, p in h.named_parameters() if p.requires_grad}
    assert learns == {"mel_emb", "encoder", "ln_enc", "cross", "ln2"}        # ln2: the cross-attention's LN
    before = {n: p.detach().clone() for n, p in h.named_parameters()}
    train(h, chorales, TrainConfig(batch_size=2, max_steps=2, eval_every=2, warmup_steps=0, lr=1e-2))
    moved = {n for n, p in h.named_parameters() if not torch.equal(p, before[n])}
    assert moved and all(h.get_parameter(n).requires_grad for n in moved)     # only what learns moved
    assert any(".cross." in n for n in moved) and any(n.startswith("encoder.") for n in moved)
    assert torch.equal(h.blocks[0].ff.net[0].weight, decoder.blocks[0].ff.net[0].weight)
