"""scripts/build_slides.py: reveal.js decks from the executed chapters, offline.

The deck of chapter 0 is built from the small book that tests/book/test_offline.py builds (one build per
test run, shared); the slide structure of every chapter is checked on the sources, without running them.
"""
from __future__ import annotations

import html
import html.parser
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from test_offline import CHAPTER, SCREENSHOTS, chromium_or_skip, offline, small_book  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def load_script():
    spec = importlib.util.spec_from_file_location("build_slides", ROOT / "scripts" / "build_slides.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bs = load_script()


class Text(html.parser.HTMLParser):
    """The visible text of a page, and every src/href it loads."""

    def __init__(self):
        super().__init__()
        self.text, self.refs, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "script" and a.get("src"):
            self.refs.append(a["src"])
        if tag == "link" and a.get("href"):
            self.refs.append(a["href"])

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@pytest.fixture(scope="module")
def deck(small_book, tmp_path_factory):
    html_dir, _ = small_book
    out = tmp_path_factory.mktemp("slides")
    r = subprocess.run([sys.executable, "-m", "scripts.build_slides", "--out", str(out),
                        "--build", str(html_dir.parent), str(ROOT / f"{CHAPTER}.ipynb")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "from executed copy" in r.stdout, r.stdout + r.stderr      # reused the book's outputs
    index = (out / "index.html").read_text()
    assert f'href="{Path(CHAPTER).name}.slides.html">0. Music as tokens</a>' in index
    return out / f"{Path(CHAPTER).name}.slides.html"


def test_deck_has_slides_math_figures_and_audio_but_no_long_code(deck):
    page = deck.read_text()
    p = Text()
    p.feed(page)
    text = "".join(p.text)
    assert page.count("<section") >= 15
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', page)) >= 3
    assert re.search(r'<source[^>]+src="data:audio/wav;base64,', page)

    source = nbformat.read(ROOT / f"{CHAPTER}.ipynb", as_version=4)
    md = "\n".join(c.source for c in source.cells if c.cell_type == "markdown")
    displays = re.findall(r"\$\$(.+?)\$\$", md, re.S)
    assert displays and all(f"$${d}$$" in html.unescape(page) for d in displays)   # every display equation
    code = [c.source for c in source.cells if c.cell_type == "code" and not bs.is_dropped(c)]
    long = [s for s in code if len(s.strip().splitlines()) > bs.SHORT_CODE]
    short = [s for s in code if len(s.strip().splitlines()) <= 3]
    assert long and short
    for s in long:                                     # no line of a long cell is shown...
        line = max(s.splitlines(), key=len)
        assert line not in text, f"long code shown on a slide: {line!r}"
    for s in short:                                    # ...but short cells are
        assert s.splitlines()[0] in text
    assert "google.colab" not in text and not re.search(r"exercise_\d+_\d+\(", text)
    assert "{cite" not in text and "```" not in text and "{admonition}" not in text
    assert "Huang et al., 2019" in text                # the citation, from references.bib


def test_deck_loads_only_local_files(deck):
    page = deck.read_text()
    assert offline.remote_resources(page) == []
    assert not re.search(r"""<(script|link)[^>]+(src|href)=["']?(https?:)?//""", page)
    p = Text()
    p.feed(page)
    assert "reveal.js/dist/reveal.js" in p.refs and "mathjax/tex-chtml-full.js" in p.refs
    for ref in p.refs:
        assert (deck.parent / ref).is_file(), f"{ref} is referenced but not next to the deck"
    assert (deck.parent / "reveal.js/dist/theme/fonts/source-sans-pro/source-sans-pro.css").is_file()


def test_deck_runs_offline_in_chromium(deck):
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    refused, failed, errors = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 800})
            ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "blob:"))
                      else (refused.append(r.request.url), r.abort()))
            page = ctx.new_page()
            page.on("requestfailed", lambda r: failed.append(f"{r.url[:120]} ({r.failure})"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(deck.as_uri(), wait_until="load")
            page.wait_for_function("() => window.Reveal && Reveal.isReady() && window.MathJax"
                                   " && MathJax.startup && MathJax.startup.promise", timeout=30_000)
            page.evaluate("() => MathJax.startup.promise.then(() => document.fonts.ready).then(() => true)")
            assert page.evaluate("() => Reveal.getTotalSlides()") >= 15
            assert page.locator("mjx-container").count() >= 20 and page.locator("mjx-merror").count() == 0
            # the first slide with a display equation, every fragment shown
            page.evaluate("""() => { const s = Reveal.getSlides().find(s => s.querySelector('mjx-container[display="true"]'));
                                     const i = Reveal.getIndices(s); Reveal.slide(i.h, i.v, 99); }""")
            page.wait_for_timeout(800)                     # the transition
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "slides-00.png"))
        finally:
            browser.close()
    assert not refused and not failed and not errors, (refused, failed, errors)


