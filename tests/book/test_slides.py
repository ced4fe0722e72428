"""scripts/build_slides.py: reveal.js decks from the executed chapters, offline, with speaker notes.

The deck of chapter 0 is built from the small book that tests/book/test_offline.py builds (one build per
test run, shared); the slide structure, the words each slide shows and the speaker notes of every chapter are
checked on the sources, without running them. A slide's words are counted as the script counts them, the
visible text of its Markdown without math, code or tables, but here on the HTML and by a counter of this file.
"""
from __future__ import annotations

import html
import html.parser
import importlib.util
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import test_offline
from test_offline import CHAPTER, SCREENSHOTS, chromium_or_skip, offline

small_book = test_offline.small_book     # the fixture: one small book per test run, shared with test_offline.py

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def load_script():
    spec = importlib.util.spec_from_file_location("build_slides", ROOT / "scripts" / "build_slides.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bs = load_script()
st = importlib.import_module("scripts.slide_text")   # scripts/slide_text.py: the prose a slide shows, and its notes


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


def visible_words(text: str) -> int:
    """Words of visible text, math left out ($...$, $$...$$, \\(...\\): MathJax typesets it later)."""
    text = re.sub(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", " ", text, flags=re.S)
    return sum(1 for w in text.split() if re.search(r"\w", w))


def deck_slides(page: str) -> list[dict]:
    """Each slide of a deck (an innermost <section>): the text its Markdown cells show, outside code blocks and
    tables, and the text of its speaker notes (<aside class="notes">)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    slides = []
    for sec in soup.select(".reveal .slides section"):
        if sec.find("section"):
            continue                                     # a column of vertical slides, not a slide
        notes = sec.select("aside.notes")
        for a in notes:
            a.extract()
        cells = sec.select(".jp-MarkdownCell")
        whole = " ".join(c.get_text() for c in cells)
        for c in cells:
            for e in c.select("pre, table, script, style"):
                e.decompose()
        slides.append({"shown": " ".join(c.get_text() for c in cells), "whole": whole,
                       "notes": " ".join(a.get_text() for a in notes), "has_notes": bool(notes)})
    return slides


def wordy_slides(page: str, limit: int = st.MAX_WORDS) -> list[tuple[int, int]]:
    """(index, words) of every slide that shows more than ``limit`` words of prose."""
    counts = [visible_words(s["shown"]) for s in deck_slides(page)]
    return [(i, n) for i, n in enumerate(counts) if n > limit]


def tokens(text: str) -> Counter:
    """The words of a text, counted."""
    return Counter(re.findall(r"\w+", text))


def source_prose(nb) -> list[str]:
    """The chapter's Markdown as the slides start from it (MyST converted, the bibliography left out)."""
    cite = st.bib_citer()
    md_all = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    prefix = (re.search(r"^:keyprefix:\s*(\S+)", md_all, re.M) or [None, ""])[1]
    out = []
    for c in nb.cells:
        if c.cell_type == "markdown":
            for block in st.split_blocks(c.source):
                md = st.myst_to_markdown(block, cite, prefix)
                if not re.match(r"#+\s+(bibliography|references)\s*$", md.strip(), re.I):
                    out.append(md)
    return out


def fragments(md: str) -> list[str]:
    """The sentences of Markdown prose, cut at every mark that could end one (so a fragment is never longer
    than a sentence), without display math, code blocks, list or quote markers."""
    md = re.sub(r"^[ \t]*(>[ \t]?)*", "", md, flags=re.M)
    md = re.sub(r"\$\$.+?\$\$", "\n\n", md, flags=re.S)
    md = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "\n\n", md, flags=re.M | re.S)
    out = []
    for para in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", md):
        out += [f for f in re.split(r"(?<=[.!?:;\"')\]*_’”])\s+", flat(para)) if re.search(r"\w", f)]
    return out


def flat(md: str) -> str:
    """Markdown as running text: no quote or list markers, no continuation marks, whitespace collapsed."""
    md = re.sub(r"^\s*(>\s?)*", "", md, flags=re.M)
    md = re.sub(r"^\s*([-*+]|\d+[.)])\s+(… )?", "", md, flags=re.M)
    return " ".join(md.split())


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
    code = [bs.shown_source(c.source) for c in source.cells if c.cell_type == "code" and not bs.is_dropped(c)]
    long = [s for s in code if len(s.strip().splitlines()) > bs.SHORT_CODE]
    short = [s for s in code if 0 < len(s.strip().splitlines()) <= 3 and not re.search(r"getsource|show_source", s)]
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


def test_every_slide_shows_at_most_40_words_and_its_notes_hold_the_rest(deck):
    page = deck.read_text()
    slides = deck_slides(page)
    assert len(slides) >= 15
    assert wordy_slides(page) == [], "slides that show more than 40 words"
    notes = [s for s in slides if s["has_notes"]]
    assert len(notes) >= len(slides) // 2 and all(visible_words(s["notes"]) > 0 for s in notes)
    # nothing lost, nothing twice: the slides' Markdown and their notes hold each word of the chapter's prose
    source = nbformat.read(ROOT / f"{CHAPTER}.ipynb", as_version=4)
    md = "\n".join(source_prose(source))
    md = re.sub(r"^\s*(```|~~~).*$", " ", md, flags=re.M)                  # a code block's fences
    md = re.sub(r"\]\([^)]*\)|</?[a-z]+(\s[^>]*)?>", " ", md)              # link targets, HTML tags
    got = " ".join(s["whole"] + " " + s["notes"] for s in slides)
    assert tokens(got) == tokens(md), (tokens(got) - tokens(md), tokens(md) - tokens(got))


def test_deck_loads_the_notes_plugin(deck):
    page = deck.read_text()
    p = Text()
    p.feed(page)
    assert "reveal.js/plugin/notes/notes.js" in p.refs and "plugins: [RevealNotes]" in page
    assert (deck.parent / "reveal.js/plugin/notes/notes.js").stat().st_size > 10_000


def test_the_word_check_fails_on_a_wordy_slide():
    """The checks above can fail: a slide with 60 words on it is caught, and a slide without notes is seen."""
    v4 = nbformat.v4
    wordy = " ".join(f"word{i}" for i in range(60)) + "."
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# A title"),
                                v4.new_markdown_cell(f"{wordy} A second sentence, for the notes.")])
    for c, kind in zip(nb.cells, ("slide", "-")):            # cut by hand, not by the script: all shown
        c.metadata["slideshow"] = {"slide_type": kind}
    page, _ = bs.exporter().from_notebook_node(nb)
    assert wordy_slides(page) == [(0, 68)] and not deck_slides(page)[0]["has_notes"]
    page, _ = bs.exporter().from_notebook_node(bs.slide_notebook(nb))   # the script: a 60-word first sentence
    assert wordy_slides(page) == []                                      # goes to the notes whole
    [slide] = deck_slides(page)
    assert visible_words(slide["shown"]) == 2 and visible_words(slide["notes"]) == 66


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
            page.evaluate("""() => {
                const s = Reveal.getSlides().find(s => s.querySelector('mjx-container[display="true"]'));
                const i = Reveal.getIndices(s); Reveal.slide(i.h, i.v, 99); }""")
            page.wait_for_timeout(800)                     # the transition
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "slides-00.png"))
            # S opens the speaker view (reveal.js's notes plugin): it shows the slide's notes, offline
            notes = page.evaluate("""() => { const s = Reveal.getSlides().find(s => s.querySelector('aside.notes'));
                                             const i = Reveal.getIndices(s); Reveal.slide(i.h, i.v);
                                             return s.querySelector('aside.notes').innerText; }""")
            with ctx.expect_page() as popup:
                page.keyboard.press("s")
            speaker = popup.value
            speaker.on("pageerror", lambda e: errors.append(f"speaker view: {e}"))
            speaker.wait_for_function("() => (document.querySelector('.speaker-controls-notes .value') || {})"
                                      ".innerText", timeout=15_000)
            shown = speaker.evaluate("() => document.querySelector('.speaker-controls-notes .value').innerText")
            assert " ".join(notes.split())[:80] in " ".join(shown.split())
            speaker.screenshot(path=str(SCREENSHOTS / "slides-00-speaker.png"))
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_shows_at_most_40_words_a_slide_and_keeps_every_sentence(path):
    nb = nbformat.read(path, as_version=4)
    deck = bs.slide_notebook(nb)
    words = bs.slide_words(deck)
    assert max(shown for shown, _ in words) <= st.MAX_WORDS
    assert sum(notes for _, notes in words) > sum(shown for shown, _ in words)     # most prose is in the notes
    kinds = [c.metadata["slideshow"]["slide_type"] for c in deck.cells]
    for i, kind in enumerate(kinds):                  # a slide's notes: one cell, right after its first cell
        if kind == "notes":
            assert kinds[i - 1] in ("slide", "subslide") and kinds[i + 1:i + 2] != ["notes"]
    md = [c.source for c in deck.cells if c.cell_type == "markdown"]
    source = source_prose(nb)
    assert tokens("\n".join(md)) == tokens("\n".join(source))        # every word once, shown or in the notes
    cells = [flat(m) for m in md]
    for block in source:                                # ... and every sentence whole, on a slide or in notes
        for f in fragments(block):
            assert any(f in c for c in cells), f"{path.name}: not on a slide nor in its notes: {f!r}"
    page, _ = bs.exporter().from_notebook_node(deck)   # counted again on the HTML, by this file's counter
    assert wordy_slides(page) == [] and len(deck_slides(page)) == len(words)


