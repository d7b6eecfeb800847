"""What a training run shows and records each iteration: episode statistics summed over ranks, the
progress line or bar, ``progress.jsonl`` and TensorBoard scalars (rank 0), checkpoints every
``checkpoint_every`` iterations, and the synchronized stop that a signal asks for."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

import terrazero_env
from terrazero_env.foundation.safe_files import append_text

from ..wrappers import DPSA, SamplingStats
from .ppo import PPO

if TYPE_CHECKING:
    from .run_folder import Run

__all__ = ["Display", "Loop", "StopAfter"]

_COUNTERS = list(terrazero_env.engine.COUNTER_NAMES)


class Display:
    """Rank 0's view: a tqdm bar on a terminal, otherwise one line per iteration."""

    def __init__(self, mode: str, total: int, initial: int):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "lines"
        if mode not in ("bar", "lines", "none"):
            raise ValueError(f"progress: 'auto', 'bar', 'lines' or 'none', got {mode!r}")
        self.mode, self.total, self.bar = mode, total, None
        if mode == "bar":
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", unit_scale=True, dynamic_ncols=True,
                            smoothing=0.1)

    def update(self, row: dict[str, Any], advanced: int) -> None:
        ret = "n/a" if row["return"] is None else f"{row['return']:.2f}"
        rates = {k: "n/a" if row[k] is None else f"{row[k]:.2f}" for k in ("goal", "collision", "offroad")}
        if self.bar is not None:
            self.bar.update(advanced)
            self.bar.set_postfix_str(f"{row['agent_steps_per_s']:,.0f} steps/s ret {ret} goal {rates['goal']} "
                                     f"col {rates['collision']} off {rates['offroad']} mu {row['mu']:.2f} "
                                     f"eta {row['eta']:.2f}", refresh=False)
        elif self.mode == "lines":
            print(f"[{100 * row['agent_steps'] / self.total:5.1f}%] {row['agent_steps']:>10,} agent steps | "
                  f"{row['agent_steps_per_s']:>8,.0f} steps/s | return {ret} | goal {rates['goal']} "
                  f"collision {rates['collision']} off-road {rates['offroad']} | mu {row['mu']:.2f} "
                  f"eta {row['eta']:.2f}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Loop(BaseCallback):
    """Per iteration: episode statistics summed over ranks (shown and logged by rank 0), checkpoints
    every ``checkpoint_every`` iterations, and a synchronized stop on SIGINT/SIGTERM."""

    def __init__(self, run: Run, iteration: int, steps_before: int, seconds_before: float):
        super().__init__()
        self.run = run
        self.iteration = self.start_iteration = iteration
        self.steps_before, self.seconds_before = steps_before, seconds_before
        self.stop_requested = False
        self.stopping = False
        self._acc = np.zeros(5)  # finished episodes, their return sum, goal, collision and off-road counts
        self._t0 = time.perf_counter()
        self._last_steps = steps_before
        self.last_row: dict[str, Any] | None = None

    # SB3 hooks ---------------------------------------------------------------------------
    def _on_training_start(self) -> None:
        self._t0 = time.perf_counter()

    def _on_rollout_start(self) -> None:
        if self.iteration == self.start_iteration:
            return
        stop = self.run.sync.any(self.stop_requested)
        if stop or self.iteration % self.run.settings.checkpoint_every == 0:
            self.run.save(self.iteration, self.elapsed())
        if stop:
            self.stopping = True

    def _on_step(self) -> bool:
        if self.stopping:
            return False
        if "infos" not in self.locals:  # the array path tallies episodes itself (agents/collect.py)
            return True
        dones = np.asarray(self.locals["dones"], bool)
        if dones.any():
            infos = self.locals["infos"]
            ended = [i for i in np.flatnonzero(dones) if infos[i].get("valid", True)]
            if ended:
                counters = np.stack([infos[i].get("counters", np.zeros(len(_COUNTERS))) for i in ended]) > 0
                rets = [infos[i]["episode"]["r"] for i in ended if "episode" in infos[i]]
                self._acc[0] += len(ended)
                self._acc[1] += float(np.sum(rets)) if rets else 0.0
                self._acc[2] += counters[:, _COUNTERS.index("goal_reached")].sum()
                self._acc[3] += counters[:, _COUNTERS.index("collision")].sum()
                self._acc[4] += counters[:, _COUNTERS.index("offroad")].sum()
        return True

    def _on_rollout_end(self) -> None:
        self.iteration += 1
        run = self.run
        stats = _sampler_stats(run.model)
        if run.model.episode_tally is not None:
            self._acc += run.model.episode_tally.take()
        glob = run.sync.sum([*self._acc, self.num_timesteps, stats["mu"], stats["eta"]])
        self._acc[:] = 0.0
        episodes, ret_sum, goals, cols, offs = glob[:5]
        steps = int(glob[5])
        elapsed = self.seconds_before + time.perf_counter() - self._t0
        rate = (steps - self.steps_before) / max(time.perf_counter() - self._t0, 1e-9)
        n = max(episodes, 1.0)
        row = {"iteration": self.iteration, "agent_steps": steps, "seconds": elapsed, "agent_steps_per_s": rate,
               "episodes": int(episodes), "return": ret_sum / n if episodes else None,
               "goal": goals / n if episodes else None, "collision": cols / n if episodes else None,
               "offroad": offs / n if episodes else None,
               "mu": glob[6] / run.sync.world_size, "eta": glob[7] / run.sync.world_size}
        self.last_row = row
        if run.sync.is_main:
            append_text(run.out / "progress.jsonl", json.dumps(row) + "\n", "progress file")
            for key in ("return", "goal", "collision", "offroad"):
                if row[key] is not None:
                    self.logger.record(f"episode/{key}", row[key])
            self.logger.record("time/agent_steps_per_s", rate)
            self.logger.record("sampling/mu", row["mu"])
            self.logger.record("sampling/eta", row["eta"])
            run.display.update(row, steps - self._last_steps)
        self._last_steps = steps

    def elapsed(self) -> float:
        return self.seconds_before + time.perf_counter() - self._t0


def _sampler_stats(model: PPO) -> dict[str, float]:
    """FAST's validity rate mu and time efficiency eta since the start, from the sampling wrapper."""
    env = model.env
    while env is not None and not isinstance(env, (DPSA, SamplingStats)):
        env = getattr(env, "venv", None) or getattr(env, "vector_env", None)
    total = env.total.as_dict()
    return {"mu": total["mu"], "eta": total["eta"]}


class StopAfter(BaseCallback):
    """Raise the stop request once ``iteration`` iterations are done (what a signal does)."""

    def __init__(self, loop: Loop, iteration: int):
        super().__init__()
        self.loop, self.at = loop, iteration

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.loop.iteration >= self.at:
            self.loop.stop_requested = True
