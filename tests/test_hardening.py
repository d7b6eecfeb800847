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
