"""``terrazero_env.evaluation.metrics``: the evaluation intervals match scipy's, the rows and table report a
counter the engine lacks instead of inventing it, and the module works without torch."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.evaluation.metrics import (
    CLOSED_LOOP_METRICS,
    EPISODE_METRICS,
    closed_loop_metrics,
    compare,
    format_comparison,
    format_table,
    jackknife_interval,
    mean_interval,
    summarize,
    t_quantile,
    wilson_interval,
)


def test_wilson_interval_matches_hand_value_and_scipy():
    # 3 of 10 by hand: p = .3, z = 1.96: centre (.3 + .19208) / 1.38415 = .35548,
    # half 1.96 * sqrt(.021 + .0096) / 1.38415 = .24769.
    lo, hi = wilson_interval(3, 10)
    assert lo == pytest.approx(0.107791, abs=1e-6) and hi == pytest.approx(0.603222, abs=1e-6)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(0, 1), (1, 1), (0, 7), (2, 7), (7, 7), (13, 40), (250, 1000)]:
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)
    with pytest.raises(ValueError, match="at least one episode"):
        wilson_interval(3, 0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_t_quantile_matches_scipy_t_ppf_across_the_series_and_expansion_ranges():
    assert t_quantile(1) == pytest.approx(12.7062, abs=1e-4) and t_quantile(9) == pytest.approx(2.2622, abs=1e-4)
    stats = pytest.importorskip("scipy.stats")
    # df <= 200: the exact series inverted by bisection; above: the Cornish-Fisher expansion.
    for df in (1, 2, 3, 4, 5, 9, 30, 199, 200, 201, 500, 10_000):
        assert t_quantile(df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)
    for level in (0.5, 0.9, 0.99):
        for df in (1, 6, 250):
            assert t_quantile(df, level) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-7)
    with pytest.raises(ValueError, match="df must be positive"):
        t_quantile(0)


def test_mean_interval_is_the_t_interval_and_nan_for_one_value():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    m, lo, hi = mean_interval(x)
    half = t_quantile(3) * np.std(x, ddof=1) / 2.0
    assert (m, lo, hi) == pytest.approx((3.75, 3.75 - half, 3.75 + half))
    m1, lo1, hi1 = mean_interval(np.array([5.0]))
    assert m1 == 5.0 and math.isnan(lo1) and math.isnan(hi1)
    with pytest.raises(ValueError, match="at least one episode"):
        mean_interval(np.array([]))


def test_a_counter_the_engine_lacks_is_reported_not_invented():
    names = [n for n in core.COUNTER_NAMES if n != "red_light"]
    per = {"events": {n: [True, False, False] for n in names}, "progress": [0.5, 0.1, -0.2],
           "return": [1.0, 2.0, 4.0]}
    rows = summarize(per)
    assert rows["red_light_rate"]["value"] is None and "red_light" in rows["red_light_rate"]["note"]
    assert rows["collision_rate"]["count"] == 1
    assert rows["mean_return"]["value"] == pytest.approx(7 / 3)
    half = t_quantile(2) * np.std([1.0, 2.0, 4.0], ddof=1) / math.sqrt(3)
    assert rows["mean_return"]["ci_high"] == pytest.approx(7 / 3 + half)
    table = format_table({"rows": rows})
    line = next(ln for ln in table.splitlines() if ln.startswith("red-light violation rate"))
    assert "n/a" in line and "not measured" in line


def test_metrics_import_without_torch():
    code = ("import sys; import terrazero_env.evaluation.metrics as m; m.summarize({'events': {}, 'progress': [1.0], "
            "'return': [0.0]}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------- closed-loop metrics and jackknife

def test_jackknife_interval_equals_a_hand_computation() -> None:
    """x = [1, 2, 4]: leave-one-out means 3, 2.5, 1.5 (mean 7/3); se^2 = 2/3 * (4/9 + 1/36 + 25/36)
    = 7/9; the interval is 7/3 +- t(2) * sqrt(7/9), with t(2) = 4.302652729911275."""
    m, lo, hi = jackknife_interval([1.0, 2.0, 4.0])
    half = 4.302652729911275 * math.sqrt(7 / 9)
    assert m == pytest.approx(7 / 3)
    assert lo == pytest.approx(7 / 3 - half, rel=1e-9)
    assert hi == pytest.approx(7 / 3 + half, rel=1e-9)


def test_jackknife_of_a_ratio_statistic_uses_leave_one_out_ratios() -> None:
    """Statistic sum(x)/sum(y) on rows (x, y) = (1, 2), (3, 4), (2, 2): leave-one-out ratios 5/6, 3/4,
    4/6; checked against the formula written out."""
    rows = np.array([[1.0, 2.0], [3.0, 4.0], [2.0, 2.0]])
    m, lo, hi = jackknife_interval(rows, lambda v: v[:, 0].sum() / v[:, 1].sum())
    loo = np.array([5 / 6, 3 / 4, 4 / 6])
    se = math.sqrt(2 / 3 * np.sum((loo - loo.mean()) ** 2))
    assert m == pytest.approx(6 / 8)
    assert (lo, hi) == pytest.approx((0.75 - 4.302652729911275 * se, 0.75 + 4.302652729911275 * se))


def test_jackknife_of_the_mean_equals_the_student_t_interval() -> None:
    """For the mean the jackknife standard error is s / sqrt(n), so both intervals coincide."""
    x = np.random.default_rng(0).normal(size=25)
    assert jackknife_interval(x) == pytest.approx(mean_interval(x))


def _rows(n: int, **cols: float) -> np.ndarray:
    r = np.zeros((n, len(EPISODE_METRICS)))
    r[:, EPISODE_METRICS.index("steps")] = 100
    r[:, EPISODE_METRICS.index("progress")] = 100.0
    r[:, EPISODE_METRICS.index("reference_progress")] = 100.0
    for k, v in cols.items():
        r[:, EPISODE_METRICS.index(k)] = v
    return r


def test_closed_loop_score_combines_multipliers_and_weighted_average() -> None:
    """A clean episode scores 100; an at-fault collision zeroes it; one TTC violation removes its
    weight 5 of 16; 5 m against traffic halves it; half the reference progress costs 2.5 of 16."""
    dt = 0.1
    assert closed_loop_metrics(_rows(1), dt)["score"][0] == pytest.approx(100.0)
    assert closed_loop_metrics(_rows(1, at_fault_collisions=1), dt)["score"][0] == 0.0
    assert closed_loop_metrics(_rows(1, collisions=1), dt)["score"][0] == pytest.approx(100.0)
    assert closed_loop_metrics(_rows(1, ttc_violation_steps=3), dt)["score"][0] == pytest.approx(100 * 11 / 16)
    assert closed_loop_metrics(_rows(1, wrong_way_distance=5.0), dt)["score"][0] == pytest.approx(50.0)
    assert closed_loop_metrics(_rows(1, progress=50.0), dt)["score"][0] == pytest.approx(100 * 13.5 / 16)
    assert closed_loop_metrics(_rows(1, progress=10.0), dt)["score"][0] == 0.0          # not making progress
    # 10 s at 2.23 m/s over the limit exhausts the speed-limit term: 100 * 12 / 16
    assert closed_loop_metrics(_rows(1, overspeed_integral=22.3), dt)["score"][0] == pytest.approx(75.0)


def test_a_policy_compared_with_itself_has_intervals_containing_zero() -> None:
    """Identical per-episode values give a zero difference with a zero-width interval: nothing is
    marked, for every metric."""
    rng = np.random.default_rng(1)
    rows = _rows(40)
    rows[:, EPISODE_METRICS.index("min_gap")] = rng.uniform(0, 20, 40)
    rows[:, EPISODE_METRICS.index("at_fault_collisions")] = rng.integers(0, 2, 40)
    per = closed_loop_metrics(rows, 0.1, goal_reached=rng.integers(0, 2, 40), returns=rng.normal(size=40))
    table = compare(per, per)
    assert set(table) == {k for k, *_ in CLOSED_LOOP_METRICS}
    for row in table.values():
        assert row["ci_low"] <= 0.0 <= row["ci_high"] and not row["significant"]


def test_comparison_marks_a_real_difference() -> None:
    """B always has one more at-fault collision-free episode in three: the score difference is
    significant and its sign says A is worse."""
    rows_a = _rows(30, at_fault_collisions=1)
    rows_a[::3, EPISODE_METRICS.index("at_fault_collisions")] = 0
    rows_b = _rows(30)
    t = compare(closed_loop_metrics(rows_a, 0.1), closed_loop_metrics(rows_b, 0.1))
    assert t["score"]["significant"] and t["score"]["ci_high"] < 0
    assert "*" in format_comparison(t)
