"""Ego progress against the IDM driver from the same start: ``Engine.hand_to_idm``
turns a controlled car into an IDM vehicle whose progress the slot's metric row keeps; on a free road
that progress is the posted limit times the time, less IDM's acceleration phase; in a jam it is small,
so a policy that waits too keeps its score; evaluation with the IDM reference is deterministic and
leaves the policy's episodes as they are; the posted-limit fallback scores as the engine's column."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import straight_road
from terrazero_env.agents import PPO
from terrazero_env.agents.evaluate import evaluate, load_checkpoint

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, IdmConfig, InitConfig
from terrazero_env.config.io import dump_config, load_config
from terrazero_env.evaluation.metrics import MIN_PROGRESS_RATIO, PROGRESS_FLOOR, closed_loop_metrics
from terrazero_env.maps import build

torch.set_num_threads(1)

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
COL = {name: i for i, name in enumerate(core.EPISODE_METRIC_NAMES)}
CAR = {"cls": AgentType.CAR, "length": 4.5, "width": 2.0, "kin": (1, 1, 1, 1)}
ROLE_IDM = 3


def _engine(worlds: int = 1) -> core.Engine:
    cfg = EngineConfig(num_worlds=worlds, slots_per_world=2, max_agents_per_world=4, consequences=NONE,
                       init=InitConfig(num_agents=(1, 2), randomize_kinematics=False))
    cfg = cfg.with_overrides(idm=IdmConfig(reroll_prob=0.0))  # the default mode only
    return core.Engine(cfg, maps=build(straight_road(600.0)))


def _hold(e: core.Engine) -> int:
    vals = e.action_values(AgentType.CAR)
    return int(np.nonzero((vals == 0).all(axis=1))[0][0])


def _limit(e: core.Engine, row: int) -> float:
    """The posted limit along slot ``row``'s drive: its posted-limit reference over its time."""
    m = e.episode_metrics[row]
    return float(m[COL["reference_progress"]] / (m[COL["steps"]] * e.config.dt))


def test_a_handed_car_follows_its_lane_and_makes_progress_on_a_free_road() -> None:
    e = _engine()
    e.set_scene(0, [{**CAR, "x": 20.0, "y": -1.6, "heading": 0.03, "speed": 3.0, "goal": (500.0, -1.75)}])
    assert e.valid[0]
    e.hand_to_idm(0, 0)
    assert not e.valid[0] and e.agents[0, 0]["role"] == ROLE_IDM and e.episode_metrics[0, COL["steps"]] == 0
    ys = []
    for _ in range(150):
        e.step(np.zeros(2, np.int32))   # the handed slot reads no action (any value is accepted)
        ys.append(float(e.agents[0, 0]["y"]))
        assert not e.valid[0]
    a, row = e.agents[0, 0], e.episode_metrics[0]
    assert abs(ys[-1] + 1.75) < 0.1 and max(abs(y + 1.75) for y in ys) < 0.4  # on the east lane's centre
    assert abs(a["heading"]) < 0.02 and a["speed"] > 0.8 * _limit(e, 0)
    assert row[COL["steps"]] == 150
    assert row[COL["progress"]] == pytest.approx(a["x"] - 20.0, rel=0.01)  # along the lane, here along x


def test_free_road_reference_is_the_limit_times_time_less_the_acceleration_phase() -> None:
    """From the limit the IDM driver keeps it: progress = limit * T; from rest it lags by what IDM's
    free-road law (dv/dt = a (1 - (v / v0)^delta)) loses while accelerating, integrated here."""
    e = _engine(worlds=2)
    steps, dt = 200, float(e.config.dt)
    v0 = 13.4   # the builder's default vehicle limit, checked below
    for w, speed in ((0, v0), (1, 0.0)):
        e.set_scene(w, [{**CAR, "x": 20.0, "y": -1.75, "heading": 0.0, "speed": speed}])
        e.hand_to_idm(w, 0)
    for _ in range(steps):
        e.step()
    T = steps * dt
    assert _limit(e, 0) == pytest.approx(v0, rel=1e-5) and _limit(e, 2) == pytest.approx(v0, rel=1e-5)
    cruising, from_rest = e.episode_metrics[0, COL["progress"]], e.episode_metrics[2, COL["progress"]]
    assert cruising == pytest.approx(v0 * T, rel=0.01)
    idm = e.config.idm
    amax, delta = idm.max_accel[0], idm.delta
    v, x = 0.0, 0.0
    for _ in range(steps * 100):   # a fine Euler integration of the free-road law
        v += amax * (1.0 - (v / v0) ** delta) * dt / 100
        x += v * dt / 100
    assert from_rest == pytest.approx(x, rel=0.03)
    assert v0 * T - from_rest > 0.5 * v0 * v0 / (2 * amax)   # an acceleration phase was paid for


