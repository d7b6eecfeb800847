"""Reward terms, step events and replay frames read from the engine, and the ``.tzr`` replay format:
the terms rebuild the reward bit for bit, the events are the counters' increments, the frames are the
agents' states, and a saved replay reads back within its quantization (and bad files are refused)."""

from __future__ import annotations

import gzip
import struct

import gymnasium as gym
import numpy as np
import pytest

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config.io import load_config
from terrazero_env.replay import (
    HEADING_UNIT,
    MAGIC,
    POS_UNIT,
    ReplayError,
    ReplayRecorder,
    load_replay,
    reward_from_terms,
    save_replay,
)

EV = {n: 1 << i for i, n in enumerate(core.STEP_EVENTS)}


def _random_actions(e: core.Engine, rng: np.random.Generator) -> np.ndarray:
    nact = np.array([e.num_actions(max(int(t), 0)) for t in e.agent_type])
    return (rng.random(nact.shape[0]) * nact).astype(np.int32)


def _engine(preset: str, worlds: int = 2, seed: int = 5, **overrides) -> core.Engine:
    cfg = load_config(preset, **overrides).with_overrides(num_worlds=worlds)
    e = core.Engine(cfg)
    e.reset(list(range(worlds)), [seed + w for w in range(worlds)])
    return e


@pytest.mark.parametrize("preset,overrides", [
    ("quick", {}),
    ("planner", {}),
    ("quick", {"reward_forms.goal_progress_shaping": "potential", "init.goal_behavior": "new_goal",
               "reward_forms.vel_align": "table8", "reward_forms.speed_limit": "lane"}),
    ("planner", {"reward_forms.goal_progress": "route", "reward_forms.goal_progress_shaping": "potential"}),
])
def test_reward_terms_rebuild_the_reward_bit_for_bit(preset, overrides):
    e = _engine(preset, **overrides)
    rng = np.random.default_rng(0)
    nonzero = np.zeros(len(core.REWARD_TERMS), bool)
    for _ in range(150):
        e.step(_random_actions(e, rng))
        rebuilt = reward_from_terms(e.reward_terms)
        assert rebuilt.dtype == np.float32
        np.testing.assert_array_equal(rebuilt.view(np.uint32), e.rewards.view(np.uint32))
        assert not e.reward_terms[~e.valid].any(), "a slot not judged this step has terms"
        nonzero |= (e.reward_terms != 0).any(axis=0)
    assert nonzero[core.REWARD_TERMS.index("timestep")] or nonzero[core.REWARD_TERMS.index("goal_progress")]


@pytest.mark.parametrize("form", ["euclidean", "route"])
def test_the_new_goal_charge_back_is_its_own_term(form):
    """Under potential shaping a step that reaches a goal and draws the next charges the new distance
    back after the float32 cast (world_step._judge); the last term holds it and the rebuild still holds."""
    e = _engine("quick", worlds=4, seed=1, **{"reward_forms.goal_progress_shaping": "potential",
                                             "reward_forms.goal_progress": form, "init.goal_behavior": "new_goal"})
    charged = 0
    for _ in range(300):
        e.step(e.reference_actions())
        np.testing.assert_array_equal(reward_from_terms(e.reward_terms).view(np.uint32), e.rewards.view(np.uint32))
        last = e.reward_terms[:, -1] != 0
        assert not (last & ((e.step_events & EV["goal"]) == 0)).any(), "a charge-back without a goal"
        charged += int(last.sum())
    assert charged > 0


def test_step_events_are_the_counters_increments():
    e = _engine("planner", worlds=2, seed=11)
    rng = np.random.default_rng(1)
    col = {n: list(core.COUNTER_NAMES).index(n) for n in core.COUNTER_NAMES}
    pairs = {"collision": "collision", "offroad": "offroad", "wrong_way": "wrong_way", "goal": "goal_reached",
             "stop_line": "stop_line", "red_light": "red_light"}
    seen = 0
    for _ in range(120):
        before = e.counters.copy()
        e.step(_random_actions(e, rng))
        delta = e.counters - before
        for ev_name, counter in pairs.items():
            np.testing.assert_array_equal((e.step_events & EV[ev_name]) > 0, delta[:, col[counter]] > 0,
                                          err_msg=ev_name)
        np.testing.assert_array_equal((e.step_events & EV["comfort"]) > 0, delta[:, col["comfort_violations"]] > 0)
        seen += int((e.step_events != 0).sum())
    assert seen > 0


