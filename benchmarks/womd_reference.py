"""The reference driver on built WOMD scenes, one evaluation per scene (docs/womd.md, "Driving the real
scenes").

    python benchmarks/womd_reference.py womd_ds/*.tzb --episodes 64 --json womd_reference.json
    python benchmarks/womd_reference.py womd_ds/ --preset quick --set init.mode=random

Each scene runs alone (``maps: [scene]``) under the preset (default quick: random initialization,
vehicles, goals 10-30 m along the lane graph, 128-step episodes), with the driver's deterministic
actions and the same seed, so a scene's row does not depend on which other scenes were given. Prints
one row per scene (goal reach, off-road, collision, wrong way, episodes; or why the map was refused)
and the totals over every episode; ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _scenes(inputs: list[str]) -> list[Path]:
    out: list[Path] = []
    for s in inputs:
        p = Path(s)
        out += sorted(p.glob("*.tzb")) if p.is_dir() else [p]
    return out


class _Polylines:
    """The lanes of one map as segment arrays, for nearest-lane queries and walks along the graph."""

    def __init__(self, m) -> None:
        import numpy as np

        cl = m.lanes.centerline
        rid = cl.row_ids()
        keep = rid[1:] == rid[:-1]
        self.a, self.b = cl.values[:-1, :2][keep], cl.values[1:, :2][keep]
        self.lane = rid[:-1][keep]
        seg = np.linalg.norm(self.b - self.a, axis=1)
        self.s0 = np.zeros_like(seg)  # arc length of each segment's start along its lane
        for lane in range(len(m.lanes)):
            idx = np.nonzero(self.lane == lane)[0]
            self.s0[idx] = np.r_[0.0, np.cumsum(seg[idx])[:-1]]
        self.length = np.bincount(self.lane, seg, len(m.lanes))
        self.seg = seg
        self.succ = [m.lanes.successors.row(i).tolist() for i in range(len(m.lanes))]

    def nearest(self, p, lanes=None):
        """(lane, arc length) of the centreline point nearest ``p`` (among ``lanes`` when given)."""
        import numpy as np

        ab = self.b - self.a
        t = np.clip(((p - self.a) * ab).sum(1) / np.maximum(self.seg ** 2, 1e-12), 0.0, 1.0)
        d = np.linalg.norm(self.a + t[:, None] * ab - p, axis=1)
        if lanes is not None:
            d = np.where(np.isin(self.lane, lanes), d, np.inf)
        k = int(np.argmin(d))
        return int(self.lane[k]), float(self.s0[k] + t[k] * self.seg[k])

    def point(self, lane, s):
        import numpy as np

        idx = np.nonzero(self.lane == lane)[0]
        k = idx[min(int(np.searchsorted(self.s0[idx], s, "right")) - 1, len(idx) - 1)]
        t = np.clip((s - self.s0[k]) / max(self.seg[k], 1e-12), 0.0, 1.0)
        return self.a[k] + t * (self.b[k] - self.a[k])


def _own_lane_goals(cfg, seed: int, driver):
    """An evaluation actor whose ``begin`` redraws each controlled agent's goal as the engine would
    with two changes (the ones docs/womd.md proposes for the engine's goal sampling): the walk starts
    on the lane the engine reports the agent on (``agent_states``' ``lane``, not the nearest segment
    regardless of heading), and a goal is kept only where the lane nearest the goal point (the lane the
    reference driver routes to) is the lane the walk ended on. The goals are written back through
    ``Engine.get_state``/``set_state``; an agent with no such goal in 8 tries keeps the engine's."""
    import numpy as np

    from terrazero_env.evaluation.rollout import DriverActor
    from terrazero_env.maps.sources import load_built

    lo, hi = cfg.init.goal_distance
    fwd = cfg.init.goal_min_forward
    if len(cfg.maps) != 1:
        raise ValueError("--goals own-lane evaluates one map at a time")
    g = _Polylines(load_built(cfg.maps[0]))

    class OwnLaneGoals(DriverActor):
        redrawn = kept = rounds = 0

        def begin(self, engine, worlds, slots) -> None:
            OwnLaneGoals.rounds += 1
            st = engine.get_state()
            view = st["agents"].view(engine.agents.dtype).reshape(engine.agents.shape)
            goal_z = st["agents"].view(np.float64)  # goal_z follows goal_y in the Agent struct
            item = engine.agents.dtype.itemsize // 8
            z_at = engine.agents.dtype.fields["goal_y"][1] // 8 + 1
            for w in range(engine.num_worlds):
                s = engine.agent_states(w)
                rng = np.random.default_rng([seed, OwnLaneGoals.rounds, w])
                for i in np.nonzero(s["slot"] >= 0)[0]:
                    if s["lane"][i] < 0:
                        continue
                    p = np.array([s["x"][i], s["y"][i]])
                    h = np.array([np.cos(s["heading"][i]), np.sin(s["heading"][i])])
                    _, s0 = g.nearest(p, [int(s["lane"][i])])
                    for _ in range(8):
                        cur, rem = int(s["lane"][i]), rng.uniform(lo, hi) + s0
                        for _hop in range(256):
                            if rem <= g.length[cur] or not g.succ[cur]:
                                rem = min(rem, g.length[cur])
                                break
                            rem -= g.length[cur]
                            cur = g.succ[cur][rng.integers(len(g.succ[cur]))]
                        q = g.point(cur, rem)
                        if (q - p) @ h >= fwd and g.nearest(q)[0] == cur:
                            view["goal_x"][w, i], view["goal_y"][w, i] = q
                            goal_z[(w * engine.agents.shape[1] + i) * item + z_at] = s["z"][i]
                            OwnLaneGoals.redrawn += 1
                            break
                    else:
                        OwnLaneGoals.kept += 1
            engine.set_state(st)
            super().begin(engine, worlds, slots)

    return OwnLaneGoals(driver)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenes", nargs="+", help=".tzb files or folders holding them")
    ap.add_argument("--preset", default="quick", help="bundled preset or config YAML (default quick)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    ap.add_argument("--episodes", type=int, default=64, help="episodes per scene (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--goals", choices=("engine", "own-lane"), default="engine",
                    help="engine: the engine's goals; own-lane: redrawn along the agent's own lane and kept only "
                         "where the goal's nearest lane is the walked one (an emulation of the proposed engine "
                         "change, through get_state/set_state)")
    ap.add_argument("--driver", action="append", default=[], metavar="KEY=VALUE",
                    help="a reference driver setting (terrazero_env.drivers), e.g. curve_accel=1.0")
    args = ap.parse_args(argv)

    from terrazero_env.config.io import apply_overrides, load_config, parse_set_options
    from terrazero_env.drivers import make_driver
    from terrazero_env.evaluation.evaluate import evaluate
    from terrazero_env.maps import MapValidationError

    cfg = load_config(args.preset)
    if args.set:
        cfg = apply_overrides(cfg, parse_set_options(args.set))
    driver = make_driver("reference", **parse_set_options(args.driver))
    keys = ("goal_reach", "offroad", "collision", "wrong_way")
    rows = []
    print(f"{'scene':<22} {'goal':>6} {'offroad':>8} {'collision':>9} {'wrong way':>9} {'episodes':>8}")
    t0 = time.perf_counter()
    refused = []
    for scene in _scenes(args.scenes):
        try:
            one = cfg.with_overrides(maps=(str(scene),))
            actor = driver if args.goals == "engine" else _own_lane_goals(one, args.seed, driver)
            r = evaluate(actor, one, episodes=args.episodes, seed=args.seed, deterministic=True,
                         progress_reference="limit")["rows"]
        except MapValidationError as e:
            refused.append({"scene": scene.stem, "error": str(e)})
            print(f"{scene.stem:<22} refused: {e}", flush=True)
            continue
        counts = {k: int(r[k + "_rate"]["count"]) for k in keys}
        n = int(r["goal_reach_rate"]["n"])
        rows.append({"scene": scene.stem, "episodes": n, **counts})
        if args.goals == "own-lane":
            rows[-1].update(goals_redrawn=actor.redrawn, goals_kept=actor.kept)
        print(f"{scene.stem:<22} {counts['goal_reach'] / n:>6.3f} {counts['offroad'] / n:>8.3f} "
              f"{counts['collision'] / n:>9.3f} {counts['wrong_way'] / n:>9.3f} {n:>8d}", flush=True)
    n = sum(r["episodes"] for r in rows)
    tot = {k: sum(r[k] for r in rows) for k in keys}
    print(f"{'all ' + str(len(rows)) + ' scenes':<22} {tot['goal_reach'] / n:>6.3f} {tot['offroad'] / n:>8.3f} "
          f"{tot['collision'] / n:>9.3f} {tot['wrong_way'] / n:>9.3f} {n:>8d}   ({time.perf_counter() - t0:.0f} s)")
    if refused:
        print(f"{len(refused)} scene(s) refused by the reader")
    if args.goals == "own-lane":
        red, kept = sum(r["goals_redrawn"] for r in rows), sum(r["goals_kept"] for r in rows)
        print(f"goals redrawn along the agent's own lane: {red} of {red + kept} (the others kept the engine's)")
    if args.json:
        Path(args.json).write_text(json.dumps({"preset": args.preset, "set": args.set, "episodes": args.episodes,
                                               "seed": args.seed, "rows": rows, "total": {**tot, "episodes": n},
                                               "refused": refused},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
