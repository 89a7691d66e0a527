"""A faster ``__init__`` for the frozen, slotted dataclasses made once per record.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses); a :class:`~delayline.core.model.Schedule`
of seven fields took 1.0-1.5 us to make, a quarter of decoding an in-flight record. Setting
each slot through its descriptor instead takes a third of that.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fills_slots(cls: type[T]) -> type[T]:
    """Give ``cls``, a frozen dataclass with ``slots=True``, an ``__init__`` that sets
    each slot through its descriptor. Apply it above ``@dataclass``.

    Guarantees: the same parameters in the same order with the same defaults (positional
    or by name, as the generated one takes them); every field set; the instance as frozen
    as before (assigning to it afterwards still raises ``FrozenInstanceError``); equality,
    hashing and ``repr`` untouched.

    Raises:
        TypeError: ``cls`` is not a frozen slotted dataclass, or has what this ``__init__``
            would skip: a ``__post_init__``, a field out of ``__init__``, a default
            factory, or a keyword-only field.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slotted dataclass")
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen:
        raise TypeError(f"{cls.__name__} is not frozen: its generated __init__ is fast already")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)
    for f in fields:
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} is not a plain positional field")
    scope: dict[str, Any] = {}
    names = []
    for f in fields:
        scope[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            names.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            names.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"    _set_{f.name}(self, {f.name})\n" for f in fields)
    made: dict[str, Any] = {}
    exec(f"def __init__(self, {', '.join(names)}):\n{body}", scope, made)  # noqa: S102
    init = made["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