def test_replay_frame_is_the_agents_state():
    e = _engine("planner", worlds=1, seed=3, **{"init.num_agents": [40, 40], "road_users.planner_fraction": 0.5})
    rng = np.random.default_rng(2)
    roles = list(core.ROLES)
    movers = list(core.MOVERS)
    for _ in range(30):
        e.step(_random_actions(e, rng))
    f = e.replay_frame(0)
    n = e.num_agents(0)
    v = e.agents[0, :n]
    for k in ("x", "y", "heading", "speed", "length", "width"):
        np.testing.assert_array_equal(f[k], v[k], err_msg=k)
    np.testing.assert_array_equal(f["cls"], v["cls"])
    np.testing.assert_array_equal(f["slot"], v["slot"])
    np.testing.assert_array_equal(f["alive"], v["alive"])
    planner = e.planner_state(0)["planner"]
    expect = np.select(
        [v["role"] == roles.index("CONTROLLED"), (v["role"] == roles.index("IDM")) & planner,
         v["role"] == roles.index("IDM"), v["role"] == roles.index("LOG"),
         np.isin(v["role"], [roles.index("CROSSER"), roles.index("JAYWALKER")])],
        [movers.index("policy"), movers.index("planner"), movers.index("idm"), movers.index("replay"),
         movers.index("pedestrian")], movers.index("static"))
    np.testing.assert_array_equal(f["mover"], expect)
    for m in ("idm", "planner", "policy", "static"):
        assert (f["mover"] == movers.index(m)).any(), m
    K = e.slots_per_world
    judged = (v["slot"] >= 0) & e.valid[np.maximum(v["slot"], 0)]
    np.testing.assert_array_equal(f["events"][judged], e.step_events[v["slot"][judged]])
    with pytest.raises(ValueError, match="world must lie"):
        e.replay_frame(1)
    assert K == e.slots_per_world


def test_collision_partner_is_the_box_it_overlaps():
    cfg = load_config("quick").with_overrides(num_worlds=1)
    e = core.Engine(cfg)
    e.reset([0], [0])
    a = e.agents[0, 0]
    x, y, h = float(a["x"]), float(a["y"]), float(a["heading"])
    far = (x + 60.0 * np.cos(h + 1.0), y + 60.0 * np.sin(h + 1.0))
    e.set_scene(0, [
        {"cls": 0, "x": x, "y": y, "heading": h, "speed": 3.0},
        {"cls": 0, "x": far[0], "y": far[1], "heading": h, "controlled": False},
        {"cls": 0, "x": x + 2.0 * np.cos(h), "y": y + 2.0 * np.sin(h), "heading": h, "controlled": False},
    ])
    e.step()
    f = e.replay_frame(0)
    assert f["events"][0] & EV["collision"]
    assert f["partner"][0] == 2
    assert f["partner"][1] == -1


def _record(preset: str, steps: int, seed: int = 4, **overrides) -> tuple[ReplayRecorder, list[dict]]:
    e = _engine(preset, worlds=1, seed=seed, **overrides)
    rec = ReplayRecorder(e, meta={"title": "test"})
    rng = np.random.default_rng(seed)
    states = []
    rec.capture()
    states.append(e.agent_states(0))
    for _ in range(steps):
        e.step(_random_actions(e, rng))
        rec.capture()
        states.append(e.agent_states(0))
    return rec, states


