"""The documentation holds together: every relative link in README.md, CHANGELOG.md and
docs/*.md names a file that exists and, with `#anchor`, a heading that file has (GitHub's
anchors); and the README still shows the two commands a newcomer runs first, the second being
exactly what CI (`.ci/run`) runs."""

from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted([README, ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
SERVE = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/cari serve"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# [text](target) and ![alt](target), the target up to whitespace or ')' (an optional
# "title" after it); and reference definitions, `[name]: target`.
INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EXPLICIT = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but `-` and `_`
    removed, each space a `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFC", text).strip().lower()
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page has: its headings' slugs (a repeated one with -1, -2, …) and any
    `<a id=…>`."""
    found: set[str] = set()
    seen: Counter[str] = Counter()
    for line in prose(path.read_text()):
        found.update(EXPLICIT.findall(line))
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def links(path: Path) -> list[str]:
    """The relative link targets of a page (prose only, code spans left out)."""
    targets: list[str] = []
    for line in prose(path.read_text()):
        line = CODE_SPAN.sub("", line)
        targets += INLINE.findall(line)
        definition = DEFINITION.match(line)
        if definition:
            targets.append(definition.group(1))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def broken(path: Path, root: Path = ROOT) -> list[str]:
    """The links of `path` that lead nowhere, each with why (files named from `root`)."""
    problems = []
    for target in links(path):
        file_part, _, fragment = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not destination.exists():
            problems.append(f"{target}: no file {os.path.relpath(destination, root)}")
        elif (
            fragment
            and destination.suffix == ".md"
            and unquote(fragment) not in anchors(destination)
        ):
            problems.append(f"{target}: no heading #{fragment} in {destination.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def _shell_lines(path: Path) -> list[str]:
    """The lines inside the page's ```sh blocks."""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```sh"
            continue
        if inside:
            lines.append(line.strip())
    return lines


def test_the_readme_shows_the_two_commands() -> None:
    """Serving on the embedded server, and setting up and passing the tests as CI does:
    `.ci/run`'s last command is the README's, character for character."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    test_command = next(line for line in reversed(ci) if line.startswith("python3 -m venv"))
    shown = _shell_lines(README)
    assert SERVE in shown, "the README no longer shows how to serve on the embedded server"
    assert test_command in shown, f"the README no longer shows CI's command: {test_command}"
    # The first screen: both before any recipe.
    text = README.read_text()
    assert text.index(test_command) < text.index("## Recipes")


def test_the_checker_finds_a_broken_link(tmp_path: Path) -> None:
    """The checks above can fail: a missing file, a missing heading, a link in a reference
    definition; links inside code are not links."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading (yes)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Twice\n\n## Twice\n\n"
        "[ok](other.md#a-code-heading-yes) [self](#twice-1) [x](https://example.org/nowhere)\n"
        "[gone](missing.md) [nohead](other.md#nothing) `[code](missing-too.md)`\n"
        "[ref]: other.md#nope\n\n```sh\n[fenced](missing-three.md)\n```\n"
    )
    assert broken(page, tmp_path) == [
        "missing.md: no file missing.md",
        "other.md#nothing: no heading #nothing in other.md",
        "other.md#nope: no heading #nope in other.md",
    ]
