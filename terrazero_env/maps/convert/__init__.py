"""Converters from real map formats into the common representation (``MapData``, raw: pass the result
to :func:`terrazero_env.maps.build`).

``converter_for(path)`` picks one by file name; ``terrazero maps build SRC -o OUT.tzb`` uses it.

| suffix | format | module |
|---|---|---|
| ``.xodr`` | ASAM OpenDRIVE | :mod:`.opendrive` |
| ``.net.xml`` | SUMO network | :mod:`.sumo` |
| ``.xml`` | CommonRoad scenario | :mod:`.commonroad` |
| ``.osm`` | Lanelet2 map | :mod:`.lanelet2` |
| ``.pkl`` | ScenarioNet scenario | :mod:`.scenarionet` |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["CONVERTERS", "converter_for"]

#: (file-name suffix, module, function) in match order: longer suffixes first.
CONVERTERS: tuple[tuple[str, str, str], ...] = (
    (".net.xml", "sumo", "convert"),
    (".xodr", "opendrive", "convert"),
    (".xml", "commonroad", "convert"),
    (".osm", "lanelet2", "convert"),
    (".pkl", "scenarionet", "convert"),
)


def converter_for(path: str | Path) -> Callable | None:
    """The ``convert(path, **options) -> MapData`` function for a file, or None if no converter
    handles its suffix (or its module is not available)."""
    name = Path(path).name.lower()
    for suffix, module, func in CONVERTERS:
        if name.endswith(suffix):
            try:
                mod = importlib.import_module(f"{__name__}.{module}")
            except ModuleNotFoundError as e:
                if e.name == f"{__name__}.{module}":
                    return None
                raise
            return getattr(mod, func)
    return None
