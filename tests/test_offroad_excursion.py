"""How far a box reaches beyond the drivable area (``rules.offroad_excursion``, the
``max_offroad_excursion`` episode metric), the off-road tolerance that defers the off-road event
(``EngineConfig.offroad_tolerance``), the at-fault collisions with static objects
(``at_fault_object_collisions``), and nuPlan's tolerances in the closed-loop score: drivable-area
compliance up to 0.3 m, 0.5 for a single at-fault collision with a static object."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import straight_road
from shapely.geometry import Point, Polygon, box

from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig, StaticKind
from terrazero_env.evaluation.metrics import EPISODE_METRICS, closed_loop_metrics
from terrazero_env.maps import Intersections, Lanes, MapData, Polygons, Polylines, build

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
COL = {name: i for i, name in enumerate(core.EPISODE_METRIC_NAMES)}
CAR = {"cls": AgentType.CAR, "length": 4.5, "width": 2.0, "kin": (1, 1, 1, 1)}
EDGE = 3.5          # straight_road's edges lie at y = +-3.5 m


def _corners(b: np.ndarray) -> np.ndarray:
    """The four corners [4, 2] of a (cx, cy, heading, length, width) box."""
    c, s = math.cos(b[2]), math.sin(b[2])
    hl, hw = 0.5 * b[3], 0.5 * b[4]
    return np.array([[b[0] + sx * hl * c - sy * hw * s, b[1] + sx * hl * s + sy * hw * c]
                     for sx, sy in ((1, 1), (1, -1), (-1, -1), (-1, 1))])


def _oracle(drivable, boxes: np.ndarray) -> np.ndarray:
    """Largest shapely distance from a corner outside the drivable polygon to the polygon."""
    return np.array([max(drivable.distance(Point(p)) for p in _corners(b)) for b in boxes])


def _random_boxes(rng: np.random.Generator, n: int, x: tuple[float, float], y: tuple[float, float]) -> np.ndarray:
    return np.column_stack([rng.uniform(*x, n), rng.uniform(*y, n), rng.uniform(-np.pi, np.pi, n),
                            rng.uniform(3.5, 5.5, n), rng.uniform(1.6, 2.2, n)])


def _road_with_sidewalks() -> MapData:
    """straight_road with a sidewalk along its south curb (y in [-6.5, -3.5], beyond the edge) and a
    pedestrian island on the carriageway (x in [100, 106], y in [-0.5, 0.5], no edge around it)."""
    m = straight_road()
    walks = [np.array([[20.0, -6.5], [180.0, -6.5], [180.0, -3.5], [20.0, -3.5]]),
             np.array([[100.0, -0.5], [106.0, -0.5], [106.0, 0.5], [100.0, 0.5]])]
    return m.replace(sidewalks=Polygons(walks))


def _ring_road(r_in: float = 26.5, r_out: float = 33.5, n: int = 72) -> MapData:
    """A one-way ring road: two half-circle lanes of radius 30 m (counter-clockwise), closed circular
    edges of ``n`` vertices at ``r_in`` and ``r_out``."""
    def arc(r, a0, a1, k):
        t = np.linspace(a0, a1, k)
        return np.column_stack([r * np.cos(t), r * np.sin(t)])

    lanes = Lanes.create([arc(30.0, 0.0, np.pi, 37), arc(30.0, np.pi, 2 * np.pi, 37)], width=3.5,
                         successors=[[1], [0]])
    circle = np.linspace(0.0, 2 * np.pi, n + 1)
    edges = [np.column_stack([r * np.cos(circle), r * np.sin(circle)]) for r in (r_in, r_out)]
    for e in edges:
        e[-1] = e[0]
    return MapData(lanes=lanes, road_edges=Polylines(edges), intersections=Intersections.create([]), name="ring")


def _ring_polygon(m: MapData) -> Polygon:
    inner, outer = (r[:, :2] for r in m.road_edges.rows())
    return Polygon(outer, [inner])


# ------------------------------------------------------------------------------ the kernel


def test_excursion_of_boxes_by_a_straight_edge_is_the_hand_computed_overhang() -> None:
    """A 4.5 x 2 m box along the road with its side 0.1 m past the south edge; the same box turned
    by 0.3 rad, whose rear right corner reaches 2 + 2.25 sin 0.3 + cos 0.3 - 3.5 m past it; one
    centred 0.5 m beyond the edge (its outer side 1.5 m out, measured from the lane, not the centre);
    and one inside the road, touching nothing."""
    road = core.RoadMap(build(straight_road()))
    boxes = np.array([[50.0, -2.6, 0.0, 4.5, 2.0], [50.0, -2.0, 0.3, 4.5, 2.0], [50.0, -4.0, 0.0, 4.5, 2.0],
                      [50.0, -1.75, 0.0, 4.5, 2.0]])
    got = core.footprint_offroad_excursion(road, boxes)
    turned = 2.0 + 2.25 * math.sin(0.3) + math.cos(0.3) - EDGE
    assert got == pytest.approx([0.1, turned, 1.5, 0.0], abs=1e-9)
    assert core.footprint_offroad(road, boxes).tolist() == [True, True, True, False]


def test_excursion_matches_shapely_on_random_boxes_across_curved_edges() -> None:
    """On a ring road bounded by two closed 72-gon edges, every box that touches an edge reaches as
    far beyond the annulus as shapely's distance from its outside corners says (those on the
    inner island included); boxes that touch nothing read 0."""
    m = _ring_road()
    road = core.RoadMap(build(m))
    rng = np.random.default_rng(11)
    r = rng.uniform(24.0, 36.0, 600)
    t = rng.uniform(0, 2 * np.pi, 600)
    boxes = np.column_stack([r * np.cos(t), r * np.sin(t), rng.uniform(-np.pi, np.pi, 600),
                             rng.uniform(3.5, 5.5, 600), rng.uniform(1.6, 2.2, 600)])
    touch = core.footprint_offroad(road, boxes)
    got = core.footprint_offroad_excursion(road, boxes)
    assert touch.sum() > 300 and (~touch).sum() > 20, "the sample should hold both cases"
    want = _oracle(_ring_polygon(m), boxes[touch])
    np.testing.assert_allclose(got[touch], want, atol=1e-9)
    assert (got[~touch] == 0).all()
    assert (want > 0.5).sum() > 50, "the sample should include boxes well past an edge"


def test_excursion_matches_shapely_with_a_sidewalk_beyond_the_curb_and_an_island() -> None:
    """A corner on the sidewalk beyond the curb is as far out as its distance to the curb; a corner on
    a pedestrian island inside the road (bounded by no edge) as far as its distance to the island's
    outline: both are shapely's distance to the road strip less the sidewalks."""
    m = _road_with_sidewalks()
    road = core.RoadMap(build(m))
    rng = np.random.default_rng(5)
    boxes = np.concatenate([_random_boxes(rng, 300, (30.0, 170.0), (-6.0, -1.0)),
                            _random_boxes(rng, 300, (97.0, 109.0), (-2.5, 2.5))])
    touch = core.footprint_offroad(road, boxes)
    got = core.footprint_offroad_excursion(road, boxes)
    walks = [Polygon(w[:, :2]) for w in m.sidewalks.rows()]
    drivable = box(-20.0, -EDGE, 220.0, EDGE).difference(walks[0]).difference(walks[1])
    np.testing.assert_allclose(got[touch], _oracle(drivable, boxes[touch]), atol=1e-9)
    island = np.array([walks[1].contains(Point(p)) for b in boxes[touch] for p in _corners(b)])
    assert island.sum() > 20, "the sample should put corners on the island"


