"""Neighbour queries through the agent grid answer as a scan over every agent does
(``EngineConfig.neighbour_search``; cyext/neighbours.pxd)."""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config.io import load_config


def _rollout(mode: str, preset: str, steps: int, **over) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cfg = load_config(preset, **{"neighbour_search": mode, "consequences.collision": "none",
                                 "consequences.offroad": "none", **over})
    e = core.Engine(cfg)
    e.reset(seeds=np.arange(cfg.num_worlds) + 3)
    rng = np.random.default_rng(0)
    obs, rew, met = [e.observations.copy()], [], []
    for _ in range(steps):
        actions = rng.integers(0, e.num_actions(0), e.actions.shape).astype(np.int32) * (e.agent_type >= 0)
        e.step(actions)
        obs.append(e.observations.copy())
        rew.append(e.rewards.copy())
        # the judged metrics (time to collision, gaps, contacts) and, through the observations, where
        # the IDM traffic went: its leader search and lane changes ask the neighbour grid too
        met.append(e.episode_metrics.copy())
    return np.stack(obs), np.stack(rew), np.stack(met)


@pytest.mark.parametrize("preset, over", [
    # dense worlds of the planner mix (IDM traffic, static actors, pedestrians) on a small map
    ("planner", {"num_worlds": 2, "maps": ["grid_town"], "init.num_agents": [60, 60], "max_agents_per_world": 128,
                 "obs.partner_radius": 80.0}),
    # every IDM vehicle a planner vehicle (its neighbour selection, tracked offsets and lane changes)
    ("planner", {"num_worlds": 2, "maps": ["carla_town01"], "init.num_agents": [120, 120], "max_agents_per_world": 200,
                 "road_users.planner_fraction": [1.0, 1.0]}),
    # the quick preset with partners dropped out at random: the dropout draws follow the same order
    ("quick", {"init.num_agents": [16, 16], "obs.slot_dropout": 0.3}),
])
def test_grid_scan_and_auto_give_the_same_observations(preset, over):
    steps = 30
    scan_obs, scan_rew, scan_met = _rollout("scan", preset, steps, **over)
    assert np.abs(scan_obs).sum() > 0
    for mode in ("grid", "auto"):
        obs, rew, met = _rollout(mode, preset, steps, **over)
        np.testing.assert_array_equal(obs, scan_obs, err_msg=mode)
        np.testing.assert_array_equal(rew, scan_rew, err_msg=mode)
        np.testing.assert_array_equal(met, scan_met, err_msg=mode)


def test_partners_are_observed_in_a_dense_world():
    # The grid path is exercised with partners present (not only empty slots compared).
    cfg = load_config("planner", num_worlds=1, maps=["grid_town"], neighbour_search="grid",
                      **{"init.num_agents": [60, 60], "max_agents_per_world": 128})
    e = core.Engine(cfg)
    e.reset(seeds=[1])
    g = e.obs_layout.groups["partners"]
    partners = e.observations[:, g.slice].reshape(len(e.observations), g.count, g.width)
    assert (np.abs(partners).sum(axis=2) > 0).sum(axis=1).max() >= 3


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="neighbour_search"):
        load_config("quick", neighbour_search="kdtree")
