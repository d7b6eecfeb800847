"""The long-tail evaluation suite (``terrazero_env.evaluation.suites``, ``terrazero eval RUN --suite longtail``):
every family's scenes really hold its feature, scene seeds are deterministic, the predicates reject
features that are not in the ego's way, and the CLI prints a row per family."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from terrazero_env.agents import PPO
from terrazero_env.agents.suite_eval import evaluate_suite

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.cli import main
from terrazero_env.config import StaticKind
from terrazero_env.config.io import dump_config, load_config
from terrazero_env.evaluation.suites import (
    LONGTAIL,
    ROLE_IDM,
    ROLE_JAYWALKER,
    ROLE_STATIC,
    SUITES,
    accident_site,
    construction_zone,
    family_config,
    find_scenes,
    nudge_stopped_vehicle,
    overtake_oncoming,
    scene_seed,
)

torch.set_num_threads(1)
BASE = load_config("quick")
FAMILIES = {f.name: f for f in LONGTAIL}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as ``terrazero train`` leaves it: config.yaml and an (untrained) checkpoint.zip."""
    out = tmp_path_factory.mktemp("run")
    dump_config(BASE, out / "config.yaml")
    model = PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(BASE), n_steps=16, seed=0,
                policy_kwargs={"ego_hidden": 16, "entity_hidden": 16, "trunk": (32, 32)})
    model.save(out / "checkpoint.zip")
    return out


def test_role_codes_are_the_engines():
    assert core.ROLES[ROLE_STATIC] == "STATIC" and core.ROLES[ROLE_IDM] == "IDM"
    assert core.ROLES[ROLE_JAYWALKER] == "JAYWALKER"


def test_the_longtail_suite_has_the_eight_interplan_families():
    assert SUITES["longtail"] == LONGTAIL
    assert [f.name for f in LONGTAIL] == ["construction_zone", "accident_site", "jaywalker", "nudge_stopped_vehicle",
                                          "overtake_oncoming", "lane_change_low", "lane_change_medium",
                                          "lane_change_high"]


# ----------------------------------------------------------------- the feature is really there

