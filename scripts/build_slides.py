"""One reveal.js slide deck per chapter, with speaker notes, from the notebooks that the book build executed.

    python -m scripts.build_slides [--out _build/slides] [--build _build] [notebooks/NN_name.ipynb ...]

Serves every chapter (0-13). ``make book`` runs it after Jupyter Book's build, into the built book
(``_build/html/slides/``: ``NN_name.slides.html`` per chapter and ``index.html``), from the chapters that build
just executed; ``make slides`` runs it alone, into ``_build/slides/``. With no notebooks named, every
``notebooks/NN_*.ipynb`` gets a deck, so a new chapter gets one for free.

Where the outputs come from, in this order (the first that matches the chapter's source):
the executed copy that Jupyter Book writes to ``_build/jupyter_execute/notebooks/``; the book's
execution cache ``_build/.jupyter_cache`` (Jupyter Book writes an executed copy only when it ran the
chapter, not when it reused the cache); else the chapter is executed here with nbclient, in the
profile that ``MUSICTX_PROFILE`` names, and the script says so.

The slide structure is derived from the notebook on every run; the notebooks carry no slide metadata:

- ``#`` and ``##`` headings start a slide, ``###`` and deeper a sub-slide (a vertical slide);
- an admonition (learning goals, an exercise) gets a sub-slide of its own, a paragraph with a
  display equation is a fragment (it appears on the next click);
- a slide whose text and figures pass about ``SLIDE_LINES`` lines continues on a sub-slide;
- code cells show their source only when it is at most ``SHORT_CODE`` lines and not a ``getsource`` call
  (its listing is the output), without its ``assert`` checks; figures and audio players stay whole, printed
  text and tables show their first ``SHORT_TEXT`` lines (rows) and listings ``LISTING_LINES``, then "…",
  printed Markdown its first sentence (``shown_output``);
- the install cell and the exercise cells (the solution calls ``exercise_N_M(...)`` and the
  ``# Your solution here.`` stubs) are dropped;
- MyST syntax becomes plain Markdown: an admonition a box (a blockquote), ``{cite:p}`` an author-year citation from
  references.bib; the bibliography (its heading and directive) is dropped.

A slide shows at most ``MAX_WORDS`` (40) words of prose; the rest of its prose is in its speaker notes (an
``<aside class="notes">``, Markdown rendered as the slides' is; press S for reveal.js's speaker view). The rule
(``fit_slide``, in ``scripts/slide_text.py`` with the MyST-to-Markdown step), slide by slide, in reading order:

- headings, display equations, code, tables, figures, audio and short outputs are shown as before;
- of each paragraph the first sentence is shown, of each list item its first clause (to a colon or
  semicolon), and the rest goes to the notes; a sentence ends at . ! or ? followed by a capital, a digit,
  math or code (not after e.g., i.e., et al. or an initial, nor inside math, code or a link);
- the words are counted as they are read: the heading's and an admonition's title count, math, code, tables and
  link targets do not. Once the next first sentence would take the slide past 40 words, it and all the prose
  after it on that slide go to the notes whole (a list item the slide shows goes on there as "- …");
- an admonition that fits the words left is shown whole; a longer one is cut by the rule above;
- a cell left with nothing to show goes, and a slide left with nothing to show gives its notes to the slide
  before it. No word is dropped or repeated: what a slide shows plus its notes is the chapter's prose.

The decks work offline: reveal.js (its notes plugin included) and MathJax are copied next to them
(``reveal.js/``, ``mathjax/``) from the npm tarballs that ``book/_ext/offline.py`` keeps in
``$MUSICTX_CACHE/npm`` (default ``~/.cache/musictx_lite/npm``), sha256-checked: the helper and the cache the
book uses for its own MathJax. When the cache is empty the first build downloads each tarball once from the
npm registry (reveal.js 4.6.1, MathJax 3.2.2); after that no build needs the network. Figures and audio are
embedded in the HTML, and the template loads nothing else (no require.js, jQuery or mermaid from a CDN);
``build_deck`` refuses a deck that would fetch anything from another host.
"""
from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
from pathlib import Path
from typing import Callable