@pytest.mark.parametrize("map_name", ["grid_town", "roundabout"])
def test_excursion_matches_shapely_on_a_bundled_town(map_name: str) -> None:
    """On a bundled town whose road edges are closed rings, boxes scattered up to 4.5 m either side of
    the lane centrelines reach as far beyond the drivable area as shapely says, the area being what
    an odd number of edge rings encloses, less the sidewalks."""
    road = core.road_map(map_name)
    m = road.map_data
    rings = [Polygon(r[:, :2]).buffer(0) for r in m.road_edges.rows()]
    region = rings[0]
    for ring in rings[1:]:
        region = region.symmetric_difference(ring)
    for w in m.sidewalks.rows():
        region = region.difference(Polygon(w[:, :2]).buffer(0))
    rng = np.random.default_rng(2)
    lines = [r[:, :2] for r in m.lanes.centerline.rows()]
    boxes = []
    for k in rng.integers(0, len(lines), 1200):
        xy = lines[k]
        j = rng.integers(0, len(xy) - 1)
        d = xy[j + 1] - xy[j]
        L = float(np.hypot(*d))
        if L == 0:
            continue
        p = xy[j] + rng.uniform() * d + np.array([-d[1], d[0]]) / L * rng.uniform(-4.5, 4.5)
        boxes.append([p[0], p[1], math.atan2(d[1], d[0]) + rng.normal(0, 0.3), rng.uniform(3.8, 5.2),
                      rng.uniform(1.7, 2.1)])
    boxes = np.array(boxes)
    touch = core.footprint_offroad(road, boxes)
    got = core.footprint_offroad_excursion(road, boxes)
    assert touch.sum() > 200
    np.testing.assert_allclose(got[touch], _oracle(region, boxes[touch]), atol=1e-9)


