"""Evaluation statistics without torch: the rate and mean rows of ``terrazero eval``, their 95%
confidence intervals (Wilson score for rates, Student t for means, with a series t quantile so that
nothing beyond the standard library and numpy is needed) and the text table that prints them.

This module owns the numbers computed from per-episode outcomes; producing those outcomes (rolling a
policy out) lives in :mod:`terrazero_env.agents.evaluate`, which imports from here. The env layer and
the CLI can use it without importing torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["MEANS", "RATES", "Z95", "format_table", "mean_interval", "summarize", "t_quantile", "wilson_interval"]

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
