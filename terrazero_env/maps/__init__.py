"""Maps: the common representation, the builder, the ``.tzb`` format, converters and procedural towns.

Typical use::

    from terrazero_env import maps
    m = maps.build(maps.procedural.grid_town(seed=3))
    maps.save(m, "town.tzb")
    m2 = maps.load("town.tzb")          # one read, sections are views of it
"""

from . import procedural
from .builder import MAX_MAP_EXTENT, BuildConfig, MapValidationError, build, validate, validate_built
from .dataset import Dataset, ManifestError, bundled_datasets
from .schema import (
    AgentType,
    ControlType,
    Handedness,
    Intersections,
    Lanes,
    LaneType,
    MapData,
    Movement,
    Polygons,
    Polylines,
    Ragged,
    RoadLines,
    RoadLineType,
    Signals,
    StopLines,
    StopSigns,
    Tracks,
)
from .sources import asset_path, bundled_maps, load_source
from .terrabin import TerrabinError, load, save

__all__ = [
    "AgentType", "BuildConfig", "Dataset", "ControlType", "Handedness", "Intersections", "Lanes", "LaneType", "MapData",
    "MapValidationError", "Movement", "Polygons", "Polylines", "Ragged", "RoadLines", "RoadLineType", "Signals",
    "ManifestError", "StopLines", "StopSigns", "TerrabinError", "Tracks", "asset_path", "build", "bundled_datasets",
    "bundled_maps", "load",
    "load_source", "procedural", "save", "validate", "validate_built", "MAX_MAP_EXTENT",
]
