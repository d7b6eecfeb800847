"""The drivability check per vehicle class, short: the reference driver with one class at a time in
the quick preset's worlds on grid_town and carla_town01 (``benchmarks/reference_driver.py --classes
car truck bus`` prints the full table, 800 episodes per class and map, in BENCHMARKS.md).

Every vehicle class meets the check's targets on both towns (at most 1% off-road, wrong-way, red
light and collision for cars, 2% for trucks and buses, at least 85% goal reach; held here with the
margin 300 episodes leave). On carla_town01 that holds for trucks and buses because their goals keep
to lanes their boxes can follow (``InitConfig.goal_turnable``): most of its turning lanes are tighter
than a 9-13 m vehicle can turn inside the road edges (``benchmarks/turn_radii.py``, BENCHMARKS.md).
The bundled roundabout is drawn for trucks and buses (5 m lanes, 15 m entry radii, 16 m turnaround
islands: ``assets/maps/roundabout.yaml``), the highway's turnaround loops swing out wide enough for
them (``assets/maps/highway.yaml``); both are held to the same bounds."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from terrazero_env.config import AgentType
from terrazero_env.config.io import load_config
from terrazero_env.drivers import make_driver
from terrazero_env.engine import ROLES
from terrazero_env.evaluation.evaluate import evaluate
from terrazero_env.evaluation.metrics import episodes_where, summarize

_spec = importlib.util.spec_from_file_location(
    "reference_driver_bench", Path(__file__).resolve().parents[1] / "benchmarks" / "reference_driver.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

#: ``init.class_weights`` for one class at a time, as the full table uses them.
WEIGHTS = bench.CLASS_WEIGHTS
#: (least goal reach, most off-road, most wrong-way, most red light, most collision), every class
BOUNDS = (0.85, 0.03, 0.03, 0.03, 0.03)


@pytest.mark.parametrize("town", ["grid_town", "carla_town01", "roundabout", "highway"])
@pytest.mark.parametrize("cls", list(WEIGHTS))
def test_reference_driver_per_class(cls: str, town: str) -> None:
    cfg = load_config("quick", maps=[town], init__class_weights=WEIGHTS[cls])
    rows = evaluate(make_driver("reference"), cfg, episodes=300, seed=3)["rows"]
    goal, off, wrong, red, coll = BOUNDS
    got = {k: rows[k]["value"] for k in ("goal_reach_rate", "offroad_rate", "wrong_way_rate", "red_light_rate",
                                         "collision_rate")}
    assert got["goal_reach_rate"] >= goal, got
    assert got["offroad_rate"] <= off, got
    assert got["wrong_way_rate"] <= wrong, got
    assert got["red_light_rate"] <= red, got
    assert got["collision_rate"] <= coll, got


#: The class table's goals on the planner preset's worlds (``reference_driver.py --mixed``).
MIXED_GOALS = bench.MIXED_GOALS


@pytest.mark.parametrize("town", ["grid_town", "carla_town01"])
def test_reference_driver_in_the_planner_presets_mixed_worlds(town: str) -> None:
    """The planner preset's own worlds (mixed classes, all controlled, its traffic, static actors and
    pedestrians) with the class table's goals: one round of 32 worlds x 16 slots. Every class is
    there and reaches its goals; off-road, red light and collisions stay rare. Wrong-way as the rule
    counts it is held more loosely: on carla_town01's one-lane roads a pass of a blocking obstacle
    crosses the centre line; wrong-way away from any obstruction (``benchmarks/reference_driver.py``'s
    ``obstructed``, which the full table counts, BENCHMARKS.md) is held to the class table's bound."""
    cfg = load_config("planner", maps=[town], **MIXED_GOALS)
    watch = bench.ObstructionWatch(make_driver("reference"))
    per = evaluate(watch, cfg, episodes=512, seed=5)["per_episode"]
    kinds = np.asarray(per["agent_class"])
    pooled = summarize(per)
    assert pooled["goal_reach_rate"]["value"] >= 0.85, pooled["goal_reach_rate"]
    for key, most in (("offroad_rate", 0.02), ("red_light_rate", 0.02), ("collision_rate", 0.02),
                      ("wrong_way_rate", 0.06)):
        assert pooled[key]["value"] <= most, (key, pooled[key])
    unexcused = int(watch.unexcused(per).sum())
    assert unexcused <= 0.01 * len(per["episode_id"]), unexcused
    for cls in (AgentType.CAR, AgentType.TRUCK, AgentType.BUS):
        sub = episodes_where(per, kinds == int(cls))
        assert len(sub["return"]) >= 20, (cls, len(sub["return"]))
        assert summarize(sub)["goal_reach_rate"]["value"] >= 0.7, cls


