"""The classroom widgets (musictx_lite/classroom/widgets.py, skew_widget.py, harmoniser_widget.py): each control
changes what is drawn, each static version renders, and the model may live on an accelerator
(tests/virtual_device.py)."""
import base64
import re
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import VIRTUAL_DEVICE as DEVICE  # noqa: E402
from virtual_device import VirtualDevice  # tests/virtual_device.py

import musictx_lite as mtx
from musictx_lite.classroom import harmoniser_widget, skew_widget, widgets
from musictx_lite.classroom.plots import token_time
from musictx_lite.models.attention import attention_weights
from musictx_lite.models.relative import relative_logits_direct, skew

PNG = b"\x89PNG\r\n\x1a\n"


def tiny(name: str = "transformer", **kw):
    torch.manual_seed(0)
    cfg = dict(n_embd=16, n_heads=2, n_layers=2, context=64, **kw)
    return mtx.build_model(name, mtx.ModelConfig(**cfg)).eval()


@pytest.fixture(scope="module")
def model():
    return tiny()


@pytest.fixture(scope="module")
def pieces(chorales):
    return chorales.valid[:2]


def bar_heights(fig) -> np.ndarray:
    """The query row's bars (one query), in key order: the weights the figure shows."""
    bars = sorted(fig.axes[1].patches, key=lambda r: r.get_x())
    return np.array([r.get_height() for r in bars])