import nbformat

from scripts import ROOT, book_extension, student_notebooks  # student_notebooks: which cells are solutions
from scripts.slide_text import (
    ADMONITIONS,
    FENCE,
    MAX_WORDS,
    Piece,
    bib_citer,
    first_sentence,
    fit_slide,
    myst_to_markdown,
    pieces,
    prose_words,
    render,
    split_blocks,
)

offline = book_extension("offline")     # book/_ext/offline.py: the npm download helper and the MathJax bundle

SHORT_CODE = 6       # a code cell of at most this many lines shows its source
SHORT_TEXT = 8       # a text output or table shows at most this many lines (rows), then "…"
LISTING_LINES = 16   # a code listing that a cell prints (Code(getsource(...))) shows at most this many
SLIDE_LINES = 18     # about what fits on a slide; past it, the next block starts a sub-slide
FIGURE_LINES = 12    # what a figure counts against SLIDE_LINES
REVEAL_DIR = "reveal.js"
MATHJAX_DIR = "mathjax"
THEME = "white"
REVEAL = offline.NpmPackage(
    "reveal.js", "4.6.1", "4f4121ef2b8e7e9398bdecd7b3b6ce5e0ee3a2f5af221708eb6c4ce03bcae6be",
    ("dist/reveal.js", "dist/reveal.css", f"dist/theme/{THEME}.css", "dist/theme/fonts/source-sans-pro/",
     "plugin/notes/notes.js", "LICENSE"),
)

# -- choosing cells and outputs ------------------------------------------------------------------

def is_dropped(cell) -> bool:
    """The install cell, exercise solutions (cells calling exercise_N_M) and the solution stubs."""
    src = cell.source
    tags = set(cell.metadata.get("tags", []))
    return ("remove-cell" in tags or "google.colab" in src or "pip install" in src
            or student_notebooks.is_solution(cell) or student_notebooks.is_stub(cell))


def _text(o) -> str:
    if o.output_type == "stream":
        return o.text
    return o.get("data", {}).get("text/plain", "")


def _head(text: str, n: int, more: str = "… (the rest is in the book)") -> str:
    """``text`` in at most ``n`` lines: its first three (a table's heading) and its last ones (the rows a
    leaderboard or a log ends with), "…" between."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= n:
        return text
    head = min(3, n // 2)
    return "\n".join(lines[:head] + [more] + lines[len(lines) - (n - head - 1):]) + "\n"


def _cut_html(html: str, at: int, close: str) -> str:
    """``html`` cut at ``at``, its open tags closed (``close``: what ends the element cut), then "…"."""
    kept = html[:at]
    spans = kept.count("<span") - kept.count("</span>")
    divs = kept.count("<div") - kept.count("</div>")
    return kept + "</span>" * max(spans, 0) + close + "</div>" * max(divs, 0) + "<p>… (the rest is in the book)</p>"


def shown_output(o):
    """What a slide keeps of an output, or None: figures and audio whole; printed text, tables and code
    listings cut to what a slide holds, with "…" where they go on (the book has them whole); printed Markdown
    to its first sentence past ``MAX_WORDS``; not errors, warnings or empty streams."""
    if o.output_type == "error":
        return None
    o = copy.deepcopy(o)
    if o.output_type == "stream":
        if o.name != "stdout" or not o.text.strip():
            return None
        o.text = _head(o.text, SHORT_TEXT)
        return o
    data = o.get("data", {})
    html = data.get("text/html", "")
    if any(k.startswith("image/") for k in data) or "<audio" in html:
        return o
    if "text/plain" in data:
        data["text/plain"] = _head(data["text/plain"], LISTING_LINES if "<pre" in html else SHORT_TEXT)
    if "<pre" in html:                                        # a code listing (Code(getsource(...)))
        start = html.index("<pre")
        lines = html[start:].split("\n")
        if len(lines) > LISTING_LINES + 1:
            data["text/html"] = _cut_html(html, start + len("\n".join(lines[:LISTING_LINES])) + 1, "</pre>")
        data.pop("text/latex", None)
        return o
    rows = [m.start() for m in re.finditer(r"<tr[\s>]", html)]
    if len(rows) > SHORT_TEXT + 1:                             # a table: its head and first rows
        end = "</tbody></table>" if "<tbody" in html else "</table>"
        data["text/html"] = _cut_html(html, rows[SHORT_TEXT + 1], end)
        return o
    if html:
        return o
    md = data.get("text/markdown", "")
    if md:
        first, rest = first_sentence(" ".join(md.split()))
        data["text/markdown"] = first + (" …" if rest and prose_words(md) > MAX_WORDS else (" " + rest if rest else ""))
        return o
    return o if _text(o).strip() else None


def shown_source(source: str) -> str:
    """A code cell's source as a slide shows it: without its ``assert`` statements (the book's checks, not the
    lecture's point), including ``if ...: assert ...``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:                                       # IPython syntax (magics): as it is
        return source
    drop = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) or (isinstance(node, ast.If) and not node.orelse
                                            and all(isinstance(b, ast.Assert) for b in node.body)):
            drop.update(range(node.lineno, node.end_lineno + 1))
    lines = source.splitlines()
    shown = "\n".join(line for i, line in enumerate(lines, 1) if i not in drop).strip("\n")
    try:
        ast.parse(shown)
    except SyntaxError:                                       # a block whose body was its checks: as it is
        return source
    return shown


