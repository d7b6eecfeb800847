"""FAST's sampling study on this simulator: SC, SGR, per-env autoreset and DPSA.

    python benchmarks/bench_fast.py [--reset-cost-ms 0 200] [--budget 3000] [--clips 1 5 10 20 30]

A clip is one world with a single learning ego (random actions) among background agents, as in
FAST. Each run collects a fixed budget of valid transitions. A reset of one or more clips costs the
real work (reading the map's ``.tzb`` from disk with checksums and composing each scenario) plus
``--reset-cost-ms`` once per reset call, standing for loading HD maps and sensors (clips that reset
together reset in parallel, as on FAST's hardware). Methods:

* SC: one clip, reset whenever its episode ends;
* SGR: n clips, all reset as soon as any one ends;
* autoreset: n clips, each reset on the step after its episode ends (Gymnasium NEXT_STEP);
* DPSA(rho): n clips, virtual continuation, global reset once a share rho has ended (or at T_max).

Prints a table, writes JSON (``--json``) and a PNG plot of Phi_eff and mean episode length against n.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from gymnasium.vector import AutoresetMode
from terrazero_env.wrappers import DPSA, SGR, SamplingStats

from terrazero_env.config.io import load_config
from terrazero_env.envs.vector import TerraZeroVectorEnv
from terrazero_env.maps import asset_path, load

SCENE = {"slots_per_world": 1, "max_agents_per_world": 16, "init.num_agents": [8, 16], "episode_length": 256}


class ClipVectorEnv(TerraZeroVectorEnv):
    """The native env with FAST's reset cost: each reset call reads the map from disk per clip and
    waits ``delay_s`` once."""

    def __init__(self, config, delay_s: float, **kw):
        super().__init__(config, **kw)
        self.delay_s = delay_s
        self.map_path = asset_path(config.maps[0])

    def reset_worlds(self, world_ids, seeds=None):
        for _ in np.atleast_1d(world_ids):
            load(self.map_path)  # the clip's scenario file, checksummed
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        super().reset_worlds(world_ids, seeds)

    def reset(self, *, seed=None, options=None):
        n = self.num_worlds if options is None or "reset_mask" not in options else \
            int(np.asarray(options["reset_mask"]).reshape(self.num_worlds, -1)[:, 0].sum())
        for _ in range(n):
            load(self.map_path)
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        return super().reset(seed=seed, options=options)


def run(method: str, n: int, budget: int, delay_s: float, seed: int = 0) -> dict:
    mode = AutoresetMode.NEXT_STEP if method in ("SC", "autoreset") else AutoresetMode.DISABLED
    cfg = load_config("quick", **SCENE).with_overrides(num_worlds=n)
    base = ClipVectorEnv(cfg, delay_s, autoreset_mode=mode)
    if method in ("SC", "autoreset"):
        venv = SamplingStats(base)
    elif method == "SGR":
        venv = SGR(base, horizon=256)
    else:
        venv = DPSA(base, threshold=float(method.split("=")[1]), horizon=256)
    rng = np.random.default_rng(seed)
    venv.reset(seed=seed)
    t0 = time.perf_counter()
    stats = None
    while stats is None or stats["N_valid"] < budget:
        _, _, _, _, info = venv.step(rng.integers(0, 12, venv.num_envs))
        stats = info["stats"]["total"]
    wall = time.perf_counter() - t0
    return {"method": method.replace("DPSA=", "DPSA "), "n": n, "sampling_time_s": wall, **stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reset-cost-ms", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--budget", type=int, default=3000, help="valid transitions per run")
    ap.add_argument("--clips", type=int, nargs="+", default=[1, 5, 10, 20, 30])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.8])
    ap.add_argument("--json", default="benchmarks/results/bench_fast.json")
    ap.add_argument("--plot", default="docs/fast_sampling.png")
    args = ap.parse_args()
    rows = []
    for cost in args.reset_cost_ms:
        sc = run("SC", 1, args.budget, cost / 1e3)
        sc["reset_cost_ms"] = cost
        rows.append(sc)
        for n in args.clips:
            for method in ["SGR", "autoreset"] + [f"DPSA={t}" for t in args.thresholds]:
                r = run(method, n, args.budget, cost / 1e3)
                r["reset_cost_ms"] = cost
                r["speedup_vs_SC"] = sc["sampling_time_s"] / r["sampling_time_s"]
                rows.append(r)
        sc["speedup_vs_SC"] = 1.0
    cols = ["reset_cost_ms", "method", "n", "sampling_time_s", "Phi_raw", "mu", "eta", "Phi_eff", "speedup_vs_SC",
            "mean_episode_length"]
    print(" | ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>16.3f}" if isinstance(r[c], float) else f"{r[c]:>16}" for c in cols))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpu_count": os.cpu_count(), "budget": args.budget,
                               "rows": rows}, indent=2))
    print(f"wrote {out}")
    _plot(rows, args.reset_cost_ms, Path(args.plot))


def _plot(rows: list[dict], costs: list[float], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5 * len(costs), 7.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(costs), squeeze=False)
    for j, cost in enumerate(costs):
        sub = [r for r in rows if r["reset_cost_ms"] == cost]
        sc = next(r for r in sub if r["method"] == "SC")
        for method in sorted({r["method"] for r in sub} - {"SC"}):
            pts = sorted((r["n"], r["Phi_eff"], r["mean_episode_length"]) for r in sub if r["method"] == method)
            n, phi, length = zip(*pts)
            axes[0, j].plot(n, phi, marker="o", label=method)
            axes[1, j].plot(n, length, marker="o", label=method)
        for ax, key in ((axes[0, j], "Phi_eff"), (axes[1, j], "mean_episode_length")):
            ax.axhline(sc[key], color="grey", linestyle="--", label="SC")
            ax.set_xlabel("parallel clips n")
        axes[0, j].set_ylabel("Phi_eff (valid transitions / s)")
        axes[1, j].set_ylabel("mean valid episode length (steps)")
        axes[0, j].set_title(f"reset cost {cost:.0f} ms")
        axes[0, j].set_yscale("log")
        axes[0, j].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
