"""The prose of a slide deck (``scripts/build_slides.py``): MyST as plain Markdown, and what a slide shows of it.

- ``myst_to_markdown``: an admonition becomes a box (a blockquote), ``{cite:p}`` an author-year citation from
  references.bib (``bib_citer``), other roles their text;
- ``pieces`` cuts a cell's Markdown into headings, paragraphs, list items, displays, code and tables;
- ``fit_slide`` shows at most ``MAX_WORDS`` words of a slide's prose, first sentences first
  (``first_sentence``, ``prose_words``), and leaves the rest for its speaker notes; ``render`` writes either.

``build_slides``'s docstring gives the rule in full.
"""
from __future__ import annotations

import codecs
import re
import sys
from pathlib import Path
from typing import Callable

from scripts import ROOT

MAX_WORDS = 40       # words of prose a slide shows at most; the rest is in its speaker notes

# -- MyST to plain Markdown ----------------------------------------------------------------------

FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\{([\w-]+)\})?\s*(.*)$")
ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution", "attention",
               "danger", "error", "seealso"}


def split_blocks(text: str) -> list[str]:
    """Split Markdown at blank lines, keeping fenced blocks and $$ displays whole."""
    blocks, cur, fence, math = [], [], None, False
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if fence is None and not math and m:
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
            fence = None
        elif fence is None and line.strip().count("$$") % 2 == 1:
            math = not math
        if not line.strip() and fence is None and not math:
            if cur:
                blocks.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def bib_citer(bib: Path = ROOT / "references.bib") -> Callable[[str, str], str]:
    """A function (role, key) -> 'Huang et al. (2019)' or '(Huang et al., 2019)' from references.bib."""
    try:
        from pybtex.database import parse_file

        entries = parse_file(str(bib)).entries
    except Exception as e:  # a deck without pretty citations is still a deck
        print(f"slides: could not read {bib} ({e}); citations show their keys", file=sys.stderr)
        entries = {}

    def plain(s: str) -> str:
        try:
            s = codecs.decode(s, "ulatex")
        except Exception:
            pass
        return s.replace("{", "").replace("}", "")

    def who(key: str) -> tuple[str, str] | None:
        e = entries.get(key)
        if e is None:
            return None
        people = e.persons.get("author") or e.persons.get("editor") or []
        last = [plain(" ".join(p.last_names)) for p in people]
        name = (last[0] if len(last) == 1 else f"{last[0]} and {last[1]}" if len(last) == 2
                else f"{last[0]} et al." if last else key)
        return name, e.fields.get("year", "n.d.")

    def cite(role: str, key: str) -> str:
        found = who(key)
        if found is None:
            return key
        return f"{found[0]} ({found[1]})" if role == "cite:t" else f"{found[0]}, {found[1]}"

    return cite


