"""The ``.tzb`` binary map format ("terrabin", TerraZero section 3.4).

Layout (all integers little-endian; see ``docs/terrabin.md``)::

    header   64 bytes   magic b"TZBIN\\r\\n\\x1a", u16 major, u16 minor, u32 byte-order mark 0x01020304,
                        u32 section count, u64 section-table offset, u64 file size, u32 CRC32 of the
                        section table, 20 reserved zero bytes, u32 CRC32 of header bytes [0, 60)
    sections            each array's raw C-order bytes, 64-byte aligned
    table               one 128-byte entry per section: name (48 bytes, UTF-8, NUL-padded),
                        dtype (8 bytes, numpy ``str``, e.g. "<f8"), u32 ndim, 4 x u64 shape,
                        u64 offset, u64 nbytes, u32 CRC32 of the data, 16 reserved zero bytes

Every ``MapData`` array becomes one section named by its dotted path (``lanes.centerline.values``);
scalars and metadata travel in a JSON section ``meta``. Reading copies the file into memory once (so a
file truncated or replaced on disk while a map is in use cannot fault the process) and wraps each
section with ``np.frombuffer``: no array is copied again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation.safe_files import UnsafeFileError, atomic_writer, load_json, read_array
from .schema import (
    Handedness,
    Intersections,
    Lanes,
    MapData,
    Ragged,
    RoadLines,
    Signals,
    StopLines,
    StopSigns,
    Tracks,
)

__all__ = ["TerrabinError", "save", "load", "MAGIC", "MAX_FILE_BYTES", "VERSION"]

MAGIC = b"TZBIN\r\n\x1a"
VERSION = (1, 0)
BYTE_ORDER_MARK = 0x01020304
ALIGN = 64
MAX_FILE_BYTES = 4 * 1024**3
"""Largest ``.tzb`` file read (bytes): checked from the file's size before any of it is read."""

_HEADER = struct.Struct("<8sHHIIQQI20sI")  # 64 bytes
_ENTRY = struct.Struct("<48s8sI4QQQI16s")  # 128 bytes
assert _HEADER.size == 64 and _ENTRY.size == 128

_ALLOWED_DTYPES = {"<f8", "<f4", "<i8", "<i4", "|u1", "|b1", "|i1", "<u2", "<i2", "<u4", "<u8"}


class TerrabinError(ValueError):
    """A ``.tzb`` file is truncated, corrupt, of the wrong kind, or from a newer format version."""


# --------------------------------------------------------------------------------------------------
# MapData <-> flat {name: array} + meta


def _flatten(m: MapData) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays: dict[str, np.ndarray] = {}

    def put(prefix: str, obj: Any) -> None:
        if isinstance(obj, np.ndarray):
            arrays[prefix] = obj
        elif isinstance(obj, Ragged):
            arrays[prefix + ".values"] = obj.values
            arrays[prefix + ".offsets"] = obj.offsets
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                v = getattr(obj, f.name)
                if isinstance(v, (np.ndarray, Ragged)) or dataclasses.is_dataclass(v):
                    put(f"{prefix}.{f.name}", v)

    for name in ("lanes", "road_lines", "road_edges", "sidewalks", "crosswalks", "stop_lines", "signals",
                 "stop_signs", "intersections", "tracks"):
        v = getattr(m, name)
        if v is not None:
            put(name, v)
    meta = {
        "name": m.name,
        "handedness": int(m.handedness),
        "has_intersections": m.intersections is not None,
        "has_tracks": m.tracks is not None,
        "tracks_dt": m.tracks.dt if m.tracks is not None else None,
        "metadata": m.metadata,
    }
    return arrays, meta


def _ragged(a: dict[str, np.ndarray], prefix: str) -> Ragged:
    return Ragged(values=a[prefix + ".values"], offsets=a[prefix + ".offsets"])