def _cost(cell) -> int:
    """Roughly how many lines of a slide this cell fills."""
    if cell.cell_type == "markdown":                      # what it shows: about 90 characters a line
        return sum(1 + len(line) // 90 for line in cell.source.splitlines()) + 1
    cost = 0 if "slides-hide-input" in cell.metadata.get("tags", []) else len(cell.source.splitlines()) + 1
    for o in cell.outputs:
        data = o.get("data", {})
        if any(k.startswith("image/") for k in data):
            cost += FIGURE_LINES
        elif "<audio" in data.get("text/html", ""):
            cost += 3
        else:
            cost += len(_text(o).splitlines()) or 3
    return cost


def slide_notebook(nb, cite: Callable[[str, str], str] | None = None):
    """A copy of the executed chapter ``nb`` cut into slides (``metadata.slideshow``): see the module doc."""
    cite = cite or bib_citer()
    md_all = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    prefix = (re.search(r"^:keyprefix:\s*(\S+)", md_all, re.M) or [None, ""])[1]
    cells, used, start = [], 0, 0          # start: index of the first cell of the current (sub)slide
    parts: dict[int, list[Piece]] = {}     # id(markdown cell) -> its pieces, shown or in the notes

    def md_cell(md: str):
        """A Markdown cell showing, for now, what ``md`` would show on a slide of its own."""
        ps = pieces(md)
        fit_slide([ps])
        cell = nbformat.v4.new_markdown_cell(render(ps))
        parts[id(cell)] = ps
        return cell

    def is_heading(c) -> bool:
        return c.cell_type == "markdown" and c.source.startswith("#")

    def add(cell, kind: str) -> None:
        nonlocal used, start
        cost = _cost(cell)
        alone = bool(cells) and len(cells) - start == 1 and is_heading(cells[start])  # only a heading so far
        if kind == "subslide" and alone and not is_heading(cell):
            kind = "-"                              # an admonition right under its heading shares its slide
        elif kind == "-" and cells and used + cost > SLIDE_LINES and not alone:
            prev = cells[-1]
            if (prev.cell_type == "markdown" and not is_heading(prev) and _cost(prev) <= 6
                    and prev.metadata["slideshow"]["slide_type"] == "-"
                    and not (len(cells) - start == 2 and is_heading(cells[start]))):
                # a short paragraph introduces what follows: it moves to the new sub-slide with it
                prev.metadata["slideshow"]["slide_type"] = "subslide"
                start, used = len(cells) - 1, _cost(prev)
            else:
                kind = "subslide"
        if kind in ("slide", "subslide"):
            start, used = len(cells), 0
        used += cost
        cell.metadata["slideshow"] = {"slide_type": kind}
        cells.append(cell)

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            para: list[str] = []

            def flush() -> None:
                if para:
                    add(md_cell("\n\n".join(para)), "-")
                    para.clear()

            for block in split_blocks(cell.source):              # MyST blocks, directives whole
                md = myst_to_markdown(block, cite, prefix).strip("\n").rstrip()   # indented code stays code
                if not md:
                    continue                                      # e.g. the bibliography
                head = re.match(r"^(#{1,6})\s+(.*)", md)
                if head and head.group(2).strip().lower() in ("bibliography", "references"):
                    continue                                      # citations are inline, author-year
                if head:
                    flush()
                    add(md_cell(md), "slide" if len(head.group(1)) <= 2 else "subslide")
                elif (m := FENCE.match(block.strip().splitlines()[0])) and m.group(3) in ADMONITIONS:
                    flush()
                    add(md_cell(md), "subslide")
                elif "$$" in md:
                    flush()
                    add(md_cell(md), "fragment")
                else:
                    para.append(md)
            flush()
        elif cell.cell_type == "code":
            if is_dropped(cell):
                continue
            c = copy.deepcopy(cell)
            c.outputs = [k for o in c.get("outputs", []) if (k := shown_output(o)) is not None]
            long = len(c.source.strip().splitlines()) > SHORT_CODE        # as written: a long cell stays hidden
            c.source = shown_source(c.source)
            listing = re.search(r"\b(getsource|show_source|source_without_docstring)\(", c.source)
            hide = not c.source.strip() or listing or long              # a listing: the output shows the code
            if hide:
                c.metadata["tags"] = [*c.metadata.get("tags", []), "slides-hide-input"]
            if hide and not c.outputs:
                continue                                 # nothing left to show
            add(c, "-")
    if not cells:
        raise ValueError("the notebook has nothing to show on slides")
    cells[0].metadata["slideshow"] = {"slide_type": "slide"}
    cells = with_notes(cells, parts)
    out = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(nb.metadata))
    out.metadata.pop("widgets", None)                    # no widget manager offline: static outputs only
    return out


