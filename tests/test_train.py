"""The main job (``terrazero train``): data-parallel updates under torchrun (gloo, two processes on
loopback), exact resume, clean stops, and configuration errors before any work."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from terrazero_env.agents import PPO  # noqa: E402
from terrazero_env.agents.checkpoint import from_plain, latest_checkpoint  # noqa: E402
from terrazero_env.agents.train import train  # noqa: E402

from terrazero_env import cli  # noqa: E402

HERE = Path(__file__).resolve().parent
TINY = {"train.policy": {"ego_hidden": 32, "entity_hidden": 32, "trunk": [64, 64]}, "train.n_steps": 16}
TINY_ARGS = ["--set", "train.policy={ego_hidden: 32, entity_hidden: 32, trunk: [64, 64]}", "--set", "train.n_steps=16"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _load(path: Path) -> dict:
    # Checkpoints hold tensors and plain data only: the safe loader reads them.
    return from_plain(torch.load(path, weights_only=True))


def _assert_same_tensors(a: dict, b: dict, atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=atol, msg=k)


# --------------------------------------------------------------------------- data parallelism


@pytest.mark.slow
def test_two_rank_update_over_halves_equals_one_rank_update_over_the_whole(tmp_path):
    _torchrun([str(HERE / "dist_worker.py"), str(tmp_path)])
    r0, r1 = _load(tmp_path / "rank0.pt"), _load(tmp_path / "rank1.pt")
    assert 0.5 < r0["valid"] < 0.9  # the rollout holds padding, which both learners must skip
    _assert_same_tensors(r0["part"], r1["part"])  # ranks agree exactly
    _assert_same_tensors(r0["part"], r0["whole"], atol=1e-5)  # and agree with one learner on the union
    moved = max(float((r0["part"][k].float() - r1["whole"][k].float()).abs().max()) for k in r0["part"])
    assert moved < 1e-5
    # PopArt statistics: identical on both ranks and equal to one update with every target of the union.
    assert r0["popart_part"] == r1["popart_part"]
    t = r0["targets"]
    step = 1.0 - 0.9997 ** t.size
    expected = (step * t.mean(), (1 - step) * 1.0 + step * (t * t).mean())  # from mean 0, second moment 1
    np.testing.assert_allclose(r0["popart_part"], expected, rtol=1e-9)
    np.testing.assert_allclose(r0["popart_whole"], expected, rtol=1e-9)


@pytest.mark.slow
def test_training_under_torchrun_keeps_the_ranks_identical(tmp_path):
    out = tmp_path / "run"
    steps = 2 * 4 * 16 * 3  # two ranks of one world (four slots), 16-step rollouts, three iterations
    proc = _torchrun(["-m", "terrazero_env.agents.launch", "--worlds", "1", "--total-steps", str(steps),
                      "--out", str(out), "--checkpoint-every", "1", "--progress", "lines", "--no-tensorboard",
                      *TINY_ARGS])
    assert "2 rank(s)" in proc.stdout and "finished at iteration 3" in proc.stdout
    folder = latest_checkpoint(out)
    assert folder.name == "iter_000003"
    r0, r1 = _load(folder / "rank0.pt"), _load(folder / "rank1.pt")
    _assert_same_tensors(r0["policy"], r1["policy"])
    assert r0["popart"] == r1["popart"] and tuple(r0["popart"][:2]) != (0.0, 1.0)
    m0, m1 = r0["optimizer"]["state"], r1["optimizer"]["state"]
    for k in m0:
        torch.testing.assert_close(m0[k]["exp_avg_sq"], m1[k]["exp_avg_sq"], rtol=0, atol=0)
    # ... while each rank drove its own worlds.
    assert not np.array_equal(r0["last_obs"], r1["last_obs"])
    assert r0["num_timesteps"] == r1["num_timesteps"] == steps // 2
    assert len((out / "progress.jsonl").read_text().splitlines()) == 3  # rank 0 alone writes the log


@pytest.mark.slow
def test_two_node_rendezvous_on_one_host_ends_with_identical_parameters(tmp_path):
    """Two ``torchrun --nnodes 2 --rdzv-backend c10d`` invocations on localhost (one rank each, as two
    machines would run them) meet at the rendezvous, train together and end with the same policy,
    optimizer moments and PopArt statistics on both nodes."""
    out = tmp_path / "run"
    steps = 2 * 4 * 16 * 2
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-node-test",
           "-m", "terrazero_env.agents.launch", "--worlds", "1", "--total-steps", str(steps), "--out", str(out),
           "--checkpoint-every", "1", "--progress", "none", "--no-tensorboard", *TINY_ARGS]
    nodes = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for _ in range(2)]
    try:
        logs = [node.communicate(timeout=300)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
    assert all(node.returncode == 0 for node in nodes), "\n".join(log[-3000:] for log in logs)
    assert sum("2 rank(s)" in log for log in logs) == 1  # rank 0's node reports both ranks
    folder = latest_checkpoint(out)
    assert folder.name == "iter_000002"
    r0, r1 = _load(folder / "rank0.pt"), _load(folder / "rank1.pt")
    assert r0["world_size"] == r1["world_size"] == 2
    _assert_same_tensors(r0["policy"], r1["policy"])
    assert r0["popart"] == r1["popart"]
    for k, m in r0["optimizer"]["state"].items():
        torch.testing.assert_close(m["exp_avg"], r1["optimizer"]["state"][k]["exp_avg"], rtol=0, atol=0)
    assert not np.array_equal(r0["last_obs"], r1["last_obs"])  # each node drove its own worlds


# -------------------------------------------------------------------------- resume and stops


def test_resume_reproduces_the_uninterrupted_runs_next_updates_exactly(tmp_path):
    torch.set_num_threads(1)
    a, b = tmp_path / "a", tmp_path / "b"
    steps = 2 * 4 * 16 * 3
    train(total_steps=steps, out=a, num_worlds=2, checkpoint_every=1, overrides=TINY, progress="none",
          tensorboard=False)
    # A copy of the run as it stood after iteration 1, as if it had been stopped there.
    shutil.copytree(a, b)
    for later in ("iter_000002", "iter_000003"):
        shutil.rmtree(b / "checkpoints" / later)
    (b / "checkpoints" / "latest").write_text("iter_000001\n")
    train(out=b, resume=True, checkpoint_every=1, progress="none", tensorboard=False)
    for it in ("iter_000002", "iter_000003"):
        ra, rb = _load(a / "checkpoints" / it / "rank0.pt"), _load(b / "checkpoints" / it / "rank0.pt")
        _assert_same_tensors(ra["policy"], rb["policy"])
        assert ra["popart"] == rb["popart"] and ra["num_timesteps"] == rb["num_timesteps"]
        np.testing.assert_array_equal(ra["last_obs"], rb["last_obs"])
        # The array path's own episode statistics (running returns, lengths, count) resume too.
        for k in ("returns", "lengths", "count"):
            np.testing.assert_array_equal(ra["episode_tally"][k], rb["episode_tally"][k])
        assert [(e["r"], e["l"]) for e in ra["ep_info_buffer"]] == [(e["r"], e["l"]) for e in rb["ep_info_buffer"]]
    first = _load(a / "checkpoints" / "iter_000001" / "rank0.pt")["policy"]
    assert any(not torch.equal(first[k], ra["policy"][k]) for k in first)  # the updates did move
    PPO.load(b / "checkpoint.zip")


def test_a_resume_reads_the_latest_checkpoint_pointer_once(tmp_path, monkeypatch, capsys):
    """Both entries resolve the run folder's ``checkpoints/latest`` once per resume and pass the folder
    along (settings, the config check, the rank state); the end of the run names the checkpoint it
    wrote itself, also when a stop request ends it (its ``checkpoint.zip`` is that checkpoint's model)."""
    from terrazero_env.agents import checkpoint as ckpt

    torch.set_num_threads(1)
    out = tmp_path / "run"
    per_iteration = 2 * 4 * 16
    train(total_steps=per_iteration * 2, out=out, num_worlds=2, checkpoint_every=1, overrides=TINY, progress="none",
          tensorboard=False)
    real, calls = ckpt.latest_checkpoint, []

    def counted(run_dir):
        calls.append(Path(run_dir))
        return real(run_dir)

    monkeypatch.setattr(ckpt, "latest_checkpoint", counted)
    final = train(out=out, resume=True, total_steps=per_iteration * 10, checkpoint_every=5, progress="none",
                  tensorboard=False, _stop_after=3)
    assert calls == [out]
    assert "stopped at iteration 3" in capsys.readouterr().out
    assert final.read_bytes() == (out / "checkpoints" / "iter_000003" / "model.zip").read_bytes()
    calls.clear()
    assert cli.main(["train", "--resume", str(out), "--total-steps", str(per_iteration * 4), "--progress", "none",
                     "--no-tensorboard"]) == 0
    assert calls == [out]
    assert f"saved {final} and {out / 'checkpoints' / 'iter_000004'}" in capsys.readouterr().out
    assert real(out).name == "iter_000004"


def test_a_stop_request_saves_a_checkpoint_and_ends_cleanly(tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    final = train(total_steps=10**7, out=out, num_worlds=2, checkpoint_every=100, overrides=TINY, progress="none",
                  tensorboard=False, _stop_after=2)
    assert latest_checkpoint(out).name == "iter_000002"
    model = PPO.load(final)
    assert model.num_timesteps == 2 * 2 * 4 * 16


@pytest.mark.slow
def test_sigint_saves_a_checkpoint_and_exits_zero(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "terrazero_env.agents.launch", "--total-steps", "10000000", "--out", str(out),
           "--worlds", "2", "--progress", "lines", "--no-tensorboard", "--torch-threads", "1", *TINY_ARGS]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("["):  # the first iteration's progress line
                break
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    assert "SIGINT" in stderr and "stopped at iteration" in stdout
    assert latest_checkpoint(out) is not None and (out / "checkpoint.zip").is_file()


# ----------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize("override, message", [
    ("init.num_agents=[0, 1]", "InitConfig.num_agents"),
    ("train.bogus=1", "bogus"),
    ("train.threshold=2", "train.threshold"),
    ("train.sampler=sometimes", "train.sampler"),
    ("maps=[nowhere.tzb]", "nowhere.tzb"),
])
def test_a_bad_setting_stops_before_any_work_naming_it(tmp_path, capsys, override, message):
    out = tmp_path / "run"
    assert cli.main(["train", "--out", str(out), "--set", override]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("key", ["", " ", "train.", "rewards..collision"])
def test_an_empty_setting_name_is_one_error_from_every_entry(tmp_path, capsys, key):
    """``--set`` has one parser (``config.io.parse_set_options``) and override names one check
    (``config.io.override_name``): ``terrazero train``, the torchrun module and ``train(overrides=...)``
    refuse an empty name (or an empty dotted part) before any work, in the same words."""
    from terrazero_env.agents import launch

    out = tmp_path / "run"
    fragment = "has an empty setting name (KEY=VALUE needs a dotted KEY"
    assert cli.main(["train", "--out", str(out), "--set", f"{key}=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"terrazero: error: --set '{key}=1' {fragment} such as rewards.collision or train.ent_coef)"
    assert launch.main(["--out", str(out), "--set", f"{key}=1"]) == 2
    assert fragment in capsys.readouterr().err
    with pytest.raises(ValueError, match=re.escape(fragment)):
        train(out=out, overrides={key: 1}, progress="none", tensorboard=False)
    assert not out.exists()


def test_resume_of_a_folder_without_a_checkpoint_is_refused(tmp_path, capsys):
    assert cli.main(["train", "--resume", str(tmp_path)]) == 2
    assert "cannot resume" in capsys.readouterr().err


def test_array_path_reports_the_same_episode_statistics_as_the_adapter_path(tmp_path):
    """The per-iteration statistics of the array path (episode counts, returns and goal / collision
    / off-road rates tallied from arrays) equal those the SB3 adapter's per-slot infos give."""
    torch.set_num_threads(1)
    rows = {}
    for flag in (True, False):
        out = tmp_path / str(flag)
        train(total_steps=2 * 4 * 16 * 6, out=out, num_worlds=2, overrides={**TINY, "train.array_path": flag},
              progress="none", tensorboard=False, checkpoint_every=100)
        rows[flag] = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert sum(r["episodes"] for r in rows[True]) > 0
    keys = ("iteration", "agent_steps", "episodes", "return", "goal", "collision", "offroad", "mu")
    for fast, slow in zip(rows[True], rows[False], strict=True):
        for k in keys:
            if slow[k] is None:  # no episode ended in that iteration
                assert fast[k] is None, k
            else:
                assert fast[k] == pytest.approx(slow[k], rel=1e-6, abs=1e-9), k
