"""benchmarks/violation_context.py on hand-made recordings: the red-light row's onset, distance and
needed deceleration, dead and unused rows ignored, and the off-road row read from lane_state."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("violation_context", ROOT / "benchmarks" / "violation_context.py")
vc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vc)

FIELDS = [("x", "f8"), ("y", "f8"), ("heading", "f8"), ("speed", "f8"), ("length", "f8"), ("width", "f8"),
          ("slot", "i4"), ("alive", "i4"), ("red_light", "i4"), ("offroad", "i4")]


def _agents(T: int, A: int = 2) -> np.ndarray:
    a = np.zeros((T, 1, A), FIELDS)
    a["length"], a["width"], a["alive"], a["slot"] = 4.0, 2.0, 1, [0, 1][:A]
    return a


def test_red_light_row_measures_from_the_last_green_step():
    """A car drives east at 5 m/s toward a line at x = 14 that turns yellow at step 2 and red at step
    4; it is flagged at step 5. At the onset (step 2) its centre is at 11 m, its front 1 m from the
    line: it needed 5^2 / 2 = 12.5 m/s^2 to stop."""
    T = 7
    a = _agents(T)
    a["x"][:, 0, 0] = [10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0]
    a["speed"][:, 0, 0] = 5.0
    a["red_light"][5, 0, 0] = 1
    a["red_light"][6, 0, 1] = 1          # the second row: flagged after it died, not counted
    a["alive"][5:, 0, 1] = 0
    states = np.array([2, 2, 1, 1, 0, 0, 0], np.uint8)[:, None, None]
    line = np.array([[[14.0, -2.0, 0.0], [14.0, 2.0, 0.0]]])
    rec = [{"agents": a, "stop_lines": states, "placed": np.ones((1, 2), bool)}]
    rows = vc.red_light_events(rec, line, 0.1)
    assert len(rows) == 1
    r = rows[0]
    assert r["step"] == 5 and r["stop_line"] == 0 and not r["at_spawn"] and r["never_slowed"]
    assert r["seconds_since_green"] == pytest.approx(0.3)
    assert r["distance_then"] == pytest.approx(14.0 - (11.0 + 2.0))
    assert r["decel_needed"] == pytest.approx(25.0 / 2.0)


def test_red_light_rows_skip_unused_rows_and_see_a_spawn_on_red():
    a = _agents(3)
    a["x"][:, 0, 0] = [0.0, 0.5, 1.0]
    a["speed"][:, 0, 0] = [4.0, 3.0, 5.0]
    a["red_light"][2, 0, :] = 1
    rec = [{"agents": a, "stop_lines": np.zeros((3, 1, 1), np.uint8), "placed": np.array([[True, False]])}]
    rows = vc.red_light_events(rec, np.array([[[4.0, -2.0, 0.0], [4.0, 2.0, 0.0]]]), 0.1)
    assert len(rows) == 1 and rows[0]["at_spawn"] and not rows[0]["never_slowed"]
    assert rows[0]["distance_then"] == pytest.approx(2.0) and rows[0]["seconds_since_green"] == pytest.approx(0.2)


def test_offroad_row_reads_lane_state_one_and_ten_steps_before():
    T = 12
    a = _agents(T, 1)
    a["offroad"][11, 0, 0] = 1
    a["offroad"][11 - 1, 0, 0] = 0
    D = 4
    obs = np.zeros((T - 1, 1, D))
    obs[10, 0, 1:3] = [-0.05, -0.2]     # one step before: heading -0.05 pi, offset -0.2 x 2.5
    obs[1, 0, 1:3] = [0.0, 0.1]
    obs[10, 0, 3] = 0.5
    layout = SimpleNamespace(groups={"ego": SimpleNamespace(features=[("speed", 0, 1), ("lane_state", 1, 2),
                                                                     ("road_curvature", 3, 1)],
                                                           feature=lambda n: {"lane_state": slice(1, 3),
                                                                              "road_curvature": slice(3, 4)}[n])},
                             normalisers={"lane_heading_range": np.pi, "lane_lateral_range": 2.5,
                                          "curvature_range": 0.1})
    rec = [{"agents": a, "obs": obs, "placed": np.ones((1, 1), bool)}]
    (row,) = vc.offroad_events(rec, layout, 1)
    assert row["heading_residual_1"] == pytest.approx(-9.0)
    assert row["lateral_offset_1"] == pytest.approx(-0.5)
    assert row["lateral_offset_10"] == pytest.approx(0.25)
    assert row["curvature"] == pytest.approx(0.05)
    layout.groups["ego"].features = [("speed", 0, 1)]
    with pytest.raises(ValueError, match="lane_state"):
        vc.offroad_events(rec, layout, 1)


def test_red_light_row_counts_the_red_left_until_the_next_green():
    """The line is red from step 4 and green again at step 8; the car crosses at step 5: 0.3 s of red
    were left. Without a later green in the recording the figure is NaN."""
    T = 9
    a = _agents(T, 1)
    a["x"][:, 0, 0] = 10.0 + 0.5 * np.arange(T)
    a["speed"][:, 0, 0] = 5.0
    a["red_light"][5, 0, 0] = 1
    line = np.array([[[14.0, -2.0, 0.0], [14.0, 2.0, 0.0]]])
    states = np.array([2, 2, 1, 1, 0, 0, 0, 0, 2], np.uint8)[:, None, None]
    rec = [{"agents": a, "stop_lines": states, "placed": np.ones((1, 1), bool)}]
    (row,) = vc.red_light_events(rec, line, 0.1)
    assert row["red_left"] == pytest.approx(0.3)
    rec[0]["stop_lines"] = np.zeros_like(states)
    (row,) = vc.red_light_events(rec, line, 0.1)
    assert np.isnan(row["red_left"])
