"""Training throughput (TerraZero section 5.2): agent steps per second of the whole
training loop, rollouts and updates together, next to the engine alone on the same worlds.

    python benchmarks/bench_train.py                               # quick preset's worlds: engine, near-zero, quick
    python benchmarks/bench_train.py --preset planner --worlds 64 --rows engine,zero,quick,planner --n-steps 16
    python benchmarks/bench_train.py --device cuda --preset planner --rows engine,zero,quick,planner
    python benchmarks/bench_train.py --mode ranks --ranks 1 2 4 8 --preset planner --device cuda --steps 2000000

``--mode pipeline`` (the default) runs in one process, on the worlds of ``--preset`` (``--worlds``
overrides their number), one row per ``--rows`` entry:

* ``engine``: the native vector env stepping uniformly random actions (no learner): the ceiling.
* ``zero``: ``terrazero_env.agents.PPO`` as ``terrazero train`` builds it, with a near-zero policy
  (``ego_hidden 8, entity_hidden 4, trunk [8]``), one epoch of one minibatch: the pipeline's cost.
* ``quick`` / ``planner``: the quick preset's 121k-parameter policy / the paper-sized 3.4M policy,
  with the preset's PPO settings (2 epochs of 16 minibatches, V-trace, PopArt, priorities).

Every training row runs once per ``--variants`` entry (by default twice): ``before`` (``array_path=False``, the SB3 adapter's
per-slot infos, and ``encoder="dense"``, the padded entity encoder) and ``after`` (the defaults: the
array path and the packed encoder), so one run gives both figures on the same machine state. The
rate is timed over ``--iterations`` iterations after one warm-up iteration. Torch uses
``--threads`` CPU threads (the presets train on one). ``--phases N`` adds, per training row, N more
iterations timed phase by phase (collection: engine, policy forward, packing, bootstraps, advantages;
update: PopArt, V-trace, minibatch gather, forward, loss, backward, clipping, Adam; bookkeeping), in
milliseconds per iteration. ``--clock cpu`` times rates and phases in this process's CPU seconds
instead of wall-clock seconds: with one torch thread the loop runs on one core, and on a machine
shared with other jobs the CPU clock does not count the time they take that core away (the engine
row is timed the same way, so the shares compare). ``--mode ranks`` runs the data-parallel
scaling table under ``torchrun`` (``--ranks``, ``--steps``) as before.

Writes ``benchmarks/results/train_pipeline.json`` (or ``train_scaling.json``) and prints a Markdown
table with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from terrazero_env.config.train_options import prefer_huge_pages

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {
    "zero": ({"ego_hidden": 8, "entity_hidden": 4, "trunk": [8]}, {"n_epochs": 1, "num_minibatches": 1}),
    "quick": ({"ego_hidden": 64, "entity_hidden": 32, "trunk": [256, 256]}, {}),
    "planner": ({}, {}),
}
VARIANTS = {"before": ({"array_path": False}, {"encoder": "dense"}), "after": ({}, {})}


# ------------------------------------------------------------------------------------ pipeline


#: The clock of every rate and phase (``--clock``): wall-clock seconds, or the CPU seconds of this
#: process (its one thread: the engine and torch run on it), which other jobs on a shared machine do
#: not inflate.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock_now = CLOCKS["wall"]


def engine_rate(cfg: Any, steps: int) -> float:
    """Agent steps per second of the native vector env alone, random actions."""
    import terrazero_env

    env = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="NextStep")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n = env.single_action_space.n
    actions = rng.integers(0, n, size=(steps, env.num_envs))
    env.step(actions[0])
    t0 = clock_now()
    for a in actions[1:]:
        env.step(a)
    rate = env.num_envs * (steps - 1) / (clock_now() - t0)
    env.close()
    return rate


def training_rate(cfg: Any, row: str, variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """Agent steps per second of PPO.learn (rollouts + updates) after one warm-up iteration."""
    import torch
    from terrazero_env.agents.train import TrainSettings, build_model

    from terrazero_env.config.io import load_train_section

    policy, ppo = POLICIES[row]
    ppo_extra, policy_extra = VARIANTS[variant]
    d = dict(load_train_section(args.preset))
    d.update(ppo)
    d.update(ppo_extra)
    d["policy"] = {**policy, **policy_extra}
    if args.n_steps:
        d["n_steps"] = args.n_steps
    for item in args.ppo:
        key, _, value = item.partition("=")
        d[key] = json.loads(value)
    d["preset"] = args.preset
    settings = TrainSettings.from_mapping(d)
    model = build_model(cfg, settings, seed=0, device=args.device)
    per_iter = model.n_steps * model.n_envs
    model.learn(per_iter)
    if args.device == "cuda":
        torch.cuda.synchronize()
    t0 = clock_now()
    model.learn(per_iter * args.iterations, reset_num_timesteps=False)
    if args.device == "cuda":
        torch.cuda.synchronize()
    seconds = clock_now() - t0
    params = sum(p.numel() for p in model.policy.parameters())
    out = {"row": row, "variant": variant, "parameters": params, "agent_steps": per_iter * args.iterations,
           "seconds": seconds, "agent_steps_per_s": per_iter * args.iterations / seconds}
    if args.phases and args.device == "cpu":
        out["phases"] = phase_breakdown(model, args.phases)
        print_phases(row, variant, out["phases"], model.n_epochs)
    model.env.close()
    return out


class PhaseClock:
    """Wall-clock seconds per phase of ``PPO.learn``, by wrapping the callables each phase runs (the
    wrappers cost a few microseconds per call; nested phases are reported as "of which")."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.state = "collection"
        self._undo: list[tuple[Any, str, Any, bool]] = []

    def wrap(self, owner: Any, name: str, key: Any) -> None:
        """Time ``owner.name``; ``key``: a phase name, or a function of the clock's state giving one."""
        if not hasattr(owner, name):
            return
        original = getattr(owner, name)
        own = isinstance(owner, type) or name in getattr(owner, "__dict__", {})

        def timed(*a: Any, **k: Any) -> Any:
            phase = key(self.state) if callable(key) else key
            t0 = clock_now()
            try:
                return original(*a, **k)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + clock_now() - t0
                self.calls[phase] = self.calls.get(phase, 0) + 1

        self._undo.append((owner, name, original, own))
        setattr(owner, name, timed)

    def set_state(self, owner: Any, name: str, state: str) -> None:
        """Switch :attr:`state` to ``state`` whenever ``owner.name`` starts."""
        original = getattr(owner, name)

        def switched(*a: Any, **k: Any) -> Any:
            previous, self.state = self.state, state
            try:
                return original(*a, **k)
            finally:
                self.state = previous

        self._undo.append((owner, name, original, name in getattr(owner, "__dict__", {})))
        setattr(owner, name, switched)

    def restore(self) -> None:
        for owner, name, original, own in reversed(self._undo):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._undo = []