def _unflatten(a: dict[str, np.ndarray], meta: dict[str, Any]) -> MapData:
    def fields_of(cls: type, prefix: str, **extra: Any) -> Any:
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in extra:
                continue
            key = f"{prefix}.{f.name}"
            kwargs[f.name] = _ragged(a, key) if key + ".offsets" in a else a[key]
        return cls(**kwargs, **extra)

    return MapData(
        lanes=fields_of(Lanes, "lanes"),
        road_lines=fields_of(RoadLines, "road_lines"),
        road_edges=_ragged(a, "road_edges"),
        sidewalks=_ragged(a, "sidewalks"),
        crosswalks=_ragged(a, "crosswalks"),
        stop_lines=fields_of(StopLines, "stop_lines"),
        signals=fields_of(Signals, "signals"),
        stop_signs=fields_of(StopSigns, "stop_signs"),
        intersections=fields_of(Intersections, "intersections") if meta["has_intersections"] else None,
        handedness=Handedness(meta["handedness"]),
        tracks=fields_of(Tracks, "tracks", dt=float(meta["tracks_dt"])) if meta["has_tracks"] else None,
        name=meta["name"],
        metadata=meta["metadata"],
    )


# --------------------------------------------------------------------------------------------------
# writing


def _pad(n: int) -> int:
    return (-n) % ALIGN


def save(m: MapData, path: str | os.PathLike[str]) -> Path:
    """Write ``m`` to ``path`` as a ``.tzb`` file (atomically: a temporary file is renamed into place)."""
    arrays, meta = _flatten(m)
    sections: list[tuple[str, np.ndarray]] = [
        ("meta", np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))
    ]
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        if dt.str not in _ALLOWED_DTYPES:
            raise TypeError(f"{name}: dtype {arr.dtype} cannot be stored in a .tzb file")
        if arr.ndim > 4:
            raise TypeError(f"{name}: {arr.ndim} dimensions, at most 4 are stored")
        sections.append((name, arr.astype(dt, copy=False)))

    path = Path(path)
    entries = []
    with atomic_writer(path, "map") as f:
        f.write(b"\0" * _HEADER.size)
        pos = _HEADER.size
        for name, arr in sections:
            f.write(b"\0" * _pad(pos))
            pos += _pad(pos)
            data = arr.tobytes()
            enc = name.encode()
            if len(enc) > 48:
                raise ValueError(f"section name too long: {name}")
            shape = list(arr.shape) + [0] * (4 - arr.ndim)
            entries.append(_ENTRY.pack(enc, arr.dtype.str.encode(), arr.ndim, *shape, pos, len(data),
                                       zlib.crc32(data), b"\0" * 16))
            f.write(data)
            pos += len(data)
        f.write(b"\0" * _pad(pos))
        pos += _pad(pos)
        table = b"".join(entries)
        table_offset = pos
        f.write(table)
        size = pos + len(table)
        head = _HEADER.pack(MAGIC, VERSION[0], VERSION[1], BYTE_ORDER_MARK, len(sections), table_offset,
                            size, zlib.crc32(table), b"\0" * 20, 0)
        head = head[:60] + struct.pack("<I", zlib.crc32(head[:60]))
        f.seek(0)
        f.write(head)
    return path


# --------------------------------------------------------------------------------------------------
# reading


def _read_header(buf: memoryview | bytes, path: str) -> tuple[int, int, int]:
    if len(buf) < _HEADER.size:
        if bytes(buf[:8]) != MAGIC[: len(buf[:8])]:
            raise TerrabinError(f"{path}: not a terrabin file (wrong magic)")
        raise TerrabinError(f"{path}: truncated: {len(buf)} bytes, the header alone needs {_HEADER.size}")
    magic, major, minor, bom, count, table_off, size, table_crc, _, head_crc = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise TerrabinError(f"{path}: not a terrabin file (wrong magic {magic!r}, expected {MAGIC!r})")
    if bom != BYTE_ORDER_MARK:
        raise TerrabinError(f"{path}: unsupported byte order (mark {bom:#010x}); files are little-endian")
    if major > VERSION[0]:
        raise TerrabinError(
            f"{path}: format version {major}.{minor} is newer than this reader ({VERSION[0]}.{VERSION[1]}); "
            "upgrade terrazero-env")
    if zlib.crc32(bytes(buf[:60])) != head_crc:
        raise TerrabinError(f"{path}: corrupt header (checksum mismatch)")
    if len(buf) < size:
        raise TerrabinError(f"{path}: truncated: {len(buf)} bytes, header says {size}")
    if table_off + count * _ENTRY.size != size:
        raise TerrabinError(f"{path}: corrupt header (section table does not end at the file end)")
    if zlib.crc32(bytes(buf[table_off:size])) != table_crc:
        raise TerrabinError(f"{path}: corrupt section table (checksum mismatch)")
    return count, table_off, size


