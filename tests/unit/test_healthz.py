"""``/healthz`` of the pipeline's and a committer's metrics server: 200 while the
process's work lives, 503 with the reasons once it died, never asking Kafka; and what a
committer says of its own life."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from delayline.committer import service
from delayline.committer.broker_clock import BrokerTime
from delayline.committer.config import CommitterConfig
from delayline.committer.service import Committer
from delayline.committer.session import Kept
from delayline.contract.formats import INFLIGHT
from delayline.errors import CommitterNameTakenError, FormatVersionError
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import MetricsServer, Readiness


def get(url: str) -> tuple[int, str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            kind = response.headers["Content-Type"]
            return response.status, kind, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers["Content-Type"], json.loads(err.read())


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Start a metrics server on a free loopback port; its base URL."""
    servers: list[MetricsServer] = []

    def start(**kwargs: Any) -> str:
        server = MetricsServer(PipelineMetrics(), "127.0.0.1", 0, **kwargs)
        server.start()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield start
    for server in servers:
        server.stop()


def test_healthz_answers_ok_while_every_check_passes_and_503_with_the_reasons(
    serve: Callable[..., str],
) -> None:
    dead: list[str | None] = [None, None]
    url = serve(liveness=(lambda: dead[0], lambda: dead[1])) + "/healthz"
    assert get(url) == (200, "application/json", {"status": "ok"})
    dead[0] = "the committer's thread has ended"
    assert get(url) == (
        503,
        "application/json",
        {"status": "failed", "reasons": ["the committer's thread has ended"]},
    )
    dead[1] = "something else died"
    assert get(url)[2]["reasons"] == ["the committer's thread has ended", "something else died"]
    dead[:] = [None, None]
    assert get(url)[0] == 200


def test_healthz_never_asks_kafka_even_when_readyz_would_fail(
    serve: Callable[..., str],
) -> None:
    probes: list[int] = []

    def kafka_away() -> str:
        probes.append(1)
        return "Kafka at k:9092 did not answer"

    base = serve(readiness=Readiness(kafka_away), liveness=(lambda: None,))
    assert get(base + "/healthz") == (200, "application/json", {"status": "ok"})
    assert probes == []
    status, _, body = get(base + "/readyz")
    assert (status, body["reasons"], len(probes)) == (503, ["Kafka at k:9092 did not answer"], 1)


def test_without_checks_healthz_says_the_server_lives(serve: Callable[..., str]) -> None:
    base = serve()
    assert get(base + "/healthz")[:2] == (200, "application/json")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + "/readyz", timeout=5)  # no readiness given
    with missing.value as err:
        assert err.code == 404
        assert "/healthz" in err.read().decode()


# --- Committer.not_alive: its thread, not Kafka -------------------------------------------


class FakeSession:
    """A committer's session that does the next thing of :attr:`plan` (no Kafka)."""

    plan: ClassVar[list[Callable[[Kept], None]]] = []

    def __init__(self, _config: CommitterConfig, kept: Kept) -> None:
        self.kept = kept

    def run(self) -> None:
        self.plan.pop(0)(self.kept)


def until_stopped(kept: Kept) -> None:
    kept.ready.set()
    kept.stopping.asked.wait(10)


def fenced(_kept: Kept) -> None:
    raise CommitterNameTakenError("fenced under its name")


def fails(_kept: Kept) -> None:
    raise RuntimeError("broker went away")


def dies(_kept: Kept) -> None:
    raise SystemExit  # ends the thread as no Exception does: no failure, no restart


@pytest.fixture
def committer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Committer]:
    monkeypatch.setattr(service, "Session", FakeSession)
    monkeypatch.setattr(service, "RETRY_MS", 10)
    monkeypatch.setattr(BrokerTime, "measure", lambda _self: None)
    config = CommitterConfig("127.0.0.1:1", "inflight", "commits", "tx", "dlt")
    made = Committer(config)
    yield made
    made.stop()


def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.01)


def test_a_committer_lives_from_before_its_start_until_its_thread_ends(
    committer: Committer,
) -> None:
    FakeSession.plan = [until_stopped]
    assert committer.not_alive() is None  # starting: alive, not ready
    assert committer.not_ready() is not None
    committer.start()
    assert committer.wait_ready(5)
    assert committer.not_alive() is None
    committer.stop()
    assert committer.not_alive() == "the committer's thread has ended"


def test_a_committer_starting_afresh_after_a_failure_lives(committer: Committer) -> None:
    went_on = threading.Event()

    def second(kept: Kept) -> None:
        went_on.set()
        until_stopped(kept)

    FakeSession.plan = [fails, second]
    committer.start()
    assert went_on.wait(5)
    assert committer.not_alive() is None


def test_a_committer_fenced_twice_is_dead_with_the_reason(committer: Committer) -> None:
    FakeSession.plan = [fenced, fenced]
    committer.start()
    assert committer.wait(5)
    reason = committer.not_alive()
    assert reason is not None
    assert reason.startswith("the committer stopped: fenced under its name twice within")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_committer_whose_thread_died_without_a_failure_is_dead(committer: Committer) -> None:
    FakeSession.plan = [dies]
    committer.start()
    eventually(lambda: committer.not_alive() is not None)
    assert committer.failure is None
    assert committer.not_alive() == "the committer's thread has ended"


def test_a_committer_meeting_a_newer_format_stops_at_once_with_what_to_do(
    committer: Committer,
) -> None:
    """Starting afresh would meet the same record again: it stops, and says why."""

    def newer(_kept: Kept) -> None:
        INFLIGHT.check(INFLIGHT.current + 1, "in-flight record at offset 3")

    FakeSession.plan = [newer, until_stopped]  # the second session must never run
    committer.start()
    assert committer.wait(5)
    assert isinstance(committer.failure, FormatVersionError)
    reason = committer.not_alive()
    assert reason is not None
    assert "written by a newer delayline" in reason
    assert FakeSession.plan == [until_stopped]