def with_notes(cells: list, parts: dict[int, list[Piece]]) -> list:
    """Fit each (sub)slide's prose to ``MAX_WORDS`` (``fit_slide``) and put the rest in a speaker-notes cell
    (``slide_type: notes``, an ``<aside class="notes">``) right after the slide's first cell, outside any
    fragment. A cell left with nothing to show goes; a slide left with nothing to show joins its notes to the
    previous slide's."""
    kept: list[tuple[list, list[str]]] = []
    for cell in cells:
        if not kept or cell.metadata["slideshow"]["slide_type"] in ("slide", "subslide"):
            kept.append(([], []))
        kept[-1][0].append(cell)
    out: list[tuple[list, list[str]]] = []
    for section, _ in kept:
        fit_slide([parts[id(c)] for c in section if id(c) in parts])
        notes = [n for c in section if id(c) in parts and (n := render(parts[id(c)], notes=True))]
        kind = section[0].metadata["slideshow"]["slide_type"]
        shown = []
        for c in section:
            if id(c) in parts:
                c.source = render(parts[id(c)])
            if c.cell_type != "markdown" or c.source:
                shown.append(c)
        if not shown and out:
            out[-1][1].extend(notes)
            continue
        if not shown:                           # cannot happen: a deck starts with its title
            raise ValueError("the first slide has nothing to show")
        shown[0].metadata["slideshow"] = {"slide_type": kind}
        out.append((shown, notes))
    cells = []
    for shown, notes in out:
        cells.append(shown[0])
        if notes:
            cells.append(nbformat.v4.new_markdown_cell("\n\n".join(notes),
                                                       metadata={"slideshow": {"slide_type": "notes"}}))
        cells += shown[1:]
    return cells


