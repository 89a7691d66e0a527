"""The envelope and timer-request contracts around the pipeline, against a real broker:
what ``delayline schedule --contract`` writes, the API's catalog of every contract
(``contract`` field and filter), cancels by derived id, and ``delayline list``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from confluent_kafka import Producer
from tests.integration.test_cli_api import delayline
from tests.support import eventually

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.reader import read_topic

TOKEN = "contracts-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Future{callBackTopic: "orders", callBackKey: "k", callBack: b"cb"}, by hand.
WIRE = b"\x0a\x06orders" + b"\x12\x01k" + b"\x1a\x02cb"


@dataclass
class Stack:
    url: str
    bootstrap: str
    schedules: str
    envelopes: str
    timers: str

    def cli(self, *args: str) -> tuple[int, str, str]:
        env = {
            "DELAYLINE_API_URL": self.url,
            "DELAYLINE_BOOTSTRAP_SERVERS": self.bootstrap,
            "DELAYLINE_SCHEDULES_TOPICS": self.schedules,
        }
        done = delayline(*args, env=env)
        return done.returncode, done.stdout, done.stderr

    def get(self, path: str, **params: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", params=params, timeout=10)


@pytest.fixture(scope="module")
def stack(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    schedules = create_topic(
        kafka_bootstrap, unique_topic("sched"), config={"cleanup.policy": "compact"}
    )
    envelopes = create_topic(kafka_bootstrap, unique_topic("env"), partitions=2)
    timers = create_topic(kafka_bootstrap, unique_topic("timers"), partitions=3)
    dlq = create_topic(kafka_bootstrap, unique_topic("dlq"))
    topology = Topology(
        kafka_bootstrap, (schedules,), dlq, None,
        envelope_topics=(envelopes,), timer_request_topics=(timers,),
    )  # fmt: skip
    server = ApiServer(
        ApiConfig(
            topology=topology,
            catalog_path=tmp_path_factory.mktemp("catalog") / "catalog.db",
            port=0,
            token=TOKEN,
        )
    )
    url = server.start()
    try:
        eventually(lambda: httpx.get(f"{url}/readyz").status_code == 200, 30, "caught up")
        yield Stack(url, kafka_bootstrap, schedules, envelopes, timers)
    finally:
        server.stop()


def pending(stack: Stack, sid: str) -> dict[str, object] | None:
    answer = stack.get(f"/schedules/{sid}")
    if answer.status_code != 200 or not answer.json()["pending"]:
        return None
    current: dict[str, object] = answer.json()["current"]
    return current


def test_schedule_writes_an_envelope_as_a_plain_producer_would(stack: Stack) -> None:
    code, out, err = stack.cli(
        "schedule", "--contract", "envelope", "--id", "cli-env", "--topic", "orders",
        "--key", "k", "--in", "1h", "--header", "CALLER_SERVICE=cli", "hello",
        "--envelope-topic", stack.envelopes,
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("scheduled envelope 'cli-env' -> orders at ")
    (record,) = [
        r for r in read_topic(stack.bootstrap, stack.envelopes) if b"cli-env" in (r.value or b"")
    ]
    assert json.loads(record.value or b"") == {
        "topic": "orders", "message": "hello", "countdown": 3600, "key": "k", "id": "cli-env",
    }  # fmt: skip
    assert record.headers == (("CALLER_SERVICE", b"cli"),)
    current = eventually(lambda: pending(stack, "cli-env"), 15, "envelope in the catalog")
    assert current["contract"] == "envelope"
    assert current["due_ms"] == record.timestamp_ms + 3_600_000
    assert current["payload_text"] == "hello"


def test_schedule_writes_a_timer_request_and_cancel_finds_its_partition(stack: Stack) -> None:
    code, out, err = stack.cli(
        "schedule", "--contract", "timer-request", "--topic", "orders", "--key", "k",
        "--at", "2031-01-01T00:00:00.5Z", "cb", "--timer-request-topic", stack.timers,
    )  # fmt: skip
    assert code == 0, err
    (record,) = read_topic(stack.bootstrap, stack.timers)
    # The expiry second, rounded up so it never fires early, and the bytes by hand.
    assert (record.key, record.value) == (b"1924992001", WIRE)
    sid = f"{stack.timers}:{record.partition}:{record.offset}"
    assert out.startswith(f"scheduled timer-request {sid!r} -> orders at ")
    current = eventually(lambda: pending(stack, sid), 15, "timer request in the catalog")
    assert (current["contract"], current["target_topic"]) == ("timer-request", "orders")
    listed = stack.get("/schedules", contract="timer-request").json()["items"]
    assert [i["id"] for i in listed] == [sid]
    assert stack.get("/schedules", contract="header").json()["items"] == []
    code, out, err = stack.cli("list", "--contract", "timer-request")
    assert code == 0, err
    assert sid in out
    assert "timer-request" in out
    code, out, err = stack.cli("cancel", sid)
    assert code == 0, err
    records = read_topic(stack.bootstrap, stack.timers)
    assert [(r.partition, r.key, r.value) for r in records] == [
        (record.partition, b"1924992001", WIRE),
        (record.partition, sid.encode(), None),  # a tombstone in the request's partition
    ]
    eventually(lambda: pending(stack, sid) is None, 15, "cancelled in the catalog")


def test_the_api_lists_hand_written_envelopes_and_cancels_them(stack: Stack) -> None:
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    body = {"topic": "orders", "message": {"n": 1}, "countdown": 7200, "id": "raw-env"}
    producer.produce(stack.envelopes, json.dumps(body).encode(), partition=1)
    producer.flush(10)
    current = eventually(lambda: pending(stack, "raw-env"), 15, "envelope in the catalog")
    assert (current["contract"], current["payload_text"]) == ("envelope", '{"n":1}')
    # The API writes header-contract schedules only: replacing an envelope is refused.
    put = httpx.put(f"{stack.url}/schedules/raw-env", headers=AUTH,
                    json={"target_topic": "orders", "payload": "x", "delay_ms": 1000})  # fmt: skip
    assert put.status_code == 422
    assert "came in by the envelope contract" in put.json()["detail"]
    cancelled = httpx.delete(f"{stack.url}/schedules/raw-env", headers=AUTH)
    assert cancelled.status_code == 202
    assert [(r["topic"], r["partition"]) for r in cancelled.json()["records"]] == [
        (stack.envelopes, 1)
    ]
    eventually(lambda: pending(stack, "raw-env") is None, 15, "cancelled in the catalog")


def test_a_cancel_of_an_unknown_derived_id_goes_to_the_partition_it_names(
    stack: Stack,
) -> None:
    sid = f"{stack.timers}:2:999"
    answer = httpx.delete(f"{stack.url}/schedules/{sid}", headers=AUTH)
    assert answer.status_code == 202
    assert [(r["topic"], r["partition"]) for r in answer.json()["records"]] == [(stack.timers, 2)]
    assert "the catalog had no pending version" in answer.json()["note"]


def test_schedule_refuses_what_the_contract_would_dead_letter(stack: Stack) -> None:
    code, _, err = stack.cli("schedule", "--contract", "envelope", "--topic", "__bad", "--in",
                             "1m", "x", "--envelope-topic", stack.envelopes)  # fmt: skip
    assert code != 0
    assert "internal Kafka topic" in err
    code, _, err = stack.cli("schedule", "--contract", "timer-request", "--id", "x", "--topic",
                             "orders", "--in", "1m", "x", "--timer-request-topic", stack.timers)  # fmt: skip
    assert code != 0
    assert "a timer request has no --id" in err
    code, _, err = stack.cli("schedule", "--contract", "envelope", "--topic", "orders", "--in",
                             "1m", "x")  # fmt: skip
    assert code != 0
    assert "name the one envelope topic to write to with --envelope-topic" in err
    # Without the API's answer, a derived id of another topic is not guessed at.
    code, _, err = stack.cli("cancel", f"{stack.timers}:0:5", "--api-url", "http://127.0.0.1:1")
    assert code != 0
    assert f"pass --schedules-topic {stack.timers}" in err
