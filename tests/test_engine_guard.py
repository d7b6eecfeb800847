"""The engine's own entry points against bad input and misuse: ``set_scene``, ``reset`` and the
``RoadMap`` constructors check everything before touching state (a rejected call leaves
``get_state()`` byte-identical), one engine serves one thread at a time (a concurrent call raises
instead of livelocking), a long reset stops on Ctrl-C between worlds, and thread counts are bounded."""

from __future__ import annotations

import _thread
import dataclasses
import os
import signal
import threading
import time

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config import EngineConfig, InitConfig
from terrazero_env.maps import MapValidationError, build, procedural


@pytest.fixture(scope="module")
def town():
    return build(procedural.grid_town(seed=0, rows=2, cols=2, lanes_per_direction=2))


@pytest.fixture(scope="module")
def engine(town):
    e = core.Engine(EngineConfig(num_worlds=2, slots_per_world=4, max_agents_per_world=8,
                                 init=InitConfig(num_agents=(2, 8))), maps=town)
    e.reset()
    e.step()
    return e


def _snapshot(e) -> dict[str, bytes]:
    return {k: np.ascontiguousarray(v).tobytes() for k, v in e.get_state().items()}


def _lane_point(e) -> tuple[float, float, float]:
    """The position and heading of a placed car (on a lane): a valid spec to build bad ones from."""
    s = e.agent_states(0)
    i = int(np.nonzero(s["cls"] == 0)[0][0])
    return float(s["x"][i]), float(s["y"][i]), float(s["heading"][i])


def _good(e) -> dict:
    x, y, h = _lane_point(e)
    return {"cls": 0, "x": x, "y": y, "heading": h}


BAD_SPECS = [  # (change to a valid first spec, error type, message)
    ({"kin": [1.0, 1.0]}, ValueError, r"agents\[1\]\.kin must hold 4 numbers, got 2"),
    ({"kin": [1.0, 1.0, float("nan"), 1.0]}, ValueError, r"agents\[1\]\.kin\[2\]"),
    ({"kin": 3.0}, TypeError, r"agents\[1\]\.kin must be 4 numbers"),
    ({"idm": True, "idm_mode": 7}, ValueError, r"agents\[1\]\.idm_mode: unknown IDM mode .*\) 7 \(expected 0\.\.2\)"),
    ({"idm_mode": -1}, ValueError, r"agents\[1\]\.idm_mode"),
    ({"idm": True, "x": 1e5}, ValueError, r"agents\[1\]: an IDM vehicle must start on a lane"),
    ({"cls": 9}, ValueError, r"agents\[1\]\.cls: unknown agent type 9"),
    ({"cls": 1.5}, TypeError, r"agents\[1\]\.cls must be an integer"),
    ({"x": float("nan")}, ValueError, r"agents\[1\]\.x must be finite"),
    ({"y": "3"}, TypeError, r"agents\[1\]\.y must be a number"),
    ({"speed": float("inf")}, ValueError, r"agents\[1\]\.speed must be finite"),
    ({"length": -4.0}, ValueError, r"agents\[1\]\.length must be positive"),
    ({"width": 0.0}, ValueError, r"agents\[1\]\.width must be positive"),
    ({"goal": (1.0, 2.0, 3.0)}, ValueError, r"agents\[1\]\.goal must hold 2 numbers"),
    ({"goal": 5.0}, TypeError, r"agents\[1\]\.goal must be 2 numbers"),
    ({"rw": {"no_such_term": 1.0}}, ValueError, r"agents\[1\]\.rw: unknown reward parameter 'no_such_term'"),
    ({"rw": {"collision": float("nan")}}, ValueError, r"agents\[1\]\.rw\.collision must be finite"),
    ({"controlled": "yes"}, TypeError, r"agents\[1\]\.controlled must be a bool"),
    ({"colour": "red"}, TypeError, r"agents\[1\]: unexpected key 'colour'"),
    # numbers past the scene's bounds: finite, but squared distances would overflow into NaN
    ({"x": 1e300}, ValueError, r"agents\[1\]\.x must lie within \+-1e\+06, got 1e\+300"),
    ({"y": -1e7}, ValueError, r"agents\[1\]\.y must lie within"),
    ({"speed": 1e5}, ValueError, r"agents\[1\]\.speed must lie within \+-200 m/s"),
    ({"length": 1e4}, ValueError, r"agents\[1\]\.length must be at most 100 m"),
    ({"goal": (0.0, 1e300)}, ValueError, r"agents\[1\]\.goal\[1\] must lie within"),
    ({"rw": {"collision": 1e300}}, ValueError, r"agents\[1\]\.rw\.collision must lie within"),
]


