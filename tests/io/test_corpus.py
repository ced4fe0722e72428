"""Folders of MIDI files as data sets (chapter 13): bad files skipped and listed, splits by piece, the cache,
the training crops of performances, and the shared piano sample."""
from pathlib import Path

import numpy as np
import pytest
import torch

from musictx_lite.io import corpus as C
from musictx_lite.io import performance as P
from musictx_lite.io.data import SPLITS
from musictx_lite.io.performance import NOTE_ON, PAD, TIME_SHIFT, Performance
from musictx_lite.models.tasks import EVENTS, SHIFTS, STRETCHES, EventCrops, sequence, transposed_events


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Every test's own cache: nothing read here lands in ~/.cache or the repository."""
    root = tmp_path / "cache"
    monkeypatch.setenv("MUSICTX_CACHE", str(root))
    return root


def random_notes(rng, n=40) -> np.ndarray:
    """``n`` notes on distinct 50 ms slots (no two onsets in one tick, even stretched by 0.95)."""
    start = np.sort(rng.choice(20 * n, n, replace=False)) * 0.05
    return np.column_stack([start, start + rng.uniform(0.05, 1.0, n), rng.integers(36, 96, n),
                            rng.integers(20, 120, n)])


def performances(n: int, seed: int = 0, versions: int = 1, notes: int = 40) -> list[Performance]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        for v in range(versions):
            x = random_notes(rng, notes)
            out.append(Performance(f"p{i}v{v}", x, P.encode(x), piece=f"piece {i}"))
    return out


def write_drums(path: Path) -> None:
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    drums = pretty_midi.Instrument(0, is_drum=True, name="drums")
    drums.notes += [pretty_midi.Note(velocity=100, pitch=36 + k, start=0.25 * k, end=0.25 * k + 0.1) for k in range(8)]
    pm.instruments.append(drums)
    pm.write(str(path))


def write_silent(path: Path) -> None:
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(0, name="piano")                 # a track with a pedal and no notes
    piano.control_changes.append(pretty_midi.ControlChange(P.PEDAL, 127, 0.5))
    pm.instruments.append(piano)
    pm.write(str(path))


GOOD = ["a", "sub/b", "sub/deeper/c", "UPPER"]                      # pieces: the paths without their suffix
BAD = {"corrupt.mid": "readable", "empty.mid": "empty", "drums.mid": "drum", "silent.mid": "no notes",
       "long.mid": "hours", "sub/truncated.midi": "readable"}       # file -> a word its reason must hold


