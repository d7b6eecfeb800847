"""Smoke test of an installed terrazero-env (a wheel, an sdist install, or a checkout), run from any directory.

Checks that the package imports from where it claims to be installed, reports its build, finds its
bundled maps and presets, and that the three environment APIs (Gymnasium single-agent, PettingZoo
parallel, native vector env) reset and step with finite observations and rewards of the declared
shapes. Exits non-zero with the failing check named. Used by ``.ci/run``, ``tools/build_wheels.py`` and
cibuildwheel's per-wheel test.

    python tools/smoke_test.py [--expect-installed] [--expect-openmp yes|no]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import warnings
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"smoke test FAILED: {what}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expect-installed", action="store_true",
                    help="fail unless terrazero_env is imported from this interpreter's site-packages")
    ap.add_argument("--expect-openmp", choices=["yes", "no"], default=None,
                    help="fail unless build_info()['openmp'] matches")
    args = ap.parse_args(argv)

    import gymnasium as gym
    import numpy as np

    import terrazero_env
    from terrazero_env.maps.sources import bundled_maps

    where = Path(terrazero_env.__file__).resolve().parent
    if args.expect_installed:
        site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
        _check(where.parent in site, f"terrazero_env imported from {where}, not from site-packages {sorted(site)}")
    info = terrazero_env.build_info()
    _check(info["version"] == terrazero_env.__version__, f"build_info version {info['version']!r} "
           f"differs from __version__ {terrazero_env.__version__!r}")
    try:
        meta = version("terrazero-env")
    except PackageNotFoundError:  # a bare checkout on sys.path, not an installed distribution
        meta = None
    _check(meta in (None, terrazero_env.__version__), f"package metadata version {meta!r} differs from "
           f"__version__ {terrazero_env.__version__!r}")
    if args.expect_openmp is not None:
        _check(info["openmp"] == (args.expect_openmp == "yes"), f"openmp is {info['openmp']}, expected "
               f"{args.expect_openmp}")
    maps = bundled_maps()
    _check(len(maps) >= 4 and "grid_town" in maps, f"bundled maps missing, found {maps}")
    presets = files("terrazero_env.assets.presets")
    _check(presets.joinpath("quick.yaml").is_file(), "bundled preset quick.yaml missing")
    _check(files("terrazero_env.assets.maps").joinpath("ATTRIBUTION.md").is_file(), "map ATTRIBUTION.md missing")

    env = gym.make("TerraZero/Drive-v0", preset="quick")
    obs, _ = env.reset(seed=0)
    _check(env.observation_space.contains(obs), "gym.make: reset observation outside observation_space")
    for _ in range(20):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        _check(np.all(np.isfinite(obs)) and np.isfinite(reward), "gym.make: non-finite observation or reward")
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()

    penv = terrazero_env.parallel_env(preset="quick")
    pobs, _ = penv.reset(seed=1)
    _check(len(pobs) >= 1, "parallel_env: no agents after reset")
    for _ in range(10):
        if not penv.agents:
            break
        pobs, prew, *_ = penv.step({a: penv.action_space(a).sample() for a in penv.agents})
        _check(all(np.isfinite(r) for r in prew.values()), "parallel_env: non-finite reward")
    penv.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        venv = terrazero_env.make_vec(num_worlds=4, preset="quick", num_threads=2)
    serial_warned = any("without OpenMP" in str(w.message) for w in caught)
    _check(serial_warned == (not info["openmp"]), f"num_threads=2 warning {'given' if serial_warned else 'absent'} "
           f"on a build with openmp={info['openmp']}")
    vobs, vinfo = venv.reset(seed=2)
    _check(vobs.shape == (venv.num_envs, *venv.single_observation_space.shape),
           f"make_vec: observation shape {vobs.shape}")
    for _ in range(20):
        vobs, vrew, _, _, vinfo = venv.step(venv.action_space.sample())
        _check(np.all(np.isfinite(vobs)) and np.all(np.isfinite(vrew)), "make_vec: non-finite values")
    _check(bool(np.any(vinfo["valid"])), "make_vec: no live slot after 20 steps")
    venv.close()

    print(json.dumps({"smoke_test": "ok", "module": str(where), "cwd": os.getcwd(), **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
