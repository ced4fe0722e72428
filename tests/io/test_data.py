import hashlib
import json

import numpy as np
import pytest

from musictx_lite.io import data as D
from musictx_lite.io.tokens import BOS, HOLD, LOWEST, N_SPECIAL, REST, VOCAB_SIZE, decode, encode


def test_split_is_fixed_and_disjoint(chorales):
    names = {s: [p.name for p in chorales[s]] for s in D.SPLITS}
    assert [len(names[s]) for s in D.SPLITS] == [197, 66, 66]
    all_names = sum(names.values(), [])
    assert len(set(all_names)) == len(all_names)
    grids = {p.pitches.tobytes() for s in D.SPLITS for p in chorales[s]}
    assert len(grids) == len(all_names), "duplicate chorales across the split"
    assert D.load_chorales().valid[0].name == chorales.valid[0].name    # reproducible


def test_pieces_are_four_voice_grids(chorales):
    for p in chorales.train:
        assert p.pitches.ndim == 2 and p.pitches.shape[1] == 4
        s = p.pitches[p.pitches >= 0]
        assert s.min() >= 36 and s.max() <= 81
        assert p.onsets.shape == p.pitches.shape and not p.onsets[p.pitches < 0].any()
    # voices are ordered S >= A >= T >= B most of the time (crossings are rare)
    g = np.concatenate([p.pitches for p in chorales.train])
    assert (np.diff(g, axis=1) <= 0).mean() > 0.97


def test_encode_decode_round_trip_every_chorale(chorales):
    for s in D.SPLITS:
        for p in chorales[s]:
            tok = encode(p.pitches)
            assert tok[0] == BOS and len(tok) == 1 + 4 * len(p)
            assert tok.min() >= 0 and tok.max() < VOCAB_SIZE
            np.testing.assert_array_equal(decode(tok), p.pitches)


def test_raster_order_same_voice_is_4_back():
    grid = np.array([[72, 67, 64, 48], [74, -1, 65, 50]])
    tok = encode(grid)
    o = N_SPECIAL - LOWEST
    assert tok.tolist() == [BOS, 72 + o, 67 + o, 64 + o, 48 + o, 74 + o, REST, 65 + o, 50 + o]
    assert decode(tok)[1, 0] == 74 and tok[5] - tok[1] == 2   # soprano moved a whole tone, 4 tokens apart


def test_hold_encoding_round_trip(chorales):
    for p in chorales.train + chorales.valid:
        tok = encode(p.pitches, p.onsets, hold=True)
        pitches, onsets = decode(tok, return_onsets=True, hold=True)
        np.testing.assert_array_equal(pitches, p.pitches)
        np.testing.assert_array_equal(onsets, p.onsets)
    # the plain encoding loses exactly the re-articulated repeats
    g, o = chorales.train[0].pitches, chorales.train[0].onsets
    _, inferred = decode(encode(g), return_onsets=True)
    prev = np.vstack([np.full((1, 4), -2), g[:-1]])
    np.testing.assert_array_equal(inferred != o, o & (g == prev))
    assert (encode(g, o, hold=True) == HOLD).any()


def test_encode_rejects_out_of_range():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encode(np.array([[100, 60, 50, 40]]))
    with pytest.raises(ValueError, match=r"\(steps, 4\)"):
        encode(np.zeros((3, 3), int))


def test_missing_and_corrupt_embedded_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="build_chorales"):
        D.load_chorales(tmp_path / "nope.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip archive")
    with pytest.raises(ValueError, match="corrupt"):
        D.load_chorales(bad)


def _jsb_json(tmp_path, content):
    path = tmp_path / "Jsb16thSeparated.json"
    path.write_text(json.dumps(content))
    return path


def test_load_jsb_tiny_file(tmp_path):
    content = {s: [[[60, 55, 52, 48], [62, -1, 53, 47]]] for s in D.SPLITS}
    sp = D.load_jsb(_jsb_json(tmp_path, content), sha256=None)
    np.testing.assert_array_equal(sp.test[0].pitches, [[60, 55, 52, 48], [62, -1, 53, 47]])
    bad = tmp_path / "x.json"
    bad.write_text("{ not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        D.load_jsb(bad, sha256=None)
    with pytest.raises(ValueError, match="no 'valid' key"):
        D.load_jsb(_jsb_json(tmp_path, {"train": [], "test": []}), sha256=None)
    with pytest.raises(ValueError, match=r"train\[0\]"):
        D.load_jsb(_jsb_json(tmp_path, {"train": [[[60, 50]]], "valid": [], "test": []}), sha256=None)


def test_fetch_checks_sha256_and_keeps_cache_clean(tmp_path):
    src = _jsb_json(tmp_path, {s: [[[60, 55, 52, 48]]] for s in D.SPLITS})
    good = hashlib.sha256(src.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="checksum mismatch"):
        D.fetch(src.as_uri(), "0" * 64, cache)
    assert list(cache.iterdir()) == []                     # nothing half-written or wrong is kept
    path = D.fetch(src.as_uri(), good, cache)
    assert path.read_bytes() == src.read_bytes()
    sp = D.load_jsb(src.as_uri(), sha256=good, cache_dir=cache)
    assert len(sp.train) == 1


def test_official_jsb_split(jsb_path):
    sp = D.load_jsb(jsb_path)                              # checks the published sha256
    assert (len(sp.train), len(sp.valid), len(sp.test)) == (229, 76, 77)
    for p in sp.valid:
        np.testing.assert_array_equal(decode(encode(p.pitches)), p.pitches)
    with pytest.raises(ValueError, match="sha256"):
        D.load_jsb(jsb_path, sha256="0" * 64)


def test_load_data_switch(jsb_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_DATA", str(jsb_path))
    assert len(D.load_data().train) == 229
    monkeypatch.delenv("MUSICTX_DATA")
    assert len(D.load_data().train) == 197


def test_load_jsb_default_source_is_the_local_copy_when_named(tmp_path, monkeypatch):
    src = _jsb_json(tmp_path, {s: [[[60, 55, 52, 48]]] * 2 for s in D.SPLITS})
    monkeypatch.setenv("MUSICTX_JSB_PATH", str(src))
    assert len(D.load_jsb(sha256=None).valid) == 2                  # no download: the named file
    with pytest.raises(ValueError, match="sha256"):
        D.load_jsb()                                                # still checked against the official file
    monkeypatch.setenv("MUSICTX_JSB_PATH", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        D.load_jsb()


def test_atomic_write_leaves_no_part_file_and_the_usual_mode(tmp_path):
    import os

    from musictx_lite.files import atomic_write

    target = tmp_path / "x.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        atomic_write(target, lambda tmp: (open(tmp, "w").write("half"), (_ for _ in ()).throw(RuntimeError("x"))))
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
    umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "y.json", lambda tmp: open(tmp, "w").write("new"))
    finally:
        os.umask(umask)
    assert (tmp_path / "y.json").read_text() == "new"
    assert (tmp_path / "y.json").stat().st_mode & 0o777 == 0o644, "as open() makes it, not mkstemp's 0600"
