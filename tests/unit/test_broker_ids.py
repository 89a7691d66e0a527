"""The local broker's KRaft cluster id never looks like a command-line option."""

from __future__ import annotations

import uuid

from delayline.infra.broker import new_cluster_id


def test_an_id_starting_with_a_dash_is_drawn_again() -> None:
    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))  # URL-safe base64 of 0xf8... starts with "-"
    plain = uuid.UUID(bytes=b"\x00" + bytes(15))
    draws = iter([dash, dash, plain])
    assert new_cluster_id(lambda: next(draws)) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_ids_are_22_url_safe_characters() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