@pytest.mark.parametrize("change,error,message", BAD_SPECS, ids=[m.split("\\")[-1][:24] for *_, m in BAD_SPECS])
def test_a_rejected_scene_leaves_the_engine_byte_identical(engine, change, error, message):
    """Property: a scene whose second agent is bad raises an error naming ``agents[1].key`` and
    changes nothing (the first, valid agent is not placed, the world is not cleared)."""
    before = _snapshot(engine)
    good = _good(engine)
    with pytest.raises(error, match=message):
        engine.set_scene(0, [good, {**good, "x": good["x"] + 0.0, **change}])
    assert _snapshot(engine) == before
    engine.step()  # still usable


def test_set_scene_rejects_missing_keys_bad_containers_and_seeds(engine):
    """Property: the scene container, required keys, world and seed are checked before any change."""
    before = _snapshot(engine)
    good = _good(engine)
    cases = [
        (lambda: engine.set_scene(0, [{"cls": 0, "x": 0.0, "y": 0.0}]), ValueError, r"agents\[0\]\.heading is required"),
        (lambda: engine.set_scene(0, {"cls": 0}), TypeError, "agents must be a list of dicts"),
        (lambda: engine.set_scene(0, [3]), TypeError, r"agents\[0\] must be a dict"),
        (lambda: engine.set_scene(0, [good] * 9), ValueError, "exceed max_agents_per_world=8"),
        (lambda: engine.set_scene(2, [good]), ValueError, r"world must lie in \[0, 2\)"),
        (lambda: engine.set_scene(0, [good], seed=-1), ValueError, "non-negative integer below 2\\*\\*64"),
        (lambda: engine.set_scene(0, [good], seed=2**64), ValueError, "below 2\\*\\*64"),
        (lambda: engine.set_scene(0, [good], seed=1.5), TypeError, "seed must be a non-negative integer"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
        assert _snapshot(engine) == before
    engine.set_scene(0, [good], seed=2**64 - 1)  # the largest seed is accepted
    assert engine.num_agents(0) == 1


@pytest.mark.parametrize("seeds,error,message", [
    ([-1, 3], ValueError, r"seeds\[0\] must be a non-negative integer below 2\*\*64, got -1"),
    (np.array([4, -5]), ValueError, "got -5"),
    ([2**64, 0], ValueError, r"seeds\[0\] must be a non-negative integer below 2\*\*64"),
    ([1.5, 2], TypeError, r"seeds\[0\] must be a non-negative integer"),
    (np.array([1.0, 2.0]), TypeError, "seeds must be a 1-D array of integers"),
    ([True, 2], TypeError, r"seeds\[0\]"),
    ([1], ValueError, "seeds must be 2 integers"),
])
def test_reset_rejects_negative_large_and_non_integer_seeds(engine, seeds, error, message):
    """Property: seeds are integers in [0, 2**64), never cast or wrapped; a rejection changes nothing."""
    before = _snapshot(engine)
    with pytest.raises(error, match=message):
        engine.reset([0, 1], seeds)
    assert _snapshot(engine) == before


def test_reset_seeds_are_not_wrapped(town):
    """Property: the largest seed and its two's-complement alias are different inputs: -1 is refused,
    2**64 - 1 accepted, and numpy uint64 seeds above 2**63 reset as given."""
    cfg = EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=6, init=InitConfig(num_agents=(2, 6)))
    e = core.Engine(cfg, maps=town)
    e.reset([0], [2**64 - 1])
    a = _snapshot(e)
    e.reset([0], np.array([2**64 - 1], np.uint64))
    assert _snapshot(e) == a


def test_road_map_validates_a_map_data_handed_directly(town):
    """Property: a built MapData with an out-of-range index or a non-finite point is refused by
    RoadMap (and by Engine given the MapData) with MapValidationError, the checks of ``maps build``,
    instead of reaching the engine's C loops; road_map() rebuilds a MapData, which refuses the
    non-finite point and re-derives the indices."""
    stop_line = np.asarray(town.lanes.stop_line).copy()
    stop_line[0] = len(town.stop_lines) + 5
    bad_index = town.replace(lanes=dataclasses.replace(town.lanes, stop_line=stop_line))
    with pytest.raises(MapValidationError, match="lanes.stop_line"):
        core.RoadMap(bad_index)
    values = town.lanes.centerline.values.copy()
    values[3, 1] = np.nan
    cl = dataclasses.replace(town.lanes.centerline, values=values)
    bad_point = town.replace(lanes=dataclasses.replace(town.lanes, centerline=cl))
    for make in (core.RoadMap, core.road_map, lambda m: core.Engine(EngineConfig(num_worlds=1), maps=m)):
        with pytest.raises(MapValidationError, match="lanes.centerline"):
            make(bad_point)
    rebuilt = core.road_map(bad_index)  # rebuilding re-derives the stop-line ties
    assert isinstance(rebuilt, core.RoadMap)
    core.RoadMap(town)  # the intact map passes


def test_two_threads_on_one_engine_get_a_clear_error_and_nothing_hangs(town):
    """Property: two threads stepping and resetting one engine never run inside it together: the
    loser gets RuntimeError('... another thread ...') at once, both threads finish within the
    timeout, and the engine stays usable and deterministic afterwards."""
    cfg = EngineConfig(num_worlds=16, slots_per_world=4, max_agents_per_world=16, init=InitConfig(num_agents=(8, 16)))
    e = core.Engine(cfg, maps=town)
    e.reset()
    errors: list[BaseException] = []

    def hammer(kind: str) -> None:
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end and not errors:
            try:
                if kind == "step":
                    e.step()
                else:
                    e.reset()
            except RuntimeError as err:
                errors.append(err)
            except BaseException as err:  # anything else is a failure of the test
                errors.append(err)
                raise

    threads = [threading.Thread(target=hammer, args=(k,), daemon=True) for k in ("step", "reset", "step")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung inside the engine"
    assert errors, "three threads hammering one engine for 3 s never collided"
    assert all(isinstance(x, RuntimeError) and "another thread" in str(x) for x in errors), errors
    # Still usable, and reset still reproduces a rollout.
    e.reset(seeds=np.arange(16))
    e.step()
    a = _snapshot(e)
    e.reset(seeds=np.arange(16))
    e.step()
    assert _snapshot(e) == a


def test_a_long_reset_stops_on_keyboard_interrupt_between_worlds(town):
    """Property: Ctrl-C during a reset of many worlds raises KeyboardInterrupt before the last world
    (worlds after the interrupt keep their old state), and the engine is usable afterwards."""
    # Many worlds with one slot each: a reset long enough (~0.3 s here, more on a loaded machine) that
    # the 50 ms timer lands inside it, with small observation buffers.
    W = 2000
    cfg = EngineConfig(num_worlds=W, slots_per_world=1, max_agents_per_world=64, init=InitConfig(num_agents=(64, 64)))
    e = core.Engine(cfg, maps=town)
    e.reset()
    e.step()
    assert (e.world_steps == 1).all()
    # interrupt_main does nothing unless Python's own SIGINT handler is installed: make sure it is,
    # whatever the process (or an earlier test in it) set.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.05, _thread.interrupt_main)
    try:
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            e.reset()
            time.sleep(30)  # the reset was faster than the timer: the interrupt lands here instead
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    steps = e.world_steps.copy()
    assert time.monotonic() - t0 < 30
    assert steps[-1] == 1, "the interrupt did not stop the reset before the last world"
    e.reset([W - 1])  # not left busy
    assert e.world_steps[-1] == 0


@pytest.mark.parametrize("n,error,message", [
    (0, ValueError, r"num_threads must lie in \[1, "),
    (-3, ValueError, r"num_threads must lie in \[1, "),
    ((os.cpu_count() or 1) * 4 + 1, ValueError, r"\(4 per CPU core\)"),
    (2**70, ValueError, "num_threads must lie in"),
    (2.0, TypeError, "num_threads must be an integer"),
    (True, TypeError, "num_threads must be an integer"),
])
def test_thread_counts_are_bounded(town, n, error, message):
    """Property: num_threads is an int in [1, 4 x CPU cores]; anything else is refused naming it."""
    with pytest.raises(error, match=message):
        core.Engine(EngineConfig(num_worlds=1), maps=town, num_threads=n)


@pytest.mark.parametrize("tries,error,message", [
    (10**9, ValueError, r"max_reset_tries must lie in \[1, 10000\], got 1000000000"),
    (0, ValueError, r"max_reset_tries must lie in \[1, 10000\]"),
    (2.5, TypeError, "max_reset_tries must be an integer"),
])
def test_max_reset_tries_is_bounded(tries, error, message):
    """Property: the redraw count of the single-agent and PettingZoo envs is an int in [1, 10000],
    checked at construction (a huge count would be a hang at reset, not a retry policy)."""
    from terrazero_env.envs.multi import ParallelDriveEnv
    from terrazero_env.envs.single import DriveEnv

    for cls in (DriveEnv, ParallelDriveEnv):
        with pytest.raises(error, match=message):
            cls(max_reset_tries=tries)


_HUGE_HEADING = """
import sys
import numpy as np
from terrazero_env import load_config
from terrazero_env.engine import Engine
e = Engine(load_config("quick", num_worlds=1, max_agents_per_world=8, slots_per_world=4))
e.reset()
e.set_scene(0, [{"cls": 0, "x": 30.29, "y": 0.0, "heading": float(sys.argv[1])}])
for _ in range(3):
    e.step()
h = float(e.agents[0, 0]["heading"])
print(repr(h))
"""


@pytest.mark.parametrize("heading", ["3.1397834732133304e+16", "-1e300", "7.0"])
def test_a_scripted_heading_of_any_finite_size_is_stepped_not_hung(heading):
    """A finite heading is accepted by ``set_scene``; before ``wrap_angle`` took whole turns off with
    ``fmod``, 3e16 rad (a fuzzing find) made its loops run for days. Run in a child process with a
    timeout, so that a regression fails instead of hanging the suite."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _HUGE_HEADING, heading], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert np.isfinite(float(out.stdout.strip()))