def test_first_sentence_and_the_words_a_slide_shows():
    first = st.first_sentence
    assert first("J.S. Bach wrote them, e.g. BWV 1. Then $x.y$ and `a. B` stay. Next!") == (
        "J.S. Bach wrote them, e.g. BWV 1.", "Then $x.y$ and `a. B` stay. Next!")
    assert first("As Huang et al. (2019) say. More.") == ("As Huang et al. (2019) say.", "More.")
    assert first("One (a *bold* one.) Two.") == ("One (a *bold* one.)", "Two.")
    assert first("No end here") == ("No end here", "")
    assert st.prose_words("# A title\n\n$$\nx = 1\n$$\n\n```python\nx = 1\n```\n\n| a | b |\n\nTwo words") == 4
    parts = st.pieces("> **Goals**\n>\n> You can\n>\n> - do one thing. Well;\n> - do another.")
    assert [(p.kind, p.marker, p.box) for p in parts] == [
        ("heading", "", 0), ("prose", "", 0), ("prose", "- ", 0), ("prose", "- ", 0)]
    st.fit_slide([parts], budget=6)                     # too long to show whole: first sentences, in order
    assert st.render(parts) == "> **Goals**\n>\n> You can\n>\n> - do one thing."
    assert st.render(parts, notes=True) == "- … Well;\n- do another."


