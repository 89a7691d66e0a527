"""fills_slots: the faster __init__ of frozen slotted dataclasses keeps what the
generated one promises."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from delayline.core.frozen import fills_slots
from delayline.core.model import Cancel, Invalid, Schedule, SourceRef
from delayline.errors import DefinitionError


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: int | None = field(default=None, compare=False)


@fills_slots
@dataclass(frozen=True, slots=True)
class Filled:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: int | None = field(default=None, compare=False)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1, "x", (2,), 3), {}), ((), {"a": 1, "d": 4}),
     ((1,), {"c": (5,), "b": "y"})],
)  # fmt: skip
def test_it_takes_what_the_generated_init_takes(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    plain, filled = Plain(*args, **kwargs), Filled(*args, **kwargs)
    assert dataclasses.astuple(filled) == dataclasses.astuple(plain)
    assert repr(filled).replace("Filled", "Plain") == repr(plain)


def test_its_init_is_in_place_with_the_generated_signature() -> None:
    for cls in (Filled, Schedule, Cancel, Invalid):
        assert cls.__init__.__code__.co_filename == f"<fills_slots {cls.__qualname__}>"
    assert inspect.signature(Filled) == inspect.signature(Plain)


def test_it_refuses_what_the_generated_init_refuses() -> None:
    wrong: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}), ((1, "x", (), 4, 5), {}), ((1,), {"e": 2}), ((1,), {"a": 2})
    ]  # fmt: skip
    for args, kwargs in wrong:
        with pytest.raises(TypeError):
            Plain(*args, **kwargs)
        with pytest.raises(TypeError):
            Filled(*args, **kwargs)


def test_the_model_stays_frozen_equal_and_hashable() -> None:
    source = SourceRef("in", 3, 7, 1_000)
    s = Schedule("id", 5, "target", None, b"p", (("h", b"v"),), source)
    assert (s.id, s.due_ms, s.target_topic, s.target_key, s.payload) == (
        "id",
        5,
        "target",
        None,
        b"p",
    )
    assert s.headers == (("h", b"v"),)
    assert s.source == source
    with pytest.raises(FrozenInstanceError):
        s.id = "other"  # type: ignore[misc]
    # source is out of equality, as declared
    assert s == Schedule("id", 5, "target", None, b"p", (("h", b"v"),))
    assert hash(s) == hash(Schedule("id", 5, "target", None, b"p", (("h", b"v"),), None))
    assert dataclasses.replace(s, due_ms=6).due_ms == 6
    assert Schedule("id", 5, "t", None, b"").headers == ()
    assert Cancel("id").fired_offset is None
    assert Cancel("id", 3, source).source == source
    assert Invalid("why").source is None
    with pytest.raises(FrozenInstanceError):
        Cancel("id").id = "x"  # type: ignore[misc]


def test_it_refuses_classes_whose_fields_it_would_skip() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class KwOnly:
        a: int = field(kw_only=True)

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    for cls in (Factory, Post, KwOnly, NoSlots, NotFrozen):
        with pytest.raises(DefinitionError):
            fills_slots(cls)
