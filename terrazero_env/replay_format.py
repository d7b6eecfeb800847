"""The ``.tzr`` replay file: the format, its codec and the reader that treats every file as untrusted.

The file (``.tzr``, format version :data:`FORMAT_VERSION`, documented in ``docs/replay.md``) is a gzip
stream of an 8-byte magic, a little-endian uint32 header length, a JSON header and the arrays it
names (little-endian, 8-byte aligned); arrays marked ``delta`` hold differences along their first
axis, wrapping in their integer type, and are summed back on load.

A replay is a file users share, so the reader treats it as untrusted (docs/hardening.md, third pass): it
reads only a regular file of at most :data:`MAX_FILE_BYTES`, inflates at most :data:`MAX_RAW_BYTES`,
and checks every field of the header (types, counts, array byte ranges inside the file and not
overlapping, the bytes the decoded arrays will take against :data:`MAX_DECODED_BYTES`) before it
allocates any array; :class:`ReplayError` names the field.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .foundation.safe_files import UnsafeFileError, atomic_write, load_json, read_bytes

__all__ = ["FORMAT_VERSION", "MAGIC", "MAX_ARRAYS", "MAX_DECODED_BYTES", "MAX_FILE_BYTES", "MAX_HEADER_BYTES",
           "MAX_RAW_BYTES", "Replay", "ReplayError", "check_header", "encode_replay", "load_replay", "load_replay_header",
           "read_replay_file", "replay_from_bytes", "save_replay"]

#: First bytes of the uncompressed stream.
MAGIC = b"TZREPLAY"
#: Version of the layout below; a reader refuses any other.
FORMAT_VERSION = 1
#: Units of the quantized arrays (metres, radians, m/s, m/s^2 per integer step).
POS_UNIT = 0.01
HEADING_UNIT = 2 * math.pi / 65536
SPEED_UNIT = 0.01
SIZE_UNIT = 0.01
#: Limits a file may ask of a reader (the trust boundary of a replay; docs/hardening.md, third pass). A
#: file at every limit at once costs the reader about MAX_FILE_BYTES + MAX_RAW_BYTES +
#: MAX_DECODED_BYTES of memory and a second of work.
#: Bytes of the ``.tzr`` file as stored (gzip).
MAX_FILE_BYTES = 1 << 27
#: Bytes of the uncompressed stream (magic, header, arrays), counted while inflating: a gzip bomb
#: stops here. A 25 s, 64-agent episode is about 1 MiB; this is 128 MiB.
MAX_RAW_BYTES = 1 << 27
#: Bytes of the JSON header.
MAX_HEADER_BYTES = 1 << 22
#: Bytes of the decoded arrays together (the quantized ones become float64: up to 4x their stored
#: bytes), summed from the declared shapes before the first is allocated.
MAX_DECODED_BYTES = 1 << 29
#: Bytes of one stored array, and the largest extent of one axis.
MAX_ARRAY_BYTES = 1 << 31
#: Arrays the header may list (a replay of this version writes about 40).
MAX_ARRAYS = 256
#: Names in each of the header's vocabularies (``names.classes``, ...).
MAX_NAMES = 256
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
        meta = self.header.get("meta", {})
        return meta if isinstance(meta, dict) else {}  # a read replay's meta is checked to be an object

    def frame(self, t: int) -> dict[str, np.ndarray]:
        """Frame ``t``'s agent arrays ``[N]`` (the rows alive or not; ``alive`` says which)."""
        if not 0 <= t < self.num_frames:
            raise IndexError(f"frame {t} outside [0, {self.num_frames})")
        return {k: self.arrays[k][t] for k in _FRAME_ARRAYS}


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


