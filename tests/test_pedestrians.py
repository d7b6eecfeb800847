"""Rule-based pedestrians: ORCA crosswalk crossers arriving on a Poisson
schedule, mid-block jaywalkers, and IDM vehicles yielding to them.

The ORCA kernels are tested without an engine through their batch entry points (two discs swap
sides without touching; the linear program's answer meets every half-plane whenever some velocity
does); the generators through the engine with fixed seeds, checking properties along whole runs:
walkers never overlap and all reach their far side, the number of crossing events lies in the 99%
interval of the configured Poisson count, a jaywalker ends beyond the far road edge, and no IDM
vehicle touches a walking pedestrian.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import shapely

from terrazero_env import engine as core
from terrazero_env.config import CrossingGroup, PedestrianConfig
from terrazero_env.config.io import load_config
from terrazero_env.engine import orca_solve_batch, orca_step_batch
from terrazero_env.maps import load_source

CROSSER, JAYWALKER, IDM = (core.ROLES.index(n) for n in ("CROSSER", "JAYWALKER", "IDM"))
STAT = {n: i for i, n in enumerate(core.PEDESTRIAN_STATS)}


def _walk(pos, goal, speed=1.3, radius=0.4, steps=300, dt=0.1, keep_right=0.0):
    """Integrate ORCA velocities of discs heading for their goals (preferred headings turned
    ``keep_right`` radians clockwise, as the engine's walkers do); returns (final positions, the
    least gap between two disc edges over the run)."""
    c, s = math.cos(keep_right), math.sin(keep_right)
    pos = np.array(pos, np.float64)
    goal = np.array(goal, np.float64)
    vel = np.zeros_like(pos)
    r = np.full(len(pos), radius)
    least = math.inf
    for _ in range(steps):
        d = goal - pos
        n = np.linalg.norm(d, axis=1, keepdims=True)
        pref = d / np.maximum(n, 1e-9) * np.minimum(speed, n / dt)
        pref = np.stack([c * pref[:, 0] + s * pref[:, 1], -s * pref[:, 0] + c * pref[:, 1]], 1)
        vel = orca_step_batch(pos, vel, r, np.ascontiguousarray(pref), 2.0, 5.0, 2.0, dt)
        pos = pos + vel * dt
        gaps = np.linalg.norm(pos[:, None] - pos[None], axis=2) - 2 * radius
        np.fill_diagonal(gaps, np.inf)
        least = min(least, gaps.min())
    return pos, least


def test_two_walkers_head_on_swap_sides_without_touching():
    """Two discs walking straight at each other (slightly off axis, as any real pair is) trade places;
    their discs never overlap on the way."""
    pos, least = _walk([[-5.0, 0.02], [5.0, -0.02]], [[5.0, 0.02], [-5.0, -0.02]])
    assert np.allclose(pos, [[5.0, 0.02], [-5.0, -0.02]], atol=0.05)
    assert least >= -1e-6


def test_a_crowd_crossing_through_itself_never_overlaps():
    """Eight discs on a circle each walk to the opposite point (every path through the centre;
    the symmetric case in which plain ORCA stalls, broken here as in the engine by turning the
    preferred headings slightly to the right): all arrive and no two discs ever overlap."""
    ang = np.linspace(0, 2 * np.pi, 8, endpoint=False) + 0.01
    start = 6.0 * np.stack([np.cos(ang), np.sin(ang)], 1)
    pos, least = _walk(start, -start, steps=400, keep_right=0.05)
    assert np.allclose(pos, -start, atol=0.1)
    assert least >= -1e-6


def test_lp_solution_satisfies_every_half_plane_when_feasible():
    """Random half-planes through the neighbourhood of a known permitted velocity: the program's
    answer lies in every one of them and within the speed limit, and is the preferred velocity when
    that is itself permitted."""
    rng = np.random.default_rng(0)
    for trial in range(500):
        inside = rng.uniform(-0.8, 0.8, 2)
        m = int(rng.integers(1, 12))
        ang = rng.uniform(0, 2 * np.pi, m)
        d = np.stack([np.cos(ang), np.sin(ang)], 1)
        normal = np.stack([-d[:, 1], d[:, 0]], 1)  # the permitted side of each line
        point = inside - normal * rng.uniform(0.0, 1.0, (m, 1))
        lines = np.ascontiguousarray(np.hstack([point, d]))
        pref = rng.uniform(-3, 3, 2)
        v, feasible = orca_solve_batch(lines, pref, 2.0)
        assert feasible, trial
        slack = (d[:, 0] * (v[1] - point[:, 1]) - d[:, 1] * (v[0] - point[:, 0]))
        assert slack.min() >= -1e-9, trial
        assert np.linalg.norm(v) <= 2.0 + 1e-9
        if np.linalg.norm(pref) <= 2.0 and (d[:, 0] * (pref[1] - point[:, 1]) - d[:, 1] * (pref[0] - point[:, 0])).min() >= 0:
            assert np.allclose(v, pref)


def test_lp_reports_infeasible_half_planes():
    """Two opposed half-planes with a gap between them admit no velocity: the program says so."""
    lines = np.array([[0.0, 1.0, 1.0, 0.0], [0.0, -1.0, -1.0, 0.0]])  # need vy >= 1 and vy <= -1
    v, feasible = orca_solve_batch(lines, np.zeros(2), 2.0)
    assert not feasible and np.all(np.isfinite(v))


def _engine(rate=0.0, probs=(0.0, 0.0, 1.0, 0.0), jaywalk=0.0, preset="quick", seed=1, map_name="grid_town",
            **extra):
    over = {"num_worlds": 1, "maps": [map_name], "episode_length": 100_000, "max_agents_per_world": 96,
            "road_users.pedestrians.crossing_rate": rate, "road_users.pedestrians.group_probs": list(probs),
            "road_users.pedestrians.jaywalk_rate": jaywalk,
            # The quick preset's parked cars would stand in the walkers' way: these tests measure the
            # pedestrian generators on their own (and IDM vehicles where a test asks for them).
            "road_users.parked": 0, **extra}
    eng = core.Engine(load_config(preset, **over))
    eng.reset(seeds=np.array([seed]))
    return eng


class _Tracker:
    """Follows rule-based pedestrian rows of world 0: where each life began and ended."""

    def __init__(self, role: int):
        self.role = role
        self.prev = np.zeros(0, bool)
        self.live: dict[int, tuple[int, np.ndarray]] = {}
        self.done: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []

    def update(self, eng, t: int) -> np.ndarray:
        A = eng.agents[0, : eng.num_agents(0)]
        alive = (A["alive"] == 1) & (A["role"] == self.role)
        prev = np.zeros(len(A), bool)
        prev[: len(self.prev)] = self.prev
        for i in np.flatnonzero(alive & ~prev):
            self.live[int(i)] = (t, np.array([A["x"][i], A["y"][i]]))
        for i in np.flatnonzero(~alive & prev):
            t0, start = self.live.pop(int(i))
            self.done.append((t0, t, start, np.array([A["x"][i], A["y"][i]]), np.array([A["goal_x"][i], A["goal_y"][i]])))
        self.prev = alive
        return alive


def test_bidirectional_orca_flows_never_overlap_and_all_reach_the_far_side():
    """Crosswalks receive only bidirectional flows for 1,000 steps: no two walkers' discs (which
    contain their boxes) ever overlap, every walker that entered early enough has left at its goal
    beyond the far end of its crosswalk, and none waited in the road for long."""
    pc = PedestrianConfig()
    eng = _engine(rate=0.01, probs=(0, 0, 1, 0))
    cross = load_source("grid_town").crosswalks
    polys = [shapely.Polygon(cross.values[cross.offsets[k]:cross.offsets[k + 1], :2]) for k in range(len(cross))]
    track = _Tracker(CROSSER)
    least = math.inf
    for t in range(1000):
        eng.step(np.zeros_like(eng.actions))
        alive = track.update(eng, t)
        A = eng.agents[0, : eng.num_agents(0)][alive]
        if len(A) > 1:
            xy = np.stack([A["x"], A["y"]], 1)
            r = np.maximum(pc.radius, 0.5 * np.hypot(A["length"], A["width"]))
            gap = np.linalg.norm(xy[:, None] - xy[None], axis=2) - (r[:, None] + r[None])
            np.fill_diagonal(gap, np.inf)
            least = min(least, gap.min())
    stats = eng.pedestrian_stats[0]
    assert stats[STAT["crosswalk_events"]] >= 5 and len(track.done) >= 20
    assert least >= -1e-6
    for t0, t1, start, end, goal in track.done:
        assert t1 - t0 < 400  # 40 s for a crossing of about 15 m
        assert np.linalg.norm(end - goal) < 0.5
        assert np.linalg.norm(end - start) > 8.0
        assert not any(p.contains(shapely.Point(end)) for p in polys)  # off the crosswalk: on the far side
    assert all(t0 > 1000 - 400 for t0, _ in track.live.values())  # the rest entered recently


def _poisson_interval(mean: float, mass: float = 0.99) -> tuple[int, int]:
    """The central interval of a Poisson(mean) count holding at least ``mass``."""
    ks = np.arange(int(mean + 12 * math.sqrt(mean) + 20))
    logp = ks * math.log(mean) - mean - np.array([math.lgamma(k + 1) for k in ks])
    cdf = np.cumsum(np.exp(logp))
    tail = (1 - mass) / 2
    return int(np.searchsorted(cdf, tail)), int(np.searchsorted(cdf, 1 - tail))


@pytest.mark.parametrize("rate", [0.005, 0.03])
def test_crossing_events_follow_the_configured_poisson_rate(rate):
    """Over a long run the number of crossing events at all crosswalks lies in the 99% interval of
    Poisson(rate x crosswalks x time)."""
    eng = _engine(rate=rate, probs=(1, 0, 0, 0), seed=3)
    steps = 3000
    for _ in range(steps):
        eng.step(np.zeros_like(eng.actions))
    n_cross = len(load_source("grid_town").crosswalks)
    lo, hi = _poisson_interval(rate * n_cross * steps * eng.config.dt)
    got = int(eng.pedestrian_stats[0, STAT["crosswalk_events"]])
    assert lo <= got <= hi, (lo, got, hi)


def test_a_jaywalker_ends_beyond_the_far_road_edge():
    """Jaywalkers cross mid-block: each one's walk from where it entered to where it left crosses
    road edges on both sides of the road, and it leaves off the road, clear of every edge."""
    eng = _engine(jaywalk=0.2, seed=5)
    md = load_source("grid_town")
    edges = shapely.MultiLineString([md.road_edges.values[md.road_edges.offsets[k]:md.road_edges.offsets[k + 1], :2]
                                     for k in range(len(md.road_edges))])
    track = _Tracker(JAYWALKER)
    for t in range(600):
        eng.step(np.zeros_like(eng.actions))
        track.update(eng, t)
    assert len(track.done) >= 5
    r = PedestrianConfig().radius
    for _, _, start, end, goal in track.done:
        walk = shapely.LineString([start, end])
        crossings = shapely.get_num_geometries(walk.intersection(edges))
        assert crossings >= 2, (start, end)
        assert edges.distance(shapely.Point(end)) >= r
        assert edges.distance(shapely.Point(start)) >= r


def _boxes(A: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of an agents view as float64 [N, 5] boxes (x, y, heading, length, width)."""
    return np.ascontiguousarray(np.stack([A[k][idx] for k in ("x", "y", "heading", "length", "width")], 1))


