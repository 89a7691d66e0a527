"""The REST API against a real broker and a real pipeline: create, see pending,
update, cancel, fired, dead-lettered, auth, validation, info and metrics."""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.client import ApiClient, ApiError
from delayline.client.partitioner import partition_for
from delayline.contract.headers import parse_epoch_ms
from delayline.contract.topology import Topology
from delayline.dev.harness import DeliveryCollector
from delayline.kafka.config import kafka_client_config
from tests.support import LATENESS_TOLERANCE_MS, RunningPipeline, eventually, running_api

TOKEN = "e2e-token"
SCHEDULES_PARTITIONS = 3  # tests.support.make_topics


@dataclass
class Api:
    url: str
    pipeline: RunningPipeline
    http: httpx.Client

    def pending_ids(self, prefix: str) -> list[str]:
        page = self.http.get("/schedules", params={"id": prefix, "limit": 1000}).json()
        return [item["id"] for item in page["items"]]

    def versions(self, schedule_id: str) -> list[str]:
        response = self.http.get(f"/schedules/{schedule_id}")
        return (
            [v["kind"] for v in response.json()["versions"]] if response.status_code == 200 else []
        )


@pytest.fixture(scope="module")
def api(pipeline: RunningPipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with (
        running_api(pipeline, tmp_path_factory, TOKEN) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
        ) as http,
    ):
        yield Api(url, pipeline, http)


def body(target: str, **extra: Any) -> dict[str, Any]:
    return {"target_topic": target, "payload": '{"ok": true}', **extra}


def test_create_update_cancel_through_the_api(api: Api) -> None:
    target = api.pipeline.target()
    sid = f"api-life-{target}"
    created = api.http.post("/schedules", json=body(target, id=sid, delay_ms=600_000))
    assert created.status_code == 202, created.text
    written = created.json()
    assert written["id"] == sid
    assert written["topic"] == api.pipeline.topics.schedules
    assert written["offset"] >= 0
    eventually(lambda: api.pending_ids(sid) == [sid], 15, "created schedule pending")

    detail = api.http.get(f"/schedules/{sid}").json()
    assert detail["pending"] is True
    assert detail["current"]["payload_text"] == '{"ok": true}'
    assert detail["current"]["payload_json"] is True
    assert detail["current"]["offset"] == written["offset"]

    due = "2031-05-01T10:00:00Z"
    updated = api.http.put(f"/schedules/{sid}", json=body(target, due_at=due, target_key="k1"))
    assert updated.status_code == 202, updated.text
    eventually(lambda: api.versions(sid) == ["created", "updated"], 15, "update seen")
    current = api.http.get(f"/schedules/{sid}").json()["current"]
    assert current["due_at"] == "2031-05-01T10:00:00Z"
    assert current["target_key"] == "k1"

    cancelled = api.http.delete(f"/schedules/{sid}")
    assert cancelled.status_code == 202, cancelled.text
    assert [r["topic"] for r in cancelled.json()["records"]] == [api.pipeline.topics.schedules]
    eventually(lambda: api.pending_ids(sid) == [], 15, "cancelled schedule gone")
    assert api.versions(sid) == ["created", "updated", "cancelled"]
    again = api.http.delete(f"/schedules/{sid}")  # written again, harmless, and said
    assert again.status_code == 202, again.text
    assert "the catalog had no pending version" in again.json()["note"]
    assert "note" not in cancelled.json()


def test_a_schedule_created_through_the_api_fires_once_and_is_recorded(api: Api) -> None:
    target = api.pipeline.target()
    sid = f"api-fire-{target}"
    with DeliveryCollector(api.pipeline.bootstrap, [target]) as seen:
        created = api.http.post("/schedules", json=body(target, id=sid, delay_ms=2_000))
        assert created.status_code == 202, created.text
        seen.wait_for(lambda d: len(d) >= 1, timeout_s=30)
        time.sleep(1)
        (delivery,) = seen.snapshot()
    assert delivery.value == b'{"ok": true}'
    eventually(lambda: api.versions(sid) == ["created", "fired"], 20, "fired version")
    detail = api.http.get(f"/schedules/{sid}").json()
    assert detail["pending"] is False
    fired = detail["versions"][-1]
    assert 0 <= fired["lateness_ms"] < LATENESS_TOLERANCE_MS
    stats = api.http.get("/stats").json()
    assert sum(m["deliveries"] for m in stats["fired_per_minute"]) >= 1
    assert sum(stats["lateness_counts"]) >= 1