def _ego_offsets(rows: np.ndarray, ego: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    e = rows[ego]
    d = np.hypot(rows["x"] - e["x"], rows["y"] - e["y"])
    front = (rows["x"] - e["x"]) * np.cos(e["heading"]) + (rows["y"] - e["y"]) * np.sin(e["heading"]) > 0
    return d, front, np.cos(rows["heading"] - e["heading"])


def _feature_present(name: str, rows: np.ndarray, ego: int) -> bool:
    """An oracle written apart from the predicates: the family's kind of actor lies in front of the ego
    within the family's reach (straight-line distance) and is not the ego."""
    d, front, cos_dh = _ego_offsets(rows, ego)
    near = front & (np.arange(len(rows)) != ego)
    vehicle = np.isin(rows["cls"], [0, 1, 2])
    if name == "construction_zone":
        return bool((near & np.isin(rows["kind"], [int(StaticKind.CONE), int(StaticKind.WORKER)]) & (d <= 31)).any())
    if name == "accident_site":
        return bool((near & (rows["kind"] == int(StaticKind.CRASHED)) & (d <= 31)).any())
    if name == "jaywalker":
        return bool((near & (rows["role"] == ROLE_JAYWALKER) & (d <= 26)).any())
    stopped = near & vehicle & (rows["role"] == ROLE_STATIC) & (rows["speed"] == 0) & (d <= 31)
    if name == "nudge_stopped_vehicle":
        return bool(stopped.any())
    if name == "overtake_oncoming":
        return bool(stopped.any() and (near & (rows["role"] == ROLE_IDM) & (cos_dh < -0.7) & (d <= 61)).any())
    lo = {"lane_change_low": 1, "lane_change_medium": 4, "lane_change_high": 8}[name]
    same = (rows["role"] == ROLE_IDM) & (cos_dh > 0.7) & (d <= 50)
    return int(same.sum()) >= lo


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_familys_scenes_hold_its_feature_when_reset_again(name):
    fam = FAMILIES[name]
    scenes, scanned = find_scenes(BASE, fam, 3, seed=5)
    assert len(scenes) == 3 and scanned >= 3
    cfg = family_config(BASE, fam).with_overrides(num_worlds=1)
    assert cfg.maps == (fam.map,) and cfg.obs == BASE.obs  # the run's observation layout stays
    e = core.Engine(cfg)
    K = cfg.slots_per_world
    hold = np.array([int(np.nonzero((e.action_values(c) == 0).all(axis=1))[0][0]) for c in range(5)])
    for s in scenes:
        e.reset([0], [s.seed])  # a fresh one-world engine: the scene depends on its seed only
        assert int(np.asarray(e.slot_agent)[s.slot]) == s.agent
        seen = _feature_present(name, np.array(e.agents[0, : e.num_agents(0)]), s.agent)
        for _ in range(fam.probe_steps):  # the jaywalker appears while the scene runs
            if seen:
                break
            e.step(hold[np.maximum(np.asarray(e.agent_type), 0)].astype(np.int32))
            seen = _feature_present(name, np.array(e.agents[0, : e.num_agents(0)]), s.agent)
        assert seen, f"{name}: seed {s.seed} slot {s.slot} has no feature near the ego"
        assert 0 <= s.slot < K


def test_the_eval_env_resets_a_scene_exactly_as_the_scan_did():
    fam = FAMILIES["construction_zone"]
    scenes, _ = find_scenes(BASE, fam, 2, seed=1)
    cfg = family_config(BASE, fam).with_overrides(num_worlds=2)
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
    e = core.Engine(cfg.with_overrides(num_worlds=1))
    try:
        venv.reset(seed=[s.seed for s in scenes])
        for w, s in enumerate(scenes):
            e.reset([0], [s.seed])
            n = e.num_agents(0)
            assert venv.engine.num_agents(w) == n
            assert np.array_equal(np.array(venv.engine.agents[w, :n]), np.array(e.agents[0, :n]))
    finally:
        venv.close()


def test_scene_seeds_are_deterministic_and_differ_between_families_and_suite_seeds():
    fam = FAMILIES["lane_change_medium"]
    assert find_scenes(BASE, fam, 4, seed=2) == find_scenes(BASE, fam, 4, seed=2)
    assert find_scenes(BASE, fam, 4, seed=2)[0] != find_scenes(BASE, fam, 4, seed=3)[0]
    assert scene_seed(0, "construction_zone", 0) != scene_seed(0, "accident_site", 0)
    assert all(0 <= scene_seed(7, f.name, i) < 2**63 for f in LONGTAIL for i in range(3))


def test_a_family_that_cannot_find_its_scenes_says_so():
    with pytest.raises(RuntimeError, match=r"construction_zone: only \d+ of 5 scenes qualified among 3 seeds"):
        find_scenes(BASE, FAMILIES["construction_zone"], 5, seed=0, batch=4, max_scan=3)


# ------------------------------------------------------------------ predicates on built scenes

def _scene(*agents: dict) -> np.ndarray:
    """A world's rows with the ``Engine.agents`` fields the predicates read; the ego first, at the
    origin heading +x with its goal 40 m ahead unless given."""
    dt = np.dtype([("x", "f8"), ("y", "f8"), ("heading", "f8"), ("speed", "f8"), ("goal_x", "f8"), ("goal_y", "f8"),
                   ("cls", "i4"), ("role", "i4"), ("kind", "i4")])
    ego = {"goal_x": 40.0, "role": 0}
    rows = np.zeros(len(agents) + 1, dt)
    for i, a in enumerate([ego, *agents]):
        for k, v in a.items():
            rows[i][k] = v
    return rows


CONE = {"role": ROLE_STATIC, "kind": int(StaticKind.CONE)}
STOPPED = {"role": ROLE_STATIC, "kind": int(StaticKind.NONE)}


def test_predicates_need_the_feature_ahead_near_the_axis_and_the_goal_beyond_it():
    assert construction_zone(_scene({**CONE, "x": 10.0, "y": 1.0}), 0)
    assert not construction_zone(_scene({**CONE, "x": -10.0}), 0)  # behind
    assert not construction_zone(_scene({**CONE, "x": 10.0, "y": 6.0}), 0)  # beside the road
    assert not construction_zone(_scene({**CONE, "x": 45.0}), 0)  # too far
    rows = _scene({**CONE, "x": 10.0})
    rows[0]["goal_x"] = 8.0  # the goal lies before the cone: the ego never has to pass it
    assert not construction_zone(rows, 0)
    assert accident_site(_scene({"role": ROLE_STATIC, "kind": int(StaticKind.CRASHED), "x": 20.0}), 0)
    assert not accident_site(_scene({**CONE, "x": 20.0}), 0)  # a cone is no crash
    assert nudge_stopped_vehicle(_scene({**STOPPED, "x": 15.0, "y": 0.5}), 0)
    assert not nudge_stopped_vehicle(_scene({**STOPPED, "x": 15.0, "y": 3.5}), 0)  # in the next lane
    assert not nudge_stopped_vehicle(_scene({**STOPPED, "x": 15.0, "kind": int(StaticKind.PARKED)}), 0)


def test_overtake_needs_oncoming_traffic_beside_the_stopped_vehicle():
    oncoming = {"role": ROLE_IDM, "x": 40.0, "y": 3.5, "heading": np.pi}
    assert overtake_oncoming(_scene({**STOPPED, "x": 15.0}, oncoming), 0)
    assert not overtake_oncoming(_scene({**STOPPED, "x": 15.0}, {**oncoming, "heading": 0.0}), 0)  # same way
    assert not overtake_oncoming(_scene({**STOPPED, "x": 15.0}, {**oncoming, "x": -20.0}), 0)  # already past
    assert not overtake_oncoming(_scene(oncoming), 0)  # nothing to overtake


def test_density_families_count_same_direction_traffic_with_a_neighbour_in_the_next_lane():
    low, high = FAMILIES["lane_change_low"].predicate, FAMILIES["lane_change_high"].predicate
    beside = {"role": ROLE_IDM, "x": 5.0, "y": 3.6}
    assert low(_scene(beside), 0) and not high(_scene(beside), 0)
    crowd = [{"role": ROLE_IDM, "x": 8.0 * i, "y": 3.6 * (i % 3 - 1)} for i in range(-4, 5)]
    assert high(_scene(*crowd), 0) and not low(_scene(*crowd), 0)
    assert not low(_scene({"role": ROLE_IDM, "x": 20.0}), 0)  # only a leader in the ego's own lane
    assert not low(_scene({**beside, "heading": np.pi}), 0)  # the other carriageway


# ------------------------------------------------------------------------------- evaluation, CLI

def test_suite_evaluation_is_deterministic_and_scores_every_scene(run_dir):
    from terrazero_env.agents.evaluate import load_checkpoint

    model = load_checkpoint(run_dir / "checkpoint.zip")
    a = evaluate_suite(model, BASE, scenes=2, seed=4, families=["lane_change_low", "accident_site"])
    b = evaluate_suite(model, BASE, scenes=2, seed=4, families=["lane_change_low", "accident_site"])
    assert a == b
    assert [r["family"] for r in a["families"]] == ["accident_site", "lane_change_low"]
    for r in a["families"]:
        scores = a["closed_loop"][r["family"]]["score"]
        assert len(scores) == 2 and all(0.0 <= s <= 100.0 for s in scores)
        assert r["score"] == pytest.approx(float(np.mean(scores)))
    assert a["mean"]["score"] == pytest.approx(np.mean([r["score"] for r in a["families"]]))
    with pytest.raises(ValueError, match="unknown longtail families"):
        evaluate_suite(model, BASE, scenes=1, families=["roundabout_chaos"])


@pytest.mark.slow
def test_cli_prints_a_row_per_family_and_writes_json(run_dir, tmp_path, capsys):
    out = tmp_path / "suite.json"
    assert main(["eval", str(run_dir), "--suite", "longtail", "--scenes", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for f in LONGTAIL:
        assert any(line.startswith(f.name + " ") for line in text.splitlines()), f"no row for {f.name}:\n{text}"
    assert any(line.startswith("mean over families") for line in text.splitlines())
    data = json.loads(out.read_text())
    assert [r["family"] for r in data["families"]] == [f.name for f in LONGTAIL]
    assert all(r["scenes"] == 2 and r["scanned"] >= 2 for r in data["families"])
    assert data["deterministic"] is True and data["suite"] == "longtail"


def test_bad_suite_name_is_an_argparse_error(run_dir, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(run_dir), "--suite", "shorttail"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--suite" in err and "invalid choice: 'shorttail'" in err and "longtail" in err


@pytest.mark.parametrize("argv, message", [
    (["--scenes", "3"], "--scenes sets the scenes per family of a --suite"),
    (["--suite", "longtail", "--vs", "x"], "does not combine with --vs"),
    (["--suite", "longtail", "--episodes", "5"], "does not combine with --episodes"),
])
def test_suite_options_that_do_not_fit_exit_2_naming_them(run_dir, capsys, argv, message):
    assert main(["eval", str(run_dir), *argv]) == 2
    assert message in capsys.readouterr().err


def test_family_row_means_the_episodes_and_clips_the_score_interval_to_its_range():
    from terrazero_env.evaluation.suites import family_row, format_suite, suite_mean

    fam = FAMILIES["accident_site"]
    closed = {"score": [0.0, 0.0, 0.0, 60.0], "no_at_fault_collision": [1, 0, 0, 1],
              "drivable_area_compliance": [1] * 4, "ego_progress": [0.5, 0.1, 0.2, 1.0], "goal_reached": [0, 0, 0, 1]}
    per = {"events": {"collision": [False, True, True, False], "offroad": [False] * 4}}
    row = family_row(fam, 31, per, closed)
    assert row["score"] == 15.0 and row["scenes"] == 4 and row["scanned"] == 31
    assert row["score_ci"][0] == 0.0 and 15.0 < row["score_ci"][1] <= 100.0  # the raw t bound is below 0
    assert row["collision"] == 0.5 and row["no_at_fault_collision"] == 0.5 and row["ego_progress"] == 0.45
    mean = suite_mean([row, {**row, "score": 35.0, "collision": 0.0}])
    assert mean["score"] == 25.0 and mean["collision"] == 0.25 and mean["scenes"] == 8
    table = format_suite([row], mean)
    assert table.splitlines()[2].split()[:4] == ["accident_site", "4", "31", "15.0"]


def test_cli_prints_the_row_of_each_family_and_the_mean(run_dir, capsys, monkeypatch):
    # A one-family stand-in for the suite keeps this fast; the slow test above runs all eight.
    monkeypatch.setitem(SUITES, "longtail", (FAMILIES["lane_change_low"],))
    assert main(["eval", str(run_dir), "--suite", "longtail", "--scenes", "2", "--seed", "9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "1 families x 2 scenes, seed 9, deterministic actions" in lines[0]
    row = next(ln for ln in lines if ln.startswith("lane_change_low "))
    assert row.split()[1] == "2" and 0.0 <= float(row.split()[3]) <= 100.0
    assert any(ln.startswith("mean over families") and ln.split()[3] == "2" for ln in lines)
