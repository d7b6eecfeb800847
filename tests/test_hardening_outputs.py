"""Third hardening pass, the CLI's outputs and the values that enter the API: every file a command
writes goes through ``foundation.safe_files`` (a planted link, a FIFO, a folder or an empty name is
refused before any work, and the write itself is atomic), and values that bound work or that numbers
overflow on are checked where they enter (``lane_max_distance``, scene coordinates, vector-env counts,
a 5,000-digit integer in ``--set``, a checkpoint's non-finite weights, a realism policy that drives
nothing). Each refusal is one line naming the option or field."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import terrazero_env
from terrazero_env.cli import main
from terrazero_env.config.io import load_config
from terrazero_env.foundation.safe_files import UnsafeFileError, atomic_path, atomic_write, check_write_target


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "elsewhere" / "victim.txt"
    v.parent.mkdir()
    v.write_text("untouched\n")
    return v


OUTPUTS = {  # case: (argv with OUT for the planted path, option the refusal names)
    "eval --json": (["eval", "--driver", "reference", "--episodes", "1", "--json", "OUT"], "--json"),
    "eval --video": (["eval", "--driver", "reference", "--episodes", "1", "--video", "OUT"], "--video"),
    "eval --filmstrip": (["eval", "--driver", "reference", "--episodes", "1", "--filmstrip", "OUT"], "--filmstrip"),
    "render -o": (["render", "--preset", "quick", "--steps", "1", "-o", "OUT"], "-o"),
    "render --replay": (["render", "--preset", "quick", "--steps", "1", "--replay", "OUT"], "--replay"),
}
SUFFIX = {"eval --json": ".json", "eval --video": ".gif", "eval --filmstrip": ".png", "render -o": ".gif",
          "render --replay": ".tzr"}


@pytest.mark.parametrize("case", list(OUTPUTS))
def test_no_command_writes_through_a_planted_link(case, tmp_path, victim, capsys):
    argv, option = OUTPUTS[case]
    out = tmp_path / f"out{SUFFIX[case]}"
    out.symlink_to(victim)
    assert main([str(out) if a == "OUT" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0] and "symbolic link" in err[0], err
    assert victim.read_text() == "untouched\n" and out.is_symlink()


@pytest.mark.parametrize("case", ["eval --json", "render -o"])
def test_a_fifo_target_is_refused_without_blocking(case, tmp_path):
    argv, option = OUTPUTS[case]
    fifo = tmp_path / f"fifo{SUFFIX[case]}"
    os.mkfifo(fifo)
    code = f"import sys; from terrazero_env.cli import main; sys.exit(main({[str(fifo) if a == 'OUT' else a for a in argv]!r}))"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: blocked on a FIFO")
    assert r.returncode == 2 and "FIFO, not a regular file" in r.stderr, r.stderr[-2000:]


def test_a_folder_option_needs_a_name_and_a_folder(tmp_path, victim, capsys):
    assert main(["eval", "--driver", "reference", "--episodes", "1", "--replay", ""]) == 2
    assert "--replay: a folder name is needed" in capsys.readouterr().err
    link = tmp_path / "replays"
    link.symlink_to(victim.parent)
    assert main(["eval", "--driver", "reference", "--episodes", "1", "--replay", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert main(["eval", "--driver", "reference", "--episodes", "1", "--replay", str(victim)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]


def test_the_safe_write_path_itself(tmp_path, victim):
    target = tmp_path / "a.png"
    with atomic_path(target, "image") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"x")
    assert target.read_bytes() == b"x"
    with pytest.raises(RuntimeError), atomic_path(target, "image") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert target.read_bytes() == b"x" and sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "elsewhere"]
    for bad, fragment in (("", "a file name is needed"), (str(tmp_path), "a folder"), (str(tmp_path) + "/", "a file name")):
        with pytest.raises(UnsafeFileError, match=fragment):
            check_write_target(bad, "x")
    link = tmp_path / "l.json"
    link.symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        atomic_write(link, "{}")
    assert victim.read_text() == "untouched\n"


def test_lane_max_distance_is_bounded_so_the_lane_search_ends():
    with pytest.raises(ValueError, match=r"lane_max_distance: a number of metres in \(0.0, 100.0\], got 1000000000"):
        load_config("quick", lane_max_distance=10**9)
    assert load_config("quick", lane_max_distance=100).lane_max_distance == 100


@pytest.mark.parametrize("call, fragment", [
    (lambda: terrazero_env.make_vec(2.7), "make_vec num_worlds: an integer, got 2.7"),
    (lambda: terrazero_env.make_vec(True), "make_vec num_worlds: an integer, got True"),
    (lambda: terrazero_env.make_vec(0), "make_vec num_worlds"),
    (lambda: terrazero_env.make_vec(2, num_workers=-1), "make_vec num_workers"),
    (lambda: terrazero_env.make_vec(2, num_workers=1.5), "make_vec num_workers: an integer"),
])
def test_vector_env_counts_are_integers(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_gym_make_vec_refuses_a_fractional_count():
    import gymnasium as gym

    with pytest.raises(ValueError, match="make_vec num_envs: an integer, got 2.5"):
        gym.make_vec("TerraZero/Drive-v0", num_envs=2.5)


def test_a_5000_digit_integer_names_the_setting(capsys):
    assert main(["render", "--preset", "quick", "--steps", "1", "-o", "x.gif", "--set",
                 "init.num_agents=" + "9" * 5000]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("terrazero: error: --set init.num_agents:"), err


def test_a_checkpoint_with_non_finite_weights_is_refused_naming_the_file(tmp_path):
    torch = pytest.importorskip("torch")
    from terrazero_env.agents import PPO
    from terrazero_env.agents.evaluate import load_checkpoint

    venv = terrazero_env.make_vec(2, "quick")
    model = PPO("DeepSetsPolicy", venv, n_steps=8, seed=0,
                policy_kwargs={"ego_hidden": 8, "entity_hidden": 8, "trunk": (16,)})
    with torch.no_grad():
        next(model.policy.parameters()).fill_(float("nan"))
    path = tmp_path / "nan.zip"
    model.save(path)
    venv.close()
    with pytest.raises(ValueError, match=rf"checkpoint {path}: the policy's .* holds NaN or infinite values"):
        load_checkpoint(path)


def test_view_forwards_the_names_it_may_answer_to(monkeypatch, tmp_path):
    """``terrazero view --allow-host NAME`` reaches the server's Host check; the wait is cut short."""
    import threading

    from terrazero_env import viewer

    seen = {}

    class _Server:
        server_address = ("127.0.0.1", 1)

        def shutdown(self):
            seen["shutdown"] = True

        def server_close(self):
            seen["closed"] = True

    def fake_serve(path, port, host, background, allowed_hosts):
        seen.update(host=host, allowed=list(allowed_hosts))
        return _Server()

    def interrupted(self, timeout=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(viewer, "serve", fake_serve)
    monkeypatch.setattr(threading.Event, "wait", interrupted)
    assert main(["view", str(tmp_path), "--allow-host", "box.lan", "--allow-host", "box"]) == 0
    assert seen == {"host": "127.0.0.1", "allowed": ["box.lan", "box"], "shutdown": True, "closed": True}


def test_a_json_map_over_its_size_limit_is_refused_before_it_is_read(tmp_path):
    """64 MiB bounds the parse at about 0.8 GiB (Python's JSON objects take 9-10x the text)."""
    from terrazero_env.maps import jsonmap
    from terrazero_env.maps.sources import load_source

    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(jsonmap.MAX_JSON_BYTES + 1)  # sparse: no bytes written
    with pytest.raises(ValueError, match="big.json"):
        load_source(str(big))