def pngs(html: str) -> list[bytes]:
    return [base64.b64decode(s) for s in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


# ---------------------------------------------------------------- attention explorer

@pytest.mark.parametrize("layer, head, query", [(0, 0, 5), (1, 1, 30), (-1, 0, 48)])
def test_attention_view_draws_the_chosen_weights(model, pieces, layer, head, query):
    grid = pieces[0].pitches[:12]
    fig = widgets.attention_view(model, grid, layer, head, query)
    want = attention_weights(model, mtx.encode(grid), layer)[head, query, 1:].numpy()   # keys 1 .. T-1
    np.testing.assert_allclose(bar_heights(fig), want, atol=1e-6)
    xs = sorted(r.get_x() + r.get_width() / 2 for r in fig.axes[1].patches)
    np.testing.assert_allclose(xs, token_time(np.arange(1, 49)), atol=1e-9)   # each bar at its key's time
    widgets.plt.close(fig)


def test_attention_widget_follows_its_controls(model, pieces):
    box = widgets.attention_widget(model, pieces, steps=12)
    c = box.controls
    assert bytes(box.image.value).startswith(PNG)
    settings = [dict(layer=0, head=1), dict(step=3, voice=2), dict(piece=1), dict(layer=1, head=0, step=11)]
    for change in settings:
        before = bytes(box.image.value)
        for name, value in change.items():
            c[name].value = value
        layer, head = c["layer"].value, c["head"].value
        query = 1 + 4 * c["step"].value + c["voice"].value
        piece = pieces[c["piece"].value]
        want = attention_weights(model, mtx.encode(piece.pitches[:12]), layer)[head, query]
        assert box.state["query"] == query and box.state["piece"] == piece.name
        torch.testing.assert_close(box.state["weights"], want)
        assert bytes(box.image.value) != before and bytes(box.image.value).startswith(PNG)
    assert c["step"].max == 11 and c["layer"].options == (0, 1) and c["head"].options == (0, 1)


def test_attention_fallback_has_one_image_per_state(model, pieces):
    page = widgets.attention_fallback(model, pieces[0], steps=12).data
    images = pngs(page)
    assert len(images) == 3 and all(i.startswith(PNG) for i in images)       # (0, 0), (1, 0), (1, 1)
    assert all(f"layer {layer}, head {head}" in page for layer, head in [(0, 0), (1, 0), (1, 1)])
    assert "Static version of the attention explorer" in page
    one = widgets.attention_fallback(model, pieces[0], steps=12, states=[(1, 0)]).data
    assert len(pngs(one)) == 1


def test_attention_explorer_takes_one_head_models_and_rejects_models_without_weights(pieces):
    lstm_attn = mtx.build_model("lstm-attention", mtx.ModelConfig(n_embd=16))
    maps = widgets.attention_maps(lstm_attn, pieces[0].pitches[:8])
    assert len(maps) == 1 and maps[0].shape == (1, 33, 33)                   # (nh, T, T), one head
    for name in ("lstm", "fnet-conv"):
        with pytest.raises(ValueError, match="no attention weights"):
            widgets.attention_maps(tiny(name), pieces[0].pitches[:8])
    with pytest.raises(ValueError, match="not a next-token model"):
        widgets.attention_maps(mtx.build_model("fill", mtx.ModelConfig(n_embd=16)), pieces[0].pitches[:8])
    with pytest.raises(ValueError, match="head 2 does not exist"):
        widgets.attention_view(tiny(), pieces[0].pitches[:8], head=2)
    with pytest.raises(ValueError, match="context of 64"):
        widgets.attention_maps(tiny(), pieces[0].pitches[:20])               # 81 tokens > 64
    with pytest.raises(TypeError, match="Piece"):
        widgets.attention_widget(tiny(), pieces[0].pitches)


# ---------------------------------------------------------------- sampler

@pytest.fixture
def spy(monkeypatch):
    """Record every call of generate made by the widgets."""
    calls = []

    def generate(*args, **kw):
        calls.append(kw)
        return mtx.generate(*args, **kw)

    monkeypatch.setattr(widgets, "generate", generate)
    return calls


def test_sample_music_keeps_the_prompt_and_passes_the_settings(model, pieces, spy):
    grid = widgets.sample_music(model, pieces[0], prompt_steps=5, n_steps=7, temperature=0.7, top_k=3, seed=4)
    assert grid.shape == (12, 4) and (grid[:5] == pieces[0].pitches[:5]).all()
    assert spy[-1] == dict(n_steps=7, temperature=0.7, top_k=3, seed=4)
    want = mtx.generate(model, mtx.prompt_from(pieces[0], 5), n_steps=7, temperature=0.7, top_k=3, seed=4)
    assert (grid == mtx.decode(want)).all()
    assert widgets.sample_music(model, None, n_steps=3, top_k=0).shape == (3, 4)   # from BOS alone
    assert spy[-1]["top_k"] is None                                          # 0: off
    with pytest.raises(ValueError, match="top_k"):
        widgets.sample_music(model, pieces[0], top_k=-1)
    with pytest.raises(ValueError, match="prompt_steps"):
        widgets.sample_music(model, pieces[0], prompt_steps=10_000)


def test_sampler_widget_samples_with_its_controls(model, pieces, spy):
    box = widgets.sampler_widget(model, pieces, prompt_steps=4, n_steps=8)
    assert box.state["grid"].shape == (12, 4) and len(spy) == 1
    c = box.controls
    assert c["prompt_steps"].max == 15                                       # (64 - 1) // 4 steps fit
    for name, value in dict(piece=1, prompt_steps=6, n_steps=12, temperature=1.35, top_k=7, seed=3).items():
        c[name].value = value
    assert len(spy) == 1                                                     # the button samples, not the sliders
    box.button.click()
    assert spy[-1] == dict(n_steps=12, temperature=1.35, top_k=7, seed=3)
    grid = box.state["grid"]
    assert grid.shape == (18, 4) and (grid[:6] == pieces[1].pitches[:6]).all()
    roll, audio = box.children[4], box.children[5]
    assert bytes(roll.value).startswith(PNG) and "<audio" in audio.value
    assert "12 steps in" in box.children[3].children[1].value                # the status line
    c["top_k"].value = 0
    box.button.click()
    assert spy[-1]["top_k"] is None


def test_sampler_fallback_has_images_and_players(model, pieces):
    page = widgets.sampler_fallback(model, pieces[0], prompt_steps=4, n_steps=8).data
    assert len(pngs(page)) == 3 and page.count("<audio") == 3                # one per setting
    assert page.count("data:audio/midi;base64,") == 3
    for label in ("temperature 0.5", "temperature 1", "temperature 1.5, top-k 5"):
        assert f"<b>{label}</b>" in page


def test_sampler_shows_the_score():
    grid = np.array([[72, 67, 64, 48]] * 8 + [[74, 67, 62, 43]] * 8)
    html = widgets.score_html(grid, title="C major")
    assert "<svg" in html and "No score" not in html
    fig, score, clip = widgets.sample_view(grid, 8, "a prompt and its continuation")
    widgets.plt.close(fig)
    assert "<svg" in score and "<audio" in clip._repr_html_()


# ---------------------------------------------------------------- skew stepper (chapter 8)

@pytest.mark.parametrize("L", [2, 4, 5, 8])
def test_skew_steps_are_pad_reshape_slice(L):
    R, _ = skew_widget.skew_step(L, 0)
    assert R.tolist() == [[1 + L * i + r for r in range(L)] for i in range(L)]
    padded = F.pad(R, (1, 0))
    assert torch.equal(skew_widget.skew_step(L, 1)[0], padded)
    assert torch.equal(skew_widget.skew_step(L, 2)[0], padded.reshape(L + 1, L))
    S, caption = skew_widget.skew_step(L, 3)
    assert torch.equal(S, skew(R)) and caption.startswith("4. Drop the first row")
    direct = relative_logits_direct(R[None], torch.eye(L)[None])[0]         # q = R, E = I: q E^T = R
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    assert torch.equal(S[causal], direct[causal])


def test_skew_table_labels_each_entry_with_its_query_and_distance():
    page = skew_widget.skew_table(4, 3)
    cells = re.findall(r"<td[^>]*>(\d+)<br><small>([^<]+)</small></td>", page)
    assert len(cells) == 16
    for k, (value, label) in enumerate(cells):
        i, j = divmod(k, 4)
        if j <= i:                                  # defined: query i at distance j - i
            assert label == f"q{i}, d={j - i}"
    assert page.count("opacity:0.35") == 6          # the undefined upper triangle
    with pytest.raises(ValueError, match="step"):
        skew_widget.skew_step(4, 4)
    with pytest.raises(ValueError, match="L must be"):
        skew_widget.skew_step(1, 0)


def test_skew_widget_steps_and_fallback():
    box = skew_widget.skew_widget(4)
    for L, step in [(4, 1), (4, 2), (5, 2), (5, 3), (3, 0)]:
        box.controls["L"].value, box.controls["step"].value = L, step
        matrix, caption = skew_widget.skew_step(L, step)
        assert torch.equal(box.state["matrix"], matrix) and box.state["caption"] == caption
        assert box.table.value == skew_widget.skew_table(L, step)
    page = skew_widget.skew_fallback(4).data
    assert page.count("<table") == 4 and "2. Pad" in page and "Static version" in page


# ---------------------------------------------------------------- live or static, Colab, devices

def test_explore_shows_the_widget_live_and_the_fallback_static(model, pieces, monkeypatch):
    import IPython.display
    import ipywidgets

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    for name in ("attention", "sampler"):                 # record what would be built, with which arguments
        for kind in ("widget", "fallback"):
            monkeypatch.setattr(widgets, f"{name}_{kind}", lambda *a, _k=f"{name} {kind}": (_k, a))
    monkeypatch.setenv(widgets.MODE_VAR, "static")
    assert not widgets.live()
    skew_widget.explore_skew(5)
    widgets.explore_attention(model, pieces, steps=8)
    widgets.explore_sampler(model, pieces, 4, 8)
    assert isinstance(shown[0], IPython.display.HTML) and shown[0].data.count("<table") == 4
    assert shown[1:] == [("attention fallback", (model, pieces[0], 8)), ("sampler fallback", (model, pieces[0], 4, 8))]
    shown.clear()
    monkeypatch.setenv(widgets.MODE_VAR, "live")
    skew_widget.explore_skew(5)
    widgets.explore_attention(model, pieces, steps=8)
    widgets.explore_sampler(model, pieces, 4, 8)
    assert isinstance(shown[0], ipywidgets.VBox) and shown[0].state["L"] == 5
    assert shown[1:] == [("attention widget", (model, pieces, 8)), ("sampler widget", (model, pieces, 4, 8))]
    monkeypatch.delenv(widgets.MODE_VAR)
    assert not widgets.live()                       # pytest is no IPython kernel
    monkeypatch.setenv(widgets.MODE_VAR, "sometimes")
    with pytest.raises(ValueError, match="MUSICTX_WIDGETS"):
        widgets.live()


def test_enable_colab_only_in_colab(monkeypatch):
    assert widgets.enable_colab() is False
    calls = []
    output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append(1))
    colab = types.ModuleType("google.colab")
    colab.output = output
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    assert widgets.enable_colab() is True and calls == [1]