def test_excursion_of_a_bad_batch_is_refused_with_its_shape() -> None:
    road = core.RoadMap(build(straight_road()))
    with pytest.raises(ValueError, match=r"\[N, 5\]"):
        core.footprint_offroad_excursion(road, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="reach"):
        core.footprint_offroad_excursion(road, np.zeros((1, 5)), reach=-1.0)


# ------------------------------------------------------------------------------ the engine


def _engine(**over) -> core.Engine:
    cfg = EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=4, consequences=NONE,
                       init=InitConfig(num_agents=(1, 2), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(**over), maps=build(straight_road()))


def _hold(e: core.Engine) -> int:
    vals = e.action_values(AgentType.CAR)
    return int(np.nonzero((vals == 0).all(axis=1))[0][0])


def _standing(e: core.Engine, y: float, heading: float = 0.0, steps: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A standing car at (60, y) held for ``steps`` steps: its metric row and event counters."""
    e.set_scene(0, [{**CAR, "x": 60.0, "y": y, "heading": heading, "speed": 0.0, "goal": (150.0, -1.75)}])
    hold = _hold(e)
    for _ in range(steps):
        e.step(np.full(2, hold, np.int32))
    r = int(np.nonzero(e.slot_agent == 0)[0][0])
    return e.episode_metrics[r].copy(), e.counters[r].copy()


@pytest.mark.parametrize(("y", "heading"), [(-2.7, 0.0), (-2.2, 0.25)])
def test_engine_reports_the_episode_excursion_of_a_car_past_the_edge(y: float, heading: float) -> None:
    """A car standing with a corner past the south edge: the episode metric is the corner's
    overhang (by hand: 0.2 m, and 2.2 + 2.25 sin 0.25 + cos 0.25 - 3.5 m turned), every judged step is
    off-road under the paper's rule, and shapely agrees on the overhang."""
    row, cnt = _standing(_engine(), y, heading)
    want = -y + 2.25 * math.sin(heading) + math.cos(heading) - EDGE
    oracle = _oracle(box(-20.0, -EDGE, 220.0, EDGE), np.array([[60.0, y, heading, 4.5, 2.0]]))[0]
    assert want == pytest.approx(oracle, abs=1e-12)
    assert row[COL["max_offroad_excursion"]] == pytest.approx(want, abs=1e-5)
    assert row[COL["offroad_steps"]] == 3
    assert cnt[list(core.COUNTER_NAMES).index("offroad")] == 3


def test_a_car_inside_the_road_has_no_excursion() -> None:
    row, cnt = _standing(_engine(), -1.75)
    assert row[COL["max_offroad_excursion"]] == 0.0 and row[COL["offroad_steps"]] == 0
    assert cnt[list(core.COUNTER_NAMES).index("offroad")] == 0


@pytest.mark.parametrize(("tolerance", "offroad"), [(0.0, True), (0.1, True), (0.19, True), (0.21, False),
                                                     (0.3, False), (2.0, False)])
def test_offroad_tolerance_switches_the_event_at_the_excursion(tolerance: float, offroad: bool) -> None:
    """A car 0.2 m past the edge is off-road (counter, episode metric, agent flag) exactly when the
    tolerance is below 0.2 m; its excursion is measured either way."""
    e = _engine(offroad_tolerance=tolerance)
    row, cnt = _standing(e, -2.7)
    assert row[COL["max_offroad_excursion"]] == pytest.approx(0.2, abs=1e-5)
    assert bool(cnt[list(core.COUNTER_NAMES).index("offroad")] > 0) is offroad
    assert bool(row[COL["offroad_steps"]] > 0) is offroad
    assert bool(e.agents[0, 0]["offroad"]) is offroad


def test_offroad_tolerance_defers_the_removal_of_a_car_drifting_out() -> None:
    """With the default consequence (removal), a car drifting towards the curb at 0.5 m/s sideways is
    removed at its first touch under the paper's rule, and only once a corner is more than 0.3 m out
    with a 0.3 m tolerance; its recorded excursion is then the first one beyond 0.3 m (at most one
    step's drift, 0.05 m, more)."""
    def run(tolerance: float) -> tuple[int, float]:
        cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=2, offroad_tolerance=tolerance,
                           init=InitConfig(num_agents=(1, 1), randomize_kinematics=False))
        e = core.Engine(cfg, maps=build(straight_road()))
        heading = -math.asin(0.5 / 8.0)     # 8 m/s, 0.5 m/s towards the south curb
        e.set_scene(0, [{**CAR, "x": 40.0, "y": -2.4, "heading": heading, "speed": 8.0, "goal": (190.0, -1.75)}])
        hold = _hold(e)
        for t in range(1, 60):
            e.step(np.full(1, hold, np.int32))
            if e.terminated[0]:
                return t, float(e.episode_metrics[0, COL["max_offroad_excursion"]])
        raise AssertionError("the car never left the road")

    t0, x0 = run(0.0)
    t3, x3 = run(0.3)
    assert t3 > t0
    assert 0.0 <= x0 < 0.1
    assert 0.3 < x3 <= 0.3 + 0.5 * 0.1 + 1e-4