def slide_words(deck) -> list[tuple[int, int]]:
    """(words shown, words in the notes) of each (sub)slide of a deck that ``slide_notebook`` made."""
    out: list[tuple[int, int]] = []
    for c in deck.cells:
        kind = c.metadata["slideshow"]["slide_type"]
        if kind in ("slide", "subslide"):
            out.append((0, 0))
        if c.cell_type == "markdown":
            shown, notes = out[-1]
            words = prose_words(c.source)
            out[-1] = (shown, notes + words) if kind == "notes" else (shown + words, notes)
    return out


# -- where the executed chapter comes from -------------------------------------------------------

def _sources(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells if c.cell_type in ("code", "markdown")]


def _executed(nb) -> bool:
    code = [c for c in nb.cells if c.cell_type == "code"]
    return bool(code) and all(c.get("execution_count") is not None for c in code)


def executed_notebook(src: Path, build: Path, timeout: int = 900):
    """The executed chapter ``src``: from the book build, its execution cache, or run here. Returns (nb, how)."""
    nb = nbformat.read(src, as_version=4)
    copy_path = build / "jupyter_execute" / "notebooks" / src.name
    if copy_path.exists():
        done = nbformat.read(copy_path, as_version=4)
        if _executed(done) and _sources(done) == _sources(nb):
            return done, f"executed copy {copy_path}"
    cache_path = build / ".jupyter_cache"
    if cache_path.is_dir():
        from jupyter_cache import get_cache

        try:
            _, merged = get_cache(str(cache_path)).merge_match_into_notebook(copy.deepcopy(nb))
            if _executed(merged):
                _warn_if_stale(build)
                return merged, f"the book's execution cache {cache_path}"
        except KeyError:
            pass
    profile = os.environ.get("MUSICTX_PROFILE", "the default")
    print(f"slides: {src.name} has no executed copy in {build} (run `make book` first to reuse the book's "
          f"outputs); executing it now with nbclient, profile {profile}", file=sys.stderr)
    from nbclient import NotebookClient

    # as in the book: no progress bars, and the widgets' static versions
    saved = {k: os.environ.get(k) for k in ("MUSICTX_PROGRESS", "MUSICTX_WIDGETS")}
    os.environ.update(MUSICTX_PROGRESS="0", MUSICTX_WIDGETS="static")
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(src.parent)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb, f"executed now (profile {profile})"


def _warn_if_stale(build: Path) -> None:
    try:
        package_cache = book_extension("package_cache")    # book/_ext/package_cache.py

        stamp = build / package_cache.STAMP
        if stamp.exists() and stamp.read_text() != package_cache.package_fingerprint():
            print(f"slides: the outputs in {build} come from another version of musictx_lite, profile or data; "
                  "`make book` updates them", file=sys.stderr)
    except Exception:
        pass


# -- the deck ------------------------------------------------------------------------------------

TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true, processEnvironments: true}
};
</script>
<script defer src="{{ resources.mathjax_url }}"></script>
<style>
:root { --jp-code-font-size: 15px; }   /* 88 characters of code fit the slide's width */
.reveal blockquote { width: auto; font-style: normal; text-align: left; box-shadow: none;
  border-left: 6px solid #48c; background: #f2f6fb; padding: 0.2em 0.8em; margin: 0.5em 0; }
.reveal blockquote p, .reveal blockquote li { font-style: normal; display: block; }
.reveal .jp-OutputArea-output img { max-height: 480px; }
.reveal audio { width: 60%; }
</style>
{%- endblock html_head_js_mathjax -%}
{%- block footer_js -%}
{%- set prefix = resources.reveal.url_prefix -%}
<script src="{{ prefix }}/dist/reveal.js"></script>
<script src="{{ prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({
  controls: true, progress: true, history: true, hash: true,
  transition: "{{ resources.reveal.transition | default('slide', true) }}",
  slideNumber: "{{ resources.reveal.number | default('c/t', true) }}",
  width: {{ resources.reveal.width | default('960', true) }},
  height: {{ resources.reveal.height | default('700', true) }},
  plugins: [RevealNotes]
});
// a slide taller than the screen scrolls instead of being cut off
function scrollTallSlides() {
  const h = document.querySelector('.reveal').offsetHeight * 0.95;
  document.querySelectorAll('.reveal section:not(.stack)').forEach(s => {
    if (s.scrollHeight > h) { s.style.height = '95vh'; s.style.overflowY = 'auto'; }
  });
}
Reveal.on('ready', scrollTallSlides);
Reveal.on('slidechanged', scrollTallSlides);
</script>
{%- endblock footer_js -%}
"""


def exporter():
    """nbconvert's SlidesExporter with local reveal.js and MathJax, no CDN script, no prompts."""
    from jinja2 import DictLoader
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    c = Config()
    c.SlidesExporter.reveal_url_prefix = REVEAL_DIR
    c.SlidesExporter.reveal_theme = THEME
    c.SlidesExporter.reveal_scroll = True
    c.SlidesExporter.mathjax_url = f"{MATHJAX_DIR}/tex-chtml-full.js"
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    c.SlidesExporter.exclude_anchor_links = True
    c.SlidesExporter.embed_images = True
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_input_tags = {"slides-hide-input"}
    return SlidesExporter(config=c, extra_loaders=[DictLoader({"musictx_reveal.html.j2": TEMPLATE})],
                          template_file="musictx_reveal.html.j2")