def encode_replay(replay: Replay) -> bytes:
    """The ``.tzr`` bytes (gzip stream) of a :class:`Replay` (see the module docstring for the layout).
    The header is checked by the reader's own rules first (:func:`check_header`), so what is written
    reads back; ValueError names the field that would not."""
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
    try:
        hb = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise ValueError(f"replay header: cannot be stored as JSON ({e})") from None
    hb += b" " * ((-(len(MAGIC) + 4 + len(hb))) % 8)
    check_header(header, "replay", body_bytes=offset, header_bytes=len(hb))
    data = MAGIC + struct.pack("<I", len(hb)) + hb + b"".join(blobs)
    if len(data) > MAX_RAW_BYTES:
        raise ValueError(f"replay: {len(data)} bytes uncompressed, over the reader's {MAX_RAW_BYTES}-byte limit "
                         "(MAX_RAW_BYTES): record a shorter episode or fewer agents")
    return gzip.compress(data, compresslevel=9, mtime=0)


def save_replay(replay: Replay, path: str | os.PathLike[str]) -> Path:
    """Write a :class:`Replay` to ``path`` (:func:`encode_replay`), atomically: a link at ``path`` is
    refused, never written through (``safe_files.atomic_write``)."""
    path = Path(path)
    data = encode_replay(replay)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, "replay")
    return path


# ------------------------------------------------------------------------------------ the reader's checks
# Everything the header declares is checked before any array is allocated (docs/hardening.md, third pass):
# the type of every field the viewer and the index use, the arrays' count, names, dtypes and shapes,
# byte ranges that lie inside the file and do not overlap, and the bytes the decoded arrays will take.

