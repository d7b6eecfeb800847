"""Evaluation statistics without torch: the rate and mean rows of ``terrazero eval``, their 95%
confidence intervals (Wilson score for rates, Student t for means, with a series t quantile so that
nothing beyond the standard library and numpy is needed), the closed-loop driving metrics derived
from the engine's per-episode metric rows (``Engine.episode_metrics``: a nuPlan-style score and
FAST's closed-loop metrics), the delete-one jackknife interval of a paired comparison, and the text
tables that print them.

This module owns the numbers computed from per-episode outcomes; producing those outcomes (rolling a
policy out) lives in :mod:`terrazero_env.agents.evaluate`, which imports from here. The env layer and
the CLI can use it without importing torch, on any recorded episodes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["CLOSED_LOOP_METRICS", "EPISODE_METRICS", "MEANS", "NOT_APPLICABLE", "PROGRESS_REFERENCES", "RATES", "Z95", "closed_loop_metrics",
           "compare", "episodes_where", "format_closed_loop", "format_comparison", "format_table", "jackknife_interval", "mean_interval", "summarize",
           "t_quantile", "wilson_interval"]

#: Two-sided 95% standard normal quantile.
Z95 = 1.959963984540054

#: Rate rows: (key, label, engine counter). A counter the engine lacks gives a row without a value.
RATES: tuple[tuple[str, str, str], ...] = (
    ("goal_reach_rate", "goal reach", "goal_reached"),
    ("collision_rate", "collision", "collision"),
    ("offroad_rate", "off-road", "offroad"),
    ("red_light_rate", "red-light violation", "red_light"),
    ("wrong_way_rate", "wrong-way", "wrong_way"),
    ("comfort_violation_rate", "comfort violation", "comfort_violations"),
    ("stop_line_rate", "stop-line violation", "stop_line"),
)
#: Mean rows: (key, label, per-episode value, decimals shown).
MEANS: tuple[tuple[str, str, str, int], ...] = (
    ("mean_progress", "progress", "progress", 3),
    ("mean_return", "return", "return", 2),
)


# ------------------------------------------------------------------------------------- intervals

def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for ``successes`` out of ``n``."""
    if n <= 0:
        raise ValueError(f"a rate needs at least one episode, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, {n}], got {successes}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 or n successes the matching bound is exactly 0 or 1 (not 1 - 1e-16 from rounding).
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        if df > 1:
            total = 1.0
            for k in range(1, (df - 3) // 2 + 1):  # 1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ...
                term *= (2 * k) / (2 * k + 1) * c2
                total += term
        return (2 / math.pi) * (theta + s * math.cos(theta) * total)
    total, term = 1.0, 1.0
    for k in range(1, (df - 2) // 2 + 1):  # 1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ...
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return s * total


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t (e.g. 12.706 for df=1): exact series inverted
    by bisection up to df=200, the Cornish-Fisher expansion (A&S 26.7.5) beyond."""
    if df < 1:
        raise ValueError(f"df must be positive, got {df}")
    if df > 200:
        z = _normal_quantile(0.5 + level / 2)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
        return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    lo, hi = 0.0, 1.0
    while _t_two_sided(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _normal_quantile(p: float) -> float:
    """Standard normal quantile by bisection on ``erf`` (used for the large-df t expansion)."""
    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% Student t interval (NaN bounds for a single value)."""
    x = np.asarray(values, float)
    if x.size == 0:
        raise ValueError("a mean needs at least one episode")
    m = float(x.mean())
    if x.size == 1:
        return m, math.nan, math.nan
    half = t_quantile(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def episodes_where(per: dict[str, Any], keep: Any) -> dict[str, Any]:
    """The per-episode outcomes of ``per`` (see :func:`summarize`) restricted to the episodes where the
    boolean sequence ``keep`` (one entry per episode) is true: every per-episode list, and every list
    of a per-counter mapping, is filtered; other entries are kept as they are. For tables by class,
    ``keep = np.asarray(per["agent_class"]) == AgentType.TRUCK``."""
    n = len(per["return"])
    mask = np.asarray(keep)
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(f"keep must be {n} booleans, one per episode, got dtype {mask.dtype} and shape {mask.shape}")
    idx = np.flatnonzero(mask).tolist()

    def pick(v: Any) -> Any:
        if isinstance(v, list) and len(v) == n:
            return [v[i] for i in idx]
        if isinstance(v, dict):
            return {k: pick(x) for k, x in v.items()}
        return v

    return {k: pick(v) for k, v in per.items()}


def summarize(per: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Table rows (see :func:`evaluate`) from per-episode outcomes."""
    rows: dict[str, dict[str, Any]] = {}
    n = len(per["return"])
    for key, label, counter in RATES:
        if counter not in per["events"]:
            rows[key] = {"label": f"{label} rate", "kind": "rate", "value": None, "ci_low": None, "ci_high": None,
                         "n": n, "note": f"not measured: the engine has no {counter!r} counter"}
            continue
        k = int(np.sum(per["events"][counter]))
        lo, hi = wilson_interval(k, n)
        rows[key] = {"label": f"{label} rate", "kind": "rate", "value": k / n, "ci_low": lo, "ci_high": hi, "n": n,
                     "count": k}
    for key, label, field, digits in MEANS:
        m, lo, hi = mean_interval(np.asarray(per[field], float))
        if math.isnan(lo):  # one episode: no interval (None keeps the JSON output valid)
            lo = hi = None
        rows[key] = {"label": f"mean {label}", "kind": "mean", "value": m, "ci_low": lo, "ci_high": hi, "n": n,
                     "digits": digits}
    return rows


def format_table(result: dict[str, Any]) -> str:
    """The rows of :func:`evaluate` as an aligned text table."""
    rows = result["rows"]
    label_w = max(len("metric"), *(len(r["label"]) for r in rows.values()))

    def num(x: float | None, digits: int) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "n/a"
        return f"{x:.{digits}f}"

    cells = []
    for r in rows.values():
        if r["value"] is None:
            cells.append((r["label"], "n/a", r["note"], ""))
            continue
        digits = r.get("digits", 3)
        value = num(r["value"], digits)
        ci = f"[{num(r['ci_low'], digits)}, {num(r['ci_high'], digits)}]"
        extra = f"{r['count']}/{r['n']}" if r["kind"] == "rate" else f"n={r['n']}"
        cells.append((r["label"], value, ci, extra))
    value_w = max(len("value"), *(len(c[1]) for c in cells))
    ci_w = max(len("95% CI"), *(len(c[2]) for c in cells if c[3]))
    lines = [f"{'metric':<{label_w}}  {'value':>{value_w}}  {'95% CI':<{ci_w}}  episodes"]
    lines.append("-" * len(lines[0]))
    for label, value, ci, extra in cells:
        lines.append(f"{label:<{label_w}}  {value:>{value_w}}  {ci:<{ci_w}}  {extra}".rstrip())
    lines.append("rates: Wilson score interval; means: Student t interval. progress: 1 - final/initial distance "
                 "to the goal, 1 once the goal is reached.")
    return "\n".join(lines)


# ------------------------------------------------------------------------ closed-loop metrics

#: Columns of the engine's per-episode metric rows (``Engine.episode_metrics``, cyext/metrics.pxd), in
#: order: steps judged; collision onsets, those at fault (nuPlan's collision types: not at fault when
#: stopped, rear-ended, or side-swiped by an agent that closed the gap faster) and the largest relative
#: speed at an onset (m/s); the smallest time to collision by constant-velocity projection of the boxes
#: (s, capped at 3 s) and the steps below 0.95 s; the smallest gap to another box (m, capped at 50) and
#: time headway to a lead vehicle (s, capped at 10); off-road steps; metres driven against the lane
#: direction; over-speed above the lane's posted limit integrated over time (m) and steps above it;
#: speed and posted limit integrated over on-lane time (m); signed progress along the lane (m) and that
#: of a reference driving at the posted limit (m); distance driven (m); time standing with no lead
#: vehicle, stop sign or red light to explain it (s); onsets of braking below -4.05 and accelerating
#: above 2.40 m/s^2; comfort extrema (m/s^2, m/s^3, rad/s, rad/s^2) and steps outside nuPlan's comfort
#: bounds; red-light, stop-sign and yellow-light stop-line passages; the at-fault collision onsets whose
#: at-fault partners are all static objects (cones and debris, nuPlan's object types); the largest
#: excursion of the box beyond the drivable area over the episode (m: the distance from a box corner
#: outside the drivable area to its boundary, the farthest corner at the worst judged step; measured
#: whenever the box touches a road edge or a sidewalk, whatever ``EngineConfig.offroad_tolerance``
#: is, so it is at most a few centimetres above 0 for an episode that only brushed an edge, and 0
#: for one that never touched); then three running-state columns.
EPISODE_METRICS: tuple[str, ...] = (
    "steps", "collisions", "at_fault_collisions", "max_impact_speed", "min_ttc", "ttc_violation_steps", "min_gap",
    "min_lead_headway", "offroad_steps", "wrong_way_distance", "overspeed_integral", "speeding_steps",
    "speed_integral", "limit_integral", "progress", "reference_progress", "distance", "stall_time", "hard_brakes",
    "hard_accelerations", "max_lon_accel", "min_lon_accel", "max_abs_lat_accel", "max_abs_lon_jerk", "max_jerk",
    "max_abs_yaw_rate", "max_abs_yaw_accel", "comfort_steps", "red_lights", "stop_signs", "yellow_entries",
    "at_fault_object_collisions", "max_offroad_excursion", "in_contact", "prev_heading", "prev_yaw_rate")

#: nuPlan closed-loop score constants (nuplan-devkit metric configs): making progress needs 20% of the
#: reference's progress; the speed-limit score runs out at 2.23 m/s of mean over-speed; driving direction
#: gives 1 up to 2 m and 0.5 up to 6 m against the traffic.
MIN_PROGRESS_RATIO = 0.2
#: nuPlan's ``score_progress_threshold`` (m): against the IDM reference both progresses count as at
#: least this much, so an ego that waits where the reference waits too scores 1, not 0/0.
PROGRESS_FLOOR = 2.0
#: What ego progress is measured against: "idm", the IDM driver from the same start in the same scene
#: (a reference rollout, ``terrazero_env.agents.evaluate``), or "limit", a driver at the posted limit
#: of the lane under the ego (the engine's ``reference_progress`` column).
PROGRESS_REFERENCES = ("idm", "limit")
MAX_OVERSPEED = 2.23
#: nuPlan's drivable-area compliance tolerance (m, nuplan-devkit ``drivable_area_compliance``
#: ``max_violation_threshold``): an episode whose box corners never reach further beyond the
#: drivable area than this is compliant.
DRIVABLE_AREA_TOLERANCE = 0.3
#: nuPlan's allowance of at-fault collisions with static objects (nuplan-devkit
#: ``no_ego_at_fault_collisions`` ``max_violation_threshold_object``): each multiplies the term by
#: ``max(0, 1 - n / (allowance + 1))``, so one scores 0.5 and two 0; with a vehicle or a vulnerable
#: road user the allowance is 0, so one such collision scores 0.
STATIC_OBJECT_COLLISIONS_ALLOWED = 1
WRONG_WAY_OK, WRONG_WAY_HALF = 2.0, 6.0
#: Weights of the weighted average (nuPlan): time to collision 5, ego progress 5, speed limit 4, comfort 2.
SCORE_WEIGHTS = {"ttc_compliance": 5.0, "ego_progress": 5.0, "speed_limit_compliance": 4.0, "comfort": 2.0}
#: Multipliers (nuPlan's four, then ours: running a red light or a stop sign zeroes the score).
SCORE_MULTIPLIERS = ("no_at_fault_collision", "drivable_area_compliance", "driving_direction_compliance",
                     "making_progress", "traffic_control_compliance")

#: The per-episode closed-loop metrics: (key, label, group, higher is better). Group "score": the
#: score and its nuPlan terms (each in [0, 1] per episode, the score in [0, 100]); group "fast":
#: FAST's closed-loop metrics our simulator defines; group "outcome": what ``terrazero eval`` always
#: reported.
CLOSED_LOOP_METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("score", "closed-loop score [0, 100]", "score", True),
    ("no_at_fault_collision", "no at-fault collision", "score", True),
    ("drivable_area_compliance", "drivable area compliance", "score", True),
    ("driving_direction_compliance", "driving direction compliance", "score", True),
    ("making_progress", "making progress", "score", True),
    ("traffic_control_compliance", "red light / stop sign compliance", "score", True),
    ("ttc_compliance", "time to collision within bound", "score", True),
    ("ego_progress", "ego progress vs reference", "score", True),
    ("speed_limit_compliance", "speed limit compliance", "score", True),
    ("comfort", "comfortable", "score", True),
    ("collision_severity", "collision severity (m/s)", "fast", False),
    ("lead_vehicle_risk", "lead-vehicle headway (s)", "fast", True),
    ("safety_margin", "safety margin (m)", "fast", True),
    ("hard_braking", "hard braking events", "fast", False),
    ("hard_acceleration", "hard acceleration events", "fast", False),
    ("red_light_running", "red-light running", "fast", False),
    ("improper_yellow_entry", "yellow entries", "fast", False),
    ("speeding", "speeding time fraction", "fast", False),
    ("speed_efficiency", "speed efficiency", "fast", True),
    ("stall_time", "stall time (s)", "fast", False),
    ("stop_sign_violation", "stop-sign violations", "fast", False),
    ("goal_reached", "goal reached", "outcome", True),
    ("return", "return", "outcome", True),
)

#: FAST's closed-loop metrics (FAST article, section 4.5) our simulator cannot define, and why.
NOT_APPLICABLE: dict[str, str] = {
    "solid_line_crossing": "the engine keeps road lines only as observation segments, without their paint "
                           "style, so crossing a solid line cannot be told from crossing a dashed one",
    "parking_accuracy": "the maps have no parking spaces and no task ends in a parking manoeuvre",
    "lateral_avoidance_accuracy": "needs an annotated reference lateral offset for each avoidance manoeuvre, "
                                  "which no bundled scenario has",
    "pull_out_distance_deviation": "no pull-over or pull-out task with a target stopping distance exists",
}


def closed_loop_metrics(rows: np.ndarray, dt: float, goal_reached: Any = None,
                        returns: Any = None, reference_progress: Any = None,
                        drivable_area_tolerance: float = DRIVABLE_AREA_TOLERANCE) -> dict[str, np.ndarray]:
    """Per-episode closed-loop metrics from engine metric rows.

    ``rows``: float ``[n, len(EPISODE_METRICS)]``, one ``Engine.episode_metrics`` row per episode taken
    when it ended; ``dt``: the step (s); ``goal_reached``, ``returns``: optional per-episode outcomes
    passed through; ``reference_progress``: optional float ``[n]``, each episode's reference progress
    (m) from an IDM reference rollout; ``drivable_area_tolerance`` (m, finite, >= 0): how far a box
    corner may reach beyond the drivable area in a compliant episode. Returns ``{key: float64 [n]}``
    for every key of :data:`CLOSED_LOOP_METRICS` (the outcome keys only when given). The score
    follows nuPlan's closed-loop score: the product of the multipliers times the weighted average of
    the other terms, times 100.

    Drivable-area compliance is nuPlan's: 1 when the episode's ``max_offroad_excursion`` is at most
    ``drivable_area_tolerance`` (0.3 m, :data:`DRIVABLE_AREA_TOLERANCE`), else 0; a tolerance of 0
    asks that no corner ever left the drivable area. No at-fault collision is nuPlan's product over
    partner classes: ``max(0, 1 - n_objects / 2)`` for the at-fault collisions with static objects
    (cones, debris) times 0 if any at-fault collision was with a vehicle or a vulnerable road user,
    so a single collision with a static object scores 0.5, two score 0 (1 without at-fault collisions).

    Ego progress and making progress compare the ego's progress along the lanes it drives with a
    reference. With ``reference_progress`` (``terrazero eval``'s default, "idm") the reference is the
    IDM driver from the ego's start in the same scene for as many steps (nuPlan compares with the
    logged expert from the same start), and the ratio is nuPlan's: 0 when the ego went backwards, else
    ``min(1, max(ego, 2 m) / max(reference, 2 m))`` (:data:`PROGRESS_FLOOR`), so waiting in a queue
    where the reference waits too is not penalized. Without it ("limit") the reference is the
    engine's ``reference_progress`` column, a driver at the posted limit of the lane under the ego,
    and the ratio ``ego / reference`` (1 when the reference is 0): a reference traffic can make
    unreachable, kept as a fallback for recorded rows. Making progress needs a ratio of at least 0.2.

    Where ours differs from nuPlan:

    - the progress reference is an IDM driver rather than a human expert, and it drives its own route
      over the lane graph (random successors at lane ends) rather than the ego's, with progress
      measured along whatever lane lies under each car rather than along the expert's route;
    - driving direction uses the whole episode's wrong-way distance (not a 1 s window);
    - the drivable area is what the road edges bound, less the sidewalks, rather than nuPlan's
      drivable-area map layer and lane polygons, and nuPlan also excuses a corner within the
      tolerance of the lane under the ego's centre; the excursion is measured only while the box touches an edge or a sidewalk (a box
      entirely past every edge is neither off-road nor measured), and where the engine's off-road
      consequence removes the car at its first touch (the default; ``EngineConfig.offroad_tolerance``
      defers that event) the excursion cannot grow past that step; a corner exactly at the tolerance
      is compliant here and a violation in nuPlan (a boundary case of measure zero);
    - collisions are counted by onset (a new contact after a step without any), not once per
      collided track, so a partner touched while another contact lasts is not counted, and an onset
      with several at-fault partners counts once, as a vehicle collision unless all of them are
      static objects; a lateral contact is the fault of whichever car closed the gap across the
      road, where nuPlan faults the ego when it straddles lanes or leaves the drivable area;
    - TTC counts every agent ahead (nuPlan also skips agents it projects as not at fault);
    - red-light and stop-sign compliance is an added multiplier."""
    r = np.asarray(rows, np.float64)
    if r.ndim != 2 or r.shape[1] != len(EPISODE_METRICS):
        raise ValueError(f"episode metric rows must be [n, {len(EPISODE_METRICS)}] (EPISODE_METRICS), got {r.shape}")
    if not dt > 0:
        raise ValueError(f"dt must be positive, got {dt}")
    if isinstance(drivable_area_tolerance, bool) or not (isinstance(drivable_area_tolerance, (int, float, np.floating))
                                                         and math.isfinite(drivable_area_tolerance)
                                                         and drivable_area_tolerance >= 0):
        raise ValueError(f"drivable_area_tolerance must be a finite distance >= 0 (m), got {drivable_area_tolerance!r}")
    c = {name: r[:, i] for i, name in enumerate(EPISODE_METRICS)}
    duration = np.maximum(c["steps"], 1.0) * dt
    if reference_progress is None:
        ref = c["reference_progress"]
        ratio = np.where(ref > 1e-6, c["progress"] / np.where(ref > 1e-6, ref, 1.0), 1.0)
    else:
        ref = np.asarray(reference_progress, np.float64)
        if ref.shape != (r.shape[0],) or not np.isfinite(ref).all():
            raise ValueError(f"reference_progress must be {r.shape[0]} finite values (one per row), got "
                             f"shape {ref.shape}")
        ego = c["progress"]
        ratio = np.where(ego < 0, 0.0, np.maximum(ego, PROGRESS_FLOOR) / np.maximum(ref, PROGRESS_FLOOR))
    ww = c["wrong_way_distance"]
    out: dict[str, np.ndarray] = {
        "no_at_fault_collision": _no_at_fault_collision(c["at_fault_collisions"], c["at_fault_object_collisions"]),
        "drivable_area_compliance": (c["max_offroad_excursion"] <= drivable_area_tolerance).astype(float),
        "driving_direction_compliance": np.where(ww <= WRONG_WAY_OK, 1.0, np.where(ww <= WRONG_WAY_HALF, 0.5, 0.0)),
        "making_progress": (ratio >= MIN_PROGRESS_RATIO).astype(float),
        "traffic_control_compliance": ((c["red_lights"] + c["stop_signs"]) == 0).astype(float),
        "ttc_compliance": (c["ttc_violation_steps"] == 0).astype(float),
        "ego_progress": np.clip(ratio, 0.0, 1.0),
        "speed_limit_compliance": np.clip(1.0 - c["overspeed_integral"] / (MAX_OVERSPEED * duration), 0.0, 1.0),
        "comfort": (c["comfort_steps"] == 0).astype(float),
    }
    mult = np.prod([out[k] for k in SCORE_MULTIPLIERS], axis=0)
    avg = sum(w * out[k] for k, w in SCORE_WEIGHTS.items()) / sum(SCORE_WEIGHTS.values())
    out["score"] = 100.0 * mult * avg
    lim = c["limit_integral"]
    out.update({
        "collision_severity": c["max_impact_speed"],
        "lead_vehicle_risk": c["min_lead_headway"],
        "safety_margin": c["min_gap"],
        "hard_braking": c["hard_brakes"],
        "hard_acceleration": c["hard_accelerations"],
        "red_light_running": c["red_lights"],
        "improper_yellow_entry": c["yellow_entries"],
        "speeding": c["speeding_steps"] / np.maximum(c["steps"], 1.0),
        "speed_efficiency": np.where(lim > 0, c["speed_integral"] / np.where(lim > 0, lim, 1.0), 0.0),
        "stall_time": c["stall_time"],
        "stop_sign_violation": c["stop_signs"],
    })
    if goal_reached is not None:
        out["goal_reached"] = np.asarray(goal_reached, float)
    if returns is not None:
        out["return"] = np.asarray(returns, float)
    return out


def _no_at_fault_collision(at_fault: np.ndarray, with_objects: np.ndarray) -> np.ndarray:
    """nuPlan's at-fault collision multiplier (nuplan-devkit ``EgoAtFaultCollisionStatistics.compute_score``):
    the product over partner classes of ``max(0, 1 - n / (allowance + 1))``, with allowance 0 for
    vehicles and vulnerable road users and :data:`STATIC_OBJECT_COLLISIONS_ALLOWED` for static
    objects. ``at_fault``: all at-fault collisions, ``with_objects``: those with static objects only."""
    if np.any(with_objects > at_fault):
        raise ValueError("at_fault_object_collisions cannot exceed at_fault_collisions (they are a part of them)")
    others = at_fault - with_objects
    objects = np.maximum(0.0, 1.0 - with_objects / (STATIC_OBJECT_COLLISIONS_ALLOWED + 1))
    return np.where(others > 0, 0.0, objects)


# ------------------------------------------------------------------- jackknife and comparisons

def jackknife_interval(values: Any, statistic: Any = None, level: float = 0.95) -> tuple[float, float, float]:
    """Estimate, and the delete-one jackknife interval, of ``statistic`` (default: the mean) over
    per-episode ``values`` (``[n]``, or ``[n, ...]`` rows a custom statistic reads).

    With ``theta_i`` the statistic without episode i and ``theta_dot`` their mean, the standard error
    is ``sqrt((n - 1) / n * sum((theta_i - theta_dot)^2))`` and the interval ``theta +- t * se`` with
    Student's t at ``n - 1`` degrees of freedom (Efron & Tibshirani 1993, ch. 11; for the mean, se is
    s / sqrt(n)). NaN bounds for a single episode."""
    x = np.asarray(values, float)
    n = x.shape[0] if x.ndim else 0
    if n == 0:
        raise ValueError("a jackknife interval needs at least one episode")
    stat = statistic if statistic is not None else (lambda v: float(np.mean(v, axis=0)))
    theta = float(stat(x))
    if n == 1:
        return theta, math.nan, math.nan
    if statistic is None:
        loo = (x.sum(axis=0) - x) / (n - 1)
    else:
        loo = np.array([stat(np.delete(x, i, axis=0)) for i in range(n)], float)
    se = math.sqrt((n - 1) / n * float(np.sum((loo - loo.mean()) ** 2)))
    half = t_quantile(n - 1, level) * se
    return theta, theta - half, theta + half


def compare(per_a: dict[str, Any], per_b: dict[str, Any], keys: Any = None) -> dict[str, dict[str, Any]]:
    """Paired comparison of two policies' per-episode metrics on the same episodes (same seeds and
    scenes, episode i of A paired with episode i of B): for each metric, both means, their difference
    A - B and its delete-one jackknife 95% interval over the paired differences; ``significant`` when
    the interval excludes zero."""
    keys = [k for k, *_ in CLOSED_LOOP_METRICS if k in per_a and k in per_b] if keys is None else list(keys)
    rows: dict[str, dict[str, Any]] = {}
    info = {k: (label, group, better) for k, label, group, better in CLOSED_LOOP_METRICS}
    for k in keys:
        a, b = np.asarray(per_a[k], float), np.asarray(per_b[k], float)
        if a.shape != b.shape:
            raise ValueError(f"metric {k!r}: A has {a.shape[0]} episodes, B {b.shape[0]}; a paired comparison "
                             "needs the same episodes")
        d, lo, hi = jackknife_interval(a - b)
        _, a_lo, a_hi = jackknife_interval(a)
        _, b_lo, b_hi = jackknife_interval(b)
        label, group, better = info.get(k, (k, "other", True))
        sig = bool(not math.isnan(lo) and (lo > 0 or hi < 0))
        rows[k] = {"label": label, "group": group, "higher_is_better": better, "a": float(a.mean()),
                   "b": float(b.mean()), "a_ci": [a_lo, a_hi], "b_ci": [b_lo, b_hi], "diff": d,
                   "ci_low": lo, "ci_high": hi, "significant": sig, "n": int(a.shape[0])}
    return rows


def format_comparison(rows: dict[str, dict[str, Any]], name_a: str = "A", name_b: str = "B") -> str:
    """The rows of :func:`compare` as an aligned text table; ``*`` marks a difference whose 95%
    jackknife interval excludes zero."""
    label_w = max(len("metric"), *(len(r["label"]) for r in rows.values()))
    lines = [f"{'metric':<{label_w}}  {name_a[:10]:>10}  {name_b[:10]:>10}  {'A - B':>9}  95% jackknife CI"]
    lines.append("-" * (len(lines[0]) + 8))
    for r in rows.values():
        ci = "n/a" if math.isnan(r["ci_low"]) else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        lines.append(f"{r['label']:<{label_w}}  {r['a']:>10.3f}  {r['b']:>10.3f}  {r['diff']:>+9.3f}  {ci}"
                     + ("  *" if r["significant"] else ""))
    n = next(iter(rows.values()))["n"] if rows else 0
    lines.append(f"{n} paired episodes (same seeds and scenes). *: the interval excludes zero. Not applicable "
                 f"here: {', '.join(NOT_APPLICABLE)} (see terrazero_env.evaluation.metrics.NOT_APPLICABLE).")
    return "\n".join(lines)


def format_closed_loop(per: dict[str, Any]) -> str:
    """One policy's closed-loop metrics (``closed_loop_metrics`` output): mean and delete-one jackknife
    95% interval per metric, then the FAST metrics that do not apply."""
    info = {k: label for k, label, *_ in CLOSED_LOOP_METRICS}
    keys = [k for k in info if k in per]
    label_w = max(len("closed-loop metric"), *(len(info[k]) for k in keys))
    lines = [f"{'closed-loop metric':<{label_w}}  {'mean':>9}  95% jackknife CI", "-" * (label_w + 36)]
    for k in keys:
        m, lo, hi = jackknife_interval(per[k])
        ci = "n/a" if math.isnan(lo) else f"[{lo:.3f}, {hi:.3f}]"
        lines.append(f"{info[k]:<{label_w}}  {m:>9.3f}  {ci}")
    lines.append("score: nuPlan-style closed-loop score (terrazero_env.evaluation.metrics.closed_loop_metrics). Not applicable: "
                 + "; ".join(f"{k}: {why}" for k, why in NOT_APPLICABLE.items()))
    return "\n".join(lines)
