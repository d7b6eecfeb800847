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

The file (``.tzr``, format version :data:`FORMAT_VERSION`, documented in ``docs/replay.md``) is a gzip
stream of an 8-byte magic, a little-endian uint32 header length, a JSON header and the arrays it
names (little-endian, 8-byte aligned); arrays marked ``delta`` hold differences along their first
axis, wrapping in their integer type, and are summed back on load.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import engine as core

__all__ = ["FORMAT_VERSION", "MAGIC", "Replay", "ReplayError", "ReplayRecorder", "engine_of", "load_replay",
           "reward_from_terms", "save_replay"]

#: First bytes of the uncompressed stream.
MAGIC = b"TZREPLAY"
#: Version of the layout below; a reader refuses any other.
FORMAT_VERSION = 1
#: Units of the quantized arrays (metres, radians, m/s, m/s^2 per integer step).
POS_UNIT = 0.01
HEADING_UNIT = 2 * math.pi / 65536
SPEED_UNIT = 0.01
SIZE_UNIT = 0.01
#: Limits a file may ask of a reader (the trust boundary of a replay).
MAX_HEADER_BYTES = 1 << 22
MAX_ARRAY_BYTES = 1 << 31
MAX_FRAMES = 1 << 20
MAX_AGENTS = 1 << 16

_DTYPES = {"u1": np.uint8, "i1": np.int8, "u2": np.uint16, "i2": np.int16, "i4": np.int32, "u4": np.uint32,
           "f4": np.float32}
#: Arrays of the frames: name -> (dtype, quantization unit or None, difference over time).
_FRAME_ARRAYS = {
    "x": ("i4", POS_UNIT, True), "y": ("i4", POS_UNIT, True), "heading": ("i2", HEADING_UNIT, True),
    "speed": ("i2", SPEED_UNIT, True), "a_long": ("i2", SPEED_UNIT, True), "a_lat": ("i2", SPEED_UNIT, True),
    "length": ("u2", SIZE_UNIT, True), "width": ("u2", SIZE_UNIT, True),
    "goal_x": ("i4", POS_UNIT, True), "goal_y": ("i4", POS_UNIT, True),
    "cls": ("u1", None, True), "kind": ("u1", None, True), "mover": ("u1", None, True), "alive": ("u1", None, True),
    "slot": ("i2", None, True),
}


class ReplayError(ValueError):
    """A replay file that cannot be read: not a replay, another version, truncated or inconsistent."""


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


@dataclass
class Replay:
    """A decoded replay: ``header`` (the JSON header: version, dt, names, meta) and ``arrays``
    (per frame ``[T, N]``: ``x y heading speed a_long a_lat length width goal_x goal_y`` float64 in
    metres, radians, m/s and m/s^2; ``cls kind mover alive slot``; per slot ``[T, K]``: ``reward``,
    ``slot_agent``; ``reward_terms [T, K, len(REWARD_TERMS)]`` float32; ``signals [T, G]``,
    ``stop_line_states [T, S]``; the map layers ``map_*``), and ``events``: one ``(frame, agent,
    bits, partner)`` row per agent and frame with an event (``STEP_EVENTS`` bits)."""

    header: dict[str, Any]
    arrays: dict[str, np.ndarray]
    events: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))

    @property
    def num_frames(self) -> int:
        return int(self.header["frames"])

    @property
    def meta(self) -> dict[str, Any]:
        return self.header.get("meta", {})

    def frame(self, t: int) -> dict[str, np.ndarray]:
        """Frame ``t``'s agent arrays ``[N]`` (the rows alive or not; ``alive`` says which)."""
        if not 0 <= t < self.num_frames:
            raise IndexError(f"frame {t} outside [0, {self.num_frames})")
        return {k: self.arrays[k][t] for k in _FRAME_ARRAYS}


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
            json.dumps(meta)  # refuse what cannot be stored, now rather than at save
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


# ------------------------------------------------------------------------------------ file codec

def _quantize(name: str, a: np.ndarray) -> tuple[np.ndarray, str, float | None, bool]:
    if name in _FRAME_ARRAYS:
        code, unit, delta = _FRAME_ARRAYS[name]
    elif name.startswith("map_") and name.endswith("_pts"):
        code, unit, delta = "i4", POS_UNIT, True
    elif name in ("map_stop_lines", "map_signals"):
        code, unit, delta = "i4", POS_UNIT, False
    elif name.endswith("_off") or name in ("map_lane_inter", "map_signal_stop_line"):
        code, unit, delta = "i4", None, True if name.endswith("_off") else False
    elif name in ("reward", "reward_terms"):
        code, unit, delta = "f4", None, False
    elif name == "slot_agent":
        code, unit, delta = "i2", None, True
    elif name in ("valid", "signals", "stop_line_states", "map_stop_control", "map_line_type"):
        code, unit, delta = "u1", None, name != "map_stop_control" and name != "map_line_type"
    else:
        raise ValueError(f"replay array {name!r}: no encoding for it")
    dt = np.dtype(_DTYPES[code])
    if unit is not None:
        q = np.rint(np.asarray(a, np.float64) / unit)
        if name == "heading":  # wrap to the int16 circle
            q = np.mod(q + 32768, 65536) - 32768
        info = np.iinfo(dt)
        q = np.clip(q, info.min, info.max).astype(dt)
    else:
        q = np.asarray(a).astype(dt)
    if delta and q.shape[0] > 1:
        d = q.copy()
        d[1:] = q[1:] - q[:-1]  # wraps in the integer type; summed back the same way
        q = d
    return np.ascontiguousarray(q.astype(dt.newbyteorder("<"))), code, unit, delta


