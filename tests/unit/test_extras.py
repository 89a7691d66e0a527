"""``pip install delayline`` is the client: importing it and starting the CLI must not
need an extra, and a command that needs a missing extra says which in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from delayline.cli import extras, main

# Top-level modules of the extras (and what they bring): absent from the base install.
NOT_IN_BASE = (
    "pyspark",
    "pandas",
    "pyarrow",
    "numpy",
    "fastapi",
    "starlette",
    "pydantic",
    "uvicorn",
    "prometheus_client",
    "httpx",
    "matplotlib",
)

# Runs in a fresh interpreter, where the finder makes those modules look not installed.
BASE_INSTALL = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from importlib.abc import MetaPathFinder

    BLOCKED = set(sys.argv[1].split(","))
    early = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not early, f"imported at startup, cannot be blocked: {early}"

    class NotInstalled(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())

    import delayline
    import delayline.client
    import delayline.cli
    from delayline import AsyncScheduler, Scheduler

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
        delayline.cli.build_parser().parse_args(["--help"])
    errors = {}
    # `list` asks the API with the standard library: it runs, and finds no API there.
    unreachable = ["list", "--api-url", "http://127.0.0.1:9"]
    for command in (["run"], ["api"], ["bench"], ["demo", "--hold"], unreachable):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = delayline.cli.main(command)
        errors[command[0]] = [code, stderr.getvalue()]
    loaded = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
    print(json.dumps({"help": help_text.getvalue(), "errors": errors, "loaded": loaded}))
    """
)


def test_the_base_install_imports_and_starts_the_cli_without_any_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BASE_INSTALL, ",".join(NOT_IN_BASE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["loaded"] == []
    assert "usage: delayline" in result["help"]
    for command in ("schedule", "run", "api", "bench", "demo"):
        assert f"    {command} " in result["help"]
    assert result["errors"] == {
        "run": [1, "delayline run needs the pipeline extra: pip install 'delayline[pipeline]'\n"],
        "api": [1, "delayline api needs the api extra: pip install 'delayline[api]'\n"],
        "bench": [1, "delayline bench needs the bench extra: pip install 'delayline[bench]'\n"],
        "demo": [
            1,
            "delayline demo needs the pipeline and api extras: "
            "pip install 'delayline[pipeline,api]'\n",
        ],
        "list": result["errors"]["list"],
    }
    code, line = result["errors"]["list"]
    assert code == 1
    assert "did not answer" in line
    assert "extra" not in line


@pytest.mark.parametrize(
    ("missing", "command", "line"),
    [
        (
            {"pyspark"},
            ["run"],
            "delayline run needs the pipeline extra: pip install 'delayline[pipeline]'",
        ),
        ({"uvicorn"}, ["api"], "delayline api needs the api extra: pip install 'delayline[api]'"),
        (
            {"matplotlib"},
            ["bench"],
            "delayline bench needs the bench extra: pip install 'delayline[bench]'",
        ),
    ],
)
def test_a_command_names_the_missing_extra_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    missing: set[str],
    command: list[str],
    line: str,
) -> None:
    monkeypatch.setattr(extras, "_installed", lambda module: module not in missing)
    assert main(command) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", line + "\n")


def test_the_extras_named_are_those_of_pyproject() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    declared = set(pyproject["project"]["optional-dependencies"])
    assert set(extras.EXTRAS) <= declared
    assert {"all", "dev"} <= declared
