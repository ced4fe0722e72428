"""Chapter 11's voice embedding and the "relative-voice" model (causality: tests/model/test_probes.py)."""
import numpy as np
import torch

from musictx_lite import ModelConfig, Piece, build_model, encode
from musictx_lite.engine.profiles import PROFILES
from musictx_lite.models import n_params
from musictx_lite.models.tasks import Crops
from musictx_lite.models.voices import VoiceEmbedding, voice_of

CFG = ModelConfig(n_embd=32, n_heads=4, n_layers=2, context=32)


def test_voice_of_each_position():
    assert voice_of(9).tolist() == [3, 0, 1, 2, 3, 0, 1, 2, 3]     # position 0: BOS or the previous bass
    assert voice_of(4, start=5).tolist() == [0, 1, 2, 3]
    chord = np.array([[72, 64, 55, 48]] * 6)                      # each voice its own pitch
    tokens = encode(chord)
    for k in (0, 4, 8):                                           # windows starting on step boundaries
        window = tokens[k: k + 17]
        np.testing.assert_array_equal(window[1:], encode(chord)[1:][voice_of(17)[1:].numpy()])
    x, _ = Crops([Piece("chord", chord)], length=12, seed=0).batch(4)
    np.testing.assert_array_equal(x[:, 1:].numpy(), tokens[1:][voice_of(12)[1:].numpy()][None].repeat(4, 0))


def test_voice_embedding_adds_one_vector_per_voice():
    torch.manual_seed(0)
    emb = VoiceEmbedding(CFG)
    assert emb.table.weight.shape == (4, 32)
    x = torch.randn(2, 10, 32)
    V = emb.table.weight
    torch.testing.assert_close(emb(x), x + V[[3, 0, 1, 2, 3, 0, 1, 2, 3, 0]])
    torch.testing.assert_close(emb(x[:, 6:], start=6), emb(x)[:, 6:])  # a key/value cache's later tokens


def test_relative_voice_is_relative_when_the_table_is_zero():
    torch.manual_seed(0)
    rel, voice = build_model("relative", CFG).eval(), build_model("relative-voice", CFG).eval()
    missing, unexpected = voice.load_state_dict(rel.state_dict(), strict=False)
    assert missing == ["positions.table.weight"] and unexpected == []
    assert n_params(voice) == n_params(rel) + 4 * CFG.n_embd
    idx = torch.randint(5, 54, (2, 24))
    with torch.no_grad():
        assert not torch.allclose(voice(idx), rel(idx), atol=1e-3)   # the table is random at first
        voice.positions.table.weight.zero_()
        torch.testing.assert_close(voice(idx), rel(idx))


def test_relative_voice_trains_at_relatives_settings():
    for p in PROFILES.values():
        assert p.model_config("relative-voice") == p.model_config("relative"), p.name
        assert p.train_config("relative-voice") == p.train_config("relative"), p.name
