"""Files with bounded, unsurprising effects: the one way the package reads a file a user or a shared
folder hands it, and writes a file in place.

Reading (:func:`read_bytes`, :func:`read_text`, :func:`load_json`): only regular files (a FIFO named
``*.tzb`` would block the reader forever, a device would never end), at most a stated number of
bytes (checked from ``fstat`` before anything is read), UTF-8 text with an error naming the file,
JSON whose nesting is bounded. The bytes are copied into the process, so a file truncated or replaced
afterwards cannot take the process down (a memory map of a file truncated on disk raises SIGBUS).

Writing (:func:`atomic_write`): the data goes to a temporary file created with an unpredictable name
(``tempfile.mkstemp``, ``O_CREAT | O_EXCL``: it never opens what another user planted) in the target's
folder, then replaces the target with ``os.replace``; a target that is a symbolic link is refused, so
a planted link cannot redirect the write.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MAX_JSON_DEPTH", "UnsafeFileError", "append_text", "atomic_path", "atomic_write", "atomic_writer", "check_write_target", "load_json", "open_regular", "read_array", "read_bytes", "read_text",
           "refuse_link"]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a JSON document."""


class UnsafeFileError(ValueError):
    """A file is not a regular file, is too large, is not UTF-8 or JSON, or is a link where none may be."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(p: str | os.PathLike[str], max_bytes: int, what: str = "file",
                 follow_links: bool = True) -> tuple[int, int]:
    """An open descriptor of the regular file ``p`` and its size, checked against ``max_bytes``:
    opened without blocking (a FIFO is refused, not waited on) and checked by ``fstat``; with
    ``follow_links=False`` a symbolic link at ``p`` is refused too. The caller closes it."""
    p = os.fspath(p)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(p, flags)
    except IsADirectoryError:
        raise UnsafeFileError(f"{what} {p}: a folder, not a file") from None
    except OSError:
        if not follow_links and os.path.islink(p):
            raise UnsafeFileError(f"{what} {p}: a symbolic link (refused)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"{what} {p}: {_kind(st.st_mode)}, not a regular file (refused)")
        if st.st_size > max_bytes:
            raise UnsafeFileError(f"{what} {p}: {st.st_size} bytes, over the {max_bytes}-byte limit")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_array(path: str | os.PathLike[str], max_bytes: int, what: str = "file", align: int = 64) -> np.ndarray:
    """The whole content of the regular file ``path`` (at most ``max_bytes``) as a read-only uint8
    array whose first byte is ``align``-byte aligned, so sections stored at aligned offsets stay
    aligned in memory. The file is opened without blocking (a FIFO opens at once and is then refused
    by ``fstat``); ``what`` names the kind of file in errors (``"map"``, ``"dataset manifest"``). A
    file that shrinks while read gives its shorter content (checked by the format's own header)."""
    p = os.fspath(path)
    fd, size = open_regular(p, max_bytes, what)
    try:
        raw = np.empty(size + align, np.uint8)
        start = (-raw.ctypes.data) % align
        out = raw[start:start + size]
        got = 0
        view = memoryview(out)
        while got < size:
            n = os.readv(fd, [view[got:]])
            if n == 0:
                break
            got += n
        out = out[:got]
        out.flags.writeable = False
        return out
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> bytes:
    """The whole content of the regular file ``path``, at most ``max_bytes`` bytes (the rules of
    :func:`read_array`)."""
    return read_array(path, max_bytes, what, 1).tobytes()


def read_text(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> str:
    """:func:`read_bytes` decoded as UTF-8; bytes that are not UTF-8 raise naming the file and offset."""
    data = read_bytes(path, max_bytes, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeFileError(f"{what} {os.fspath(path)}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
                              f"{e.start})") from None


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _depth_ok(text: str, limit: int) -> bool:
    """Whether no point of ``text`` lies inside more than ``limit`` JSON brackets (strings skipped),
    counted in vectorized passes before the parser's recursion could overflow."""
    if text.count("[") + text.count("{") <= limit:
        return True
    raw = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8"), np.uint8)
    step = ((raw == ord("[")) | (raw == ord("{"))).astype(np.int32) - ((raw == ord("]")) | (raw == ord("}")))
    return not step.size or int(np.cumsum(step).max()) <= limit


def load_json(text: str | bytes, source: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` with nesting bounded by ``max_depth`` and errors naming ``source``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UnsafeFileError(f"{source}: not UTF-8 text (offset {e.start})") from None
    if not _depth_ok(text, max_depth):
        raise UnsafeFileError(f"{source}: JSON nested deeper than {max_depth} levels (refused)")
    try:
        return json.loads(text)
    except RecursionError:
        raise UnsafeFileError(f"{source}: JSON nested too deeply (refused)") from None
    except json.JSONDecodeError as e:
        raise UnsafeFileError(f"{source}: not valid JSON ({e})") from None


def append_text(path: str | os.PathLike[str], text: str, what: str = "file") -> None:
    """Append ``text`` to the regular file ``path`` (created when missing) without following a
    symbolic link at ``path`` (``O_NOFOLLOW``): a link planted there is refused, never written through."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        if os.path.islink(p):
            raise UnsafeFileError(f"{what} {p} is a symbolic link; refusing to write through it") from None
        raise UnsafeFileError(f"{what} {p}: cannot open for appending ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFileError(f"{what} {p}: {_kind(os.fstat(fd).st_mode)}, not a regular file (refused)")
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def refuse_link(path: str | os.PathLike[str], what: str = "file") -> None:
    """Raise when ``path`` exists as a symbolic link (a write through it would land elsewhere)."""
    p = os.fspath(path)
    if os.path.islink(p):
        raise UnsafeFileError(f"{what} {p} is a symbolic link; refusing to write through it")


def check_write_target(path: str | os.PathLike[str], what: str = "file") -> Path:
    """The one check of every file this package writes for a user: a name (not empty, not a folder
    path), not a symbolic link, and, when something exists there already, a regular file (a FIFO, a
    device or a folder is refused rather than written into or replaced). Returns the path."""
    p = os.fspath(path)
    if not p or p.endswith(os.sep) or (os.altsep and p.endswith(os.altsep)):
        raise UnsafeFileError(f"{what}: a file name is needed, got {p!r}")
    refuse_link(p, what)
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        return Path(p)
    if not stat.S_ISREG(mode):
        raise UnsafeFileError(f"{what} {p}: {_kind(mode)}, not a regular file (refused)")
    return Path(p)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], what: str = "file") -> Iterator[Path]:
    """For writers that take a file name (matplotlib's ``savefig``, imageio): yield a fresh temporary
    name beside ``path`` with the same suffix (so the format chosen by extension is kept); on a clean
    exit it replaces ``path`` atomically, on any failure it is removed. ``path`` passes
    :func:`check_write_target` first."""
    target = check_write_target(path, what)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=f".{target.stem}.",
                               suffix=target.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes | str, what: str = "file") -> Path:
    """Write ``data`` to ``path`` atomically: a fresh temporary file (unpredictable name, created
    exclusively) in the same folder, flushed to disk, then renamed over ``path``. A ``path`` that is a
    symbolic link (or anything but a regular file) is refused; the temporary file is removed on any
    failure."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_path(path, what) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return Path(path)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: reading it sets it for an instant, which threads could see


def _umask() -> int:
    return _UMASK


def atomic_writer(path: str | os.PathLike[str], what: str = "file") -> _AtomicWriter:
    """A context manager yielding a binary file object whose content replaces ``path`` atomically on a
    clean exit (the same rules as :func:`atomic_write`); for writers that stream (``torch.save``)."""
    return _AtomicWriter(Path(path), what)


class _AtomicWriter:
    def __init__(self, target: Path, what: str) -> None:
        self.target, self.what = target, what

    def __enter__(self):
        check_write_target(self.target, self.what)
        fd, self.tmp = tempfile.mkstemp(dir=self.target.parent, prefix=f".{self.target.name}.", suffix=".tmp")
        self.f = os.fdopen(fd, "w+b")
        return self.f

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.f.flush()
                os.fsync(self.f.fileno())
            self.f.close()
            if exc_type is None:
                os.chmod(self.tmp, 0o666 & ~_umask())
                os.replace(self.tmp, self.target)
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _discard(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
