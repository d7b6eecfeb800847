"""The ScenarioNet importer, on scenario files constructed from the format's documentation (no real
Waymo or nuPlan data ships here)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from terrazero_env.maps import ControlType, Handedness, MapValidationError, build, load_source
from terrazero_env.maps.convert.scenarionet import from_scenario


def _line(a, b, n=11):
    return np.linspace(a, b, n)


def _arc(x, s, side):
    """A U-turn half circle at x joining the lane at y = -1.75 s to the one at y = +1.75 s (side: +1
    bulges east, -1 west)."""
    a = np.linspace(-np.pi / 2, np.pi / 2, 13) if side > 0 else np.linspace(np.pi / 2, 3 * np.pi / 2, 13)
    pts = np.column_stack([x + 1.75 * np.cos(a), 1.75 * np.sin(a), np.zeros(13)])
    if side < 0:
        pts = pts[::-1] if s > 0 else pts
    elif s < 0:
        pts = pts[::-1]
    pts[:, 1] *= 1 if side > 0 else -1
    return pts


def scenario(mirror: bool = False) -> dict:
    """A 100 m two-way road (right-hand traffic unless mirrored), lanes split at x = 50, a stop sign
    and a signal at the east end, a crosswalk and two logged agents."""
    s = -1.0 if mirror else 1.0
    f = {
        "e1": {"type": "LANE_SURFACE_STREET", "polyline": _line([0, -1.75 * s, 0], [50, -1.75 * s, 0]),
               "exit_lanes": ["e2"], "speed_limit_mph": 25, "left_neighbor": []},
        "e2": {"type": "LANE_SURFACE_STREET", "polyline": _line([50, -1.75 * s, 0], [100, -1.75 * s, 0]),
               "entry_lanes": ["e1"], "exit_lanes": ["u_east"]},
        "u_east": {"type": "LANE_SURFACE_STREET", "polyline": _arc(100, s, +1), "exit_lanes": ["w1"]},
        "u_west": {"type": "LANE_SURFACE_STREET", "polyline": _arc(0, s, -1), "exit_lanes": ["e1"]},
        "w1": {"type": "LANE_SURFACE_STREET", "polyline": _line([100, 1.75 * s, 0], [50, 1.75 * s, 0]),
               "exit_lanes": ["w2"]},
        "w2": {"type": "LANE_BIKE_LANE", "polyline": _line([50, 1.75 * s, 0], [0, 1.75 * s, 0]),
               "exit_lanes": [{"feature_id": "u_west"}]},
        "c": {"type": "ROAD_LINE_SOLID_DOUBLE_YELLOW", "polyline": _line([0, 0, 0], [100, 0, 0])},
        "r": {"type": "ROAD_EDGE_BOUNDARY", "polyline": _line([0, -3.5, 0], [100, -3.5, 0])},
        "l": {"type": "ROAD_EDGE_BOUNDARY", "polyline": _line([0, 3.5, 0], [100, 3.5, 0])},
        "x": {"type": "CROSSWALK", "polygon": [[60, -3.5, 0], [63, -3.5, 0], [63, 3.5, 0], [60, 3.5, 0]]},
        "s": {"type": "STOP_SIGN", "position": [50, -4 * s, 0], "lane": ["e1"]},
    }
    T = 20
    pos = np.zeros((T, 3))
    pos[:, 0] = np.linspace(5, 24, T)
    pos[:, 1] = -1.75 * s
    tracks = {
        "car": {"type": "VEHICLE", "state": {"position": pos, "heading": np.zeros(T), "velocity": np.tile([10.0, 0], (T, 1)),
                                             "valid": np.ones(T, bool), "length": 4.6, "width": 1.9, "height": 1.5}},
        "ped": {"type": "PEDESTRIAN", "state": {"position": pos + [0, 6 * s, 0], "heading": np.zeros(T),
                                                "velocity": np.zeros((T, 2)), "valid": np.r_[np.zeros(5), np.ones(15)].astype(bool),
                                                "length": np.full(T, 0.5), "width": np.full(T, 0.5), "height": np.full(T, 1.8)}},
    }
    return {"id": "demo", "length": T, "map_features": f, "tracks": tracks,
            "dynamic_map_states": {"tl": {"type": "TRAFFIC_LIGHT", "lane": "e2", "stop_point": [100, -1.75 * s, 0],
                                          "state": {"object_state": ["LANE_STATE_GO"] * T}}},
            "metadata": {"ts": np.arange(T) * 0.1, "dataset": "constructed", "scenario_id": "demo"}}


def test_scenario_converts_builds_and_keeps_its_elements(tmp_path):
    p = tmp_path / "demo.pkl"
    p.write_bytes(pickle.dumps(scenario()))
    m = build(load_source(p, trust_pickle=True))  # a pickle: read only on the caller's word
    assert len(m.lanes) == 6 and m.handedness == Handedness.RIGHT
    assert m.lanes.successors.row(0).tolist() == [1] and m.lanes.lane_type[5] == 1  # bike lane
    assert m.lanes.speed_limit[0] == pytest.approx(25 * 0.44704, rel=1e-6)
    assert len(m.road_lines) == 1 and len(m.road_edges) == 2 and len(m.crosswalks) == 1
    # The signal's stop line (at the end of e2) comes first, then the stop sign's (end of e1).
    assert m.stop_lines.control.tolist() == [ControlType.SIGNAL, ControlType.STOP_SIGN]
    assert m.stop_lines.lanes.row(0).tolist() == [1] and m.stop_lines.lanes.row(1).tolist() == [0]
    t = m.tracks
    assert t.state.shape == (2, 20, 6) and t.dt == pytest.approx(0.1)
    np.testing.assert_allclose(t.size[0], [4.6, 1.9, 1.5], rtol=1e-6)
    assert t.valid[1].sum() == 15 and t.agent_type.tolist() == [0, 3]


def test_left_hand_traffic_is_inferred():
    assert from_scenario(scenario(mirror=True)).handedness == Handedness.LEFT
    assert from_scenario(scenario(mirror=True), handedness="right").handedness == Handedness.RIGHT


def test_log_initialization_from_an_imported_scenario():
    from terrazero_env import engine as core
    from terrazero_env.config import EngineConfig, InitConfig, InitMode

    m = build(from_scenario(scenario()))
    e = core.Engine(EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=4,
                                    init=InitConfig(mode=InitMode.LOG, num_agents=(1, 4))), maps=m)
    e.reset()
    s = e.agent_states(0)
    assert s["x"].tolist() == [pytest.approx(5.0)] and s["goal_x"][0] == pytest.approx(24.0)


@pytest.mark.parametrize("corrupt,message", [
    (lambda sc: sc.pop("map_features"), "not a ScenarioNet scenario"),
    (lambda sc: sc["map_features"]["e1"].update(polyline=[[0, 0, 0]]), r"map_features\['e1'\].polyline"),
    (lambda sc: sc["map_features"]["e1"].update(exit_lanes=["nope"]), r"exit_lanes: unknown lane ids \['nope'\]"),
    (lambda sc: sc["tracks"]["car"]["state"].update(position=np.zeros((7, 3))), r"tracks\['car'\].state.position: 7 steps"),
])
def test_malformed_scenarios_are_named(corrupt, message):
    sc = scenario()
    corrupt(sc)
    with pytest.raises(MapValidationError, match=message):
        from_scenario(sc)


def test_a_file_that_is_not_a_pickle(tmp_path):
    p = tmp_path / "x.pkl"
    p.write_bytes(b"not a pickle at all")
    with pytest.raises(MapValidationError, match="not a readable ScenarioNet pickle"):
        load_source(p, trust_pickle=True)
