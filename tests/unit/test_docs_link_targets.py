"""What the docs point at exists, beyond tests/unit/test_docs_links.py (README.md and
docs/*.md): the links of benchmarks/README.md and CHANGELOG.md resolve too (to a file,
and to one of its headings for a ``#fragment``, GitHub's anchors); no document links to
itself by its file name (``[x](contracts.md)`` inside contracts.md: meant for another
page, or an ``#anchor`` of its own); and every repository path a doc names in a code span
(``tests/unit/test_x.py``, ``holds/fold.py``) is a file there, so a doc cannot go on
citing a test or module that was removed or renamed."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.readme import REPO
from tests.unit.test_docs_links import links, problems, relative, unfenced

DOCS = sorted((REPO / "docs").glob("*.md"))
EXTRA = [REPO / "benchmarks" / "README.md", REPO / "CHANGELOG.md"]
ALL = [REPO / "README.md", *DOCS, *EXTRA]
CURRENT = [REPO / "README.md", *DOCS, REPO / "benchmarks" / "README.md"]
"""The documents that describe the code as it is (CHANGELOG.md records what was)."""

PATH_BASES = (REPO, REPO / "src" / "delayline", REPO / "src", REPO / "benchmarks")
"""Where a path a doc names may start, besides the doc's own folder: the repository,
the package (``holds/fold.py``), ``src`` (``delayline/...``), the benchmarks
(``results/...``)."""

_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_PATH = re.compile(
    r"[\w.*{},/-]*\w/[\w.*{},/-]*\."
    r"(?:py|pyi|md|java|json|txt|ya?ml|sh|toml|proto|png|xml|js|css|html)"
)


def shown(document: Path) -> str:
    return str(document.relative_to(REPO)) if document.is_relative_to(REPO) else document.name


def self_links(document: Path) -> list[str]:
    """The links of ``document`` whose file part is ``document`` itself."""
    out = []
    for target in relative(links(document.read_text())):
        path = unquote(target).partition("#")[0]
        if path and (document.parent / path).resolve() == document.resolve():
            out.append(f"{shown(document)}: {target} links to itself (an #anchor suffices)")
    return out


def expand(pattern: str) -> list[str]:
    """``pattern`` with its first ``{a,b}`` expanded, as a shell does (recursively)."""
    head, brace, rest = pattern.partition("{")
    if not brace:
        return [pattern]
    options, _, tail = rest.partition("}")
    return [p for option in options.split(",") for p in expand(head + option + tail)]


def exists(document: Path, path: str) -> bool:
    """Whether ``path`` (globs and ``{a,b}`` allowed) names a file from one of the bases."""
    for base in (document.parent, *PATH_BASES):
        for option in expand(path):
            if any(base.glob(option)) if "*" in option else (base / option).exists():
                return True
    return False


def missing_paths(document: Path) -> list[str]:
    """Each repository path ``document`` names in a code span that names no file."""
    out = []
    for span in _SPAN.finditer(unfenced(document.read_text())):
        text = span[2].strip()
        if _PATH.fullmatch(text) and "://" not in text and not exists(document, text):
            out.append(f"{shown(document)}: `{text}` names no file of the repository")
    return out


@pytest.mark.parametrize("document", EXTRA, ids=shown)
def test_relative_links_resolve(document: Path) -> None:
    assert not problems(document), "\n".join(problems(document))


@pytest.mark.parametrize("document", ALL, ids=shown)
def test_no_document_links_to_itself_by_name(document: Path) -> None:
    assert not self_links(document), "\n".join(self_links(document))


@pytest.mark.parametrize("document", CURRENT, ids=shown)
def test_every_path_a_doc_names_exists(document: Path) -> None:
    assert not missing_paths(document), "\n".join(missing_paths(document))


def test_the_path_check_sees_paths_and_nothing_else(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "`tests/unit/test_gone.py` pins it; `holds/fold.py`, `results/cancels.{json,txt}`,\n"
        "`benchmarks/results/redis-*.json` and `docs/x.md` (missing) stay; not paths:\n"
        "`a/b`, `--lead 5s`, `https://e.org/x.md`, `delayline.fire.rewrite`\n\n"
        "```text\n`tests/in/a/block.py`\n```\n"
    )
    assert missing_paths(doc) == [
        "d.md: `tests/unit/test_gone.py` names no file of the repository",
        "d.md: `docs/x.md` names no file of the repository",
    ]


def test_a_self_link_is_told_from_an_anchor(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("[a](#top) [b](d.md) [c](./d.md#x) [d](other.md)\n")
    assert self_links(doc) == [
        "d.md: d.md links to itself (an #anchor suffices)",
        "d.md: ./d.md#x links to itself (an #anchor suffices)",
    ]
