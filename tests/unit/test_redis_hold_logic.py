"""The Redis hold's pure parts: the held-version codec, its settings, the holds table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.bench.summary import holds_markdown
from delayline.core.model import Schedule, SourceRef
from delayline.errors import ConfigError
from delayline.holds.redis.codec import (
    TOKEN_BYTES,
    decode_schedule,
    encode_schedule,
    version_token,
)
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.scripts import UNCHANGED

headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=20)), max_size=5)


@given(
    sid=st.text(min_size=1, max_size=30),
    due=st.integers(0, 253_402_300_799_999),
    key=st.none() | st.binary(max_size=30),
    payload=st.binary(max_size=200),
    hdrs=headers,
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(0, 2**63 - 1),
    ts=st.integers(-(2**40), 2**41),
)
def test_a_held_version_round_trips_byte_for_byte(
    sid: str,
    due: int,
    key: bytes | None,
    payload: bytes,
    hdrs: list[tuple[str, bytes | None]],
    partition: int,
    offset: int,
    ts: int,
) -> None:
    source = SourceRef("orders-delayed", partition, offset, ts)
    schedule = Schedule(sid, due, "target", key, payload, tuple(hdrs), source)
    decoded = decode_schedule(encode_schedule(schedule))
    assert decoded == schedule
    assert decoded.source == source


def test_the_version_token_tells_versions_apart_and_never_looks_unchanged() -> None:
    def encoded(partition: int, offset: int) -> bytes:
        source = SourceRef("t", partition, offset, 0)
        return encode_schedule(Schedule("a", 1, "x", None, b"p", (), source))

    tokens = {version_token(encoded(p, o)) for p in (0, 1) for o in (0, 1, 256)}
    assert len(tokens) == 6
    assert all(len(t) == TOKEN_BYTES for t in tokens)
    assert version_token(None) == b""
    assert not encoded(0, 0).startswith(UNCHANGED)


_HELD = encode_schedule(Schedule("a", 1, "x", None, b"payload", (), SourceRef("t", 0, 0, 0)))


@pytest.mark.parametrize(
    "data", [b"", b"\x00" + bytes(40), _HELD[:-3], _HELD + b"\x00"],
    ids=["empty", "unknown version", "truncated", "trailing"],
)  # fmt: skip
def test_unknown_truncated_or_overlong_encodings_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="held-schedule encoding"):
        decode_schedule(data)


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"url": "http://x"}, "--redis-url"),
        ({"grace_ms": -1}, "--redis-grace"),
        ({"lease_ms": 10}, "--redis-lease"),
        ({"prefix": "a b"}, "--redis-prefix"),
        ({"prefix": "x{y}"}, "--redis-prefix"),
    ],
)
def test_bad_settings_name_their_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        RedisHoldConfig(**kwargs)  # type: ignore[arg-type]


def test_the_password_never_shows() -> None:
    config = RedisHoldConfig(url="redis://user:s3cret@host:6379/0")
    assert "s3cret" not in config.safe_url
    assert config.safe_url == "redis://user:***@host:6379/0"


def test_the_holds_table_puts_each_scenario_of_every_hold_side_by_side(tmp_path: Path) -> None:
    def result(figures: dict[str, object], targets: list[dict[str, object]]) -> str:
        return json.dumps({"figures": figures, "targets": targets})

    zeros = {"early": 0, "duplicates": 0, "lost": 0}
    (tmp_path / "burst.json").write_text(result({"ingest_per_s": 3648, **zeros}, []))
    target = {"target": "ingest", "measured": 9000, "bound": ">= 50000", "met": False}
    (tmp_path / "redis-burst.json").write_text(
        result({"ingest_per_s": 9000, "redis": {"bytes_per_pending": 412}, **zeros}, [target])
    )
    (tmp_path / "buckets-restart.json").write_text(
        result({"first_delivery_after_restart_s": 12.5, "pending_held": 10_000_000}, [])
    )
    table = holds_markdown(tmp_path)
    assert "| scenario | figure | jvm | redis | buckets |" in table
    assert "| burst | ingest (schedules/s) | 3,648 | 9,000 | - |" in table
    assert "| burst | early / duplicates / lost | 0 / 0 / 0 | 0 / 0 / 0 | - |" in table
    assert "| burst | Redis bytes per pending schedule | - | 412 | - |" in table
    assert "| redis-burst | ingest | 9,000 | >= 50000 | **no** |" in table
    assert "| restart | pending schedules held | - | - | 10,000,000 |" in table
    assert "| restart | first delivery after a restart (s) | - | - | 12.5 |" in table
    assert "| restart | ingest" not in table
    assert "steady" not in table
