"""Structural properties every shipped and freshly generated town must have (issue: foundation, point 8).

These checks are written against the built ``MapData`` only, independently of how the generator
works: lane-graph reachability, successor continuity, travel direction against handedness, and stop
lines tied to lanes that enter an intersection.
"""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env.maps import Handedness, asset_path, build, bundled_maps, load, procedural
from terrazero_env.maps.analysis import handedness_votes, lane_graph_report, successor_gaps
from terrazero_env.maps.sources import load_spec, regenerate

GENERATED = {
    "grid_rht_1lane": lambda: procedural.grid_town(seed=11, lanes_per_direction=1),
    "grid_rht_2lane": lambda: procedural.grid_town(seed=12, lanes_per_direction=2),
    "grid_lht_3lane": lambda: procedural.grid_town(seed=13, lanes_per_direction=3, handedness=Handedness.LEFT),
    "grid_lht_1lane_no_t": lambda: procedural.grid_town(seed=14, lanes_per_direction=1, rows=2, cols=2,
                                                         t_junctions=False, handedness=Handedness.LEFT),
    "roundabout_rht": lambda: procedural.roundabout(seed=15),
    "roundabout_lht_2lane": lambda: procedural.roundabout(seed=16, lanes_per_direction=2, handedness=Handedness.LEFT),
    "highway_rht": lambda: procedural.highway(seed=17),
    "highway_lht_2lane": lambda: procedural.highway(seed=18, lanes_per_direction=2, handedness=Handedness.LEFT),
}

_cache: dict[str, object] = {}


def get_map(key: str):
    if key not in _cache:
        _cache[key] = load(asset_path(key[len("shipped:"):])) if key.startswith("shipped:") else build(GENERATED[key]())
    return _cache[key]


ALL = [f"shipped:{n}" for n in bundled_maps()] + sorted(GENERATED)


def test_at_least_four_maps_are_shipped():
    assert len(bundled_maps()) >= 4
    for name in bundled_maps():
        assert asset_path(name).stat().st_size < 2 * 1024 * 1024, name


@pytest.mark.parametrize("key", ALL)
def test_every_lane_is_reachable_and_reaches_another_lane(key):
    rep = lane_graph_report(get_map(key))
    assert rep["no_predecessor"].size == 0, f"lanes nothing flows into: {rep['no_predecessor'][:10]}"
    assert rep["no_successor"].size == 0, f"dead-end lanes: {rep['no_successor'][:10]}"


@pytest.mark.parametrize("key", ALL)
def test_successors_are_continuous_within_half_a_metre(key):
    gaps = successor_gaps(get_map(key))
    assert gaps.size > 0 and gaps.max() <= 0.5


@pytest.mark.parametrize("key", ALL)
def test_travel_direction_is_consistent_with_handedness(key):
    m = get_map(key)
    votes = handedness_votes(m)
    keep = "left" if m.handedness == Handedness.RIGHT else "right"
    wrong = "right" if keep == "left" else "left"
    # Opposing traffic on the keep side of lanes on two-way roads, and never on the other side.
    assert votes[keep] > 0, votes
    assert votes[wrong] == 0 and votes["both"] == 0, votes


@pytest.mark.parametrize("key", ALL)
def test_stop_lines_are_tied_to_lanes_that_enter_an_intersection(key):
    m = get_map(key)
    sl = m.stop_lines
    for i in range(len(sl)):
        lanes = sl.lanes.row(i)
        assert lanes.size > 0, f"stop line {i} controls no lane"
        for lane in lanes:
            succ = m.lanes.successors.row(int(lane))
            assert lane >= 0 and m.lanes.intersection[lane] < 0, f"stop line {i}: lane {lane} is inside a junction"
            assert (m.lanes.intersection[succ] >= 0).any(), f"stop line {i}: lane {lane} does not enter a junction"
        assert sl.intersection[i] >= 0
        # The bar lies across the end of each lane it controls.
        cl = m.lanes.centerline
        ends = cl.values[cl.offsets[lanes + 1] - 1, :2]
        a, b = sl.points[i, 0, :2], sl.points[i, 1, :2]
        t = np.clip(((ends - a) @ (b - a)) / ((b - a) @ (b - a)), 0, 1)
        assert np.linalg.norm(a + t[:, None] * (b - a) - ends, axis=1).max() < 1.0


@pytest.mark.parametrize("key", ALL)
def test_signals_and_stop_signs_point_at_controlled_stop_lines(key):
    m = get_map(key)
    assert set(m.signals.stop_line.tolist()).isdisjoint(m.stop_signs.stop_line.tolist())
    for k in range(len(m.signals)):
        governed = m.signals.lanes.row(k)
        assert governed.size > 0, f"signal {k} governs no lane"
        assert (m.lanes.movement[governed] == m.signals.movement[k]).all()


@pytest.mark.parametrize("name", bundled_maps())
def test_shipped_maps_are_up_to_date_with_their_specs(tmp_path, name):
    """Regenerating from the YAML specs reproduces the shipped files byte for byte."""
    spec = asset_path(name).with_suffix(".yaml")
    assert spec.is_file(), f"no spec for {name}"
    from terrazero_env.maps import save

    out = save(build(load_spec(spec)), tmp_path / f"{name}.tzb")
    assert out.read_bytes() == asset_path(name).read_bytes()


def test_regenerate_writes_every_spec(tmp_path):
    written = regenerate(tmp_path)
    assert sorted(p.stem for p in written) == bundled_maps()