def test_outputs_come_from_the_book_cache_when_the_executed_copy_has_none(small_book, tmp_path):
    """Jupyter Book writes jupyter_execute/ without outputs when it reused its cache: read the cache."""
    html_dir, _ = small_book
    src = ROOT / f"{CHAPTER}.ipynb"
    (tmp_path / "jupyter_execute" / "notebooks").mkdir(parents=True)
    (tmp_path / "jupyter_execute" / "notebooks" / src.name).write_text(src.read_text())   # no outputs
    (tmp_path / ".jupyter_cache").symlink_to(html_dir.parent / ".jupyter_cache")
    nb, how = bs.executed_notebook(src, tmp_path)
    assert how.startswith("the book's execution cache")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3


# -- the slide structure, on every chapter's source (fast: nothing runs) --------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_cuts_into_slides(path):
    deck = bs.slide_notebook(nbformat.read(path, as_version=4))
    kinds = [c.metadata["slideshow"]["slide_type"] for c in deck.cells]
    assert kinds[0] == "slide" and kinds.count("slide") >= 5 and "subslide" in kinds
    for c in deck.cells:                    # no solution, no students' stub, no install cell
        assert not re.search(r"exercise_\d+_\d+\(|^# Your solution|google\.colab", c.source, re.M), c.source[:80]
        if c.cell_type == "markdown":
            assert "{cite" not in c.source and "```{" not in c.source, c.source[:200]
            if c.source.startswith(("# ", "## ")):
                assert c.metadata["slideshow"]["slide_type"] == "slide"


def test_slide_rules_on_a_small_notebook():
    v4 = nbformat.v4
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    nb = v4.new_notebook(cells=[
        v4.new_markdown_cell("# 1. Title\n\nIntro {cite:p}`c1-huang2019music`.\n\n"
                             "```{admonition} Learning goals\n:class: tip\nGoals.\n```"),
        v4.new_code_cell("import sys\nif 'google.colab' in sys.modules:\n    pass", metadata={"tags": ["hide-input"]}),
        v4.new_markdown_cell("## Part\n\nText.\n\n$$\nx = 1\n$$\n\n### Detail\n\nMore, as {cite:t}`c1-huang2019music` say."),
        v4.new_code_cell("\n".join(f"a{i} = {i}" for i in range(10)),
                         outputs=[v4.new_output("display_data", data=png),
                                  v4.new_output("stream", name="stdout", text="x\n" * 50)]),
        v4.new_code_cell("print(1)", outputs=[v4.new_output("stream", name="stdout", text="1\n"),
                                              v4.new_output("stream", name="stderr", text="warning\n")]),
        v4.new_code_cell("\n".join(f"b{i} = {i}" for i in range(10)),
                         outputs=[v4.new_output("stream", name="stdout", text="y\n" * 50)]),
        v4.new_code_cell("exercise_1_1(data);"),
        v4.new_code_cell("# Your solution here."),
        v4.new_code_cell("# Your solution here. Then test it:\n# from musictx_lite.classroom.checkers import check_1_1\n"
                         "# check_1_1(MyAttention)  # MyAttention(C)"),
        v4.new_markdown_cell("## Bibliography\n\n```{bibliography}\n:filter: docname in docnames\n:keyprefix: c1-\n```"),
    ])
    deck = bs.slide_notebook(nb)
    got = [(c.cell_type, c.metadata["slideshow"]["slide_type"], c.source.splitlines()[0]) for c in deck.cells]
    assert got == [
        ("markdown", "slide", "# 1. Title"),
        ("markdown", "-", "Intro (Huang et al., 2019)."),
        ("markdown", "subslide", "> **Learning goals**"),
        ("markdown", "slide", "## Part"),
        ("markdown", "-", "Text."),
        ("markdown", "fragment", "$$"),
        ("markdown", "subslide", "### Detail"),
        ("markdown", "-", "More, as Huang et al. (2019) say."),
        ("code", "-", "a0 = 0"),                   # long: its source hidden, its figure kept
        ("code", "subslide", "print(1)"),          # past SLIDE_LINES: a new sub-slide
    ]                                              # the b-cell (long code, long text only) is gone
    fig, short = deck.cells[8], deck.cells[9]
    assert "slides-hide-input" in fig.metadata["tags"] and [o.output_type for o in fig.outputs] == ["display_data"]
    assert [o.get("name") for o in short.outputs] == ["stdout"]


def test_split_blocks_keeps_fences_and_displays_whole():
    text = "a\nb\n\n```{admonition} T\n:class: note\nx\n\ny\n```\n\n$$\nu\n\nv\n$$\n\nc"
    assert bs.split_blocks(text) == ["a\nb", "```{admonition} T\n:class: note\nx\n\ny\n```", "$$\nu\n\nv\n$$", "c"]


def test_reveal_is_pinned_and_fetched_with_the_shared_helper():
    assert bs.REVEAL.url == "https://registry.npmjs.org/reveal.js/-/reveal.js-4.6.1.tgz"
    assert re.fullmatch(r"[0-9a-f]{64}", bs.REVEAL.sha256)
    assert bs.offline is offline                                       # book/_ext/offline.py, imported once
    src = (ROOT / "scripts" / "build_slides.py").read_text()
    assert "urlopen" not in src and "tarfile" not in src                # no second copy of the download code