# ----------------------------------------------------------------- collisions with static objects


@pytest.mark.parametrize(("kind", "cls", "size", "objects"), [
    (StaticKind.CONE, AgentType.CAR, (0.4, 0.4), 1),
    (StaticKind.DEBRIS, AgentType.CAR, (0.8, 0.6), 1),
    (StaticKind.PARKED, AgentType.CAR, (4.5, 2.0), 0),
    (StaticKind.WORKER, AgentType.PEDESTRIAN, (0.5, 0.5), 0),
])
def test_driving_into_a_static_actor_is_at_fault_and_counted_by_partner_class(kind, cls, size, objects) -> None:
    """A car driving at 8 m/s into a standing actor in its lane: one at-fault collision; it counts as
    one with a static object for a cone or debris, and as one with a vehicle or a pedestrian for a
    parked car or a construction worker (nuPlan's classes), which gives the score's multiplier 0.5 or 0."""
    e = _engine()
    e.set_scene(0, [{**CAR, "x": 40.0, "y": -1.75, "heading": 0.0, "speed": 8.0, "goal": (190.0, -1.75)},
                    {"cls": cls, "x": 55.0, "y": -1.75, "heading": 0.0, "speed": 0.0, "length": size[0],
                     "width": size[1], "controlled": False, "kind": kind}])
    hold = _hold(e)
    r = int(np.nonzero(e.slot_agent == 0)[0][0])
    for _ in range(30):
        e.step(np.full(2, hold, np.int32))
        if e.episode_metrics[r, COL["collisions"]] > 0:
            break
    row = e.episode_metrics[r].astype(np.float64)
    assert row[COL["collisions"]] == 1 and row[COL["at_fault_collisions"]] == 1
    assert row[COL["at_fault_object_collisions"]] == objects
    assert closed_loop_metrics(row[None], 0.1)["no_at_fault_collision"][0] == (0.5 if objects else 0.0)


