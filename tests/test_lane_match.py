"""Which lane an agent is on where centerlines overlap (``EngineConfig.lane_align_angle``).

The reference is a plain numpy transcription of the rule over every lane segment: the nearest
centerline, unless it heads more than the angle away from the agent while a lane heading within the
angle has the agent within half its width; then the nearest such lane."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import straight_road, tiny_junction

from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig
from terrazero_env.maps import build

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
ALIGN = math.radians(30.0)


def _engine(m, **over):
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=2, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(obs={"lane_state": True}, **over), maps=m)


def _segments(m):
    """``[S, 4]`` segment endpoints, their lane and that lane's width."""
    segs, rows = [], []
    for lane in range(len(m.lanes)):
        pts = np.asarray(m.lanes.centerline.row(lane), float)[:, :2]
        segs.append(np.concatenate([pts[:-1], pts[1:]], axis=1))
        rows.append(np.full(len(pts) - 1, lane))
    return np.concatenate(segs), np.concatenate(rows), np.asarray(m.lanes.width, float)


def _reference(m, x, y, heading, align):
    """(lane, heading residual, signed lateral offset) by the rule, over every segment."""
    seg, row, width = _segments(m)
    a, b = seg[:, :2], seg[:, 2:]
    d = b - a
    L = np.linalg.norm(d, axis=1)
    t = np.clip(((np.array([x, y]) - a) * d).sum(1) / (L * L), 0.0, 1.0)
    dist = np.linalg.norm(a + t[:, None] * d - [x, y], axis=1)
    cosang = (d[:, 0] * math.cos(heading) + d[:, 1] * math.sin(heading)) / L
    s = int(np.argmin(dist))
    if cosang[s] < math.cos(align):
        ok = (cosang >= math.cos(align)) & (dist <= 0.5 * width[row])
        if ok.any():
            s = int(np.nonzero(ok)[0][np.argmin(dist[ok])])
    res = (heading - math.atan2(d[s, 1], d[s, 0]) + math.pi) % (2 * math.pi) - math.pi
    lat = (d[s, 0] * (y - a[s, 1]) - d[s, 1] * (x - a[s, 0])) / L[s]
    return int(row[s]), res, lat


def _lane_state(e, x, y, heading):
    e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": y, "heading": heading, "speed": 0.0, "goal": (x, y)}])
    f = e.observations[0][e.obs_layout.groups["ego"].feature("lane_state")]
    return float(f[0]) * math.pi, float(f[1]) * 2.5


def _crossing_points(m, align):
    """Points along the junction's connectors, each with the connector's heading there, where the
    nearest centerline heads more than ``align`` away from it."""
    seg, row, _ = _segments(m)
    out = []
    for lane in range(8, 20):  # the 12 connectors of ``tiny_junction``
        pts = np.asarray(m.lanes.centerline.row(lane), float)[:, :2]
        for k in range(len(pts) - 1):
            p = 0.5 * (pts[k] + pts[k + 1])
            h = math.atan2(*(pts[k + 1] - pts[k])[::-1])
            for off in (-0.6, -0.3, 0.3, 0.6):  # beside the connector, inside its lane
                q = p + off * np.array([-math.sin(h), math.cos(h)])
                nearest, res, _ = _reference(m, q[0], q[1], h, math.pi)
                if abs(res) > align:
                    out.append((float(q[0]), float(q[1]), h))
    return out


def test_the_default_is_the_plain_nearest_centerline_even_where_it_crosses_the_agents_travel():
    m = build(tiny_junction())
    e = _engine(m)
    points = _crossing_points(m, ALIGN)
    assert len(points) >= 10
    for x, y, h in points:
        _, res, lat = _reference(m, x, y, h, math.pi)
        assert abs(res) > ALIGN
        assert _lane_state(e, x, y, h) == pytest.approx((res, lat), abs=2e-3)


def test_with_an_alignment_angle_the_lane_driven_along_is_taken_where_connectors_overlap():
    m = build(tiny_junction())
    e = _engine(m, lane_align_angle=ALIGN)
    points = _crossing_points(m, ALIGN)
    fixed = 0
    for x, y, h in points:
        _, res, lat = _reference(m, x, y, h, ALIGN)
        assert _lane_state(e, x, y, h) == pytest.approx((res, lat), abs=2e-3)
        fixed += abs(res) <= ALIGN
    assert fixed == len(points)  # every one of these points lies inside its own connector's lane


def test_a_car_over_the_centre_line_still_reads_the_opposing_lane_and_drives_the_wrong_way():
    """On the straight two-way road, a car heading east 0.5 m past the centre line is outside its own
    lane's half width (2.25 m from its centerline): the opposing lane stays its lane, and moving, it
    counts as wrong-way driving; inside its own lane it does not."""
    m = build(straight_road())
    wrong = list(core.COUNTER_NAMES).index("wrong_way")
    for y, expect in ((0.5, 1), (-0.3, 0)):
        e = _engine(m, lane_align_angle=ALIGN)
        e.set_scene(0, [{"cls": AgentType.CAR, "x": 50.0, "y": y, "heading": 0.0, "speed": 5.0, "goal": (90.0, -1.75)}])
        zero = int(np.nonzero((e.action_values(AgentType.CAR) == 0).all(axis=1))[0][0])
        e.step(np.full(1, zero, np.int32))
        assert int(np.asarray(e.counters)[0, wrong]) == expect


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 3.2, "wide"])
def test_a_bad_alignment_angle_is_refused_by_name(bad):
    with pytest.raises((ValueError, TypeError), match="lane_align_angle"):
        EngineConfig(lane_align_angle=bad)
