"""README.md, run: its quickstart and examples as a new user runs them, read from the
README at test time (tests/readme.py explains the markers), so the README cannot rot.

Blocks run in README order from the repository's root, each in a fresh ``bash -e -o
pipefail`` or Python process, with only the changes in ``CHANGES`` below. Background
blocks (``delayline run``, ``delayline api``, ``delayline tail``) are stopped at the end
as the README says, with Ctrl-C (SIGINT to their process group), and the broker that the
quickstart's ``delayline broker start`` started is stopped with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.infra.procs import kill_until_gone, tree
from tests.readme import README, REPO, Block, linked_docs, read_blocks
from tests.support import ARTIFACTS


@dataclass(frozen=True)
class Change:
    """One way the test departs from the README's text.

    Attributes:
        kind: "env" sets the variable ``name`` for every block; "text" replaces ``name``
            in the code and the expected output of every block that runs.
        name: The variable, or the README text replaced.
        value: What it becomes; ``{broker_port}``, ``{api_port}``, ``{tmp}`` (this test's
            directory), ``{bin}`` (the test interpreter's bin) and ``{path}`` are filled in.
        why: Why it cannot stay as written.
    """

    kind: str
    name: str
    value: str
    why: str


# Every departure from the README, in one table. Everything else runs exactly as written.
CHANGES = (
    Change("env", "DELAYLINE_BROKER_PORT", "{broker_port}",
           "a free port (its +1 for the controller too): a developer's broker may hold 9092"),
    Change("env", "DELAYLINE_BROKER_DATA_DIR", "{tmp}/broker",
           "a fresh broker, not the checkout's .delayline/broker a developer's broker may own"),
    Change("env", "DELAYLINE_BOOTSTRAP_SERVERS", "127.0.0.1:{broker_port}",
           "that broker, for every command that talks to Kafka"),
    Change("env", "DELAYLINE_CHECKPOINT_DIR", "{tmp}/checkpoint",
           "a fresh pipeline, not the checkout's .delayline/checkpoint"),
    Change("env", "DELAYLINE_CATALOG", "{tmp}/catalog.db",
           "a fresh catalog, not the checkout's .delayline/catalog.db"),
    Change("env", "DELAYLINE_API_PORT", "{api_port}", "a free port: 8080 may be taken"),
    Change("env", "DELAYLINE_API_URL", "http://127.0.0.1:{api_port}",
           "where `delayline show` and `delayline list` find that API"),
    Change("env", "PATH", "{bin}:{path}",
           "`delayline` and `python` of the test's venv, as `. .venv/bin/activate` in "
           "each terminal gives: a block's activation ends with its shell"),
    Change("text", "127.0.0.1:9092", "127.0.0.1:{broker_port}",
           "the broker's address where no variable reaches: Python code, expect="),
    Change("text", "localhost:8080", "localhost:{api_port}", "curl's URLs: curl has no variable"),
    Change("text", "127.0.0.1:8080", "127.0.0.1:{api_port}", "the API's address in expect="),
)  # fmt: skip
# Removed from the inherited environment so that a developer's settings cannot leak in:
# every other DELAYLINE_* variable except these.
KEPT_DELAYLINE_VARIABLES = frozenset({"DELAYLINE_JAR_CACHE"})

# The quickstart's steps: each must be in a block that runs (what the issue asked for).
QUICKSTART = (
    "delayline broker start",
    "delayline topics create",
    "delayline run",
    "delayline api --token",
    "delayline schedule",
    "Scheduler(",
    "curl -X POST",
    "delayline tail",
)

FOREGROUND_TIMEOUT_S = 120  # `broker start` waits up to 90 s for the broker
BACKGROUND_TIMEOUT_S = 300  # the pipeline's first batch: 20-30 s here, more under load
RETRY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 90  # `delayline run` finishes the batch in flight
LOGS = ARTIFACTS / "readme"


def test_every_code_block_is_marked_and_every_change_is_used() -> None:
    for doc in linked_docs():
        read_blocks(doc)  # raises, listing every unmarked or wrongly marked block
    blocks = read_blocks()
    run = [b for b in blocks if b.run]
    texts = "\n".join(b.code + "\n".join(b.expect) for b in run)
    for change in CHANGES:
        if change.kind == "text":
            assert change.name in texts, f"CHANGES: {change.name!r} is in no block that runs"
    for step in QUICKSTART:
        assert any(step in b.code for b in run), f"no README block that runs has {step!r}"
    assert all(b.expect for b in run if b.background), "a background block without expect="


@pytest.mark.timeout(900)  # about 90 s here; the blocks' own timeouts come first
def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    stack = Stack.create(tmp_path)
    try:
        # The README's blocks, then those of every doc it links, against the stack the
        # README started (its broker, pipeline and API still run).
        for doc in [README, *linked_docs()]:
            for block in read_blocks(doc):
                if block.run:
                    stack.run(block)
    finally:
        problems = stack.stop()
    assert not problems, "\n".join(problems)


@dataclass
class Background:
    block: Block
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Stack:
    """Runs blocks with ``CHANGES`` applied and keeps what runs in the background."""

    tmp: Path
    broker_port: int
    env: dict[str, str]
    texts: dict[str, str]
    running: list[Background] = field(default_factory=list)

    @classmethod
    def create(cls, tmp: Path) -> Stack:
        fill = {
            "broker_port": str(_port_and_next_free()),
            "api_port": str(free_port()),
            "tmp": str(tmp),
            "bin": str(Path(sys.executable).parent),
            "path": os.environ.get("PATH", ""),
        }
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("DELAYLINE_") or k in KEPT_DELAYLINE_VARIABLES
        }
        texts: dict[str, str] = {}
        for change in CHANGES:
            (env if change.kind == "env" else texts)[change.name] = change.value.format(**fill)
        LOGS.mkdir(parents=True, exist_ok=True)
        return cls(tmp, int(fill["broker_port"]), env, texts)

    def substitute(self, text: str) -> str:
        for old, new in self.texts.items():
            text = text.replace(old, new)
        return text

    def command(self, block: Block) -> list[str]:
        code = self.substitute(block.code)
        if block.kind == "python":
            script = self.tmp / f"readme-{block.line}.py"
            script.write_text(code)
            return [sys.executable, str(script)]
        return ["bash", "-e", "-o", "pipefail", "-c", code]

    def run(self, block: Block) -> None:
        """Run ``block``; fail the test, saying which block and why, unless it does
        what its markers promise."""
        expect = [self.substitute(e) for e in block.expect]
        if block.background:
            self.start(block, expect)
            return
        deadline = time.monotonic() + RETRY_TIMEOUT_S
        while True:
            code, output = self.once(block)
            missing = [e for e in expect if e not in output]
            if code == 0 and not missing:
                return
            if not block.retry or time.monotonic() > deadline:
                problem = f"exited with {code}" if code else f"printed none of {missing}"
                raise AssertionError(_report(block, problem, output))
            time.sleep(0.5)

    def once(self, block: Block) -> tuple[int, str]:
        with subprocess.Popen(
            self.command(block),
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ) as proc:
            try:
                out, _ = proc.communicate(timeout=FOREGROUND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                kill_until_gone(tree(proc.pid))
                out, _ = proc.communicate()
                problem = f"did not return within {FOREGROUND_TIMEOUT_S} s"
                raise AssertionError(
                    _report(block, problem, out.decode(errors="replace"))
                ) from None
        return proc.returncode, out.decode(errors="replace")

    def start(self, block: Block, expect: list[str]) -> None:
        log = LOGS / f"{Path(block.source).stem}-line-{block.line}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                self.command(block),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.running.append(Background(block, proc, log))
        deadline = time.monotonic() + BACKGROUND_TIMEOUT_S
        while True:
            output = log.read_text(errors="replace")
            missing = [e for e in expect if e not in output]
            if not missing:
                return
            if proc.poll() is not None:
                problem = f"exited with {proc.returncode} before printing {missing}"
                raise AssertionError(_report(block, problem, output))
            if time.monotonic() > deadline:
                problem = f"printed none of {missing} within {BACKGROUND_TIMEOUT_S} s"
                raise AssertionError(_report(block, problem, output))
            time.sleep(0.5)

    def stop(self) -> list[str]:
        """Ctrl-C every background block, newest first, then stop the broker; return what
        did not stop as the README says."""
        problems = [p for b in reversed(self.running) if (p := _interrupt(b))]
        self.running.clear()
        broker = LocalBroker(
            BrokerConfig(data_dir=self.tmp / "broker", port=self.broker_port)
        )  # what `delayline broker stop` does, also when the test failed half-way
        if broker.status().running:
            broker.stop()
        return problems


def _interrupt(running: Background) -> str | None:
    """Ctrl-C: SIGINT to the block's process group; SIGKILL to what is left after
    STOP_TIMEOUT_S (then it is a problem), and to anything that left the group."""
    proc = running.proc
    members = tree(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    problem: str | None = None
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        output = running.log.read_text(errors="replace")
        problem = _report(running.block, f"Ctrl-C did not stop it in {STOP_TIMEOUT_S} s", output)
    kill_until_gone(members)  # stragglers, such as Spark's Python workers (a group of their own)
    proc.wait()
    return problem


def _report(block: Block, problem: str, output: str, lines: int = 60) -> str:
    tail = "\n".join(output.splitlines()[-lines:])
    return (
        f"{block.source}:{block.line} ({block.language} block) {problem}\n"
        f"--- the block\n{block.code}--- its output (last {lines} lines)\n{tail}"
    )


def _port_and_next_free() -> int:
    """A free port whose successor is free too (`delayline broker start` puts the
    controller on port + 1)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    pytest.fail("no two consecutive free ports")
