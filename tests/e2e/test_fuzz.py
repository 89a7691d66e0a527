"""Hypothesis-generated records through the real pipeline, every one accounted for.

Each example writes a burst of records to the three contracts' topics: valid schedules
with random ids, payloads (binary, up to 300 KB), keys and extra headers (random names
and values, binary, null, repeated), updates and cancels of the same ids, and the same
made invalid (a control header dropped, repeated or garbled, a key that is not UTF-8,
random bytes where JSON or protobuf belongs). Every record is due far enough ahead that
its whole burst is read before anything fires, so its fate follows from the records
alone, computed here with the contracts' Python parsers (the pipeline parses in Spark
SQL and Arrow: a disagreement fails the test). Conservation, counted three ways:

* each record the model delivers has exactly one history record naming it as the
  version that fired, and nothing else has one;
* each record the model rejects has exactly one dead letter naming it, with a reason;
* the pipeline's own counters (``--progress-file``) add up: planned + updated +
  cancelled + unknown cancels + invalid equals the records written, and updated,
  cancelled and invalid each equal the model's superseded, cancelled and rejected.

And the pipeline keeps running throughout.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.envelope import parse_envelope
from delayline.contract.future_pb2 import Future
from delayline.contract.records import parse_record
from delayline.contract.timer_request import parse_timer_request
from delayline.core.model import Cancel, Invalid, Schedule
from delayline.kafka.reader import read_topic
from tests.support import RunningPipeline, ends_now, eventually

pytestmark = [
    pytest.mark.timeout(600),
    # A failing example with a 300 KB payload: its repr is long, and that is fine.
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

LEAD_S = 9
"""Due this far ahead at the earliest, so that a whole burst (20-60 records, written in
well under a second) is read before anything in it is due: the waker has a new schedule
read a margin (1.5 s at least) before its due time, or within --batch-wait (10 s) if that
comes first, and what a batch raises within the lead (5 s) the committer commits at its
due time, a later cancel or update withheld."""
HEADERS, ENVELOPE, TIMER = "headers", "envelope", "timer"
PARSERS = {HEADERS: parse_record, ENVELOPE: parse_envelope, TIMER: parse_timer_request}


@dataclass
class Run:
    pipeline: RunningPipeline
    target: str
    progress: Path
    producer: Producer
    example: int = 0


@pytest.fixture(scope="module")
def run(pipeline: RunningPipeline) -> Run:
    """The session's shared pipeline (its three contracts' topics, its progress file), a
    target of the module's own."""
    assert pipeline.progress is not None
    producer = Producer({"bootstrap.servers": pipeline.bootstrap, "enable.idempotence": True})
    return Run(pipeline, pipeline.target(), pipeline.progress, producer)


# --- what an example writes -------------------------------------------------------

# Names of extra headers: anything but the control and delayline's own headers, which
# are drawn on purpose below. Repeats are likely (few names).
extra_name = st.sampled_from(["trace", "x-b3", "caller", "", "é", "Trace"]) | st.text(max_size=8)
header_value = st.none() | st.binary(max_size=40)
extras = st.lists(
    st.tuples(extra_name.filter(lambda n: not n.startswith(("scheduler-", "delayline-"))),
              header_value), max_size=5,
)  # fmt: skip
payload = st.binary(max_size=64) | st.builds(lambda n: b"\x00\xff" * n, st.integers(0, 150_000))
# Garbled control values: never a usable epoch or topic name.
bad_epoch = st.sampled_from([b"", b"soon", b"1e400", b"NaN", b"-1", b"\xff\xfe", b"12:30", b"0x10"])
bad_topic = st.sampled_from([b"", b"a b", b"../etc", b"\xff", b"t" * 300, b"."])


