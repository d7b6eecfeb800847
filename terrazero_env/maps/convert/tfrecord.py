"""TFRecord framing, read and written without TensorFlow.

A TFRecord file is a sequence of records, each framed as (TensorFlow's ``tf.io`` documentation,
"TFRecords format details")::

    uint64 length            little-endian
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

with ``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` (mod 2**32) and CRC-32C (Castagnoli) from
the ``google-crc32c`` package (Google's C implementation, hardware-accelerated where the CPU has it).
Both checksums are verified: a flipped bit, a truncated file or a record longer than the limit is a
:class:`~terrazero_env.maps.builder.MapValidationError` naming the file, the record and the byte offset.
GZIP- or ZLIB-compressed TFRecords are not read (WOMD ships them uncompressed).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import google_crc32c

from ..builder import MapValidationError

__all__ = ["MAX_RECORD_BYTES", "iter_records", "masked_crc32c", "record_offsets", "read_record", "write_records"]

#: The largest record read (bytes). WOMD scenarios are a few MiB; the limit bounds the memory a
#: corrupt length field can ask for.
MAX_RECORD_BYTES = 256 * 1024 * 1024
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C TFRecord stores for ``data``."""
    c = google_crc32c.value(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _read_header(f, path: str, index: int, offset: int) -> int | None:
    head = f.read(12)
    if not head:
        return None
    if len(head) < 12:
        raise MapValidationError(f"{path}: record {index} at byte {offset}: truncated header "
                                 f"({len(head)} of 12 bytes); the file ends mid-record")
    length_bytes, crc = head[:8], struct.unpack("<I", head[8:])[0]
    if masked_crc32c(length_bytes) != crc:
        raise MapValidationError(f"{path}: record {index} at byte {offset}: the length's CRC does not match; "
                                 "not a TFRecord file, compressed, or corrupt")
    length = struct.unpack("<Q", length_bytes)[0]
    if length > MAX_RECORD_BYTES:
        raise MapValidationError(f"{path}: record {index} at byte {offset}: {length} bytes, over the "
                                 f"{MAX_RECORD_BYTES}-byte limit")
    return int(length)


def _read_body(f, path: str, index: int, offset: int, length: int) -> bytes:
    data = f.read(length)
    tail = f.read(4)
    if len(data) < length or len(tail) < 4:
        raise MapValidationError(f"{path}: record {index} at byte {offset}: truncated ({len(data)} of {length} "
                                 "data bytes); the file ends mid-record")
    if masked_crc32c(data) != struct.unpack("<I", tail)[0]:
        raise MapValidationError(f"{path}: record {index} at byte {offset}: the data's CRC does not match "
                                 "(corrupt record)")
    return data


def iter_records(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every record's payload in file order, each checked against both CRCs."""
    p = os.fspath(path)
    with open(p, "rb") as f:
        index = 0
        while True:
            offset = f.tell()
            length = _read_header(f, p, index, offset)
            if length is None:
                return
            yield _read_body(f, p, index, offset, length)
            index += 1


def record_offsets(path: str | os.PathLike[str]) -> list[int]:
    """Byte offsets of the records' headers, found by reading only the headers (the length's CRC is
    checked; the data's CRC is checked when a record is read with :func:`read_record`)."""
    p = os.fspath(path)
    size = Path(p).stat().st_size
    out = []
    with open(p, "rb") as f:
        while True:
            offset = f.tell()
            length = _read_header(f, p, len(out), offset)
            if length is None:
                return out
            if offset + 16 + length > size:
                raise MapValidationError(f"{p}: record {len(out)} at byte {offset}: truncated ({length} data "
                                         f"bytes announced, {max(size - offset - 12, 0)} left); the file ends mid-record")
            out.append(offset)
            f.seek(length + 4, os.SEEK_CUR)


def read_record(path: str | os.PathLike[str], offset: int, index: int = 0) -> bytes:
    """The payload of the record whose header starts at ``offset`` (both CRCs checked)."""
    p = os.fspath(path)
    with open(p, "rb") as f:
        f.seek(offset)
        length = _read_header(f, p, index, offset)
        if length is None:
            raise MapValidationError(f"{p}: no record at byte {offset} (end of file)")
        return _read_body(f, p, index, offset, length)


def write_records(path: str | os.PathLike[str], records: Iterable[bytes]) -> Path:
    """Write ``records`` as an uncompressed TFRecord file."""
    p = Path(path)
    with open(p, "wb") as f:
        for data in records:
            length = struct.pack("<Q", len(data))
            f.write(length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data)))
    return p