# ------------------------------------------------------------------------- the score's terms


def _rows(n: int, **cols: float) -> np.ndarray:
    r = np.zeros((n, len(EPISODE_METRICS)))
    r[:, EPISODE_METRICS.index("steps")] = 100
    r[:, EPISODE_METRICS.index("progress")] = 100.0
    r[:, EPISODE_METRICS.index("reference_progress")] = 100.0
    for k, v in cols.items():
        r[:, EPISODE_METRICS.index(k)] = v
    return r


@pytest.mark.parametrize(("at_fault", "objects", "multiplier"), [
    (0, 0, 1.0), (1, 1, 0.5), (2, 2, 0.0), (1, 0, 0.0), (2, 1, 0.0), (3, 0, 0.0)])
def test_no_at_fault_collision_multiplier_is_nuplans_product_over_partner_classes(at_fault, objects,
                                                                                   multiplier) -> None:
    """max(0, 1 - objects / 2) times 0 if any at-fault collision was with a vehicle or a VRU: one static
    object halves the score, a second or any vehicle zeroes it (nuplan-devkit no_ego_at_fault_collisions)."""
    out = closed_loop_metrics(_rows(1, at_fault_collisions=at_fault, at_fault_object_collisions=objects,
                                    collisions=at_fault), 0.1)
    assert out["no_at_fault_collision"][0] == multiplier
    assert out["score"][0] == pytest.approx(100.0 * multiplier)


@pytest.mark.parametrize(("excursion", "tolerance", "compliant"), [
    (0.0, 0.3, 1.0), (0.2, 0.3, 1.0), (0.3, 0.3, 1.0), (0.31, 0.3, 0.0), (1.5, 0.3, 0.0),
    (0.0, 0.0, 1.0), (0.05, 0.0, 0.0), (0.45, 0.5, 1.0)])
def test_drivable_area_compliance_allows_excursions_up_to_the_tolerance(excursion, tolerance, compliant) -> None:
    """Compliant when the episode's largest excursion is at most the tolerance (nuPlan: 0.3 m); the
    off-road steps of an episode within it no longer zero the score."""
    rows = _rows(1, max_offroad_excursion=excursion, offroad_steps=4 if excursion > 0 else 0)
    out = closed_loop_metrics(rows, 0.1, drivable_area_tolerance=tolerance)
    assert out["drivable_area_compliance"][0] == compliant
    assert out["score"][0] == pytest.approx(100.0 * compliant)


def test_drivable_area_tolerance_defaults_to_nuplans() -> None:
    rows = _rows(3)
    rows[:, EPISODE_METRICS.index("max_offroad_excursion")] = [0.1, 0.3, 0.31]
    assert closed_loop_metrics(rows, 0.1)["drivable_area_compliance"].tolist() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "0.3", True])
def test_a_bad_drivable_area_tolerance_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="drivable_area_tolerance"):
        closed_loop_metrics(_rows(1), 0.1, drivable_area_tolerance=bad)


def test_object_collisions_beyond_the_at_fault_count_are_refused() -> None:
    with pytest.raises(ValueError, match="at_fault_object_collisions"):
        closed_loop_metrics(_rows(1, at_fault_collisions=1, at_fault_object_collisions=2), 0.1)