@st.composite
def header_record(draw: st.DrawFn, ids: list[str]) -> dict[str, Any]:
    """A schedules-topic record: a schedule, a cancel, or one broken on purpose."""
    key: bytes | None = draw(st.sampled_from(ids)).encode()
    if draw(st.integers(0, 9)) == 0:
        # Not null: Kafka refuses a record without a key on a compacted topic.
        key = draw(st.sampled_from([b"", b"\xff\xfe{ex}", b"{ex}\x00"]))
    if draw(st.integers(0, 5)) == 0:
        return {"key": key, "value": None, "headers": draw(extras)}
    control: list[tuple[str, bytes | None]] = [
        (h.EPOCH, b"{epoch}"),  # the due time, filled in when written
        (h.TARGET_TOPIC, b"{target}"),
    ]
    if draw(st.booleans()):
        control.append((h.TARGET_KEY, draw(st.none() | st.binary(max_size=12))))
    flaw = draw(st.sampled_from(["none"] * 6 + ["drop", "repeat", "epoch", "topic"]))
    if flaw == "drop":
        control.pop(draw(st.integers(0, len(control) - 1)))
    elif flaw == "repeat":
        control.append(draw(st.sampled_from(control)))
    elif flaw == "epoch":
        control[0] = (h.EPOCH, draw(bad_epoch))
    elif flaw == "topic":
        control[1] = (h.TARGET_TOPIC, draw(bad_topic))
    headers = draw(st.permutations(control + draw(extras)))
    return {"key": key, "value": draw(payload), "headers": list(headers)}


@st.composite
def envelope_record(draw: st.DrawFn, ids: list[str]) -> dict[str, Any]:
    """A JSON envelope (``countdown`` seconds ahead), its cancel, or garbage."""
    sid = draw(st.sampled_from(ids))
    kind = draw(st.sampled_from(["valid"] * 4 + ["cancel", "bytes", "json"]))
    if kind == "cancel":
        return {"key": sid.encode(), "value": None, "headers": draw(extras)}
    if kind == "bytes":
        return {"key": None, "value": draw(st.binary(max_size=50)), "headers": []}
    if kind == "json":
        junk = draw(st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6)))
        return {"key": None, "value": json.dumps(junk).encode(), "headers": []}
    message = draw(st.text(max_size=30) | st.dictionaries(st.text(max_size=5), st.integers()))
    body = {"topic": "{target}", "message": message, "countdown": LEAD_S + draw(st.integers(0, 4)),
            "id": sid}  # fmt: skip
    if draw(st.booleans()):
        body["key"] = draw(st.text(max_size=8))
    return {"key": None, "value": json.dumps(body).encode(), "headers": draw(extras)}


@st.composite
def timer_record(draw: st.DrawFn) -> dict[str, Any]:
    """A timer request (key: its expiry second, filled in when written), or garbage."""
    kind = draw(st.sampled_from(["valid"] * 3 + ["bytes", "key"]))
    if kind == "bytes":
        return {"key": b"{second}", "value": b"\xff" + draw(st.binary(max_size=30)), "headers": []}
    key = b"{second}" if kind == "valid" else draw(st.sampled_from([b"", b"soon", b"-5", b"1.5"]))
    callback = (draw(st.text(max_size=6)), draw(st.binary(max_size=30)))
    return {"key": key, "value": None, "future": callback, "headers": draw(extras)}