def save_replay(replay: Replay, path: str | os.PathLike[str]) -> Path:
    """Write a :class:`Replay` to ``path`` (see the module docstring for the layout)."""
    path = Path(path)
    entries = []
    blobs = []
    offset = 0
    items = dict(replay.arrays)
    items["events"] = np.asarray(replay.events, np.int64).reshape(-1, 4)
    for name in sorted(items):
        if name == "events":
            ev = items[name]
            q, code, unit, delta = np.ascontiguousarray(ev.astype("<i4")), "i4", None, False
        else:
            q, code, unit, delta = _quantize(name, items[name])
        raw = q.tobytes()
        entries.append({"name": name, "dtype": code, "shape": list(q.shape), "offset": offset, "nbytes": len(raw),
                        "unit": unit, "delta": bool(delta)})
        pad = (-len(raw)) % 8
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    header = {**replay.header, "arrays": entries}
    hb = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    hb += b" " * ((-(len(MAGIC) + 4 + len(hb))) % 8)
    data = MAGIC + struct.pack("<I", len(hb)) + hb + b"".join(blobs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return path


def _decode(raw: bytes, where: str) -> Replay:
    if len(raw) < len(MAGIC) + 4 or raw[:len(MAGIC)] != MAGIC:
        raise ReplayError(f"{where}: not a TerraZero replay (bad magic)")
    (hlen,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    if hlen > MAX_HEADER_BYTES or start + hlen > len(raw):
        raise ReplayError(f"{where}: header of {hlen} bytes is truncated or too large")
    try:
        header = json.loads(raw[start:start + hlen].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReplayError(f"{where}: header is not JSON ({e})") from None
    if not isinstance(header, dict) or header.get("format") != "terrazero-replay":
        raise ReplayError(f"{where}: header does not describe a terrazero replay")
    if header.get("version") != FORMAT_VERSION:
        raise ReplayError(f"{where}: format version {header.get('version')!r}, this reader reads {FORMAT_VERSION}")
    T, N, K = header.get("frames"), header.get("agents"), header.get("slots")
    for key, v, hi in (("frames", T, MAX_FRAMES), ("agents", N, MAX_AGENTS), ("slots", K, MAX_AGENTS)):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
            raise ReplayError(f"{where}: header {key!r} must be an integer in [0, {hi}], got {v!r}")
    body = memoryview(raw)[start + hlen:]
    arrays: dict[str, np.ndarray] = {}
    entries = header.get("arrays")
    if not isinstance(entries, list):
        raise ReplayError(f"{where}: header lists no arrays")
    for ent in entries:
        try:
            name, code, shape = str(ent["name"]), ent["dtype"], [int(s) for s in ent["shape"]]
            off, nb, unit, delta = int(ent["offset"]), int(ent["nbytes"]), ent["unit"], bool(ent["delta"])
        except (KeyError, TypeError, ValueError):
            raise ReplayError(f"{where}: malformed array entry {ent!r}") from None
        if code not in _DTYPES:
            raise ReplayError(f"{where}: array {name!r} has unknown dtype {code!r}")
        dt = np.dtype(_DTYPES[code]).newbyteorder("<")
        if any(s < 0 for s in shape) or nb > MAX_ARRAY_BYTES or int(np.prod(shape, dtype=np.int64)) * dt.itemsize != nb:
            raise ReplayError(f"{where}: array {name!r}: shape {shape} does not match its {nb} bytes")
        if off < 0 or off + nb > len(body):
            raise ReplayError(f"{where}: array {name!r} runs past the end of the file (truncated?)")
        a = np.frombuffer(body[off:off + nb], dt).reshape(shape).astype(dt.newbyteorder("="))
        if delta and a.shape[0] > 1:
            a = np.cumsum(a, axis=0, dtype=a.dtype)  # integer wrap, as written
        if unit is not None:
            a = a.astype(np.float64) * float(unit)
        arrays[name] = a
    need = {**{k: (T, N) for k in _FRAME_ARRAYS}, "reward": (T, K), "slot_agent": (T, K)}
    for name, shape in need.items():
        if name not in arrays or arrays[name].shape != shape:
            got = arrays[name].shape if name in arrays else "missing"
            raise ReplayError(f"{where}: array {name!r} must have shape {shape}, got {got}")
    events = arrays.pop("events", np.zeros((0, 4), np.int32)).astype(np.int64)
    if events.ndim != 2 or events.shape[1] != 4:
        raise ReplayError(f"{where}: events must be [n, 4], got {events.shape}")
    if events.size and (events[:, 0].min() < 0 or events[:, 0].max() >= T or events[:, 1].min() < 0
                        or events[:, 1].max() >= N or events[:, 3].max() >= N):
        raise ReplayError(f"{where}: an event names a frame or agent outside the replay")
    return Replay(header={k: v for k, v in header.items() if k != "arrays"}, arrays=arrays, events=events)


def load_replay(path: str | os.PathLike[str]) -> Replay:
    """Read and check a ``.tzr`` file; :class:`ReplayError` names what is wrong with a bad one."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read(MAX_ARRAY_BYTES + 1)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ReplayError(f"{path}: not a gzip stream or truncated ({e})") from None
    return _decode(raw, str(path))
