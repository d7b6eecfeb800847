"""Hostile inputs from shared files and folders, each run in a child process with a timeout and a
memory cap, so a crash (a segfault, SIGBUS), a hang or a runaway allocation fails the test and the
test names the input instead of taking the run down.

Classes (docs/hardening.md, second pass): engine states whose counts and indices exceed the engine's
capacity; maps truncated on disk while in use; work no limit bounds (YAML expansion, size-like
settings, FIFOs in dataset folders); files written through planted links; silent acceptance (negative
indices, duplicate worlds, a run whose config differs from its checkpoint's); a second thread on a
multi-process engine; the CLI's one-line refusals.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TIMEOUT = 60.0
MEMORY_CAP = 3 * 1024**3  # bytes of address space


def _cap() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_child(code: str, *, timeout: float = TIMEOUT, args: list[str] | None = None, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` (or ``python -m ...`` when ``args`` is given) in a fresh interpreter under the cap;
    a signal death or a timeout fails the calling test with the input named."""
    argv = [sys.executable, *(args if args is not None else ["-c", textwrap.dedent(code)])]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=_cap, cwd=cwd,
                           env={**os.environ, "PYTHONWARNINGS": "default", **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: no exit within {timeout} s for {argv[1:]!r:.400}")
    if r.returncode < 0:
        pytest.fail(f"crash: signal {-r.returncode} for {argv[1:]!r:.400}\n{r.stderr[-2000:]}")
    return r


# --------------------------------------------------------------------------------------------------
# 1. engine states: every count and index checked against the engine's capacity before any write

STATE_CASES = [  # (entry, how to corrupt it, fragment of the refusal)
    ("buffer/n_agents", "s[k][0] = 10_000", "holds 10000 agents, outside [0, 12]"),
    ("buffer/n_agents", "s[k][1] = -1", "holds -1 agents"),
    ("buffer/slot_agent", "s[k][0] = 11", "slot 0 points to agent 11"),
    ("buffer/slot_agent", "s[k][1] = -5", "points to agent -5"),
    ("buffer/slot_nact", "s[k][:] = 5000", "actions"),
    ("buffer/prev_np", "s[k][:] = 10**6", "entity counts must lie in [0,"),
    ("buffer/grid_next", "s[k][:] = 99", "agent indices must lie in [-1, 12)"),
    ("buffer/t", "s[k][0] = -7", "step -7"),
    ("agents", "set_field(s, 'cls', 99)", "class 99"),
    ("agents", "set_field(s, 'slot', 40)", "slot 40"),
    ("agents", "set_field(s, 'role', -2)", "role -2"),
    ("agents", "set_field(s, 'idm_mode', 7)", "IDM mode (7)"),
    ("agents", "set_field(s, 'kind', 100)", "kind (100)"),
    ("agents", "set_field(s, 'x', float('nan'))", "not finite"),
    ("signal/stage", "s[k][:] = 50", "stage 50"),
    ("signal/barrier", "s[k][:] = 9", "barrier group 9"),
    ("signal/sl", "s[k][:] = 200", "state 200"),
    ("signal/timer", "s[k][:] = -1e300", "timer"),
]


@pytest.mark.parametrize("entry,corrupt,fragment", STATE_CASES, ids=[f"{e}:{c}" for e, c, _ in STATE_CASES])
def test_a_state_beyond_the_engines_capacity_is_refused_before_anything_is_written(entry, corrupt, fragment):
    """A snapshot as a run folder's ``rank0.pt`` carries it: a count or index past the capacity raises
    ValueError naming the entry, the engine's state is byte-identical, and stepping on works."""
    r = run_child(f"""
        import numpy as np
        from terrazero_env import load_config
        from terrazero_env.engine import Engine
        e = Engine(load_config("quick", num_worlds=2, max_agents_per_world=12, slots_per_world=3,
                               **{{"init.idm_fraction": 0.5, "signals.controller": "nema"}}))
        e.reset()
        e.step()
        view = e.agents  # field offsets of the agent rows
        def set_field(s, name, value):
            rows = s["agents"].view(view.dtype).reshape(view.shape)
            rows[name][0, 0] = value
        s = e.get_state()
        k = {entry!r}
        {corrupt}
        before = {{k: v.tobytes() for k, v in e.get_state().items()}}
        try:
            e.set_state(s)
        except ValueError as exc:
            assert {{k: v.tobytes() for k, v in e.get_state().items()}} == before, "a refused state was written"
            e.step()
            print("REFUSED", exc)
        else:
            print("ACCEPTED")
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "REFUSED" in r.stdout and f"'{entry}'" in r.stdout and fragment in r.stdout, r.stdout


def test_a_state_of_a_log_agent_without_a_track_is_refused():
    r = run_child("""
        from terrazero_env import load_config
        from terrazero_env.engine import Engine
        e = Engine(load_config("quick", num_worlds=1, max_agents_per_world=8, slots_per_world=2))
        e.reset()
        s = e.get_state()
        rows = s["agents"].view(e.agents.dtype).reshape(e.agents.shape)
        rows["role"][0, 1] = 2  # ROLE_LOG on a map with no tracks
        try:
            e.set_state(s)
        except ValueError as exc:
            print("REFUSED", exc)
    """)
    assert r.returncode == 0 and "REFUSED" in r.stdout and "replays track" in r.stdout, (r.stdout, r.stderr)


def test_a_good_state_round_trips_bit_for_bit_after_the_checks():
    r = run_child("""
        import numpy as np
        from terrazero_env import load_config
        from terrazero_env.engine import Engine
        for ctrl in ("christmas", "nema", "round_robin"):
            cfg = load_config("quick", num_worlds=2, **{"init.idm_fraction": 0.5, "signals.controller": ctrl})
            a, b = Engine(cfg), Engine(cfg)
            a.reset()
            for _ in range(3):
                a.step()
            b.set_state(a.get_state())
            for _ in range(4):
                a.step(); b.step()
            assert np.array_equal(a.observations, b.observations), ctrl
        print("OK")
    """, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]


def test_a_map_truncated_on_disk_while_a_dataset_holds_it_stays_readable(tmp_path):
    """A map is a private copy of its file: truncating the file afterwards cannot fault the process
    (a memory map would raise SIGBUS on the next access); ``check`` then names the truncated file."""
    r = run_child(f"""
        import shutil, os
        import numpy as np
        import terrazero_env
        from terrazero_env.maps import asset_path
        from terrazero_env.maps.dataset import Dataset
        from terrazero_env.maps.terrabin import read_sections, TerrabinError
        d = {str(tmp_path)!r}
        p = os.path.join(d, "town.tzb")
        shutil.copy(asset_path("grid_town"), p)
        ds = Dataset(d)
        m = ds[0]
        arrays, _ = read_sections(p)
        venv = terrazero_env.make_vec(num_worlds=1, preset="quick", dataset=ds)
        venv.reset(seed=0)
        os.truncate(p, 100)
        total = sum(float(np.asarray(a, np.float64).sum()) for a in arrays.values())
        for _ in range(3):
            venv.step(venv.action_space.sample())
        assert ds[0] is m
        try:
            ds.check()
        except TerrabinError as exc:
            print("REFUSED", exc)
        venv.close()
    """, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "REFUSED" in r.stdout and "town.tzb" in r.stdout and "truncated" in r.stdout, r.stdout


# --------------------------------------------------------------------------------------------------
# run folders shared with others: tampered checkpoints, links and pointers, edited run files

TINY = {"train.policy": {"ego_hidden": 32, "entity_hidden": 32, "trunk": [64, 64]}, "train.n_steps": 16}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished two-iteration run (checkpoints iter_000001 and iter_000002)."""
    import torch
    from terrazero_env.agents.train import train

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("runs") / "base"
    train(total_steps=2 * 2 * 4 * 16, out=out, num_worlds=2, checkpoint_every=1, overrides=TINY, progress="none",
          tensorboard=False)
    return out


def _tamper_state(run: Path, key: str, value: int) -> None:
    """Overwrite one engine-state entry of ``rank0.pt`` (tensors and plain data, loaded as safe)."""
    import numpy as np
    import torch
    from terrazero_env.agents import checkpoint as ckpt

    path = run / "checkpoints" / "iter_000002" / "rank0.pt"
    state = torch.load(path, weights_only=True)
    found = []

    def walk(node):
        if isinstance(node, dict):
            if key in node:
                arr = ckpt.from_plain(node[key]).copy()
                arr.reshape(-1)[0] = value
                node[key] = ckpt.to_plain(np.ascontiguousarray(arr))
                found.append(True)
            for v in node.values():
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(state)
    assert found, f"{key} is not in the checkpoint"
    torch.save(state, path)


def _link(target: Path, at: Path) -> None:
    at.unlink()
    at.symlink_to(target)


def _truncate_at(path: Path, key: str) -> None:
    """Cut a YAML file before its top-level ``key``: what is left parses, the rest falls to defaults."""
    text = path.read_text()
    path.write_text(text[: text.index(f"\n{key}\n") + 1])


def _huge_n_steps(run: Path) -> None:
    import yaml

    d = yaml.safe_load((run / "train.yaml").read_text())
    (d["ppo"] if isinstance(d.get("ppo"), dict) else d)["n_steps"] = 10**9
    (run / "train.yaml").write_text(yaml.safe_dump(d))


def _point_latest_at_a_link(run: Path, victim: Path) -> None:
    (run / "checkpoints" / "iter_000009").symlink_to(victim.parent)
    (run / "checkpoints" / "latest").write_text("iter_000009\n")


def _tamper_learner(run: Path, how) -> None:
    """Change the learner's part of ``rank0.pt`` (weights, PopArt, counts) with ``how(state)``."""
    import torch

    path = run / "checkpoints" / "iter_000002" / "rank0.pt"
    state = torch.load(path, weights_only=True)
    how(state)
    torch.save(state, path)


def _nan_weight(state) -> None:
    name = next(iter(state["policy"]))
    state["policy"][name] = state["policy"][name].clone().fill_(float("nan"))


def _nan_popart(state) -> None:
    import torch

    state["popart"] = (torch.tensor(float("nan")), *tuple(state["popart"])[1:])


TAMPER = {  # case: (how, fragment of the one-line refusal)
    "agent count beyond capacity in rank0.pt": (lambda r, v: _tamper_state(r, "buffer/n_agents", 10**6),
                                                "engine state 'buffer/n_agents'"),
    "slot index beyond capacity in rank0.pt": (lambda r, v: _tamper_state(r, "buffer/slot_agent", 999),
                                               "engine state 'buffer/slot_agent'"),
    "progress.jsonl is a link": (lambda r, v: _link(v, r / "progress.jsonl"), "progress.jsonl is a symbolic link"),
    "config.yaml is a link": (lambda r, v: _link(v, r / "config.yaml"), "config.yaml is a symbolic link"),
    "latest points above the run": (lambda r, v: (r / "checkpoints" / "latest").write_text("../..\n"),
                                    "checkpoint pointer"),
    "latest holds an absolute path": (lambda r, v: (r / "checkpoints" / "latest").write_text(f"{v.parent}\n"),
                                      "checkpoint pointer"),
    "latest is a link": (lambda r, v: _link(v, r / "checkpoints" / "latest"), "latest is a symbolic link"),
    "checkpoint folder is a link": (lambda r, v: _point_latest_at_a_link(r, v), "iter_000009 is a symbolic link"),
    "config.yaml truncated": (lambda r, v: _truncate_at(r / "config.yaml", "signals:"), "differs from the config saved"),
    "train.yaml empty": (lambda r, v: (r / "train.yaml").write_text(""), "train.yaml: expected a mapping"),
    "train.yaml n_steps of 10**9": (lambda r, v: _huge_n_steps(r), "train.n_steps: an integer in [1, 1000000]"),
    "train.yaml a list": (lambda r, v: (r / "train.yaml").write_text("[1, 2]\n"), "train.yaml: expected a mapping"),
    "NaN weights in rank0.pt": (lambda r, v: _tamper_learner(r, _nan_weight), "policy."),
    "NaN PopArt statistics in rank0.pt": (lambda r, v: _tamper_learner(r, _nan_popart), "popart"),
    "1e30 agent steps in rank0.pt": (lambda r, v: _tamper_learner(r, lambda s: s.update(num_timesteps=10**30)),
                                     "num_timesteps must be an integer in [0, 2**53]"),
    "a float step count in rank0.pt": (lambda r, v: _tamper_learner(r, lambda s: s.update(num_timesteps=1e30)),
                                       "num_timesteps must be an integer"),
    "train.yaml an alias bomb": (lambda r, v: (r / "train.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef"))),
        "expands to more than"),
}


