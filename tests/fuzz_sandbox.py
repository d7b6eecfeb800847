"""The child side of the fuzz suite (tests/test_fuzz.py): runs one probe per request in a separate
process, so a crash of the engine (a segfault, an abort) is seen by the parent as a dead child and
reported as a failure naming the input, instead of taking the test run down.

Protocol: the parent writes one pickled ``(probe_name, payload)`` per request (length-prefixed) to
stdin; the child answers a pickled ``(status, detail)``: ``"ok"``, ``"refused"`` (an expected error
type with its message) or ``"unexpected"`` (any other exception, with its traceback).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import tempfile
import traceback
from typing import Any

import numpy as np

EXPECTED = (ValueError, TypeError)  # MapValidationError, TerrabinError and YamlLimitError are ValueErrors


def probe_tzb(data: bytes) -> str:
    """Load a (mutated) .tzb file the way every engine entry point does, then run the engine on it."""
    import terrazero_env
    from terrazero_env.maps.sources import load_built

    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "fuzz.tzb")
        with open(p, "wb") as f:
            f.write(data)
        load_built(p)
        venv = terrazero_env.make_vec(num_worlds=2, preset="quick", maps=[p], **{"init.idm_fraction": 0.5,
                                                                                  "max_agents_per_world": 12})
        try:
            venv.reset(seed=0)
            venv.action_space.seed(0)
            for _ in range(5):
                venv.step(venv.action_space.sample())
        finally:
            venv.close()
    return "ran"


def probe_json_map(doc: dict) -> str:
    import terrazero_env
    from terrazero_env.maps import build, save
    from terrazero_env.maps.jsonmap import from_dict

    m = build(from_dict(doc))
    with tempfile.TemporaryDirectory() as d:
        p = save(m, os.path.join(d, "fuzz.tzb"))
        venv = terrazero_env.make_vec(num_worlds=1, preset="quick", maps=[str(p)])
        try:
            venv.reset(seed=1)
            for _ in range(3):
                venv.step(venv.action_space.sample())
        finally:
            venv.close()
    return "ran"


def probe_config(overrides: dict) -> str:
    from terrazero_env import load_config
    from terrazero_env.engine import Engine

    cfg = load_config("quick", **{"num_worlds": 1, **overrides})
    engine = Engine(cfg)
    engine.reset()
    engine.step()
    return "ran"


def probe_actions(actions: Any) -> str:
    import gymnasium as gym

    import terrazero_env  # noqa: F401

    env = gym.make("TerraZero/Drive-v0", preset="quick")
    try:
        env.reset(seed=0)
        env.step(actions)
    finally:
        env.close()
    return "ran"


def probe_vector_actions(actions: Any) -> str:
    import terrazero_env

    venv = terrazero_env.make_vec(num_worlds=2, preset="quick")
    try:
        venv.reset(seed=0)
        venv.step(actions)
    finally:
        venv.close()
    return "ran"


def probe_seed(seed: Any) -> str:
    import gymnasium as gym

    import terrazero_env  # noqa: F401

    env = gym.make("TerraZero/Drive-v0", preset="quick")
    try:
        a, _ = env.reset(seed=seed)
        b, _ = env.reset(seed=seed)
        if seed is not None and not np.array_equal(a, b):  # None asks for fresh entropy
            raise AssertionError(f"seed {seed!r} gave two different first observations")
    finally:
        env.close()
    return "ran"


def probe_scene(agents: Any) -> str:
    """A scripted scene on a fresh engine: accepted and stepped, or refused with the engine's state
    byte-identical (a half-applied scene is reported as an AssertionError, i.e. unexpected)."""
    from terrazero_env import load_config
    from terrazero_env.engine import Engine

    engine = Engine(load_config("quick", num_worlds=1, max_agents_per_world=8, slots_per_world=4))
    engine.reset()
    before = {k: np.ascontiguousarray(v).tobytes() for k, v in engine.get_state().items()}
    try:
        engine.set_scene(0, agents)
    except EXPECTED:
        after = {k: np.ascontiguousarray(v).tobytes() for k, v in engine.get_state().items()}
        if after != before:
            raise AssertionError("a rejected scene changed the engine's state") from None
        raise
    for _ in range(5):
        engine.step()
    return "ran"


_STATE_ENGINES: dict[str, Any] = {}


def _state_engine(controller: str) -> Any:
    """One engine per signal controller, on a map with signals, IDM traffic and pedestrians, stepped
    into an episode (kept between probes: a probe restores its state before mutating it)."""
    from terrazero_env import load_config
    from terrazero_env.engine import Engine

    if controller not in _STATE_ENGINES:
        engine = Engine(load_config("quick", num_worlds=2, max_agents_per_world=12, slots_per_world=3,
                                    **{"init.idm_fraction": 0.5, "signals.controller": controller}))
        engine.reset()
        for _ in range(4):
            engine.step()
        _STATE_ENGINES[controller] = (engine, engine.get_state())
    return _STATE_ENGINES[controller]


def probe_state(payload: Any) -> str:
    """An engine snapshot with some words overwritten (counts, indices, enums, reals), restored with
    ``set_state`` and stepped: refused with the engine unchanged, or stepped without a crash."""
    controller, mutations = payload
    engine, good = _state_engine(controller)
    engine.set_state(good)
    state = {k: v.copy() for k, v in good.items()}
    for key, pos, value in mutations:
        raw = state[key].view(np.uint8).reshape(-1)
        if isinstance(value, float):
            words = raw[: raw.size // 8 * 8].view("<f8")
        else:
            words = raw[: raw.size // 4 * 4].view("<i4")
        if words.size:
            words[pos % words.size] = value
    before = {k: np.ascontiguousarray(v).tobytes() for k, v in engine.get_state().items()}
    try:
        engine.set_state(state)
    except EXPECTED:
        after = {k: np.ascontiguousarray(v).tobytes() for k, v in engine.get_state().items()}
        if after != before:
            raise AssertionError("a rejected state changed the engine's state") from None
        raise
    for _ in range(5):
        engine.step()
    engine.reset()
    return "ran"


def probe_abort(_: Any) -> str:
    """Dies like a segfaulting engine would: the harness's own test uses it."""
    os.abort()


PROBES = {f.__name__: f for f in (probe_tzb, probe_json_map, probe_config, probe_actions, probe_vector_actions,
                                  probe_seed, probe_scene, probe_state, probe_abort)}


def _read(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    return pickle.loads(stream.read(n))


def _write(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def main() -> None:
    import warnings

    warnings.simplefilter("ignore")
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    while True:
        req = _read(inp)
        if req is None:
            return
        name, payload = req
        try:
            _write(out, ("ok", PROBES[name](payload)))
        except EXPECTED as e:
            _write(out, ("refused", f"{type(e).__name__}: {e}"))
        except BaseException:  # noqa: BLE001 - everything else is a finding
            _write(out, ("unexpected", traceback.format_exc()))


if __name__ == "__main__":
    main()
