"""The embedded chorale file is exactly what scripts/build_chorales.py makes from music21."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rebuild_from_music21_is_identical():
    spec = importlib.util.spec_from_file_location("build_chorales", ROOT / "scripts" / "build_chorales.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rebuilt = mod.build()
    with np.load(ROOT / "musictx_lite" / "io" / "chorales.npz", allow_pickle=False) as z:
        assert sorted(z.files) == sorted(rebuilt)
        for k in rebuilt:
            np.testing.assert_array_equal(z[k], rebuilt[k], err_msg=k)
