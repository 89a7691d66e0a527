"""Every benchmark figure the docs quote is the one in ``benchmarks/results/``.

A figure is followed by a marker, an HTML comment GitHub does not show, that names the
results file (relative to ``benchmarks/``) and the field it comes from::

    lateness p99 31.2 s<!-- figure: results/redis-steady.json figures.lateness_ms.p99 /1000 -->

The number just before the marker must be the field's value (divided by the optional
``/N``), rounded to the decimals the doc shows. A field is a dotted path into the JSON
(list items by index); ``len:PATH`` is the length of a list. So a re-run that changes a
results file fails this test until every doc quoting it is brought up to date.

Besides: a doc block (paragraph, list item or table row) that names a results file
carries a marker into that file (a figure quoted next to it would go stale
unnoticed), and every results file a doc names exists. The tables that
``python -m delayline.bench.summary`` generates are in ``benchmarks/README.md`` as it
generates them from ``benchmarks/results/`` today.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from delayline.bench import summary
from tests.readme import REPO
from tests.unit.test_docs_links import unfenced

BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results"
DOCUMENTS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), BENCHMARKS / "README.md"])
NOT_CHECKED_FOR_CITATIONS = {REPO / "docs" / "operations.md"}
"""Documents whose blocks may name a results file without a marker: operations.md names
``broker-freeze.json`` only as where the fault's runs are (its figures are the test's)."""

_MARKER = re.compile(r"<!--\s*figure:\s*(?P<file>\S+)\s+(?P<field>\S+)(?:\s+/(?P<div>\d+))?\s*-->")
# a minus is a sign only where no word precedes it: 377-490 is a range
_NUMBER = re.compile(r"(?<!\w)-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\d+(?:\.\d+)?")
_GAP = re.compile(r"[^\d<>]{0,16}")  # a unit between the figure and its marker: " ms", "/s"
# results/NAME, with globs and {a,b}; a bare "results/" (the folder) is not a citation
_CITATION = re.compile(r"results/(?P<name>[A-Za-z0-9*][\w*.{},-]*)")


@dataclass(frozen=True)
class Figure:
    """One marked figure: where it is, what it says, and where its value is."""

    document: Path
    line: int
    shown: str
    file: str
    field: str
    divisor: int

    def where(self) -> str:
        return f"{shown_path(self.document)}:{self.line}"


def shown_path(document: Path) -> str:
    """``document`` relative to the repository (its name when outside it)."""
    return str(document.relative_to(REPO)) if document.is_relative_to(REPO) else document.name


def figures(document: Path) -> list[Figure]:
    """The marked figures of ``document``: each marker and the number just before it.

    Raises:
        AssertionError: a marker with no number right before it (a unit may stand between).
    """
    text = document.read_text()
    out: list[Figure] = []
    for m in _MARKER.finditer(text):
        before = _MARKER.sub("", text[: m.start()])[-80:]
        numbers = list(_NUMBER.finditer(before))
        line = text.count("\n", 0, m.start()) + 1
        assert numbers, f"{document.name}:{line}: a figure marker with no number before it"
        last = numbers[-1]
        gap = before[last.end() :]
        assert _GAP.fullmatch(gap), (
            f"{document.name}:{line}: the marker must follow its number (and its unit), not {gap!r}"
        )
        div = int(m["div"]) if m["div"] else 1
        out.append(Figure(document, line, last[0], m["file"], m["field"], div))
    return out


def value_of(data: Any, field: str) -> Any:
    """``field`` of ``data``: a dotted path (list items by index, ``%20`` for a space in
    a key), or ``len:PATH``.

    Raises:
        KeyError: the path names nothing.
    """
    length = field.startswith("len:")
    value = data
    for part in map(unquote, field.removeprefix("len:").split(".")):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{field}: no {part!r}")
    return len(value) if length else value


def problem(shown: str, value: Any, divisor: int = 1) -> str | None:
    """Why ``shown`` (as a doc prints it) is not ``value`` / ``divisor``, or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"the field is {value!r}, not a number"
    decimals = len(shown.partition(".")[2])
    expected = (Decimal(str(value)) / divisor).quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP
    )
    if Decimal(shown.replace(",", "")) != expected:
        return f"the doc says {shown}, the results file {expected:,}"
    return None


def check(figure: Figure) -> str | None:
    """What is wrong with ``figure``, or ``None``."""
    path = BENCHMARKS / figure.file
    if not path.is_file() or path.parent != RESULTS or path.suffix != ".json":
        return f"{figure.where()}: {figure.file} is no JSON file of benchmarks/results/"
    try:
        value = value_of(json.loads(path.read_text()), figure.field)
    except KeyError as exc:
        return f"{figure.where()}: {figure.file} has no {exc}"
    why = problem(figure.shown, value, figure.divisor)
    return None if why is None else f"{figure.where()} ({figure.file} {figure.field}): {why}"


ALL_FIGURES = [f for document in DOCUMENTS for f in figures(document)]


@pytest.mark.parametrize("figure", ALL_FIGURES, ids=Figure.where)
def test_a_marked_figure_is_the_one_in_its_results_file(figure: Figure) -> None:
    assert check(figure) is None, check(figure)


@pytest.mark.parametrize(
    "document",
    [REPO / "docs" / "holds.md", REPO / "docs" / "pipeline.md", BENCHMARKS / "README.md"],
    ids=shown_path,
)
def test_the_docs_that_quote_bench_runs_mark_their_figures(document: Path) -> None:
    assert figures(document), f"{document.name} has no figure marker left"