def install_assets(out: Path) -> None:
    """reveal.js and MathJax next to the decks (from the npm tarballs, cached after the first download)."""
    offline.extract(offline.npm_tarball(REVEAL), out / REVEAL_DIR, REVEAL.files)
    offline.install_mathjax(out / MATHJAX_DIR)


def build_deck(src: Path, out: Path, build: Path) -> Path:
    """Write ``out/<chapter>.slides.html`` for the chapter notebook ``src``; return its path."""
    nb, how = executed_notebook(src, build)
    deck = slide_notebook(nb)
    body, _ = exporter().from_notebook_node(deck, resources={"metadata": {"name": src.stem}})
    remote = offline.remote_resources(body)
    if remote:
        raise RuntimeError(f"{src.name}: the deck would fetch {remote}")
    path = out / f"{src.stem}.slides.html"
    path.write_text(body, encoding="utf-8")
    words = slide_words(deck)
    print(f"slides: {path} ({len(words)} slides, {path.stat().st_size / 1e6:.1f} MB) from {how}; words shown: "
          f"at most {max(w for w, _ in words)} a slide, {sum(w for w, _ in words)} in all; "
          f"in the speaker notes: {sum(n for _, n in words)}")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="chapter notebooks (default: every notebooks/NN_*.ipynb)")
    p.add_argument("--out", type=Path, default=ROOT / "_build" / "slides", help="folder for the decks")
    p.add_argument("--build", type=Path, default=ROOT / "_build",
                   help="the book's build folder, with jupyter_execute/ and .jupyter_cache/")
    a = p.parse_args(argv)
    if a.build.exists() and not a.build.is_dir():
        p.error(f"--build {a.build} is not a folder (the book's _build)")
    notebooks = a.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    missing = [str(n) for n in notebooks if not n.is_file()]
    if missing:
        p.error(f"no such notebook: {', '.join(missing)}")
    a.out.mkdir(parents=True, exist_ok=True)
    install_assets(a.out)
    decks = [build_deck(nb.resolve(), a.out, a.build.resolve()) for nb in notebooks]
    write_index(decks, notebooks, a.out)
    return 0


def write_index(decks: list[Path], notebooks: list[Path], out: Path) -> Path:
    """``out/index.html``: one link per deck, titled by the chapter's first heading."""
    import html

    items = []
    for deck, nb in zip(decks, notebooks):
        first = nbformat.read(nb, as_version=4).cells[0].source.splitlines()[0]
        items.append(f'<li><a href="{deck.name}">{html.escape(first.lstrip("# "))}</a></li>')
    path = out / "index.html"
    path.write_text("<!doctype html><meta charset='utf-8'><title>musictx-lite: slides</title>\n"
                    "<h1>musictx-lite: slides</h1>\n"
                    "<p>One deck per chapter; in a deck, press S for the speaker view (notes, next slide, timer).</p>\n"
                    "<ul>\n" + "\n".join(items) + "\n</ul>\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
