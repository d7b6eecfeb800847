"""Memory and time of a scenario dataset as it grows: the same world resets drawn from datasets of
N scenes (default 5, 1,000 and 10,000), each N in a fresh process so its peak memory is its own.

    python benchmarks/bench_dataset_scale.py SCENES... [--sizes 5 1000 10000] [--resets 200]

``SCENES``: built ``.tzb`` files (for example the output of ``terrazero maps build-dataset``) or a
dataset folder; default: the bundled maps. A dataset of N scenes is N hard links to them under
distinct names in a temporary folder (no extra disk), with a manifest listing each, so the manifest
and the dataset's bookkeeping grow with N while the bytes of one scene stay the same. Per N: the time
to read the manifest, the time per world reset (the draws miss the bounded cache in proportion to N),
the resident memory after the resets and the peak (``VmHWM``). With the dataset's cache bounded
(``--cache-size``), the peak should not grow with N beyond the manifest's own entries.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def _child(folder: str, resets: int, worlds: int, cache_size: int, init_mode: str) -> None:
    import numpy as np

    import terrazero_env
    from terrazero_env.maps import Dataset

    t0 = time.perf_counter()
    ds = Dataset(os.path.join(folder, "manifest.yaml"), cache_size=cache_size)
    t_manifest = time.perf_counter() - t0
    venv = terrazero_env.make_vec(worlds, "quick", dataset=ds, **{"init.mode": init_mode})
    zeros = np.zeros(venv.num_envs, np.int64)
    venv.reset(seed=0)
    rss_first = _status_kib("VmRSS")
    t0 = time.perf_counter()
    for seed in range(1, resets + 1):
        venv.reset(seed=seed)
        venv.step(zeros)
    t_resets = time.perf_counter() - t0
    print(json.dumps({"scenes": len(ds), "manifest_s": t_manifest, "reset_ms": 1e3 * t_resets / (resets * worlds),
                      "cached": ds.cached, "rss_first_mib": rss_first / 1024, "rss_mib": _status_kib("VmRSS") / 1024,
                      "peak_mib": _status_kib("VmHWM") / 1024}))


def _make_dataset(folder: Path, scenes: list[Path], n: int) -> None:
    lines = ["cache_size: 64", "scenarios:"]
    for i in range(n):
        src = scenes[i % len(scenes)]
        name = f"s{i:06d}_{src.stem}.tzb"
        try:
            os.link(src, folder / name)
        except OSError:  # another file system: a copy (costs disk, not memory)
            shutil.copyfile(src, folder / name)
        lines += [f"  {name}:", "    region: womd" if i % 2 else "    region: other", f"    source: {src.stem}",
                  "    type: logged"]
    (folder / "manifest.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenes", nargs="*", help=".tzb files or folders of them (default: the bundled maps)")
    p.add_argument("--sizes", type=int, nargs="+", default=[5, 1000, 10000])
    p.add_argument("--resets", type=int, default=200, help="resets of every world after the first")
    p.add_argument("--worlds", type=int, default=8)
    p.add_argument("--cache-size", type=int, default=64)
    p.add_argument("--init-mode", default="random", choices=["random", "log", "hybrid"])
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(a.child, a.resets, a.worlds, a.cache_size, a.init_mode)
        return 0
    scenes: list[Path] = []
    for s in a.scenes:
        q = Path(s)
        scenes += sorted(q.glob("*.tzb")) if q.is_dir() else [q]
    if not scenes:
        from terrazero_env.maps import asset_path, bundled_maps

        scenes = [Path(asset_path(n)) for n in bundled_maps()]
    print(f"{len(scenes)} distinct scenes, {a.worlds} worlds, {a.resets} resets each, cache_size {a.cache_size}, "
          f"init {a.init_mode}")
    print("| scenes in the dataset | manifest read (s) | per world reset (ms) | maps cached | RSS after first reset "
          "(MiB) | RSS at the end (MiB) | peak (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in a.sizes:
        # Hard links need the scenes and the dataset on one file system: a folder beside the first scene.
        parent = scenes[0].parent.resolve()
        with tempfile.TemporaryDirectory(dir=parent if os.access(parent, os.W_OK) else None) as tmp:
            _make_dataset(Path(tmp), scenes, n)
            out = subprocess.run([sys.executable, __file__, "--child", tmp, "--resets", str(a.resets),
                                  "--worlds", str(a.worlds), "--cache-size", str(a.cache_size),
                                  "--init-mode", a.init_mode], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['scenes']:,} | {r['manifest_s']:.2f} | {r['reset_ms']:.2f} | {r['cached']} | "
              f"{r['rss_first_mib']:.0f} | {r['rss_mib']:.0f} | {r['peak_mib']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
