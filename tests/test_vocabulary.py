"""The engine's vocabulary and its Python mirrors agree, name for name and value for value.

The compiled engine declares its enums once (``cyext/common.pxd``, ``signals.pxd``, ``observe.pxd``)
and exports them ordered by value (``vocabulary.pxi``). ``config`` and ``maps`` sit below the engine
and keep their own Python enums; these tests fail when either side is edited alone.
"""

from __future__ import annotations

from dataclasses import fields
from enum import IntEnum

import numpy as np
import pytest

from terrazero_env import config
from terrazero_env import engine as core
from terrazero_env.evaluation import metrics
from terrazero_env.maps import schema, signal_plan


def _by_value(enum: type[IntEnum]) -> tuple[str, ...]:
    members = sorted(enum, key=int)
    assert [int(m) for m in members] == list(range(len(members))), f"{enum.__name__} is not 0..n-1"
    return tuple(m.name for m in members)


MIRRORS = {
    "agent_classes": lambda: _by_value(schema.AgentType),
    "dynamics_models": lambda: _by_value(config.DynamicsModel),
    "consequences": lambda: _by_value(config.Consequence),
    "control_types": lambda: _by_value(schema.ControlType),
    "init_modes": lambda: _by_value(config.InitMode),
    "log_roles": lambda: tuple(f.name.upper() for f in fields(config.LogRoles)),
    "goal_behaviors": lambda: _by_value(config.GoalBehavior),
    "signal_controllers": lambda: _by_value(config.SignalController),
    "signal_stages": lambda: tuple(n for _, n in sorted(
        (getattr(signal_plan, "STAGE_" + n), n) for n in ("LEFT", "THROUGH", "ALL"))),
    "crossing_groups": lambda: _by_value(config.CrossingGroup),
    "reward_params": lambda: config.REWARD_PARAMS,
    "static_kinds": lambda: _by_value(config.StaticKind),
    "static_generators": lambda: _by_value(config.StaticGenerator),
    "class_params": lambda: config.CLASS_PARAM_COLUMNS,
    "episode_metrics": lambda: metrics.EPISODE_METRICS,
    "neighbour_search": lambda: tuple(n.upper() for n in config.NEIGHBOUR_SEARCH),
}


@pytest.mark.parametrize("table", sorted(MIRRORS))
def test_python_mirror_equals_engine_vocabulary(table: str) -> None:
    """Each Python-side enum or column list names the engine's values in the engine's order."""
    assert MIRRORS[table]() == core.VOCABULARY[table]


def test_config_tables_follow_the_engine_column_order() -> None:
    """The class table has one column per engine class parameter, each holding the field it names."""
    cfg = config.EngineConfig()
    tb = cfg.tables(core.REWARD_PARAMS, core.CLASS_PARAMS)
    cols = core.CLASS_PARAMS
    assert tb["class_params"].shape == (len(core.AGENT_CLASSES), len(cols))
    assert tb["reward_lo"].shape[1] == len(core.REWARD_PARAMS)
    car = cfg.classes[config.AgentType.CAR]
    row = tb["class_params"][config.AgentType.CAR]
    assert row[cols.index("max_speed")] == car.max_speed
    assert row[cols.index("mass")] == car.mass
    assert row[cols.index("comfort_jerk_lat")] == car.comfort[3]
    assert row[cols.index("dynamics")] == int(car.dynamics)
    with pytest.raises(ValueError, match="class-parameter columns"):
        cfg.tables(class_param_columns=cols[:-1])


def test_counters_and_type_codes_come_from_the_engine() -> None:
    """Counter buffers are as wide as the engine's counter names; policies use the writer's type codes."""
    from terrazero_env.envs.vector import OBS_BOUND

    eng = core.Engine(config.EngineConfig(num_worlds=1, slots_per_world=1))
    assert eng.counters.shape[1] == len(core.COUNTER_NAMES)
    assert core.TYPE_CODES == tuple(
        core.OBS_TYPES["pedestrian" if c == "PEDESTRIAN" else "cyclist" if c == "CYCLIST" else "vehicle"]
        for c in core.AGENT_CLASSES)
    assert OBS_BOUND == core.OBS_BOUND == eng.obs_layout.bound


def test_obs_layout_reports_widths_and_normalisers() -> None:
    """Entity widths in the layout are the writer's, and the ego features follow the reported scales."""
    cfg = config.EngineConfig(num_worlds=1, slots_per_world=1)
    eng = core.Engine(cfg)
    L = eng.obs_layout
    w = core.ENTITY_WIDTHS
    assert L.groups["partners"].width == w["partners"]
    assert L.groups["road"].width == w["road"]
    assert L.groups["traffic"].width == w["traffic"]
    nm = L.normalisers
    assert nm["speed_scale"] == cfg.obs.speed_scale and nm["goal_scale"] == cfg.obs.goal_scale
    eng.set_scene(0, [{"cls": 0, "x": 0.0, "y": 0.0, "heading": 0.0, "speed": 7.0, "length": 4.5, "width": 2.0}])
    ego = eng.observations[0, L.groups["ego"].slice].astype(np.float64)
    dims = L.groups["ego"].feature("vehicle_dims")
    speed = L.groups["ego"].feature("speed")
    assert ego[dims] == pytest.approx([2.0 / nm["width_range"], 4.5 / nm["length_range"]], rel=1e-6)
    assert ego[speed][0] == pytest.approx(7.0 * nm["speed_scale"], rel=1e-6)


@pytest.mark.parametrize("preset", ["planner", "quick"])
def test_partner_and_ego_speeds_share_one_scale(preset: str) -> None:
    """Slot 0 observes its partner's speed on the scale at which the partner observes its own
    (``obs.speed_scale``: 1/100 by default, 0.1 in the quick preset)."""
    from terrazero_env import load_config

    cfg = load_config(preset, num_worlds=1, slots_per_world=2)
    eng = core.Engine(cfg)
    eng.set_scene(0, [{"cls": 0, "x": 0.0, "y": 0.0, "heading": 0.0, "speed": 3.0},
                      {"cls": 0, "x": 10.0, "y": 0.0, "heading": 0.0, "speed": 8.0}])
    L = eng.obs_layout
    obs = eng.observations.astype(np.float64)
    ego_speed_of_1 = obs[1, L.groups["ego"].slice][L.groups["ego"].feature("speed")][0]
    partners = L.split(obs)["partners"]
    partner_speed_seen_by_0 = partners[0, 0, L.groups["partners"].feature("speed")][0]
    assert ego_speed_of_1 == pytest.approx(8.0 * cfg.obs.speed_scale, rel=1e-6)
    assert partner_speed_seen_by_0 == pytest.approx(ego_speed_of_1, rel=1e-6)