def blocks(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph, list item and table row outside code."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate([*unfenced(text).splitlines(), ""], start=1):
        item = re.match(r"^\s*(?:[-*+]|\d+\.)\s|^\s*\|", line)
        if (not line.strip() or item) and current:
            out.append((start, "\n".join(current)))
            current = []
        if line.strip():
            if not current:
                start = number
            current.append(line)
    return out


def stems(pattern: str) -> list[str]:
    """The file-name globs a citation stands for, without their extensions:
    ``cancels.{json,txt}`` -> ``cancels``; ``committer.*`` -> ``committer``."""
    pattern = re.sub(r"\.(?:\*|\{[^}]*\}|json|txt|png)$", "", pattern.rstrip(".,"))
    head, brace, rest = pattern.partition("{")
    if not brace:
        return [pattern]
    options, _, tail = rest.partition("}")
    return [head + option + tail for option in options.split(",")]


def citation_problems(document: Path) -> list[str]:
    """Each results file ``document`` names that does not exist, and each block that
    names a JSON results file without a marker into it."""
    out: list[str] = []
    for line, block in blocks(document.read_text()):
        in_block = {Path(m["file"]).stem for m in _MARKER.finditer(block)}
        for citation in _CITATION.finditer(_MARKER.sub("", block)):
            where = f"{shown_path(document)}:{line}: results/{citation['name']}"
            for stem in stems(citation["name"]):
                files = [p for p in RESULTS.iterdir() if fnmatch.fnmatch(p.stem, stem)]
                if not files:
                    out.append(f"{where}: no such file in benchmarks/results/")
                elif (
                    document not in NOT_CHECKED_FOR_CITATIONS
                    and any(p.suffix == ".json" for p in files)
                    and not any(fnmatch.fnmatch(s, stem) for s in in_block)
                ):
                    out.append(f"{where} without a figure marker into it in the same block")
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=shown_path)
def test_a_block_naming_a_results_file_marks_a_figure_of_it(document: Path) -> None:
    assert not citation_problems(document), "\n".join(citation_problems(document))


def tables(markdown: str) -> list[str]:
    """The Markdown tables of ``markdown``, each as its rows."""
    rows = [line if line.startswith("|") else "" for line in markdown.splitlines()]
    return [table for table in "\n".join(rows).split("\n\n") if table.strip("\n")]


@pytest.mark.parametrize(
    "generate",
    [summary.markdown, summary.holds_markdown, summary.cluster_markdown],
    ids=lambda f: f.__name__,
)
def test_the_generated_tables_are_as_the_results_generate_them(generate: Any) -> None:
    generated = tables(generate(RESULTS))
    assert generated, f"{generate.__name__} made no table from benchmarks/results/"
    readme = (BENCHMARKS / "README.md").read_text()
    for rows in (table.strip("\n") for table in generated):
        assert rows in readme, (
            f"benchmarks/README.md lacks this table of {generate.__name__} as "
            f"`python -m delayline.bench.summary benchmarks/results` prints it today:\n{rows}"
        )


# The checks themselves, on made-up text: each must be able to fail.


def test_a_stale_figure_is_told_apart(tmp_path: Path) -> None:
    assert problem("31.2", 31_153, 1000) is None
    assert problem("2,117", 2117) is None
    assert problem("596", 595.9) is None
    assert problem("1,627", 2117) == "the doc says 1,627, the results file 2,117"
    assert problem("31.1", 31_153, 1000) is not None
    assert problem("3", None) == "the field is None, not a number"
    assert problem("-5", -5) is None


def test_a_marker_reads_the_number_before_it(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("p99 1,692 ms<!-- figure: results/x.json a.b -->, then 31.2 s<!-- "
                   "figure: results/y.json c /1000 -->, 377-490 ms<!-- figure: results/z.json d"
                   " -->, at -5<!-- figure: results/w.json e -->\n")  # fmt: skip
    found = figures(doc)
    assert [(f.shown, f.file, f.field, f.divisor) for f in found] == [
        ("1,692", "results/x.json", "a.b", 1),
        ("31.2", "results/y.json", "c", 1000),
        ("490", "results/z.json", "d", 1),
        ("-5", "results/w.json", "e", 1),
    ]
    doc.write_text("1,692 ms and then some words<!-- figure: results/x.json a -->\n")
    with pytest.raises(AssertionError, match="must follow its number"):
        figures(doc)


def test_fields_are_paths_or_lengths() -> None:
    data = {"figures": {"steps": [{"p99": 5}, {"p99": 7}], "a b": 1}, "runs": [1, 2, 3]}
    assert value_of(data, "figures.steps.1.p99") == 7
    assert value_of(data, "figures.a%20b") == 1
    assert value_of(data, "len:runs") == 3
    with pytest.raises(KeyError):
        value_of(data, "figures.steps.2.p99")


def test_citations_need_a_marker_in_their_block(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "From `results/trickle.json`: p99 29 ms<!-- figure: results/trickle.json "
        "figures.lateness_ms.p99 -->.\n\n- `results/steady.txt` had 2,649/s.\n\n"
        "| `results/cancels.{json,txt}` | 20 |\n\n`results/nothing-like-it.json`\n\n"
        "`results/` holds the runs; `results/state_layouts.txt` has no JSON.\n"
    )
    assert citation_problems(doc) == [
        "d.md:3: results/steady.txt without a figure marker into it in the same block",
        "d.md:5: results/cancels.{json,txt} without a figure marker into it in the same block",
        "d.md:7: results/nothing-like-it.json: no such file in benchmarks/results/",
    ]
