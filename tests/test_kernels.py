"""Engine kernels through their batch entry points, without an engine: the IDM acceleration law
against the formula written in NumPy, and the comfort and wrong-way rule checks against hand
computations."""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env import _engine


def _idm_numpy(v, v0, gap, lead_speed, T, a, b, s0, delta):
    """Treiber, Hennecke and Helbing (2000): a (1 - (v/v0)^delta - (s*/s)^2), with the desired gap
    s* = max(s0, s0 + v T + v (v - v_lead) / (2 sqrt(a b))); no interaction term without a leader
    (gap >= 1e8), a gap floored at 0.05 m, and -b for a desired speed of 0."""
    safe_v0 = np.where(v0 > 0, v0, 1.0)
    free = np.where(v0 > 0, a * (1.0 - (v / safe_v0) ** delta), -b)
    s_star = np.maximum(s0, s0 + v * T + v * (v - lead_speed) / (2.0 * np.sqrt(a * b)))
    interaction = np.where(gap < 1e8, a * (s_star / np.maximum(gap, 0.05)) ** 2, 0.0)
    return free - interaction


def test_idm_accel_matches_the_numpy_formula_on_random_states():
    rng = np.random.default_rng(7)
    n = 5000
    args = dict(
        v=rng.uniform(0.0, 35.0, n), v0=np.where(rng.random(n) < 0.05, 0.0, rng.uniform(1.0, 35.0, n)),
        gap=np.where(rng.random(n) < 0.2, 1e9, rng.uniform(0.0, 120.0, n)), lead_speed=rng.uniform(-2.0, 35.0, n),
        time_headway=rng.uniform(0.5, 2.5, n), max_accel=rng.uniform(0.5, 3.0, n),
        comfort_decel=rng.uniform(1.0, 4.0, n), min_gap=rng.uniform(1.0, 4.0, n), delta=rng.choice([2.0, 4.0], n),
    )
    got = _engine.idm_accel_batch(**args)
    want = _idm_numpy(*args.values())
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_idm_accel_hand_cases():
    # v, v0, gap, lead_speed, T, a, b, s0, delta
    cases = np.array([
        [0.0, 10.0, 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],    # standing, free road: full acceleration a
        [10.0, 10.0, 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],   # at the desired speed: 0
        [0.0, 10.0, 2.0, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],    # standing at the minimum gap s0: 0
        [5.0, 10.0, 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],    # half the desired speed: a (1 - 1/16)
        [0.0, 0.0, 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],     # no desired speed: -b
        [0.0, 10.0, 0.0, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0],    # gap 0 is floored at 0.05: 1 - (2/0.05)^2
    ])
    got = _engine.idm_accel_batch(*cases.T)
    np.testing.assert_allclose(got, [1.0, 0.0, 0.0, 15.0 / 16.0, -2.0, 1.0 - 40.0 ** 2], rtol=1e-14, atol=1e-14)


def test_idm_accel_broadcasts_and_rejects_bad_gains():
    out = _engine.idm_accel_batch(np.zeros((2, 3)), 10.0, 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0)
    assert out.shape == (2, 3) and np.all(out == 1.0)
    with pytest.raises(ValueError, match="max_accel and comfort_decel"):
        _engine.idm_accel_batch(0.0, 10.0, 1e9, 0.0, 1.5, 0.0, 2.0, 2.0, 4.0)
    with pytest.raises(ValueError, match="broadcast"):
        _engine.idm_accel_batch(np.zeros(2), np.zeros(3), 1e9, 0.0, 1.5, 1.0, 2.0, 2.0, 4.0)


def test_comfort_violations_count_each_limit_exceeded_strictly():
    limits = (2.0, 3.0, 4.0, 5.0)
    rows = np.array([
        [0.0, 0.0, 0.0, 0.0],        # nothing: 0
        [2.5, 0.0, 0.0, 0.0],        # longitudinal acceleration only: 1
        [2.0, 3.0, 4.0, 5.0],        # exactly at every limit is allowed: 0
        [-2.5, -3.5, 4.1, -5.1],     # magnitudes count, every limit exceeded: 4
        [0.0, 3.01, 0.0, 6.0],       # lateral acceleration and lateral jerk: 2
    ])
    got = _engine.comfort_violations_batch(*rows.T, limits=limits)
    np.testing.assert_array_equal(got, [0, 1, 0, 4, 2])
    assert got.dtype == np.int32
    with pytest.raises(ValueError, match="4 values"):
        _engine.comfort_violations_batch(0.0, 0.0, 0.0, 0.0, limits=(1.0, 2.0))


def test_wrong_way_needs_a_lane_outside_intersections_a_large_residual_and_motion():
    max_angle = np.pi / 2
    # heading residual, speed, on a lane, lane in an intersection -> wrong way?
    rows = [
        (3.0, 5.0, True, False, True),     # against the lane, moving
        (-3.0, 5.0, True, False, True),    # the sign of the residual does not matter
        (3.0, -5.0, True, False, True),    # nor the sign of the speed (reversing)
        (3.0, 0.4, True, False, False),    # too slow (turning on the spot)
        (3.0, 5.0, True, True, False),     # inside an intersection any heading is legal
        (3.0, 5.0, False, False, False),   # off every lane
        (1.0, 5.0, True, False, False),    # residual under the threshold
        (max_angle, 5.0, True, False, False),  # at the threshold exactly: not above it
    ]
    res, speed, on_lane, inter, want = map(np.array, zip(*rows))
    got = _engine.wrong_way_batch(res, speed, on_lane, inter, max_angle)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.bool_
