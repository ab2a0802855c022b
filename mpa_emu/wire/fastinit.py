"""A faster ``__init__`` for the frozen, slotted dataclasses made once per frame.

The ``__init__`` that ``dataclasses`` writes for a frozen class stores every field with
``object.__setattr__(self, name, value)``, which looks the attribute up again for each
field; for a 20-field :class:`~mpa_emu.wire.segment.Segment` that is most of its cost. The
``__init__`` made here has the same parameters and defaults and stores each field through
its slot descriptor directly. Nothing else about the class changes: it stays frozen,
compares, hashes and ``dataclasses.replace``-s as before.

It is called on the class after its definition (``fast_frozen_init(Segment)``), not used
as a decorator: in the compiled build (docs/compiling.md) a class decorated with anything
but ``@dataclass`` would stay an interpreted class, and a compiled class already stores its
fields directly, so both functions leave a compiled class as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def _servable_fields(cls: type) -> tuple[dataclasses.Field[Any], ...] | None:
    """The fields of ``cls`` when a slot filler can stand in for its ``__init__`` exactly
    (slots, no ``__post_init__``, every field positional with no default factory)."""
    if "__mypyc_attrs__" in cls.__dict__:  # compiled: fields are stored directly already
        return None
    fields = dataclasses.fields(cls)
    if (not hasattr(cls, "__slots__") or hasattr(cls, "__post_init__")
            or any(f.default_factory is not dataclasses.MISSING or not f.init or f.kw_only
                   for f in fields)):
        return None
    return fields


def _slot_filler(cls: type, fields: tuple[dataclasses.Field[Any], ...], name: str,
                 head: list[str], obj: str, prologue: str, epilogue: str,
                 namespace: dict[str, Any]) -> Any:
    """Compile ``def name(*head, <the fields, with the dataclass defaults>)``: the
    ``prologue``, one store of each field into ``obj`` through its slot descriptor, the
    ``epilogue``."""
    params = list(head)
    body = [prologue]
    for f in fields:
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}({obj}, {f.name})\n")
    body.append(epilogue)
    exec(f"def {name}({', '.join(params)}):\n" + "".join(body), namespace)
    return namespace[name]


def fast_frozen_init(cls: type[T]) -> type[T]:
    """Give ``cls``, a ``@dataclass(frozen=True, slots=True)`` class, the faster ``__init__``
    (in place; ``cls`` is returned).

    A class it cannot serve exactly (a field with a default factory, keyword-only or
    left out of ``__init__``, a ``__post_init__``, no slots) keeps the dataclass ``__init__``.
    """
    fields = _servable_fields(cls)
    if fields is None:
        return cls
    init = _slot_filler(cls, fields, "__init__", ["self"], "self", "", "", {})
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """A positional constructor for a class :func:`fast_frozen_init` can serve: it makes
    the object with ``object.__new__`` and fills the slots, skipping the type call and
    ``__init__`` altogether (for a decoder that makes one object per frame). The same
    parameters and defaults as the dataclass ``__init__``; a class it cannot serve exactly
    is returned itself."""
    fields = _servable_fields(cls)
    if fields is None:
        return cls
    make = _slot_filler(cls, fields, "make", [], "obj", "    obj = _new(_cls)\n",
                        "    return obj\n", {"_new": object.__new__, "_cls": cls})
    return cast(Callable[..., T], make)