def test_idm_vehicles_do_not_hit_crossing_pedestrians():
    """A town of IDM traffic (no policy cars) with busy crosswalks and jaywalkers: no IDM vehicle's
    box ever overlaps a walking pedestrian's box."""
    hits = walkers = 0
    for seed in (11, 12):
        eng = _engine(rate=0.02, probs=(0.4, 0.2, 0.2, 0.2), jaywalk=0.05, preset="planner", seed=seed,
                      **{"init.idm_fraction": 1.0, "init.controlled": [False] * 5, "init.num_agents": [1, 24]})
        for _ in range(600):
            eng.step(np.zeros_like(eng.actions))
            A = eng.agents[0, : eng.num_agents(0)]
            veh = np.flatnonzero((A["alive"] == 1) & (A["role"] == IDM))
            ped = np.flatnonzero((A["alive"] == 1) & np.isin(A["role"], [CROSSER, JAYWALKER]))
            walkers += len(ped)
            if len(veh) == 0 or len(ped) == 0:
                continue
            vi, pi = np.repeat(veh, len(ped)), np.tile(ped, len(veh))
            hits += int(core.obb_overlap_batch(_boxes(A, vi), _boxes(A, pi)).sum())
    assert walkers > 1000  # pedestrians were there to be hit
    assert hits == 0


