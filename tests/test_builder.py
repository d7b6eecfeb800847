"""The builder: each kind of invalid input gets an error naming the element, and every derived
field of a hand-made junction matches what can be worked out by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import tiny_junction

from terrazero_env.maps import (
    BuildConfig,
    ControlType,
    LaneType,
    MapValidationError,
    Movement,
    Ragged,
    Signals,
    StopSigns,
    build,
)
from terrazero_env.maps.builder import infer_intersections
from terrazero_env.maps.jsonmap import from_dict, to_dict


def _with_lane_points(m, lane, pts):
    rows = m.lanes.centerline.rows()
    rows[lane] = np.asarray(pts, float)
    return m.replace(lanes=replace(m.lanes, centerline=Ragged.from_rows(rows, np.float64, (3,))))


def _set(m, part, **kw):
    return m.replace(**{part: replace(getattr(m, part), **kw)})


def _succ(m, rows):
    return _set(m, "lanes", successors=Ragged.from_rows(rows, np.int32))


INVALID = {
    "non_finite_coordinate": (
        lambda m: _with_lane_points(m, 2, [[0, 0, 0], [np.nan, 1, 0]]),
        r"lanes\.centerline\[2\]: point 1 is not finite",
    ),
    "single_point_polyline": (
        lambda m: _with_lane_points(m, 5, [[1, 2, 0]]),
        r"lanes\.centerline\[5\]: a polyline needs at least 2 points, got 1",
    ),
    "zero_length_segment": (
        lambda m: _with_lane_points(m, 3, [[0, 0, 0], [5, 0, 0], [5, 0, 0], [9, 0, 0]]),
        r"lanes\.centerline\[3\]: zero-length segment between points 1 and 2",
    ),
    "successor_out_of_range": (
        lambda m: _succ(m, [[99]] + [list(r) for r in m.lanes.successors.rows()[1:]]),
        r"lanes\.successors\[0\]: lane id 99 is out of range \(there are 24\)",
    ),
    "neighbor_out_of_range": (
        lambda m: _set(m, "lanes", left_neighbor=np.r_[np.full(23, -1), 40].astype(np.int32)),
        r"lanes\.left_neighbor: reference 40 at entry 23 is out of range",
    ),
    "discontinuous_successor": (
        lambda m: _succ(m, [[6]] + [list(r) for r in m.lanes.successors.rows()[1:]]),
        r"lanes\[0\]\.successors: lane 6 starts [0-9.]+ m from this lane's end \(tolerance 0\.5 m\)",
    ),
    "stop_line_tied_to_no_lane": (
        lambda m: _set(m, "stop_lines", points=np.concatenate([m.stop_lines.points[:3], [[[500, 500, 0], [503, 500, 0]]]]),
                       lanes=Ragged.from_rows([[0], [1], [2], []], np.int32)),
        r"stop_lines\[3\]: tied to no lane",
    ),
    "tracks_length_mismatch": (
        lambda m: m.replace(tracks=replace(m.tracks, valid=m.tracks.valid[:, :3])),
        r"tracks\.valid: shape \(2, 3\) does not match tracks\.state \(2, 5\)",
    ),
    "non_positive_width": (
        lambda m: _set(m, "lanes", width=np.r_[np.full(7, 3.5), -1.0, np.full(16, 3.5)].astype(np.float32)),
        r"lanes\[7\]\.width: must be a positive finite number",
    ),
    "unknown_lane_type": (
        lambda m: _set(m, "lanes", lane_type=np.r_[np.zeros(4), 9, np.zeros(19)].astype(np.uint8)),
        r"lanes\.lane_type\[4\]: 9 is not a valid LaneType",
    ),
    "signal_on_missing_stop_line": (
        lambda m: m.replace(signals=Signals.create([0, 12], [1, 1], np.zeros((2, 3)))),
        r"signals\.stop_line: reference 12 at entry 1 is out of range",
    ),
    "crosswalk_with_two_points": (
        lambda m: m.replace(crosswalks=Ragged.from_rows([[[0, 0, 0], [1, 0, 0]]], np.float64, (3,))),
        r"crosswalks\[0\]: a polygon needs at least 3 points, got 2",
    ),
    "signal_and_stop_sign_on_one_line": (
        lambda m: m.replace(stop_signs=StopSigns.create(np.zeros((1, 3)), [0])),
        r"stop_lines\[0\]: controlled by both a signal and a stop sign",
    ),
    "lane_in_two_intersections": (
        lambda m: m.replace(intersections=replace(m.intersections, lanes=Ragged.from_rows([[8, 9], [9, 10]], np.int32))),
        r"intersections: lane 9 is listed in more than one intersection",
    ),
    "bad_offsets": (
        lambda m: m.replace(crosswalks=Ragged(np.zeros((4, 3)), np.array([0, 6], np.int64))),
        r"crosswalks: offsets end at 6 but there are 4 values",
    ),
    "non_finite_track_state": (
        lambda m: m.replace(tracks=replace(m.tracks, state=np.where(np.arange(6) == 3, np.inf, m.tracks.state))),
        r"tracks\[0\]: state at step 0 is valid but not finite",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_input_is_rejected_with_a_named_error(case):
    corrupt, message = INVALID[case]
    bad = corrupt(tiny_junction(tracks=True))
    with pytest.raises(MapValidationError, match=message):
        build(bad)


def test_valid_fixture_builds():
    m = build(tiny_junction(tracks=True))
    assert len(m.lanes) == 24 and len(m.intersections) == 1 and m.tracks.state.shape == (2, 5, 6)


def test_json_errors_name_the_element():
    d = to_dict(tiny_junction())
    d["lanes"][3]["type"] = "hovercraft"
    with pytest.raises(MapValidationError, match=r"lanes\[3\]\.type: 'hovercraft' is not a valid LaneType"):
        from_dict(d)
    d = to_dict(tiny_junction())
    del d["lanes"][1]["centerline"]
    with pytest.raises(MapValidationError, match=r"lanes\[1\]: missing required key 'centerline'"):
        from_dict(d)
    d = to_dict(tiny_junction())
    d["signals"][0]["movement"] = "sideways"
    with pytest.raises(MapValidationError, match=r"signals\[0\]\.movement"):
        from_dict(d)


def test_json_round_trip_builds_to_the_same_map():
    m = tiny_junction(tracks=True)
    again = from_dict(json.loads(json.dumps(to_dict(m))))
    a, b = build(m), build(again)
    np.testing.assert_array_equal(a.lanes.centerline.values, b.lanes.centerline.values)
    np.testing.assert_array_equal(a.lanes.movement, b.lanes.movement)
    np.testing.assert_array_equal(a.tracks.state, b.tracks.state)


def test_predecessors_are_the_inverse_of_successors():
    m = build(tiny_junction())
    succ_edges = {(int(a), int(b)) for a, b in zip(m.lanes.successors.row_ids(), m.lanes.successors.values)}
    pred_edges = {(int(b), int(a)) for a, b in zip(m.lanes.predecessors.row_ids(), m.lanes.predecessors.values)}
    assert succ_edges == pred_edges and len(succ_edges) == 12 + 4 + 12 + 4
    # Lane 8 (first connector from incoming lane 0) has exactly lane 0 as predecessor.
    assert m.lanes.predecessors.row(8).tolist() == [0]


def test_turn_movements_of_connectors():
    m = build(tiny_junction())
    # Connectors come in (right, straight, left) triples per incoming lane.
    expected = [Movement.RIGHT, Movement.STRAIGHT, Movement.LEFT] * 4
    assert m.lanes.movement[8:20].tolist() == [int(e) for e in expected]
    assert (m.lanes.movement[:8] == Movement.NONE).all() and (m.lanes.movement[20:] == Movement.NONE).all()
    bits = (1 << Movement.LEFT) | (1 << Movement.STRAIGHT) | (1 << Movement.RIGHT)
    assert (m.lanes.allowed_movements[:4] == bits).all()


def test_intersections_inferred_from_topology_match_the_given_ones():
    given = build(tiny_junction())
    inferred = build(tiny_junction(with_intersections=False))
    assert len(inferred.intersections) == 1
    assert sorted(inferred.intersections.lanes.row(0).tolist()) == sorted(given.intersections.lanes.row(0).tolist())
    np.testing.assert_array_equal(inferred.lanes.intersection, given.lanes.intersection)


def test_infer_intersections_finds_none_on_a_plain_road():
    from terrazero_env.maps import Lanes

    lanes = Lanes.create([[[0, 0], [10, 0]], [[10, 0], [20, 0]]], successors=[[1], []])
    assert len(infer_intersections(lanes)) == 0


def test_stop_lines_are_tied_to_the_lanes_ending_on_them():
    m = build(tiny_junction(tie_stop_lines=False))
    assert [m.stop_lines.lanes.row(i).tolist() for i in range(4)] == [[0], [1], [2], [3]]
    assert m.lanes.stop_line[:4].tolist() == [0, 1, 2, 3] and (m.lanes.stop_line[4:] == -1).all()
    assert m.stop_lines.intersection.tolist() == [0, 0, 0, 0]
    assert m.stop_lines.control.tolist() == [ControlType.SIGNAL, ControlType.STOP_SIGN] * 2


def test_signals_govern_the_connectors_of_their_movement():
    m = build(tiny_junction())
    # Signal 0 is the LEFT head of stop line 0 (incoming lane 0): its connector is lane 10.
    assert m.signals.lanes.row(0).tolist() == [10]
    assert m.signals.lanes.row(1).tolist() == [9]
    assert m.signals.lanes.row(2).tolist() == [8]
    assert (m.signals.intersection == 0).all()


def test_default_speed_limits_per_lane_type():
    m = tiny_junction()
    types = np.zeros(len(m.lanes), np.uint8)
    types[0], types[1] = LaneType.BIKE, LaneType.BUS
    limits = np.full(len(m.lanes), np.nan, np.float32)
    limits[2] = 8.0
    m = m.replace(lanes=replace(m.lanes, lane_type=types, speed_limit=limits))
    cfg = BuildConfig(default_speed_limit_vehicle=11.0, default_speed_limit_bike=5.0, default_speed_limit_bus=9.0)
    out = build(m, cfg).lanes.speed_limit
    assert out[0] == 5.0 and out[1] == 9.0 and out[2] == 8.0 and out[3] == 11.0


def test_build_is_idempotent():
    once = build(tiny_junction())
    twice = build(once)
    for name in ("successors", "predecessors"):
        np.testing.assert_array_equal(getattr(once.lanes, name).values, getattr(twice.lanes, name).values)
    np.testing.assert_array_equal(once.lanes.intersection, twice.lanes.intersection)
    np.testing.assert_array_equal(once.stop_lines.lanes.values, twice.stop_lines.lanes.values)


@pytest.mark.parametrize("field,value", [("successor_tolerance", -1.0), ("min_segment_length", float("nan")),
                                          ("stop_line_tie_distance", 0.0)])
def test_bad_build_config_values_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"BuildConfig.{field}"):
        BuildConfig(**{field: value})
