"""The commands that ask ``delayline api`` (show, dead-letters, where cancel writes,
list's error), and the API's answers that its catalog's lag must not change, against an
API served in this process over fresh topics. No pipeline: the API's catalog follows
the topics by itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import httpx
import pytest
from confluent_kafka import Producer
from tests.support import eventually

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.client import ApiClient, ApiError, ClientConfig, Scheduler, partition_for
from delayline.contract import parse_record
from delayline.contract.topology import Topology
from delayline.core.model import Cancel
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.ports import free_port
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import read_topic

PARTITIONS = 3
TOKEN = "cli-token"
"""Writes (pause, resume, a group's cancel) need it; reads stay open."""


@dataclass
class Api:
    url: str
    bootstrap: str
    schedules: str
    dead_letters: str

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``delayline ARGS`` pointed at this API and broker."""
        return delayline(
            *args,
            env={
                "DELAYLINE_API_URL": self.url,
                "DELAYLINE_API_TOKEN": TOKEN,
                "DELAYLINE_BOOTSTRAP_SERVERS": self.bootstrap,
                "DELAYLINE_SCHEDULES_TOPICS": self.schedules,
            },
        )

    def known(self, schedule_id: str, pending: bool = True) -> None:
        def seen() -> bool:
            answer = httpx.get(f"{self.url}/schedules/{schedule_id}")
            return answer.status_code == 200 and answer.json()["pending"] is pending

        eventually(seen, 15, f"{schedule_id} known to the API")


def delayline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "delayline", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**_base_env(), **(env or {})},
    )


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DELAYLINE_")}


@pytest.fixture(scope="module")
def api(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    compact = {"cleanup.policy": "compact"}
    schedules = create_topic(
        kafka_bootstrap, unique_topic("sched"), partitions=PARTITIONS, config=compact
    )
    dlq = create_topic(kafka_bootstrap, unique_topic("dlq"))
    server = ApiServer(
        ApiConfig(
            topology=Topology(
                kafka_bootstrap, (schedules,), dead_letter_topic=dlq, history_topic=None
            ),
            catalog_path=tmp_path_factory.mktemp("catalog") / "catalog.db",
            port=0,
            token=TOKEN,
        )
    )
    url = server.start()
    try:
        eventually(lambda: httpx.get(f"{url}/readyz").status_code == 200, 30, "caught up")
        yield Api(url, kafka_bootstrap, schedules, dlq)
    finally:
        server.stop()


def test_show_prints_the_pending_version_and_the_versions(api: Api) -> None:
    at = datetime(2031, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
    with Scheduler(ClientConfig(api.bootstrap, api.schedules)) as client:
        client.schedule("show-1", b'{"n": 1}', "reminders", at=at, headers={"trace": "t-1"})
        client.schedule("show-1", b'{"n": 2}', "reminders", at=at, target_key="cust-7")
    eventually(
        lambda: len(httpx.get(f"{api.url}/schedules/show-1").json().get("versions", [])) == 2,
        15,
        "both versions seen",
    )
    shown = api.cli("show", "show-1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:5] == [
        "show-1: pending",
        "  due        2031-05-06 07:08:09.250 UTC",
        '  target     reminders, key "cust-7"',
        f"  stored at  {api.schedules}/{partition_for(b'show-1', PARTITIONS)}@1 (header contract)",
        '  payload    "{\\"n\\": 2}" (8 bytes)',
    ]
    assert lines[5] == "versions (2, oldest first):"
    assert [line.split()[2] for line in lines[6:]] == ["created", "updated"]

    as_json = api.cli("show", "show-1", "--json")
    detail = json.loads(as_json.stdout)
    assert detail["current"]["payload_text"] == '{"n": 2}'
    assert [v["kind"] for v in detail["versions"]] == ["created", "updated"]


def test_show_of_an_unknown_id_is_one_clear_line(api: Api) -> None:
    result = api.cli("show", "never-written")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "delayline: error: no schedule with id 'never-written' "
        "(never written, or its history was pruned)\n"
    )


def test_dead_letters_for_people_and_machines(api: Api) -> None:
    producer = Producer(kafka_client_config(api.bootstrap))
    for n, reason in enumerate(["missing header scheduler-epoch", "expired"]):
        producer.produce(
            api.dead_letters,
            key=f"dead-{n}".encode(),
            value=b"payload",
            headers=[
                ("delayline-error", reason.encode()),
                ("delayline-source", f"{api.schedules}/0/{n}".encode()),
            ],
        )
    assert producer.flush(10) == 0
    eventually(lambda: len(api.cli("dead-letters", "--json").stdout.splitlines()) == 2, 15, "2")

    people = api.cli("dead-letters")
    assert people.returncode == 0, people.stderr
    lines = people.stdout.splitlines()
    assert lines[0].split() == ["at", "(UTC)", "schedule", "id", "source", "reason"]
    assert "dead-1" in lines[1]  # newest first
    assert lines[1].endswith("  expired")
    assert lines[-1] == "2 dead letter(s)"

    machines = api.cli("dead-letters", "--reason", "scheduler-epoch", "--json")
    (only,) = [json.loads(line) for line in machines.stdout.splitlines()]
    assert (only["schedule_id"], only["reason"]) == ("dead-0", "missing header scheduler-epoch")
    assert only["payload_text"] == "payload"
    assert api.cli("dead-letters", "--limit", "1").stdout.splitlines()[-1] == (
        "1 dead letter(s) (more: raise --limit)"
    )


def test_cancel_of_an_id_not_pending_is_written_and_says_so(api: Api) -> None:
    """Not pending in the catalog (not read yet, or gone): written all the same, to the
    id's own partition, with a note; --force is still accepted."""
    sid = "not-pending-1"
    own = partition_for(sid.encode(), PARTITIONS)
    written = api.cli("cancel", sid)
    assert written.returncode == 0, written.stderr
    assert written.stderr == ""
    match = re.fullmatch(
        rf"cancelled 'not-pending-1' \({api.schedules}/{own}@(\d+)\): delayline api's catalog "
        r"had no pending version of it \(not read yet, or already delivered or cancelled\); "
        r"the cancel was written anyway\n",
        written.stdout,
    )
    assert match is not None, written.stdout
    forced = api.cli("cancel", sid, "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith(f"cancelled 'not-pending-1' ({api.schedules}/{own}@")
    records = [r for r in read_topic(api.bootstrap, api.schedules) if r.key == sid.encode()]
    assert [(r.partition, type(parse_record(r))) for r in records] == [(own, Cancel)] * 2
    assert records[0].offset == int(match.group(1))


def test_delete_of_an_id_the_catalog_never_saw_is_written_where_its_own_record_goes(
    api: Api,
) -> None:
    """The API's cancel never 404s: the tombstone goes where ``cancel_place`` says (the
    first schedules topic, the id's own partition), answered 202 with a note."""
    sid = "never-seen-by-the-catalog"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.delete(f"{api.url}/schedules/{sid}", headers=auth, timeout=30)
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["note"] == (
        "the catalog had no pending version of this id (not read yet, or already delivered "
        "or cancelled); the cancel was written anyway"
    )
    (record,) = body["records"]
    own = partition_for(sid.encode(), PARTITIONS)
    assert (record["topic"], record["partition"]) == (api.schedules, own)
    (tombstone,) = [r for r in read_topic(api.bootstrap, api.schedules) if r.key == sid.encode()]
    assert isinstance(parse_record(tombstone), Cancel)
    assert (tombstone.partition, tombstone.offset) == (own, record["offset"])
    forced = httpx.delete(
        f"{api.url}/schedules/{sid}", params={"force": "true"}, headers=auth, timeout=30
    )
    assert forced.status_code == 202, forced.text  # older callers keep working
    noted = ApiClient(api.url, TOKEN).cancel(sid)
    assert noted["note"] == body["note"]


def test_pause_right_after_the_write_reads_it_and_404_means_not_pending(api: Api) -> None:
    """Pause, resume and a group's cancel decide once the catalog has read what was
    written before the request: one written a moment ago is found, not a 404."""
    client = ApiClient(api.url, TOKEN)
    for n in range(3):
        sid = f"fresh-{n}"
        with Scheduler(ClientConfig(api.bootstrap, api.schedules)) as writer:
            writer.schedule(sid, b"p", "t", delay=3600, group=f"fresh-group-{n}")
        paused = client.pause(sid)  # no wait for the catalog in between
        assert paused["id"] == sid
        resumed = client.resume(sid)
        assert resumed["id"] == sid
        assert client.cancel_group(f"fresh-group-{n}")["schedules"] == 1
    with pytest.raises(ApiError) as missing:
        client.pause("never-written-anywhere")
    assert missing.value.status == 404


def test_cancel_writes_the_tombstone_into_the_partition_of_the_pending_version(
    api: Api,
) -> None:
    sid = "cancel-elsewhere"
    own = partition_for(sid.encode(), PARTITIONS)
    other = (own + 1) % PARTITIONS  # as another partitioner would have placed it
    with Scheduler(ClientConfig(api.bootstrap, api.schedules)) as client:
        client.schedule(sid, b"p", "t", delay=3600, partition=other)
    api.known(sid)
    cancelled = api.cli("cancel", sid)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stderr == ""
    records = [r for r in read_topic(api.bootstrap, api.schedules) if r.key == sid.encode()]
    assert [(r.partition, type(parse_record(r)).__name__) for r in records] == [
        (other, "Schedule"),
        (other, "Cancel"),
    ]
    api.known(sid, pending=False)
    again = api.cli("cancel", sid)  # cancelled already: written again, harmless, and said
    assert again.returncode == 0, again.stderr
    assert "catalog had no pending version of it" in again.stdout


def test_cancel_without_the_api_writes_anyway_and_says_it_could_not_check(api: Api) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    result = api.cli("cancel", "unchecked-1", "--api-url", closed)
    assert result.returncode == 0, result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("delayline: warning: could not check that 'unchecked-1' is pending")
    assert "--api-url (env DELAYLINE_API_URL)" in warning
    assert warning.endswith("writing the cancel anyway")
    (record,) = [r for r in read_topic(api.bootstrap, api.schedules) if r.key == b"unchecked-1"]
    assert isinstance(parse_record(record), Cancel)
    assert record.partition == partition_for(b"unchecked-1", PARTITIONS)


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["dead-letters"]], ids=lambda c: c[0])
def test_every_command_that_asks_the_api_names_api_url_when_it_cannot(
    command: list[str],
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    result = delayline(*command, "--api-url", closed)
    assert (result.returncode, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"delayline: error: delayline api at {closed} did not answer")
    assert "--api-url (env DELAYLINE_API_URL)" in line


def test_a_recurring_group_scheduled_listed_paused_resumed_and_cancelled(api: Api) -> None:
    """Every weekday at 09:00 in Berlin and every hour, in one group, from the command
    line; listed by group, paused and resumed (the group, then one), cancelled by group."""
    daily = api.cli("schedule", "--id", "cli-daily", "--topic", "reports", "--cron",
                    "0 9 * * 1-5", "--time-zone", "Europe/Berlin", "--group", "team", "report")  # fmt: skip
    assert daily.returncode == 0, daily.stderr
    first = re.search(r"first at (\S+) ", daily.stdout)
    assert first is not None, daily.stdout
    at = datetime.fromisoformat(first.group(1)).astimezone(ZoneInfo("Europe/Berlin"))
    assert (at.hour, at.minute, at.weekday() < 5) == (9, 0, True)
    hourly = api.cli("schedule", "--id", "cli-hourly", "--topic", "reports", "--every", "1h",
                     "--group", "team", "--catch-up", "none", "tick")  # fmt: skip
    assert hourly.returncode == 0, hourly.stderr
    written = {r.key: dict(r.headers) for r in read_topic(api.bootstrap, api.schedules)}
    assert written[b"cli-daily"]["delayline-cron"] == b"0 9 * * 1-5"
    assert written[b"cli-daily"]["delayline-time-zone"] == b"Europe/Berlin"
    assert written[b"cli-hourly"]["delayline-catch-up"] == b"none"
    api.known("cli-daily")
    api.known("cli-hourly")
    listed = api.cli("list", "--group", "team")
    assert listed.returncode == 0, listed.stderr
    assert "cron 0 9 * * 1-5 in Europe/Berlin; group team" in listed.stdout
    assert "every 1h; group team" in listed.stdout

    def paused() -> list[str]:
        page = httpx.get(f"{api.url}/schedules", params={"group": "team"}).json()
        return sorted(item["id"] for item in page["items"] if item["paused"])

    out = api.cli("pause", "--group", "team")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "paused 2 schedule(s) of group 'team'"
    eventually(lambda: paused() == ["cli-daily", "cli-hourly"], 15, "both paused")
    assert "PAUSED" in api.cli("list", "--group", "team").stdout
    out = api.cli("resume", "cli-daily")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("resumed 'cli-daily' ")
    eventually(lambda: paused() == ["cli-hourly"], 15, "one resumed")
    again = api.cli("resume", "cli-daily")
    assert again.returncode == 1
    assert "409" in again.stderr
    out = api.cli("cancel", "--group", "team")
    assert out.stdout.strip() == "cancelled 2 schedule(s) of group 'team'"
    eventually(lambda: not httpx.get(f"{api.url}/schedules", params={"group": "team"}).json()["items"],
               15, "the group cancelled")  # fmt: skip


def test_a_delivery_window_from_the_command_line_and_the_api(api: Api) -> None:
    """``--window`` and ``window_ms`` write the ``delayline-window`` header; the API shows
    it as ``window_ms`` (detail and list); a window over an hour is refused by both
    before anything is written."""
    out = api.cli("schedule", "--id", "cli-window", "--topic", "campaign", "--in", "1h",
                  "--window", "15m", "hello")  # fmt: skip
    assert out.returncode == 0, out.stderr
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"target_topic": "campaign", "delay_ms": 3_600_000}
    made = httpx.post(f"{api.url}/schedules", headers=auth,
                      json={**body, "id": "api-window", "window_ms": 1500})  # fmt: skip
    assert made.status_code == 202, made.text
    too_long = api.cli("schedule", "--id", "cli-2h", "--topic", "campaign", "--in", "1h",
                       "--window", "2h", "x")  # fmt: skip
    assert too_long.returncode == 1
    assert "--window: a delivery window must be within 1ms..1h, not 2h" in too_long.stderr
    refused = httpx.post(f"{api.url}/schedules", headers=auth,
                         json={**body, "id": "api-2h", "window_ms": 7_200_000})  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("window_ms: Input should be less than or equal")
    plain = httpx.post(f"{api.url}/schedules", headers=auth, json={**body, "id": "api-plain"})
    assert plain.status_code == 202, plain.text

    written = {r.key: dict(r.headers) for r in read_topic(api.bootstrap, api.schedules)}
    assert written[b"cli-window"]["delayline-window"] == b"15m"
    assert written[b"api-window"]["delayline-window"] == b"1500ms"
    assert "delayline-window" not in written[b"api-plain"]
    assert b"cli-2h" not in written
    assert b"api-2h" not in written
    for schedule_id in ("cli-window", "api-window", "api-plain"):
        api.known(schedule_id)
    detail = httpx.get(f"{api.url}/schedules/cli-window").json()["current"]
    assert detail["window_ms"] == 900_000
    page = httpx.get(f"{api.url}/schedules", params={"target_topic": "campaign"}).json()
    listed = {item["id"]: item["window_ms"] for item in page["items"]}
    assert listed == {"cli-window": 900_000, "api-window": 1500, "api-plain": None}
