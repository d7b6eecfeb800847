"""Rollouts of a trained policy for :mod:`terrazero_env.evaluation.realism` (``--policy RUN``).

The policy drives the logged agents: each rollout is one world whose scene is the logged agents at
the start of the future window (position, heading, speed, size), every agent of a class the run's
config controls is a controlled agent with its logged end position as its goal, and the others
stand where the log starts them. The engine observes and steps them as in training; the policy
samples its actions (``deterministic=False``, like WOSAC's stochastic rollouts) or takes the mode.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from terrazero_env import engine as core
from terrazero_env.envs.vector import TerraZeroVectorEnv
from terrazero_env.evaluation.rollout import PolicyActor, drive

from .evaluate import check_compatible, load_checkpoint, resolve_run

__all__ = ["policy_rollouts"]

#: AgentType (car, truck, bus, pedestrian, cyclist) -> engine class index (the same order).
_N_CLASSES = 5


def policy_rollouts(run: str | Path, preset: str | None = None, device: str = "cpu", deterministic: bool = False,
                    trust_pickle: bool = False) -> tuple[str, Callable[[dict[str, Any]], np.ndarray]]:
    """``(name, rollouts)`` where ``rollouts(scene)`` returns float64 ``[R, A, steps + 1, 3]``
    (x, y, heading) for a scene dict with keys ``map`` (built MapData), ``start`` ``[A, 4]`` (x, y,
    heading, speed), ``size`` ``[A, 2]``, ``types`` ``[A]`` (AgentType), ``goals`` ``[A, 2]``,
    ``steps``, ``rollouts`` and ``seed``. ``run``: a run folder or checkpoint zip (see ``resolve_run``)."""
    zip_path, cfg, source = resolve_run(run, preset)
    model = load_checkpoint(zip_path, device=device, trust_pickle=trust_pickle)

    def rollouts(scene: dict[str, Any]) -> np.ndarray:
        m, start, size, types = scene["map"], scene["start"], scene["size"], np.asarray(scene["types"])
        goals, steps, R, seed = scene["goals"], int(scene["steps"]), int(scene["rollouts"]), int(scene["seed"])
        A = start.shape[0]
        controlled = np.array([bool(cfg.init.controlled[int(t)]) for t in types], bool)
        if not controlled.any():
            present = sorted({core.AGENT_CLASSES[int(t)].lower() for t in types})
            raise ValueError(f"--policy {run}: its config ({source}) controls none of this scene's logged agents "
                             f"({', '.join(present)}); the policy would drive nothing, so there is nothing to score")
        K = int(controlled.sum())
        n_max = max(A, K, cfg.init.num_agents[1])
        run_cfg = cfg.with_overrides(num_worlds=R, slots_per_world=K, max_agents_per_world=n_max,
                                     episode_length=steps + 1)
        e = core.Engine(run_cfg, maps=[m])
        venv = TerraZeroVectorEnv(run_cfg, engine=e)
        check_compatible(model, venv, source)
        specs = [{"cls": int(t), "x": float(s[0]), "y": float(s[1]), "heading": float(s[2]),
                  "speed": max(float(s[3]), 0.0), "length": float(z[0]), "width": float(z[1]),
                  "controlled": bool(c), **({"goal": (float(g[0]), float(g[1]))} if c else {})}
                 for s, z, t, c, g in zip(start, size, types, controlled, goals)]
        for r in range(R):
            e.set_scene(r, specs, seed=seed + r)
        ag = e.agents
        out = np.zeros((R, A, steps + 1, 3))
        out[:, :, 0] = start[None, :, :3]
        live = np.ones(R * K, bool)
        for step in drive(PolicyActor(model, deterministic), e, live, limit=steps, until_done=False):
            out[:, :, step.t] = np.stack([ag["x"][:, :A], ag["y"][:, :A], ag["heading"][:, :A]], -1)
        venv.close()
        return out

    return f"policy:{Path(run).name}", rollouts
