"""Every relative link in README.md and docs/*.md works from a clone: it points to a
file inside the repository that git does not ignore, and a ``#fragment`` into a
Markdown file names one of its headings (GitHub's anchors)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.readme import REPO, fenced

DOCUMENTS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])

# [text](target "title"), ![alt](target), [label]: target, <a href="...">, <img src="...">
_INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HTML = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
_CODE_SPAN = re.compile(r"(`+).*?\1", re.DOTALL)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def unfenced(text: str) -> str:
    """``text`` with the lines of its fenced code blocks blanked."""
    lines = text.splitlines()
    for start, _info, code in fenced(text):
        for i in range(start - 1, min(start + code.count("\n"), len(lines))):
            lines[i] = ""
    return "\n".join(lines)


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", unfenced(text))


def links(text: str) -> list[str]:
    """Every link target in ``text``'s prose."""
    body = prose(text)
    return [m[1] for pattern in (_INLINE, _REFERENCE, _HTML) for m in pattern.finditer(body)]


def relative(targets: list[str]) -> list[str]:
    """The targets that point into the repository (no scheme such as https: or mailto:)."""
    return [t for t in targets if not _SCHEME.match(t) and not t.startswith("//")]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of ``markdown``: lower case, punctuation
    dropped, spaces to hyphens, ``-1``, ``-2`` ... for repeats."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in unfenced(markdown).splitlines():
        heading = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def git_ignored(paths: list[Path]) -> set[Path]:
    """Which of ``paths`` git ignores (and so a clone lacks); none without git."""
    if not paths or shutil.which("git") is None or not (REPO / ".git").exists():
        return set()
    result = subprocess.run(
        ["git", "check-ignore", "--stdin"],
        cwd=REPO,
        input="\n".join(str(p) for p in paths),
        capture_output=True,
        text=True,
        check=False,
    )
    return {Path(line) for line in result.stdout.splitlines()}


def problems(document: Path) -> list[str]:
    """What is wrong with each relative link of ``document``."""
    text = document.read_text()
    out: list[str] = []
    resolved: dict[str, Path] = {}
    for target in relative(links(text)):
        path_part, _, fragment = unquote(target).partition("#")
        path = (document.parent / path_part).resolve() if path_part else document
        where = f"{document.relative_to(REPO)}: {target}"
        if not path.is_relative_to(REPO):
            out.append(f"{where} is outside the repository (a clone does not have it)")
        elif not path.exists():
            out.append(f"{where}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path.read_text()):
            out.append(f"{where}: {path.name} has no heading with the anchor #{fragment}")
        else:
            resolved[where] = path
    ignored = git_ignored(sorted(set(resolved.values())))
    out += [f"{where} is ignored by git" for where, p in resolved.items() if p in ignored]
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_into_the_repository(document: Path) -> None:
    assert not problems(document), "\n".join(problems(document))


def test_the_design_document_is_linked_from_the_readme() -> None:
    assert "docs/architecture.md" in relative(links((REPO / "README.md").read_text()))


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("[a](docs/x.md) ![b](y.png 'title') [c](https://e.org) `[d](no.md)`", ["docs/x.md", "y.png"]),
        ("[ref]: ../outside.md\n```text\n[e](in-code.md)\n```\n", ["../outside.md"]),
        ('<img src="docs/p.png"> <a href="#local">x</a> [m](mailto:a@b.c)', ["docs/p.png", "#local"]),
    ],
)  # fmt: skip
def test_links_are_found_in_prose_only(markdown: str, expected: list[str]) -> None:
    assert sorted(relative(links(markdown))) == sorted(expected)


def test_anchors_follow_github() -> None:
    text = "# A b\n## The pipeline: `delayline run`\n## Why 2k/s: measured\n# A b\n"
    expected = {"a-b", "a-b-1", "why-2ks-measured", "the-pipeline-delayline-run"}
    assert anchors(text) == expected