def test_generators_are_off_by_default_and_group_kinds_mirror_the_engine():
    """The default config spawns no pedestrian (so default rollouts are unchanged), and the crossing
    group kinds and roles have the engine's names."""
    eng = _engine()
    for _ in range(50):
        eng.step(np.zeros_like(eng.actions))
    assert not eng.pedestrian_stats.any()
    assert tuple(g.name for g in CrossingGroup) == core.VOCABULARY["crossing_groups"]
    assert {"CROSSER", "JAYWALKER"} <= set(core.ROLES)


def test_a_snapshot_with_walkers_continues_bit_for_bit_and_reset_clears_them():
    """``get_state``/``set_state`` carry the pedestrians' schedule and ORCA state: two engines
    continuing from one snapshot stay identical; a reset removes every rule-based pedestrian."""
    a = _engine(rate=0.03, probs=(0.25, 0.25, 0.25, 0.25), jaywalk=0.05, seed=9)
    for _ in range(150):
        a.step(np.zeros_like(a.actions))
    assert a.pedestrian_stats[0, STAT["entered"]] > 0
    b = _engine(rate=0.03, probs=(0.25, 0.25, 0.25, 0.25), jaywalk=0.05, seed=4)
    b.set_state(a.get_state())
    for _ in range(100):
        a.step(np.zeros_like(a.actions))
        b.step(np.zeros_like(b.actions))
    assert a.agents.tobytes() == b.agents.tobytes()
    assert np.array_equal(a.pedestrian_stats, b.pedestrian_stats)
    a.reset(seeds=np.array([9]))
    A = a.agents[0, : a.num_agents(0)]
    assert not np.isin(A["role"], [CROSSER, JAYWALKER]).any() and not a.pedestrian_stats.any()


