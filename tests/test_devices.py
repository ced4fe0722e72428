"""Every chapter and every exercise works when the model lives on an accelerator.

On Colab, ``train()`` puts the model on CUDA, and any CPU tensor that a cell
feeds it fails there, while CI on CPU stays green. These tests run each
chapter (smoke profile) with ``MUSICTX_DEVICE`` pointing at a pretend
accelerator (tests/virtual_device.py): tensors moved there keep their values,
and any operation that mixes them with CPU tensors raises, as CUDA would.
"""
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from virtual_device import DeviceMismatch, VirtualDevice  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DEVICE = "meta"   # its device type has the guard that autograd needs on a CPU-only build; see virtual_device.py

PRELUDE = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from virtual_device import VirtualDevice
os.environ["MUSICTX_DEVICE"] = {DEVICE!r}      # train() and pick_device() now choose the pretend accelerator
VirtualDevice({DEVICE!r}).__enter__()
"""


def test_virtual_device_catches_cpu_tensors_fed_to_a_model():
    from musictx_lite import ModelConfig, build_model

    with VirtualDevice(DEVICE):
        torch.manual_seed(0)
        m = build_model("transformer", ModelConfig(n_embd=16, n_heads=2, block_size=16)).to(DEVICE)
        x = torch.randint(5, 50, (1, 8))
        with pytest.raises(DeviceMismatch, match="expected all tensors"):
            m(x)
        y = m(x.to(DEVICE))
        assert y.device.type == DEVICE
        value = y.cpu()                                              # the values are real
    torch.manual_seed(0)
    ref = build_model("transformer", ModelConfig(n_embd=16, n_heads=2, block_size=16))
    torch.testing.assert_close(value, ref(x))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_runs_with_the_model_on_an_accelerator(path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE))
    env_profile = os.environ.get("MUSICTX_PROFILE", "smoke")
    assert env_profile == "smoke", "run the device test in the smoke profile"
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"{path.name} fails with the model on an accelerator:\n{str(e)[-1500:]}")
    install = next(c for c in nb.cells[1:] if c.cell_type == "code")      # under the chapter's title
    first = "".join(o.get("text", "") for o in install.outputs)
    assert f"device: {DEVICE}" in first, first                       # the chapter really ran on it
