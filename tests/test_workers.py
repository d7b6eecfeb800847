"""Worlds in worker processes: the same rollouts as the in-process engine, errors surfaced in the
parent, clean shutdown (close, garbage collection, parent death)."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.envs.workers import MultiProcessEngine, WorkerTraceback

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks processes and /dev/shm")

FIELDS = ("observations", "rewards", "terminated", "truncated", "valid", "agent_type", "counters", "slot_agent",
          "world_steps", "n_agents_per_world")


def _config(num_worlds: int = 3, **overrides):
    return terrazero_env.load_config("quick", **{"episode_length": 12, **overrides}).with_overrides(num_worlds=num_worlds)


def _assert_same(ref, eng) -> None:
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(eng, f), getattr(ref, f), err_msg=f)
    assert eng.agents.tobytes() == ref.agents.tobytes()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _unlinked(name: str) -> bool:
    """Whether the segment is gone (POSIX shared memory lives in /dev/shm on Linux; attaching to
    check would register it with this process's resource tracker)."""
    return not os.path.exists(os.path.join("/dev/shm", name.lstrip("/")))


def _wait(pred, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rollout_is_bit_identical_to_the_in_process_engine(dtype):
    cfg = _config(3, **{"obs.dtype": dtype})  # 3 worlds over 2 workers: blocks of 1 and 2
    ref = core.Engine(cfg)
    with MultiProcessEngine(cfg, 2) as eng:
        assert eng.worker_bounds.tolist() == [0, 1, 3]
        assert eng.observations.dtype == ref.observations.dtype and eng.obs_dim == ref.obs_dim
        _assert_same(ref, eng)  # before any reset too
        ref.reset(None, [11, 12, 13])
        eng.reset(None, [11, 12, 13])
        _assert_same(ref, eng)
        rng = np.random.default_rng(0)
        n = ref.num_actions(0)
        restarted = 0
        for _ in range(30):
            a = rng.integers(0, n, ref.actions.shape[0])
            ref.step(a)
            eng.step(a)
            _assert_same(ref, eng)
            done = np.nonzero(~(ref.valid & ~ref.terminated & ~ref.truncated).reshape(3, -1).any(axis=1))[0]
            if done.size:
                restarted += done.size
                ref.reset(done, done + 100)
                eng.reset(done, done + 100)
                _assert_same(ref, eng)
        assert restarted >= 3  # the horizon (12 steps) was crossed, terminations or not
        for w in range(3):
            got, want = eng.agent_states(w), ref.agent_states(w)
            assert got.keys() == want.keys()
            for k in want:
                np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        assert eng.num_actions(0) == n
        np.testing.assert_array_equal(eng.action_values(0), ref.action_values(0))


def test_reset_routes_each_world_to_its_worker_and_leaves_the_others():
    cfg = _config(3)
    ref = core.Engine(cfg)
    with MultiProcessEngine(cfg, 2) as eng:
        ref.reset()
        eng.reset()  # default seeds: the (global) world index
        _assert_same(ref, eng)
        a = np.zeros(ref.actions.shape[0], np.int32)
        for _ in range(3):
            ref.step(a)
            eng.step(a)
        ref.reset(np.array([2, 0]), np.array([7, 8]))
        eng.reset(np.array([2, 0]), np.array([7, 8]))  # one world on each worker
        _assert_same(ref, eng)
        assert eng.world_steps.tolist() == [0, 3, 0]
        eng.reset([1], [5])
        ref.reset([1], [5])
        _assert_same(ref, eng)
        eng.reset(np.zeros(0, np.int64), np.zeros(0, np.int64))  # nothing to do
        with pytest.raises(ValueError, match=r"world_ids must lie in \[0, 3\)"):
            eng.reset([3])
        with pytest.raises(ValueError, match="seeds must be 2 integers"):
            eng.reset([0, 1], [1])
        _assert_same(ref, eng)


def _live_slots_then_step(engine, bad: int, values: np.ndarray) -> list[str]:
    """Step with ``bad`` in every slot, fixing the slot each error names (to ``values[slot]``) until
    the step goes through; returns the errors: every slot that reads an action, in order."""
    a = np.full(engine.actions.shape[0], bad)
    errors = []
    while True:
        try:
            engine.step(a)
            return errors
        except ValueError as exc:
            errors.append(str(exc))
            i = int(re.search(r"for slot (\d+) ", str(exc)).group(1))
            a[i] = values[i]


def test_bad_actions_raise_in_the_parent_like_the_engine_and_change_nothing():
    cfg = _config(3, episode_length=6)
    ref = core.Engine(cfg)
    with MultiProcessEngine(cfg, 2) as eng:
        for e in (ref, eng):
            e.reset(None, [1, 2, 3])
            x, y, h = (float(ref.agents[1, 0][k]) for k in ("x", "y", "heading"))
            # Two overlapping cars (a collision removes both) and a third one: world 1 has
            # terminated, live and empty slots.
            e.set_scene(1, [{"cls": 0, "x": x, "y": y, "heading": h},
                            {"cls": 0, "x": x + np.cos(h), "y": y + np.sin(h), "heading": h},
                            {"cls": 0, "x": x - 20 * np.cos(h), "y": y - 20 * np.sin(h), "heading": h}])
        _assert_same(ref, eng)
        N, n = ref.actions.shape[0], ref.num_actions(0)
        rng = np.random.default_rng(1)
        seen = []
        for t in range(9):  # past the horizon: nothing reads actions at the end
            values = rng.integers(0, n, N)
            bad = -1 if t % 2 else n
            expected = _live_slots_then_step(ref, bad, values)
            assert _live_slots_then_step(eng, bad, values) == expected
            _assert_same(ref, eng)
            seen.append(len(expected))
        assert seen[0] == 11 and 0 < seen[2] < 11 and seen[-1] == 0  # world 1 slot 3 is empty
        before = eng.observations.copy()
        for bad, message in ((np.zeros(N - 1, np.int32), f"actions must have shape \\({N},\\)"),
                             (np.zeros(N, np.float32), "actions must be integers")):
            with pytest.raises(ValueError, match=message):
                eng.step(bad)
        np.testing.assert_array_equal(eng.observations, before)
        _assert_same(ref, eng)


def test_a_worker_exception_is_raised_in_the_parent_with_its_message():
    cfg = _config(3)
    with MultiProcessEngine(cfg, 2) as eng:
        eng.reset()
        with pytest.raises(ValueError, match="agents\\[0\\]\\.cls: unknown agent type 99") as info:
            eng.set_scene(2, [{"cls": 99, "x": 0.0, "y": 0.0, "heading": 0.0}])
        assert isinstance(info.value.__cause__, WorkerTraceback)
        assert "worker 1 (worlds 1..2)" in str(info.value.__cause__)
        eng.step(np.zeros(eng.actions.shape[0], np.int32))  # still in step with its workers
        assert eng.world_steps.tolist() == [1, 1, 1]
        eng.set_scene(1, [{"cls": 0, "x": 0.0, "y": -1.75, "heading": 0.0, "goal": (30.0, -1.75)}])
        assert eng.num_agents(1) == 1 and eng.agents[1, 0]["x"] == 0.0 and eng.valid[eng.slots_per_world]


def test_a_dead_worker_closes_the_engine():
    eng = MultiProcessEngine(_config(2), 2)
    eng.reset()
    os.kill(eng.worker_pids()[1], signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"worker 1 \(worlds 1..1\) died"):
        eng.step(np.zeros(eng.actions.shape[0], np.int32))
    assert eng.closed and _unlinked(eng.segment_name)
    with pytest.raises(RuntimeError, match="closed"):
        eng.reset()


def test_a_stopped_worker_times_out_with_an_error_naming_it():
    eng = MultiProcessEngine(_config(2), 2, timeout=5.0)
    eng.reset()
    pid = eng.worker_pids()[1]
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(RuntimeError, match=r"worker 1 \(worlds 1..1\) did not answer within 5 s"):
            eng.step(np.zeros(eng.actions.shape[0], np.int32))
        assert eng.closed and _unlinked(eng.segment_name)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5", True])
def test_bad_timeouts_are_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive finite number of seconds"):
        MultiProcessEngine(_config(2), 2, timeout=timeout)


def test_close_stops_the_workers_and_unlinks_the_shared_memory():
    eng = MultiProcessEngine(_config(2), 2)
    eng.reset()
    obs = eng.observations  # views may outlive the engine
    pids, name = eng.worker_pids(), eng.segment_name
    assert not _unlinked(name) and not any(_gone(p) for p in pids)
    eng.close()
    assert all(_gone(p) for p in pids) and _unlinked(name)
    assert obs.shape == (8, eng.obs_dim) and np.isfinite(obs.sum())
    eng.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        eng.step()
    with pytest.raises(ValueError, match="num_workers must be an integer in \\[1, num_worlds=2\\]"):
        MultiProcessEngine(_config(2), 3)


@pytest.mark.slow
def test_garbage_collection_stops_the_workers():
    eng = MultiProcessEngine(_config(2), 2)
    pids, name = eng.worker_pids(), eng.segment_name
    del eng
    gc.collect()
    assert all(_gone(p) for p in pids) and _unlinked(name)


_CHILD = """
import os, sys, numpy as np, terrazero_env
from terrazero_env.envs.workers import MultiProcessEngine
if __name__ == "__main__":
    eng = MultiProcessEngine(terrazero_env.load_config("quick"), 2)
    eng.reset()
    eng.step(np.zeros(eng.actions.shape[0], np.int32))
    print(*eng.worker_pids(), eng.segment_name, flush=True)
    if sys.argv[1] == "die":
        os._exit(0)  # no atexit, no finalizers: as if killed
    eng.close()
"""


@pytest.mark.slow
def test_workers_exit_when_the_parent_dies_and_a_clean_run_prints_nothing():
    clean = subprocess.run([sys.executable, "-c", _CHILD, "close"], capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0 and clean.stderr == ""  # no resource_tracker warnings
    r = subprocess.run([sys.executable, "-c", _CHILD, "die"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    *pids, name = r.stdout.split()
    assert _wait(lambda: all(_gone(int(p)) for p in pids))
    assert _wait(lambda: _unlinked(name))  # the resource tracker reclaims the orphaned segment


def test_vector_env_on_workers_matches_the_in_process_vector_env():
    runs = []
    for workers in (1, 2):
        # The workers start with "spawn" here (the other tests use the default, forkserver on Linux).
        venv = terrazero_env.make_vec(3, "quick", num_workers=workers, worker_context="spawn", episode_length=8)
        assert venv.num_envs == 12 and venv.single_observation_space.shape == (venv.engine.obs_dim,)
        obs, info = venv.reset(seed=5)
        assert venv.observation_space.contains(obs) and info["valid"].any()
        rng = np.random.default_rng(3)
        steps = [(obs.copy(), info["valid"].copy())]
        for _ in range(20):
            obs, rew, term, trunc, info = venv.step(rng.integers(0, venv.single_action_space.n, venv.num_envs))
            steps.append((obs.copy(), rew.copy(), term.copy(), trunc.copy(), info["valid"].copy()))
        st = venv.state
        steps.append((st["agents"].tobytes(), st["n_agents"].copy(), st["world_steps"].copy()))
        with pytest.raises(ValueError, match=r"actions must have shape \(12,\)"):
            venv.step(np.zeros(3, np.int64))
        engine = venv.engine
        runs.append(steps)
        venv.close()
        if workers > 1:
            assert isinstance(engine, MultiProcessEngine) and engine.closed and _unlinked(engine.segment_name)
    for a, b in zip(*runs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
