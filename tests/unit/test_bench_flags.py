"""``delayline bench``'s flags against what benchmarks/README.md documents."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from delayline.cli.bench_flags import add_flags


def test_every_scenario_the_benchmarks_readme_lists_is_one_the_bench_takes() -> None:
    """The README's table of scenarios and ``--scenario``'s choices are the same set."""
    readme = (Path(__file__).parents[2] / "benchmarks" / "README.md").read_text()
    table = readme.split("\n## Scenarios\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE))
    parser = argparse.ArgumentParser()
    add_flags(parser)
    (action,) = [a for a in parser._actions if a.dest == "scenario"]
    assert set(action.choices or ()) == listed
    for name in listed:
        assert parser.parse_args(["--scenario", name]).scenario == name
