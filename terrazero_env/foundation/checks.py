"""Field checks for the frozen config dataclasses of :mod:`terrazero_env.config`.

Each function checks one value at construction for type, finiteness, range and enum membership and
raises ``ValueError`` whose message starts with the field's name (``InitConfig.placement_tries: ...``),
so a bad value never reaches the compiled engine, where it would run as something else (a NaN weight,
a truncated float count, an enum int with no meaning). Booleans are not numbers here and floats are
not counts: ``3.0`` agents is rejected, not truncated. The functions return the value in its canonical
form (an enum member for an enum, a tuple for a sequence) for the dataclass to store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import IntEnum
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np

__all__ = ["check_bool", "check_enum", "check_float", "check_int", "check_pair", "check_tuple", "set_field"]

E = TypeVar("E", bound=IntEnum)


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def check_int(where: str, v: Any, lo: int | None = None, hi: int | None = None, why: str = "") -> Any:
    """An integer (not a bool, not a float such as 3.0) in ``[lo, hi]``; ``why`` explains a bound."""
    if _is_bool(v) or not isinstance(v, Integral):
        raise ValueError(f"{where}: an integer, got {v!r} ({type(v).__name__})")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        span = f"in [{lo}, {hi}]" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise ValueError(f"{where}: an integer {span}{why}, got {v!r}")
    return v


def check_float(where: str, v: Any, lo: float | None = None, hi: float | None = None, *,
                lo_open: bool = False, unit: str = "") -> Any:
    """A finite real number (not a bool or a string) in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    if _is_bool(v) or not isinstance(v, Real):
        raise ValueError(f"{where}: a number{unit}, got {v!r} ({type(v).__name__})")
    if not math.isfinite(v):
        raise ValueError(f"{where}: a finite number{unit}, got {v!r}")
    below = lo is not None and (v <= lo if lo_open else v < lo)
    if below or (hi is not None and v > hi):
        left = "(" if lo_open else "["
        span = (f"in {left}{lo}, {hi}]" if lo is not None and hi is not None
                else f"{'>' if lo_open else '>='} {lo}" if lo is not None else f"<= {hi}")
        raise ValueError(f"{where}: a number{unit} {span}, got {v!r}")
    return v


def check_bool(where: str, v: Any) -> bool:
    """``True`` or ``False`` (not 0, 1 or a string)."""
    if not _is_bool(v):
        raise ValueError(f"{where}: true or false, got {v!r} ({type(v).__name__})")
    return bool(v)


def check_enum(where: str, v: Any, enum: type[E]) -> E:
    """A member of ``enum``, given as the member, its integer value or its name (any case)."""
    if isinstance(v, enum):
        return v
    if isinstance(v, str) and v.upper() in enum.__members__:
        return enum[v.upper()]
    if isinstance(v, Integral) and not _is_bool(v) and int(v) in {int(e) for e in enum}:
        return enum(int(v))
    raise ValueError(f"{where}: one of {', '.join(f'{e.name.lower()} ({int(e)})' for e in enum)}, got {v!r}")


def check_tuple(where: str, v: Any, n: int | None = None, min_len: int = 0) -> tuple:
    """A list or tuple (not a string or a mapping) with exactly ``n`` or at least ``min_len`` entries."""
    if isinstance(v, (str, bytes)) or not isinstance(v, (Sequence, np.ndarray)):
        raise ValueError(f"{where}: a list of values, got {v!r} ({type(v).__name__})")
    t = tuple(v)
    if n is not None and len(t) != n:
        raise ValueError(f"{where}: exactly {n} values, got {len(t)}: {v!r}")
    if len(t) < min_len:
        raise ValueError(f"{where}: at least {min_len} value(s), got {len(t)}")
    return t


def check_pair(where: str, v: Any, lo: float | None = 0.0, hi: float | None = None, *, ints: bool = False,
               lo_open: bool = False, unit: str = "") -> tuple:
    """A ``(min, max)`` range with ``min <= max``, both finite and in ``[lo, hi]``."""
    t = check_tuple(where, v, 2)
    for i, x in enumerate(t):
        name = f"{where} {('min', 'max')[i]}"
        if ints:
            check_int(name, x, None if lo is None else int(lo), None if hi is None else int(hi))
        else:
            check_float(name, x, lo, hi, lo_open=lo_open, unit=unit)
    if t[0] > t[1]:
        raise ValueError(f"{where}: need min <= max, got {v!r}")
    return t


def set_field(obj: Any, name: str, value: Any) -> None:
    """Store a checked field's canonical form (enum member, tuple) on a frozen dataclass."""
    if getattr(obj, name) is not value:
        object.__setattr__(obj, name, value)
