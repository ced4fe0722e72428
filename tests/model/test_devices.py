"""Every chapter and every exercise works when the model lives on an accelerator.

On Colab, ``train()`` puts the model on CUDA, and any CPU tensor that a cell
feeds it fails there, while CI on CPU stays green. So nbval runs every chapter
(smoke profile) with the model on a pretend accelerator: tests/conftest.py
gives each kernel a startup file that sets ``MUSICTX_DEVICE`` to it and enters
``VirtualDevice`` (tests/virtual_device.py). Tensors moved there keep their
values, and any operation that mixes them with CPU tensors raises, as CUDA
would. These tests check the mechanism itself: that it catches a CPU tensor,
and that a kernel started as nbval starts one really runs on it.
"""
import os

import pytest
import torch
from conftest import VIRTUAL_DEVICE as DEVICE  # noqa: E402
from virtual_device import DeviceMismatch, VirtualDevice  # tests/virtual_device.py


def test_virtual_device_catches_cpu_tensors_fed_to_a_model():
    from musictx_lite import ModelConfig, build_model

    with VirtualDevice(DEVICE):
        torch.manual_seed(0)
        m = build_model("transformer", ModelConfig(n_embd=16, n_heads=2, context=16)).to(DEVICE)
        x = torch.randint(5, 50, (1, 8))
        with pytest.raises(DeviceMismatch, match="expected all tensors"):
            m(x)
        y = m(x.to(DEVICE))
        assert y.device.type == DEVICE
        value = y.cpu()                                              # the values are real
    torch.manual_seed(0)
    ref = build_model("transformer", ModelConfig(n_embd=16, n_heads=2, context=16))
    torch.testing.assert_close(value, ref(x))


@pytest.mark.parametrize("name", ["lstm", "lstm-attention"])
def test_an_lstm_on_the_virtual_device_computes_the_cpu_values_and_gradients(name):
    """The LSTM runs as one CPU call there (virtual_device._lstm_on_cpu), not hundreds of small ops:
    its outputs and every gradient equal the CPU's, and a CPU state fed to it still fails."""
    from musictx_lite import ModelConfig, build_model

    cfg = ModelConfig(n_embd=16, n_layers=2, dropout=0.0, context=16)
    x = torch.randint(5, 50, (3, 12))
    torch.manual_seed(0)
    ref = build_model(name, cfg)
    ref(x).logsumexp(-1).mean().backward()
    with VirtualDevice(DEVICE):
        torch.manual_seed(0)
        m = build_model(name, cfg).to(DEVICE)
        y = m(x.to(DEVICE))
        y.logsumexp(-1).mean().backward()
        assert y.device.type == DEVICE
        grads = {n: p.grad.cpu() for n, p in m.named_parameters()}
        value = y.cpu()
        with torch.no_grad():                                            # evaluation takes another path
            torch.testing.assert_close(m(x.to(DEVICE)).cpu(), value)
        out, (h, c) = m.lstm(m.emb(x.to(DEVICE)))
        c.sum().backward()                                               # a gradient through c_n alone
        assert all(p.grad is not None for p in m.lstm.parameters())
        h0 = torch.zeros(cfg.n_layers, 3, cfg.n_embd)                    # a CPU state
        with pytest.raises(DeviceMismatch, match="lstm: expected all tensors"):
            m.lstm(m.emb(x.to(DEVICE)), (h0, h0.to(DEVICE)))
    torch.testing.assert_close(value, ref(x))
    assert grads.keys() == dict(ref.named_parameters()).keys()
    for n, p in ref.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, msg=n)


@pytest.mark.skipif(os.environ.get("MUSICTX_NBVAL_DEVICE", "virtual") != "virtual",
                    reason="MUSICTX_NBVAL_DEVICE=cpu: nbval runs the chapters on the plain CPU")
def test_nbval_kernels_run_on_the_pretend_accelerator():
    """A kernel started like nbval's picks the virtual device, and a CPU tensor fed to a model there fails."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import musictx_lite as mtx\nP = mtx.setup()"),
        nbformat.v4.new_code_cell("import torch\nm = mtx.build_model('transformer', mtx.ModelConfig(n_embd=16, "
                                  "n_heads=2)).to(mtx.pick_device())\nprint(m(mtx.to_model(m, [[1, 7, 9]])).device)"),
        nbformat.v4.new_code_cell("m(torch.tensor([[1, 7, 9]]))"),          # a CPU tensor: must fail
    ])
    client = NotebookClient(nb, timeout=120, kernel_name="python3")
    with pytest.raises(CellExecutionError, match="DeviceMismatch"):
        client.execute()
    first = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert f"device: {DEVICE}" in first, first                        # what every chapter's first cell prints
    assert nb.cells[1].outputs[0]["text"].strip() == DEVICE