def _agents(rows: list[dict]) -> np.ndarray:
    """A one-world ``Engine.agents``-like array of the fields ``obstructed`` reads (defaults: a live
    controlled car standing at the origin facing +x, 4.5 m long)."""
    dt = np.dtype([("x", "<f8"), ("y", "<f8"), ("heading", "<f8"), ("speed", "<f8"), ("length", "<f8"),
                   ("role", "<i4"), ("cls", "<i4"), ("alive", "<i4")])
    out = np.zeros((1, len(rows)), dt)
    for i, r in enumerate(rows):
        base = {"x": 0.0, "y": 0.0, "heading": 0.0, "speed": 0.0, "length": 4.5, "role": ROLES.index("CONTROLLED"),
                "cls": int(AgentType.CAR), "alive": 1}
        base.update(r)
        for k, v in base.items():
            out[k][0, i] = v
    return out


STATIC = ROLES.index("STATIC")


@pytest.mark.parametrize(("other", "expected"), [
    ({"x": 20.0, "y": -3.5, "role": STATIC}, True),                    # a parked car ahead, one lane over
    ({"x": 31.0, "y": 0.0, "role": STATIC}, False),                   # past the reach ahead
    ({"x": -9.0, "y": -3.5, "role": STATIC}, True),                   # just passed: 4.5 + 5 m behind
    ({"x": -10.0, "y": -3.5, "role": STATIC}, False),                 # further behind
    ({"x": 10.0, "y": 6.0, "role": STATIC}, False),                   # beyond the side reach
    ({"x": 10.0, "y": -3.5, "role": STATIC, "alive": 0}, False),      # gone
    ({"x": 10.0, "y": -3.5}, True),                                   # a vehicle standing, same way
    ({"x": 10.0, "y": -3.5, "speed": 3.0}, False),                    # a vehicle moving
    ({"x": 10.0, "y": -3.5, "heading": math.pi}, False),              # standing, facing the other way
    ({"x": 10.0, "y": -3.5, "cls": int(AgentType.PEDESTRIAN)}, False),  # a pedestrian standing
    ({"x": 10.0, "y": 0.0, "cls": int(AgentType.PEDESTRIAN), "role": STATIC}, True),  # a worker
])
def test_obstructed_reads_an_obstruction_by_the_cars_path(other: dict, expected: bool) -> None:
    ag = _agents([{"speed": 8.0}, other])
    assert bench.obstructed(ag, np.array([0]), np.array([0])).tolist() == [expected]


def test_obstructed_works_in_each_agents_own_frame() -> None:
    """The reach is along the agent's heading: the same obstruction is ahead of a car facing it and
    behind (out of reach) a car facing away; the agent itself is never its own obstruction."""
    h = 0.7
    ag = _agents([{"heading": h, "speed": 8.0}, {"heading": h + math.pi, "speed": 8.0, "x": 1.0},
                  {"x": 20 * math.cos(h), "y": 20 * math.sin(h), "role": STATIC},
                  {"x": 50.0, "role": STATIC}])
    got = bench.obstructed(ag, np.array([0, 0, 0]), np.array([0, 1, 2]))
    assert got.tolist() == [True, False, False]


def test_each_episode_names_its_agents_class() -> None:
    """``per_episode["agent_class"]``: the class of the agent whose episode it is, one per episode."""
    for cls in (AgentType.TRUCK, AgentType.BUS):
        weights = tuple(1.0 if k == int(cls) else 0.0 for k in range(5))
        cfg = load_config("quick", maps=["grid_town"], init__class_weights=weights)
        per = evaluate(make_driver("reference"), cfg, episodes=20, seed=0)["per_episode"]
        assert per["agent_class"] == [int(cls)] * 20


