"""Replays: what the engine's state was at every step of an episode, in a compact versioned file.

A replay is recorded from the engine's state (``Engine.replay_frame``, the signal states, the slots'
rewards by term), never re-simulated, so the browser viewer (:mod:`terrazero_env.viewer`) draws
exactly what happened. Record a user's own rollout on any of the envs::

    from terrazero_env.replay import ReplayRecorder
    env = gym.make("TerraZero/Drive-v0")
    rec = ReplayRecorder(env)            # or a PettingZoo env, a TerraZeroVectorEnv, an Engine
    obs, info = env.reset(seed=0)
    rec.capture()                        # after every reset and every step
    for _ in range(250):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        rec.capture()
        if term or trunc:
            break
    rec.save("episode.tzr")              # then: terrazero view episode.tzr

A world reset starts a new episode in the recorder (``episodes``; ``save`` writes the last one).

The file format, its codec and the untrusted reader live in :mod:`terrazero_env.replay_format`
(their names are importable from here too).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from . import engine as core
from .replay_format import (  # noqa: F401  (the format's names, importable from here as before)
    _FRAME_ARRAYS,
    FORMAT_VERSION,
    HEADING_UNIT,
    MAGIC,
    MAX_ARRAYS,
    MAX_DECODED_BYTES,
    MAX_FILE_BYTES,
    MAX_HEADER_BYTES,
    MAX_RAW_BYTES,
    POS_UNIT,
    SIZE_UNIT,
    SPEED_UNIT,
    Replay,
    ReplayError,
    _meta_problem,
    check_header,
    encode_replay,
    load_replay,
    load_replay_header,
    read_replay_file,
    replay_from_bytes,
    save_replay,
)

__all__ = ["FORMAT_VERSION", "MAGIC", "MAX_ARRAYS", "MAX_DECODED_BYTES", "MAX_FILE_BYTES", "MAX_HEADER_BYTES",
           "MAX_RAW_BYTES", "Replay", "ReplayError", "ReplayRecorder", "check_header", "encode_replay", "engine_of",
           "load_replay", "load_replay_header", "read_replay_file", "replay_from_bytes", "reward_from_terms",
           "save_replay"]


def reward_from_terms(terms: np.ndarray) -> np.ndarray:
    """The float32 reward the engine paid, from its terms (``Engine.reward_terms`` rows, float64
    ``[..., len(REWARD_TERMS)]``): every term but the last added left to right in float64, rounded to
    float32, then the last (the new goal's charge-back) added in float32. Bit for bit the engine's."""
    t = np.asarray(terms, np.float64)
    if t.shape[-1] != len(core.REWARD_TERMS):
        raise ValueError(f"terms: the last axis must hold {len(core.REWARD_TERMS)} terms, got shape {t.shape}")
    acc = np.zeros(t.shape[:-1], np.float64)
    for k in range(t.shape[-1] - 1):
        acc = acc + t[..., k]
    return acc.astype(np.float32) + t[..., -1].astype(np.float32)


def engine_of(env: Any) -> Any:
    """The :class:`~terrazero_env.engine.Engine` behind an Engine, a Gymnasium env (wrapped or not), a
    PettingZoo env or a vector env; TypeError when there is none."""
    seen = 0
    obj = env
    while obj is not None and seen < 32:
        if isinstance(obj, core.Engine) or type(obj).__name__ == "Engine" and hasattr(obj, "replay_frame"):
            return obj
        eng = getattr(obj, "engine", None)
        if eng is not None and hasattr(eng, "replay_frame"):
            return eng
        nxt = getattr(obj, "unwrapped", None)
        if nxt is obj or nxt is None:
            nxt = getattr(obj, "env", None)
        obj = nxt
        seen += 1
    raise TypeError(f"no TerraZero engine behind {type(env).__name__}: pass an Engine, a Gymnasium or PettingZoo "
                    "env of this package or a TerraZeroVectorEnv")


def _map_layers(map_data: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The map's drawable layers: polylines as points (m, float) with offsets, plus their kinds."""
    arrays: dict[str, np.ndarray] = {}

    def ragged(name: str, r: Any) -> None:
        arrays[f"map_{name}_pts"] = np.asarray(r.values, np.float64).reshape(-1, r.values.shape[-1])[:, :2]
        arrays[f"map_{name}_off"] = np.asarray(r.offsets, np.int64)

    ragged("lanes", map_data.lanes.centerline)
    ragged("lines", map_data.road_lines.geometry)
    ragged("edges", map_data.road_edges)
    ragged("crosswalks", map_data.crosswalks)
    ragged("sidewalks", map_data.sidewalks)
    arrays["map_lane_inter"] = np.asarray(map_data.lanes.intersection, np.int32)
    arrays["map_line_type"] = np.asarray(map_data.road_lines.line_type, np.uint8)
    sl = np.asarray(map_data.stop_lines.points, np.float64).reshape(-1, 2, 3)
    arrays["map_stop_lines"] = sl[:, :, :2].reshape(-1, 4)
    arrays["map_stop_control"] = np.asarray(map_data.stop_lines.control, np.uint8)
    arrays["map_signals"] = np.asarray(map_data.signals.position, np.float64).reshape(-1, 3)[:, :2]
    arrays["map_signal_stop_line"] = np.asarray(map_data.signals.stop_line, np.int32)
    info = {"name": map_data.name, "handedness": int(map_data.handedness)}
    return info, arrays


class ReplayRecorder:
    """Records one world of an engine, frame by frame, into :class:`Replay` episodes.

    ``env``: an :class:`~terrazero_env.engine.Engine` or any env of this package (``engine_of``).
    ``world``: which world (0 for the Gymnasium and PettingZoo envs). ``meta``: JSON-serializable
    facts stored with each episode (a title, the seed, the run, a score...). Call :meth:`capture`
    after every reset and every step; a frame whose world step is not the previous one's plus one
    starts a new episode."""

    def __init__(self, env: Any, world: int = 0, *, meta: dict[str, Any] | None = None) -> None:
        self.engine = engine_of(env)
        if isinstance(world, bool) or not isinstance(world, (int, np.integer)):
            raise TypeError(f"world must be an integer, got {type(world).__name__}")
        if not 0 <= int(world) < self.engine.num_worlds:
            raise ValueError(f"world must lie in [0, {self.engine.num_worlds}), got {world}")
        if meta is not None:
            json.dumps(meta, allow_nan=False)  # refuse what cannot be stored, now rather than at save
            problem = _meta_problem(meta, "ReplayRecorder")
            if problem:
                raise ValueError(problem)
        self.world = int(world)
        self.meta = dict(meta or {})
        self.episodes: list[Replay] = []
        self._frames: list[dict[str, np.ndarray]] = []
        self._last_t = -2
        self._map_id = -1

    def capture(self) -> None:
        """Record the world's state now (after a reset or a step)."""
        e, w = self.engine, self.world
        t = int(e.world_steps[w])
        map_id = int(e.world_map[w])
        if self._frames and (t != self._last_t + 1 or map_id != self._map_id):
            self._finish()
        self._last_t, self._map_id = t, map_id
        f = e.replay_frame(w)
        n = f["x"].shape[0]
        view = e.agents[w, :n]
        f["goal_x"] = np.asarray(view["goal_x"], np.float64)
        f["goal_y"] = np.asarray(view["goal_y"], np.float64)
        K = e.slots_per_world
        rows = slice(w * K, (w + 1) * K)
        f["reward"] = np.array(e.rewards[rows], np.float32)
        f["reward_terms"] = np.array(e.reward_terms[rows], np.float32)
        f["slot_agent"] = np.array(e.slot_agent[rows], np.int16)
        f["valid"] = np.array(e.valid[rows], np.uint8)
        f["signals"] = e.signal_states(w)
        f["stop_line_states"] = e.stop_line_states(w)
        f["step"] = np.array(t)
        self._frames.append(f)

    def _finish(self) -> None:
        if self._frames:
            self.episodes.append(self._assemble(self._frames))
        self._frames = []

    def replay(self) -> Replay:
        """The episode being recorded (or the last one finished), as a :class:`Replay`."""
        if self._frames:
            return self._assemble(self._frames)
        if self.episodes:
            return self.episodes[-1]
        raise ValueError("no frame captured: call capture() after a reset and after every step")

    def save(self, path: str | os.PathLike[str], **meta: Any) -> Path:
        """Write :meth:`replay` (with ``meta`` added to its meta) to ``path`` (``.tzr``)."""
        rep = self.replay()
        if meta:
            rep = Replay({**rep.header, "meta": {**rep.meta, **meta}}, rep.arrays, rep.events)
        return save_replay(rep, path)

    def _assemble(self, frames: list[dict[str, np.ndarray]]) -> Replay:
        e = self.engine
        T = len(frames)
        N = max(f["x"].shape[0] for f in frames)
        arrays: dict[str, np.ndarray] = {}
        for name in _FRAME_ARRAYS:
            fill = -1 if name == "slot" else 0
            out = np.full((T, N), fill, frames[0][name].dtype)
            for t, f in enumerate(frames):  # per frame, not per agent
                out[t, :f[name].shape[0]] = f[name]
            arrays[name] = out
        for name in ("reward", "reward_terms", "slot_agent", "valid", "signals", "stop_line_states"):
            arrays[name] = np.stack([f[name] for f in frames])
        ev_t, ev_i, ev_b, ev_p = [], [], [], []
        for t, f in enumerate(frames):
            hit = np.flatnonzero(f["events"])
            if hit.size:
                ev_t.append(np.full(hit.size, t))
                ev_i.append(hit)
                ev_b.append(f["events"][hit])
                ev_p.append(f["partner"][hit])
        events = (np.stack([np.concatenate(ev_t), np.concatenate(ev_i), np.concatenate(ev_b), np.concatenate(ev_p)], 1)
                  .astype(np.int64) if ev_t else np.zeros((0, 4), np.int64))
        rm = e.road_maps[self._map_id]
        map_info, map_arrays = _map_layers(rm.map_data)
        arrays.update(map_arrays)
        header = {
            "format": "terrazero-replay", "version": FORMAT_VERSION, "dt": float(e.config.dt), "frames": T,
            "agents": N, "slots": int(e.slots_per_world), "first_step": int(frames[0]["step"]),
            "map": map_info, "names": {
                "classes": list(core.AGENT_CLASSES), "movers": list(core.MOVERS), "events": list(core.STEP_EVENTS),
                "reward_terms": list(core.REWARD_TERMS), "signal_states": list(core.SIGNAL_STATES),
                "static_kinds": list(core.STATIC_KINDS), "control_types": list(core.CONTROL_TYPES)},
            "meta": dict(self.meta),
        }
        return Replay(header, arrays, events)
