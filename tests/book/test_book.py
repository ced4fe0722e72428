"""The book's sources: notebooks without outputs, with cell ids, one pattern per chapter."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def config():
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean_and_has_the_chapter_shape(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code), "commit notebooks without outputs"
    ids = [c.get("id") for c in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), "every cell needs a unique id"
    md = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for part in ("Learning goals", "## Exercises", "## Summary", "```{bibliography}", "{cite:"):
        assert part in md, f"{path.name} lacks {part!r}"
    src = "\n".join("".join(c["source"]) for c in code)
    assert "assert " in src and "mtx.play(" in src and "piano_roll(" in src
    assert re.search(r"exercise_\d+_\d+\(", src)


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_installs_the_ref_the_colab_button_opens(path):
    """One ref, and it exists when a reader clicks: the Colab button opens the chapter at _config.yml's
    ``repository.branch``; the install cell installs the package from that repository at that ref, with the
    constraints file of that same ref. No tag that nobody made (``scripts.student_notebooks --links``)."""
    cfg = config()["repository"]
    slug = cfg["url"].removeprefix("https://github.com/")
    first = "".join(code_cells(path)[0]["source"])
    assert f'repo, ref = "{cfg["url"]}", "{cfg["branch"]}"' in first
    assert f'raw = "https://raw.githubusercontent.com/{slug}"' in first
    assert 'pins = f"{raw}/{ref}/colab-constraints.txt"' in first
    assert 'pkg = f"musictx-lite[audio] @ git+{repo}@{ref}"' in first
    assert '%pip install -q -c /tmp/colab-has.txt -c {pins} "{pkg}"' in first
    assert 'if "google.colab" in sys.modules:' in first and "mtx.setup()" in first
    assert "else:" in first and "Not on Colab" in first, "outside Colab the cell says what it does"
    assert "torch" not in first.split("import musictx_lite")[0], "Colab's torch stays as it is"


def test_links_moves_every_ref_together(tmp_path, monkeypatch):
    """A semester pinned to a tag: set repository.branch, run ``student_notebooks --links``; the install cell
    and the student link then name that tag and nothing else."""
    import shutil

    from scripts import student_notebooks as sn

    chapter = tmp_path / NOTEBOOKS[1].name
    shutil.copy(NOTEBOOKS[1], chapter)
    monkeypatch.setattr(sn, "repository", lambda: ("https://github.com/prof/musictx-lite", "prof/musictx-lite",
                                                     "v0.2.0"))
    assert sn.relink(chapter) is True
    text = chapter.read_text()
    first = "".join(code_cells(chapter)[0]["source"])
    assert 'repo, ref = "https://github.com/prof/musictx-lite", "v0.2.0"' in first
    assert 'raw = "https://raw.githubusercontent.com/prof/musictx-lite"' in first
    assert "colab.research.google.com/github/prof/musictx-lite/blob/v0.2.0/notebooks/students/" in text
    assert "musictx/musictx-lite" not in text and '"main"' not in first
    assert sn.relink(chapter) is False                                 # a second run changes nothing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_title_comes_first_and_the_install_cell_is_collapsed(path):
    """A reader sees the chapter's title first, not code about Colab; Colab still runs the install cell."""
    cells = json.loads(path.read_text())["cells"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown" and re.match(r"# \d+\. \S", first), \
        f"{path.name}: the first cell must be the chapter's title, '# N. Title'"
    install = code_cells(path)[0]
    assert {"hide-input", "hide-cell", "remove-input", "remove-cell"} & set(install["metadata"].get("tags", [])), \
        f"{path.name}: tag the install cell hide-input (collapsed in the book, runnable in Colab)"


# The book theme shows about 88 characters of code in its column; a longer line needs a scrollbar.
WIDTH = 88


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_lines_fit_the_rendered_column(path):
    wide = [(c["id"], line) for c in code_cells(path) for line in "".join(c["source"]).splitlines()
            if len(line) > WIDTH]
    assert not wide, f"{path.name}: {len(wide)} code lines wider than {WIDTH} characters, e.g. {wide[:3]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_heatmaps_go_through_the_plots_helper(path):
    """plots.heatmap draws every heatmap with a colour bar and two fixed colours for booleans."""
    src = "\n".join("".join(c["source"]) for c in code_cells(path))
    bare = re.findall(r"\.(imshow|matshow|pcolormesh)\(", src)
    assert not bare, f"{path.name} draws a heatmap with {bare}: use musictx_lite.classroom.plots.heatmap(s)"


def test_toc_lists_every_chapter_and_page():
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = {c["file"] for part in toc["parts"] for c in part["chapters"]} | {toc["root"]}
    assert {f"notebooks/{p.stem}" for p in NOTEBOOKS} <= files
    for f in files:
        assert (ROOT / f"{f}.md").exists() or (ROOT / f"{f}.ipynb").exists(), f
    cfg = config()
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert cfg["execute"]["allow_errors"] is False


def test_chapter_keyprefixes_match_their_citations():
    for path in NOTEBOOKS:
        md = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")
        prefix = re.search(r":keyprefix: (\S+)", md).group(1)
        keys = re.findall(r"\{cite:\w+\}`([^`]+)`", md)
        bib = (ROOT / "references.bib").read_text()
        for k in ",".join(keys).split(","):
            assert k.startswith(prefix), (path.name, k)
            assert "{" + k[len(prefix):] + "," in bib, (path.name, k)


def test_package_change_clears_the_execution_cache(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("package_cache", ROOT / "book" / "_ext" / "package_cache.py")
    pc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pc)
    cache = tmp_path / ".jupyter_cache"
    cache.mkdir()
    (cache / "entry").write_text("old outputs")
    fp = pc.package_fingerprint()
    assert pc.invalidate(cache, fp) is True and not cache.exists()      # no stamp yet: cleared
    cache.mkdir()
    (cache / "entry").write_text("new outputs")
    assert pc.invalidate(cache, fp) is False and cache.exists()          # nothing changed: reused
    monkeypatch.setenv("MUSICTX_PROFILE", "gpu")
    assert pc.package_fingerprint() != fp                                # the profile is part of the key
    assert pc.invalidate(cache, pc.package_fingerprint()) is True and not cache.exists()


def test_nbval_kernel_is_this_python():
    """The notebooks must run in the environment the tests installed, not another Python."""
    import sys

    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        out = []
        kc.execute_interactive("import sys; print(sys.executable)", output_hook=lambda m: out.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None, timeout=60)
        assert Path("".join(out).strip()).resolve() == Path(sys.executable).resolve()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_lex_as_ipython(path):
    """Sphinx highlights code as ipython3 and warns (failing the build) on tokens it cannot lex,
    such as a line continuation after a shell escape."""
    from pygments.lexers import get_lexer_by_name

    lexer = get_lexer_by_name("ipython3")
    for cell in code_cells(path):
        bad = [v for t, v in lexer.get_tokens("".join(cell["source"])) if "Error" in str(t)]
        assert not bad, f"{path.name}, cell {cell.get('id')}: cannot lex {bad[:3]}"


def test_literalinclude_patterns_are_found_in_their_files():
    """A `literalinclude` with :start-at: / :end-at: shows the package's code; a pattern that the code no longer
    holds is a broken page (Sphinx only warns), so each must occur in the file it includes."""
    import re

    root = Path(__file__).resolve().parents[2]
    found = 0
    for page in sorted((root / "book").glob("*.md")):
        for target, options in re.findall(r"```\{literalinclude\} (\S+)\n((?::[\w-]+:.*\n)*)", page.read_text()):
            code = (page.parent / target).resolve().read_text()
            for key, pattern in re.findall(r":(start-at|end-at|start-after|end-before): (.*)", options):
                found += 1
                assert pattern in code, f"{page.name}: {key} {pattern!r} is not in {target}"
    assert found > 0


def test_every_test_file_a_repository_file_names_exists():
    """Workflows, comments and pages name test files by path (`pytest tests/book/test_offline.py`); a path left
    behind by a move runs nothing, or stops a workflow with "file not found"."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    named = {}
    for f in files:
        path = ROOT / f
        if path.suffix in {".py", ".md", ".yml", ".yaml", ".txt", ".toml", ".cfg", ".ipynb", ""} and path.is_file():
            for m in re.finditer(r"\btests/[\w/]+\.py\b", path.read_text(errors="replace")):
                named.setdefault(m.group(), f)
    assert "tests/book/test_offline.py" in named                           # the scan sees the workflow's step
    missing = {p: f for p, f in named.items() if not (ROOT / p).is_file()}
    assert not missing, f"named but not there (path: the file naming it): {missing}"
