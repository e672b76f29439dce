"""Links into docs/benchmarks.md resolve. Its headings change as figures are replaced, so every link
of the form `<path>/benchmarks.md#<anchor>` in the repository's docs, code, tests, benchmarks and
deploy files, and every link of its own contents (`](#<anchor>)`), must name one of its headings by
GitHub's anchor; every section cited by name (the file's name, a comma, then the heading in double
quotes) must be one of its headings. And the markers of benchmarks/bench_core.py's table stay."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SCANNED = ("README.md", "docs", "jobs", "tests", "benchmarks", "deploy")
SUFFIXES = {".md", ".py", ".java", ".sh", ".yaml", ".yml"}
NAME = "benchmarks" + r"\.md"  # spelled in two parts so that this file matches neither pattern
LINK = re.compile(NAME + r"#([\w-]+)")
CITED = re.compile(NAME + r'\)?,\s+"([^"]+)"')  # also a Markdown link's target, then the name
#: a line break inside a cited name, with the comment marker that continues it (Python, Java)
CONTINUATION = re.compile(r"\s*\n\s*(?:#:?|\*|//)?\s*")


def headings(text: str) -> list[str]:
    """The Markdown headings of `text`, outside fenced code blocks (whose `#` lines are comments)."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation other than '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(names: list[str]) -> set[str]:
    """GitHub numbers a repeated anchor: the second `x` is `x-1`, the third `x-2`."""
    seen: dict[str, int] = {}
    out = set()
    for name in names:
        base = slug(name)
        out.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return out


def plain(name: str) -> str:
    return " ".join(name.replace("`", "").split()).lower()


def sources() -> Iterator[Path]:
    for entry in SCANNED:
        root = REPO / entry
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        yield from (p for p in paths if p.suffix in SUFFIXES and p.is_file() and p != Path(__file__).resolve())


def references() -> list[tuple[str, str, str]]:
    """(file, kind, target) of every anchor link and cited section into docs/benchmarks.md."""
    found = []
    for path in sources():
        text = path.read_text(errors="replace")
        where = path.relative_to(REPO).as_posix()
        found += [(where, "anchor", m.group(1)) for m in LINK.finditer(text)]
        found += [(where, "section", CONTINUATION.sub(" ", m.group(1))) for m in CITED.finditer(text)]
    return found


REFERENCES = references()


def test_the_repository_links_into_the_benchmarks() -> None:
    """The patterns still find links (docs/streaming.md's performance table has several)."""
    assert any(kind == "anchor" and where == "docs/streaming.md" for where, kind, _ in REFERENCES)


@pytest.mark.parametrize(("where", "kind", "target"), REFERENCES)
def test_every_link_names_a_heading(where: str, kind: str, target: str) -> None:
    names = headings(BENCHMARKS.read_text())
    if kind == "anchor":
        assert target in anchors(names), f"{where}: no heading of docs/benchmarks.md has the anchor #{target}"
    else:
        assert plain(target) in {plain(n) for n in names}, f'{where}: no heading of docs/benchmarks.md is "{target}"'


def test_the_contents_links_name_headings() -> None:
    text = BENCHMARKS.read_text()
    links = re.findall(r"\]\(#([\w-]+)\)", text)
    assert links, "docs/benchmarks.md has no contents"
    assert set(links) <= anchors(headings(text)), set(links) - anchors(headings(text))


def test_the_core_table_keeps_the_markers_bench_core_writes_between() -> None:
    """benchmarks/bench_core.py rewrites its table between these markers and refuses a file without them."""
    text = BENCHMARKS.read_text()
    begin, end = "<!-- bench_core:begin (written by benchmarks/bench_core.py) -->\n", "<!-- bench_core:end -->"
    assert begin in text and end in text and text.index(begin) < text.index(end)
