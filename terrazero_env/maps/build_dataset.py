"""Convert many scenario files (WOMD TFRecords, GPUDrive JSON, any map source) into a dataset folder
of ``.tzb`` files with a manifest, in parallel and resumably (``terrazero maps build-dataset``).

Each input file is one unit of work, done in a worker process: every scenario it holds is converted,
built (the builder's validation) and written as ``OUT/<scenario_id>.tzb``; scenes that fail are
rejected, each with the reason. When a file is done its results go to ``OUT/.done/<key>.json`` (key:
the file's path, size and modification time), so a rerun after an interruption skips the files done
already. At the end ``OUT/manifest.yaml`` names every scene (``Dataset``/``terrazero train --dataset``
read it) and ``OUT/rejected.txt`` lists the rejected ones.

The output folder is written with care (docs/hardening.md, third pass):

* every file (scenes, markers, manifest, ``rejected.txt``) is written atomically through
  ``safe_files`` (a fresh temporary file renamed into place); a symbolic link, FIFO, device or folder
  where one of them goes is refused, never written through or opened (a FIFO would block), the
  manifest's and the markers' before any work starts;
* a marker is trusted on resume only when it is a regular file of the expected shape whose every scene
  is a plain file name inside ``OUT``, a regular file (not a link) of the size and SHA-256 the marker
  recorded; otherwise its input is converted again (one line says why);
* one bad input never stops the job: a scene that fails (malformed input, a limit, an unexpected
  error, a worker process that died) is one line naming it and why, the build goes on, and the manifest
  lists the scenes that were built. Only when no scene at all was built does the build raise.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..foundation import safe_files
from ..foundation.safe_files import UnsafeFileError
from .builder import MapValidationError, build
from .terrabin import MAX_FILE_BYTES as MAX_SCENE_BYTES
from .terrabin import save

__all__ = ["DatasetBuild", "MAX_MARKER_BYTES", "MAX_REJECTED_PER_FILE", "build_dataset", "convert_file", "find_inputs"]

_EXTS = (".json", ".xodr", ".osm", ".xml", ".tfrecord")
#: Largest done-marker read on resume (bytes); a marker lists one input file's scenes (~400 bytes each).
MAX_MARKER_BYTES = 64 * 1024 * 1024
#: Most rejected scenes listed for one input file; past it the rest of the file is skipped (a file of
#: millions of empty records would otherwise grow a line per 16 bytes of input).
MAX_REJECTED_PER_FILE = 10_000
_MARKER_VERSION = 2
_SCENE_NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,239}\.tzb")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _is_input(p: Path) -> bool:
    n = p.name.lower()
    return n.endswith(_EXTS) or ".tfrecord-" in n


def find_inputs(inputs: list[str]) -> list[Path]:
    """Files named by ``inputs``: files, folders (searched recursively for scenario files) or glob
    patterns; sorted, without duplicates."""
    out: set[Path] = set()
    for s in inputs:
        p = Path(s)
        if p.is_dir():
            out.update(q for q in p.rglob("*") if q.is_file() and _is_input(q))
        elif p.is_file():
            out.add(p)
        else:
            hits = [Path(q) for q in glob.glob(s, recursive=True)]
            if not hits:
                raise FileNotFoundError(f"build-dataset: {s!r} names no file, folder or glob match")
            out.update(q for q in hits if q.is_file())
    return sorted(out)


def _key(p: Path) -> str:
    st = p.stat()
    return hashlib.sha256(os.fsencode(str(p.resolve())) + f"|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:24]


def _line(text: Any) -> str:
    """One line of printable text (an error's message, a name from a file)."""
    return " ".join(str(text).split()).encode("utf-8", "backslashreplace").decode("utf-8")


def _reason(e: BaseException) -> str:
    """An exception as one line; errors that are not about the input carry their type."""
    text = _line(e) or type(e).__name__
    return text if isinstance(e, (MapValidationError, UnsafeFileError)) else f"{type(e).__name__}: {text}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _check_target(path: Path, what: str) -> None:
    """Refuse, without opening it, a ``path`` that exists and is not a regular file (a link, FIFO,
    device, socket or folder): a write there would go elsewhere, block or fail half-way."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{what} {path} is {_kind(st.st_mode)}; refusing to write it (remove it first)")


def _write(path: Path, data: str | bytes, what: str) -> None:
    _check_target(path, what)
    if isinstance(data, str):
        data = data.encode("utf-8", "backslashreplace")
    safe_files.atomic_write(path, data, what)


def _digest(path: Path) -> tuple[int, str]:
    """Size and SHA-256 of the regular file ``path`` (not a link: opened with ``O_NOFOLLOW``, without
    blocking, checked by ``fstat``), read in chunks."""
    try:
        fd, _ = safe_files.open_regular(path, MAX_SCENE_BYTES, "scene file", follow_links=False)
    except UnsafeFileError:
        raise
    except OSError as e:
        raise UnsafeFileError(f"scene file {path}: {e.strerror or 'unreadable'}") from None
    try:
        h, n = hashlib.sha256(), 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return n, h.hexdigest()
            h.update(chunk)
            n += len(chunk)
    finally:
        os.close(fd)


def _scenes(path: Path) -> Iterator[tuple[str, str, Any]]:
    """(label, scenario_id, raw MapData or the error) for each scenario of a file."""
    from .convert import is_tfrecord

    if is_tfrecord(path):
        from .convert import womd

        for i, sid, m in womd.iter_maps(path):
            yield f"{path} record {i}", sid, m
        return
    try:
        if path.suffix.lower() == ".json":
            from .convert import gpudrive_json
            from .jsonmap import from_dict

            d = gpudrive_json.read_document(path)
            if gpudrive_json.is_gpudrive(d):
                sid = d.get("scenario_id", path.stem)
                m = gpudrive_json.from_dict(d, name=sid if isinstance(sid, str) else "", where=str(path))
            elif isinstance(d, dict):
                m = from_dict(d)
            else:
                raise MapValidationError(f"{path}: a scenario or map is a JSON object, got a {type(d).__name__}")
        else:
            from .sources import load_source

            m = load_source(path)
        sid = m.metadata.get("scenario_id") if isinstance(m.metadata, dict) else None
        if sid is not None:
            from .convert.womd_scene import check_scenario_id

            sid = check_scenario_id(sid, f"{path}: metadata")
        yield str(path), str(sid or m.name or path.stem), m
    except Exception as e:  # one bad file is one rejected scene, whatever went wrong
        yield str(path), "", e


def _safe(name: str) -> str:
    keep = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name).strip(".") or "scene"
    if len(keep) > 200:  # file names stop at 255 bytes
        keep = f"{keep[:180]}_{hashlib.sha256(name.encode('utf-8', 'backslashreplace')).hexdigest()[:16]}"
    return keep


def convert_file(path: str, out_dir: str) -> dict[str, Any]:
    """Worker: convert every scenario of one file into ``out_dir``; returns what was written (with each
    scene's size and SHA-256) and why scenes were rejected (a framing error in a TFRecord rejects the
    rest of that file). Never raises for a bad input: every failure is a rejected line."""
    p, out = Path(path), Path(out_dir)
    written: list[dict[str, Any]] = []
    rejected: list[str] = []
    names: set[str] = set()
    t0 = time.perf_counter()
    label = str(p)
    try:
        for label, sid, m in _scenes(p):
            if len(rejected) >= MAX_REJECTED_PER_FILE:
                rejected.append(_line(f"{label}: more than {MAX_REJECTED_PER_FILE} scenes of {p} rejected; the rest "
                                      "of the file is skipped"))
                break
            if isinstance(m, BaseException):
                why = _reason(m)
                rejected.append(_line(why if label == str(p) and str(p) in why else f"{label}: {why}"))
                continue
            try:
                b = build(m)
                name = _safe(sid or f"{p.stem}_{len(written)}") + ".tzb"
                if name in names:
                    raise MapValidationError(f"scenario id {ascii(sid)} gives the file name {name} of an earlier "
                                             "scene in the file")
                target = out / name
                _check_target(target, "scene file")
                save(b, target)
                size, sha = _digest(target)
                names.add(name)
            except Exception as e:
                rejected.append(_line(f"{label} (scenario {ascii(sid)}): {_reason(e)}"))
                continue
            md = b.metadata if isinstance(b.metadata, dict) else {}
            source = _line(md.get("source", "unknown"))[:200]
            region = _line(md.get("region", "womd" if source in ("womd_tfrecord", "gpudrive_json") else "unknown"))[:200]
            written.append({"file": name, "scenario_id": sid, "source_file": str(p), "bytes": size, "sha256": sha,
                            "entry": {"region": region, "source": source,
                                      "type": "logged" if b.tracks is not None else "map"}})
    except Exception as e:  # the file's reader stopped (framing error, unreadable file, anything unexpected)
        rejected.append(_line(f"{label}: {_reason(e)}" + ("; the rest of the file is skipped" if written or rejected
                                                          else "")))
    return {"version": _MARKER_VERSION, "file": str(p), "written": written, "rejected": rejected,
            "seconds": time.perf_counter() - t0}


@dataclass
class DatasetBuild:
    """What a build made: scene files, rejected scenes (one line each), input files skipped as done,
    input files that failed as a whole (a worker died; converted again by a rerun)."""

    out_dir: Path
    manifest: Path
    scenes: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    resumed_files: int = 0
    converted_files: int = 0
    failed_files: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _marker_shape(r: Any) -> str | None:
    """Why a parsed marker is not one this module writes, or None."""
    if not isinstance(r, dict) or r.get("version") != _MARKER_VERSION:
        return "not a marker of this version"
    if not isinstance(r.get("written"), list) or not isinstance(r.get("rejected"), list) or \
            not all(isinstance(x, str) for x in r["rejected"]):
        return "no 'written' and 'rejected' lists"
    for w in r["written"]:
        if not isinstance(w, dict) or not isinstance(w.get("file"), str) or not _SCENE_NAME.fullmatch(w["file"]):
            return f"a scene file name that is not a plain .tzb name inside the folder: {ascii(w)[:120]}"
        e = w.get("entry")
        if not isinstance(e, dict) or set(e) != {"region", "source", "type"} or \
                not all(isinstance(v, str) for v in e.values()):
            return f"scene {w['file']}: an entry that is not {{region, source, type}} strings"
        if type(w.get("bytes")) is not int or not isinstance(w.get("sha256"), str) or \
                not _SHA256.fullmatch(w["sha256"]) or not isinstance(w.get("scenario_id"), str):
            return f"scene {w['file']}: no size, SHA-256 or scenario id"
    return None


def _preflight(out: Path, done_dir: Path) -> None:
    """Refuse, before any work, an output folder whose fixed paths are links or not what they should be."""
    for path, want, what in ((out, stat.S_ISDIR, "output folder"), (done_dir, stat.S_ISDIR, "marker folder")):
        try:
            st = os.stat(path) if path == out else os.lstat(path)
        except FileNotFoundError:
            continue
        if not want(st.st_mode):
            raise UnsafeFileError(f"build-dataset: {what} {path} is {_kind(st.st_mode)}, not a folder (refused)")
    for name, what in (("manifest.yaml", "dataset manifest"), ("rejected.txt", "rejected list")):
        _check_target(out / name, f"build-dataset: {what}")


def _load_markers(files: list[Path], out: Path, done_dir: Path,
                  say: Callable[[str], None]) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    """The verified markers of ``files`` (input -> marker) and the inputs to convert."""
    markers: dict[str, dict[str, Any]] = {}
    todo: list[Path] = []
    for f in files:
        marker = done_dir / f"{_key(f)}.json"
        try:
            st = os.lstat(marker)
        except FileNotFoundError:
            todo.append(f)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"build-dataset: marker {marker} is {_kind(st.st_mode)}; refusing to read or "
                                  "replace it (remove it first)")
        try:
            r = safe_files.load_json(safe_files.read_text(marker, MAX_MARKER_BYTES, "marker"), f"marker {marker}")
            why = _marker_shape(r)
        except UnsafeFileError as e:
            why = _line(e)
        if why is not None:
            say(f"marker {marker} of {f}: {why}; converting the file again")
            todo.append(f)
            continue
        markers[str(f)] = r
    # A scene file must be the one its marker recorded; a name two inputs share holds the last one written.
    on_disk: dict[str, tuple[int, str] | str] = {}
    recorded: dict[str, set[tuple[int, str]]] = {}
    for r in markers.values():
        for w in r["written"]:
            recorded.setdefault(w["file"], set()).add((w["bytes"], w["sha256"]))
            if w["file"] not in on_disk:
                try:
                    on_disk[w["file"]] = _digest(out / w["file"])
                except (UnsafeFileError, OSError) as e:
                    on_disk[w["file"]] = _line(e)
    for f in list(files):
        r = markers.get(str(f))
        if r is None:
            continue
        for w in r["written"]:
            disk = on_disk[w["file"]]
            if disk == (w["bytes"], w["sha256"]):
                continue
            if isinstance(disk, tuple) and disk in recorded[w["file"]]:
                continue  # another input's copy of the same scenario: the manifest keeps one
            why = disk if isinstance(disk, str) else (f"{disk[0]} bytes, not the {w['bytes']} recorded" if
                                                       disk[0] != w["bytes"] else "its SHA-256 differs from the recorded one")
            say(f"marker of {f}: scene {w['file']}: {why}; converting the file again")
            del markers[str(f)]
            todo.append(f)
            break
    return markers, sorted(todo)


def _run_isolated(f: Path, out: Path) -> dict[str, Any] | BaseException:
    """Convert one file in a worker process of its own (after a worker died, to find which file kills it)."""
    try:
        with ProcessPoolExecutor(max_workers=1) as pool:
            return pool.submit(convert_file, str(f), str(out)).result()
    except Exception as e:
        return e


def build_dataset(inputs: list[str], out_dir: str | os.PathLike[str], *, workers: int | None = None,
                  cache_size: int = 64, progress: bool = True,
                  on_reject: Callable[[str], None] | None = None) -> DatasetBuild:
    """Convert ``inputs`` (see :func:`find_inputs`) into ``out_dir``; see the module docstring. Every
    rejected scene, distrusted marker and failed file is one line given to ``on_reject`` (default:
    printed to stderr). Raises ``MapValidationError`` only when no scene was built (``rejected.txt``
    then holds every reason); ``UnsafeFileError`` before any work for a link, FIFO or device where the
    manifest, the rejected list, the marker folder or a marker goes."""
    t0 = time.perf_counter()
    files = find_inputs(inputs)
    if not files:
        raise FileNotFoundError(f"build-dataset: no scenario files in {inputs}")
    out = Path(out_dir)
    done_dir = out / ".done"
    _preflight(out, done_dir)
    done_dir.mkdir(parents=True, exist_ok=True)
    say = on_reject or (lambda line: print(f"rejected {line}", file=sys.stderr))
    report = DatasetBuild(out_dir=out, manifest=out / "manifest.yaml")
    events: list[str] = []

    def note(line: str) -> None:
        events.append(_line(line))
        say(events[-1])

    results, todo = _load_markers(files, out, done_dir, note)
    report.resumed_files = len(results)
    bar = _Progress(len(files), len(results), enabled=progress)

    def finish(f: Path, r: dict[str, Any] | BaseException) -> None:
        if isinstance(r, BaseException):
            report.failed_files.append(str(f))
            note(f"{f}: the worker converting it failed ({_reason(r)}); no scene of it is kept, a rerun tries again")
            bar.update(0, 1)
            return
        try:
            _write(done_dir / f"{_key(f)}.json", json.dumps(r), "marker")
        except (UnsafeFileError, OSError) as e:
            note(f"{f}: its marker was not written ({_reason(e)}); a rerun converts it again")
        results[str(f)] = r
        for line in r["rejected"]:
            say(line)
        report.converted_files += 1
        bar.update(len(r["written"]), len(r["rejected"]))

    n_workers = workers if workers is not None else min(len(todo), os.cpu_count() or 1)
    if n_workers <= 1 or len(todo) <= 1:
        for f in todo:
            try:
                r: dict[str, Any] | BaseException = convert_file(str(f), str(out))
            except Exception as e:
                r = e
            finish(f, r)
    else:
        retry = []
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            futs = {pool.submit(convert_file, str(f), str(out)): f for f in todo}
            for fut in as_completed(futs):
                try:
                    r = fut.result()
                except Exception:  # a worker died (killed, out of memory): the pool is broken
                    retry.append(futs[fut])
                    continue
                finish(futs[fut], r)
        for f in sorted(retry):
            finish(f, _run_isolated(f, out))
    bar.close()
    report.rejected = list(events)
    _write_outputs(files, results, out, report, say, cache_size)
    report.seconds = time.perf_counter() - t0
    return report


def _write_outputs(files: list[Path], results: dict[str, dict[str, Any]], out: Path, report: DatasetBuild,
                   say: Callable[[str], None], cache_size: int) -> None:
    """The manifest of the scenes built (one copy of a scene two inputs hold) and ``rejected.txt``."""
    claims: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        r = results.get(str(f))
        if r is None:
            continue
        for w in r["written"]:
            claims.setdefault(w["file"], []).append(w)
        report.rejected.extend(_line(x) for x in r["rejected"])
    scenarios: dict[str, dict[str, str]] = {}
    for name, ws in sorted(claims.items()):
        keep = ws[0]
        if len(ws) > 1:  # inputs holding the same scenario: the file holds the copy written last
            try:
                disk: tuple[int, str] | None = _digest(out / name)
            except (UnsafeFileError, OSError):
                disk = None
            keep = next((w for w in ws if (w["bytes"], w["sha256"]) == disk), ws[0])
            for w in ws:
                if w is not keep:
                    line = _line(f"{w['source_file']}: scenario {ascii(w['scenario_id'])} is also in another input; "
                                 "one copy is kept")
                    report.rejected.append(line)
                    say(line)
        scenarios[name] = keep["entry"]
    report.scenes = sorted(scenarios)
    _write(out / "rejected.txt", "".join(f"{line}\n" for line in report.rejected), "rejected list")
    if not scenarios:
        raise MapValidationError(f"build-dataset: every scene was rejected ({len(report.rejected)}); see the reasons "
                                 f"above and in {out / 'rejected.txt'}")
    _write(report.manifest, yaml.safe_dump({"cache_size": cache_size, "scenarios": scenarios}, sort_keys=True),
           "dataset manifest")


class _Progress:
    """A tqdm bar over input files when tqdm is installed and stderr is a terminal, else a line every
    few seconds."""

    def __init__(self, total: int, initial: int, enabled: bool):
        self.enabled, self.total, self.n, self.ok, self.bad = enabled, total, initial, 0, 0
        self.bar, self.last = None, 0.0
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=initial, unit="file", dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def update(self, ok: int, bad: int) -> None:
        self.n, self.ok, self.bad = self.n + 1, self.ok + ok, self.bad + bad
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(scenes=self.ok, rejected=self.bad)
        elif self.enabled and (time.monotonic() - self.last > 2.0 or self.n == self.total):
            self.last = time.monotonic()
            print(f"[{self.n}/{self.total} files] {self.ok} scenes, {self.bad} rejected", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
