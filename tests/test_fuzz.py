"""Property-based fuzzing of every input a user or a shared file controls: .tzb files (mutated under
valid checksums), JSON maps, config overrides, actions, seeds and scripted scenes (``Engine.set_scene``).

The property is the same everywhere: an input is either accepted and runs, or refused with a
ValueError/TypeError whose message is a sentence; the process never crashes, hangs or raises
anything else. Each case runs in a child process (tests/fuzz_sandbox.py) so a segfault in the
engine is reported as a failure naming the input. The default tier runs a few hundred cases;
``-m slow`` runs many more of the same strategies.
"""

from __future__ import annotations

import math
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from terrazero_env.maps import asset_path

HERE = Path(__file__).parent
TIMEOUT = 120.0  # seconds for one case: a hang is a finding too
MEMORY_CAP = 4 * 1024**3  # bytes of address space for the child: a runaway allocation is a finding too


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


class Sandbox:
    """A child process that runs probes; restarted after a crash (which the caller reports)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fuzz_sandbox.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     preexec_fn=_cap_memory)

    def run(self, probe: str, payload) -> tuple[str, str]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        data = pickle.dumps((probe, payload))
        self.proc.stdin.write(struct.pack("<I", len(data)) + data)
        self.proc.stdin.flush()
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(TIMEOUT):
            self.proc.kill()
            self.proc = None
            return "hang", f"no answer within {TIMEOUT} s"
        head = self.proc.stdout.read(4)
        if len(head) < 4:
            code = self.proc.wait()
            self.proc = None
            return "crash", f"the process died (exit code {code})"
        (n,) = struct.unpack("<I", head)
        return pickle.loads(self.proc.stdout.read(n))

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(10)
            self.proc = None


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox()
    yield sb
    sb.close()


def _names_the_input(probe: str, payload, message: str) -> bool:
    """Whether a refusal names what was wrong: the config field, the action, the seed, the map element."""
    low = message.lower()
    if probe == "probe_config":
        return any(k.split(".")[-1] in message for k in payload)
    if probe in ("probe_actions", "probe_vector_actions"):
        return "action" in low
    if probe == "probe_seed":
        return "seed" in low
    if probe == "probe_scene":
        return "agents" in low
    if probe == "probe_state":
        return "engine state" in low
    return True  # maps: MapValidationError/TerrabinError messages name the element or the file


def check(sandbox: Sandbox, probe: str, payload) -> str:
    status, detail = sandbox.run(probe, payload)
    assert status in ("ok", "refused"), f"{probe}({payload!r:.300}) -> {status}: {detail}"
    if status == "refused":
        # A refusal is a sentence naming the problem, not a bare repr or a message from deep inside.
        message = detail.split(": ", 1)[1] if ": " in detail else ""
        assert len(message) >= 10 and _names_the_input(probe, payload, message), (
            f"{probe}({payload!r:.300}) refused with an unclear message: {detail!r}")
    return status


def tiers(probe: str, strategy, default: int, slow: int):
    """Two property tests of ``probe`` over ``strategy``: ``default`` examples in the default tier and
    ``slow`` under ``-m slow``."""
    common = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

    def make(n: int):
        @settings(max_examples=n, **common)
        @given(strategy)
        def test(sandbox, payload):
            assert check(sandbox, probe, payload) in ("ok", "refused")

        return test

    return make(default), pytest.mark.slow(make(slow))


# --------------------------------------------------------------------------------------------------
# .tzb mutations under valid checksums

SOURCE = asset_path("grid_town").read_bytes()


def _sections(data: bytes) -> list[tuple[str, str, int, int, int]]:
    count = struct.unpack_from("<I", data, 16)[0]
    table = struct.unpack_from("<Q", data, 20)[0]
    out = []
    for i in range(count):
        e = table + 128 * i
        name = bytes(data[e : e + 48]).rstrip(b"\0").decode()
        dtype = bytes(data[e + 48 : e + 56]).rstrip(b"\0").decode()
        offset, nbytes = struct.unpack_from("<QQ", data, e + 92)
        out.append((name, dtype, offset, nbytes, e))
    return out


SECTIONS = [s for s in _sections(SOURCE) if s[0] != "meta" and s[3] > 0]


def reseal(data: bytearray) -> bytes:
    """Recompute every checksum so that only the contents are wrong."""
    for _, _, offset, nbytes, e in _sections(bytes(data)):
        struct.pack_into("<I", data, e + 108, zlib.crc32(bytes(data[offset : offset + nbytes])))
    count = struct.unpack_from("<I", data, 16)[0]
    table = struct.unpack_from("<Q", data, 20)[0]
    struct.pack_into("<I", data, 36, zlib.crc32(bytes(data[table : table + 128 * count])))
    struct.pack_into("<I", data, 60, zlib.crc32(bytes(data[:60])))
    return bytes(data)


_SPECIAL = {"f": [np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0, 5e4],
            "i": [-1, -2**31, 2**31 - 1, 10**6, 0, 1], "u": [255, 0, 7], "b": [2, 255]}


@st.composite
def mutated_tzb(draw) -> bytes:
    data = bytearray(SOURCE)
    for _ in range(draw(st.integers(1, 3))):
        name, dtype, offset, nbytes, _ = draw(st.sampled_from(SECTIONS))
        dt = np.dtype(dtype)
        n = nbytes // dt.itemsize
        arr = np.frombuffer(bytes(data[offset : offset + nbytes]), dtype=dt).copy()
        k = draw(st.integers(0, n - 1))
        if draw(st.booleans()):
            arr[k] = draw(st.sampled_from(_SPECIAL.get(dt.kind, [0])))
        else:
            raw = bytearray(arr.tobytes())
            raw[draw(st.integers(0, len(raw) - 1))] ^= 1 << draw(st.integers(0, 7))
            arr = np.frombuffer(bytes(raw), dtype=dt)
        data[offset : offset + nbytes] = arr.tobytes()
    return reseal(data)


test_mutated_tzb_is_refused_or_runs, test_mutated_tzb_is_refused_or_runs_many = tiers("probe_tzb", mutated_tzb(), 60, 600)


def test_resealing_keeps_the_checksums_valid():
    from terrazero_env.maps.terrabin import read_sections

    data = bytearray(SOURCE)
    name, _, offset, _, _ = SECTIONS[0]
    data[offset] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".tzb") as f:
            f.write(bytes(data))
            f.flush()
            read_sections(f.name)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".tzb") as f:
        f.write(reseal(data))
        f.flush()
        read_sections(f.name)  # no error: only the contents are wrong


# --------------------------------------------------------------------------------------------------
# JSON maps

finite = st.floats(-200, 200, allow_nan=False)
any_float = st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf, 1e12]))
point = st.lists(any_float, min_size=2, max_size=3)


@st.composite
def json_maps(draw) -> dict:
    n = draw(st.integers(1, 4))
    lanes = []
    for _ in range(n):
        pts = draw(st.lists(point, min_size=1, max_size=5))
        lanes.append({"centerline": pts,
                      "successors": draw(st.lists(st.integers(-2, n + 1), max_size=2)),
                      "width": draw(st.one_of(st.floats(0.5, 5), st.sampled_from([0.0, -1.0, math.nan]))),
                      "type": draw(st.sampled_from(["vehicle", "bike", "bus", "tram", 7]))})
    doc = {"name": "fuzz", "handedness": draw(st.sampled_from(["right", "left", "middle"])), "lanes": lanes}
    if draw(st.booleans()):
        doc["road_edges"] = [draw(st.lists(point, min_size=1, max_size=4))]
    if draw(st.booleans()):
        doc["stop_lines"] = [{"points": draw(st.lists(point, min_size=2, max_size=2)),
                              "lanes": draw(st.lists(st.integers(-1, n), max_size=2))}]
    return doc


test_json_map_is_refused_or_runs, test_json_map_is_refused_or_runs_many = tiers("probe_json_map", json_maps(), 60, 500)


def test_a_valid_json_map_runs(sandbox):
    doc = {"lanes": [{"centerline": [[0, 0], [100, 0]], "successors": [1]},
                     {"centerline": [[100, 0], [100, 10], [0, 10], [0, 0.1]], "successors": [0]}]}
    assert check(sandbox, "probe_json_map", doc) == "ok"


# --------------------------------------------------------------------------------------------------
# config overrides

KEYS = ["num_worlds", "slots_per_world", "max_agents_per_world", "episode_length", "dt", "init.num_agents",
        "init.placement_tries", "init.spawn_clearance", "init.idm_fraction", "init.goal_distance",
        "init.initial_speed", "init.class_weights", "init.mode", "init.p_random", "init.kinematic_range",
        "obs.dtype", "obs.goal_scale", "obs.speed_scale", "obs.noise_std", "rewards.collision",
        "rewards.goal_progress", "signals.controller", "wrong_way_angle", "classes.car.length",
        "consequences.collision", "idm.time_headway", "road_users.parked", "road_users.lane_block",
        "road_users.idm_modes"]
values = st.one_of(
    st.integers(-3, 40), st.sampled_from([0, 2**31, 2**64, 10**30, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.booleans(), st.none(),
    st.lists(st.one_of(st.integers(-2, 50), st.floats(-5, 50), st.text(max_size=2)), max_size=3),
    st.sampled_from(["random", "log", "nema", "float16", "stop", "remove", {"car": 1.0}]),
)


@st.composite
def overrides(draw) -> dict:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    return {k: draw(values) for k in keys}


test_config_override_is_refused_or_runs, test_config_override_is_refused_or_runs_many = tiers(
    "probe_config", overrides(), 80, 800)


# --------------------------------------------------------------------------------------------------
# actions and seeds

actions = st.one_of(
    st.integers(-5, 20), st.sampled_from([2**32 + 1, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True), st.text(max_size=3), st.none(), st.booleans(),
    st.lists(st.integers(-3, 15), max_size=12), st.lists(st.floats(allow_nan=True), max_size=4),
)

test_single_agent_action_is_refused_or_runs, test_single_agent_action_is_refused_or_runs_many = tiers(
    "probe_actions", actions, 40, 400)

vec_actions = st.one_of(actions, st.lists(st.integers(-2, 14), min_size=8, max_size=8).map(np.array),
                        st.lists(st.floats(allow_nan=True), min_size=8, max_size=8).map(np.array))
test_vector_action_is_refused_or_runs, test_vector_action_is_refused_or_runs_many = tiers(
    "probe_vector_actions", vec_actions, 30, 300)

seeds = st.one_of(st.integers(-5, 2**70), st.floats(allow_nan=True), st.text(max_size=3), st.booleans(),
                  st.none(), st.sampled_from([np.int64(3), np.uint64(2**64 - 1), np.float64(5.0)]))
test_seed_is_refused_or_reproduces, test_seed_is_refused_or_reproduces_many = tiers("probe_seed", seeds, 30, 300)

# --------------------------------------------------------------------------------------------------
# scripted scenes (Engine.set_scene): accepted and stepped, or refused leaving the state as it was

scene_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-300, 300), st.integers(-3, 8),
    st.sampled_from([2**40, -(2**63), 10**30]), st.booleans(), st.none(), st.text(max_size=3),
    st.lists(st.floats(-5, 5), max_size=5), st.lists(st.floats(allow_nan=True), max_size=5),
    st.dictionaries(st.sampled_from(["collision", "goal_reached", "nope"]), st.floats(allow_nan=True), max_size=2),
)
SCENE_KEYS = ["cls", "x", "y", "heading", "z", "speed", "length", "width", "height", "controlled", "idm",
              "idm_mode", "kind", "goal", "goal_hidden", "kin", "rw", "junk"]


@st.composite
def scene_specs(draw) -> list:
    agents = []
    for _ in range(draw(st.integers(0, 4))):
        spec = {"cls": draw(st.integers(0, 4)), "x": draw(st.floats(-100, 100)), "y": draw(st.floats(-100, 100)),
                "heading": draw(st.floats(-4, 4))}
        for key in draw(st.lists(st.sampled_from(SCENE_KEYS), max_size=3, unique=True)):
            spec[key] = draw(scene_values)
        agents.append(spec)
    return agents


test_scene_is_refused_or_runs, test_scene_is_refused_or_runs_many = tiers("probe_scene", scene_specs(), 40, 400)


# --------------------------------------------------------------------------------------------------
# engine snapshots (Engine.set_state): a run folder's rank0.pt carries one, loaded as plain data

STATE_KEYS = ["agents", "buffer/n_agents", "buffer/slot_agent", "buffer/slot_nact", "buffer/t", "buffer/prev_np",
              "buffer/prev_nr", "buffer/prev_nt", "buffer/grid_head", "buffer/grid_next", "buffer/plan_state",
              "buffer/ped_state", "signal/stage", "signal/barrier", "signal/phase", "signal/perm", "signal/head",
              "signal/sl", "signal/timer", "signal/sl_timer"]
state_values = st.one_of(st.integers(-3, 40), st.sampled_from([2**31 - 1, -(2**31), 1000, 10**6]),
                         st.sampled_from([float("nan"), float("inf"), -1e300, 1e300, -1e7]))


@st.composite
def state_mutations(draw):
    muts = [(draw(st.sampled_from(STATE_KEYS)), draw(st.integers(0, 10**6)), draw(state_values))
            for _ in range(draw(st.integers(1, 3)))]
    return draw(st.sampled_from(["christmas", "nema", "round_robin"])), muts


test_engine_state_is_refused_or_runs, test_engine_state_is_refused_or_runs_many = tiers(
    "probe_state", state_mutations(), 150, 1500)


def test_the_sandbox_reports_a_crash_and_an_unexpected_error_as_findings():
    """The harness itself: a child that dies is a 'crash' and a stray exception 'unexpected', never a pass."""
    sb = Sandbox()
    try:
        assert sb.run("probe_config", {"num_worlds": 1})[0] == "ok"
        assert sb.run("probe_abort", None) == ("crash", f"the process died (exit code {-6})")
        assert sb.run("probe_config", {"num_worlds": 1})[0] == "ok"  # a fresh child
        status, detail = sb.run("probe_seed", object())
        assert status in ("refused", "unexpected")
        with pytest.raises(AssertionError, match="crash"):
            check(sb, "probe_abort", None)
    finally:
        sb.close()
