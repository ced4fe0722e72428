"""``load_maestro`` on a fake MAESTRO v3.0.0 built here: a CSV of eight performances and a zip of small MIDI
files. The download runs from file:// URLs (the module's URL constants, patched), never from the network."""
import csv
import json
import shutil
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest

from musictx_lite.files import sha256
from musictx_lite.io import corpus as C
from musictx_lite.io.performance import write_performance

# composer, title, the CSV's split, midi_filename: eight performances of six pieces
ROWS = [("Johann Sebastian Bach", "Prelude in C", "train", "2004/bach_a.mid"),
        ("Frédéric Chopin", "Ballade No. 1", "train", "2004/chopin.mid"),
        ("Johann Sebastian Bach", "Prelude in C", "train", "2006/bach_b.mid"),
        ("Franz Liszt", "Sonata in B Minor", "train", "2006/liszt.mid"),
        ("Franz Schubert", "Impromptu Op. 90 No. 3", "validation", "2004/schubert_a.mid"),
        ("Franz Schubert", "Impromptu Op. 90 No. 3", "validation", "2008/schubert_b.mid"),
        ("Ludwig van Beethoven", "Sonata No. 8", "test", "2004/beethoven.mid"),
        ("Joseph Haydn", "Sonata in E-flat", "test", "2008/haydn.mid")]
FAKE_COUNTS = {"train": 4, "valid": 2, "test": 2}


