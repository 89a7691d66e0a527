"""Notice rules (:mod:`delayline.contract.notice`): which versions are of short notice,
and the two forms they travel in."""

from __future__ import annotations

import json

import pytest

from delayline.contract.formats import NOTICE_RULES
from delayline.contract.notice import MAX_NOTICE_MS, Epoch, NoticeRules
from delayline.errors import ConfigError, FormatVersionError, RecordFormatError

RULES = NoticeRules(
    (
        Epoch(20_000, 2),
        Epoch(0, 2, {"s": {0: 100, 1: 50}}),
        Epoch(5_000, 4, {"s": {0: 200, 1: 50}, "other.topic-2": {3: 7}}),
    )
)


def test_the_last_epoch_starting_at_or_before_the_offset_governs() -> None:
    assert RULES.epoch_at("s", 0, 99) == RULES.epochs[0]
    assert RULES.epoch_at("s", 0, 100) == RULES.epochs[1]
    assert RULES.epoch_at("s", 0, 200) == RULES.epochs[2]
    # Two epochs start at 50 in partition 1: the later one governs.
    assert RULES.epoch_at("s", 1, 50) == RULES.epochs[2]
    assert RULES.epoch_at("s", 1, 49) == RULES.epochs[0]
    # A partition no epoch names starts at 0 in every epoch: the last one governs.
    assert RULES.epoch_at("s", 9, 0) == RULES.epochs[2]
    assert NoticeRules().epoch_at("s", 0, 0) is None


def test_short_notice_is_strictly_less_than_the_notice_and_includes_past_due() -> None:
    assert RULES.short("s", 0, 0, 1_000, 1_000 + 19_999) == RULES.epochs[0]
    assert RULES.short("s", 0, 0, 1_000, 1_000 + 20_000) is None
    assert RULES.short("s", 0, 0, 1_000, 0) == RULES.epochs[0], "past due on arrival"
    assert RULES.short("s", 0, 150, 1_000, 1_001) is None, "an epoch that is off"
    assert RULES.short("s", 0, 250, 1_000, 5_999) == RULES.epochs[2]
    assert RULES.short("s", 0, 250, 1_000, 6_000) is None
    assert NoticeRules().short("s", 0, 0, 1_000, 0) is None, "no epoch: none is short"


def test_the_json_form_round_trips_with_its_format() -> None:
    encoded = RULES.encode()
    assert json.loads(encoded)["format"] == NOTICE_RULES.current
    assert NoticeRules.decode(encoded, "rules") == RULES
    pending = NoticeRules(RULES.epochs, pending=True)
    assert NoticeRules.decode(pending.encode(), "rules") == pending


def test_a_newer_format_stops_the_reader_and_garbage_is_refused() -> None:
    newer = json.loads(RULES.encode())
    newer["format"] = NOTICE_RULES.current + 1
    with pytest.raises(FormatVersionError, match="short-notice rules in format 2"):
        NoticeRules.decode(json.dumps(newer).encode(), "d-direct/0@5")
    for garbage in (b"", b"{}", b"[]", b'{"format": 1, "pending": false, "epochs": [{}]}'):
        with pytest.raises(RecordFormatError, match="d-direct/0@5: not notice rules"):
            NoticeRules.decode(garbage, "d-direct/0@5")


def test_epochs_out_of_order_or_out_of_range_are_refused() -> None:
    with pytest.raises(ConfigError, match="out of order: s/0 starts at 10, then at 5"):
        NoticeRules((Epoch(1, 1, {"s": {0: 10}}), Epoch(1, 1, {"s": {0: 5}})))
    with pytest.raises(ConfigError, match="out of order: s/0 starts at 10, then at 0"):
        NoticeRules((Epoch(1, 1, {"s": {0: 10}}), Epoch(1, 1)))
    needs = "notice_ms in 0..60000 and inflight_partitions >= 1"
    for notice_ms, partitions in ((-1, 1), (1, 0), (MAX_NOTICE_MS + 1, 1)):
        with pytest.raises(ConfigError, match=needs):
            Epoch(notice_ms, partitions)
    assert Epoch(MAX_NOTICE_MS, 1).notice_ms == MAX_NOTICE_MS
    too_long = NoticeRules((Epoch(MAX_NOTICE_MS, 1),)).encode().replace(b"60000", b"60001")
    with pytest.raises(RecordFormatError, match="d-direct/0@5: not notice rules"):
        NoticeRules.decode(too_long, "d-direct/0@5")
    later = RULES.then(Epoch(1, 1, {"s": {0: 300, 1: 60}, "other.topic-2": {3: 7}}))
    assert later.epochs[-1].notice_ms == 1
    assert not later.pending


def test_the_jvm_form_lists_every_epoch_and_refuses_pending_rules() -> None:
    assert RULES.for_jvm() == ("20000;|0;s:0:100,s:1:50|5000;other.topic-2:3:7,s:0:200,s:1:50")
    assert NoticeRules().for_jvm() == ""
    with pytest.raises(ConfigError, match="pending"):
        NoticeRules(RULES.epochs, pending=True).for_jvm()
