"""The fenced code blocks of the README and of every doc it links, and the markers in
their info strings that say whether and how tests/e2e/test_readme.py runs them.

    ```sh run                        run it; a non-zero exit fails the test
    ```python run expect="TEXT"      ... and TEXT must be in its output (repeatable)
    ```sh run background expect="T"  leave it running until the end; wait for T first
    ```sh run retry expect="T"       rerun it until T is in its output
    ```sh norun: REASON              not run, for the reason given
    ```text                          output samples, diagrams: never run

Every ``sh`` and ``python`` block carries ``run`` or ``norun:``, and every block has a
language, so that no shell or Python block escapes the test unnoticed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# Languages whose blocks must be run or say why not; the value is how they run.
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python"}
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_FLAGS = ("background", "retry")


class MarkerError(ValueError):
    """A block whose info string breaks the rules above; says where and why."""


@dataclass(frozen=True)
class Block:
    """One fenced code block.

    Attributes:
        line: Line of the opening fence (1-based).
        language: First word of the info string ("" when none).
        kind: "sh" or "python" for runnable languages, else the language.
        code: The block's text.
        run: Whether the test runs it.
        background: Run without waiting for it to exit; stopped at the end.
        retry: Rerun until every expectation holds.
        expect: Texts its output must contain.
        reason: Why it is not run (``norun:``).
        source: The file it is in, relative to the repository.
    """

    line: int
    language: str
    kind: str
    code: str
    run: bool = False
    background: bool = False
    retry: bool = False
    expect: tuple[str, ...] = ()
    reason: str = ""
    source: str = "README.md"


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def linked_docs(path: Path = README) -> list[Path]:
    """The Markdown files of this repository ``path`` links to, in the order of their first
    link (the README's reference: its code blocks follow the same rules)."""
    seen: list[Path] = []
    for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", path.read_text()):
        if "://" in target:
            continue
        doc = (path.parent / target).resolve()
        if doc.is_file() and doc not in seen:
            seen.append(doc)
    return seen


def read_blocks(path: Path = README) -> list[Block]:
    """The fenced code blocks of ``path`` with their markers.

    Raises:
        MarkerError: one or more blocks are unmarked or wrongly marked (all listed).
    """
    blocks: list[Block] = []
    problems: list[str] = []
    for line, info, code in fenced(path.read_text()):
        try:
            blocks.append(replace(_block(line, info, code), source=_relative(path)))
        except MarkerError as exc:
            problems.append(f"{path.name}:{line}: {exc}")
    if problems:
        raise MarkerError("\n".join(problems))
    return blocks


def fenced(text: str) -> list[tuple[int, str, str]]:
    """(line of the opening fence, info string, code) of every fenced block (CommonMark:
    closed by a fence of the same character at least as long, or the end of the text)."""
    out: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1  # a backtick fence's info string cannot hold a backtick
            continue
        fence = opening["fence"]
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        out.append((i + 1, opening["info"].strip(), "\n".join(lines[i + 1 : end]) + "\n"))
        i = end + 1
    return out


def _closes(line: str, fence: str) -> bool:
    closing = _FENCE.match(line)
    return (
        closing is not None
        and closing["fence"][0] == fence[0]
        and len(closing["fence"]) >= len(fence)
        and not closing["info"].strip()
    )


def _block(line: int, info: str, code: str) -> Block:
    language, _, marker = info.partition(" ")
    marker = marker.strip()
    if not language:
        raise MarkerError("a block without a language: name it (text for output samples)")
    kind = RUNNABLE.get(language, language)
    if kind not in ("sh", "python"):
        if marker:
            raise MarkerError(f"only sh and python blocks take markers, not {language!r}")
        return Block(line, language, kind, code)
    if marker.startswith("norun:"):
        reason = marker.removeprefix("norun:").strip()
        if not reason:
            raise MarkerError("norun: needs a reason")
        return Block(line, language, kind, code, reason=reason)
    try:
        words = shlex.split(marker)
    except ValueError as exc:
        raise MarkerError(f"cannot split the marker {marker!r}: {exc}") from None
    if not words or words[0] != "run":
        raise MarkerError(f"a {language} block says `run ...` or `norun: REASON`, not {marker!r}")
    return _run_block(line, language, kind, code, words[1:])


def _run_block(line: int, language: str, kind: str, code: str, words: list[str]) -> Block:
    flags = {w for w in words if w in _FLAGS}
    expect = tuple(w.removeprefix("expect=") for w in words if w.startswith("expect="))
    unknown = [w for w in words if w not in _FLAGS and not w.startswith("expect=")]
    if unknown:
        raise MarkerError(f"unknown marker words {unknown}: use {_FLAGS} and expect=TEXT")
    if not all(expect):
        raise MarkerError("expect= needs a text")
    if flags == set(_FLAGS):
        raise MarkerError("a block is background or retry, not both")
    if flags and not expect:
        raise MarkerError(f"{' '.join(sorted(flags))} needs expect=TEXT: what to wait for")
    return Block(
        line,
        language,
        kind,
        code,
        run=True,
        background="background" in flags,
        retry="retry" in flags,
        expect=expect,
    )