def myst_to_markdown(text: str, cite: Callable[[str, str], str], keyprefix: str = "") -> str:
    """Turn the MyST the chapters use into Markdown that nbconvert renders."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if m and m.group(3):                         # ```{directive} argument
            fence, name, arg = m.group(1), m.group(3), m.group(4).strip()
            j = i + 1
            opts, body = {}, []
            def closes(line: str) -> bool:
                return line.strip().startswith(fence) and line.strip().strip(fence[0]) == ""

            while j < len(lines) and not closes(lines[j]):
                o = re.match(r"^:([\w-]+):\s*(.*)$", lines[j])
                if o and not body:
                    opts[o.group(1)] = o.group(2)
                else:
                    body.append(lines[j])
                j += 1
            i = j + 1
            if name in ADMONITIONS:
                title = arg or name.capitalize()                # a box: a styled blockquote
                out += [f"> **{title}**", ">", *[f"> {line}".rstrip() for line in body]]
            elif name == "math":
                out += ["$$", *body, "$$"]
            elif name in ("bibliography", "tableofcontents", "glossary"):
                pass
            else:                                     # any other directive: its content, plainly
                out += body
            continue
        if re.match(r"^\([\w:.-]+\)=\s*$", lines[i]):   # a MyST target, (label)=
            i += 1
            continue
        out.append(lines[i])
        i += 1
    md = "\n".join(out)
    md = re.sub(r"\$\$[ \t]*\([\w:.-]+\)[ \t]*$", "$$", md, flags=re.M)     # $$ (label): no numbering here

    def role(m: re.Match) -> str:
        name, content = m.group(1), m.group(2)
        if name in ("cite:p", "cite:t", "cite", "cite:ps", "cite:ts"):
            keys = [k.strip() for k in content.split(",")]
            keys = [k[len(keyprefix):] if keyprefix and k.startswith(keyprefix) else k for k in keys]
            cites = [cite("cite:t" if name.startswith("cite:t") else "cite:p", k) for k in keys]
            return ", ".join(cites) if name.startswith("cite:t") else f"({'; '.join(cites)})"
        if name == "math":
            return f"${content}$"
        return re.sub(r"\s*<[^>]*>$", "", content)     # {doc}`text <target>` -> text
    md = re.sub(r"\{([\w:-]+)\}`([^`]*)`", role, md)
    # "Huang et al. (Huang et al., 2019)": the authors already named, the citation gives the year
    authors = r"[A-Z][\w'’-]+(?:\s+et\s+al\.|\s+and\s+[A-Z][\w'’-]+)?"

    def once(m: re.Match) -> str:
        same = " ".join(m.group(1).split()) == " ".join(m.group(2).split())
        return f"{m.group(1)} ({m.group(3)})" if same else m.group(0)
    return re.sub(rf"({authors})\s+\(({authors}), (\d{{4}}[a-z]?|n\.d\.)\)", once, md)


# -- what a slide shows, and its speaker notes ---------------------------------------------------

# spans inside which a sentence never ends: math, inline code, links, HTML tags
HTML_TAG = re.compile(r"</?[A-Za-z][\w-]*(\s[^>]*)?/?>")
_OPAQUE = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|`[^`]*`|!?\[[^\]]*\]\([^)]*\)|" + HTML_TAG.pattern, re.S)
# a sentence ends at . ! ? (closing quotes, brackets and emphasis after it) and whitespace, and the next one
# starts with a capital, a digit, or math or code (masked as X)
_SENTENCE_END = re.compile(r"[.!?]+[\"'’”)\]*_]*\s+(?=[\"'‘“(\[*_]*[A-Z0-9])")
ABBREVIATIONS = {"al.", "cf.", "vs.", "fig.", "figs.", "eq.", "eqs.", "approx.", "resp.", "ch.", "sec.", "no.",
                 "par.", "ex.", "p.", "pp.", "vol."}
_CLAUSE_END = re.compile(r"[:;]\s+")      # a list item's first clause ends here (if before its first sentence does)
_LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,3}[.)])\s+")


def first_sentence(text: str) -> tuple[str, str]:
    """``text`` (one paragraph, whitespace collapsed) cut after its first sentence: (first, rest).

    An abbreviation (e.g., i.e., et al., J.S.) does not end a sentence, nor does a period inside math, code or a
    link; ``first + " " + rest == text`` when ``rest`` is not empty.
    """
    masked = _OPAQUE.sub(lambda m: "X" * len(m.group()), text)
    for m in _SENTENCE_END.finditer(masked):
        word = masked[:m.start() + 1].split()[-1].lstrip("(\"'‘“*_").lower()
        if word in ABBREVIATIONS or re.fullmatch(r"([a-z]\.)+", word):
            continue
        return text[:m.end()].rstrip(), text[m.end():]
    return text, ""


def prose_words(md: str) -> int:
    """The words a reader sees in Markdown ``md``: not math, code blocks, tables, HTML tags or link targets.

    >>> prose_words("The NLL $-\\frac{1}{N} \\sum_t \\log p$ in `nats`, [a link](https://x.org/a b).")
    6
    """
    md = re.sub(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1\s*$", " ", md, flags=re.M | re.S)   # fenced code
    md = re.sub(r"^[> ]*\|.*$", " ", md, flags=re.M)                                  # table rows
    md = re.sub(r"^(> ?)? {4}.*$", " ", md, flags=re.M)                                # indented code
    md = re.sub(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", " ", md, flags=re.S)  # math
    md = HTML_TAG.sub(" ", md)
    md = re.sub(r"\]\([^)]*\)", "]", md)
    return sum(1 for w in md.split() if re.search(r"\w", w))


class Piece:
    """One part of a slide's Markdown: a heading (always shown, counted), an exhibit (a display equation, a
    code block or a table: always shown, not counted) or prose (a paragraph or a list item: its ``lead``, the
    first sentence, is shown if the slide has room, the rest goes to the speaker notes)."""

    def __init__(self, kind: str, text: str, marker: str = "", box: int = -1):
        self.kind = kind           # "heading", "exhibit" or "prose"
        self.text = text
        self.marker = marker       # a list item's "- " or "1. "
        self.box = box             # the admonition it is part of, -1 outside one
        self.show = ""             # what the slide shows of it; the rest is in the notes

    def __repr__(self) -> str:
        return f"Piece({self.kind!r}, {self.text[:40]!r}, shown {len(self.show)} of {len(self.text)} characters)"

    @property
    def lead(self) -> str:
        """What the slide shows first: the first sentence; of a list item (a goal, a point of a summary), its
        first clause, up to a colon or semicolon; raw HTML whole."""
        if self.text.startswith("<"):
            return self.text
        first = first_sentence(self.text)[0]
        if self.marker:
            masked = _OPAQUE.sub(lambda m: "X" * len(m.group()), first)
            if (m := _CLAUSE_END.search(masked)) and m.start() + 1 < len(first.rstrip()):
                return first[:m.start() + 1]
        return first

    @property
    def notes(self) -> str:
        return self.text[len(self.show):].strip()


def pieces(md: str, box: int = -1) -> list[Piece]:
    """Cut the Markdown of one slide cell (after ``myst_to_markdown``) into pieces, in order."""
    out: list[Piece] = []
    for block in split_blocks(md):
        lines = block.splitlines()
        if box < 0 and all(line.startswith(">") for line in lines):          # an admonition's box
            inner = [re.sub(r"^> ?", "", line) for line in lines]
            n = 1 + max([p.box for p in out] + [-1])
            out.append(Piece("heading", inner[0], box=n))                   # its **title**
            out += pieces("\n".join(inner[1:]), box=n)
        elif re.match(r"#{1,6}\s", block):
            out.append(Piece("heading", block, box=box))
        elif (FENCE.match(lines[0].strip()) or all(line.lstrip().startswith("|") for line in lines)
              or all(line.startswith("    ") for line in lines)):          # code, a table, indented code
            out.append(Piece("exhibit", block, box=box))
        else:
            out += _text_pieces(lines, box)
    return out


def _text_pieces(lines: list[str], box: int) -> list[Piece]:
    """Paragraph lines into prose pieces (one per list item) and display equations."""
    out: list[Piece] = []
    text: list[str] = []
    marker = ""
    math: list[str] | None = None
    fence: list[str] = []                   # a fenced code block inside the paragraph

    def flush() -> None:
        if text:
            out.append(Piece("prose", " ".join(" ".join(text).split()), marker=marker, box=box))
            text.clear()

    for line in lines:
        if fence or (math is None and FENCE.match(line.strip())):
            if not fence:
                flush()
            fence.append(line)
            f = fence[0].strip()[:3]
            if len(fence) > 1 and line.strip().startswith(f) and not line.strip().strip(f[0]):
                out.append(Piece("exhibit", "\n".join(fence), box=box))
                fence = []
            continue
        odd = line.count("$$") % 2 == 1
        if math is None and line.strip().startswith("$$"):       # a display equation starts
            flush()
            math, odd = [], not odd                                # its first line must open it
        if math is not None:
            math.append(line)
            if odd:                                                # ... and a line with an odd $$ closes it
                out.append(Piece("exhibit", "\n".join(math), box=box))
                math = None
            continue
        m = _LIST_ITEM.match(line)
        if m and (marker or not text or not m.group(1)[0].isdigit() or m.group(1)[0] == "1"):
            flush()
            marker = m.group(1) + " "
            line = line[m.end():]
        text.append(line.strip())
    flush()
    if math or fence:
        out.append(Piece("exhibit", "\n".join(math or fence), box=box))
    return out


def render(parts: list[Piece], notes: bool = False) -> str:
    """The Markdown of what the slide shows of ``parts`` (or of what its notes say)."""
    md, prev = "", None
    for p in parts:
        text = p.notes if notes else p.show
        if not text:
            continue
        if p.kind == "prose":                   # the notes go on with a list item the slide shows: "- … rest"
            text = ("- … " if notes and p.marker and p.show else p.marker) + text
        quote = p.box >= 0 and not notes
        if quote:
            text = "\n".join(f"> {line}".rstrip() for line in text.splitlines())
        if prev is not None:
            same_list = p.marker and prev.marker and p.box == prev.box
            md += "\n" if same_list else "\n>\n" if quote and prev.box == p.box else "\n\n"
        md += text
        prev = p
    return md


def fit_slide(cells_parts: list[list[Piece]], budget: int = MAX_WORDS) -> None:
    """Decide what one (sub)slide shows (``Piece.show``): its headings, exhibits and, in reading order, the first
    sentence of each prose piece until the next one would pass ``budget`` words; from there on its prose is all
    in the notes. An admonition that fits the words left is shown whole."""
    stop, decided = False, set()
    for parts in cells_parts:
        for p in parts:
            p.show = ""
        for p in parts:
            key = (id(parts), p.box)
            if p.box >= 0 and key not in decided:
                decided.add(key)
                box = [q for q in parts if q.box == p.box]
                words = sum(prose_words(q.text) for q in box if q.kind != "exhibit")
                if not stop and words <= budget:
                    for q in box:
                        q.show = q.text
                    budget -= words
                    continue
            if p.show:
                continue
            if p.kind == "exhibit":
                p.show = p.text
            elif p.kind == "heading":
                p.show = p.text
                budget -= prose_words(p.text)
            elif not stop:
                lead = p.lead
                if prose_words(lead) <= budget:
                    p.show = lead
                    budget -= prose_words(lead)
                else:
                    stop = True