def phase_breakdown(model: Any, iterations: int) -> dict[str, Any]:
    """Milliseconds per iteration of each phase of ``model.learn`` over ``iterations`` iterations (after
    the warm-up the caller ran): collection (engine step, policy forward, of which packing; value
    bootstraps; advantages), update (PopArt, V-trace, minibatch draw and gather, forward, loss,
    backward, gradient clipping, Adam) and the rest (buffer writes, logging, callbacks)."""
    import torch
    from terrazero_env.agents import collect, losses, policies
    from terrazero_env.agents import ppo as ppo_module

    clock = PhaseClock()
    venv = collect.array_vector_env(model.env)
    buf = model.rollout_buffer
    if venv is not None:
        clock.wrap(venv, "step", "collection: engine step (with DPSA)")
    clock.wrap(policies, "pack_present", lambda s: f"{s}: of which packing present entities")
    clock.wrap(model.policy, "forward", lambda s: f"{s}: policy forward")
    clock.wrap(model.policy, "forward_packed", "collection: policy forward")
    clock.wrap(model.policy, "predict_values", "collection: value bootstraps (truncations, last step)")
    clock.wrap(buf, "compute_returns_and_advantage", "collection: advantages (GAE)")
    clock.wrap(model, "_popart_step", "update: PopArt")
    clock.wrap(buf, "recompute_vtrace", "update: V-trace recompute")
    clock.wrap(buf, "_samples", "update: minibatch gather")
    if getattr(buf, "entities", None) is not None:
        clock.wrap(buf.entities, "gather", "update: of which packed-entity gather")
    clock.wrap(model.policy, "evaluate_actions", "update: forward")
    clock.wrap(model.policy, "evaluate_actions_packed", "update: forward")
    clock.wrap(losses, "masked_ppo_loss", "update: loss")
    clock.wrap(torch.autograd, "backward", "update: backward")
    clock.wrap(torch.nn.utils, "clip_grad_norm_", "update: gradient clipping")
    flat = getattr(ppo_module, "FlatGradients", None)  # the flat gradient buffer, where the learner has it
    if flat is not None:
        clock.wrap(flat, "clip_norm_", "update: gradient clipping")
        clock.wrap(flat, "zero_", "update: zero_grad")
        clock.wrap(flat, "adam_step", "update: Adam step")
    clock.wrap(model.policy.optimizer, "step", "update: Adam step")
    clock.wrap(model.policy.optimizer, "zero_grad", "update: zero_grad")
    clock.wrap(model, "collect_rollouts", "collection: total")
    clock.wrap(model, "train", "update: total")
    clock.set_state(model, "train", "update")
    per_iter = model.n_steps * model.n_envs
    t0 = clock_now()
    try:
        model.learn(per_iter * iterations, reset_num_timesteps=False)
    finally:
        clock.restore()
    total = clock_now() - t0
    ms = {k: 1000.0 * v / iterations for k, v in clock.seconds.items()}
    ms["iteration"] = 1000.0 * total / iterations
    ms["bookkeeping (learn minus collection and update)"] = (
        ms["iteration"] - ms.get("collection: total", 0.0) - ms.get("update: total", 0.0))
    minibatches = clock.calls.get("update: forward", 0) / iterations
    return {"ms_per_iteration": ms, "minibatches_per_iteration": minibatches, "agent_steps_per_iteration": per_iter,
            "calls_per_iteration": {k: v / iterations for k, v in clock.calls.items()}}


