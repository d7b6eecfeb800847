"""The engine's one named input: ``engine_settings(config)`` against the engine's own key list."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from terrazero_env import _engine
from terrazero_env.config import EngineConfig
from terrazero_env.config.io import load_config
from terrazero_env.engine import Engine, engine_settings, engine_tables, road_map

#: Config fields that reach the engine in another form than their own key: through the tables
#: (``classes``, ``rewards``), resolved into one key (``consequences.*``, ``init.log_role_table``,
#: ``road_users.static_counts``), or read by the env layer before the engine (maps and their index).
RESOLVED_ELSEWHERE = {
    "maps": "the env layer loads them into RoadMaps",
    "consequences": "consequences.<violation>, one code per violation",
    "classes": "the class_params table, and classes.longest_extent",
    "rewards": "the reward_lo / reward_hi / reward_on tables",
    "obs.road_segment_length": "the RoadMap's observation index",
    "init.log_roles": "init.log_role_table",
    **{f"road_users.{g}": "road_users.static_counts" for g in (
        "parked", "crash_disc", "crash_chain", "crash_tbone", "crash_fan", "cone_grid", "cone_taper", "lane_block",
        "debris")},
}


def _fields(obj, prefix=""):
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            yield from _fields(v, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def _engine_parts(cfg):
    return engine_settings(cfg), [road_map("grid_town")], engine_tables(cfg)


def test_settings_hold_exactly_the_engines_keys():
    s = engine_settings(EngineConfig())
    assert list(_engine.ENGINE_SETTINGS) == sorted(set(_engine.ENGINE_SETTINGS), key=_engine.ENGINE_SETTINGS.index)
    assert set(s) == set(_engine.ENGINE_SETTINGS)


def test_every_config_field_reaches_the_engine_or_is_named_as_resolved_elsewhere():
    # A new config field either gets a settings key (and a read in the engine) or a line here.
    s = engine_settings(EngineConfig())
    loose = [k for k in _fields(EngineConfig()) if k not in s and f"{k}_range" not in s and k not in RESOLVED_ELSEWHERE]
    assert loose == []


@pytest.mark.parametrize("change", ["missing", "extra", "both"])
def test_a_missing_or_extra_key_is_an_error_naming_it(change):
    cfg = load_config("quick")
    s, maps, tables = _engine_parts(cfg)
    if change in ("missing", "both"):
        del s["idm.delta"]
    if change in ("extra", "both"):
        s["idm.deltaa"] = 4.0
    with pytest.raises(ValueError) as err:
        _engine.Engine(s, maps, tables)
    msg = str(err.value)
    assert ("idm.delta'" in msg) == (change in ("missing", "both"))
    assert ("idm.deltaa" in msg) == (change in ("extra", "both"))


def test_settings_must_be_a_mapping():
    cfg = load_config("quick")
    _, maps, tables = _engine_parts(cfg)
    with pytest.raises(TypeError, match="mapping"):
        _engine.Engine(cfg, maps, tables)


def test_the_compiled_engine_runs_on_the_settings_alone():
    # Built from the flat dict (no config object in reach), the engine steps as the wrapper's does.
    cfg = load_config("quick")
    ref = Engine(cfg, maps=["grid_town"])
    raw = _engine.Engine(*_engine_parts(cfg))
    assert not hasattr(raw, "config")
    for e in (ref, raw):
        e.reset(seeds=list(range(cfg.num_worlds)))
        for _ in range(5):
            e.step()
    np.testing.assert_array_equal(raw.observations, ref.observations)
    np.testing.assert_array_equal(raw.rewards, ref.rewards)
    assert ref.config is cfg
    assert set(ref.settings) == set(raw.settings) == set(_engine.ENGINE_SETTINGS)


@pytest.mark.parametrize("horizon", [3, 5])
def test_a_setting_changes_what_the_engine_does(horizon):
    # The key is read, not merely checked: the episode length set in the dict truncates there.
    cfg = load_config("quick").with_overrides(consequences={"collision": "none", "offroad": "none"})
    s, maps, tables = _engine_parts(cfg)
    s["episode_length"] = horizon
    e = _engine.Engine(s, maps, tables)
    e.reset(seeds=list(range(cfg.num_worlds)))
    for t in range(1, horizon + 1):
        e.step()
        live = e.valid & ~e.terminated
        assert live.any()
        assert e.truncated[live].all() == (t == horizon)


def test_a_raw_engine_refuses_pickling_with_a_clear_error():
    import copy
    import pickle

    import terrazero_env.envs  # noqa: F401  (registers the engines' pickling)

    raw = _engine.Engine(*_engine_parts(load_config("quick")))
    for attempt in (lambda: pickle.dumps(raw), lambda: copy.deepcopy(raw)):
        with pytest.raises(TypeError, match="terrazero_env.engine.Engine"):
            attempt()
    wrapped = Engine(load_config("quick"), maps=["grid_town"])
    assert pickle.loads(pickle.dumps(wrapped)).config == wrapped.config