def test_in_a_jam_the_reference_barely_moves_so_a_waiting_policy_keeps_its_progress_score() -> None:
    """A car at rest 2.5 m behind a stopped car: the IDM reference creeps less than nuPlan's 2 m floor,
    so an ego that waits has ratio 1 (making progress) against it, and 0 against the posted limit."""
    e = _engine(worlds=2)
    scene = [{**CAR, "x": 20.0, "y": -1.75, "heading": 0.0, "speed": 0.0, "goal": (500.0, -1.75)},
             {**CAR, "x": 27.0, "y": -1.75, "heading": 0.0, "speed": 0.0, "controlled": False}]
    for w in range(2):
        e.set_scene(w, scene)
    e.hand_to_idm(1, 0)                  # world 1: the reference; world 0: a policy that waits
    hold = _hold(e)
    for _ in range(100):
        e.step(np.full(4, hold, np.int32))
    policy, ref = e.episode_metrics[0:1].astype(np.float64), float(e.episode_metrics[2, COL["progress"]])
    assert 0.0 <= ref < PROGRESS_FLOOR and abs(policy[0, COL["progress"]]) < 0.1
    vs_idm = closed_loop_metrics(policy, float(e.config.dt), reference_progress=[ref])
    vs_limit = closed_loop_metrics(policy, float(e.config.dt))
    assert vs_idm["ego_progress"][0] == pytest.approx(1.0) and vs_idm["making_progress"][0] == 1.0
    assert vs_limit["ego_progress"][0] < 0.01 and vs_limit["making_progress"][0] == 0.0


def test_progress_ratio_against_a_reference_is_nuplans() -> None:
    """min(1, max(ego, 2) / max(ref, 2)), 0 for an ego that went backwards; checked by hand."""
    rows = np.zeros((5, len(core.EPISODE_METRIC_NAMES)))
    rows[:, COL["steps"]] = 10
    rows[:, COL["progress"]] = [50.0, 1.0, 30.0, -0.5, 3.0]
    got = closed_loop_metrics(rows, 0.1, reference_progress=[100.0, 0.5, 20.0, 0.0, 20.0])
    assert got["ego_progress"].tolist() == pytest.approx([0.5, 1.0, 1.0, 0.0, 0.15])
    assert got["making_progress"].tolist() == [1.0, 1.0, 1.0, 0.0, float(0.15 >= MIN_PROGRESS_RATIO)]
    with pytest.raises(ValueError, match="reference_progress must be 5 finite values"):
        closed_loop_metrics(rows, 0.1, reference_progress=[1.0, 2.0])


def test_hand_to_idm_refuses_bad_slots_before_changing_anything() -> None:
    e = _engine(worlds=1)
    e.set_scene(0, [{**CAR, "x": 20.0, "y": -1.75, "heading": 0.0},
                    {"cls": AgentType.PEDESTRIAN, "x": 40.0, "y": -5.0, "heading": 0.0, "controlled": True}])
    before = np.array(e.agents)
    with pytest.raises(ValueError, match="slot 1 of world 0 .*pedestrian"):
        e.hand_to_idm([0, 0], [0, 1])
    with pytest.raises(ValueError, match="named twice"):
        e.hand_to_idm([0, 0], [0, 0])
    with pytest.raises(ValueError, match=r"worlds must lie in \[0, 1\)"):
        e.hand_to_idm(1, 0)
    with pytest.raises(ValueError, match="idm_mode"):
        e.hand_to_idm(0, 0, idm_mode=3)
    assert (np.array(e.agents) == before).all() and e.valid[0]
    e.hand_to_idm(0, 0)
    with pytest.raises(ValueError, match="already handed"):
        e.hand_to_idm(0, 0)


# ----------------------------------------------------------------------------- evaluation

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = load_config("quick")
    dump_config(cfg, out / "config.yaml")
    small = {"ego_hidden": 16, "entity_hidden": 16, "trunk": (32, 32)}
    PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(cfg), n_steps=16, seed=0,
        policy_kwargs=small).save(out / "checkpoint.zip")
    return load_checkpoint(out / "checkpoint.zip")


def test_eval_with_the_idm_reference_is_deterministic_and_leaves_the_policys_episodes_alone(model) -> None:
    cfg = load_config("quick", num_worlds=2)   # 2 worlds x 4 slots: 10 episodes take two rounds
    a = evaluate(model, cfg, episodes=10, seed=5)
    b = evaluate(model, cfg, episodes=10, seed=5)
    lim = evaluate(model, cfg, episodes=10, seed=5, progress_reference="limit")
    assert a["progress_reference"] == "idm" and lim["progress_reference"] == "limit" and a["rounds"] == 2
    assert a["closed_loop"] == b["closed_loop"] and a["per_episode"] == b["per_episode"]
    for key in ("engine_metrics", "return", "length", "counts"):   # sampled actions too: same episodes
        assert a["per_episode"][key] == lim["per_episode"][key]
    ref = np.asarray(a["per_episode"]["reference_progress"])
    assert ref.shape == (10,) and (ref >= -1e-6).all() and (ref > 1.0).any()
    assert not np.allclose(ref, lim["per_episode"]["reference_progress"])


def test_limit_fallback_scores_against_the_engines_posted_limit_column(model) -> None:
    """The fallback is the score as it was: ego / the engine's reference column, and its reference
    per episode is that column."""
    cfg = load_config("quick", num_worlds=2)
    lim = evaluate(model, cfg, episodes=6, seed=1, deterministic=True, progress_reference="limit")
    rows = np.asarray(lim["per_episode"]["engine_metrics"])
    ref = rows[:, COL["reference_progress"]]
    assert lim["per_episode"]["reference_progress"] == ref.tolist()
    ratio = np.where(ref > 1e-6, rows[:, COL["progress"]] / np.where(ref > 1e-6, ref, 1.0), 1.0)
    assert lim["closed_loop"]["ego_progress"] == pytest.approx(np.clip(ratio, 0, 1).tolist())
    assert lim["closed_loop"]["making_progress"] == (ratio >= MIN_PROGRESS_RATIO).astype(float).tolist()
    with pytest.raises(ValueError, match="progress reference must be one of idm, limit"):
        evaluate(model, cfg, episodes=1, progress_reference="expert")
