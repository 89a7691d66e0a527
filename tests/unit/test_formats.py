"""Every format delayline leaves behind carries its version: a reader takes the older
ones and stops, saying what to do, at a newer one; the operations docs list them all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import delayline
from delayline.contract.formats import (
    BUCKET_COPY,
    CHECKPOINT,
    COMMIT_MARKER,
    FORMATS,
    INFLIGHT,
    REDIS_SCHEDULE,
    Format,
)
from delayline.core.model import Schedule, SourceRef
from delayline.core.version import VERSION
from delayline.errors import ConfigError, FormatVersionError, RecordFormatError
from delayline.fire.inflight import HEADER, InflightRecordError, decode_inflight, render_inflight
from delayline.fire.markers import marker_batch
from delayline.holds.buckets.copy import decode_copy
from delayline.holds.redis.codec import decode_schedule, encode_schedule
from delayline.pipeline.checkpoint_format import FORMAT_FILE, claim_format

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = Schedule(
    "s1", 1_000, "orders", b"k", b"payload", (("h", b"v"),), SourceRef("sched", 2, 41, 900)
)


def test_a_newer_version_stops_with_what_to_do_and_older_ones_pass() -> None:
    fmt = Format("thing", current=3, oldest=1)
    fmt.check(3, "here")
    fmt.check(1, "here")
    with pytest.raises(FormatVersionError) as raised:
        fmt.check(4, "topic t at offset 9")
    message = str(raised.value)
    assert message.startswith("topic t at offset 9: thing in format 4, written by a newer")
    assert "reads formats 1 to 3" in message
    assert "docs/operations.md#upgrades" in message
    retired = Format("thing", current=3, oldest=2)
    with pytest.raises(FormatVersionError, match="no longer reads"):
        retired.check(1, "here")


def test_only_a_first_byte_below_32_names_a_version() -> None:
    fmt = Format("thing", current=2, oldest=1)
    for foreign in (b"", b"\x00abc", b"not json", b"{}", b"\x20"):
        fmt.check_first_byte(foreign, "here")  # not delayline's: the reader refuses it
    fmt.check_first_byte(b"\x02rest", "here")
    with pytest.raises(FormatVersionError):
        fmt.check_first_byte(b"\x1frest", "here")


def _with_version(record_header: bytes, version: int) -> bytes:
    return bytes([version]) + record_header[1:]


def test_an_inflight_record_of_a_newer_format_stops_the_reader_and_garbage_is_skipped() -> None:
    record = render_inflight(SCHEDULE, "q-inflight", 7)
    value, headers = record.value or b"", record.headers
    assert decode_inflight(value, headers, 5).schedule == SCHEDULE
    header = headers[-1][1] or b""
    newer = (*headers[:-1], (HEADER, _with_version(header, INFLIGHT.current + 1)))
    with pytest.raises(FormatVersionError, match="in-flight record at offset 5"):
        decode_inflight(value, newer, 5)
    unknown = (*headers[:-1], (HEADER, _with_version(header, 1)))  # no release wrote it
    with pytest.raises(InflightRecordError):
        decode_inflight(value, unknown, 5)
    # A newer layout may be shorter than this one's: its version is read first.
    short = (*headers[:-1], (HEADER, bytes([INFLIGHT.current + 1]) + b"\x00" * 10))
    with pytest.raises(FormatVersionError):
        decode_inflight(value, short, 5)


def test_commit_markers_of_every_release_are_read_and_a_newer_one_stops() -> None:
    assert marker_batch(b'{"batch_id": 12, "records": 3}', "c[0]@4") == 12  # before formats
    current = json.dumps({"format": COMMIT_MARKER.current, "batch_id": 13}).encode()
    assert marker_batch(current, "c[0]@5") == 13
    newer = json.dumps({"format": COMMIT_MARKER.current + 1, "batch_id": 14}).encode()
    with pytest.raises(FormatVersionError, match="commit marker at c"):
        marker_batch(newer, "c[0]@6")
    # Another run's, left by a newer release: no reason to stop a rollback.
    assert marker_batch(newer, "c[0]@6", required=False) is None
    assert marker_batch(current, "c[0]@5", required=False) == 13


def test_a_bucket_copy_of_a_newer_format_stops_the_reader() -> None:
    with pytest.raises(FormatVersionError, match="bucket copy"):
        decode_copy(bytes([BUCKET_COPY.current + 1]) + bytes(60))


def test_a_redis_held_schedule_of_a_newer_format_stops_and_garbage_is_refused() -> None:
    data = encode_schedule(SCHEDULE)
    assert decode_schedule(data) == SCHEDULE
    with pytest.raises(FormatVersionError, match="held schedule in Redis"):
        decode_schedule(bytes([REDIS_SCHEDULE.current + 1]) + data[1:])
    with pytest.raises(RecordFormatError):
        decode_schedule(bytes([0]) + data[1:])


def test_a_checkpoint_records_its_format_and_refuses_a_newer_one(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert claim_format(fresh) == CHECKPOINT.current
    assert json.loads((fresh / FORMAT_FILE).read_text())["format"] == CHECKPOINT.current

    before = tmp_path / "before"  # written by a release that recorded no format
    (before / "offsets").mkdir(parents=True)
    assert claim_format(before) == 1
    assert (before / FORMAT_FILE).exists()

    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / FORMAT_FILE).write_text(json.dumps({"format": CHECKPOINT.current + 1}))
    with pytest.raises(FormatVersionError, match=f"checkpoint {newer}"):
        claim_format(newer)
    assert json.loads((newer / FORMAT_FILE).read_text())["format"] == CHECKPOINT.current + 1

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / FORMAT_FILE).write_text("{")
    with pytest.raises(ConfigError, match="--rebuild"):
        claim_format(broken)


def test_the_upgrade_docs_list_every_format_at_its_current_version() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## Upgrades") :]
    rows = dict(re.findall(r"^\| ([^|]+?) \| (\d+) \|", section, flags=re.MULTILINE))
    assert {f.name: str(f.current) for f in FORMATS} == rows


def test_the_release_version_is_the_packages() -> None:
    project = (ROOT / "pyproject.toml").read_text()
    assert f'\nversion = "{VERSION}"\n' in project
    assert delayline.__version__ == VERSION