def test_malformed_record_shows_up_as_a_dead_letter(api: Api) -> None:
    sid = f"api-bad-{time.time_ns()}"
    producer = Producer(kafka_client_config(api.pipeline.bootstrap))
    producer.produce(
        api.pipeline.topics.schedules,
        key=sid.encode(),
        value=b"no epoch",
        headers=[("scheduler-target-topic", b"somewhere")],
    )
    producer.flush(10)

    def listed() -> list[dict[str, Any]]:
        items = api.http.get("/dead-letters", params={"reason": "scheduler-epoch"}).json()["items"]
        return [d for d in items if d["schedule_id"] == sid]

    (dead,) = eventually(listed, 30, "dead letter listed")
    assert dead["reason"] == "missing header scheduler-epoch"
    assert dead["payload_text"] == "no epoch"
    assert dead["source"].startswith(f"{api.pipeline.topics.schedules}/")
    assert api.versions(sid) == ["dead-lettered"]


def test_info_reports_kafka_catalog_and_running_pipeline(api: Api) -> None:
    info = eventually(
        lambda: (i := api.http.get("/info").json())["pipeline"]["status"] == "running" and i,
        30,
        "pipeline reported running",
    )
    assert info["brokers"]
    assert info["catalog"]["caught_up"] is True
    assert info["topics"]["schedules"] == [
        api.pipeline.topics.schedules,
        api.pipeline.topics.schedules_b,
    ]
    assert info["pipeline"]["progress"]["spark"]["batch_id"] >= 0
    assert api.http.get("/healthz").json() == {"status": "ok"}
    assert api.http.get("/readyz").status_code == 200


def test_metrics_of_api_and_pipeline(api: Api) -> None:
    text = api.http.get("/metrics").text
    assert 'delayline_api_requests_total{method="GET",route="/readyz",status="200"}' in text
    assert "delayline_catalog_pending " in text
    pipeline_url = api.http.get("/info").json()["pipeline"]["url"]
    pipeline_metrics = httpx.get(f"{pipeline_url}/metrics").text
    for name in (
        "delayline_schedules_received_total",
        "delayline_schedules_planned_total",
        "delayline_schedules_fired_total",
        "delayline_schedules_pending",
        "delayline_lateness_seconds_bucket",
        "delayline_batch_duration_seconds_bucket",
    ):
        assert name in pipeline_metrics


def test_writes_need_the_token(api: Api) -> None:
    target = "anything"
    anonymous = httpx.post(f"{api.url}/schedules", json=body(target, delay_ms=1000))
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.delete(f"{api.url}/schedules/x", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["detail"] == "wrong bearer token"
    assert httpx.get(f"{api.url}/schedules").status_code == 200  # reads are open here


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"payload": "x", "delay_ms": 1}, 422, "target_topic: Field required"),
        (body("bad topic", delay_ms=1), 422, "not a valid topic name"),
        (body("t"), 422, "exactly one of due_at, due_ms and delay_ms"),
        (body("t", delay_ms=1, due_ms=5), 422, "exactly one of"),
        (body("t", due_at="2030-01-01T00:00:00"), 422, "needs a time zone"),
        (body("t", due_ms=253_402_300_800_000), 422, "beyond year 9999"),
        (body("t", delay_ms=-1), 422, "delay_ms"),
        (body("t", delay_ms=1, payload="%%%", payload_encoding="base64"), 422, "not valid base64"),
        (
            body("t", delay_ms=1, headers=[{"name": "scheduler-epoch", "value": "1"}]),
            422,
            "reserved",
        ),
        (body("t", delay_ms=1, surprise=1), 422, "surprise: Extra inputs are not permitted"),
        (body("t", delay_ms=1, id=""), 422, "id: String should have at least 1 character"),
        (body("t", due_at="yesterday"), 422, "due_at"),
    ],
)
def test_every_bad_write_gets_a_4xx_that_says_why(
    api: Api, payload: dict[str, Any], status: int, message: str
) -> None:
    response = api.http.post("/schedules", json=payload)
    assert response.status_code == status, response.text
    assert message in response.json()["detail"]


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"limit": 0}, 422, "limit"),
        ({"limit": 1001}, 422, "limit"),
        ({"sort": "size"}, 422, "sort"),
        ({"cursor": "not-a-cursor"}, 400, "cursor"),
        ({"due_from": "soon"}, 422, "due_from"),
    ],
)
def test_bad_list_queries_get_a_4xx_that_says_why(
    api: Api, params: dict[str, Any], status: int, message: str
) -> None:
    response = api.http.get("/schedules", params=params)
    assert response.status_code == status, response.text
    assert message in response.json()["detail"]


