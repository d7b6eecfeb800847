"""The engine's geometry kernels and spatial index, checked against shapely."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from shapely import affinity
from shapely.geometry import LineString, MultiLineString, Point, Polygon, box

from terrazero_env import engine as core


def _random_boxes(rng, n, spread=6.0):
    return np.column_stack([
        rng.uniform(-spread, spread, n), rng.uniform(-spread, spread, n), rng.uniform(-np.pi, np.pi, n),
        rng.uniform(0.5, 8.0, n), rng.uniform(0.3, 3.0, n),
    ])


def _shapely_boxes(boxes):
    """Boxes built independently of the engine: an axis-aligned rectangle rotated and moved by shapely."""
    return np.array([
        affinity.translate(affinity.rotate(box(-l / 2, -w / 2, l / 2, w / 2), h, origin=(0, 0), use_radians=True), x, y)
        for x, y, h, l, w in boxes
    ])


def test_box_corners_have_the_right_area_and_orientation():
    rng = np.random.default_rng(0)
    boxes = _random_boxes(rng, 200)
    corners = core.box_corners_batch(boxes)
    for b, c in zip(boxes, corners):
        poly = Polygon(c)
        assert poly.is_valid and poly.exterior.is_ccw
        assert poly.area == pytest.approx(b[3] * b[4], rel=1e-9)
        assert poly.centroid.distance(Point(b[0], b[1])) < 1e-9
    assert all(Polygon(c).equals_exact(s, 1e-9) or Polygon(c).normalize().equals_exact(s.normalize(), 1e-9)
               for c, s in zip(corners, _shapely_boxes(boxes)))
    # heading 0: first corner is front-right
    np.testing.assert_allclose(core.box_corners_batch(np.array([[0, 0, 0, 4, 2.0]]))[0, 0], [2, -1])


def test_sat_matches_shapely_on_random_boxes():
    rng = np.random.default_rng(1)
    a, b = _random_boxes(rng, 3000), _random_boxes(rng, 3000)
    got = core.obb_overlap_batch(a, b)
    want = shapely.intersects(_shapely_boxes(a), _shapely_boxes(b))
    assert got.dtype == bool
    np.testing.assert_array_equal(got, want)
    assert 0.1 < got.mean() < 0.9  # the sample exercises both outcomes


def test_sat_touching_boxes_count_as_overlap():
    a = np.array([[0, 0, 0, 2, 2.0]])
    assert core.obb_overlap_batch(a, np.array([[2, 0, 0, 2, 2.0]]))[0]
    assert not core.obb_overlap_batch(a, np.array([[2.001, 0, 0, 2, 2.0]]))[0]


def test_segment_intersection_matches_shapely():
    rng = np.random.default_rng(2)
    a = rng.uniform(-5, 5, (3000, 4))
    b = rng.uniform(-5, 5, (3000, 4))
    # Include collinear and end-point-touching cases.
    b[:100] = a[:100] * 0.5 + np.roll(a[:100], 1, axis=1) * 0.0
    b[100:200, :2] = a[100:200, 2:]
    got = core.segments_intersect_batch(a, b)
    want = shapely.intersects(shapely.linestrings(a.reshape(-1, 2, 2)), shapely.linestrings(b.reshape(-1, 2, 2)))
    np.testing.assert_array_equal(got, want)


def test_points_in_polygon_match_shapely():
    rng = np.random.default_rng(3)
    ang = np.sort(rng.uniform(0, 2 * np.pi, 24))
    rad = rng.uniform(3, 10, 24)
    ring = np.column_stack([rad * np.cos(ang), rad * np.sin(ang)])  # a star-shaped, non-convex polygon
    poly = Polygon(ring)
    pts = rng.uniform(-11, 11, (5000, 2))
    far = shapely.distance(poly.exterior, shapely.points(pts)) > 1e-6  # boundary is convention-dependent
    got = core.points_in_polygon(pts, ring)
    want = shapely.contains_xy(poly, pts[:, 0], pts[:, 1])
    np.testing.assert_array_equal(got[far], want[far])


def test_bad_shapes_are_reported():
    with pytest.raises(ValueError, match=r"\[N, 5\]"):
        core.obb_overlap_batch(np.zeros((3, 5)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="at least 3 points"):
        core.points_in_polygon(np.zeros((1, 2)), np.zeros((2, 2)))


def _random_polylines(rng, n, k=8, extent=200.0):
    rows = []
    for _ in range(n):
        start = rng.uniform(-extent, extent, 2)
        steps = rng.normal(0, 6, (k - 1, 2)) + rng.normal(0, 4, 2)
        rows.append(np.vstack([start, start + np.cumsum(steps, axis=0)]))
    return rows


@pytest.mark.parametrize("cell_size", [2.0, 10.0, 37.0])
def test_segment_grid_nearest_matches_shapely(cell_size):
    rng = np.random.default_rng(4)
    rows = _random_polylines(rng, 60)
    values = np.vstack([np.column_stack([r, np.zeros(len(r))]) for r in rows])
    offsets = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    grid = core.SegmentGrid(values, offsets, cell_size)
    lines = [LineString(r) for r in rows]
    pts = rng.uniform(-260, 260, (1500, 2))
    q = grid.query(pts, max_dist=1e4)
    want = shapely.distance(MultiLineString(rows), shapely.points(pts))
    np.testing.assert_allclose(q["distance"], want, atol=1e-9)
    for i in range(0, len(pts), 7):
        line = lines[q["row"][i]]
        p = Point(pts[i])
        assert line.distance(p) == pytest.approx(want[i], abs=1e-9)
        # The arc length points at a nearest point of that polyline.
        assert line.interpolate(q["s"][i]).distance(p) == pytest.approx(want[i], abs=1e-6)
        # Lateral offset: |lateral| equals the distance when the foot of the perpendicular is interior.
        assert abs(q["lateral"][i]) <= want[i] + 1e-9


def test_segment_grid_max_dist_and_lateral_sign():
    values = np.array([[0, 0, 0], [100, 0, 0.0]])
    grid = core.SegmentGrid(values, np.array([0, 2], np.int64), 10.0)
    q = grid.query(np.array([[50, 3.0], [50, -2.0], [50, 40.0]]), max_dist=30.0)
    assert q["row"].tolist() == [0, 0, -1]
    np.testing.assert_allclose(q["lateral"][:2], [3.0, -2.0])  # + is left of the travel direction
    np.testing.assert_allclose(q["s"][:2], [50.0, 50.0])
    assert np.isinf(q["distance"][2])


def test_segment_grid_elevation_gate_ignores_overpasses():
    # A lane at z = 0 along x, and an overpass at z = 7 along y, crossing above the origin.
    values = np.array([[-50, 0, 0], [50, 0, 0], [0.5, -50, 7], [0.5, 50, 7.0]])
    grid = core.SegmentGrid(values, np.array([0, 2, 4], np.int64), 10.0)
    on_bridge = grid.query(np.array([[0.0, 0.2, 7.0]]))
    on_ground = grid.query(np.array([[0.0, 0.2, 0.0]]))
    no_gate = grid.query(np.array([[0.45, 3.0, 0.0]]), z_gate=-1.0)
    assert on_bridge["row"][0] == 1 and on_ground["row"][0] == 0 and no_gate["row"][0] == 1


def test_segment_grid_rejects_non_finite_points():
    grid = core.SegmentGrid(np.array([[0, 0, 0], [1, 0, 0.0]]), np.array([0, 2], np.int64))
    with pytest.raises(ValueError, match="non-finite"):
        grid.query(np.array([[np.nan, 0.0]]))


def test_map_side_nearest_segments_match_the_engine_segment_grid():
    """maps.analysis.nearest_segments (NumPy, no engine) finds the same polyline and heading as the
    engine's SegmentGrid on random polylines and query points."""
    from terrazero_env.maps.analysis import nearest_segments

    rng = np.random.default_rng(3)
    lengths = rng.integers(2, 8, 40)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    starts = rng.uniform(0, 200, (40, 2))
    values = np.concatenate([s + np.cumsum(rng.normal(0, 6, (n, 2)), axis=0) for s, n in zip(starts, lengths)])
    values = np.column_stack([values, np.zeros(len(values))])
    pts = rng.uniform(-10, 210, (3000, 2))
    q = core.SegmentGrid(values, offsets, 10.0).query(pts, max_dist=4.0, z_gate=-1.0)
    row, heading = nearest_segments(values, offsets, pts, max_dist=4.0)
    assert (row >= 0).sum() > 300
    np.testing.assert_array_equal(row, q["row"])
    hit = row >= 0
    np.testing.assert_allclose(heading[hit], q["heading"][hit])
