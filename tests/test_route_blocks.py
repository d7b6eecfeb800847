"""Stopped vehicles on the controlled cars' routes (``RoadUsersConfig.route_blocks``) and the long-tail
training preset built on them: what they place, where, and the share of cars that meet them."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from terrazero_env import load_config
from terrazero_env.config import RoadUsersConfig, StaticKind
from terrazero_env.engine import ROLES, Engine

STATIC = list(ROLES).index("STATIC")
CONTROLLED = list(ROLES).index("CONTROLLED")


def _census():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "longtail_census.py"
    spec = importlib.util.spec_from_file_location("longtail_census", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _world_blocks(cfg, seeds):
    e = Engine(cfg.with_overrides(num_worlds=len(seeds)))
    e.reset(np.arange(len(seeds)), seeds)
    return e, np.asarray(e.agents)


def test_route_blocks_stand_in_front_of_controlled_cars_within_the_drawn_distance():
    cfg = load_config("quick").with_overrides(init={"goal_distance": (40.0, 80.0), "num_agents": (4, 4)},
                                              road_users={"route_blocks": 1.0, "parked": (0, 0)})
    e, ag = _world_blocks(cfg, list(range(32)))
    blocks = placed = 0
    for w in range(32):
        rows = ag[w, :e.num_agents(w)]
        ctrl = rows[(rows["role"] == CONTROLLED) & (rows["alive"] == 1)]
        stopped = rows[(rows["role"] == STATIC) & (rows["kind"] == int(StaticKind.NONE)) & (rows["alive"] == 1)]
        placed += len(ctrl)
        for b in stopped:
            blocks += 1
            # ahead of some controlled car, 15-40 m along its route (at most that far in a straight line)
            near = []
            for a in ctrl:
                dx, dy = b["x"] - a["x"], b["y"] - a["y"]
                fwd = dx * math.cos(a["heading"]) + dy * math.sin(a["heading"])
                if fwd > 0 and math.hypot(dx, dy) <= 40.0 + 1e-6:
                    near.append(math.hypot(dx, dy))
            assert near, f"world {w}: a stopped car in front of no controlled car"
            assert b["cls"] == 0 and b["speed"] == 0.0
    # most cars get one: goals far enough, not in a junction, room on the road
    assert blocks >= 0.4 * placed


@pytest.mark.parametrize("kinds, kind", [((0.0, 1.0, 0.0), StaticKind.CONE), ((0.0, 0.0, 1.0), StaticKind.CRASHED)],
                         ids=["construction zone", "crash cluster"])
def test_route_blocks_can_be_construction_zones_and_crash_clusters(kinds, kind):
    """``route_block_kinds`` puts InterPlan's other obstacle families on the cars' routes: cones (with
    the world's workers) or crashed vehicles ahead of a controlled car, before its goal; with route
    blocks off, the quick preset's worlds hold none of them."""
    cfg = load_config("quick").with_overrides(init={"goal_distance": (60.0, 100.0), "num_agents": (4, 4)},
                                              road_users={"route_blocks": 1.0, "parked": (0, 0),
                                                          "route_block_kinds": kinds})
    e, ag = _world_blocks(cfg, list(range(32)))
    worlds = 0
    for w in range(32):
        rows = ag[w, :e.num_agents(w)]
        ctrl = rows[(rows["role"] == CONTROLLED) & (rows["alive"] == 1)]
        members = rows[(rows["role"] == STATIC) & (rows["kind"] == int(kind)) & (rows["alive"] == 1)]
        worlds += len(members) > 0
        for b in members:
            ahead = [a for a in ctrl
                     if (b["x"] - a["x"]) * math.cos(a["heading"]) + (b["y"] - a["y"]) * math.sin(a["heading"]) > 0
                     and math.hypot(b["x"] - a["x"], b["y"] - a["y"]) <= 40.0 + 30.0]
            assert ahead, f"world {w}: a {kind.name.lower()} member ahead of no controlled car"
        for a in ctrl:  # nothing was placed on top of a car
            for b in members:
                assert math.hypot(b["x"] - a["x"], b["y"] - a["y"]) > 1.0
    assert worlds >= 8, f"only {worlds} of 32 worlds hold a {kind.name.lower()} on a route"
    off = cfg.with_overrides(road_users={"route_blocks": 0.0})
    _, ag = _world_blocks(off, list(range(32)))
    assert not ((ag["kind"] == int(kind)) & (ag["alive"] == 1)).any()


def test_route_block_kinds_are_three_weights_not_all_zero():
    for bad in ((0.0, 0.0, 0.0), (1.0, -1.0, 0.0), (1.0, 1.0)):
        with pytest.raises(ValueError, match="route_block_kinds"):
            RoadUsersConfig(route_block_kinds=bad)


def test_route_blocks_off_place_none_and_bad_values_are_refused():
    cfg = load_config("quick").with_overrides(num_worlds=8, road_users={"parked": (0, 0)})
    e = Engine(cfg)
    e.reset()
    ag = np.asarray(e.agents)
    assert not ((ag["role"] == STATIC) & (ag["kind"] == int(StaticKind.NONE)) & (ag["alive"] == 1)).any()
    with pytest.raises(ValueError, match="route_blocks"):
        RoadUsersConfig(route_blocks=1.5)
    with pytest.raises(ValueError, match="route_block_distance"):
        RoadUsersConfig(route_block_distance=(40.0, 15.0))


def test_longtail_preset_holds_out_the_transfer_maps_and_keeps_wrong_way_a_penalty():
    cfg = load_config("longtail")
    assert not {"grid_town_lht", "carla_town10hd", "usa_lanker"} & set(cfg.maps)
    assert len(cfg.maps) >= 4 and cfg.episode_length == 256
    assert int(cfg.consequences["wrong_way"]) == 0
    assert cfg.obs == load_config("quick").obs  # the quick policy's layout


def test_census_a_third_of_longtail_cars_meet_an_obstacle_or_a_jaywalker_and_no_quick_car_does():
    census = _census().census
    longtail = census("longtail", worlds=32, seed=0)
    quick = census("quick", worlds=32, seed=0)
    assert longtail["cars"] == 128 and quick["cars"] == 128
    assert 0.2 <= longtail["shares"]["any long-tail feature"] <= 0.6
    assert longtail["shares"]["blocking obstacle"] >= 0.15
    assert longtail["shares"]["goal in another lane"] >= 0.02
    assert quick["shares"]["blocking obstacle"] <= 0.02 and quick["shares"]["goal in another lane"] == 0.0


def test_goal_lane_change_puts_goals_one_lane_over_and_off_moves_none():
    base = load_config("quick").with_overrides(num_worlds=32, init={"goal_distance": (30.0, 60.0)})
    census = _census()
    for p, lo, hi in ((1.0, 0.15, 1.0), (0.0, 0.0, 0.0)):
        cfg = base.with_overrides(init={"goal_lane_change": p})
        e = Engine(cfg)
        e.reset(np.arange(32), list(range(32)))
        valid = np.asarray(e.valid).astype(bool)
        share = census._goal_lanes(e, cfg, cfg.slots_per_world, valid)[valid].mean()
        assert lo <= share <= hi, (p, share)
        if p > 0:  # each moved goal stands on a lane centre (one lane width from where it was)
            from terrazero_env.engine import road_map

            goals = np.stack([np.asarray(e.agents)["goal_x"], np.asarray(e.agents)["goal_y"]], -1)[
                (np.asarray(e.agents)["role"] == CONTROLLED) & (np.asarray(e.agents)["alive"] == 1)]
            q = road_map("grid_town").lanes.query(goals)
            assert (q["distance"] < 0.05).mean() > 0.95