def test_bad_orca_batch_input_is_rejected_with_a_clear_error():
    """Mismatched shapes and non-positive limits name the problem."""
    with pytest.raises(ValueError, match="float64 \\[N, 2\\]"):
        orca_step_batch(np.zeros((2, 2)), np.zeros((3, 2)), np.ones(2), np.zeros((2, 2)), 2.0, 5.0, 2.0, 0.1)
    with pytest.raises(ValueError, match="time_horizon must be > 0"):
        orca_step_batch(np.zeros((2, 2)), np.zeros((2, 2)), np.ones(2), np.zeros((2, 2)), 2.0, 5.0, 0.0, 0.1)
    with pytest.raises(ValueError, match="direction must be non-zero"):
        orca_solve_batch(np.zeros((1, 4)), np.zeros(2), 2.0)


@pytest.mark.parametrize("kind,size,per_event", [
    (CrossingGroup.SINGLE, (3, 3), (1, 1)),
    (CrossingGroup.PACK, (2, 4), (2, 4)),
    (CrossingGroup.BIDIRECTIONAL, (2, 2), (4, 4)),
    (CrossingGroup.STAGGERED, (3, 3), (3, 3)),
])
def test_each_group_kind_brings_its_number_of_crossers(kind, size, per_event):
    """Every crossing event of a kind brings that kind's number of pedestrians: after the arrivals
    stop (the state moved into an engine with the rate at 0) and the pending ones are let in, the
    pedestrians that entered or were dropped number per_event[0]..per_event[1] times the events;
    a pack enters together (several in one step)."""
    probs = [0.0] * 4
    probs[int(kind)] = 1.0
    over = {"road_users.pedestrians.group_size": list(size)}
    busy = _engine(rate=0.02, probs=probs, seed=21, **over)
    entries = []
    for t in range(600):
        before = busy.pedestrian_stats[0, STAT["entered"]]
        busy.step(np.zeros_like(busy.actions))
        entries.append(busy.pedestrian_stats[0, STAT["entered"]] - before)
    quiet = _engine(rate=0.0, probs=probs, seed=21, **over)
    state = busy.get_state()
    state["buffer/ped_rates"][:] = 0.0  # the episode's drawn rates travel with the state: switch arrivals off
    quiet.set_state(state)
    for _ in range(400):
        quiet.step(np.zeros_like(quiet.actions))
    s = quiet.pedestrian_stats[0]
    events = s[STAT["crosswalk_events"]]
    assert events >= 10
    assert per_event[0] * events <= s[STAT["entered"]] + s[STAT["dropped"]] <= per_event[1] * events
    if kind == CrossingGroup.PACK:
        assert max(entries) >= 2  # a pack enters together


def test_rate_ranges_are_drawn_per_world_at_reset():
    """A ``(min, max)`` crossing or jaywalk rate gives every world its own rate inside the range at
    each reset (and the same ones for the same seeds); a fixed rate is used as it is."""
    cfg = load_config("quick", num_worlds=16, maps=["grid_town"], **{
        "road_users.pedestrians.crossing_rate": [0.01, 0.05], "road_users.pedestrians.jaywalk_rate": 0.02})
    eng = core.Engine(cfg)
    eng.reset(seeds=np.arange(16))
    r = eng.pedestrian_rates.copy()
    assert np.all((r[:, 0] >= 0.01) & (r[:, 0] <= 0.05)) and len(np.unique(r[:, 0])) == 16
    assert np.all(r[:, 1] == 0.02)
    eng.reset(seeds=np.arange(16) + 100)
    assert not np.array_equal(eng.pedestrian_rates[:, 0], r[:, 0])
    eng.reset(seeds=np.arange(16))
    assert np.array_equal(eng.pedestrian_rates, r)
    with pytest.raises(ValueError, match="PedestrianConfig.jaywalk_rate: need min <= max"):
        load_config("quick", **{"road_users.pedestrians.jaywalk_rate": [0.2, 0.1]})
    with pytest.raises(ValueError, match="PedestrianConfig.crossing_rate min"):
        load_config("quick", **{"road_users.pedestrians.crossing_rate": [-0.1, 0.1]})