@pytest.fixture(autouse=True)
def fake_world(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSICTX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(C, "MAESTRO_COUNTS", FAKE_COUNTS)


def midi_bytes(i: int, tmp) -> bytes:
    """A small MIDI file, different for each ``i``: two notes, [start s, end s, pitch, velocity]."""
    notes = np.array([[0.0, 0.5, 60 + i, 70], [0.5, 1.25, 64 + i, 90]])
    path = write_performance(notes, tmp / f"_note{i}.mid")
    data = path.read_bytes()
    path.unlink()
    return data


def make_maestro(folder, rows=ROWS, zipped=True, bad_midi=(), leave_out=(), columns=C.MAESTRO_COLUMNS):
    """A fake MAESTRO in ``folder``: maestro-v3.0.0.csv and the zip (or the unzipped folder). ``bad_midi``:
    files whose bytes are not MIDI; ``leave_out``: files the CSV names that are not there."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "maestro-v3.0.0.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for composer, title, split, midi in rows:
            row = dict(canonical_composer=composer, canonical_title=title, split=split, year=midi[:4],
                       midi_filename=midi, audio_filename=midi.replace(".mid", ".wav"), duration="1.25")
            w.writerow([row.get(c, "") for c in columns])
    members = {f"maestro-v3.0.0/{m}": b"not a MIDI file at all" if m in bad_midi else midi_bytes(i, folder)
               for i, (_, _, _, m) in enumerate(rows) if m not in leave_out}
    if zipped:
        with zipfile.ZipFile(folder / "maestro-v3.0.0-midi.zip", "w", zipfile.ZIP_STORED) as z:
            for name, data in members.items():
                z.writestr(name, data)
    else:
        for name, data in members.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    return members


def corrupt_member(folder, members, name):
    """Flip one byte inside ``name``'s stored data in the zip: its CRC-32 no longer matches."""
    path = folder / "maestro-v3.0.0-midi.zip"
    raw = bytearray(path.read_bytes())
    at = raw.find(members[name])
    assert at > 0 and raw.count(members[name]) == 1
    raw[at + len(members[name]) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def names(data, split):
    return [p.name for p in data[split]]


def test_splits_and_pieces_follow_the_csv(tmp_path, capsys):
    make_maestro(tmp_path / "m")
    data = C.load_maestro(tmp_path / "m")
    assert names(data, "train") == ["2004/bach_a", "2004/chopin", "2006/bach_b", "2006/liszt"]
    assert names(data, "valid") == ["2004/schubert_a", "2008/schubert_b"]          # validation -> valid
    assert names(data, "test") == ["2004/beethoven", "2008/haydn"]
    assert [p.piece for p in data.train] == ["Johann Sebastian Bach: Prelude in C", "Frédéric Chopin: Ballade No. 1",
                                             "Johann Sebastian Bach: Prelude in C", "Franz Liszt: Sonata in B Minor"]
    assert {p.piece for p in data.valid} == {"Franz Schubert: Impromptu Op. 90 No. 3"}
    assert data.source == "MAESTRO v3.0.0 (8 performances, official split)" and data.skipped == []
    np.testing.assert_allclose(data.test[1].notes[:, 2], [67, 71])                  # haydn: i = 7
    # checked, recorded beside the zip, announced in one line, unzipped beside it
    rec = json.loads((tmp_path / "m" / "maestro-v3.0.0.check.json").read_text())
    z = rec["files"]["maestro-v3.0.0-midi.zip"]
    assert z["bytes"] == (tmp_path / "m" / "maestro-v3.0.0-midi.zip").stat().st_size and len(z["sha256"]) == 64
    assert "CRC-32 of all 8 members" in rec["checks"] and "all 8 MIDI files of the CSV in it" in rec["checks"]
    out = capsys.readouterr().out.strip().splitlines()
    assert any(z["sha256"] in line for line in out) and "CRC-32" in " ".join(out)
    assert max(map(len, out)) <= 88                                       # the book's column
    assert (tmp_path / "m" / "maestro-v3.0.0" / "2008" / "haydn.mid").is_file()
    assert [p.name for p in (tmp_path / "m").iterdir() if p.name.startswith(".")] == []   # no leftovers


def test_root_may_hold_the_unzipped_folder(tmp_path, capsys):
    make_maestro(tmp_path / "m", zipped=False)
    data = C.load_maestro(tmp_path / "m")
    assert [len(data[s]) for s in ("train", "valid", "test")] == [4, 2, 2]
    assert capsys.readouterr().out == "" and not (tmp_path / "m" / "maestro-v3.0.0.check.json").exists()


def test_a_root_without_maestro_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no MAESTRO v3.0.0"):
        C.load_maestro(tmp_path / "empty")


def test_a_corrupt_member_fails_the_crc_check(tmp_path):
    members = make_maestro(tmp_path / "m")
    corrupt_member(tmp_path / "m", members, "maestro-v3.0.0/2006/liszt.mid")
    with pytest.raises(ValueError, match=r"member maestro-v3.0.0/2006/liszt.mid fails its CRC-32 check"):
        C.load_maestro(tmp_path / "m")
    assert not (tmp_path / "m" / "maestro-v3.0.0").exists()                        # nothing unzipped


def test_a_file_the_csv_names_but_the_zip_lacks_is_an_error(tmp_path):
    make_maestro(tmp_path / "m", leave_out=("2008/haydn.mid",))
    with pytest.raises(ValueError, match=r"lacks 1 of the 8 MIDI files the CSV names \(first: maestro-v3.0.0/2008"):
        C.load_maestro(tmp_path / "m")
    make_maestro(tmp_path / "u", zipped=False, leave_out=("2008/haydn.mid",))
    with pytest.raises(ValueError, match="lacks 1 of the 8 MIDI files"):
        C.load_maestro(tmp_path / "u")


@pytest.mark.parametrize("defect, match", [
    ("split", r"row 4: split 'dev' is none of \['train', 'validation', 'test'\]"),
    ("column", r"lacks MAESTRO's columns \['duration'\]"),
    ("count", r"lists 8 performances \(train 4, valid 2, test 2\); MAESTRO v3.0.0 has 1,276 \(train 962"),
])
def test_a_wrong_csv_is_an_error(tmp_path, monkeypatch, defect, match):
    rows = [r if i != 2 or defect != "split" else r[:2] + ("dev",) + r[3:] for i, r in enumerate(ROWS)]
    make_maestro(tmp_path / "m", rows, columns=C.MAESTRO_COLUMNS[:-1] if defect == "column" else C.MAESTRO_COLUMNS)
    if defect == "count":
        monkeypatch.setattr(C, "MAESTRO_COUNTS", {"train": 962, "valid": 137, "test": 177})
    with pytest.raises(ValueError, match=match):
        C.load_maestro(tmp_path / "m")


def test_max_files_reads_the_first_of_each_split_in_proportion(tmp_path):
    make_maestro(tmp_path / "m")
    data = C.load_maestro(tmp_path / "m", max_files=4)
    assert [names(data, s) for s in ("train", "valid", "test")] == [["2004/bach_a", "2004/chopin"],
                                                                     ["2004/schubert_a"], ["2004/beethoven"]]
    assert data.source == "MAESTRO v3.0.0 (4 performances, official split)"
    assert [len(C.load_maestro(tmp_path / "m", max_files=1)[s]) for s in ("train", "valid", "test")] == [1, 0, 0]
    assert sum(len(C.load_maestro(tmp_path / "m", max_files=100)[s]) for s in ("train", "valid", "test")) == 8
    with pytest.raises(ValueError, match="max_files must be a positive integer"):
        C.load_maestro(tmp_path / "m", max_files=0)
    # MAESTRO's own sizes: 30 files are 23 + 3 + 4, and 3 files one of each
    rows = [{"split": s} for s, n in C.MAESTRO_SPLITS.items() for _ in range({"train": 962, "validation": 137,
                                                                              "test": 177}[s])]
    for r in rows:
        r["split"] = C.MAESTRO_SPLITS[r["split"]]
    for n, want in ((30, [23, 3, 4]), (3, [1, 1, 1]), (1276, [962, 137, 177])):
        got = C._first(rows, n)
        assert [sum(r["split"] == s for r in got) for s in ("train", "valid", "test")] == want


def test_the_zip_is_unzipped_once(tmp_path, monkeypatch):
    make_maestro(tmp_path / "m")
    first = C.load_maestro(tmp_path / "m")

    def never(*args):
        raise AssertionError("unzipped or checked again")

    monkeypatch.setattr(C, "extract_maestro", never)
    monkeypatch.setattr(C, "check_maestro_zip", never)
    again = C.load_maestro(tmp_path / "m")
    assert [p.name for p in again.train] == [p.name for p in first.train]
    np.testing.assert_array_equal(again.train[0].tokens, first.train[0].tokens)


def test_a_corrupt_midi_file_is_skipped_with_a_warning(tmp_path):
    make_maestro(tmp_path / "m", bad_midi=("2004/chopin.mid",))
    with pytest.warns(C.SkippedFile, match="chopin.mid"):
        data = C.load_maestro(tmp_path / "m")
    assert names(data, "train") == ["2004/bach_a", "2006/bach_b", "2006/liszt"]
    assert len(data.skipped) == 1 and data.skipped[0][0].endswith("2004/chopin.mid")
    assert "not a readable MIDI file" in data.skipped[0][1]
    assert data.source == "MAESTRO v3.0.0 (7 performances, official split)"


@pytest.fixture
def publisher(tmp_path, monkeypatch):
    """The fake MAESTRO served from file:// URLs in place of the publisher's."""
    site = tmp_path / "site"
    members = make_maestro(site)
    monkeypatch.setattr(C, "MAESTRO_ZIP_URL", (site / "maestro-v3.0.0-midi.zip").as_uri())
    monkeypatch.setattr(C, "MAESTRO_CSV_URL", (site / "maestro-v3.0.0.csv").as_uri())
    return site, members


def test_download_into_the_cache_checked_and_recorded(tmp_path, publisher, monkeypatch, capsys):
    site, _ = publisher
    data = C.load_maestro()
    cached = tmp_path / "cache" / "maestro"
    assert data.source == "MAESTRO v3.0.0 (8 performances, official split)"
    assert names(data, "valid") == ["2004/schubert_a", "2008/schubert_b"]
    for name in ("maestro-v3.0.0-midi.zip", "maestro-v3.0.0.csv"):
        assert (cached / name).read_bytes() == (site / name).read_bytes()
    rec = json.loads((cached / "maestro-v3.0.0.check.json").read_text())
    assert rec["files"]["maestro-v3.0.0.csv"]["url"] == C.MAESTRO_CSV_URL
    assert rec["files"]["maestro-v3.0.0-midi.zip"]["sha256"] == sha256(site / "maestro-v3.0.0-midi.zip")
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:3]] == ["downloading", "downloading", "MAESTRO"]
    # the second call downloads nothing
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("downloaded again"))
    assert names(C.load_maestro(), "test") == ["2004/beethoven", "2008/haydn"]


