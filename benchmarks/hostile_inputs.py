"""How fast and how cheaply each hostile input is refused: a resumed run, ``maps build``, ``eval``,
``train --dataset``, ``--set``/``--config`` and ``python -m terrazero_env.evaluation.realism`` on inputs of every
hardening class (tampered engine state, unbounded sizes, planted links and pointers, silent
acceptance, one-line errors).

    python benchmarks/hostile_inputs.py [--json benchmarks/results/hostile_inputs.json]

Every case runs in its own process under a 3 GiB address-space cap and a 120 s timeout. The child
imports the command's modules first (the CLI, and torch with its optimizer's lazy imports for
``train``/``eval``), then times the command itself: "refusal (s)" is the time from the call to the
one-line refusal, "process (s)" the whole child's wall time (interpreter start and imports included), "peak RSS (MiB)" the
process's peak resident memory and "over imports (MiB)" what the refusal added to the peak after the
imports. Each row also checks that the command exited with status 2 and printed one line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

CAP = 3 * 1024**3

CHILD = textwrap.dedent("""
    import contextlib, io, json, resource, sys, time
    argv, module, heavy = json.loads(sys.argv[1])
    import importlib
    main = importlib.import_module(module).main
    if heavy:
        import torch
        import terrazero_env.agents.train  # torch and the learner, as train/eval import them
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # the optimizer's lazy imports (about 1.5 s)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    err = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rc": rc, "seconds": dt, "peak_kib": peak, "base_kib": base, "stderr": err.getvalue()}))
""")

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef"))


def _cap() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def _run(argv: list[str], module: str = "terrazero_env.cli", env: dict[str, str] | None = None) -> dict:
    import time

    heavy = module == "terrazero_env.cli" and argv[0] in ("train", "eval")
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, json.dumps([argv, module, heavy])], capture_output=True,
                           text=True, timeout=120, preexec_fn=_cap, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "seconds": 120.0, "peak_kib": 0, "base_kib": 0, "stderr": "", "process_s": 120.0}
    if r.returncode != 0 or not r.stdout.strip():
        return {"rc": f"died ({r.returncode})", "seconds": float("nan"), "peak_kib": 0, "base_kib": 0,
                "stderr": r.stderr[-300:], "process_s": float("nan")}
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "process_s": time.perf_counter() - t0}


def _tamper_state(run: Path, key: str, value: int) -> None:
    import numpy as np
    import torch
    from terrazero_env.agents import checkpoint as ckpt

    path = run / "checkpoints" / "iter_000002" / "rank0.pt"
    state = torch.load(path, weights_only=True)

    def walk(node):
        if isinstance(node, dict):
            if key in node:
                arr = ckpt.from_plain(node[key]).copy()
                arr.reshape(-1)[0] = value
                node[key] = ckpt.to_plain(np.ascontiguousarray(arr))
            for v in node.values():
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(state)
    torch.save(state, path)


def _copy_run(base: Path, d: Path, name: str) -> Path:
    run = d / name
    shutil.copytree(base, run, symlinks=True)
    return run


def cases(d: Path, base: Path) -> list[tuple[str, str, list[str], str, dict]]:
    """(class, case, argv, module, environment) for every hostile input, its files made under ``d``."""
    from terrazero_env.maps import build, procedural, save

    out: list[tuple[str, str, list[str], str, dict]] = []
    cli, realism = "terrazero_env.cli", "terrazero_env.evaluation.realism"
    # 1. engine states beyond capacity, through a resumed run
    for key, value in (("buffer/n_agents", 10**6), ("buffer/slot_agent", 999)):
        run = _copy_run(base, d, f"state_{key.split('/')[1]}")
        _tamper_state(run, key, value)
        out.append(("1 state", f"resume, rank0.pt {key}={value}", ["train", "--resume", str(run)], cli, {}))
    # 2. unbounded work
    (d / "bomb.yaml").write_text(BOMB)
    (d / "grid150.yaml").write_text("generator: grid\nseed: 0\nparams: {rows: 150, cols: 150}\n")
    out += [
        ("2 work", "--set YAML bomb (50 aliases, 10**6 nodes)", ["train", "--set", "dt={" + BOMB.replace("\n", ", ")
                                                                  + "}", "--out", str(d / "r")], cli, {}),
        ("2 work", "--config YAML bomb", ["train", "--config", str(d / "bomb.yaml"), "--out", str(d / "r")], cli, {}),
        ("2 work", "--set obs.road_radius=1e5", ["train", "--set", "obs.road_radius=1e5", "--out", str(d / "r")],
         cli, {}),
        ("2 work", "maps build, grid spec 150 x 150", ["maps", "build", str(d / "grid150.yaml"), "-o",
                                                       str(d / "g.tzb")], cli, {}),
        ("2 work", "realism --rollouts 65536", ["--rollouts", "65536"], realism, {}),
    ]
    with zipfile.ZipFile(base / "checkpoint.zip") as zin, \
            zipfile.ZipFile(d / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
        zout.writestr("padding", b"\0" * (256 * 1024 * 1024))
    with zipfile.ZipFile(base / "checkpoint.zip") as zin:
        data = json.loads(zin.read("data"))
        data["n_steps"] = 10**6
        with zipfile.ZipFile(d / "buffer.zip", "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                zout.writestr(info.filename, json.dumps(data) if info.filename == "data" else zin.read(info.filename))
    out += [
        ("2 work", "eval, zip entry declaring 1,000x the file", ["eval", str(d / "bomb.zip"), "--preset", "quick"],
         cli, {}),
        ("2 work", "eval, data n_steps=10**6 (a multi-GB buffer)", ["eval", str(d / "buffer.zip"), "--preset",
                                                                     "quick"], cli, {}),
    ]
    (d / "fifo").mkdir()
    os.mkfifo(d / "fifo" / "stuck.tzb")
    out.append(("2 work", "train --dataset with a FIFO *.tzb", ["train", "--dataset", str(d / "fifo"), "--out",
                                                                str(d / "r")], cli, {}))
    # 3. files written where they should not be
    victim = d / "victim.txt"
    victim.write_text("untouched\n")
    (d / "link.tzb").symlink_to(victim)
    out.append(("3 files", "maps build -o LINK", ["maps", "build", "grid_town", "-o", str(d / "link.tzb")], cli, {}))
    run = _copy_run(base, d, "progress_link")
    (run / "progress.jsonl").unlink()
    (run / "progress.jsonl").symlink_to(victim)
    out.append(("3 files", "resume, progress.jsonl a link", ["train", "--resume", str(run)], cli, {}))
    run = _copy_run(base, d, "pointer")
    (run / "checkpoints" / "latest").write_text("../..\n")
    out.append(("3 files", "resume, checkpoints/latest = ../..", ["train", "--resume", str(run)], cli, {}))
    # 4. silent acceptance
    run = _copy_run(base, d, "truncated")
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text[: text.index("\nsignals:\n") + 1])
    out.append(("4 silent", "resume, config.yaml truncated", ["train", "--resume", str(run)], cli, {}))
    (d / "one_point.net.xml").write_text(
        '<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/></edge>'
        '<edge id="B" from="b" to="c"><lane id="B_0" index="0" shape="10,0"/></edge></net>')
    out.append(("4 silent", "maps build, SUMO lane of one point", ["maps", "build", str(d / "one_point.net.xml"),
                                                                   "-o", str(d / "s.tzb")], cli, {}))
    # 6. one error path
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    m = build(procedural.generate("grid", 0, rows=1, cols=2))
    save(m, d / "ok.tzb")
    out += [
        ("6 errors", "maps build, JSON nested 100,000 deep", ["maps", "build", str(d / "deep.json"), "-o",
                                                              str(d / "j.tzb")], cli, {}),
        ("6 errors", "--config not UTF-8", ["train", "--config", str(d / "latin1.yaml"), "--out", str(d / "r")],
         cli, {}),
        ("6 errors", "--set rewards=[1, 2]", ["train", "--set", "rewards=[1, 2]", "--out", str(d / "r")], cli, {}),
        ("6 errors", "WORLD_SIZE=two", ["train", "--out", str(d / "r")], cli, {"WORLD_SIZE": "two"}),
    ]
    out += third_pass(d, base, victim)
    return out


def _tamper_learner(run: Path, how) -> None:
    import torch

    path = run / "checkpoints" / "iter_000002" / "rank0.pt"
    state = torch.load(path, weights_only=True)
    how(state)
    torch.save(state, path)


def third_pass(d: Path, base: Path, victim: Path) -> list[tuple[str, str, list[str], str, dict]]:
    """The third pass's surfaces (docs/hardening.md): every file the CLI writes, values that bound work,
    the learner state a resume or an eval takes."""
    import torch

    cli = "terrazero_env.cli"
    out: list[tuple[str, str, list[str], str, dict]] = []
    (d / "out.json").symlink_to(victim)
    (d / "out.gif").symlink_to(victim)
    os.mkfifo(d / "fifo.gif")
    out += [
        ("3 files", "eval --json LINK", ["eval", "--driver", "reference", "--episodes", "1", "--json",
                                         str(d / "out.json")], cli, {}),
        ("3 files", "render -o LINK", ["render", "--preset", "quick", "--steps", "1", "-o", str(d / "out.gif")],
         cli, {}),
        ("3 files", "eval --replay ''", ["eval", "--driver", "reference", "--episodes", "1", "--replay", ""], cli, {}),
        ("hang", "render -o FIFO", ["render", "--preset", "quick", "--steps", "1", "-o", str(d / "fifo.gif")], cli, {}),
        ("2 work", "--set lane_max_distance=10**9", ["render", "--preset", "quick", "--steps", "1", "-o",
                                                     str(d / "x.gif"), "--set", "lane_max_distance=1000000000"], cli, {}),
        ("6 errors", "--set a 5,000-digit integer", ["render", "--preset", "quick", "--steps", "1", "-o",
                                                     str(d / "x.gif"), "--set", "init.num_agents=" + "9" * 5000], cli, {}),
    ]
    run = _copy_run(base, d, "nan_weights")

    def nan_weight(state) -> None:
        name = next(iter(state["policy"]))
        state["policy"][name] = state["policy"][name].clone().fill_(float("nan"))

    _tamper_learner(run, nan_weight)
    out.append(("4 silent", "resume, NaN weights in rank0.pt", ["train", "--resume", str(run)], cli, {}))
    run = _copy_run(base, d, "nan_popart")
    _tamper_learner(run, lambda s: s.update(popart=(torch.tensor(float("nan")), *tuple(s["popart"])[1:])))
    out.append(("4 silent", "resume, NaN PopArt statistics", ["train", "--resume", str(run)], cli, {}))
    run = _copy_run(base, d, "huge_steps")
    _tamper_learner(run, lambda s: s.update(num_timesteps=10**30))
    out.append(("4 silent", "resume, 10**30 agent steps", ["train", "--resume", str(run)], cli, {}))
    from terrazero_env.agents.evaluate import load_checkpoint

    model = load_checkpoint(base / "checkpoint.zip")
    with torch.no_grad():
        next(model.policy.parameters()).fill_(float("nan"))
    model.save(d / "nan.zip")
    out.append(("4 silent", "eval, a checkpoint of NaN weights", ["eval", str(d / "nan.zip"), "--preset", "quick",
                                                                   "--episodes", "1"], cli, {}))
    out += _replay_cases(d)
    import gzip

    (d / "womd").mkdir()
    (d / "womd" / "big.tfrecord").write_bytes(gzip.compress(bytes(64 << 20), mtime=0))
    (d / "womd_json").mkdir()
    (d / "womd_json" / "scene.json").write_text(json.dumps({"name": "s", "metadata": [1, 2], "objects": [],
                                                              "roads": [], "tl_states": {}}))
    out += [
        ("2 work", "build-dataset, a gzip TFRecord (64 MiB of zeros)", ["maps", "build-dataset", str(d / "womd"),
                                                                        "-o", str(d / "ds1"), "--workers", "1"], cli, {}),
        ("6 errors", "build-dataset, a JSON metadata list", ["maps", "build-dataset", str(d / "womd_json"), "-o",
                                                            str(d / "ds2"), "--workers", "1"], cli, {}),
    ]
    return out


def _replay_cases(d: Path) -> list[tuple[str, str, list[str], str, dict]]:
    """Replays whose few KB declare gigabytes: 3,000 arrays over one block of zeros (the red team's
    24 GB), and a gzip stream that inflates past the reader's limit."""
    import gzip
    import struct

    from terrazero_env import engine as core
    from terrazero_env.config.io import load_config
    from terrazero_env.replay import MAGIC, MAX_RAW_BYTES, ReplayRecorder, save_replay

    e = core.Engine(load_config("quick").with_overrides(num_worlds=1))
    e.reset([0], [3])
    rec = ReplayRecorder(e)
    rec.capture()
    for _ in range(4):
        e.step(e.reference_actions())
        rec.capture()
    raw = gzip.decompress(save_replay(rec.replay(), d / "good.tzr").read_bytes())
    (hlen,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    header, body = json.loads(raw[start:start + hlen]), raw[start + hlen:]
    block = 8 << 20
    header["arrays"] += [{"name": f"junk{k}", "dtype": "i2", "shape": [block // 2], "offset": len(body),
                          "nbytes": block, "unit": 0.01, "delta": False} for k in range(3000)]
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((-(len(MAGIC) + 4 + len(hb))) % 8)
    (d / "overlap.tzr").write_bytes(gzip.compress(MAGIC + struct.pack("<I", len(hb)) + hb + body + bytes(block), mtime=0))
    (d / "bomb.tzr").write_bytes(gzip.compress(bytes(MAX_RAW_BYTES + (1 << 20)), compresslevel=9, mtime=0))
    cli = "terrazero_env.cli"
    return [
        ("2 work", "view, .tzr of 3,000 arrays over one block", ["view", str(d / "overlap.tzr"), "--html",
                                                                 str(d / "o.html")], cli, {}),
        ("2 work", "view, .tzr gzip bomb (129 MiB of zeros)", ["view", str(d / "bomb.tzr"), "--html",
                                                              str(d / "b.html")], cli, {}),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="benchmarks/results/hostile_inputs.json")
    args = ap.parse_args()
    import torch
    from terrazero_env.agents.train import train

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        base = d / "base"
        train(total_steps=2 * 2 * 4 * 16, out=base, num_worlds=2, checkpoint_every=1, progress="none",
              tensorboard=False, overrides={"train.policy": {"ego_hidden": 32, "entity_hidden": 32, "trunk": [64, 64]},
                                            "train.n_steps": 16})
        print(f"{'class':<9} {'case':<46} {'exit':>5} {'lines':>5} {'refusal (s)':>11} {'process (s)':>11} "
              f"{'peak RSS (MiB)':>14} {'over imports (MiB)':>18}")
        for cls, case, argv, module, env in cases(d, base):
            r = _run(argv, module, env)
            lines = len(r["stderr"].strip().splitlines())
            row = {"class": cls, "case": case, "exit": r["rc"], "lines": lines, "seconds": r["seconds"],
                   "process_s": r["process_s"],
                   "peak_mib": r["peak_kib"] / 1024, "over_imports_mib": (r["peak_kib"] - r["base_kib"]) / 1024,
                   "message": r["stderr"].strip()[:200]}
            rows.append(row)
            print(f"{cls:<9} {case:<46} {row['exit']!s:>5} {lines:>5} {row['seconds']:>11.3f} "
                  f"{row['process_s']:>11.2f} {row['peak_mib']:>14.0f} {row['over_imports_mib']:>18.1f}", flush=True)
        assert (d / "victim.txt").read_text() == "untouched\n", "a planted link was written through"
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(), "rows": rows},
                              indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