_NAME_LISTS = ("classes", "movers", "events", "reward_terms", "signal_states", "static_kinds", "control_types")
#: meta fields the viewer and the index read, with their JSON types (each may also be null); the other
#: meta fields are free JSON, shown nowhere as markup.
_META_FIELDS = {"title": "a string", "group": "a string", "driver": "a string", "score": "a number",
                "focus": "an integer"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _meta_problem(meta: Any, where: str) -> str | None:
    """Why ``meta`` cannot be a replay's meta (None when it can): an object whose fields the viewer
    reads have their types."""
    if not isinstance(meta, dict):
        return f"{where}: 'meta' must be an object, got {_type_name(meta)}"
    for key, want in _META_FIELDS.items():
        v = meta.get(key)
        if v is None:
            continue
        ok = {"a string": isinstance(v, str), "a number": _is_real(v), "an integer": _is_int(v)}[want]
        if not ok:
            return f"{where}: 'meta.{key}' must be {want} or null, got {_type_name(v)} {_short(v)}"
    return None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _finite_json(node: Any) -> bool:
    """Whether no number in the parsed JSON ``node`` is NaN or infinite (a browser's JSON.parse refuses
    them; Python's accepts them)."""
    stack = [node]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


@dataclass(frozen=True)
class _Entry:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    unit: float | None
    delta: bool


def check_header(header: Any, where: str, body_bytes: int | None = None,
                 header_bytes: int | None = None) -> list[_Entry]:
    """Check a replay header (the parsed JSON) before anything it declares is allocated, and return
    its array entries. ``body_bytes``: the bytes after the header (each array must lie inside them;
    None when only the header was read). ReplayError names the field; the limits are the module's
    ``MAX_*`` constants."""
    if not isinstance(header, dict) or header.get("format") != "terrazero-replay":
        raise ReplayError(f"{where}: header does not describe a terrazero replay")
    if header.get("version") != FORMAT_VERSION:
        raise ReplayError(f"{where}: format version {_short(header.get('version'))}, this reader reads "
                          f"{FORMAT_VERSION}")
    if header_bytes is not None and header_bytes > MAX_HEADER_BYTES:
        raise ReplayError(f"{where}: header of {header_bytes} bytes, over the {MAX_HEADER_BYTES}-byte limit")
    if not _finite_json(header):
        raise ReplayError(f"{where}: header holds NaN or Infinity (not JSON)")
    T, N, K = header.get("frames"), header.get("agents"), header.get("slots")
    for key, v, hi in (("frames", T, MAX_FRAMES), ("agents", N, MAX_AGENTS), ("slots", K, MAX_AGENTS)):
        if not _is_int(v) or not 0 <= v <= hi:
            raise ReplayError(f"{where}: header {key!r} must be an integer in [0, {hi}], got {_short(v)}")
    dt = header.get("dt")
    if not _is_real(dt) or dt <= 0:
        raise ReplayError(f"{where}: header 'dt' must be a positive number, got {_short(dt)}")
    first = header.get("first_step", 0)
    if not _is_int(first) or first < 0:
        raise ReplayError(f"{where}: header 'first_step' must be a non-negative integer, got {_short(first)}")
    m = header.get("map")
    if not isinstance(m, dict):
        raise ReplayError(f"{where}: header 'map' must be an object, got {_type_name(m)}")
    if not isinstance(m.get("name", ""), str):
        raise ReplayError(f"{where}: header 'map.name' must be a string, got {_type_name(m.get('name'))}")
    names = header.get("names")
    if not isinstance(names, dict):
        raise ReplayError(f"{where}: header 'names' must be an object, got {_type_name(names)}")
    for key in _NAME_LISTS:
        lst = names.get(key)
        if not isinstance(lst, list) or not all(isinstance(x, str) for x in lst):
            raise ReplayError(f"{where}: header 'names.{key}' must be a list of strings, got {_short(lst)}")
        if len(lst) > MAX_NAMES:
            raise ReplayError(f"{where}: header 'names.{key}' lists {len(lst)} names, over the limit of {MAX_NAMES}")
    if "meta" in header:
        problem = _meta_problem(header["meta"], where)
        if problem:
            raise ReplayError(problem)
    entries = header.get("arrays")
    if not isinstance(entries, list):
        raise ReplayError(f"{where}: header 'arrays' must be a list, got {_type_name(entries)}")
    if len(entries) > MAX_ARRAYS:
        raise ReplayError(f"{where}: header lists {len(entries)} arrays, over the limit of {MAX_ARRAYS}")
    out: list[_Entry] = []
    seen: set[str] = set()
    for k, ent in enumerate(entries):
        out.append(_check_entry(ent, k, where, seen))
    # byte ranges: inside the body, none overlapping another (so the arrays together take at most the
    # file's bytes, however many entries point at the same bytes)
    ranges = sorted((e.offset, e.offset + e.nbytes, e.name) for e in out if e.nbytes)
    for (_, a1, an), (b0, _, bn) in zip(ranges, ranges[1:]):
        if b0 < a1:
            raise ReplayError(f"{where}: arrays {an!r} and {bn!r} overlap (bytes {b0}-{a1}): refused")
    if body_bytes is not None:
        for e in out:
            if e.offset + e.nbytes > body_bytes:
                raise ReplayError(f"{where}: array {e.name!r} (bytes {e.offset}-{e.offset + e.nbytes}) runs past "
                                  f"the end of the file's {body_bytes} bytes of arrays (truncated?)")
    decoded = sum(math.prod(e.shape) * (8 if e.unit is not None or e.name == "events" else e.dtype.itemsize)
                  for e in out)
    if decoded > MAX_DECODED_BYTES:
        raise ReplayError(f"{where}: the arrays would take {decoded} bytes decoded, over the {MAX_DECODED_BYTES}-byte "
                          "limit")
    shapes = {e.name: e.shape for e in out}
    nterms = len(names["reward_terms"])
    need = {**{k: (T, N) for k in _FRAME_ARRAYS}, "reward": (T, K), "slot_agent": (T, K)}
    maybe = {"reward_terms": (T, K, nterms), "valid": (T, K)}
    for name, shape in need.items():
        if shapes.get(name) != shape:
            raise ReplayError(f"{where}: array {name!r} must have shape {shape}, got {shapes.get(name, 'missing')}")
    for name, shape in maybe.items():
        if name in shapes and shapes[name] != shape:
            raise ReplayError(f"{where}: array {name!r} must have shape {shape}, got {shapes[name]}")
    for name in ("signals", "stop_line_states"):
        if name in shapes and (len(shapes[name]) != 2 or shapes[name][0] != T):
            raise ReplayError(f"{where}: array {name!r} must have shape ({T}, n), got {shapes[name]}")
    if "events" in shapes and (len(shapes["events"]) != 2 or shapes["events"][1] != 4):
        raise ReplayError(f"{where}: events must be [n, 4], got {shapes['events']}")
    for name, shape in shapes.items():
        if name.startswith("map_") and name.endswith("_pts") and (len(shape) != 2 or shape[1] != 2):
            raise ReplayError(f"{where}: array {name!r} must have shape (n, 2), got {shape}")
        if name.startswith("map_") and name.endswith("_off") and len(shape) != 1:
            raise ReplayError(f"{where}: array {name!r} must have one axis, got shape {shape}")
    return out


def _check_entry(ent: Any, k: int, where: str, seen: set[str]) -> _Entry:
    if not isinstance(ent, dict):
        raise ReplayError(f"{where}: array entry {k} must be an object, got {_type_name(ent)}")
    name = ent.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 64:
        raise ReplayError(f"{where}: array entry {k}: 'name' must be a string of 1 to 64 characters, got {_short(name)}")
    if name in seen:
        raise ReplayError(f"{where}: array {name!r} is listed twice")
    seen.add(name)
    code, shape, off, nb, unit, delta = (ent.get(f) for f in ("dtype", "shape", "offset", "nbytes", "unit", "delta"))
    if not isinstance(code, str) or code not in _DTYPES:
        raise ReplayError(f"{where}: array {name!r} has unknown dtype {_short(code)}")
    if (not isinstance(shape, list) or not 1 <= len(shape) <= 4
            or not all(_is_int(s) and 0 <= s <= MAX_ARRAY_BYTES for s in shape)):
        raise ReplayError(f"{where}: array {name!r}: 'shape' must be a list of 1 to 4 integers in "
                          f"[0, {MAX_ARRAY_BYTES}], got {_short(shape)}")
    if not _is_int(off) or off < 0:
        raise ReplayError(f"{where}: array {name!r}: 'offset' must be a non-negative integer, got {_short(off)}")
    dt = np.dtype(_DTYPES[code]).newbyteorder("<")
    if not _is_int(nb) or nb != math.prod(shape) * dt.itemsize:  # exact: Python integers do not overflow
        raise ReplayError(f"{where}: array {name!r}: shape {shape} does not match its {_short(nb)} bytes")
    if nb > MAX_ARRAY_BYTES:
        raise ReplayError(f"{where}: array {name!r}: {nb} bytes, over the {MAX_ARRAY_BYTES}-byte limit")
    if unit is not None and (not _is_real(unit) or unit <= 0):
        raise ReplayError(f"{where}: array {name!r}: 'unit' must be a positive number or null, got {_short(unit)}")
    if not isinstance(delta, bool):
        raise ReplayError(f"{where}: array {name!r}: 'delta' must be true or false, got {_short(delta)}")
    return _Entry(name, dt, tuple(shape), off, nb, None if unit is None else float(unit), delta)


def _parse_header(raw: bytes, where: str) -> tuple[dict[str, Any], int]:
    """The header of the uncompressed stream ``raw`` (the whole stream or its beginning) and where its
    arrays start."""
    if len(raw) < len(MAGIC) + 4 or raw[:len(MAGIC)] != MAGIC:
        raise ReplayError(f"{where}: not a TerraZero replay (bad magic)")
    (hlen,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    if hlen > MAX_HEADER_BYTES:
        raise ReplayError(f"{where}: header of {hlen} bytes, over the {MAX_HEADER_BYTES}-byte limit")
    if start + hlen > len(raw):
        raise ReplayError(f"{where}: header of {hlen} bytes is truncated")
    try:
        header = load_json(bytes(raw[start:start + hlen]), f"{where}: header")
    except UnsafeFileError as e:
        raise ReplayError(str(e)) from None
    return header, start + hlen


def _gunzip(data: bytes, where: str, limit: int, *, whole: bool = True) -> bytes:
    """The uncompressed content of the one gzip member ``data``, at most ``limit`` bytes (counted as it
    is inflated, so a small file declaring much costs no more than the limit); with ``whole`` False the
    first ``limit`` bytes, without checking the rest."""
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1 if whole else limit)
    except zlib.error as e:
        raise ReplayError(f"{where}: not a gzip stream or truncated ({e})") from None
    if not whole:
        return out
    if len(out) > limit:
        raise ReplayError(f"{where}: decompresses to more than {limit} bytes (the limit MAX_RAW_BYTES): refused")
    if not d.eof:
        raise ReplayError(f"{where}: not a gzip stream or truncated (the stream ends early)")
    if d.unused_data:
        raise ReplayError(f"{where}: {len(d.unused_data)} bytes after the gzip stream (not a replay file)")
    return out


def _decode(raw: bytes, where: str) -> Replay:
    header, base = _parse_header(raw, where)
    entries = check_header(header, where, body_bytes=len(raw) - base, header_bytes=base - len(MAGIC) - 4)
    T, N = header["frames"], header["agents"]
    body = memoryview(raw)[base:]
    arrays: dict[str, np.ndarray] = {}
    for e in entries:
        a = np.frombuffer(body[e.offset:e.offset + e.nbytes], e.dtype).reshape(e.shape).astype(e.dtype.newbyteorder("="))
        if e.delta and a.shape[0] > 1:
            np.cumsum(a, axis=0, dtype=a.dtype, out=a)  # integer wrap, as written
        if e.unit is not None:
            a = a.astype(np.float64)
            a *= e.unit
        arrays[e.name] = a
    events = arrays.pop("events", np.zeros((0, 4), np.int32)).astype(np.int64)
    if events.size and (events[:, 0].min() < 0 or events[:, 0].max() >= T or events[:, 1].min() < 0
                        or events[:, 1].max() >= N or events[:, 3].min() < -1 or events[:, 3].max() >= N):
        raise ReplayError(f"{where}: an event names a frame or agent outside the replay")
    for name in [n for n in arrays if n.startswith("map_") and n.endswith("_off")]:
        off, pts = arrays[name], arrays.get(name[:-4] + "_pts")
        rows = 0 if pts is None else pts.shape[0]
        if off.size and (off[0] < 0 or off[-1] > rows or (np.diff(off) < 0).any()):
            raise ReplayError(f"{where}: array {name!r} must rise from 0 to at most the {rows} points of its polylines")
    return Replay(header={k: v for k, v in header.items() if k != "arrays"}, arrays=arrays, events=events)


def read_replay_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the ``.tzr`` file ``path`` as stored (gzip), read by the package's file rules: a
    regular file only (a FIFO or a device is refused without blocking), at most :data:`MAX_FILE_BYTES`.
    ReplayError says why not; a missing file raises FileNotFoundError."""
    try:
        return read_bytes(path, MAX_FILE_BYTES, "replay")
    except UnsafeFileError as e:
        raise ReplayError(str(e)) from None
    except FileNotFoundError:
        raise
    except OSError as e:
        raise ReplayError(f"replay {os.fspath(path)}: cannot be read ({e.strerror or e})") from None


def replay_from_bytes(data: bytes, where: str = "replay") -> Replay:
    """Decode and check ``.tzr`` bytes (the gzip stream, as stored); ``where`` names them in errors."""
    return _decode(_gunzip(data, where, MAX_RAW_BYTES), where)


def load_replay(path: str | os.PathLike[str]) -> Replay:
    """Read and check a ``.tzr`` file; :class:`ReplayError` names what is wrong with a bad one."""
    return replay_from_bytes(read_replay_file(path), str(Path(path)))


def load_replay_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checked header of a ``.tzr`` file (without ``arrays``), inflating no more than the header:
    every declared field is checked (:func:`check_header`) but not that the arrays are all there."""
    where = str(Path(path))
    data = read_replay_file(path)
    head = _gunzip(data, where, len(MAGIC) + 4, whole=False)
    if len(head) == len(MAGIC) + 4 and head[:len(MAGIC)] == MAGIC:
        (hlen,) = struct.unpack_from("<I", head, len(MAGIC))
        head = _gunzip(data, where, len(MAGIC) + 4 + min(hlen, MAX_HEADER_BYTES + 1), whole=False)
    header, base = _parse_header(head, where)
    check_header(header, where, header_bytes=base - len(MAGIC) - 4)
    return {k: v for k, v in header.items() if k != "arrays"}