def test_enable_colab_leaves_ipywidgets_7_to_colab(monkeypatch):
    """Colab ships ipywidgets 7.7.1 and draws 7.x natively: the custom widget manager is for 8.x only."""
    import ipywidgets

    calls = []
    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append(1))
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(ipywidgets, "__version__", "7.7.1")
    assert widgets.enable_colab() is False and calls == []
    monkeypatch.setattr(ipywidgets, "__version__", "8.1.5")
    assert widgets.enable_colab() is True and calls == [1]


def test_widgets_on_an_accelerator(pieces):
    """A model on the pretend accelerator: no CPU tensor reaches it, and every value matches the CPU's."""
    cpu = tiny("relative")
    grid = pieces[0].pitches[:8]
    want_maps = widgets.attention_maps(cpu, grid)
    want_music = widgets.sample_music(cpu, pieces[0], prompt_steps=3, n_steps=4, top_k=5)
    with VirtualDevice(DEVICE):
        model = tiny("relative").to(DEVICE)
        maps = widgets.attention_maps(model, grid)
        box = widgets.attention_widget(model, pieces, steps=8)
        box.controls["head"].value = 1
        music = widgets.sample_music(model, pieces[0], prompt_steps=3, n_steps=4, top_k=5)
    for got, want in zip(maps, want_maps):
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(box.state["weights"], want_maps[-1][1, box.state["query"]], atol=1e-5, rtol=1e-4)
    assert (music == want_music).all()


