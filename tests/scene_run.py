"""Shared by the rule-based traffic tests: step a hand-built scene on world 0 and check it at every step."""

from __future__ import annotations

import numpy as np

from terrazero_env import engine as core


def boxes(a: np.ndarray) -> np.ndarray:
    """``[n, 5]`` boxes (x, y, heading, length, width) of agent records."""
    return np.ascontiguousarray(np.stack([a["x"], a["y"], a["heading"], a["length"], a["width"]], axis=1), np.float64)


def run_checked(e: core.Engine, spec: list[dict], steps: int) -> np.ndarray:
    """Set ``spec`` as world 0's scene and step it; assert at every step that no two agents overlap and
    that no rule-based vehicle's footprint leaves the road. Returns the agents, ``[steps, n]``."""
    e.set_scene(0, spec, seed=0)
    n = len(spec)
    i, j = np.triu_indices(n, 1)
    moving = np.array([s.get("idm", False) for s in spec])
    out = []
    for t in range(steps):
        e.step()
        a = e.agents[0, :n].copy()
        hit = core.obb_overlap_batch(boxes(a[i]), boxes(a[j]))
        assert not hit.any(), f"step {t}: agents {i[hit][0]} and {j[hit][0]} overlap"
        assert not core.footprint_offroad(e.road_maps[0], boxes(a[moving])).any(), \
            f"step {t}: a rule-based vehicle left the road"
        out.append(a)
    return np.array(out)
