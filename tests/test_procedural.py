"""Procedural generators (grid towns, roundabouts, highways) and the map renderer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imread

from terrazero_env.maps import ControlType, Handedness, Lanes, MapData, build, procedural
from terrazero_env.maps.render import render_map

#: Small versions of each kind, to keep the tests fast.
SMALL = {"grid": {"rows": 2, "cols": 2}, "roundabout": {}, "highway": {"length": 400.0}}


def _arrays(m: MapData) -> list[np.ndarray]:
    """Every array of a raw generated map."""
    lanes = m.lanes
    out = [lanes.centerline.values, lanes.centerline.offsets, lanes.successors.values, lanes.successors.offsets,
           lanes.predecessors.values, lanes.left_neighbor, lanes.right_neighbor, lanes.width, lanes.speed_limit,
           m.road_lines.geometry.values, m.road_lines.line_type, m.road_edges.values, m.road_edges.offsets,
           m.sidewalks.values, m.crosswalks.values, m.stop_lines.points, m.stop_lines.lanes.values,
           m.signals.stop_line, m.signals.movement, m.signals.position, m.stop_signs.position,
           m.stop_signs.stop_line]
    assert m.intersections is not None
    return out + [m.intersections.lanes.values, m.intersections.lanes.offsets]


def _ends(m: MapData) -> tuple[np.ndarray, np.ndarray]:
    cl = m.lanes.centerline
    return cl.values[cl.offsets[:-1], :2], cl.values[cl.offsets[1:] - 1, :2]


def _headings(m: MapData) -> tuple[np.ndarray, np.ndarray]:
    """Heading (rad) at the start and at the end of every lane."""
    cl = m.lanes.centerline
    v = cl.values[:, :2]
    d0 = v[cl.offsets[:-1] + 1] - v[cl.offsets[:-1]]
    d1 = v[cl.offsets[1:] - 1] - v[cl.offsets[1:] - 2]
    return np.arctan2(d0[:, 1], d0[:, 0]), np.arctan2(d1[:, 1], d1[:, 0])


# determinism and parameters -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", procedural.KINDS)
def test_same_seed_gives_identical_arrays(kind):
    a = procedural.generate(kind, 5, **SMALL[kind])
    b = procedural.generate(kind, 5, **SMALL[kind])
    for x, y in zip(_arrays(a), _arrays(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.name == b.name and a.metadata == b.metadata
    assert a.metadata["generator"] == kind and a.metadata["seed"] == 5
    assert json.loads(json.dumps(a.metadata)) == a.metadata


@pytest.mark.parametrize("kind", procedural.KINDS)
def test_metadata_params_regenerate_the_map(kind):
    a = procedural.generate(kind, 9, handedness="left", **SMALL[kind])
    assert a.handedness == Handedness.LEFT and a.metadata["params"]["handedness"] == "LEFT"
    b = procedural.generate(a.metadata["generator"], a.metadata["seed"], **a.metadata["params"])
    for x, y in zip(_arrays(a), _arrays(b), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kind", procedural.KINDS)
def test_different_seeds_give_different_maps(kind):
    a = procedural.generate(kind, 1, **SMALL[kind]).lanes.centerline.values
    b = procedural.generate(kind, 2, **SMALL[kind]).lanes.centerline.values
    assert a.shape != b.shape or not np.allclose(a, b)


def test_generate_dispatches_and_rejects_bad_input():
    assert procedural.KINDS == ("grid", "roundabout", "highway")
    assert procedural.generate("grid", 3, rows=1, cols=2).name == "grid_1x2_s3"
    with pytest.raises(ValueError, match="unknown procedural map kind"):
        procedural.generate("volcano")
    with pytest.raises(ValueError, match="lanes_per_direction"):
        procedural.grid_town(lanes_per_direction=4)
    with pytest.raises(ValueError, match="too short"):
        procedural.grid_town(block_length=30.0)
    with pytest.raises(ValueError, match="island"):
        procedural.roundabout(radius=5.0)
    with pytest.raises(ValueError, match="length"):
        procedural.highway(length=100.0)
    with pytest.raises(ValueError, match="handedness"):
        procedural.roundabout(handedness="middle")


@pytest.mark.parametrize("lanes", (1, 2, 3))
@pytest.mark.parametrize("kind", procedural.KINDS)
@pytest.mark.parametrize("hand", list(Handedness))
def test_lane_graph_and_geometry_are_sound(kind, lanes, hand):
    m = procedural.generate(kind, 0, lanes_per_direction=lanes, handedness=hand)
    assert m.handedness == hand and m.name
    assert m.metadata["params"]["lanes_per_direction"] == lanes
    cl = m.lanes.centerline
    assert np.isfinite(cl.values).all() and (cl.values[:, 2] == 0).all()
    rid = cl.row_ids()
    seg = np.linalg.norm(np.diff(cl.values[:, :2], axis=0), axis=1)[rid[1:] == rid[:-1]]
    assert seg.min() > 1e-3 and seg.max() <= 2.0
    # Predecessors are the exact inverse of successors, and every lane has both.
    succ, pred = m.lanes.successors, m.lanes.predecessors
    edges = set(zip(succ.row_ids().tolist(), succ.values.tolist(), strict=True))
    assert edges == set(zip(pred.values.tolist(), pred.row_ids().tolist(), strict=True))
    assert (succ.lengths() > 0).all() and (pred.lengths() > 0).all()
    start, end = _ends(m)
    src, dst = np.array(sorted(edges)).T
    np.testing.assert_array_equal(end[src], start[dst])
    # Neighbours are mutual.
    for a, b in ((m.lanes.left_neighbor, m.lanes.right_neighbor), (m.lanes.right_neighbor, m.lanes.left_neighbor)):
        has = np.nonzero(a >= 0)[0]
        np.testing.assert_array_equal(b[a[has]], has)
    assert m.intersections is not None
    counts = np.bincount(m.intersections.lanes.values, minlength=len(m.lanes))
    assert counts.max() <= 1
    built = build(m)
    assert len(built.lanes) == len(m.lanes)


def test_default_grid_is_detailed_but_modest():
    m = procedural.grid_town()
    assert m.name == "grid_3x3_s0"
    assert 5_000 <= m.counts()["lane_points"] <= 30_000
    assert len(m.sidewalks) and len(m.crosswalks) and len(m.road_edges) and len(m.road_lines)


@pytest.mark.parametrize("kind", procedural.KINDS)
def test_left_hand_traffic_is_the_mirror_image(kind):
    rht = procedural.generate(kind, 4, **SMALL[kind])
    lht = procedural.generate(kind, 4, handedness=Handedness.LEFT, **SMALL[kind])
    np.testing.assert_array_equal(lht.lanes.centerline.values, rht.lanes.centerline.values * [1, -1, 1])
    np.testing.assert_array_equal(lht.lanes.left_neighbor, rht.lanes.right_neighbor)


# cross sections -------------------------------------------------------------------------------------


def _cross_section(m: MapData, lane: int, reach: float) -> tuple[np.ndarray, np.ndarray]:
    """Lateral offsets (m, positive to the left) and direction cosines of the lanes crossing the normal
    through the middle of ``lane`` within ``reach`` metres of it, sorted by offset."""
    cl = m.lanes.centerline
    row = cl.row(lane)[:, :2]
    mid = row[row.shape[0] // 2]
    t = row[row.shape[0] // 2 + 1] - mid
    t /= np.linalg.norm(t)
    d = cl.values[:, :2] - mid
    along, lateral = d @ t, d @ np.array([-t[1], t[0]])
    near = (np.abs(along) <= 0.5) & (np.abs(lateral) < reach)
    ids = np.unique(cl.row_ids()[near])
    lat, cos = [], []
    for i in ids:
        pts = cl.row(int(i))[:, :2]
        k = int(np.argmin(np.abs((pts - mid) @ t)))
        k = min(k, pts.shape[0] - 2)
        lat.append(float(lateral[cl.offsets[i] + k]))
        step = pts[k + 1] - pts[k]
        cos.append(float(step @ t / np.linalg.norm(step)))
    order = np.argsort(lat)
    return np.asarray(lat)[order], np.asarray(cos)[order]


@pytest.mark.parametrize("lanes", (1, 2, 3))
@pytest.mark.parametrize("hand", list(Handedness))
def test_grid_straight_road_has_the_requested_lanes(lanes, hand):
    width = 3.2
    m = procedural.grid_town(3, lanes_per_direction=lanes, lane_width=width, handedness=hand)
    np.testing.assert_allclose(m.lanes.width, width)
    h0, h1 = _headings(m)
    start, end = _ends(m)
    straight = np.abs(np.angle(np.exp(1j * (h1 - h0)))) < 1e-6
    straight[m.intersections.lanes.values] = False
    length = np.linalg.norm(end - start, axis=1)
    lane = int(np.argmax(np.where(straight, length, 0.0)))
    lat, cos = _cross_section(m, lane, reach=2 * lanes * width)
    assert lat.size == 2 * lanes
    np.testing.assert_allclose(np.diff(lat), width, atol=1e-6)
    same, opposite = cos > 0.99, cos < -0.99
    assert same.sum() == lanes and opposite.sum() == lanes
    # Opposite traffic keeps to the other side of the centre line.
    if hand == Handedness.RIGHT:
        assert lat[opposite].min() > lat[same].max()
    else:
        assert lat[opposite].max() < lat[same].min()
    chain, k = [lane], lane
    while m.lanes.left_neighbor[k] >= 0:
        k = int(m.lanes.left_neighbor[k])
        chain.append(k)
    k = lane
    while m.lanes.right_neighbor[k] >= 0:
        k = int(m.lanes.right_neighbor[k])
        chain.append(k)
    assert len(chain) == lanes


# roundabout -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("hand", list(Handedness))
def test_roundabout_circulates_with_the_island_on_the_inside(hand):
    radius = 22.0
    m = procedural.roundabout(2, legs=4, radius=radius, handedness=hand)
    r = np.linalg.norm(m.lanes.centerline.values[:, :2], axis=1)
    all_on = np.ones(len(m.lanes), bool)
    np.logical_and.at(all_on, m.lanes.centerline.row_ids(), np.abs(r - radius) < 0.5)
    ring = np.nonzero(all_on)[0]
    assert ring.size == 8  # four legs split the one-lane ring into eight arcs
    points, lane = [], int(ring[0])
    for _ in range(ring.size):
        points.append(m.lanes.centerline.row(lane)[:-1, :2])
        lane = next(int(s) for s in m.lanes.successors.row(lane) if s in ring)
    assert lane == ring[0]
    xy = np.concatenate(points)
    area = 0.5 * np.sum(xy[:, 0] * np.roll(xy[:, 1], -1) - np.roll(xy[:, 0], -1) * xy[:, 1])
    assert abs(abs(area) - np.pi * radius**2) < 0.01 * np.pi * radius**2
    assert (area > 0) == (hand == Handedness.RIGHT)
    assert m.intersections is not None and set(ring) <= set(m.intersections.lanes.values.tolist())
    assert len(m.stop_lines) == 4 and len(m.signals) == 0 and len(m.stop_signs) == 0


def test_roundabout_entry_radius_and_turnaround_radius_set_its_tightest_bends():
    """The entry and exit lanes turn concentric with the entry fillets (radius plus half a lane) and
    the turnaround loops run half a lane outside their island, both bends of a loop equally tight:
    the tightest radius of every turning lane follows the two settings (the bundled roundabout's
    15 m and 16 m with 5 m lanes), and the defaults give the map as before."""
    from terrazero_env.maps.bends import lane_bends

    base = procedural.roundabout(0)
    assert "entry_radius" not in base.metadata["params"]
    wide = procedural.roundabout(0, lane_width=5.0, entry_radius=15.0, turnaround_radius=16.0)
    assert wide.metadata["params"]["entry_radius"] == 15.0 and wide.metadata["params"]["turnaround_radius"] == 16.0
    for m, (entry, loop) in ((base, (6.0 + 1.75, 9.0 + 1.75)), (wide, (15.0 + 2.5, 16.0 + 2.5))):
        built = build(m)
        r = lane_bends(built)[:, 0]
        turning = np.sort(r[r < 50.0])
        inter = set(built.intersections.lanes.values.tolist())
        connectors = [i for i in range(len(r)) if r[i] < 50.0 and i in inter and r[i] < 0.9 * 25.0]
        loops = [i for i in range(len(r)) if r[i] < 50.0 and i not in inter]
        assert len(connectors) == 8 and len(loops) == 4, (connectors, loops)
        np.testing.assert_allclose(r[connectors], entry, rtol=0.02)
        np.testing.assert_allclose(r[loops], loop, rtol=0.02)
        assert turning[0] == pytest.approx(min(entry, loop), rel=0.02)


@pytest.mark.parametrize("name, value", [("entry_radius", 0.5), ("entry_radius", float("nan")),
                                         ("turnaround_radius", 1e6), ("turnaround_radius", True),
                                         ("turnaround_radius", "16")])
def test_roundabout_rejects_bad_bend_radii(name, value):
    with pytest.raises(ValueError, match=name):
        procedural.roundabout(0, **{name: value})


# highway --------------------------------------------------------------------------------------------


def _signed_radii(pts: np.ndarray) -> np.ndarray:
    """Signed radius (m, + left) of the circle through every three consecutive points."""
    a, b, c = pts[:-2, :2], pts[1:-1, :2], pts[2:, :2]
    cross = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    abc = np.linalg.norm(b - a, axis=1) * np.linalg.norm(c - b, axis=1) * np.linalg.norm(c - a, axis=1)
    with np.errstate(divide="ignore"):
        return abc / (2.0 * cross)


def test_highway_loop_flare_sets_the_swing_out_before_each_turnaround():
    """A turnaround loop first bends away from its turn (the balloon's flare), then around: that first
    bend's radius is the flare (carriageway plus ``loop_flare``) less the lane's offset from the axis,
    so a larger ``loop_flare`` makes it gentler (the bundled highway's 20 m: a 12-13 m bus had run
    onto the median's nose through the tighter S); the loop itself is unchanged."""
    n, w, m = 3, 3.5, 2.0
    for flare in (9.0, 20.0):
        hw = procedural.highway(0, lanes_per_direction=n, loop_flare=flare)
        cl = hw.lanes.centerline
        h0, h1 = _headings(hw)
        loops = np.flatnonzero(np.abs(np.angle(np.exp(1j * (h1 - h0)))) > 3.0)  # lanes that end heading back
        assert len(loops) == 2 * n
        for i in loops:
            r = _signed_radii(cl.row(i))
            turn = np.sign(np.nanmedian(r[np.abs(r) < 30.0]))
            away = np.abs(r[(np.sign(r) == -turn) & (np.abs(r) < 200.0)])
            # lane k of a loop (innermost first) lies m + (k + 0.5) w off the axis
            expected = sorted(m + n * w + flare - (m + (k + 0.5) * w) for k in range(n))
            assert any(abs(away.min() - e) < 0.03 * e for e in expected), (i, away.min(), expected)
            around = np.abs(r[np.sign(r) == turn]).min()
            assert any(abs(around - (10.0 + m + (k + 0.5) * w)) < 0.3 for k in range(n)), (i, around)
    with pytest.raises(ValueError, match="loop_flare"):
        procedural.highway(0, loop_flare=0.0)
    assert "loop_flare" not in procedural.highway(0).metadata["params"]


@pytest.mark.parametrize("lanes", (1, 3))
@pytest.mark.parametrize("hand", list(Handedness))
def test_highway_on_ramp_merges_into_the_outermost_lane(lanes, hand):
    m = procedural.highway(4, lanes_per_direction=lanes, handedness=hand)
    outer_side = m.lanes.right_neighbor if hand == Handedness.RIGHT else m.lanes.left_neighbor
    inner_side = m.lanes.left_neighbor if hand == Handedness.RIGHT else m.lanes.right_neighbor
    merges = np.nonzero(m.lanes.predecessors.lengths() >= 2)[0]
    assert merges.size == 1
    merged = int(merges[0])
    assert outer_side[merged] == -1 and (lanes == 1 or inner_side[merged] >= 0)
    # The acceleration lane runs on the outer side of the lane that continues into the merged lane.
    beside = [int(p) for p in m.lanes.predecessors.row(merged) if outer_side[p] >= 0]
    assert len(beside) == 1
    accel = int(outer_side[beside[0]])
    assert inner_side[accel] == beside[0]
    # Walking back from the acceleration lane leads to where the ramp left the outermost lane.
    lane = accel
    for _ in range(10):
        lane = int(m.lanes.predecessors.row(lane)[0])
        if m.lanes.successors.lengths()[lane] == 2:
            break
    assert m.lanes.successors.lengths()[lane] == 2 and outer_side[lane] == -1
    assert np.nanmax(m.lanes.speed_limit) == pytest.approx(29.0)


# traffic control ------------------------------------------------------------------------------------


def _legs(m: MapData, lanes: np.ndarray) -> int:
    """Number of approach directions among the lanes entering a junction's ``lanes``."""
    entering = np.unique(np.concatenate([m.lanes.predecessors.row(int(i)) for i in lanes]))
    entering = entering[m.lanes.intersection[entering] < 0]
    h = np.sort(_headings(m)[1][entering])
    gaps = np.diff(np.concatenate([h, h[:1] + 2 * np.pi]))
    return int((gaps > 0.5).sum())


@pytest.mark.parametrize("t_junctions", (True, False))
def test_stop_signs_at_t_junctions_and_signals_at_four_way_junctions(t_junctions):
    m = build(procedural.grid_town(7, t_junctions=t_junctions))
    legs = np.array([_legs(m, m.intersections.lanes.row(k)) for k in range(len(m.intersections))])
    assert set(legs.tolist()) <= {3, 4} and (legs == 4).any()
    assert (legs == 3).any() == t_junctions
    sl = m.stop_lines
    for k in range(len(m.intersections)):
        controls = sl.control[sl.intersection == k]
        if legs[k] == 4:
            assert controls.tolist() == [ControlType.SIGNAL] * 4
        else:
            assert controls.tolist() == [ControlType.STOP_SIGN]
    assert (legs[m.signals.intersection] == 4).all()
    assert (legs[sl.intersection[m.stop_signs.stop_line]] == 3).all()
    assert len(m.crosswalks) == 4 * int((legs == 4).sum())
    # One head per (stop line, movement), each governing lanes of its movement.
    pairs = set(zip(m.signals.stop_line.tolist(), m.signals.movement.tolist(), strict=True))
    assert len(pairs) == len(m.signals) == 3 * 4 * int((legs == 4).sum())
    for k in range(len(m.signals)):
        governed = m.signals.lanes.row(k)
        assert governed.size and (m.lanes.movement[governed] == m.signals.movement[k]).all()


# rendering ------------------------------------------------------------------------------------------


def test_render_writes_a_non_trivial_png(tmp_path):
    m = procedural.grid_town(1, rows=2, cols=2)
    path = tmp_path / "grid.png"
    fig = render_map(m, path, signal_states=np.arange(len(m.signals)) % 3, dpi=60)
    assert isinstance(fig, Figure)
    img = imread(path)
    assert img.ndim == 3 and min(img.shape[:2]) > 200
    colours = np.unique(img[..., :3].reshape(-1, 3).round(2), axis=0)
    assert colours.shape[0] > 20 and img[..., :3].std() > 0.05


def test_render_into_given_axes_and_empty_sections(tmp_path):
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    assert render_map(procedural.roundabout(0), ax=ax, title="ring") is fig
    assert ax.get_title() == "ring"
    bare = MapData(lanes=Lanes.create([np.array([[0.0, 0.0], [30.0, 0.0]])]), name="bare")
    path = tmp_path / "bare.png"
    render_map(bare, path, dpi=40)
    assert imread(path).shape[0] > 10
    with pytest.raises(ValueError, match="signal_states"):
        render_map(bare, signal_states=np.zeros(3))


@pytest.mark.parametrize("name", ["grid_town", "grid_town_lht", "roundabout", "highway", "roundabout 2 lanes lht"])
def test_a_car_following_any_lane_stays_off_the_curbs(name):
    """A 5.2 x 2.1 m car (the largest of the car class) centred on every lane's centreline, heading
    along it, touches no road edge or sidewalk (shapely as the oracle), on the bundled procedural maps
    and a two-lane left-hand roundabout. The towns' right turns and the roundabout's entries and exits
    once ran in one curve from the stop or yield line that cut the corner over the curb."""
    pytest.importorskip("shapely")
    from shapely.geometry import LineString, Polygon
    from shapely.strtree import STRtree

    from terrazero_env.maps.sources import load_built

    if name == "roundabout 2 lanes lht":
        m = build(procedural.roundabout(seed=3, lanes_per_direction=2, handedness="left"))
    else:
        m = load_built(name)
    curbs = [LineString(r[:, :2]) for rows in (m.road_edges, m.sidewalks) for r in rows.rows() if len(r) >= 2]
    tree = STRtree(curbs)
    half = np.array([[2.6, 1.05], [-2.6, 1.05], [-2.6, -1.05], [2.6, -1.05]])
    touching = []
    cl = m.lanes.centerline
    for i in range(cl.offsets.shape[0] - 1):
        pts = cl.row(i)[:, :2]
        seg = np.diff(pts, axis=0)
        for p, (dx, dy) in zip(pts[:-1] + 0.5 * seg, seg, strict=True):
            c, s = np.array([dx, dy]) / np.hypot(dx, dy)
            box = Polygon(p + half @ np.array([[c, s], [-s, c]]))
            if any(curbs[j].intersects(box) for j in tree.query(box)):
                touching.append((i, int(m.lanes.movement[i])))
                break
    assert not touching, f"lanes (id, movement) a car cannot follow on the road: {touching}"