def test_unknown_schedule_is_404(api: Api) -> None:
    response = api.http.get("/schedules/never-seen-anywhere")
    assert response.status_code == 404
    assert "never-seen-anywhere" in response.json()["detail"]


def test_read_only_and_closed_reads(kafka_bootstrap: str, tmp_path: Path) -> None:
    def serve(**settings: Any) -> ApiServer:
        server = ApiServer(
            ApiConfig(
                topology=Topology(kafka_bootstrap, ("nowhere",), history_topic=None),
                catalog_path=tmp_path / f"{len(settings)}.db",
                port=0,
                **settings,
            )
        )
        server.start()
        return server

    read_only = serve()
    try:
        refused = httpx.post(f"{read_only.url}/schedules", json=body("t", delay_ms=1))
        assert refused.status_code == 403
        assert "writes are disabled" in refused.json()["detail"]
    finally:
        read_only.stop()
    closed = serve(token="s3cret", reads_need_token=True)
    try:
        assert httpx.get(f"{closed.url}/schedules").status_code == 401
        allowed = httpx.get(f"{closed.url}/schedules", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status_code == 200
        assert httpx.get(f"{closed.url}/healthz").status_code == 200
    finally:
        closed.stop()


def test_cli_list_asks_the_api(api: Api) -> None:
    target = api.pipeline.target()
    sid = f"api-cli-{target}"
    created = api.http.post("/schedules", json=body(target, id=sid, delay_ms=600_000))
    assert created.status_code == 202
    eventually(lambda: api.pending_ids(sid) == [sid], 15, "created schedule pending")
    listed = subprocess.run(
        [sys.executable, "-m", "delayline", "list", "--api-url", api.url, "--id", sid, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (line,) = listed.stdout.splitlines()
    assert json.loads(line)["id"] == sid
    unreachable = subprocess.run(
        [sys.executable, "-m", "delayline", "list", "--api-url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unreachable.returncode == 1
    assert "did not answer" in unreachable.stderr
    api.http.delete(f"/schedules/{sid}")


def test_binary_payload_key_and_header_round_trip(api: Api) -> None:
    target = api.pipeline.target()
    sid = f"api-bin-{target}"
    raw = b"\xff\x00\x01binary"
    key = b"\x80key"
    encoded = base64.b64encode
    request = body(
        target,
        id=sid,
        # Long enough to be seen pending: ``current`` is the pending version, and a
        # catalog reading it only after its delivery (2 s with a fresh clone's load)
        # would never show it.
        delay_ms=10_000,
        payload=encoded(raw).decode(),
        payload_encoding="base64",
        target_key=encoded(key).decode(),
        target_key_encoding="base64",
        headers=[{"name": "blob", "value": encoded(b"\xfe").decode(), "encoding": "base64"}],
    )
    with DeliveryCollector(api.pipeline.bootstrap, [target]) as seen:
        assert api.http.post("/schedules", json=request).status_code == 202
        current = eventually(
            lambda: api.http.get(f"/schedules/{sid}").json().get("current"), 15, "pending"
        )
        assert current["payload_text"] is None
        assert base64.b64decode(current["payload_base64"]) == raw
        assert current["target_key"] is None
        assert base64.b64decode(current["target_key_base64"]) == key
        assert {
            "name": "blob",
            "value": encoded(b"\xfe").decode(),
            "encoding": "base64",
        } in current["headers"]
        (delivery,) = seen.wait_for(lambda d: len(d) >= 1, timeout_s=30)
    assert (delivery.key, delivery.value) == (key, raw)
    assert ("blob", b"\xfe") in delivery.headers


def _foreign_partition(sid: str, partitions: int) -> int:
    """A partition other than the one delayline's (Java-compatible) partitioner picks."""
    return (partition_for(sid.encode(), partitions) + 1) % partitions


def _write_foreign(api: Api, sid: str, target: str, due_s: float) -> None:
    """Write a schedule as a producer with another partitioner would: to a partition
    delayline's own client would not choose for this id."""
    producer = Producer(kafka_client_config(api.pipeline.bootstrap))
    producer.produce(
        api.pipeline.topics.schedules,
        key=sid.encode(),
        value=b"foreign",
        partition=_foreign_partition(sid, SCHEDULES_PARTITIONS),
        headers=[("scheduler-epoch", f"{due_s:.3f}".encode()), ("scheduler-target-topic",
                 target.encode())],
    )  # fmt: skip
    producer.flush(10)


def test_scheduled_with_one_partitioner_cancelled_with_another(api: Api) -> None:
    """The cancel lands in another partition (at a lower offset) than the schedule: the
    pipeline must not deliver it and the catalog must not keep it pending."""
    target = api.pipeline.target()
    sid = f"api-xpart-{target}"
    with DeliveryCollector(api.pipeline.bootstrap, [target]) as seen:
        _write_foreign(api, sid, target, time.time() + 8)
        eventually(lambda: api.pending_ids(sid) == [sid], 15, "foreign schedule pending")
        with api.pipeline.client() as client:  # murmur2: another partition
            client.cancel(sid)
        eventually(lambda: api.pending_ids(sid) == [], 15, "cancel seen by the catalog")
        time.sleep(8 + LATENESS_TOLERANCE_MS / 1000)
        assert seen.snapshot() == [], "a cancelled schedule was delivered"
    assert api.versions(sid) == ["created", "cancelled"]


def test_api_updates_and_cancels_in_the_partition_of_the_pending_version(api: Api) -> None:
    """An update through the API goes where the foreign version is, so compaction
    replaces it; the update is what fires."""
    target = api.pipeline.target()
    sid = f"api-xupd-{target}"
    foreign = _foreign_partition(sid, SCHEDULES_PARTITIONS)
    with DeliveryCollector(api.pipeline.bootstrap, [target]) as seen:
        _write_foreign(api, sid, target, time.time() + 600)
        eventually(lambda: api.pending_ids(sid) == [sid], 15, "foreign schedule pending")
        updated = api.http.put(f"/schedules/{sid}", json=body(target, delay_ms=2_000))
        assert updated.status_code == 202, updated.text
        assert updated.json()["partition"] == foreign
        (delivery,) = seen.wait_for(lambda d: len(d) >= 1, timeout_s=30)
        time.sleep(1)
        assert len(seen.snapshot()) == 1
    assert delivery.value == b'{"ok": true}'
    eventually(lambda: api.versions(sid) == ["created", "updated", "fired"], 20, "fired")


def test_a_past_due_time_is_accepted_with_a_warning(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """As the command line does: written (it fires at once), with a warning in the
    answer and one INFO line naming the id, never the payload."""
    caplog.set_level("INFO", logger="delayline.api.writes")
    target = api.pipeline.target()
    sid = f"api-past-{target}"
    five_minutes_ago = int(time.time() * 1000) - 300_000
    past = api.http.post(
        "/schedules", json=body(target, id=sid, due_ms=five_minutes_ago, payload="secret")
    )
    assert past.status_code == 202, past.text
    assert re.fullmatch(
        r"due time is 5m(\d+s)? in the past; it fires at once", past.json()["warning"]
    ), past.json()
    logged = [x.getMessage() for x in caplog.records if x.name == "delayline.api.writes"]
    assert logged == [f"schedule {sid!r}: {past.json()['warning']}"]
    assert "secret" not in "\n".join(caplog.messages)
    future = api.http.put(f"/schedules/{sid}", json=body(target, delay_ms=600_000))
    assert future.status_code == 202, future.text
    assert "warning" not in future.json()
    api.http.delete(f"/schedules/{sid}")


def test_a_write_before_the_topics_exist_is_503_and_a_forbidden_target_403(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A new user's first POST, before the pipeline (or `topics create`) made the topics:
    try again later, not a server error. A target outside --allowed-target-topics is
    refused before anything is written."""
    missing = f"not-yet-{int(time.time() * 1000)}"
    server = ApiServer(
        ApiConfig(
            topology=Topology(
                kafka_bootstrap,
                (missing,),
                history_topic=None,
                allowed_target_topics=r"orders\..*",
            ),
            catalog_path=tmp_path / "c.db",
            port=0,
            token=TOKEN,
        )
    )
    server.start()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        answer = httpx.post(
            f"{server.url}/schedules", json=body("orders.eu", delay_ms=1), headers=auth, timeout=30
        )
        forbidden = httpx.post(
            f"{server.url}/schedules", json=body("payments", delay_ms=1), headers=auth, timeout=30
        )
        replaced = httpx.put(
            f"{server.url}/schedules/x", json=body("payments", delay_ms=1), headers=auth, timeout=30
        )
    finally:
        server.stop()
    for refused in (forbidden, replaced):
        assert refused.status_code == 403, refused.text
        assert "'payments' does not match --allowed-target-topics" in refused.json()["detail"]
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    assert f"topic '{missing}' does not exist" in answer.json()["detail"]
    assert "delayline topics create" in answer.json()["detail"]


def test_a_30_mb_body_is_refused_413_before_it_is_read(api: Api) -> None:
    answer = api.http.post(
        "/schedules",
        content=b'{"target_topic": "t", "payload": "' + b"A" * 30_000_000 + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 413, answer.text[:200]
    assert "--max-body-bytes" in answer.json()["detail"]
    # Declare 30 MB, send 1 KB, and wait: a server that read the body would wait for
    # the rest and never answer; this one answers from the declared length alone.
    url = httpx.URL(api.url)
    with socket.create_connection((url.host, url.port or 80), timeout=30) as raw:
        raw.sendall(
            b"POST /schedules HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
            b"Content-Length: 30000000\r\n\r\n" + b"A" * 1024
        )
        head = raw.recv(4096)
    assert head.startswith(b"HTTP/1.1 413 "), head[:200]


def test_the_token_never_reaches_the_log(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    target = api.pipeline.target()
    api.http.post("/schedules", json=body(target, delay_ms=600_000))
    httpx.post(f"{api.url}/schedules", json=body(target), headers={"Authorization": "Bearer no"})
    api.http.post("/schedules", json={"target_topic": ""})  # a 422 is logged too
    assert caplog.records, "nothing was logged: the check would prove nothing"
    assert TOKEN not in caplog.text


def test_recurring_schedules_paused_resumed_and_cancelled_by_group(api: Api) -> None:
    """Two schedules of one group, every second, and a third outside it, all through the
    client of the API (:class:`delayline.client.ApiClient` for the catalog's part):
    each occurrence delivered once and numbered in order; a paused one stops and starts
    again on resume; cancelling the group stops both, the third goes on."""
    target = api.pipeline.target()
    group = f"g-{target}"
    ids = [f"rec-a-{target}", f"rec-b-{target}", f"rec-c-{target}"]
    client = ApiClient(api.url, TOKEN)
    with DeliveryCollector(api.pipeline.bootstrap, [target]) as seen:
        for sid in ids:
            extra = {"group": group} if sid != ids[2] else {}
            created = api.http.post(
                "/schedules", json=body(target, id=sid, recurrence={"every": "1s"}, **extra)
            )
            assert created.status_code == 202, created.text

        def count(sid: str) -> int:
            return sum(1 for d in seen.snapshot() if d.schedule_id == sid)

        seen.wait_for(lambda d: all(count(s) >= 3 for s in ids), timeout_s=60)
        listed = eventually(
            lambda: [i for i in client.list(group=group) if i["recurrence"] == "every 1s"],
            10,
            "the group listed",
        )
        assert sorted(i["id"] for i in listed) == sorted(ids[:2])
        detail = client.get(ids[0])["current"]["recurring"]
        assert detail["rule"] == "every 1s"
        assert len(detail["next"]) == 5

        client.pause(ids[0])
        eventually(lambda: client.get(ids[0])["current"]["paused"], 10, "shown paused")
        time.sleep(1.5)  # an occurrence committed before the pause landed may still show
        paused_at = count(ids[0])
        time.sleep(3)
        assert count(ids[0]) == paused_at, "delivered while paused"
        with pytest.raises(ApiError) as again:
            client.pause(ids[0])
        assert again.value.status == 409

        client.resume(ids[0])
        seen.wait_for(lambda d: count(ids[0]) >= paused_at + 3, timeout_s=30)

        cancelled = client.cancel_group(group)
        assert cancelled["schedules"] == 2
        time.sleep(1.5)
        stopped = {sid: count(sid) for sid in ids}
        time.sleep(3)
        assert {sid: count(sid) for sid in ids[:2]} == {s: stopped[s] for s in ids[:2]}
        assert count(ids[2]) >= stopped[ids[2]] + 2, "the schedule outside the group stopped"
        client.cancel(ids[2])
        deliveries = seen.snapshot()
    numbers: dict[str, list[int]] = {}
    for d in deliveries:
        headers = dict(d.headers)
        numbers.setdefault(d.schedule_id or "", []).append(
            int(headers["delayline-occurrence"] or 0)
        )
        assert d.arrival_ms >= parse_epoch_ms((headers["scheduler-epoch"] or b"").decode())
    for sid, seq in numbers.items():
        assert sorted(seq) == list(range(1, len(seq) + 1)), f"{sid}: {sorted(seq)}"
    eventually(lambda: not client.list(group=group), 10, "the group empty in the catalog")
