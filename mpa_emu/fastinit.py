"""A faster ``__init__`` for the frozen, slotted dataclasses made once per frame.

The ``__init__`` that ``dataclasses`` writes for a frozen class stores every field with
``object.__setattr__(self, name, value)``, which looks the attribute up again for each
field; for a 20-field :class:`~mpa_emu.segment.Segment` that is most of its cost. The
``__init__`` made here has the same parameters and defaults and stores each field through
its slot descriptor directly. Nothing else about the class changes: it stays frozen,
compares, hashes and ``dataclasses.replace``-s as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_frozen_init(cls: type[T]) -> type[T]:
    """Class decorator, applied above ``@dataclass(frozen=True, slots=True)``.

    A class it cannot serve exactly (a field with a default factory, keyword-only or
    left out of ``__init__``, a ``__post_init__``, no slots) keeps the dataclass ``__init__``.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (not hasattr(cls, "__slots__") or hasattr(cls, "__post_init__")
            or any(f.default_factory is not dataclasses.MISSING or not f.init or f.kw_only
                   for f in fields)):
        return cls
    namespace: dict[str, Any] = {}
    params = ["self"]
    body = []
    for f in fields:
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})\n")
    source = f"def __init__({', '.join(params)}):\n" + "".join(body)
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