def print_phases(row: str, variant: str, data: dict[str, Any], epochs: int) -> None:
    ms = data["ms_per_iteration"]
    mb = data["minibatches_per_iteration"]
    print(f"\n{row} / {variant}: {data['agent_steps_per_iteration']} agent steps per iteration, "
          f"{mb:.0f} minibatches in {epochs} epoch(s)\n\n| phase | ms per iteration | share |\n|---|---:|---:|")
    for key in sorted(ms, key=lambda k: (k.split(":")[0] != "collection", k.split(":")[0] != "update", k)):
        print(f"| {key} | {ms[key]:.1f} | {ms[key] / ms['iteration']:.1%} |")
    per_mb = sum(ms.get(f"update: {k}", 0.0) for k in ("minibatch gather", "forward", "loss", "backward",
                                                       "gradient clipping", "Adam step", "zero_grad"))
    if mb:
        print(f"| update: per minibatch (gather, forward, loss, backward, clipping, Adam) | {per_mb / mb:.2f} | |")
        print(f"| update: per epoch | {ms.get('update: total', 0.0) / max(epochs, 1):.1f} | |")


def pipeline(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from terrazero_env.config.io import apply_overrides, load_config, parse_set_options

    global clock_now
    clock_now = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    cfg = load_config(args.preset)
    if args.worlds:
        cfg = cfg.with_overrides(num_worlds=args.worlds)
    if args.set:
        try:
            cfg = apply_overrides(cfg, parse_set_options(args.set))
        except ValueError as e:
            raise SystemExit(f"--set: {e} (trainer settings go through --ppo KEY=JSON)") from None
    load_before = os.getloadavg()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = set(rows) - {"engine", *POLICIES}
    if unknown:
        raise SystemExit(f"--rows: unknown rows {sorted(unknown)}; choose from engine, {', '.join(POLICIES)}")
    results: list[dict[str, Any]] = []
    engine = None
    if "engine" in rows:
        engine = engine_rate(cfg, args.engine_steps)
        results.append({"row": "engine", "variant": "-", "agent_steps_per_s": engine})
    for row in rows:
        if row == "engine":
            continue
        for variant in args.variants:
            results.append(training_rate(cfg, row, variant, args))
            print(f"{row} {variant}: {results[-1]['agent_steps_per_s']:,.0f} agent-steps/s", flush=True)
    load_after = os.getloadavg()
    print(f"\n{args.preset} worlds: {cfg.num_worlds} x {cfg.slots_per_world} slots, device {args.device}, "
          f"{args.threads} torch thread(s), {args.clock} clock; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after\n")
    names = {"before": "before: adapter path, dense encoder", "after": "after: array path, packed encoder"}
    print("| row | parameters | " + " | ".join(names[v] for v in args.variants) + " | best / engine |\n|---|---:|"
          + "---:|" * (len(args.variants) + 1))
    if engine is not None:
        cells = ["-"] * (len(args.variants) - 1) + [f"{engine:,.0f}"]
        print("| engine alone (random actions) | - | " + " | ".join(cells) + " | 1.00 |")
    for row in rows:
        if row == "engine":
            continue
        rates = [next(r for r in results if r["row"] == row and r["variant"] == v) for v in args.variants]
        best = max(r["agent_steps_per_s"] for r in rates)
        share = f"{best / engine:.3f}" if engine else "-"
        print(f"| {row} | {rates[0]['parameters']:,} | " + " | ".join(f"{r['agent_steps_per_s']:,.0f}" for r in rates)
              + f" | {share} |")
    return {"meta": {**_machine(args), "clock": args.clock, "worlds": cfg.num_worlds, "slots_per_world": cfg.slots_per_world,
                     "load_average_before": load_before, "load_average_after": load_after},
            "results": results}


# --------------------------------------------------------------------------------------- ranks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks_run(ranks: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
               "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
               "-m", "terrazero_env.agents.launch", "--preset", args.preset, "--total-steps", str(args.steps),
               "--out", str(out), "--progress", "none", "--no-tensorboard", "--device", args.device,
               "--checkpoint-every", "1000000", *sum((["--set", s] for s in args.set), [])]
        env = dict(os.environ)
        if args.device == "cpu":
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // ranks))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    if len(rows) < 2:
        raise SystemExit(f"{ranks} rank(s): fewer than two iterations; raise --steps")
    first, last = rows[0], rows[-1]
    steps = last["agent_steps"] - first["agent_steps"]
    seconds = last["seconds"] - first["seconds"]
    return {"ranks": ranks, "iterations": len(rows), "agent_steps": last["agent_steps"],
            "agent_steps_per_s": steps / seconds, "mu": last["mu"], "final_return": last["return"]}


