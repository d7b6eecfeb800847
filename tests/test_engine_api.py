"""The engine protocols of ``terrazero_env.envs.engine_api``: both engines satisfy what the env layer
needs of them, each capability protocol holds exactly for the engine that has it, and the vector env
refuses an engine that lacks what a call needs with an error naming it."""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config.io import load_config
from terrazero_env.envs.engine_api import (
    ClosableEngine,
    MapAssigningEngine,
    ScenarioEngine,
    SnapshotEngine,
    VectorEngine,
)
from terrazero_env.envs.vector import TerraZeroVectorEnv
from terrazero_env.envs.workers import MultiProcessEngine


def _config(num_worlds: int = 2):
    return load_config("quick", num_worlds=num_worlds, slots_per_world=2, maps=["grid_town"])


def test_the_in_process_engine_satisfies_its_protocols():
    eng = core.Engine(_config())
    assert isinstance(eng, VectorEngine)
    assert isinstance(eng, SnapshotEngine) and isinstance(eng, MapAssigningEngine)
    assert not isinstance(eng, ScenarioEngine) and not isinstance(eng, ClosableEngine)


def test_the_worker_engine_satisfies_its_protocols():
    with MultiProcessEngine(_config(), 2) as eng:
        assert isinstance(eng, VectorEngine)
        assert isinstance(eng, ScenarioEngine) and isinstance(eng, ClosableEngine)
        assert not isinstance(eng, SnapshotEngine)


def test_an_object_missing_a_member_is_not_an_engine():
    class Partial:
        num_worlds = 1

        def step(self, actions=None):
            """One member of many: the rest (reset, buffers, ...) are missing."""

    assert not isinstance(Partial(), VectorEngine)


def test_a_worker_env_refuses_a_snapshot_naming_the_engine():
    with MultiProcessEngine(_config(), 2) as eng:
        env = TerraZeroVectorEnv(_config(), engine=eng)
        env.reset(seed=0)
        with pytest.raises(TypeError, match="MultiProcessEngine cannot snapshot"):
            env.get_state()


def test_an_in_process_env_snapshots_and_restores():
    env = TerraZeroVectorEnv(_config())
    env.reset(seed=3)
    state = env.get_state()
    a = np.zeros(env.num_envs, np.int64)
    first = env.step(a)[0].copy()
    env.set_state(state)
    assert np.array_equal(env.step(a)[0], first)
