"""The engine's per-episode metrics (``Engine.episode_metrics``, cyext/metrics.pxd): time to collision
against analytic values and a sampled oracle, the at-fault rule on constructed rear-end, side-swipe
and head-on collisions, and the reset of the buffer with the world."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import straight_road

from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig
from terrazero_env.evaluation.metrics import EPISODE_METRICS

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
COL = {name: i for i, name in enumerate(core.EPISODE_METRIC_NAMES)}


def test_episode_metric_columns_are_the_engine_vocabulary() -> None:
    """The torch-free metrics module names the engine's columns in the engine's order."""
    assert EPISODE_METRICS == core.EPISODE_METRIC_NAMES


def test_ttc_equals_the_analytic_value_for_boxes_on_a_collision_course() -> None:
    """Head-on: gap 30 - 4 = 26 m closed at 15 m/s. Crossing: the x projections overlap for
    t in [1.7, 2.3] s and the y projections for [1.2, 1.8] s, so contact starts at 1.7 s."""
    a = np.array([[0.0, 0.0, 0.0, 4.0, 2.0, 10.0, 0.0],
                  [0.0, 0.0, 0.0, 4.0, 2.0, 10.0, 0.0],
                  [0.0, 0.0, 0.0, 4.0, 2.0, 10.0, 0.0]])
    b = np.array([[30.0, 0.0, np.pi, 4.0, 2.0, -5.0, 0.0],
                  [20.0, -15.0, np.pi / 2, 4.0, 2.0, 0.0, 10.0],
                  [0.0, 10.0, 0.0, 4.0, 2.0, 10.0, 0.0]])       # parallel, never meets
    got = core.box_ttc_batch(a, b, 5.0)
    assert got[0] == pytest.approx(26.0 / 15.0, abs=1e-12)
    assert got[1] == pytest.approx(1.7, abs=1e-12)
    assert got[2] == np.inf
    assert core.box_ttc_batch(a[:1], b[:1], 1.0)[0] == np.inf       # beyond the horizon


def test_ttc_matches_the_first_overlapping_time_of_a_fine_sampling() -> None:
    """On random moving box pairs, TTC equals the first time on a 1 ms grid at which the
    separating-axis test (checked against shapely elsewhere) reports overlap, within one step."""
    rng = np.random.default_rng(3)
    n, horizon, dt = 60, 3.0, 1e-3
    a = np.column_stack([rng.uniform(-15, 15, (n, 2)), rng.uniform(-np.pi, np.pi, n), rng.uniform(2, 6, n),
                         rng.uniform(1, 2.5, n), rng.uniform(-12, 12, (n, 2))])
    b = np.column_stack([rng.uniform(-15, 15, (n, 2)), rng.uniform(-np.pi, np.pi, n), rng.uniform(2, 6, n),
                         rng.uniform(1, 2.5, n), rng.uniform(-12, 12, (n, 2))])
    ttc = core.box_ttc_batch(a, b, horizon)
    t = np.arange(0.0, horizon + dt / 2, dt)
    hits = 0
    for i in range(n):
        pa = np.column_stack([a[i, 0] + a[i, 5] * t, a[i, 1] + a[i, 6] * t, np.tile(a[i, 2:5], (t.size, 1))])
        pb = np.column_stack([b[i, 0] + b[i, 5] * t, b[i, 1] + b[i, 6] * t, np.tile(b[i, 2:5], (t.size, 1))])
        over = core.obb_overlap_batch(pa, pb)
        if over.any():
            hits += 1
            assert ttc[i] == pytest.approx(t[np.argmax(over)], abs=dt)
        else:
            assert ttc[i] == np.inf or ttc[i] > horizon - dt
    assert hits >= 5, "the random cases should include collision courses"


def _engine(**over):
    cfg = EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=4, consequences=NONE,
                       init=InitConfig(num_agents=(1, 2), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(**over) if over else cfg, maps=build_road())


def build_road():
    from terrazero_env.maps import build

    return build(straight_road())


def _hold(e):
    vals = e.action_values(AgentType.CAR)
    return int(np.nonzero((vals == 0).all(axis=1))[0][0])


def _run_until_contact(e, agents, steps=40):
    e.set_scene(0, agents)
    hold = _hold(e)
    for _ in range(steps):
        e.step(np.full(2, hold, np.int32))
        m = e.episode_metrics
        if (m[:, COL["collisions"]] > 0).any():
            break
    rows = {int(e.slot_agent[r]): e.episode_metrics[r].copy() for r in range(2) if e.slot_agent[r] >= 0}
    return rows


CAR = {"cls": AgentType.CAR, "length": 4.5, "width": 2.0, "kin": (1, 1, 1, 1)}


def test_rear_ended_while_stopped_is_not_at_fault_and_the_follower_is() -> None:
    """A stopped car hit from behind: one collision each; only the moving follower is at fault."""
    rows = _run_until_contact(_engine(), [{**CAR, "x": 60.0, "y": -1.75, "heading": 0.0, "speed": 0.0},
                                          {**CAR, "x": 45.0, "y": -1.75, "heading": 0.0, "speed": 12.0}])
    assert rows[0][COL["collisions"]] == 1 and rows[1][COL["collisions"]] == 1
    assert rows[0][COL["at_fault_collisions"]] == 0
    assert rows[1][COL["at_fault_collisions"]] == 1
    assert rows[1][COL["max_impact_speed"]] == pytest.approx(12.0, rel=1e-5)


def test_rear_ended_while_moving_slowly_is_not_at_fault() -> None:
    """A slow leader (geometry: the other car is behind it) is not at fault; the follower is."""
    rows = _run_until_contact(_engine(), [{**CAR, "x": 60.0, "y": -1.75, "heading": 0.0, "speed": 2.0},
                                          {**CAR, "x": 45.0, "y": -1.75, "heading": 0.0, "speed": 14.0}])
    assert rows[0][COL["collisions"]] == 1
    assert rows[0][COL["at_fault_collisions"]] == 0
    assert rows[1][COL["at_fault_collisions"]] == 1


def test_side_swipe_faults_the_car_that_drifted_across() -> None:
    """Two cars side by side at the same speed; the one heading 0.15 rad into the other lane closes
    the gap across the road and is at fault, the one holding its lane is not."""
    rows = _run_until_contact(_engine(), [{**CAR, "x": 50.0, "y": -1.75, "heading": 0.15, "speed": 10.0},
                                          {**CAR, "x": 50.5, "y": 1.75, "heading": 0.0, "speed": 10.0}])
    assert rows[0][COL["collisions"]] == 1 and rows[1][COL["collisions"]] == 1
    assert rows[0][COL["at_fault_collisions"]] == 1
    assert rows[1][COL["at_fault_collisions"]] == 0


def test_head_on_faults_both_cars() -> None:
    """Two cars meeting front to front in one lane are both at fault."""
    rows = _run_until_contact(_engine(), [{**CAR, "x": 40.0, "y": -1.75, "heading": 0.0, "speed": 10.0},
                                          {**CAR, "x": 70.0, "y": -1.75, "heading": np.pi, "speed": 8.0}])
    assert rows[0][COL["at_fault_collisions"]] == 1
    assert rows[1][COL["at_fault_collisions"]] == 1
    assert rows[0][COL["max_impact_speed"]] == pytest.approx(18.0, rel=1e-5)


def test_collision_type_kernel_names_the_nuplan_cases() -> None:
    """The kernel behind the engine's rule, on single pairs (x, y, heading, length, width, speed)."""
    t = core.COLLISION_TYPES
    a = np.array([[0, 0, 0, 4.5, 2, 0.0], [0, 0, 0, 4.5, 2, 5.0], [0, 0, 0, 4.5, 2, 5.0], [0, 0, 0, 4.5, 2, 5.0]])
    b = np.array([[-4, 0, 0, 4.5, 2, 8.0], [4, 0, 0, 4.5, 2, 0.0], [-4, 0, 0, 4.5, 2, 9.0], [0, 2, -1.3, 4.5, 2, 6.0]])
    assert [t[k] for k in core.collision_type_batch(a, b)] == ["STOPPED_EGO", "STOPPED_OTHER", "REAR", "SIDE_HIT"]