def test_slide_rules_on_a_small_notebook():
    v4 = nbformat.v4
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    nb = v4.new_notebook(cells=[
        v4.new_markdown_cell("# 1. Title\n\nIntro {cite:p}`c1-huang2019music`.\n\n"
                             "```{admonition} Learning goals\n:class: tip\nGoals.\n```"),
        v4.new_code_cell("import sys\nif 'google.colab' in sys.modules:\n    pass", metadata={"tags": ["hide-input"]}),
        v4.new_markdown_cell("## Part\n\nText.\n\n$$\nx = 1\n$$\n\n### Detail\n\n"
                             "More, as {cite:t}`c1-huang2019music` say."),
        v4.new_code_cell("\n".join(f"a{i} = {i}" for i in range(10)),
                         outputs=[v4.new_output("display_data", data=png),
                                  v4.new_output("stream", name="stdout", text="x\n" * 50)]),
        v4.new_code_cell("print(1)", outputs=[v4.new_output("stream", name="stdout", text="1\n"),
                                              v4.new_output("stream", name="stderr", text="warning\n")]),
        v4.new_code_cell("\n".join(f"b{i} = {i}" for i in range(10)),
                         outputs=[v4.new_output("stream", name="stdout", text="y\n" * 50)]),
        v4.new_code_cell("exercise_1_1(data);"),
        v4.new_code_cell("# Your solution here."),
        v4.new_code_cell("# Your solution here. Then test it:\n"
                         "# from musictx_lite.classroom.checkers import check_1_1\n"
                         "# check_1_1(MyAttention)  # MyAttention(C)"),
        v4.new_markdown_cell("## Bibliography\n\n"
                             "```{bibliography}\n:filter: docname in docnames\n:keyprefix: c1-\n```"),
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
        ("code", "subslide", "a0 = 0"),            # long: its source hidden, its figure and first lines kept
        ("code", "subslide", "print(1)"),          # past SLIDE_LINES: a new sub-slide
        ("code", "-", "b0 = 0"),                   # long code, long text: the text's first lines
    ]
    fig, short, text = deck.cells[8], deck.cells[9], deck.cells[10]
    assert "slides-hide-input" in fig.metadata["tags"]
    assert [o.output_type for o in fig.outputs] == ["display_data", "stream"]
    lines = text.outputs[0].text.splitlines()
    assert len(lines) == bs.SHORT_TEXT and lines[3].startswith("…")       # its head and its end, and says so
    assert lines[:3] == ["y"] * 3 and lines[4:] == ["y"] * (bs.SHORT_TEXT - 4)
    assert [o.get("name") for o in short.outputs] == ["stdout"]


def test_split_blocks_keeps_fences_and_displays_whole():
    text = "a\nb\n\n```{admonition} T\n:class: note\nx\n\ny\n```\n\n$$\nu\n\nv\n$$\n\nc"
    assert st.split_blocks(text) == ["a\nb", "```{admonition} T\n:class: note\nx\n\ny\n```", "$$\nu\n\nv\n$$", "c"]


def test_reveal_is_pinned_and_fetched_with_the_shared_helper():
    assert bs.REVEAL.url == "https://registry.npmjs.org/reveal.js/-/reveal.js-4.6.1.tgz"
    assert re.fullmatch(r"[0-9a-f]{64}", bs.REVEAL.sha256)
    assert bs.offline is offline                                       # book/_ext/offline.py, imported once
    src = (ROOT / "scripts" / "build_slides.py").read_text()
    assert "urlopen" not in src and "tarfile" not in src                # no second copy of the download code


def test_a_shown_source_loses_its_checks_but_stays_python():
    src = "x = f(1)\nassert x > 0, 'positive'\nif P.name != 'smoke':\n    assert x < 9\nprint(x)"
    assert bs.shown_source(src) == "x = f(1)\nprint(x)"
    loop = "for j in range(3):\n    assert g(j) == j"                 # a body that is only its check
    assert bs.shown_source(loop) == loop
    assert bs.shown_source("%timeit f()") == "%timeit f()"             # IPython syntax: as it is
    cite = st.myst_to_markdown("As Huang et\nal. {cite:p}`huang2019music` say.", st.bib_citer())
    assert cite == "As Huang et\nal. (2019) say."                       # not "Huang et al. (Huang et al., 2019)"