def test_saved_replay_reads_back_within_its_quantization(tmp_path):
    rec, states = _record("planner", 60)
    path = rec.save(tmp_path / "a.tzr", score=12.5)
    r = load_replay(path)
    assert r.num_frames == 61 and r.meta == {"title": "test", "score": 12.5}
    for t in (0, 30, 60):
        s, f = states[t], r.frame(t)
        n = len(s["x"])
        assert np.abs(f["x"][:n] - s["x"]).max() <= POS_UNIT / 2 + 1e-9
        assert np.abs(f["y"][:n] - s["y"]).max() <= POS_UNIT / 2 + 1e-9
        dh = np.angle(np.exp(1j * (f["heading"][:n] - s["heading"])))
        assert np.abs(dh).max() <= HEADING_UNIT / 2 + 1e-9
        np.testing.assert_array_equal(f["alive"][:n], s["alive"])
        np.testing.assert_array_equal(f["cls"][:n], s["cls"])
    mem = rec.replay()
    np.testing.assert_array_equal(r.arrays["reward"], mem.arrays["reward"])
    np.testing.assert_array_equal(r.arrays["reward_terms"], mem.arrays["reward_terms"])
    np.testing.assert_array_equal(r.arrays["signals"], mem.arrays["signals"])
    np.testing.assert_array_equal(r.events, mem.events)
    assert r.arrays["map_lanes_off"][-1] == r.arrays["map_lanes_pts"].shape[0]


def test_a_25_second_60_agent_episode_is_well_under_a_megabyte(tmp_path):
    rec, _ = _record("planner", 250, seed=8, **{"init.num_agents": [60, 60]})
    r = rec.replay()
    assert (r.arrays["alive"][0] > 0).sum() >= 55
    size = rec.save(tmp_path / "big.tzr").stat().st_size
    assert size < 400_000, f"{size} bytes"


def test_a_reset_starts_a_new_episode():
    e = _engine("quick", worlds=1)
    rec = ReplayRecorder(e)
    rec.capture()
    for _ in range(5):
        e.step()
        rec.capture()
    e.reset([0], [9])
    rec.capture()
    e.step()
    rec.capture()
    assert len(rec.episodes) == 1 and rec.episodes[0].num_frames == 6
    assert rec.replay().num_frames == 2 and rec.replay().header["first_step"] == 0


def test_the_recorder_takes_every_env():
    env = gym.make("TerraZero/Drive-v0")
    env.reset(seed=0)
    rec = ReplayRecorder(env)
    rec.capture()
    env.step(env.action_space.sample())
    rec.capture()
    assert rec.replay().num_frames == 2
    env.close()
    penv = terrazero_env.parallel_env(preset="quick")
    penv.reset(seed=1)
    rec = ReplayRecorder(penv)
    rec.capture()
    penv.step({a: penv.action_space(a).sample() for a in penv.agents})
    rec.capture()
    assert rec.replay().num_frames == 2
    penv.close()
    venv = terrazero_env.make_vec(num_worlds=2, preset="quick")
    venv.reset(seed=2)
    rec = ReplayRecorder(venv, world=1)
    rec.capture()
    venv.step(venv.action_space.sample())
    rec.capture()
    assert rec.replay().num_frames == 2
    venv.close()
    with pytest.raises(TypeError, match="no TerraZero engine"):
        ReplayRecorder(object())
    with pytest.raises(ValueError, match="world must lie"):
        ReplayRecorder(_engine("quick", worlds=1), world=3)


def _rewrite(path, fn):
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(fn(raw)))


def test_bad_replay_files_are_refused_with_a_reason(tmp_path):
    rec, _ = _record("quick", 5)
    good = rec.save(tmp_path / "good.tzr")
    raw = gzip.decompress(good.read_bytes())
    cases = {
        "bad magic": b"NOTAREPL" + raw[8:],
        "truncated": raw[: len(raw) - 100],
        "format version": raw.replace(b'"version":1', b'"version":9'),
        "must have shape": raw.replace(b'"frames":6', b'"frames":7'),
    }
    for why, data in cases.items():
        p = tmp_path / f"{why}.tzr"
        p.write_bytes(gzip.compress(data))
        with pytest.raises(ReplayError, match=why):
            load_replay(p)
    (tmp_path / "plain.tzr").write_bytes(b"hello")
    with pytest.raises(ReplayError, match="not a gzip"):
        load_replay(tmp_path / "plain.tzr")
    hlen = struct.unpack_from("<I", raw, len(MAGIC))[0]
    assert hlen < len(raw)
    save_replay(load_replay(good), tmp_path / "again.tzr")
    assert load_replay(tmp_path / "again.tzr").num_frames == 6
