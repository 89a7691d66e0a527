"""A faster ``__init__`` for the frozen, slotted dataclasses made once per record.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses); a :class:`~delayline.core.model.Schedule`
of seven fields took 1.0-1.5 us to make, a quarter of decoding an in-flight record. Setting
each slot through its descriptor instead takes a third of that.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

from delayline.errors import DefinitionError

T = TypeVar("T")


def fills_slots(cls: type[T]) -> type[T]:
    """Give ``cls``, a frozen dataclass with ``slots=True``, an ``__init__`` that sets
    each slot through its descriptor. Apply it above ``@dataclass``.

    Guarantees: the same signature as the generated ``__init__`` (checked when applied:
    names, order, kinds, defaults, annotations), so the same calls succeed and fail;
    every field set; the instance as frozen as before (assigning to it afterwards still
    raises ``FrozenInstanceError``); equality, hashing, ``repr`` and ``dataclasses.replace``
    untouched. The class must be imported where it is used (pickled by reference, never
    shipped by value: its setters are its own descriptors).

    Raises:
        DefinitionError: ``cls`` is not a frozen slotted dataclass, or has what this ``__init__``
            would skip: a ``__post_init__``, a field out of ``__init__``, a default
            factory, a keyword-only field; or the signatures differ.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise DefinitionError(f"{cls.__name__} is not a slotted dataclass")
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen:
        raise DefinitionError(
            f"{cls.__name__} is not frozen: its generated __init__ is fast already"
        )
    if hasattr(cls, "__post_init__"):
        raise DefinitionError(f"{cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)
    for f in fields:
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise DefinitionError(f"{cls.__name__}.{f.name} is not a plain positional field")
    scope: dict[str, Any] = {}
    names = []
    for i, f in enumerate(fields):
        scope[f"__set_{i}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        if f.default is dataclasses.MISSING:
            names.append(f.name)
        else:
            scope[f"__default_{i}"] = f.default
            names.append(f"{f.name}=__default_{i}")
    body = "".join(f"    __set_{i}(self, {f.name})\n" for i, f in enumerate(fields))
    source = f"def __init__(self, {', '.join(names)}):\n{body}"
    made: dict[str, Any] = {}
    exec(compile(source, f"<fills_slots {cls.__qualname__}>", "exec"), scope, made)  # noqa: S102
    generated, init = cls.__init__, made["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(generated.__annotations__)
    if inspect.signature(init) != inspect.signature(generated):
        raise DefinitionError(
            f"{cls.__name__}: the fast __init__ would not take what the generated one does"
        )
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
