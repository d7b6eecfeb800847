"""Procedural maps: grid towns, roundabouts and highways generated from a seed and a few parameters.

Every generator returns a raw :class:`~terrazero_env.maps.schema.MapData` (geometry, lane graph,
stop lines tied to their lanes, signals, stop signs and explicit intersections); pass it through
:func:`terrazero_env.maps.builder.build` to derive the rest. The same seed and parameters always
give identical arrays, and a map's ``metadata["params"]`` regenerate it. Units are metres and m/s;
maps are flat (z = 0). ``handedness`` may be given as a :class:`~terrazero_env.maps.schema.Handedness`
or its name (``"right"`` / ``"left"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..schema import MapData
from .grid import grid_town
from .highway import highway
from .roundabout import roundabout

__all__ = ["KINDS", "generate", "grid_town", "highway", "roundabout"]

_GENERATORS: dict[str, Callable[..., MapData]] = {
    "grid": grid_town,
    "roundabout": roundabout,
    "highway": highway,
}

#: Map kinds accepted by :func:`generate`.
KINDS: tuple[str, ...] = tuple(_GENERATORS)


def generate(kind: str, seed: int = 0, **params: Any) -> MapData:
    """Generate a map of ``kind`` (one of :data:`KINDS`) with the given seed and keyword parameters."""
    try:
        gen = _GENERATORS[kind]
    except KeyError:
        raise ValueError(f"unknown procedural map kind {kind!r}; choose one of {', '.join(KINDS)}") from None
    return gen(seed, **params)