@pytest.mark.parametrize("case", list(TAMPER))
def test_a_tampered_run_folder_is_refused_in_one_line_and_writes_nothing_outside(base_run, tmp_path, case):
    """``terrazero train --resume`` on a run folder someone else could write: the tampered file, link
    or pointer is refused with one line naming it (exit 2, no traceback), and the file a planted
    link points to is left untouched."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(base_run, run, symlinks=True)
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("untouched\n")
    how, fragment = TAMPER[case]
    how(run, victim)
    r = run_child("", args=["-m", "terrazero_env.cli", "train", "--resume", str(run), "--total-steps", "512"],
                  timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("terrazero: error:"), r.stderr[-3000:]
    assert fragment in lines[0], lines[0]
    assert victim.read_text() == "untouched\n"


def test_an_untampered_run_folder_still_resumes(base_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(base_run, run, symlinks=True)
    r = run_child("", args=["-m", "terrazero_env.cli", "train", "--resume", str(run), "--total-steps", "384",
                            "--progress", "none", "--no-tensorboard"], timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_000003"
    assert len((run / "progress.jsonl").read_text().splitlines()) == 3


# --------------------------------------------------------------------------------------------------
# 2. work no limit bounded: size-like settings and declared sizes refused before any allocation

YAML_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef"))
"""Six anchors and 50 aliases (under the alias limit) expanding to 10**6 scalars."""

SIZE_CASES = {  # case: (code run in the child, fragment of the refusal)
    "observation radius 1e5 m": ("load_config('quick', **{'obs.road_radius': 1e5})", "ObsConfig.road_radius"),
    "partner radius 1e5 m": ("load_config('quick', **{'obs.partner_radius': 1e5})", "ObsConfig.partner_radius"),
    "road segment length 1e-4 m": ("load_config('quick', **{'obs.road_segment_length': 1e-4})",
                                   "ObsConfig.road_segment_length"),
    "road-index cell 1e-3 m": ("core.road_map('grid_town', cell_size=1e-3)", "RoadMap cell_size"),
    "road-index candidates 1e9": ("core.road_map('grid_town', obs_max_candidates=10**9)", "obs_max_candidates"),
    "grid of 150 x 150 blocks": ("procedural.generate('grid', 0, rows=150, cols=150)", "rows and cols"),
    "highway of 1e7 m": ("procedural.generate('highway', 0, length=1e7)", "length"),
    "roundabout of 1e6 m": ("procedural.generate('roundabout', 0, radius=1e6)", "radius"),
    "realism of 65536 rollouts": ("realism_table('usa_us101', rollouts=65536)", "realism rollouts"),
    "YAML bomb under the alias limit": (f"safe_yaml.load({YAML_BOMB!r}, 'doc')", "expands to more than"),
    "YAML nested 10,000 deep": ("safe_yaml.load('[' * 10000 + ']' * 10000, 'doc')", "nested deeper"),
    "YAML alias cycle": ("safe_yaml.load('a: &a [*a]', 'doc')", "contains it"),
}


@pytest.mark.parametrize("case", list(SIZE_CASES))
def test_a_size_like_setting_beyond_its_bound_is_refused_before_allocating(case):
    """Refused with ValueError naming the setting, within a second of work and well under the cap."""
    code, fragment = SIZE_CASES[case]
    r = run_child(f"""
        import resource, time
        from terrazero_env import load_config
        from terrazero_env.foundation import safe_yaml
        from terrazero_env import engine as core
        from terrazero_env.maps import procedural
        from terrazero_env.evaluation.realism import realism_table
        t = time.perf_counter()
        try:
            {code}
        except (ValueError, TypeError) as e:
            dt = time.perf_counter() - t
            print("REFUSED", round(dt, 3), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, e)
    """, timeout=30)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("REFUSED") and fragment in r.stdout, r.stdout
    _, seconds, maxrss_kib, _ = r.stdout.split(" ", 3)
    assert float(seconds) < 1.0 and int(maxrss_kib) < 600 * 1024, r.stdout


def test_a_fifo_in_a_dataset_folder_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "stuck.tzb")
    r = run_child(f"""
        from terrazero_env.maps.dataset import Dataset
        try:
            Dataset({str(tmp_path)!r})
        except ValueError as e:
            print("REFUSED", e)
    """, timeout=20)
    assert "REFUSED" in r.stdout and "stuck.tzb" in r.stdout and "FIFO" in r.stdout, (r.stdout, r.stderr)


def test_safe_files_read_only_regular_files_within_their_limit(tmp_path):
    from terrazero_env.foundation.safe_files import UnsafeFileError, load_json, read_text

    big = tmp_path / "big.json"
    big.write_text("[" * 100 + "]" * 100)
    with pytest.raises(UnsafeFileError, match="over the 10-byte limit"):
        read_text(big, 10)
    with pytest.raises(UnsafeFileError, match="nested deeper than 64"):
        load_json(big.read_text(), "big.json")
    assert load_json('{"a": "[[[[[[[[[[[[[[[["}', "s", max_depth=2) == {"a": "[[[[[[[[[[[[[[[["}
    (tmp_path / "bad.txt").write_bytes(b"ok \xff\xfe")
    with pytest.raises(UnsafeFileError, match=r"bad.txt: not UTF-8 text \(byte 0xff at offset 3\)"):
        read_text(tmp_path / "bad.txt", 100)
    with pytest.raises(UnsafeFileError, match="a folder"):
        read_text(tmp_path, 100)


# --------------------------------------------------------------------------------------------------
# 3. files written where they should not be: unpredictable temporary names, links refused

def test_maps_build_neither_follows_a_planted_temporary_link_nor_writes_through_a_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    out = tmp_path / "out.tzb"
    (tmp_path / "out.tzb.tmp").symlink_to(victim)  # the old fixed temporary name
    r = run_child("", args=["-m", "terrazero_env.cli", "maps", "build", "grid_town", "-o", str(out)])
    assert r.returncode == 0 and out.is_file() and not out.is_symlink(), r.stderr
    assert victim.read_text() == "untouched\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tzb", "out.tzb.tmp", "victim.txt"]  # no leftovers
    out.unlink()
    out.symlink_to(victim)
    r = run_child("", args=["-m", "terrazero_env.cli", "maps", "build", "grid_town", "-o", str(out)])
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "symbolic link" in r.stderr, r.stderr
    assert victim.read_text() == "untouched\n"


def test_atomic_write_leaves_no_temporary_file_on_failure_and_keeps_the_old_content(tmp_path):
    from terrazero_env.foundation.safe_files import atomic_writer

    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_writer(target) as f:
        f.write(b"half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


# --------------------------------------------------------------------------------------------------
# model zips: declared sizes checked against the file before anything is decompressed

def _rewrite_zip(src: Path, dst: Path, **replace: bytes) -> None:
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, replace.pop(info.filename, zin.read(info.filename)))
        for name, data in replace.items():
            zout.writestr(name, data)


def test_a_zip_bomb_entry_is_refused_from_its_declared_size(base_run, tmp_path):
    bomb = tmp_path / "bomb.zip"
    _rewrite_zip(base_run / "checkpoint.zip", bomb, padding=b"\0" * (64 * 1024 * 1024))
    assert bomb.stat().st_size < 2 * 1024 * 1024
    r = run_child("", args=["-m", "terrazero_env.cli", "eval", str(bomb), "--episodes", "1", "--preset", "quick"],
                  timeout=120)
    assert r.returncode == 2 and "zip entry 'padding' declares" in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0


def test_a_data_entry_asking_for_a_huge_rollout_buffer_is_refused(base_run, tmp_path):
    import json
    import zipfile

    with zipfile.ZipFile(base_run / "checkpoint.zip") as z:
        data = json.loads(z.read("data"))
    data["n_steps"] = 10**6
    bad = tmp_path / "big_buffer.zip"
    _rewrite_zip(base_run / "checkpoint.zip", bad, data=json.dumps(data).encode())
    r = run_child("", args=["-m", "terrazero_env.cli", "eval", str(bad), "--episodes", "1", "--preset", "quick"],
                  timeout=120)
    assert r.returncode == 2 and "rollout buffer of" in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0


# --------------------------------------------------------------------------------------------------
# 4. silent acceptance: negative indices, duplicate worlds, degenerate converter geometry

@pytest.mark.parametrize("call", ["e.signal_states(-1)", "e.stop_line_states(-1)", "e.num_agents(-1)",
                                  "e.num_agents(2)", "e.set_stop_line_state(-1, 0, 0, 1.0)",
                                  "e.agent_states(-1)", "e.reset([0, 0])", "e.reset([1, 0, 1], [1, 2, 3])",
                                  "e.set_ego_driver([0, 0], [1, 1], 'idm')", "e.hand_to_idm([1, 1], [0, 0])"])
def test_negative_or_repeated_world_indices_are_refused(call):
    r = run_child(f"""
        from terrazero_env import load_config
        from terrazero_env.engine import Engine
        e = Engine(load_config("quick", num_worlds=2))
        e.reset()
        before = e.get_state()
        try:
            {call}
        except ValueError as exc:
            after = e.get_state()
            assert all((before[k] == after[k]).all() for k in before)
            print("REFUSED", exc)
    """)
    assert "REFUSED" in r.stdout and "world" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_a_sumo_lane_with_a_one_point_shape_is_refused_naming_it(tmp_path):
    from terrazero_env.maps.builder import MapValidationError
    from terrazero_env.maps.convert.sumo import convert

    p = tmp_path / "one_point.net.xml"
    p.write_text('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/></edge>'
                 '<edge id="B" from="b" to="c"><lane id="B_0" index="0" shape="10,0"/></edge></net>')
    with pytest.raises(MapValidationError, match="lane 'B_0'.*fewer than two distinct points"):
        convert(p)


# --------------------------------------------------------------------------------------------------
# 5. a second thread on a multi-process engine

def test_a_second_thread_on_a_multiprocess_engine_gets_a_clear_error_and_nothing_hangs():
    r = run_child("""
        import threading
        import numpy as np
        from terrazero_env import load_config
        from terrazero_env.envs.workers import MultiProcessEngine
        if __name__ == "__main__":
            e = MultiProcessEngine(load_config("quick", num_worlds=4), 2)
            try:
                e.reset()
                e._busy.acquire()  # as if another thread were inside a call
                for call in (e.step, e.reset, lambda: e.agent_states(0)):
                    try:
                        call()
                    except RuntimeError as exc:
                        assert "another thread" in str(exc)
                    else:
                        raise AssertionError("a call got through a busy engine")
                e._busy.release()
                errors, done = [], []
                def worker():
                    for _ in range(40):
                        try:
                            e.step(np.zeros(e.actions.shape, np.int32))
                            done.append(1)
                        except RuntimeError as exc:
                            errors.append(str(exc))
                threads = [threading.Thread(target=worker) for _ in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(60)
                assert not any(t.is_alive() for t in threads), "a thread hung"
                assert all("another thread" in m for m in errors), errors[:3]
                e.step()  # still usable
                print("OK", len(done), len(errors))
            finally:
                e.close()
    """, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("OK"), (r.stdout, r.stderr[-2000:])


# --------------------------------------------------------------------------------------------------
# 6. one error path: every refusal of the CLI and python -m entry points is one line, exit 2

@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Hostile files of every kind the CLI reads."""
    import json

    from terrazero_env.maps import build, procedural, save

    d = tmp_path_factory.mktemp("hostile")
    (d / "bomb.yaml").write_text(YAML_BOMB)
    (d / "deep.yaml").write_text("a: " + "[" * 500 + "]" * 500 + "\n")
    (d / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (d / "list.yaml").write_text("- 1\n- 2\n")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "list.json").write_text("[1, 2]")
    (d / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    m = build(procedural.generate("grid", 0, rows=1, cols=2))
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["x"] = {}
        node = node["x"]
    save(type(m)(**{**vars(m), "metadata": deep}) if hasattr(m, "__dict__") else m, d / "deep_meta.tzb")
    (d / "list_manifest.json").write_text(json.dumps([{"scenarios": 1}]))
    (d / "ds_list").mkdir()
    save(m, d / "ds_list" / "a.tzb")
    (d / "ds_list" / "manifest.json").write_text("[1, 2, 3]")
    (d / "ds_fifo").mkdir()
    os.mkfifo(d / "ds_fifo" / "stuck.tzb")
    return d


CLI_CASES = [  # (argv, environment, fragment the one line must contain)
    (["train", "--set", "rewards=[1, 2]"], {}, "rewards: expected a mapping"),
    (["train", "--set", "obs=3"], {}, "obs: expected a mapping"),
    (["train", "--set", "init={a: [1"], {}, "--set init: not valid YAML"),
    (["train", "--set", "dt=" + "[" * 300 + "]" * 300], {}, "--set dt: YAML nested deeper"),
    (["train", "--set", "dt=" + YAML_BOMB.replace("\n", ", ").join("{}")], {}, "--set dt"),
    (["train", "--config", "{d}/bomb.yaml"], {}, "bomb.yaml: expands to more than"),
    (["train", "--config", "{d}/deep.yaml"], {}, "deep.yaml: YAML nested deeper"),
    (["train", "--config", "{d}/latin1.yaml"], {}, "latin1.yaml: not UTF-8 text"),
    (["train", "--config", "{d}/list.yaml"], {}, "list.yaml: expected a mapping"),
    (["maps", "build", "{d}/deep.json", "-o", "{d}/o.tzb"], {}, "deep.json: JSON nested deeper"),
    (["maps", "build", "{d}/list.json", "-o", "{d}/o.tzb"], {}, "list.json: a JSON map is an object"),
    (["maps", "build", "{d}/latin1.json", "-o", "{d}/o.tzb"], {}, "latin1.json: not UTF-8 text"),
    (["maps", "inspect", "{d}/deep_meta.tzb"], {}, "deep_meta.tzb: section 'meta': JSON nested deeper"),
    (["train", "--dataset", "{d}/list_manifest.json"], {}, "list_manifest.json: needs a non-empty 'scenarios'"),
    (["train", "--dataset", "{d}/ds_list"], {}, "manifest.json: needs an object"),
    (["train", "--dataset", "{d}/ds_fifo"], {}, "stuck.tzb: a FIFO"),
    (["maps", "inspect", "{d}/ds_fifo/stuck.tzb"], {}, "stuck.tzb: not a regular file"),
    (["train", "--total-steps", "64"], {"WORLD_SIZE": "two"}, "environment variable WORLD_SIZE='two'"),
    (["train", "--total-steps", "64"], {"WORLD_SIZE": "0"}, "environment variable WORLD_SIZE=0"),
    (["train", "--total-steps", "64"], {"LOCAL_RANK": "-3"}, "environment variable LOCAL_RANK=-3"),
]


@pytest.mark.parametrize("argv,env,fragment", CLI_CASES, ids=[" ".join(a)[:60] for a, _, _ in CLI_CASES])
def test_a_hostile_cli_input_is_one_line_naming_it_and_exit_2(hostile, tmp_path, argv, env, fragment):
    args = [a.replace("{d}", str(hostile)) for a in argv]
    if args[0] == "train":
        args += ["--out", str(tmp_path / "run")]
    r = run_child("", args=["-m", "terrazero_env.cli", *args], env=env, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("terrazero: error:") and fragment in lines[0], lines[0]
    assert not (tmp_path / "run").exists()


REALISM_CASES = [
    (["--rollouts", "65536"], "argument --rollouts: must lie in [1, 1_024]"),
    (["--rollouts", "many"], "argument --rollouts: expected an integer"),
    (["--history-steps", "1"], "argument --history-steps"),
    (["--future-steps", "-5"], "argument --future-steps"),
    (["--seed", "-1"], "argument --seed"),
    (["--map", "nosuch"], "no bundled map named 'nosuch'"),
    (["--map", "grid_town"], "has no logged tracks"),
    (["--bogus"], "unrecognized arguments"),
]


@pytest.mark.parametrize("argv,fragment", REALISM_CASES, ids=[" ".join(a) for a, _ in REALISM_CASES])
def test_every_bad_argument_of_the_realism_module_is_one_line_and_exit_2(argv, fragment):
    r = run_child("", args=["-m", "terrazero_env.evaluation.realism", *argv], timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("python -m terrazero_env.evaluation.realism: error:") and fragment in lines[0], lines[0]