def test_episodes_where_filters_every_per_episode_list() -> None:
    per = {"events": {"collision": [True, False, True]}, "counts": {"collision": [2, 0, 1]},
           "return": [1.0, 2.0, 3.0], "length": [5, 6, 7], "engine_metrics": [[0.0], [1.0], [2.0]],
           "agent_class": [0, 1, 0], "progress_reference": "limit"}
    sub = episodes_where(per, np.array([True, False, True]))
    assert sub == {"events": {"collision": [True, True]}, "counts": {"collision": [2, 1]}, "return": [1.0, 3.0],
                   "length": [5, 7], "engine_metrics": [[0.0], [2.0]], "agent_class": [0, 0],
                   "progress_reference": "limit"}
    assert per["return"] == [1.0, 2.0, 3.0]  # the input is not changed
    with pytest.raises(ValueError, match="3 booleans"):
        episodes_where(per, [1, 0, 1])
    with pytest.raises(ValueError, match="3 booleans"):
        episodes_where(per, np.array([True, False]))


def test_cars_keep_room_on_the_roundabouts_tight_loops(tmp_path) -> None:
    """The car-sized roundabout (the generator's defaults: 3.5 m lanes, 6 m entry fillets, 9 m
    turnaround islands; the bundled map was drawn this way before it was drawn for trucks and buses):
    its turnaround loops (10.7 m, 0.4 m beside a 5 m car's sweep) and its 7.7 m exits. With its
    swept-path boxes kept 0.2 m from the edges where an offset allows (``swept_margin``) the driver
    keeps cars on the road there; with the boxes as they are (``swept_margin=0``) its tracking error
    took them off it in 7.8% of 400 episodes."""
    from terrazero_env.maps import build, procedural, save

    path = save(build(procedural.roundabout(0)), tmp_path / "roundabout_cars.tzb")
    cfg = load_config("quick", maps=[str(path)], init__class_weights=WEIGHTS["car"])
    rows = evaluate(make_driver("reference"), cfg, episodes=300, seed=3)["rows"]
    assert rows["offroad_rate"]["value"] <= 0.02, rows["offroad_rate"]
    assert rows["goal_reach_rate"]["value"] >= 0.85, rows["goal_reach_rate"]
    bare = evaluate(make_driver("reference", swept_margin=0.0), cfg, episodes=300, seed=3)["rows"]
    assert bare["offroad_rate"]["value"] > rows["offroad_rate"]["value"] + 0.02, (bare["offroad_rate"], rows["offroad_rate"])


def test_obstruction_watch_drives_as_what_it_wraps() -> None:
    """Watching changes nothing of the episodes: the same outcomes as the bare driver, on the
    left-hand town where the reference driver passes parked cars over the centre line (every
    wrong-way episode there is flagged or excused, none is lost)."""
    cfg = load_config("quick", maps=["grid_town_lht"])
    bare = evaluate(make_driver("reference"), cfg, episodes=256, seed=0, progress_reference="limit")["per_episode"]
    watch = bench.ObstructionWatch(make_driver("reference"))
    per = evaluate(watch, cfg, episodes=256, seed=0, progress_reference="limit")["per_episode"]
    assert per["return"] == bare["return"]
    assert per["events"] == bare["events"]
    wrong = np.asarray(per["events"]["wrong_way"], bool)
    flagged = watch.unexcused(per)
    assert not np.any(flagged & ~wrong)
    assert wrong.sum() > flagged.sum()


def test_cars_keep_their_side_through_the_left_hand_towns_near_side_turns() -> None:
    """A car's swept-path offset scales with its length (``swept_path`` is a 7 m box's): allowed the
    whole 1.5 m, cars stood 0.75-1 m out before grid_town_lht's tight near-side turns, entered them
    too far out to come back and left them over the centre line (10 of these 800 episodes). Wrong-way
    away from obstructions is then none or next to none; the rest of the rule's count is passes."""
    cfg = load_config("quick", maps=["grid_town_lht"])
    watch = bench.ObstructionWatch(make_driver("reference"))
    per = evaluate(watch, cfg, episodes=800, seed=1, progress_reference="limit")["per_episode"]
    assert int(watch.unexcused(per).sum()) <= 2
    assert summarize(per)["offroad_rate"]["value"] <= 0.01
