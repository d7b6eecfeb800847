"""Training throughput with 1, 2, ... data-parallel ranks (TerraZero section 5.2): agent steps per
second of the whole job, collection and updates together, summed over ranks.

    python benchmarks/bench_train.py                                  # CPU: 1 and 2 ranks, quick preset
    python benchmarks/bench_train.py --ranks 1 2 4 8 --preset planner --device cuda --steps 2000000

Each configuration runs ``torchrun --nproc-per-node N -m terrazero_env.agents.launch`` from scratch
for ``--steps`` agent steps (over all ranks) and reads the run's ``progress.jsonl``. The rate is
measured from the end of the first iteration to the end of the last (start-up, the first rollout
and the process launch are excluded). Writes ``benchmarks/results/train_scaling.json`` and prints
a Markdown table.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(ranks: int, args: argparse.Namespace) -> dict:
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--preset", default="quick")
    p.add_argument("--steps", type=int, default=40_000, help="agent steps per configuration, over all ranks")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to the trainer")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "train_scaling.json"))
    args = p.parse_args()
    results = [run(n, args) for n in args.ranks]
    base = results[0]["agent_steps_per_s"]
    print("| ranks | agent-steps/s (incl. updates) | speed-up | iterations |\n|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['ranks']} | {r['agent_steps_per_s']:,.0f} | {r['agent_steps_per_s'] / base:.2f} | {r['iterations']} |")
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "preset": args.preset, "device": args.device,
            "steps": args.steps, "set": args.set}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
