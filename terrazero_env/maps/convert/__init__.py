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
| ``.tfrecord`` (also ``NAME.tfrecord-00000-of-01000``) | WOMD ``Scenario`` protos | :mod:`.womd` |
| ``.json`` with ``objects`` and ``roads`` | GPUDrive/PufferDrive scenario | :mod:`.gpudrive_json` (through ``load_source``) |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["CONVERTERS", "converter_for", "is_tfrecord"]

#: (file-name suffix, module, function) in match order: longer suffixes first.
CONVERTERS: tuple[tuple[str, str, str], ...] = (
    (".net.xml", "sumo", "convert"),
    (".xodr", "opendrive", "convert"),
    (".xml", "commonroad", "convert"),
    (".osm", "lanelet2", "convert"),
    (".pkl", "scenarionet", "convert"),
    (".tfrecord", "womd", "convert"),
)


def is_tfrecord(path: str | Path) -> bool:
    """WOMD's shards are named ``training.tfrecord-00000-of-01000``: the suffix is inside the name."""
    name = Path(path).name.lower()
    return name.endswith(".tfrecord") or ".tfrecord-" in name


def converter_for(path: str | Path) -> Callable | None:
    """The ``convert(path, **options) -> MapData`` function for a file, or None if no converter
    handles its suffix (or its module is not available)."""
    name = Path(path).name.lower()
    if is_tfrecord(name):
        name = name[: name.index(".tfrecord")] + ".tfrecord"
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
