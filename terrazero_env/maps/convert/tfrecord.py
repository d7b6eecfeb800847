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
GZIP- or ZLIB-compressed TFRecords are not read (WOMD ships them uncompressed): a file that starts
with a GZIP or ZLIB header is refused from its first bytes, naming the compression, and nothing is ever
inflated. Only regular files are opened, without blocking (a FIFO named ``*.tfrecord`` is refused, not
waited on; docs/hardening.md).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import google_crc32c

from ...foundation.safe_files import atomic_writer
from ..builder import MapValidationError

__all__ = ["MAX_RECORD_BYTES", "MAX_RECORDS", "iter_records", "masked_crc32c", "record_offsets", "read_record", "write_records"]

#: The largest record read (bytes). WOMD scenarios are a few MiB; the limit bounds the memory a
#: corrupt length field can ask for.
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: Most records :func:`record_offsets` lists (WOMD shards hold about 500; an offset costs 36 bytes).
MAX_RECORDS = 1_000_000
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C TFRecord stores for ``data``."""
    c = google_crc32c.value(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _compression(head: bytes) -> str | None:
    """The compression a file's first bytes announce (GZIP's magic, or a ZLIB header), else None."""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return None


def _open(path: str):
    """A binary file object of the regular file ``path``, opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise MapValidationError(f"{path}: a folder, not a TFRecord file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise MapValidationError(f"{path}: not a regular file (a FIFO, device or socket; refused)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_header(f, path: str, index: int, offset: int) -> int | None:
    head = f.read(12)
    if not head:
        return None
    kind = _compression(head) if offset == 0 else None
    if kind and (len(head) < 12 or masked_crc32c(head[:8]) != struct.unpack("<I", head[8:])[0]):
        raise MapValidationError(f"{path}: a {kind}-compressed file; compressed TFRecords are not read "
                                 "(decompress it first, e.g. with gunzip)")
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
    with _open(p) as f:
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
    out = []
    with _open(p) as f:
        size = os.fstat(f.fileno()).st_size
        while True:
            offset = f.tell()
            length = _read_header(f, p, len(out), offset)
            if length is None:
                return out
            if offset + 16 + length > size:
                raise MapValidationError(f"{p}: record {len(out)} at byte {offset}: truncated ({length} data "
                                         f"bytes announced, {max(size - offset - 12, 0)} left); the file ends mid-record")
            if len(out) >= MAX_RECORDS:
                raise MapValidationError(f"{p}: more than {MAX_RECORDS} records (refused)")
            out.append(offset)
            f.seek(length + 4, os.SEEK_CUR)


def read_record(path: str | os.PathLike[str], offset: int, index: int = 0) -> bytes:
    """The payload of the record whose header starts at ``offset`` (both CRCs checked)."""
    p = os.fspath(path)
    with _open(p) as f:
        f.seek(offset)
        length = _read_header(f, p, index, offset)
        if length is None:
            raise MapValidationError(f"{p}: no record at byte {offset} (end of file)")
        return _read_body(f, p, index, offset, length)


def write_records(path: str | os.PathLike[str], records: Iterable[bytes]) -> Path:
    """Write ``records`` as an uncompressed TFRecord file (atomically; a link at ``path`` is refused)."""
    p = Path(path)
    with atomic_writer(p, "TFRecord") as f:
        for data in records:
            length = struct.pack("<Q", len(data))
            f.write(length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data)))
    return p