# ---------------------------------------------------------------- harmoniser (chapter 12)

TUNE = "4/4 C4 C D E F G2"              # C3 to G3: moved an octave up into the soprano's range; C repeated


@pytest.fixture
def harmonise_spy(monkeypatch):
    """Record every call of harmonise made by the widgets."""
    from musictx_lite.engine.harmonise import harmonise as real

    calls = []

    def harmonise(*args, **kw):
        calls.append(args[2:])                                              # (temperature, seed)
        return real(*args, **kw)

    monkeypatch.setattr(harmoniser_widget, "harmonise", harmonise)
    return calls


def test_harmonise_tune_keeps_the_melody_and_its_repeated_notes(model):
    from musictx_lite.engine.harmonise import harmonise
    from musictx_lite.io.melody import read_melody

    grid, onsets, melody = harmoniser_widget.harmonise_tune(model, TUNE, temperature=0.8, seed=3)
    want = read_melody("tinyNotation: " + TUNE)
    assert melody.shift == 12 and (melody.pitches == want.pitches).all()
    assert grid.shape == (28, 4) and (grid[:, 0] == want.pitches).all() and grid[0, 0] == 60
    assert (grid == harmonise(model, want.pitches, 0.8, 3)).all()
    assert onsets.shape == (28, 4) and (onsets[:, 0] == want.onsets).all()
    assert onsets[4, 0] and grid[4, 0] == grid[3, 0]                       # the second C is struck again
    changed = np.vstack([np.ones((1, 3), bool), grid[1:, 1:] != grid[:-1, 1:]]) & (grid[:, 1:] >= 0)
    assert (onsets[:, 1:] == changed).all()
    with pytest.raises(ValueError, match="cannot harmonise"):
        harmoniser_widget.harmonise_tune(mtx.build_model("fill", mtx.ModelConfig(n_embd=16)), TUNE)


def test_harmonise_widget_harmonises_the_typed_melody(model, harmonise_spy):
    from musictx_lite.io.melody import read_melody

    box = harmoniser_widget.harmonise_widget(model)
    ode = read_melody(harmoniser_widget._tiny(harmoniser_widget.ODE_TO_JOY)).pitches
    assert len(harmonise_spy) == 1 and (box.state["grid"][:, 0] == ode).all()
    c = box.controls
    c["melody"].value, c["temperature"].value, c["seed"].value = TUNE, 1.35, 7
    assert len(harmonise_spy) == 1                                          # the button harmonises, not the controls
    box.button.click()
    assert harmonise_spy[-1] == (1.35, 7)
    want = read_melody("tinyNotation: " + TUNE)
    grid = box.state["grid"]
    assert grid.shape == (28, 4) and (grid[:, 0] == want.pitches).all()
    assert box.state["melody"].log == want.log and box.state["temperature"] == 1.35 and box.state["seed"] == 7
    assert "moved +12 semitones" in box.views["log"].value and "6 notes, 28 16th steps" in box.views["log"].value
    assert box.views["audio"].value.count("<audio") == 1 and "data:audio/midi;base64," in box.views["audio"].value
    assert box.views["score"].value.count('class="musictx-score"') == 1 and "<svg" in box.views["score"].value
    assert "28 steps harmonised by" in box.views["status"].value and "error" not in box.views["status"].value


