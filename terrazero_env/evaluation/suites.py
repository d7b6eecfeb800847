"""Evaluation suites of scenario families: the long-tail suite of ``terrazero eval RUN --suite longtail``.

TerraZero scores its planner on InterPlan (section 6.3.2; Hallgarten et al. 2024), eight families of
long-tail scenes rewritten from logged nuPlan drives: construction zone, accident site, jaywalker,
nudge around a stopped vehicle, overtake with oncoming traffic, and lane change at low, medium and
high traffic density. We have no nuPlan logs; this module builds InterPlan-like families on the
bundled maps from the road-user generators (:class:`~terrazero_env.config.RoadUsersConfig`).

A :class:`Family` is declarative: a map, the road-user mix that replaces the run's (``road_users``,
fields of ``RoadUsersConfig`` on its defaults), a few ``init`` overrides, and a predicate on a world's
agents (``Engine.agents`` rows) that says whether one controlled agent, the ego, meets the feature.
The generators place features anywhere on the map, so a reset scene only tests the family when the
feature lies ahead of the ego; :func:`find_scenes` therefore scans deterministic seeds, resets an
engine with them (setup only, never on the step path) and keeps, per qualifying world, its first
qualifying slot, reporting how many seeds it scanned. Static features are checked at reset. Jaywalkers
appear while the episode runs, so the jaywalker family probes each seed for ``probe_steps`` steps with
every controlled agent holding its speed and curvature (the zero action) and qualifies the scene when
a jaywalker crossed ahead of the ego under that probe; the evaluated policy drives the same seed, so
it meets the same spawn schedule, though not necessarily the crosser at the same spot. Goals follow
the lane graph's successors (``InitConfig.goal_distance``), never a neighbouring lane, so no family
can force a lane change: the lane-change families put the ego on the three-lane highway among
same-direction IDM traffic in adjacent lanes at three densities, and a change of lane is the policy's
choice (InterPlan instead routes the ego into the other lane). Families that need the ego to pass a
feature also require its goal to lie beyond that feature. The run's observation, reward and
kinematic settings stay, so its policy sees the observation layout it was trained on.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..config import EngineConfig, RoadUsersConfig, StaticKind
from ..maps.schema import AgentType
from .interplan import INTERPLAN

__all__ = ["SUITES", "SUITE_COLUMNS", "Family", "Scene", "family_config", "family_row", "find_scenes", "format_suite",
           "get_suite", "scene_seed", "suite_mean"]

# Engine.agents ``role`` codes (terrazero_env.engine.ROLES order; tests/test_suites.py checks them).
ROLE_STATIC, ROLE_IDM, ROLE_JAYWALKER = 1, 3, 5
_VEHICLES = (int(AgentType.CAR), int(AgentType.TRUCK), int(AgentType.BUS))


@dataclass(frozen=True)
class Family:
    """One scenario family of a suite."""

    name: str
    """Short identifier (a row of the suite's table)."""
    description: str
    """One line: what the ego meets."""
    map: str
    """The bundled map (or map file) its scenes are built on."""
    road_users: dict[str, Any]
    """Fields of :class:`RoadUsersConfig` (``pedestrians`` as a dict of its fields); every field not
    named takes its default, so the run's own road-user mix does not leak into the family."""
    predicate: Callable[[np.ndarray, int], bool]
    """``predicate(agents, ego)``: ``agents`` is one world's ``Engine.agents`` rows (live agents only),
    ``ego`` the index of a controlled agent among them; True when that ego meets the feature."""
    init: dict[str, Any] = field(default_factory=dict)
    """Fields of :class:`~terrazero_env.config.InitConfig` to override (e.g. ``num_agents``)."""
    probe_steps: int = 0
    """0: the predicate is checked at reset. Otherwise the scene is stepped this many steps with every
    controlled agent holding its action at zero, and qualifies if the predicate held at any of them."""
    max_agents: int = 64
    """``EngineConfig.max_agents_per_world`` for the family (static actors take agent rows)."""


@dataclass(frozen=True)
class Scene:
    """A qualifying scene: reset a world with ``seed`` and evaluate its controlled slot ``slot``."""

    seed: int
    slot: int
    agent: int
    """The ego's row in ``Engine.agents`` after the reset."""


# ------------------------------------------------------------------------------------- predicates

def _ego_frame(agents: np.ndarray, ego: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward and left offsets (m) of every agent from the ego, and cos of their heading difference."""
    e = agents[ego]
    c, s = np.cos(e["heading"]), np.sin(e["heading"])
    dx, dy = agents["x"] - e["x"], agents["y"] - e["y"]
    return dx * c + dy * s, -dx * s + dy * c, np.cos(agents["heading"] - e["heading"])


def _goal_forward(agents: np.ndarray, ego: int) -> float:
    e = agents[ego]
    return float((e["goal_x"] - e["x"]) * np.cos(e["heading"]) + (e["goal_y"] - e["y"]) * np.sin(e["heading"]))


def _ahead(agents: np.ndarray, ego: int, mask: np.ndarray, reach: float, half_width: float,
           goal_beyond: bool = True) -> bool:
    """Some agent in ``mask`` lies 2 to ``reach`` m ahead of the ego within ``half_width`` m of its axis
    (and, with ``goal_beyond``, the ego's goal lies further ahead than the nearest such agent)."""
    fwd, lat, _ = _ego_frame(agents, ego)
    hit = mask & (fwd >= 2.0) & (fwd <= reach) & (np.abs(lat) <= half_width)
    hit[ego] = False
    if not hit.any():
        return False
    return not goal_beyond or _goal_forward(agents, ego) > float(fwd[hit].min()) + 2.0


def _stopped_vehicles(agents: np.ndarray) -> np.ndarray:
    """Background vehicles left standing on a lane (static, not parked at the curb nor crashed)."""
    kind_none = agents["kind"] == int(StaticKind.NONE)
    return (agents["role"] == ROLE_STATIC) & np.isin(agents["cls"], _VEHICLES) & kind_none


def construction_zone(agents: np.ndarray, ego: int) -> bool:
    """A cone or a road worker 2-30 m ahead within 3 m of the ego's axis, the goal beyond it."""
    kind = agents["kind"]
    return _ahead(agents, ego, (kind == int(StaticKind.CONE)) | (kind == int(StaticKind.WORKER)), 30.0, 3.0)


def accident_site(agents: np.ndarray, ego: int) -> bool:
    """A crashed vehicle 2-30 m ahead within 3.5 m of the ego's axis, the goal beyond it."""
    return _ahead(agents, ego, agents["kind"] == int(StaticKind.CRASHED), 30.0, 3.5)


def jaywalker(agents: np.ndarray, ego: int) -> bool:
    """A jaywalker 2-25 m ahead within 5 m of the ego's axis (no goal condition: it crosses and leaves)."""
    return _ahead(agents, ego, agents["role"] == ROLE_JAYWALKER, 25.0, 5.0, goal_beyond=False)


def nudge_stopped_vehicle(agents: np.ndarray, ego: int) -> bool:
    """A stopped (static) vehicle 2-30 m ahead in the ego's lane (within 1.5 m of its axis), the goal beyond it."""
    return _ahead(agents, ego, _stopped_vehicles(agents), 30.0, 1.5)


def overtake_oncoming(agents: np.ndarray, ego: int) -> bool:
    """A stopped vehicle ahead in the ego's lane (as for the nudge) and a moving IDM vehicle driving the
    other way 0-60 m ahead, 1.5-10 m to the side (the lane the ego would pass in)."""
    if not nudge_stopped_vehicle(agents, ego):
        return False
    fwd, lat, cos_dh = _ego_frame(agents, ego)
    oncoming = (agents["role"] == ROLE_IDM) & (cos_dh < -0.7) & (fwd >= 0.0) & (fwd <= 60.0) \
        & (np.abs(lat) >= 1.5) & (np.abs(lat) <= 10.0)
    return bool(oncoming.any())


def _adjacent_traffic(agents: np.ndarray, ego: int) -> tuple[int, int]:
    """(IDM vehicles driving the ego's way within 50 m of it, how many of them in an adjacent lane:
    2-8.5 m to the side and within 30 m along the road)."""
    fwd, lat, cos_dh = _ego_frame(agents, ego)
    same = (agents["role"] == ROLE_IDM) & (cos_dh > 0.7) & (np.hypot(fwd, lat) <= 50.0)
    adjacent = same & (np.abs(lat) >= 2.0) & (np.abs(lat) <= 8.5) & (np.abs(fwd) <= 30.0)
    return int(same.sum()), int(adjacent.sum())


def _density(lo: int, hi: int) -> Callable[[np.ndarray, int], bool]:
    def predicate(agents: np.ndarray, ego: int) -> bool:
        near, adjacent = _adjacent_traffic(agents, ego)
        return adjacent >= 1 and lo <= near <= hi
    predicate.__doc__ = (f"{lo} to {hi} same-direction IDM vehicles within 50 m of the ego, at least one of "
                         "them in an adjacent lane within 30 m")
    return predicate


#: The long-tail suite: eight InterPlan-like families (TerraZero section 6.3.2). Counts and rates are ours.
LONGTAIL: tuple[Family, ...] = (
    Family("construction_zone", "cone grids, tapers and lane closures (some with workers) ahead in the ego's path",
           "grid_town", {"idm_fraction": 1.0, "cone_grid": (1, 2), "cone_taper": (1, 2), "lane_block": (1, 2),
                         "worker_prob": 0.5}, construction_zone, {"num_agents": (6, 8)}),
    Family("accident_site", "a crashed-vehicle cluster (disc, rear-end chain, T-bone or fan) ahead",
           "grid_town", {"idm_fraction": 1.0, "crash_disc": (0, 1), "crash_chain": (0, 1), "crash_tbone": (0, 1),
                         "crash_fan": (0, 1)}, accident_site, {"num_agents": (6, 8)}),
    Family("jaywalker", "a pedestrian crossing mid-block ahead of the ego",
           "grid_town", {"idm_fraction": 1.0, "pedestrians": {"jaywalk_rate": 1.0}}, jaywalker,
           {"num_agents": (6, 8)}, probe_steps=60),
    Family("nudge_stopped_vehicle", "a stopped vehicle in the ego's lane, the goal beyond it",
           "grid_town", {"idm_fraction": 0.0}, nudge_stopped_vehicle, {"num_agents": (10, 14)}),
    Family("overtake_oncoming", "a stopped vehicle in the ego's lane and oncoming IDM traffic in the other lane",
           "carla_town01", {"idm_fraction": 0.5}, overtake_oncoming, {"num_agents": (24, 32)}),
    Family("lane_change_low", "highway, light same-direction traffic (1-3 IDM vehicles within 50 m)",
           "highway", {"idm_fraction": 1.0}, _density(1, 3), {"num_agents": (8, 12)}),
    Family("lane_change_medium", "highway, medium traffic (4-7 IDM vehicles within 50 m)",
           "highway", {"idm_fraction": 1.0}, _density(4, 7), {"num_agents": (24, 32)}),
    Family("lane_change_high", "highway, dense traffic (8 or more IDM vehicles within 50 m)",
           "highway", {"idm_fraction": 1.0}, _density(8, 10**6), {"num_agents": (48, 60)}),
)

#: Suites by name (the choices of ``terrazero eval --suite``): ``longtail`` (this module's seed scan) and
#: ``interplan`` (scripted scenes scored as InterPlan scores them, :mod:`terrazero_env.evaluation.interplan`).
SUITES: dict[str, tuple[Any, ...]] = {"longtail": LONGTAIL, "interplan": INTERPLAN}


def get_suite(name: str) -> tuple[Family, ...]:
    """The families of suite ``name``; a ValueError names the known suites otherwise."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; known suites: {', '.join(sorted(SUITES))}")
    return SUITES[name]


# ------------------------------------------------------------------------------------ scene search

def family_config(base: EngineConfig, family: Family) -> EngineConfig:
    """``base`` (a run's config) on the family's map, with its road users replaced by the family's mix
    and its ``init`` overrides applied; observation, reward and kinematic settings stay the run's."""
    ru = dict(family.road_users)
    ped = ru.pop("pedestrians", None)
    road_users = RoadUsersConfig(**ru)
    if ped is not None:
        road_users = replace(road_users, pedestrians=replace(road_users.pedestrians, **ped))
    max_agents = max(family.max_agents, base.slots_per_world, int(family.init.get("num_agents", (0, 0))[1]))
    return base.with_overrides(maps=(family.map,), road_users=road_users, init=dict(family.init),
                               max_agents_per_world=max_agents)


def scene_seed(seed: int, family: str, index: int) -> int:
    """The ``index``-th candidate world seed of ``family`` under the suite seed ``seed`` (deterministic,
    independent across families; below 2**63)."""
    ss = np.random.SeedSequence([int(seed), zlib.crc32(family.encode()), int(index)])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def _hold_actions(engine: Any) -> np.ndarray:
    """Per slot, the action index whose (longitudinal, lateral) values are both zero for its class."""
    hold = np.array([int(np.nonzero((engine.action_values(c) == 0).all(axis=1))[0][0]) for c in range(5)])
    return hold[np.maximum(np.asarray(engine.agent_type), 0)].astype(np.int32)


def _qualifying(engine: Any, family: Family, worlds: int, slots: int) -> np.ndarray:
    """``[worlds, slots]`` bool: slot's agent meets the family's predicate in the engine's current state."""
    agents = np.asarray(engine.agents)
    slot_agent = np.asarray(engine.slot_agent).reshape(worlds, slots)
    out = np.zeros((worlds, slots), bool)
    for w in range(worlds):  # setup only: a scan over candidate scenes, never on the step path
        n = engine.num_agents(w)
        rows = agents[w, :n]
        for k in range(slots):
            a = int(slot_agent[w, k])
            if 0 <= a < n and rows[a]["alive"] and rows[a]["slot"] == k:
                out[w, k] = bool(family.predicate(rows, a))
    return out


def find_scenes(base: EngineConfig, family: Family, count: int, seed: int = 0, batch: int = 32,
                max_scan: int | None = None) -> tuple[list[Scene], int]:
    """The first ``count`` qualifying scenes of ``family`` among its candidate seeds
    (:func:`scene_seed` ``(seed, family.name, i)`` for i = 0, 1, ...), at most one per seed (its first
    qualifying slot), and the number of seeds scanned. Raises RuntimeError naming the family when
    ``max_scan`` seeds (default ``200 * count``) give fewer than ``count`` scenes."""
    from ..engine import Engine  # the compiled engine; this module's specs load without it

    if count < 1:
        raise ValueError(f"count must be a positive number of scenes, got {count}")
    max_scan = 200 * count if max_scan is None else max_scan
    cfg = family_config(base, family).with_overrides(num_worlds=batch)
    engine = Engine(cfg)
    K = cfg.slots_per_world
    scenes: list[Scene] = []
    scanned = 0
    while len(scenes) < count and scanned < max_scan:
        seeds = [scene_seed(seed, family.name, scanned + w) for w in range(batch)]
        engine.reset(np.arange(batch), seeds)
        start_agent = np.asarray(engine.slot_agent).reshape(batch, K).copy()
        hit = _qualifying(engine, family, batch, K)
        if family.probe_steps:
            hold = _hold_actions(engine)
            for _ in range(family.probe_steps):
                engine.step(hold)
                hit |= _qualifying(engine, family, batch, K) & (np.asarray(engine.slot_agent).reshape(batch, K)
                                                                == start_agent)
        for w in range(min(batch, max_scan - scanned)):
            ks = np.nonzero(hit[w])[0]
            if ks.size and len(scenes) < count:
                scenes.append(Scene(seed=seeds[w], slot=int(ks[0]), agent=int(start_agent[w, ks[0]])))
            if len(scenes) == count:
                scanned += w + 1
                break
        else:
            scanned += min(batch, max_scan - scanned)
    if len(scenes) < count:
        raise RuntimeError(f"suite family {family.name}: only {len(scenes)} of {count} scenes qualified "
                           f"among {scanned} seeds on {family.map}; ask for fewer scenes")
    return scenes, scanned


# ----------------------------------------------------------------------------------------- tables

#: Columns of a suite's table: (key, label, source). Source "closed": the mean of a per-episode
#: closed-loop metric (:func:`terrazero_env.evaluation.metrics.closed_loop_metrics`); "event": the share of
#: episodes in which an engine counter fired at least once.
SUITE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("score", "score", "closed"),
    ("no_at_fault_collision", "no AF coll", "closed"),
    ("drivable_area_compliance", "drivable", "closed"),
    ("ego_progress", "ego prog", "closed"),
    ("goal_reached", "goal", "closed"),
    ("collision", "collision", "event"),
    ("offroad", "off-road", "event"),
)


def family_row(family: Family, scanned: int, per: dict[str, Any], closed: dict[str, Any]) -> dict[str, Any]:
    """One family's row: its scenes and scanned seeds, the closed-loop score's mean with a 95% Student t
    interval (clipped to the score's range [0, 100]: with few scenes and many zeros the t interval
    reaches below 0), and the means of the other :data:`SUITE_COLUMNS` (rates in [0, 1])."""
    from .metrics import mean_interval

    score = np.asarray(closed["score"], float)
    m, lo, hi = mean_interval(score)
    row: dict[str, Any] = {"family": family.name, "description": family.description, "map": family.map,
                           "scenes": int(score.size), "scanned": int(scanned),
                           "score_ci": [None if np.isnan(lo) else max(lo, 0.0),
                                        None if np.isnan(hi) else min(hi, 100.0)]}
    for key, _, source in SUITE_COLUMNS:
        values = closed[key] if source == "closed" else per["events"][key]
        row[key] = float(np.mean(np.asarray(values, float)))
    row["score"] = m
    return row


def suite_mean(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The unweighted mean over families of every :data:`SUITE_COLUMNS` value (InterPlan reports the
    mean over its scenarios; with equal scenes per family the two agree)."""
    out: dict[str, Any] = {"family": "mean over families", "scenes": sum(r["scenes"] for r in rows),
                           "scanned": sum(r["scanned"] for r in rows)}
    for key, _, _ in SUITE_COLUMNS:
        out[key] = float(np.mean([r[key] for r in rows]))
    return out


def format_suite(rows: list[dict[str, Any]], mean: dict[str, Any]) -> str:
    """The families' rows and their mean as an aligned text table (score in [0, 100], the rest in [0, 1])."""
    name_w = max(len(mean["family"]), *(len(r["family"]) for r in rows))
    head = f"{'family':<{name_w}}  {'scenes':>6}  {'scanned':>7}  {'score':>6}  {'95% CI':>13}"
    head += "".join(f"  {label:>10}" for key, label, _ in SUITE_COLUMNS if key != "score")
    lines = [head, "-" * len(head)]
    for r in [*rows, mean]:
        ci = r.get("score_ci")
        ci_text = "" if ci is None else "n/a" if ci[0] is None else f"[{ci[0]:.1f}, {ci[1]:.1f}]"
        line = f"{r['family']:<{name_w}}  {r['scenes']:>6}  {r['scanned']:>7}  {r['score']:>6.1f}  {ci_text:>13}"
        line += "".join(f"  {r[key]:>10.2f}" for key, _, _ in SUITE_COLUMNS if key != "score")
        if r is mean:
            lines.append("-" * len(head))
        lines.append(line)
    lines.append("score: nuPlan-style closed-loop score in [0, 100] (terrazero_env.evaluation.metrics.closed_loop_metrics), "
                 "mean and 95% t interval; other columns: shares of episodes. scanned: candidate seeds "
                 "reset to find the qualifying scenes (terrazero_env.evaluation.suites).")
    return "\n".join(lines)