def test_ttc_and_gap_are_recorded_for_an_approach_and_reset_with_the_world() -> None:
    """A car closing on a stopped one 25 m ahead at 10 m/s: the minimum TTC is at most the first
    step's analytic value and the gap shrinks; a reset zeroes the row."""
    e = _engine()
    e.set_scene(0, [{**CAR, "x": 30.0, "y": -1.75, "heading": 0.0, "speed": 10.0},
                    {**CAR, "x": 55.0, "y": -1.75, "heading": 0.0, "speed": 0.0, "controlled": False}])
    hold = _hold(e)
    for _ in range(5):
        e.step(np.full(2, hold, np.int32))
    r = int(np.nonzero(e.slot_agent == 0)[0][0])
    row = e.episode_metrics[r]
    # after 5 steps the front gap is 25 - 4.5 - 5 = 15.5 m at 10 m/s
    assert row[COL["min_ttc"]] == pytest.approx(1.55, abs=1e-4)
    assert row[COL["min_gap"]] == pytest.approx(15.5, abs=1e-4)
    assert row[COL["min_lead_headway"]] == pytest.approx(1.55, abs=1e-4)
    assert row[COL["steps"]] == 5
    assert row[COL["distance"]] == pytest.approx(5.0, abs=1e-4)
    e.reset([0], [1])
    assert not e.episode_metrics.any()