def make_corpus(root: Path, seed: int = 0) -> Path:
    """A folder of good and bad MIDI files, and some that are no MIDI files at all."""
    rng = np.random.default_rng(seed)
    for name in GOOD:
        suffix = ".MIDI" if name == "UPPER" else ".mid"
        P.write_performance(random_notes(rng), root / f"{name}{suffix}")
    (root / "corrupt.mid").write_bytes(rng.integers(0, 256, 3000, dtype=np.uint8).tobytes())
    (root / "empty.mid").write_bytes(b"")
    write_drums(root / "drums.mid")
    write_silent(root / "silent.mid")
    P.write_performance(np.array([[0.0, 1.0, 60, 64], [3 * 3600.0, 3 * 3600 + 1.0, 62, 64]]), root / "long.mid")
    whole = (root / "a.mid").read_bytes()
    (root / "sub" / "truncated.midi").write_bytes(whole[: len(whole) // 2])
    (root / "notes.txt").write_text("not a MIDI file, and not named as one\n")
    (root / "sub" / "readme.md").write_bytes(whole)                 # MIDI bytes, but not a MIDI name: ignored
    (root / "folder.mid").mkdir()                                    # a folder named like a MIDI file: ignored
    return root


def load_warned(folder, n_bad: int, **kw) -> C.Performances:
    """``load_folder``, checking that it warns exactly once per skipped file and nothing else goes wrong."""
    with pytest.warns(C.SkippedFile) as caught:
        data = C.load_folder(folder, **kw)
    skipped = [w for w in caught if issubclass(w.category, C.SkippedFile)]
    assert len(skipped) == n_bad, [str(w.message) for w in skipped]
    assert sorted(str(w.message) for w in skipped) == sorted(f"skipped {p}: {why}" for p, why in data.skipped)
    return data


def names(data) -> dict[str, list[str]]:
    return {s: sorted(p.piece for p in data[s]) for s in SPLITS}


def test_load_folder_skips_exactly_the_bad_files(tmp_path):
    root = make_corpus(tmp_path / "midi")
    data = load_warned(root, len(BAD))
    assert sorted(sum(names(data).values(), [])) == sorted(GOOD)
    skipped = {Path(p).relative_to(root).as_posix(): why for p, why in data.skipped}
    assert sorted(skipped) == sorted(BAD)
    for name, word in BAD.items():
        assert word in skipped[name], (name, skipped[name])
        assert str(root) not in skipped[name], "the reason repeats the path"
    assert "3.0 hours" in skipped["long.mid"] and "more than 2" in skipped["long.mid"]
    upper = next(p for s in SPLITS for p in data[s] if p.piece == "UPPER")
    assert upper.name == "UPPER" and upper.source.endswith("UPPER.MIDI") and upper.tokens[0] == P.BOS
    for s in SPLITS:
        for p in data[s]:
            np.testing.assert_array_equal(p.tokens, P.read_performance(p.source).tokens)
    assert f"skipped: {len(BAD)} files" in data.summary() and "(10 MIDI files)" in data.source


def test_max_hours(tmp_path):
    root = make_corpus(tmp_path / "midi")
    data = load_warned(root, len(BAD) - 1, max_hours=4)
    long = next(p for s in SPLITS for p in data[s] if p.piece == "long")
    assert long.seconds == pytest.approx(3 * 3600 + 1, abs=0.01) and "long.mid" not in str(data.skipped)
    with pytest.warns(C.SkippedFile) as caught:                     # one second: every file is too long
        with pytest.raises(ValueError, match="none of the 10 MIDI files"):
            C.load_folder(root, max_hours=1 / 3600)
    assert len(caught) == 10 and sum("more than 0.000277778" in str(w.message) for w in caught) == 5


def test_load_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        C.load_folder(tmp_path / "missing")
    (tmp_path / "file.mid").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        C.load_folder(tmp_path / "file.mid")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="holds no .mid or .midi files"):
        C.load_folder(tmp_path / "text")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.mid").write_bytes(b"")
    write_drums(bad / "drums.mid")
    with pytest.warns(C.SkippedFile):
        with pytest.raises(ValueError, match=r"none of the 2 MIDI files in .*bad could be read \(first: .*drums.mid: "
                                             r"has only drum notes\)"):
            C.load_folder(bad)


def test_splits_are_by_piece_and_deterministic(tmp_path):
    root = make_corpus(tmp_path / "midi")
    first = names(load_warned(root, len(BAD)))
    assert [len(first[s]) for s in SPLITS] == [2, 1, 1]            # 4 pieces: at least one to valid and test
    again = names(load_warned(root, len(BAD), cache=False))
    assert again == first
    # versions of one piece stay together, whatever the order they come in
    perfs = performances(12, versions=3, notes=5)
    sp = C.split_by_piece(perfs)
    where = {}
    for s in SPLITS:
        for p in sp[s]:
            assert where.setdefault(p.piece, s) == s, f"{p.piece} in {where[p.piece]} and {s}"
    assert sorted(p.name for s in SPLITS for p in sp[s]) == sorted(p.name for p in perfs)
    shuffled = [perfs[i] for i in np.random.default_rng(0).permutation(len(perfs))]
    assert {s: sorted(p.name for p in C.split_by_piece(shuffled)[s]) for s in SPLITS} == \
        {s: sorted(p.name for p in sp[s]) for s in SPLITS}
    assert [len({p.piece for p in sp[s]}) for s in SPLITS] == [10, 1, 1]


@pytest.mark.parametrize("n, valid, test, counts", [(20, 0.1, 0.2, (14, 2, 4)), (20, 0.0, 0.5, (10, 0, 10)),
                                                    (3, 0.1, 0.1, (1, 1, 1)), (2, 0.1, 0.1, (2, 0, 0)),
                                                    (10, 0.25, 0.0, (8, 2, 0)), (1, 0.4, 0.4, (1, 0, 0))])
def test_split_by_piece_fractions(n, valid, test, counts):
    sp = C.split_by_piece(performances(n, versions=2, notes=3), valid, test)
    assert tuple(len({p.piece for p in sp[s]}) for s in SPLITS) == counts
    assert tuple(len(sp[s]) for s in SPLITS) == tuple(2 * c for c in counts)


@pytest.mark.parametrize("valid, test", [(1.0, 0.0), (0.0, 1.0), (-0.1, 0.1), (0.1, -0.1), (0.5, 0.5), (0.7, 0.6)])
def test_split_by_piece_rejects_bad_fractions(valid, test):
    with pytest.raises(ValueError, match="fractions"):
        C.split_by_piece(performances(3, notes=3), valid, test)


def test_the_cache_is_used_the_second_time(tmp_path, cache, monkeypatch):
    root = make_corpus(tmp_path / "midi")
    first = load_warned(root, len(BAD))
    entries = sorted((cache / "performance" / f"v{P.CODEC_VERSION}").glob("*.npz"))
    assert len(entries) == len(GOOD) + 1                              # the long file is read, then refused
    assert not any(root.rglob("*.npz")) and not any(root.rglob("*.part"))
    read = []

    def spy(path, piece=""):
        read.append(Path(path).relative_to(root).as_posix())
        return P.read_performance(path, piece)

    monkeypatch.setattr(C, "read_performance", spy)
    second = load_warned(root, len(BAD))
    assert sorted(read) == sorted(set(BAD) - {"long.mid"})             # only what could not be cached
    for s in SPLITS:
        assert [p.name for p in second[s]] == [p.name for p in first[s]]
        for a, b in zip(first[s], second[s]):
            np.testing.assert_array_equal(a.tokens, b.tokens)
            np.testing.assert_array_equal(a.notes, b.notes)
            assert (a.piece, a.source) == (b.piece, b.source)
            np.testing.assert_array_equal(sequence(b), sequence(a))
            assert sequence(b).dtype == np.int64

    # damaged entries: garbage, cut in half, empty, one member's bytes changed: each is read again and mended
    good = []
    for e in entries:
        with np.load(e) as z:
            if z["notes"][:, 0].max() < 3600:
                good.append(e)
    whole = good[1].read_bytes()
    good[0].write_bytes(b"not an npz file at all")
    good[1].write_bytes(whole[: len(whole) // 2])
    good[2].write_bytes(b"")
    flipped = bytearray(good[3].read_bytes())
    flipped[100:140] = b"x" * 40
    good[3].write_bytes(bytes(flipped))
    read.clear()
    third = load_warned(root, len(BAD))
    assert len(read) == len(BAD) - 1 + 4
    assert names(third) == names(first)
    for s in SPLITS:
        for a, b in zip(first[s], third[s]):
            np.testing.assert_array_equal(a.tokens, b.tokens)
    for e in good:
        with np.load(e, allow_pickle=False) as z:
            assert z["tokens"][0] == P.BOS and z["notes"].shape[1] == 4


def test_no_cache_writes_nothing(tmp_path, cache):
    root = make_corpus(tmp_path / "midi")
    load_warned(root, len(BAD), cache=False)
    assert not cache.exists() or not any(cache.rglob("*.npz"))


def test_read_cached_keys_by_content_not_name(tmp_path, cache):
    x = random_notes(np.random.default_rng(5))
    P.write_performance(x, tmp_path / "one.mid")
    (tmp_path / "two.mid").write_bytes((tmp_path / "one.mid").read_bytes())
    a = C.read_cached(tmp_path / "one.mid")
    b = C.read_cached(tmp_path / "two.mid", piece="the piece")
    assert len(list(cache.rglob("*.npz"))) == 1
    assert (a.name, b.name, b.piece, b.source) == ("one", "two", "the piece", str(tmp_path / "two.mid"))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    with pytest.raises(FileNotFoundError):
        C.read_cached(tmp_path / "missing.mid")


# the training crops of performances (models/tasks.py)

def test_event_crops_shapes_and_targets():
    perfs = performances(3, notes=60)
    crops = EventCrops(perfs, 32, seed=0)
    x, y = crops.batch(16)
    assert x.shape == y.shape == (16, 32) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])                                      # y is x shifted by one
    seqs = [p.tokens.tolist() for p in perfs]
    for row in torch.cat([x, y[:, -1:]], 1).tolist():                            # every crop a slice of a piece
        assert any(any(s[k: k + 33] == row for k in range(len(s) - 32)) for s in seqs)
    assert (x != PAD).all()                                                       # long pieces: never past the end


def test_event_crops_pad_past_the_end():
    short = performances(1, notes=2)[0]
    n = len(short.tokens)
    x, y = EventCrops([short], 32, seed=0).batch(4)
    for b in range(4):
        assert x[b, :n].tolist() == short.tokens.tolist() and (x[b, n:] == PAD).all()
        assert y[b, : n - 1].tolist() == short.tokens[1:].tolist() and (y[b, n - 1:] == PAD).all()


def test_event_crops_are_seeded():
    perfs = performances(3, notes=60)
    a = [EventCrops(perfs, 32, seed=s, augment=True).batch(8) for s in (0, 0, 1)]
    assert torch.equal(a[0][0], a[1][0]) and torch.equal(a[0][1], a[1][1])
    assert not torch.equal(a[0][0], a[2][0])


def token_kind(t: torch.Tensor) -> torch.Tensor:
    """0: PAD or BOS, 1: note-on, 2: note-off, 3: time shift, 4: velocity."""
    edges = torch.tensor([NOTE_ON, P.NOTE_OFF, TIME_SHIFT, P.VELOCITY])
    return torch.bucketize(t, edges, right=True)


def test_augmentation_moves_only_the_keys_by_at_most_three():
    perfs = performances(3, notes=60)
    crops = EventCrops(perfs, 48, seed=3, augment=True)
    state = crops.gen.get_state()
    x, y = crops.batch(64)
    crops.gen.set_state(state)
    drawn = crops.draw(64)                                                        # the same draws again
    assert {s for _, s, _, _ in drawn} == set(STRETCHES) and {k for *_, k in drawn} == set(SHIFTS)
    rows = torch.cat([x, y[:, -1:]], 1)
    assert rows.min() >= 0 and rows.max() < P.VOCAB_SIZE
    for row, (i, stretch, start, shift) in zip(rows, drawn):
        base = crops.events(i, stretch)[start: start + 49]
        keys = (base >= NOTE_ON) & (base < TIME_SHIFT)
        assert keys.any() and torch.equal(row[~keys], base[~keys])               # time, velocity: untouched
        assert ((row[keys] - base[keys]) == shift).all() and abs(shift) <= 3
        assert torch.equal(token_kind(row), token_kind(base))                   # a note-on stays a note-on
        assert torch.equal(row, transposed_events(base, shift))


def test_augmentation_keeps_every_key_on_the_keyboard():
    x = np.array([[0.0, 0.5, 21, 64], [0.5, 1.0, 126, 64], [1.0, 1.5, 60, 64]])
    crops = EventCrops([Performance("edge", x, P.encode(x))], 8, seed=0, augment=True)
    shifts = {k for *_, k in crops.draw(200)}
    assert shifts == {-3, -2, -1, 0, 1}
    x[0, 2], x[1, 2] = 0, 127
    crops = EventCrops([Performance("full", x, P.encode(x))], 8, seed=0, augment=True)
    assert {k for *_, k in crops.draw(50)} == {0}
    x, _ = crops.batch(50)
    assert (x == crops.events(0, 1.0)[:8]).all(1).any() and x.max() < P.VOCAB_SIZE


@pytest.mark.parametrize("stretch", STRETCHES)
def test_stretched_events_scale_the_times(stretch):
    perf = performances(1, seed=4, notes=80)[0]
    crops = EventCrops([perf], 32, seed=0, augment=True)
    events = crops.events(0, stretch)
    assert crops.events(0, stretch) is events                                    # encoded once, then kept
    ticks = lambda t: int(sum(int(v) - TIME_SHIFT + 1 for v in t if TIME_SHIFT <= v < P.VELOCITY))  # noqa: E731
    total, original = ticks(events), ticks(perf.tokens)
    assert abs(total - stretch * original) <= 1 and abs(total / original - stretch) < 0.05
    got, want = P.decode(events), P.decode(perf.tokens)
    assert len(got) == len(want)
    np.testing.assert_array_equal(got[:, 2], want[:, 2])
    np.testing.assert_allclose(got[:, 0], stretch * want[:, 0], atol=0.005 + 1e-9)
    np.testing.assert_array_equal(P.velocity_bin(got[:, 3]), P.velocity_bin(want[:, 3]))


def test_events_task():
    perfs = performances(3, notes=30)
    assert EVENTS.sampler(perfs, 16, 0, transpose=True).augment
    assert not EVENTS.sampler(perfs, 16, 0).augment
    assert sequence(perfs[0]).tolist() == perfs[0].tokens.tolist() and sequence(perfs[0]).dtype == np.int64


# the project's shared sample

def test_piano_sample_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_PIANO_PATH", str(tmp_path))                     # no pairs.csv there
    assert C.sample_root() is None
    with pytest.raises(FileNotFoundError, match="not on this machine"):
        C.load_piano_sample()
    with pytest.raises(FileNotFoundError, match="not on this machine"):
        C.load_piano_sample(root=tmp_path)
    (tmp_path / "pairs.csv").write_text("Name\tGroundTruth\tMaestro\tGiantMIDI-Piano\n")
    for bad in (("nope",), ()):
        with pytest.raises(ValueError, match="versions must be some of"):
            C.load_piano_sample(bad, root=tmp_path)


@pytest.mark.slow
def test_shared_piano_sample(piano_path, cache):
    assert C.sample_root() == piano_path
    data = C.load_piano_sample(("maestro", "giantmidi", "scores"))
    assert data.skipped == []
    where = {}
    for s in SPLITS:
        for p in data[s]:
            assert where.setdefault(p.piece, s) == s, f"{p.piece} in {where[p.piece]} and {s}"
            assert p.name.split("/")[0] in C.VERSIONS and Path(p.source).is_relative_to(piano_path)
    assert len(where) == 52
    assert [len({p.piece for p in data[s]}) for s in SPLITS] == [42, 5, 5]
    assert [len(data[s]) for s in SPLITS] == [126, 15, 15]
    for s in SPLITS:                                                             # each piece in its three versions
        versions = {}
        for p in data[s]:
            versions.setdefault(p.piece, set()).add(p.name.split("/")[0])
        assert all(v == set(C.VERSIONS) for v in versions.values())
    assert len(list(cache.rglob("*.npz"))) == 156                               # cached where MUSICTX_CACHE says
    hours = sum(p.seconds for s in SPLITS for p in data[s]) / 3600
    print(f"\nshared sample: {sum(len(data[s]) for s in SPLITS)} performances, {hours:.1f} hours, "
          f"{sum(len(p) for s in SPLITS for p in data[s]):,d} events")
