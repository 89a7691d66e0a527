"""The docs' command lines agree with ``delayline``'s own parser and with each other:
docs/pipeline.md's synopsis names every ``delayline`` command (and no other), every
example's metrics port is the one the docs chose for its process (the pipeline 9464, a
committer 9465, as ops/prometheus/prometheus.yml scrapes them), and ``delayline topics
create --help`` names every kind of topic the command creates."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from delayline.cli import build_parser
from delayline.cli._common import topology_from
from delayline.kafka.topics import TopicsConfig
from tests.readme import REPO, fenced

PIPELINE_PORT = 9464
COMMITTER_PORT = 9465
EXAMPLES = sorted(
    [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        REPO / "benchmarks" / "README.md",
        *(REPO / "examples").glob("**/*.yaml"),
    ]
)


@pytest.fixture
def parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """``delayline``'s parser, its defaults untouched by this machine's DELAYLINE_*."""
    for name in [n for n in os.environ if n.startswith("DELAYLINE_")]:
        monkeypatch.delenv(name)
    return build_parser()


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def synopsis_commands(markdown: str) -> set[str]:
    """The commands of the first code block under "## The command line"."""
    section = markdown.partition("\n## The command line\n")[2]
    assert section, "docs/pipeline.md has no section '## The command line'"
    _line, _info, code = fenced(section)[0]
    return set(re.findall(r"^delayline ([a-z][\w-]*)", code, re.MULTILINE))


def test_the_synopsis_names_every_command(parser: argparse.ArgumentParser) -> None:
    named = synopsis_commands((REPO / "docs" / "pipeline.md").read_text())
    commands = set(subparsers(parser))
    assert not commands - named, f"docs/pipeline.md's synopsis lacks {sorted(commands - named)}"
    assert not named - commands, (
        f"docs/pipeline.md names no such command {sorted(named - commands)}"
    )


def test_the_synopsis_is_read_from_its_first_block() -> None:
    text = "# x\n## The command line\n\n```sh\ndelayline run [...]\ndelayline api\n```\n"
    assert synopsis_commands(text + "```sh\ndelayline later\n```\n") == {"run", "api"}


# an environment variable's value: VAR=9464, {name: VAR, value: "9464"}
_COMMITTER_ENV = re.compile(r"\bDELAYLINE_COMMITTER_METRICS_PORT\b[^\d\n]{0,20}(\d+)")
_PIPELINE_ENV = re.compile(r"\bDELAYLINE_METRICS_PORT\b[^\d\n]{0,20}(\d+)")
_PIPELINE_URL = re.compile(r"--pipeline-url[\s=]+\S*?:(\d+)")


def port_problems(path: Path, text: str) -> list[str]:
    """Each metrics port an example in ``text`` gives that is not its process's."""
    out = []
    for number, line in enumerate(re.sub(r"\\\n", " ", text).splitlines(), start=1):
        for m in re.finditer(r"--metrics-port(?:=|\s+)[\"']?(\d+)", line):
            commands = re.findall(r"delayline\s+([a-z][\w-]*)", line[: m.start()])
            if commands:
                wanted = {COMMITTER_PORT if commands[-1] == "committer" else PIPELINE_PORT}
            else:  # no command on the line: either process's port
                wanted = {PIPELINE_PORT, COMMITTER_PORT}
            if int(m[1]) not in wanted:
                out.append(f"{path.name}:{number}: --metrics-port {m[1]}, not {sorted(wanted)}")
        for name, pattern, port in (
            ("DELAYLINE_COMMITTER_METRICS_PORT", _COMMITTER_ENV, COMMITTER_PORT),
            ("DELAYLINE_METRICS_PORT", _PIPELINE_ENV, PIPELINE_PORT),
            ("--pipeline-url", _PIPELINE_URL, PIPELINE_PORT),
        ):
            for m in pattern.finditer(line):
                if int(m[1]) != port:
                    out.append(f"{path.name}:{number}: {name} {m[1]}, not {port}")
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_gives_its_process_metrics_port(path: Path) -> None:
    problems = port_problems(path, path.read_text())
    assert not problems, "\n".join(problems)


def test_ports_are_judged_by_their_command() -> None:
    text = (
        "`delayline run --metrics-port 9404`\n"
        "delayline committer --name a \\\n  --metrics-port 9464\n"
        "delayline committer --metrics-port=9465 and `delayline run --metrics-port 9464`\n"
        '  - {name: DELAYLINE_METRICS_PORT, value: "9404"}\n'
        "--pipeline-url http://127.0.0.1:9400\n"
        "`--metrics-port 9465`, DELAYLINE_COMMITTER_METRICS_PORT=9465\n"
    )
    assert port_problems(Path("x.md"), text) == [
        "x.md:1: --metrics-port 9404, not [9464]",
        "x.md:2: --metrics-port 9464, not [9465]",
        "x.md:4: DELAYLINE_METRICS_PORT 9404, not 9464",
        "x.md:5: --pipeline-url 9400, not 9464",
    ]


def test_topics_create_help_names_every_topic_it_creates(
    parser: argparse.ArgumentParser,
) -> None:
    topics = subparsers(subparsers(parser)["topics"])["create"]
    flags = [
        flag
        for action in topics._actions
        for flag in action.option_strings
        if flag.endswith("-topic") and flag != "--target-topic"
    ]
    description = topics.description or ""
    for flag in flags:
        kind = flag.removeprefix("--").removesuffix("-topic")
        assert kind in description, f"`topics create --help` does not name the {kind} topic"
    # Every topic the command creates (targets aside) is one of those flags' kinds.
    given = {flag: f"t-{i}" for i, flag in enumerate(flags)}
    args = parser.parse_args(["topics", "create", *(w for f, n in given.items() for w in (f, n))])
    created = set(TopicsConfig(topology_from(args)).wanted())
    assert created == set(given.values()), "a topic kind without a flag of its own"