@st.composite
def burst(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    ids = [f"{{ex}}-id-{i}" for i in range(draw(st.integers(1, 6)))]
    record = (
        st.tuples(st.just(HEADERS), header_record(ids))
        | st.tuples(st.just(ENVELOPE), envelope_record(ids))
        | st.tuples(st.just(TIMER), timer_record())
    )
    return draw(st.lists(record, min_size=20, max_size=60))


# --- writing an example, and what the model says becomes of each record -----------------


@dataclass
class Model:
    """The fate of every record of a burst, from the contracts' parsers."""

    rejected: set[tuple[str, int]]  # (topic, offset) of each invalid record
    final: dict[tuple[str, str], Schedule]  # (topic, id): the version delivered
    ids: set[tuple[str, str]]  # (topic, id) of every schedule and cancel
    superseded: int
    cancels: int
    written: int


def fill(template: bytes, values: dict[str, str]) -> bytes:
    for name, value in values.items():
        template = template.replace(f"{{{name}}}".encode(), value.encode())
    return template


def write(run: Run, example: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, ConsumedRecord]]:
    """Write ``example`` to partition 0 of each contract's topic, in order."""
    topics = run.pipeline.topics
    topic_of = {HEADERS: topics.schedules, ENVELOPE: topics.envelopes, TIMER: topics.timers}
    written: list[tuple[str, ConsumedRecord]] = []
    acks: list[Any] = []
    now_ms = time.time_ns() // 1_000_000
    for i, (role, spec) in enumerate(example):
        due_ms = now_ms + LEAD_S * 1000 + i * 97 % 4000
        values = {"ex": f"fuzz{run.example}{role[0]}", "target": run.target,
                  "epoch": f"{due_ms / 1000:.3f}", "second": str(-(-due_ms // 1000))}  # fmt: skip
        key = None if spec["key"] is None else fill(spec["key"], values)
        value = None if spec["value"] is None else fill(spec["value"], values)
        if "future" in spec:
            callback_key, callback = spec["future"]
            future = Future(callBackTopic=run.target, callBackKey=callback_key, callBack=callback)
            value = future.SerializeToString()
        headers: list[tuple[str, bytes | None]] = [
            (str(n), None if v is None else fill(v, values)) for n, v in spec["headers"]
        ]
        topic = topic_of[role]
        assert topic is not None
        run.producer.produce(topic, value, key, partition=0, headers=list(headers),
                             on_delivery=lambda err, msg: acks.append((err, msg)))  # fmt: skip
        run.producer.flush(30)  # one at a time: offsets in the order written
        ((err, msg),) = acks
        acks.clear()
        assert err is None, err
        record = ConsumedRecord(topic, 0, msg.offset(), msg.timestamp()[1], key, value,
                                tuple(headers))  # fmt: skip
        written.append((role, record))
    return written


def later_keys(rest: list[tuple[str, dict[str, Any]]], values: dict[str, str]) -> set[bytes]:
    """Keys of the schedules-topic records in ``rest``."""
    return {fill(spec["key"], values) for role, spec in rest if role == HEADERS and spec["key"]}


def model(written: list[tuple[str, ConsumedRecord]]) -> Model:
    rejected: set[tuple[str, int]] = set()
    held: dict[tuple[str, str], Schedule] = {}
    ids: set[tuple[str, str]] = set()
    superseded = cancels = 0
    for role, record in written:
        parsed = PARSERS[role](record)
        if isinstance(parsed, Invalid):
            rejected.add((record.topic, record.offset))
        elif isinstance(parsed, Cancel):
            cancels += 1
            held.pop((record.topic, parsed.id), None)
            ids.add((record.topic, parsed.id))
        elif isinstance(parsed, Schedule):
            superseded += (record.topic, parsed.id) in held
            held[(record.topic, parsed.id)] = parsed
            ids.add((record.topic, parsed.id))
    return Model(rejected, held, ids, superseded, cancels, len(written))


def explain(
    m: Model,
    written: list[tuple[str, ConsumedRecord]],
    history: list[ConsumedRecord],
    dead: list[ConsumedRecord],
    delivered: list[ConsumedRecord],
) -> str:
    """What was expected, what came out and what was written: a failure's whole story."""
    fired = sorted((source_of(x), x.key) for x in history)
    died = sorted((source_of(x), dict(x.headers).get(h.ERROR)) for x in dead)
    expected = sorted((k, v.require_source().offset) for k, v in m.final.items())
    records = "\n".join(
        f"{r.topic}@{r.offset} key={r.key!r} value={(r.value or b'')[:300]!r} headers={r.headers!r}"
        for _, r in written
    )
    return (
        f"history {fired}\ndead {died}\nexpected {expected} / {sorted(m.rejected)}\n"
        f"{len(delivered)} on the target\n{records}"
    )


def source_of(record: ConsumedRecord) -> tuple[str, int, int] | None:
    """``delayline-source`` of a history record or dead letter: (topic, partition, offset)."""
    raw = dict(record.headers).get(h.SOURCE)
    if raw is None:
        return None
    topic, partition, offset = raw.decode().rsplit("/", 2)
    return topic, int(partition), int(offset)


def invalid_counted(progress: Path) -> int:
    """Records the pipeline counted invalid so far (its ``--progress-file``)."""
    if not progress.exists():
        return 0
    lines = progress.read_text().splitlines()
    return sum(json.loads(line)["counts"].get("invalid", 0) for line in lines if line)


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large, HealthCheck.large_base_example],
)  # fmt: skip
@given(example=burst())
def test_every_record_is_delivered_cancelled_superseded_or_dead_lettered(
    run: Run, example: list[tuple[str, dict[str, Any]]]
) -> None:
    run.example += 1
    bootstrap, topics = run.pipeline.bootstrap, run.pipeline.topics
    invalid_before = invalid_counted(run.progress)
    # The shared pipeline's history and dead letters hold the whole session's: read on.
    since = {t: ends_now(bootstrap, t) for t in (topics.history, topics.dead_letters)}
    written = write(run, example)
    m = model(written)
    positions = {(r.topic, r.offset) for _, r in written}

    def outcomes() -> tuple[list[ConsumedRecord], list[ConsumedRecord], list[ConsumedRecord]]:
        """This example's history records, dead letters and deliveries."""
        history = [
            x for x in read_topic(bootstrap, topics.history, timeout_ms=30_000,
                                  since=since[topics.history])
            if (src := source_of(x)) and (src[0], (x.key or b"").decode()) in m.ids
        ]  # fmt: skip
        dead = [
            x for x in read_topic(bootstrap, topics.dead_letters, timeout_ms=30_000,
                                  since=since[topics.dead_letters])
            if (src := source_of(x)) and (src[0], src[2]) in positions
        ]  # fmt: skip
        ids = {sid for _, sid in m.ids}
        delivered = [
            x for x in read_topic(bootstrap, run.target, timeout_ms=30_000)
            if (dict(x.headers).get(h.KEY) or b"").decode() in ids
        ]  # fmt: skip
        return history, dead, delivered

    def settled() -> bool | None:
        history, dead, _ = outcomes()
        return (len(history) >= len(m.final) and len(dead) >= len(m.rejected)) or None

    try:
        eventually(settled, 90, f"{len(m.final)} deliveries and {len(m.rejected)} dead letters")
    except AssertionError:
        raise AssertionError(explain(m, written, *outcomes())) from None
    time.sleep(2)  # anything delivered twice or dead-lettered wrongly shows up now
    history, dead, delivered = outcomes()

    fired = Counter((src[0], (x.key or b"").decode()) for x in history if (src := source_of(x)))
    assert {k: n for k, n in fired.items() if n > 1} == {}, "delivered twice"
    assert set(fired) == set(m.final), "delivered what the model cancelled, or lost one"
    for x in history:
        src = source_of(x)
        assert src is not None
        expected = m.final[(src[0], (x.key or b"").decode())]
        assert x.value == expected.payload, "a superseded version was delivered"
        # The version itself: a copy written again after a record that would have hidden
        # it from compaction (an invalid record with its key) names its original's place.
        assert src[2] == expected.require_source().offset
    assert len(delivered) == len(m.final)

    rejected = Counter((src[0], src[2]) for x in dead if (src := source_of(x)))
    assert {k: n for k, n in rejected.items() if n > 1} == {}, "dead-lettered twice"
    assert set(rejected) == m.rejected, "a valid record dead-lettered, or an invalid one lost"
    assert all(dict(x.headers).get(h.ERROR) for x in dead), "a dead letter without a reason"
    assert invalid_counted(run.progress) - invalid_before == len(m.rejected)

    cancelled = m.written - len(m.rejected) - m.cancels - m.superseded - len(m.final)
    assert cancelled >= 0
    assert len(history) + len(dead) + m.superseded + m.cancels + cancelled == m.written
    assert run.pipeline.process.proc is not None
    assert run.pipeline.process.proc.poll() is None, "the pipeline stopped"
