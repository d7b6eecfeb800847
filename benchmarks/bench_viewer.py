"""The replay viewer's frame time with many agents, in headless Chromium, and the replay's cost.

Records one world of the planner preset with ``--agents`` agents (the reference driver at the wheel of
the controlled slots, IDM vehicles and static actors around them) for ``--steps`` steps, writes the
self-contained page, opens it in headless Chromium (Selenium, the system's ``chromium`` and
``chromedriver``) and times ``--frames`` consecutive draws of the whole scene (map, agents, trails,
signals, timeline) at two views: the whole map, and zoomed in following a controlled agent, each frame
rasterized before its clock stops; then plays frames one per animation frame and reports the interval
between them (the display's 60 Hz is the ceiling). Prints a table and writes JSON. Headless Chromium draws in software here (no GPU), so a laptop's browser with
a GPU canvas is faster, not slower.

    python benchmarks/bench_viewer.py [--agents 200] [--steps 250] [--frames 600] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from terrazero_env import engine as core
from terrazero_env.config.io import load_config
from terrazero_env.replay import ReplayRecorder
from terrazero_env.viewer import write_viewer


def record(agents: int, steps: int, seed: int, out: Path) -> dict:
    cfg = load_config("planner", **{"init.num_agents": [agents, agents],
                                    "max_agents_per_world": max(64, agents + 32)}).with_overrides(num_worlds=1)
    e = core.Engine(cfg)
    e.reset([0], [seed])
    rec = ReplayRecorder(e, meta={"title": f"{agents} agents, planner preset"})
    rec.capture()
    t_step = t_cap = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        e.step(e.reference_actions())
        t1 = time.perf_counter()
        rec.capture()
        t_step += t1 - t0
        t_cap += time.perf_counter() - t1
    path = rec.save(out / "bench.tzr")
    page = write_viewer(path, out / "bench.html")
    return {"path": path, "page": page, "agents": int(e.num_agents(0)), "frames": steps + 1,
            "tzr_bytes": path.stat().st_size, "html_bytes": page.stat().st_size,
            "engine_step_ms": 1e3 * t_step / steps, "capture_ms": 1e3 * t_cap / steps}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=200)
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--frames", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=900)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    chromium = next((c for c in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if c), None)
    driver_bin = shutil.which("chromedriver")
    if chromium is None or driver_bin is None:
        print("needs chromium and chromedriver (apt-get install chromium chromium-driver)", file=sys.stderr)
        return 2
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory() as d:
        rec = record(a.agents, a.steps, a.seed, Path(d))
        opts = Options()
        opts.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={a.width},{a.height}",
                    "--force-device-scale-factor=1"):
            opts.add_argument(arg)
        drv = webdriver.Chrome(service=Service(driver_bin), options=opts)
        try:
            t0 = time.perf_counter()
            drv.get(rec["page"].as_uri())
            while not drv.execute_script("return window.tzViewer && (window.tzViewer.ready || window.tzViewer.error)"):
                time.sleep(0.01)
            load_s = time.perf_counter() - t0
            whole = drv.execute_script("return window.tzViewer.benchmark(arguments[0])", a.frames)
            drv.execute_script("const v = window.tzViewer; const s = v.state();"
                               "const me = s.panes[0].agents.find(x => x.mover === 0);"
                               "v.zoom(6); v.follow(me ? me.i : -1);")
            zoomed = drv.execute_script("return window.tzViewer.benchmark(arguments[0])", a.frames)
            drv.set_script_timeout(120)
            playback = drv.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "window.tzViewer.benchmarkPlayback(arguments[0]).then(done);", min(a.frames, 300))
            browser = drv.capabilities.get("browserVersion", "?")
        finally:
            drv.quit()
    rows = [("whole map", whole), ("zoomed, following", zoomed)]
    print(f"{rec['agents']} agents x {rec['frames']} frames: replay {rec['tzr_bytes'] / 1024:.0f} KiB, "
          f"page {rec['html_bytes'] / 1024:.0f} KiB, page ready in {load_s:.2f} s; "
          f"recording {rec['capture_ms']:.2f} ms per step (engine step {rec['engine_step_ms']:.2f} ms)")
    print(f"{'view':<20}{'agents drawn':>14}{'mean ms':>10}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'fps (mean)':>12}")
    for name, r in rows:
        print(f"{name:<20}{r['agents']:>14}{r['mean_ms']:>10.2f}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}"
              f"{r['max_ms']:>9.2f}{1000 / r['mean_ms']:>12.0f}")
    print(f"playback (one frame per animation frame, zoomed): {playback['interval_ms']:.1f} ms between frames "
          f"({1000 / playback['interval_ms']:.0f} fps; the display's 60 Hz caps it)")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "chromium": browser,
            "agents": rec["agents"], "frames": rec["frames"], "tzr_bytes": rec["tzr_bytes"],
            "html_bytes": rec["html_bytes"], "capture_ms": rec["capture_ms"], "load_s": load_s,
            "views": {n: r for n, r in rows}, "playback": playback}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
