"""Map pipeline timings: load each bundled map from .tzb, index it in the engine, and regenerate it.

    python benchmarks/bench_maps.py [--repeats 50] [--json benchmarks/results/bench_maps.json]

Prints a table; writes the figures as JSON. Load time is the median over repeats of
``terrazero_env.maps.load`` (memory map + CRC32 verification of every section); "load, no CRC" skips
the data checksums; "index" builds the engine's spatial grids (``core.RoadMap``); "generate" and
"build" are the procedural generator and the validating builder for the map's YAML spec.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from terrazero_env import engine as core
from terrazero_env.maps import asset_path, build, bundled_maps, load
from terrazero_env.maps.sources import load_spec


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--json", default="benchmarks/results/bench_maps.json")
    args = ap.parse_args()
    rows = []
    for name in bundled_maps():
        path = asset_path(name)
        m = load(path)
        spec = path.with_suffix(".yaml")
        raw = load_spec(spec) if spec.is_file() else None
        row = {
            "map": name,
            "lanes": len(m.lanes),
            "lane_points": int(m.lanes.centerline.values.shape[0]),
            "file_kib": path.stat().st_size / 1024,
            "load_ms": _median_ms(lambda: load(path), args.repeats),
            "load_no_crc_ms": _median_ms(lambda: load(path, verify=False), args.repeats),
            "index_ms": _median_ms(lambda: core.RoadMap(m), max(3, args.repeats // 5)),
            "generate_ms": _median_ms(lambda: load_spec(spec), 3) if raw is not None else float("nan"),
            "build_ms": _median_ms(lambda: build(raw), 3) if raw is not None else float("nan"),
        }
        rows.append(row)
    cols = ["map", "lanes", "lane_points", "file_kib", "load_ms", "load_no_crc_ms", "index_ms", "generate_ms", "build_ms"]
    print(" | ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>14.2f}" if isinstance(r[c], float) else f"{r[c]:>14}" for c in cols))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                               "cpu_count": __import__("os").cpu_count(), "repeats": args.repeats, "rows": rows},
                              indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
