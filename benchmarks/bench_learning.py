"""Learning check (TerraZero issue: the training algorithm, item 10): train from scratch on the
``quick`` preset for a fixed wall-clock budget with ``terrazero_env.agents.PPO`` (Deep Sets policy,
DPSA sampling, SMPO, V-trace, PopArt, prioritized segments), built as ``terrazero train`` builds it
from the preset's ``train:`` section, and with stock Stable-Baselines3 PPO (MLP policy, the native env
through the SB3 adapter), and record the learning curves.

    python benchmarks/bench_learning.py [--seconds 420] [--worlds 8] [--eval-every 35]
    python benchmarks/bench_learning.py --algos ours,ours_paper_scales,stock   # with the input-scale ablation
    python benchmarks/bench_learning.py --algos ours --seed 1                   # another seed
    python benchmarks/bench_learning.py --algos ours,ours_popart_epoch          # PopArt per sample vs per epoch

Every ``--eval-every`` seconds of training, the policy drives one episode of every slot of a separate
evaluation env (``--eval-worlds`` worlds of the preset, fixed seed) twice: sampling its actions and
taking the most likely action. The goal-reach rate is the share of episodes whose agent reached its
goal at least once (the engine's ``goal_reached`` counter at the episode end), next to the mean
episode return and the off-road rate. Three baselines are evaluated the same way: a uniformly random
policy; a constant "coast" policy (zero longitudinal and lateral jerk: the car keeps its initial speed
and heading, which already reaches the goals straight ahead); and a hand-written controller
(:func:`scripted_controller`: pure pursuit toward the observed goal, slowing to arrive below 3 m/s),
which shows what the observation allows. Training throughput counts agent steps (padding included,
as the env produced them) per second of training wall-clock, collection and updates together;
evaluation time is excluded. CPU threads: torch uses one (``--threads``).

``ours_paper_scales`` is an ablation: the same PPO on the same preset but with table 9's observation
scales for the ego goal position (x 0.005) and speed (x 0.01) instead of the preset's 0.1 and 0.1.
For goals 10-30 m away and speeds of a few m/s those features then stay below 0.15 and 0.05.

Writes ``benchmarks/results/learning.json`` and ``docs/learning_curve.png``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor
from terrazero_env.agents.policies import count_parameters
from terrazero_env.agents.train import TrainSettings, build_model
from terrazero_env.wrappers import SB3VecEnv

import terrazero_env
from terrazero_env.config.io import load_train_section

ROOT = Path(__file__).resolve().parent.parent
COUNTERS = list(terrazero_env.engine.COUNTER_NAMES)
GOAL, OFFROAD, COLLISION = (COUNTERS.index(k) for k in ("goal_reached", "offroad", "collision"))
#: ``ours_paper_scales``: table 9's ego observation scales.
PAPER_SCALES = {"goal_scale": 0.005, "speed_scale": 0.01}


def evaluate(act: Any, cfg: Any, worlds: int, seed: int) -> dict[str, float]:
    """One episode per slot of a fresh env of ``worlds`` worlds of ``cfg``; ``act(obs) -> actions``."""
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg.with_overrides(num_worlds=worlds))
    obs, info = venv.reset(seed=seed)
    n = venv.num_envs
    finished = ~np.asarray(info["valid"], bool)
    returns, ended = np.zeros(n), np.zeros(n, bool)
    flags = np.zeros((n, 3), bool)
    for _ in range(4 * venv.config.episode_length):
        obs, rew, term, trunc, info = venv.step(np.asarray(act(np.array(obs)), np.int64).reshape(n))
        live = ~finished & np.asarray(info["valid"], bool)
        returns[live] += rew[live]
        done = live & (term | trunc)
        flags[done] = venv.engine.counters[done][:, [GOAL, OFFROAD, COLLISION]] > 0
        ended |= done
        finished |= done
        if finished.all():
            break
    venv.close()
    f = flags[ended]
    return {"goal_rate": float(f[:, 0].mean()), "offroad_rate": float(f[:, 1].mean()),
            "collision_rate": float(f[:, 2].mean()), "mean_return": float(returns[ended].mean()),
            "episodes": int(ended.sum())}


def scripted_controller(layout: Any, obs_cfg: Any, v_cruise: float = 6.0, v_arrive: float = 2.0) -> Any:
    """A hand-written reference that reads only the ego observation (through ``layout`` and the
    scales of ``obs_cfg``): pure
    pursuit toward the relative goal position, with a speed profile that arrives below ``v_arrive``
    (the goal counts only below ``v_goal``, 3 m/s), each converted to the nearest jerk of the car's
    4 x 3 action grid. It ignores the road, other agents and signals."""
    ego = layout.groups["ego"]
    col = {name: ego.start + off for name, off, _ in ego.features}
    jerk_long, jerk_lat = np.array([-15.0, -4.0, 0.0, 4.0]), np.array([-4.0, 0.0, 4.0])

    def act(obs: np.ndarray) -> np.ndarray:
        gx, gy = (obs[:, col["rel_goal_pos"] + k] / obs_cfg.goal_scale for k in (0, 1))  # metres
        v = obs[:, col["speed"]] / obs_cfg.speed_scale
        a_long, a_lat = obs[:, col["acceleration"]] * 5.0, obs[:, col["acceleration"] + 1] * 4.0
        d = np.hypot(gx, gy)
        v_des = np.where(gx < 0, 1.0, np.minimum(v_cruise, np.sqrt(v_arrive**2 + 3.0 * np.maximum(d - 1.0, 0.0))))
        j_long = (np.clip(v_des - v, -4.0, 2.5) - a_long) / 0.1
        a_lat_des = np.clip(np.maximum(v, 1.0) ** 2 * 2.0 * gy / np.maximum(d * d, 1.0), -3.5, 3.5)
        j_lat = (a_lat_des - a_lat) / 0.1
        i_long = np.abs(jerk_long[None, :] - j_long[:, None]).argmin(1)
        i_lat = np.where(j_lat > 2.0, 2, np.where(j_lat < -2.0, 0, 1))
        return i_long * len(jerk_lat) + i_lat

    return act


def evaluate_policy(model: Any, cfg: Any, worlds: int, seed: int) -> dict[str, float]:
    """Stochastic and deterministic evaluation; deterministic keys get a ``det_`` prefix."""
    out = evaluate(lambda o: model.predict(o, deterministic=False)[0], cfg, worlds, seed)
    det = evaluate(lambda o: model.predict(o, deterministic=True)[0], cfg, worlds, seed)
    out.update({f"det_{k}": v for k, v in det.items() if k != "episodes"})
    return out


class Curve(BaseCallback):
    """Stops training after ``seconds`` of training wall-clock and evaluates every ``every`` seconds."""

    def __init__(self, seconds: float, every: float, cfg: Any, eval_worlds: int, seed: int) -> None:
        super().__init__()
        self.seconds, self.every, self.cfg, self.eval_worlds, self.seed = seconds, every, cfg, eval_worlds, seed
        self.points: list[dict[str, float]] = []
        #: Stop at this many agent steps (None: only the time budget), to compare at equal steps.
        self.stop_steps: int | None = None
        self.train_time = 0.0
        self.valid_steps = 0

    def _point(self) -> None:
        result = evaluate_policy(self.model, self.cfg, self.eval_worlds, self.seed)
        buf = list(self.model.ep_info_buffer)
        result.update(train_seconds=self.train_time, agent_steps=int(self.model.num_timesteps),
                      valid_agent_steps=self.valid_steps,
                      train_ep_return=float(np.mean([e["r"] for e in buf])) if buf else float("nan"))
        self.points.append(result)
        print(f"  {self.train_time:7.1f} s {self.model.num_timesteps:9d} steps  goal rate {result['goal_rate']:.3f} "
              f"(deterministic {result['det_goal_rate']:.3f})  return {result['mean_return']:6.2f} "
              f"({result['det_mean_return']:6.2f})  off-road {result['offroad_rate']:.2f}", flush=True)

    def _on_training_start(self) -> None:
        self._point()
        self._next = self.every
        self._t0 = time.perf_counter()

    def _on_rollout_start(self) -> None:
        # Called after each update: the clock ran through the last rollout and its update.
        now = time.perf_counter()
        self.train_time += now - self._t0
        if self.train_time >= self._next:
            self._point()
            self._next = self.train_time + self.every
        self._t0 = time.perf_counter()

    def _on_step(self) -> bool:
        if "infos" in self.locals:  # the SB3 adapter's per-slot infos
            for info in self.locals["infos"]:
                self.valid_steps += int(bool(info.get("valid", True)))
        else:  # terrazero_env.agents.PPO's array path: the vector env's info of arrays
            info = self.locals["info"]
            self.valid_steps += int(np.sum(info["valid"])) if "valid" in info else len(self.locals["dones"])
        if self.stop_steps is not None and self.model.num_timesteps >= self.stop_steps:
            return False
        return self.train_time + (time.perf_counter() - self._t0) < self.seconds

    def finish(self) -> None:
        self.train_time += time.perf_counter() - self._t0
        if self.points[-1]["agent_steps"] != self.model.num_timesteps:
            self._point()


def run(name: str, model: Any, cfg: Any, total_steps: int, args: argparse.Namespace) -> dict[str, Any]:
    curve = Curve(args.seconds, args.eval_every, cfg, args.eval_worlds, args.seed + 1000)
    curve.stop_steps = args.stop_steps
    print(f"{name}: {count_parameters(model.policy):,} parameters", flush=True)
    model.learn(total_steps, callback=curve)
    curve.finish()
    return {"name": name, "parameters": count_parameters(model.policy), "points": curve.points,
            "train_seconds": curve.train_time, "agent_steps": int(model.num_timesteps),
            "valid_agent_steps": curve.valid_steps,
            "throughput_agent_steps_per_s": model.num_timesteps / curve.train_time,
            "throughput_valid_agent_steps_per_s": curve.valid_steps / curve.train_time}


def plot(results: list[dict[str, Any]], baselines: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("goal_rate", "train_seconds", "goal-reach rate (sampled actions)"),
              ("det_goal_rate", "train_seconds", "goal-reach rate (most likely action)"),
              ("mean_return", "train_seconds", "mean episode return (sampled actions)"),
              ("goal_rate", "agent_steps", "goal-reach rate (sampled actions)")]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (key, x, label) in zip(axes.flat, panels):
        for res in results:
            pts = res["points"]
            ax.plot([p[x] for p in pts], [p[key] for p in pts], marker="o", ms=3, label=res["name"])
        base_key = key.removeprefix("det_")
        for (bname, b), style in zip(baselines.items(), ("--", ":", "-.")):
            ax.axhline(b[base_key], color="gray", ls=style, label=f"{bname} policy")
        ax.set_xlabel("training wall-clock (s)" if x == "train_seconds" else "agent steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Learning on the quick preset (evaluation episodes, fixed seeds)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seconds", type=float, default=420.0, help="training wall-clock per algorithm")
    parser.add_argument("--worlds", type=int, default=None, help="training worlds (default: the preset's)")
    parser.add_argument("--eval-every", type=float, default=35.0)
    parser.add_argument("--eval-worlds", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=None,
                        help="horizon of the learning-rate schedule (default: the train section's total_steps)")
    parser.add_argument("--stop-steps", type=int, default=None,
                        help="also stop each algorithm at this many agent steps (compare at equal steps)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--algos", default="ours,stock", help="comma-separated subset of ours,ours_popart_epoch,ours_paper_scales,stock")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "learning.json"))
    parser.add_argument("--png", default=str(ROOT / "docs" / "learning_curve.png"))
    parser.add_argument("--plot-only", action="store_true", help="redraw --png from an existing --json")
    args = parser.parse_args()
    if args.plot_only:
        saved = json.loads(Path(args.json).read_text())
        plot(saved["runs"], saved["baselines"], Path(args.png))
        return
    torch.set_num_threads(args.threads)

    cfg = terrazero_env.load_config(args.preset)
    if args.worlds is not None:
        cfg = cfg.with_overrides(num_worlds=args.worlds)
    settings = TrainSettings.from_mapping(load_train_section(args.preset))
    total_steps = args.max_steps or settings.total_steps
    n_envs = cfg.num_worlds * cfg.slots_per_world

    rng = np.random.default_rng(args.seed)
    layout = terrazero_env.envs.TerraZeroVectorEnv(cfg.with_overrides(num_worlds=1)).obs_layout
    baselines = {name: evaluate(act, cfg, args.eval_worlds, args.seed + 1000) for name, act in (
        ("random", lambda o: rng.integers(0, 12, len(o))),
        ("coast", lambda o: np.full(len(o), 7)),  # action 7: zero jerk in the 4 x 3 car grid
        ("scripted", scripted_controller(layout, cfg.obs)))}
    for bname, b in baselines.items():
        print(f"{bname} policy: goal rate {b['goal_rate']:.3f}, return {b['mean_return']:.2f}, "
              f"off-road {b['offroad_rate']:.2f}", flush=True)

    results = []
    for algo in args.algos.split(","):
        run_cfg = cfg
        if algo == "ours":
            model = build_model(cfg, settings, seed=args.seed, device=args.device)
            name = "terrazero_env.agents.PPO (DeepSets, DPSA)"
        elif algo == "ours_popart_epoch":
            epoch = TrainSettings.from_mapping({**settings.to_mapping(), "popart_schedule": "epoch"})
            model = build_model(cfg, epoch, seed=args.seed, device=args.device)
            name = "terrazero_env.agents.PPO, PopArt statistics updated per epoch (section 5.1's reading)"
        elif algo == "ours_paper_scales":
            run_cfg = cfg.with_overrides(obs=PAPER_SCALES)
            model = build_model(run_cfg, settings, seed=args.seed, device=args.device)
            name = "terrazero_env.agents.PPO, table 9 goal and speed scales (ablation)"
        elif algo == "stock":
            env = VecMonitor(SB3VecEnv(terrazero_env.envs.TerraZeroVectorEnv(cfg)))
            n_steps = int(settings.ppo.get("n_steps", 64))
            model = SB3PPO("MlpPolicy", env, n_steps=n_steps, batch_size=n_steps * n_envs // 16, n_epochs=2,
                           learning_rate=5e-4, gamma=0.99, gae_lambda=0.95, ent_coef=0.01,
                           policy_kwargs={"net_arch": [256, 256]}, seed=args.seed, device=args.device)
            name = "stable_baselines3.PPO (MLP)"
        else:
            raise SystemExit(f"unknown algorithm {algo!r}")
        results.append(run(name, model, run_cfg, total_steps, args))
        model.env.close()

    out = {"preset": args.preset, "worlds": cfg.num_worlds, "agents": n_envs, "seconds_per_algorithm": args.seconds,
           "lr_schedule_horizon": total_steps, "train_settings": settings.to_mapping(), "threads": args.threads,
           "device": args.device, "machine": platform.processor() or platform.machine(),
           "baselines": baselines, "runs": results}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    plot(results, baselines, Path(args.png))
    for res in results:
        last = res["points"][-1]
        print(f"{res['name']}: {res['agent_steps']:,} agent steps in {res['train_seconds']:.0f} s "
              f"({res['throughput_agent_steps_per_s']:,.0f} agent-steps/s incl. updates); final goal rate "
              f"{last['goal_rate']:.3f} (deterministic {last['det_goal_rate']:.3f}), return {last['mean_return']:.2f}")
    print(f"wrote {args.json} and {args.png}")


if __name__ == "__main__":
    main()
