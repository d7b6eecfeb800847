"""The drivability check per vehicle class, short: the reference driver with one class at a time in
the quick preset's worlds on grid_town (``benchmarks/reference_driver.py --classes car truck bus``
prints the full table, 800 episodes per class and map, in BENCHMARKS.md).

Cars meet the check's targets (at most 1% off-road, wrong-way, red light and collision, at least 85%
goal reach; with the margin 120 episodes leave). Trucks and buses come near them on grid_town
(BENCHMARKS.md: 1.9-3.6% off-road, 86-94% goal reach) but not on carla_town01 (9-14% off-road): their
bounds hold what the driver does today, so a change that makes long vehicles less drivable fails
here."""

from __future__ import annotations

import pytest

from terrazero_env.config.io import load_config
from terrazero_env.drivers import make_driver
from terrazero_env.evaluation.evaluate import evaluate

WEIGHTS = {"car": (1.0, 0.0, 0.0, 0.0, 0.0), "truck": (0.0, 1.0, 0.0, 0.0, 0.0), "bus": (0.0, 0.0, 1.0, 0.0, 0.0)}
#: class: (least goal reach, most off-road, most wrong-way, most red light, most collision)
BOUNDS = {"car": (0.85, 0.03, 0.03, 0.03, 0.03), "truck": (0.85, 0.08, 0.04, 0.03, 0.03),
          "bus": (0.80, 0.06, 0.03, 0.04, 0.03)}


@pytest.mark.parametrize("cls", list(WEIGHTS))
def test_reference_driver_per_class_on_grid_town(cls: str) -> None:
    cfg = load_config("quick", maps=["grid_town"], init__class_weights=WEIGHTS[cls])
    rows = evaluate(make_driver("reference"), cfg, episodes=120, seed=3)["rows"]
    goal, off, wrong, red, coll = BOUNDS[cls]
    got = {k: rows[k]["value"] for k in ("goal_reach_rate", "offroad_rate", "wrong_way_rate", "red_light_rate",
                                         "collision_rate")}
    assert got["goal_reach_rate"] >= goal, got
    assert got["offroad_rate"] <= off, got
    assert got["wrong_way_rate"] <= wrong, got
    assert got["red_light_rate"] <= red, got
    assert got["collision_rate"] <= coll, got
