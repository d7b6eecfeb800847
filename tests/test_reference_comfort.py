"""The reference driver's comfort price does not stop it from steering: with the default car grid
(+-4 m/s^3 lateral) and steering coefficients above 1.25 every turning value breaks the 5 m/s^3
comfort limit, and priced, the driver held its wheels straight into bends at speed
(``reference.pxd``, ``_best_action``: the signs the grid cannot step within the limit go unpriced)."""

from __future__ import annotations

import numpy as np

from terrazero_env.config.io import load_config
from terrazero_env.engine import Engine


def test_the_driver_turns_toward_its_plan_at_speed_with_a_grid_beyond_the_comfort_limit() -> None:
    cfg = load_config("planner", maps=["grid_town"], num_worlds=8,
                      init={"class_weights": [1.0, 0.0, 0.0, 0.0, 0.0],
                            "class_kinematic_ranges": [[1.3, 1.5], [0.5, 1.5], [0.5, 1.5], [1.0, 1.0], [0.8, 1.2]]})
    lat = np.asarray(cfg.classes[0].action_lat)
    assert max(abs(lat)) * 1.3 > cfg.classes[0].comfort[3]  # every turning value priced, were it priced
    eng = Engine(cfg)
    eng.reset(seeds=np.arange(8, dtype=np.uint64))
    behind = turned = 0
    for _ in range(150):
        acts = eng.reference_actions()
        for w in range(8):
            st, plan = eng.agent_states(w), eng.reference_plan(w)
            for i in np.nonzero((st["slot"] >= 0) & (st["speed"] > 4.0))[0]:
                s = int(st["slot"][i])
                need = plan["steer"][s] - st["steer"][i]
                if abs(need) > 0.1:  # the wheels a tenth of a radian behind the plan
                    behind += 1
                    turned += lat[acts[w * cfg.slots_per_world + s] % len(lat)] * need > 0
        eng.step(acts)
    # priced, the driver fell behind its plan 64 times in these worlds and turned toward it in 34
    assert behind <= 10, behind
    assert turned >= 0.9 * behind, (turned, behind)


def test_a_coarse_jerk_grid_still_leaves_rest() -> None:
    """A jerk-model agent whose grid step (least jerk x throttle coefficient x dt) exceeds twice the
    smoothed step toward its asked-for acceleration (``accel_tau``) used to pick no change at every
    step: buses with a throttle coefficient of 1.45 (grid +-4 m/s^3, a step of 0.58 m/s^2 against
    0.3 asked) stood on an empty highway for good. A gap of more than two steps now moves at least one."""
    cfg = load_config("quick", maps=["highway"], init__class_weights=(0.0, 0.0, 1.0, 0.0, 0.0),
                      init__initial_speed=(0.0, 0.0), init__kinematic_range=(1.45, 1.45),
                      road_users__parked=(0, 0))
    eng = Engine(cfg)
    eng.reset(seeds=list(range(cfg.num_worlds)))
    for _ in range(50):
        eng.step(eng.reference_actions())
    a = eng.agents
    ctrl = (a["slot"] >= 0) & (a["alive"] == 1)
    assert ctrl.sum() >= 16
    assert np.mean(a["speed"][ctrl] > 1.5) >= 0.9, np.round(a["speed"][ctrl], 1)
