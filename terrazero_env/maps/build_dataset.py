"""Convert many scenario files (WOMD TFRecords, GPUDrive JSON, any map source) into a dataset folder
of ``.tzb`` files with a manifest, in parallel and resumably (``terrazero maps build-dataset``).

Each input file is one unit of work, done in a worker process: every scenario it holds is converted,
built (the builder's validation) and written as ``OUT/<scenario_id>.tzb``; scenes that fail are
rejected, each with the reason. When a file is done its results go to ``OUT/.done/<key>.json`` (key:
the file's path, size and modification time), so a rerun after an interruption skips the files done
already (and whose scene files are all still there). At the end ``OUT/manifest.yaml`` names every scene (``Dataset``/``terrazero train --dataset``
read it) and ``OUT/rejected.txt`` lists the rejected ones.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .builder import MapValidationError, build
from .terrabin import TerrabinError, save

__all__ = ["DatasetBuild", "build_dataset", "find_inputs"]

_EXTS = (".json", ".xodr", ".osm", ".xml", ".tfrecord")


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
    return hashlib.sha256(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:24]


def _scenes(path: Path) -> Iterator[tuple[str, str, Any]]:
    """(label, scenario_id, raw MapData or the error) for each scenario of a file."""
    from .convert import is_tfrecord

    if is_tfrecord(path):
        from .convert import womd

        for i, sid, m in womd.iter_maps(path):
            yield f"{path} record {i}", sid, m
        return
    from .sources import load_source

    try:
        m = load_source(path)
        yield str(path), str(m.metadata.get("scenario_id", "") or m.name or path.stem), m
    except (MapValidationError, ValueError) as e:
        yield str(path), "", e


def _safe(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return keep.strip(".") or "scene"


def convert_file(path: str, out_dir: str) -> dict[str, Any]:
    """Worker: convert every scenario of one file into ``out_dir``; returns what was written and why
    scenes were rejected (a framing error in a TFRecord rejects the rest of that file)."""
    p, out = Path(path), Path(out_dir)
    written, rejected = [], []
    t0 = time.perf_counter()
    try:
        for label, sid, m in _scenes(p):
            if isinstance(m, Exception):
                rejected.append(f"{label}: {m}")
                continue
            try:
                b = build(m)
            except MapValidationError as e:
                rejected.append(f"{label} (scenario {sid}): {e}")
                continue
            name = _safe(sid or f"{p.stem}_{len(written)}") + ".tzb"
            if any(w["file"] == name for w in written):
                rejected.append(f"{label}: scenario id {sid!r} appears twice in the file")
                continue
            save(b, out / name)
            source = str(b.metadata.get("source", "unknown"))
            region = str(b.metadata.get("region", "womd" if source in ("womd_tfrecord", "gpudrive_json") else "unknown"))
            written.append({"file": name, "scenario_id": sid, "source_file": str(p),
                            "entry": {"region": region, "source": source,
                                      "type": "logged" if b.tracks is not None else "map"}})
    except (MapValidationError, OSError, TerrabinError) as e:
        rejected.append(f"{p}: {e}")
    return {"file": str(p), "written": written, "rejected": rejected, "seconds": time.perf_counter() - t0}


@dataclass
class DatasetBuild:
    """What a build made: scene files, rejected scenes (one line each), input files skipped as done."""

    out_dir: Path
    manifest: Path
    scenes: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    resumed_files: int = 0
    converted_files: int = 0
    seconds: float = 0.0


def build_dataset(inputs: list[str], out_dir: str | os.PathLike[str], *, workers: int | None = None,
                  cache_size: int = 64, progress: bool = True,
                  on_reject: Callable[[str], None] | None = None) -> DatasetBuild:
    """Convert ``inputs`` (see :func:`find_inputs`) into ``out_dir``; see the module docstring."""
    t0 = time.perf_counter()
    files = find_inputs(inputs)
    if not files:
        raise FileNotFoundError(f"build-dataset: no scenario files in {inputs}")
    out = Path(out_dir)
    done_dir = out / ".done"
    done_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    todo = []
    for f in files:
        marker = done_dir / f"{_key(f)}.json"
        r = json.loads(marker.read_text()) if marker.is_file() else None
        if r is not None and all((out / w["file"]).is_file() for w in r["written"]):
            results[str(f)] = r
        else:
            todo.append(f)
    report = DatasetBuild(out_dir=out, manifest=out / "manifest.yaml", resumed_files=len(results))
    bar = _Progress(len(files), len(results), enabled=progress)
    say = on_reject or (lambda line: print(f"rejected {line}", file=sys.stderr))

    def finish(f: Path, r: dict[str, Any]) -> None:
        (done_dir / f"{_key(f)}.json").write_text(json.dumps(r))
        results[str(f)] = r
        for line in r["rejected"]:
            say(line)
        report.converted_files += 1
        bar.update(len(r["written"]), len(r["rejected"]))

    n_workers = workers if workers is not None else min(len(todo), os.cpu_count() or 1)
    if n_workers <= 1 or len(todo) <= 1:
        for f in todo:
            finish(f, convert_file(str(f), str(out)))
    else:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            futs = {pool.submit(convert_file, str(f), str(out)): f for f in todo}
            for fut in as_completed(futs):
                finish(futs[fut], fut.result())
    bar.close()
    scenarios: dict[str, dict[str, str]] = {}
    for f in files:
        r = results[str(f)]
        for w in r["written"]:
            if w["file"] in scenarios:
                line = f"{w['source_file']}: scenario {w['scenario_id']!r} is also in another input; one copy is kept"
                report.rejected.append(line)
                say(line)
                continue
            scenarios[w["file"]] = w["entry"]
        report.rejected.extend(r["rejected"])
    report.scenes = sorted(scenarios)
    if not scenarios:
        raise MapValidationError(f"build-dataset: every scene was rejected ({len(report.rejected)}); see the reasons above")
    with open(report.manifest, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"cache_size": cache_size, "scenarios": scenarios}, fh, sort_keys=True)
    (out / "rejected.txt").write_text("".join(f"{line}\n" for line in report.rejected))
    report.seconds = time.perf_counter() - t0
    return report


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