def test_a_failed_download_is_a_clear_oserror_and_leaves_nothing(tmp_path, publisher, monkeypatch):
    def unreachable(*args, **kwargs):
        raise urllib.error.URLError(OSError(101, "Network is unreachable"))

    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(OSError, match=r"could not download file://.*maestro-v3.0.0.csv \(.*Network is unreachable"
                                      r".*\); download it by hand into a folder and pass that folder as root="):
        C.load_maestro()
    assert list((tmp_path / "cache" / "maestro").iterdir()) == []
    # a connection that ends early is no better
    monkeypatch.undo()
    monkeypatch.setenv("MUSICTX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(C, "MAESTRO_COUNTS", FAKE_COUNTS)
    monkeypatch.setattr(C, "MAESTRO_CSV_URL", (tmp_path / "site" / "nowhere.csv").as_uri())
    with pytest.raises(OSError, match="could not download .*nowhere.csv"):
        C.load_maestro()


def test_a_corrupt_download_is_discarded(tmp_path, publisher):
    site, members = publisher
    corrupt_member(site, members, "maestro-v3.0.0/2004/chopin.mid")
    with pytest.raises(ValueError, match=r"file://.*member maestro-v3.0.0/2004/chopin.mid fails its CRC-32 check"
                                         r".*the download was discarded"):
        C.load_maestro()
    cached = tmp_path / "cache" / "maestro"
    assert sorted(p.name for p in cached.iterdir()) == ["maestro-v3.0.0.csv"]     # the good CSV stays


def test_a_pinned_sha256_is_checked_by_fetch(tmp_path, publisher, monkeypatch):
    site, _ = publisher
    zip_sha = sha256(site / "maestro-v3.0.0-midi.zip")
    monkeypatch.setattr(C, "MAESTRO_CSV_SHA256", sha256(site / "maestro-v3.0.0.csv"))
    monkeypatch.setattr(C, "MAESTRO_ZIP_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="checksum mismatch"):
        C.load_maestro()
    assert not (tmp_path / "cache" / "maestro" / "maestro-v3.0.0-midi.zip").exists()
    monkeypatch.setattr(C, "MAESTRO_ZIP_SHA256", zip_sha)
    data = C.load_maestro()
    assert len(data.train) == 4
    rec = json.loads((tmp_path / "cache" / "maestro" / "maestro-v3.0.0.check.json").read_text())
    assert "sha256 as pinned" in rec["checks"]
    # a root whose zip differs from the pinned one is refused
    shutil.copytree(site, tmp_path / "other")
    monkeypatch.setattr(C, "MAESTRO_ZIP_SHA256", "1" * 64)
    with pytest.raises(ValueError, match="not MAESTRO_ZIP_SHA256"):
        C.load_maestro(tmp_path / "other")