def ranks(args: argparse.Namespace) -> dict[str, Any]:
    results = [ranks_run(n, args) for n in args.ranks]
    base = results[0]["agent_steps_per_s"]
    print("| ranks | agent-steps/s (incl. updates) | speed-up | iterations |\n|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['ranks']} | {r['agent_steps_per_s']:,.0f} | {r['agent_steps_per_s'] / base:.2f} | {r['iterations']} |")
    return {"meta": {**_machine(args), "steps": args.steps, "set": args.set}, "results": results}


def _machine(args: argparse.Namespace) -> dict[str, Any]:
    return {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "preset": args.preset, "device": args.device}


def main() -> None:
    prefer_huge_pages()  # as terrazero train does, before torch is imported
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["pipeline", "ranks"], default="pipeline")
    p.add_argument("--preset", default="quick")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--worlds", type=int, default=None, help="pipeline: number of worlds (default: the preset's)")
    p.add_argument("--rows", default="engine,zero,quick", help="pipeline: engine, zero, quick, planner")
    p.add_argument("--n-steps", type=int, default=None, help="pipeline: rollout length (default: the preset's)")
    p.add_argument("--iterations", type=int, default=3, help="pipeline: timed iterations per training row")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["before", "after"],
                   help="pipeline: training variants per row")
    p.add_argument("--engine-steps", type=int, default=300)
    p.add_argument("--phases", type=int, default=0, metavar="N",
                   help="pipeline, CPU: after the timed iterations, N more with a per-phase millisecond breakdown")
    p.add_argument("--threads", type=int, default=1, help="pipeline: torch CPU threads")
    p.add_argument("--clock", choices=list(CLOCKS), default="wall",
                   help="pipeline: wall-clock seconds, or this process's CPU seconds (steadier on a shared "
                        "machine; with one torch thread, the seconds of the one core the loop runs on)")
    p.add_argument("--ppo", action="append", default=[], metavar="KEY=JSON",
                   help="pipeline: a train-section setting for every training row, e.g. num_minibatches=8")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=40_000, help="ranks: agent steps per configuration, over all ranks")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="pipeline: an engine-config override for every row, e.g. obs.road_segment_length=20; "
                        "ranks: passed to the trainer")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    data = pipeline(args) if args.mode == "pipeline" else ranks(args)
    name = "train_pipeline.json" if args.mode == "pipeline" else "train_scaling.json"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
