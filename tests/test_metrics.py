"""``terrazero_env.metrics``: the evaluation intervals match scipy's, the rows and table report a
counter the engine lacks instead of inventing it, and the module works without torch."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.metrics import format_table, mean_interval, summarize, t_quantile, wilson_interval


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
    code = ("import sys; import terrazero_env.metrics as m; m.summarize({'events': {}, 'progress': [1.0], "
            "'return': [0.0]}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
