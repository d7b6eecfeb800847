"""Conversion time and .tzb size per format, on the real files the converter tests use.

    python -m pytest -q -m realdata tests/test_convert_*.py   # fetches the files into the cache once
    python benchmarks/bench_convert.py [--cache DIR] [--json benchmarks/results/bench_convert.json]

Times are one conversion (``load_source``) plus ``build``; size is the saved ``.tzb``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from terrazero_env.maps import build, load_source, save

FILES = {
    "OpenDRIVE": ["osm-to-xodr-0.3.0-sdist/osm_to_xodr-0.3.0/data/carla-opendrive-examples/Town01.xodr",
                  "osm-to-xodr-0.3.0-sdist/osm_to_xodr-0.3.0/data/carla-opendrive-examples/Town03.xodr",
                  "osm-to-xodr-0.3.0-sdist/osm_to_xodr-0.3.0/data/carla-opendrive-examples/Town10HD.xodr"],
    "CommonRoad": ["commonroad-reach-2025.2.1-sdist/commonroad_reach-2025.2.1/scenarios/USA_Lanker-1_4_T-1.xml",
                   "commonroad-reach-2025.2.1-sdist/commonroad_reach-2025.2.1/scenarios/USA_US101-17_1_T-1.xml",
                   "commonroad-reach-2025.2.1-sdist/commonroad_reach-2025.2.1/scenarios/DEU_Flensburg-16_1_T-1.xml"],
    "Lanelet2": ["torchdrivesim-0.2.3-wheel/torchdrivesim/resources/maps/carla_Town01/carla_Town01.osm",
                 "torchdrivesim-0.2.3-wheel/torchdrivesim/resources/maps/carla_Town03/carla_Town03.osm"],
    "SUMO": ["sumo-rl-1.4.5-wheel/sumo_rl/nets/RESCO/cologne8/cologne8.net.xml",
             "sumo-rl-1.4.5-wheel/sumo_rl/nets/RESCO/ingolstadt21/ingolstadt21.net.xml"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.environ.get("TERRAZERO_TESTDATA", str(Path.home() / ".cache" / "terrazero-testdata")))
    ap.add_argument("--json", default="benchmarks/results/bench_convert.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, files in FILES.items():
            for rel in files:
                path = Path(args.cache) / rel
                if not path.is_file():
                    print(f"skip {rel}: not in the cache (run the realdata tests first)")
                    continue
                t0 = time.perf_counter()
                raw = load_source(path)
                t1 = time.perf_counter()
                m = build(raw)
                t2 = time.perf_counter()
                out = save(m, Path(tmp) / "m.tzb")
                rows.append({"format": fmt, "file": path.name, "lanes": len(m.lanes),
                             "lane_points": int(m.lanes.centerline.values.shape[0]),
                             "convert_s": t1 - t0, "build_s": t2 - t1, "tzb_kib": out.stat().st_size / 1024})
    print(f"{'format':>10} | {'file':>28} | {'lanes':>6} | {'points':>7} | {'convert s':>9} | {'build s':>7} | {'tzb KiB':>8}")
    for r in rows:
        print(f"{r['format']:>10} | {r['file']:>28} | {r['lanes']:>6} | {r['lane_points']:>7} | {r['convert_s']:>9.3f} | "
              f"{r['build_s']:>7.3f} | {r['tzb_kib']:>8.1f}")
    out_json = Path(args.json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