def read_sections(path: str | os.PathLike[str], *, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read ``path`` and return its sections as read-only arrays (views of one private copy of the
    file) plus meta. The file is copied into memory rather than memory-mapped: a map stays valid when
    its file is truncated or replaced on disk while in use (a mapping of a truncated file raises
    SIGBUS on access). Only regular files of at most ``MAX_FILE_BYTES`` are read (a FIFO is refused
    without blocking)."""
    path_s = os.fspath(path)
    try:
        data = read_array(path_s, MAX_FILE_BYTES, "map", ALIGN)
    except UnsafeFileError as e:
        raise TerrabinError(str(e)) from None
    if not data.size:
        raise TerrabinError(f"{path_s}: truncated: empty file")
    buf = memoryview(data)
    count, table_off, size = _read_header(buf, path_s)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] | None = None
    for i in range(count):
        name_b, dtype_b, ndim, s0, s1, s2, s3, off, nbytes, crc, _ = _ENTRY.unpack_from(buf, table_off + i * _ENTRY.size)
        name = name_b.rstrip(b"\0").decode("utf-8", "replace")
        dtype_s = dtype_b.rstrip(b"\0").decode("ascii", "replace")
        if dtype_s not in _ALLOWED_DTYPES or ndim > 4:
            raise TerrabinError(f"{path_s}: corrupt section {name!r} (dtype {dtype_s!r}, ndim {ndim})")
        shape = (s0, s1, s2, s3)[:ndim]
        dtype = np.dtype(dtype_s)
        if math.prod(shape) * dtype.itemsize != nbytes or off + nbytes > table_off:
            raise TerrabinError(f"{path_s}: corrupt section {name!r} (shape {shape} does not match its extent)")
        view = buf[off : off + nbytes]
        if verify and zlib.crc32(view) != crc:
            raise TerrabinError(f"{path_s}: corrupt section {name!r} (checksum mismatch)")
        if name == "meta":
            try:
                meta = load_json(bytes(view), f"{path_s}: section 'meta'")
            except UnsafeFileError as e:
                raise TerrabinError(f"corrupt file: {e}") from None
            if not isinstance(meta, dict):
                raise TerrabinError(f"{path_s}: corrupt section 'meta' (a {type(meta).__name__}, not an object)")
        else:
            arrays[name] = np.frombuffer(view, dtype=dtype).reshape(shape)
    if meta is None:
        raise TerrabinError(f"{path_s}: corrupt file (no 'meta' section)")
    return arrays, meta


def load(path: str | os.PathLike[str], *, verify: bool = True) -> MapData:
    """Read a ``.tzb`` file into :class:`MapData` backed by one read-only private copy of the file.

    ``verify``: check every section's CRC32 (reads each byte once; a few ms for a large map).
    Raises :class:`TerrabinError` naming the problem for truncated, corrupt, wrong-magic or
    future-version files, and ``MapValidationError`` naming the element for contents that fail
    :func:`~terrazero_env.maps.builder.validate` (out-of-range indices, non-finite points, bad
    shapes), even under valid checksums.
    """
    from .builder import MapValidationError, validate

    arrays, meta = read_sections(path, verify=verify)
    try:
        m = _unflatten(arrays, meta)
    except (KeyError, TypeError, ValueError) as e:
        raise TerrabinError(f"{os.fspath(path)}: corrupt file (missing or bad section: {e})") from None
    # A valid checksum only says the bytes are the ones written: the contents pass the builder's
    # checks before anything reads them (``load_built`` adds the checks of a built map's derived fields).
    try:
        validate(m)
    except MapValidationError as e:
        raise MapValidationError(f"{os.fspath(path)}: {e}") from None
    return m
