"""The READMEs stay a true map: the root one fits on a screen, and every relative link leads somewhere.

A link is a Markdown link ``[text](target)`` outside code blocks and code spans; ``http(s)://`` and
``mailto:`` targets are not followed. A relative target must be an existing file or folder (relative to
the README that names it); a ``#anchor`` into a Markdown file (the README itself when the target is only the
anchor) must be one of that file's headings, slugged the way GitHub slugs them.

>>> github_slug("How `spatial-build` runs the graph")
'how-spatial-build-runs-the-graph'
>>> github_slug("Answer grammars (rewards and `spatial-eval`)")
'answer-grammars-rewards-and-spatial-eval'
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
ROOT_README_MAX_LINES = 150

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def readmes() -> list[Path]:
    """Every README.md the repository tracks (so nothing built or installed beside it counts)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*README.md"],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(REPOSITORY_ROOT / name for name in listed if Path(name).name == "README.md")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1, code spans removed."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, CODE_SPAN.sub("", line)))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated heading gets ``-1``, ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(readme: Path) -> list[str]:
    """``README:line: target (why)`` for every relative link of ``readme`` that leads nowhere."""
    broken = []
    for number, line in prose_lines(readme.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path_part, _, anchor = target.partition("#")
            destination = (readme.parent / path_part).resolve() if path_part else readme
            where = f"{readme.relative_to(REPOSITORY_ROOT)}:{number}: {target}"
            if not destination.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where} (no such heading)")
    return broken


def test_the_root_readme_fits_on_a_screen():
    lines = (REPOSITORY_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= ROOT_README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_package_readmes_are_found():
    names = {path.relative_to(REPOSITORY_ROOT).as_posix() for path in readmes()}
    assert {"README.md", "pipelines/README.md", "model_clients/README.md", "readers/README.md"} <= names


@pytest.mark.parametrize("readme", readmes(), ids=lambda path: path.relative_to(REPOSITORY_ROOT).as_posix())
def test_every_relative_link_resolves(readme):
    broken = broken_links(readme)
    assert not broken, "\n".join(broken)


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPOSITORY_ROOT", tmp_path)
    (tmp_path / "guide.md").write_text("# Guide\n\n## How `it` runs\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Top\n\n[ok](guide.md#how-it-runs) [ok](#top) [web](https://example.org/x)\n"
        "[gone](missing.md) [no heading](guide.md#elsewhere) [self](#nowhere)\n"
        "```\n[in code](missing.md)\n```\n`[in a span](missing.md)`\n",
        encoding="utf-8",
    )
    assert broken_links(readme) == [
        "README.md:4: missing.md (no such file)",
        "README.md:4: guide.md#elsewhere (no such heading)",
        "README.md:4: #nowhere (no such heading)",
    ]