@pytest.mark.parametrize("text, message", [
    ("", "the melody is empty"),
    ("garbage !!! ###", "the melody holds no notes"),
    ("4/4 CC4 c'''4", "spans 60 semitones"),
    ("4/4 c'4 d'64 e'4", "does not fit the 16th-note grid"),
])
def test_harmonise_widget_shows_a_bad_melody_as_an_error_line(model, harmonise_spy, text, message):
    from musictx_lite.io.melody import MelodyError, read_melody

    box = harmoniser_widget.harmonise_widget(model, melody=TUNE)
    assert box.views["score"].value and box.views["audio"].value and len(harmonise_spy) == 1
    box.controls["melody"].value = text
    box.button.click()                                                      # no exception
    with pytest.raises(MelodyError) as refused:
        read_melody("tinyNotation: " + text)
    status = box.views["status"].value
    assert message in status and status == f"<b>error:</b> {widgets.html.escape(str(refused.value))}"
    assert "\n" not in status and "Traceback" not in status
    assert [box.views[v].value for v in ("log", "audio", "score")] == ["", "", ""]   # no stale harmonisation
    assert box.state["error"] == str(refused.value) and "grid" not in box.state
    assert len(harmonise_spy) == 1                                          # refused before the model
    box.controls["melody"].value = TUNE
    box.button.click()
    assert box.state["grid"].shape == (28, 4) and "<svg" in box.views["score"].value


def test_harmonise_fallback_has_one_score_and_player_per_example(model, pieces):
    examples = [("Twinkle", harmoniser_widget.TWINKLE), ("Low tune", TUNE), ("A chorale", pieces[0].pitches[:16])]
    page = harmoniser_widget.harmonise_fallback(model, examples, seed=2).data
    assert page.count("<audio") == 3 and page.count("data:audio/midi;base64,") == 3
    assert page.count('class="musictx-score"') == 3 and page.count("<svg") >= 3
    assert all(f"<b>{title}</b>" in page for title, _ in examples)
    assert page.count("Harmonised by") == 2 and "moved +12 semitones" in page    # the grid is shown as it is
    assert "Static version of the harmoniser" in page and "open this chapter in Colab or Jupyter" in page
    one = harmoniser_widget.harmonise_fallback(None, examples[2:]).data                     # a grid needs no model
    assert one.count("<audio") == 1 and one.count('class="musictx-score"') == 1
    with pytest.raises(ValueError, match="give the model"):
        harmoniser_widget.harmonise_fallback(None, examples[:1])
    with pytest.raises(TypeError, match="examples"):
        harmoniser_widget.harmonise_fallback(model, [])


def test_explore_harmoniser_live_static_and_its_default_model(model, monkeypatch):
    import IPython.display

    from musictx_lite.study import hub

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    for kind in ("widget", "fallback"):
        monkeypatch.setattr(harmoniser_widget, f"harmonise_{kind}", lambda *a, _k=kind: (_k, a))
    examples = [("Twinkle", harmoniser_widget.TWINKLE)]
    monkeypatch.setenv(widgets.MODE_VAR, "static")
    harmoniser_widget.explore_harmoniser(model, examples, melody=TUNE, temperature=0.9, seed=4)
    monkeypatch.setenv(widgets.MODE_VAR, "live")
    harmoniser_widget.explore_harmoniser(model, examples, melody=TUNE, temperature=0.9, seed=4)
    assert shown == [("fallback", (model, examples, 0.9, 4)), ("widget", (model, TUNE, 0.9, 4))]
    loaded = []
    monkeypatch.setattr(hub, "pretrained", lambda name="relative", device=None: loaded.append(name) or model)
    shipped = (hub.HERE / "harmoniser.pt").exists() and (hub.HERE / "harmoniser.json").exists()
    assert harmoniser_widget._default_harmoniser() is model and loaded == ["harmoniser" if shipped else "relative"]
    monkeypatch.setattr(hub, "_check", lambda name: None)                     # as if the harmoniser were shipped
    harmoniser_widget._default_harmoniser()
    assert loaded[-1] == "harmoniser"
    monkeypatch.setattr(hub, "_check", lambda name: (_ for _ in ()).throw(ValueError("no pretrained model")))
    harmoniser_widget._default_harmoniser()
    assert loaded[-1] == "relative"
