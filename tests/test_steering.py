"""The bicycle models' steering as state (``ClassSpec.max_steer_rate``): the wheels move at a bounded
rate, the lateral acceleration follows from the angle, signs snap at zero, and cars placed on a curve
start with the curve's steering. Each property is checked on the engine's own step
(``dynamics_step_batch`` runs ``dynamics.step_dynamics``) against a closed-form expectation, and the
earlier, rate-free model (``max_steer_rate: null``) is shown to break it where BENCHMARKS.md measured it did."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from terrazero_env import _engine, load_config
from terrazero_env import engine as core
from terrazero_env.config import AgentType, DynamicsModel, EngineConfig

COLS = {name: i for i, name in enumerate(_engine.DYNAMICS_STATE)}
DT = 0.1


def _params(cls: AgentType = AgentType.CAR, **spec_overrides) -> np.ndarray:
    cfg = EngineConfig()
    if spec_overrides:
        classes = dict(cfg.classes)
        classes[cls] = dataclasses.replace(classes[cls], **spec_overrides)
        cfg = dataclasses.replace(cfg, classes=classes)
    return cfg.tables()["class_params"][int(cls)]


def _state(speed: float, steer: float = 0.0, length: float = 4.5, n: int = 1, kin=(1.0, 1.0, 1.0, 1.0)) -> np.ndarray:
    st = np.zeros((n, len(COLS)))
    st[:, COLS["speed"]] = speed
    st[:, COLS["steer"]] = steer
    st[:, COLS["length"]] = length
    st[:, COLS["wheelbase"]] = 0.6 * length
    st[:, COLS["a_lat"]] = speed ** 2 * np.tan(steer) / (0.6 * length)
    st[:, COLS["c_throttle"]:COLS["c_vel"] + 1] = kin
    return st


def _run(st, params, model, u_long, u_lat, steps):
    """Roll ``steps`` steps; ``u_long``/``u_lat`` are constants or per-step sequences."""
    out = [st.copy()]
    for k in range(steps):
        ul = u_long[k] if np.ndim(u_long) else u_long
        ua = u_lat[k] if np.ndim(u_lat) else u_lat
        st, _ = _engine.dynamics_step_batch(st, ul, ua, params, int(model))
        out.append(st.copy())
    return np.stack(out)  # [steps + 1, N, cols]


def _rear_axle_centre(st0: np.ndarray) -> tuple[np.ndarray, float]:
    """Centre and radius of the circle the reference point follows at a fixed steering angle."""
    steer, wb, h = st0[COLS["steer"]], st0[COLS["wheelbase"]], st0[COLS["heading"]]
    r = wb / np.tan(steer)
    centre = np.array([st0[COLS["x"]] - r * np.sin(h), st0[COLS["y"]] + r * np.cos(h)])
    return centre, abs(r)


def test_braking_in_a_turn_at_a_constant_steering_angle_keeps_the_turn_radius():
    params = _params()
    st0 = _state(speed=9.0, steer=0.12)
    traj = _run(st0, params, DynamicsModel.BICYCLE_JERK, u_long=-15.0, u_lat=0.0, steps=40)
    speeds = traj[:, 0, COLS["speed"]]
    assert speeds[-1] < 3.0, "the car should have braked hard"
    np.testing.assert_allclose(traj[:, 0, COLS["steer"]], 0.12, rtol=0, atol=1e-12)
    centre, radius = _rear_axle_centre(st0[0])
    d = np.hypot(traj[:, 0, COLS["x"]] - centre[0], traj[:, 0, COLS["y"]] - centre[1])
    np.testing.assert_allclose(d, radius, rtol=1e-9)


def test_without_the_rate_limit_braking_in_a_turn_tightens_it():
    """The earlier model keeps the lateral acceleration, so slowing down turns the wheels further."""
    params = _params(max_steer_rate=None)
    st0 = _state(speed=9.0, steer=0.12)
    traj = _run(st0, params, DynamicsModel.BICYCLE_JERK, u_long=-15.0, u_lat=0.0, steps=20)
    assert traj[:, 0, COLS["steer"]].max() > 0.12 + 0.1


@pytest.mark.parametrize("speed", [0.0, 0.3, 1.0, 2.0, 8.0])
def test_a_full_lateral_jerk_turns_the_wheels_by_at_most_the_rate_limit(speed):
    params = _params()
    rate = params[list(_engine.CLASS_PARAMS).index("max_steer_rate")]
    assert rate == pytest.approx(0.6)
    lat = max(EngineConfig().classes[AgentType.CAR].action_lat)
    traj = _run(_state(speed=speed), params, DynamicsModel.BICYCLE_JERK, u_long=0.0, u_lat=lat, steps=15)
    steer = traj[:, 0, COLS["steer"]]
    assert np.all(np.abs(np.diff(steer)) <= rate * DT + 1e-12)
    assert steer[-1] > 0.0
    if speed <= 1.0:  # a slow car asks for full lock at once; the wheels get there at the rate
        np.testing.assert_allclose(np.diff(steer)[:5], rate * DT, rtol=1e-12)


def test_without_the_rate_limit_one_lateral_jerk_step_at_1_mps_swings_the_wheels():
    params = _params(max_steer_rate=None)
    traj = _run(_state(speed=1.0), params, DynamicsModel.BICYCLE_JERK, u_long=0.0, u_lat=4.0, steps=1)
    assert abs(traj[1, 0, COLS["steer"]]) > np.radians(10)


def test_the_realised_lateral_acceleration_follows_from_the_limited_angle():
    params = _params()
    traj = _run(_state(speed=6.0, n=1), params, DynamicsModel.BICYCLE_JERK, u_long=[4.0] * 6 + [-4.0] * 6,
                u_lat=[4.0] * 4 + [0.0] * 4 + [-4.0] * 4, steps=12)
    v_prev, v_next = traj[:-1, 0, COLS["speed"]], traj[1:, 0, COLS["speed"]]
    v_mid = 0.5 * (v_prev + v_next)
    steer, wb = traj[1:, 0, COLS["steer"]], traj[1:, 0, COLS["wheelbase"]]
    np.testing.assert_allclose(traj[1:, 0, COLS["a_lat"]], v_mid ** 2 * np.tan(steer) / wb, rtol=1e-12)
    np.testing.assert_allclose(traj[1:, 0, COLS["yaw_rate"]], v_mid * np.tan(steer) / wb, rtol=1e-12)


@pytest.mark.parametrize("model,cls", [(DynamicsModel.BICYCLE_JERK, AgentType.CAR),
                                       (DynamicsModel.BICYCLE_TIRE, AgentType.TRUCK),
                                       (DynamicsModel.BICYCLE_ACCEL, AgentType.CYCLIST)])
def test_a_straight_run_with_zero_lateral_action_has_exactly_zero_yaw(model, cls):
    params = _params(cls)
    rng = np.random.default_rng(0)
    long_grid = EngineConfig().classes[cls].action_long
    u_long = rng.choice(long_grid, size=80)
    traj = _run(_state(speed=3.0, kin=(1.2, 0.7, 1.1, 0.9)), params, model, u_long=u_long, u_lat=0.0, steps=80)
    assert np.all(traj[:, 0, COLS["heading"]] == 0.0)
    assert np.all(traj[:, 0, COLS["y"]] == 0.0)
    assert np.all(traj[:, 0, COLS["yaw_rate"]] == 0.0)
    assert np.abs(np.diff(traj[:, 0, COLS["x"]])).max() > 0.1  # it did drive


def test_a_braking_car_stops_at_exactly_zero_and_a_zero_jerk_holds_it():
    params = _params()
    u_long = [-15.0] * 5 + [0.0] * 20
    traj = _run(_state(speed=2.0), params, DynamicsModel.BICYCLE_JERK, u_long=u_long, u_lat=0.0, steps=len(u_long))
    v = traj[:, 0, COLS["speed"]]
    stop = int(np.argmax(v == 0.0))
    assert stop > 0 and np.all(v[stop:] == 0.0), v
    assert np.all(v >= 0.0)
    # the earlier model carries the braking through zero into reverse
    old = _run(_state(speed=2.0), _params(max_steer_rate=None), DynamicsModel.BICYCLE_JERK, u_long=u_long,
               u_lat=0.0, steps=len(u_long))
    assert old[:, 0, COLS["speed"]].min() < 0.0


def test_a_lateral_acceleration_that_would_change_sign_stops_at_zero_and_the_wheels_straighten():
    params = _params()
    st0 = _state(speed=5.0, steer=0.05)
    traj = _run(st0, params, DynamicsModel.BICYCLE_JERK, u_long=0.0, u_lat=-4.0, steps=12)
    steer = traj[:, 0, COLS["steer"]]
    first = int(np.argmax(steer <= 0.0))
    assert first > 0 and steer[first] == 0.0  # exactly straight on the way, never jumped across
    assert steer[-1] < 0.0  # held lateral jerk then turns the other way
    np.testing.assert_array_less(np.diff(steer), 1e-15)


@pytest.mark.parametrize("model,cls,target", [(DynamicsModel.BICYCLE_TIRE, AgentType.TRUCK, 0.3),
                                              (DynamicsModel.BICYCLE_ACCEL, AgentType.CYCLIST, 0.5)])
def test_the_steering_angle_models_reach_their_target_at_the_class_rate(model, cls, target):
    params = _params(cls)
    rate = EngineConfig().classes[cls].max_steer_rate
    speed = 1.5  # below the tire model's kinematic threshold, so both run the kinematic bicycle
    traj = _run(_state(speed=speed, length=9.0 if cls == AgentType.TRUCK else 1.8), params, model,
                u_long=0.0, u_lat=target, steps=20)
    steer = traj[:, 0, COLS["steer"]]
    steps_needed = int(np.ceil(target / (rate * DT) - 1e-9))
    np.testing.assert_allclose(steer[1:steps_needed], np.arange(1, steps_needed) * rate * DT, rtol=1e-12)
    np.testing.assert_allclose(steer[steps_needed:], target, rtol=1e-12)


def test_the_rate_limit_is_validated_and_null_restores_the_earlier_model():
    with pytest.raises(ValueError, match="ClassSpec.max_steer_rate"):
        load_config("quick", **{"classes.car.max_steer_rate": -0.1})
    cfg = load_config("quick", **{"classes.car.max_steer_rate": None})
    assert cfg.classes[AgentType.CAR].max_steer_rate is None
    assert cfg.tables()["class_params"][int(AgentType.CAR)][list(_engine.CLASS_PARAMS).index("max_steer_rate")] < 0


def _centerline_curvature(pts: np.ndarray, x: float, y: float) -> float:
    """Curvature (1/m, + left) of a polyline around its point nearest (x, y): the heading change over
    the 4 m about that point, from the points themselves (an oracle independent of the engine)."""
    seg = np.diff(pts[:, :2], axis=0)
    ln = np.hypot(seg[:, 0], seg[:, 1])
    s0 = np.concatenate([[0.0], np.cumsum(ln)])
    d = pts[:-1, :2] - [x, y]
    t = np.clip(-(d * seg).sum(1) / np.maximum(ln ** 2, 1e-12), 0, 1)
    foot = pts[:-1, :2] + t[:, None] * seg
    i = int(np.argmin(np.hypot(*(foot - [x, y]).T)))
    s = s0[i] + t[i] * ln[i]
    heads = np.arctan2(seg[:, 1], seg[:, 0])

    def head_at(q):
        return heads[min(max(int(np.searchsorted(s0, q, side="right")) - 1, 0), len(heads) - 1)]

    a, b = max(s - 2.0, 0.0), min(max(s - 2.0, 0.0) + 4.0, s0[-1])
    if b - a < 1e-6:
        return 0.0
    return float(np.angle(np.exp(1j * (head_at(b - 1e-9) - head_at(a))))) / (b - a)


def test_cars_placed_on_a_curve_start_with_the_steering_the_curve_needs():
    from terrazero_env.maps.sources import load_built

    cfg = load_config("quick", num_worlds=16, **{"classes.car.max_steer_rate": 0.6})
    lanes = load_built(cfg.maps[0]).lanes.centerline
    engine = core.Engine(cfg)
    engine.reset(seeds=np.arange(16))
    wb_ratio = cfg.classes[AgentType.CAR].wheelbase_ratio
    got, want = [], []
    for w in range(16):
        st = engine.agent_states(w)
        for i in np.flatnonzero((st["role"] == 0) & (st["lane"] >= 0)):
            wb = st["length"][i] * wb_ratio
            kappa = np.tan(st["steer"][i]) / wb
            # the yaw rate and lateral acceleration at the start agree with the angle at the car's speed
            assert st["yaw_rate"][i] == pytest.approx(st["speed"][i] * kappa, rel=1e-12, abs=1e-15)
            assert st["a_lat"][i] == pytest.approx(st["speed"][i] ** 2 * kappa, rel=1e-12, abs=1e-15)
            got.append(kappa)
            want.append(_centerline_curvature(lanes.row(int(st["lane"][i])), st["x"][i], st["y"][i]))
    got, want = np.asarray(got), np.asarray(want)
    assert (np.abs(want) > 0.05).sum() >= 3, "some cars of the quick preset start inside a turn"
    assert (got == 0.0).any(), "cars on straights start with straight wheels"
    # the engine measures on the lane it placed the car on; where connectors overlap the lane matched
    # after the reset can be another one, so most (not all) cars agree to within 0.01 1/m
    assert np.mean(np.abs(got - want) <= 0.01 + 0.1 * np.abs(want)) >= 0.9
