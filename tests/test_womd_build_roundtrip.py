"""Every scene the builder writes loads back: varied synthetic junctions (stop signs at lane ends that lie
together, signals, three and four arms, both WOMD formats) are built, written as ``.tzb`` and read back
through the checks every reader of a built map runs; the builder runs the same checks on what it returns."""

from __future__ import annotations

import json

import numpy as np
import pytest
from womd_scenes import junction_scene, to_gpudrive_json

from terrazero_env.maps import build, builder, sources
from terrazero_env.maps.builder import MapValidationError, validate, validate_built
from terrazero_env.maps.convert import gpudrive_json, womd
from terrazero_env.maps.schema import ControlType, Lanes, MapData, StopLines, StopSigns
from terrazero_env.maps.sources import load_built
from terrazero_env.maps.terrabin import save

SEEDS = range(24)


def _ends_together(s) -> bool:
    """Whether two inbound lanes of the scene end within the builder's stop-line tie distance."""
    ends = np.array([ln.polyline[-1, :2] for ln in s.lanes if ln.exit and len(ln.polyline) == 31])
    d = np.linalg.norm(ends[:, None] - ends[None], axis=2)
    return bool(np.any((d < 1.5) & ~np.eye(len(ends), dtype=bool)))


def test_the_seeds_cover_stop_signs_signals_shared_lane_ends_and_three_and_four_arms():
    scenes = [junction_scene(s) for s in SEEDS]
    assert sum(bool(s.stop_signs) for s in scenes) >= 10
    assert sum(bool(s.signals) for s in scenes) >= 10
    assert sum(bool(s.stop_signs) and _ends_together(s) for s in scenes) >= 4
    assert all(ln.exit or ln.entry for s in scenes for ln in s.lanes)  # every lane is linked
    n_out = {sum(1 for ln in s.lanes if not ln.exit) for s in scenes}
    assert n_out == {3, 4}


@pytest.mark.parametrize("fmt", ["tfrecord", "json"])
def test_every_built_scene_loads_back(tmp_path, fmt):
    scenes = [junction_scene(s) for s in SEEDS]
    if fmt == "tfrecord":
        womd.write_tfrecord(tmp_path / "j.tfrecord", scenes)
        maps = [m for _, _, m in womd.iter_maps(tmp_path / "j.tfrecord")]
    else:
        maps = []
        for s in scenes:
            p = tmp_path / f"{s.scenario_id}.json"
            p.write_text(json.dumps(to_gpudrive_json(s)))
            maps.append(gpudrive_json.convert(p))
    n_signs = n_signals = n_shared = 0
    for s, m in zip(scenes, maps):
        assert isinstance(m, MapData), m
        b = build(m)
        p = save(b, tmp_path / f"{s.scenario_id}.{fmt}.tzb")
        back = load_built(p)  # validate_built: what the engine checks before it indexes a map
        assert np.array_equal(back.lanes.stop_line, b.lanes.stop_line)
        control = back.stop_lines.control
        n_sign_lines = int(np.sum(control == ControlType.STOP_SIGN))
        n_signs += n_sign_lines
        n_signals += int(np.sum(control == ControlType.SIGNAL))
        if fmt == "tfrecord":  # every sign names its lane: one stop line each
            assert n_sign_lines == len(s.stop_signs)
        else:  # the JSON names none: a sign takes the nearest lane end, and two signs may take one
            assert len({k // 10 for k, _, _ in s.stop_signs}) <= n_sign_lines <= len(s.stop_signs)
        tied = back.stop_lines.lanes
        n_shared += int(np.sum(tied.lengths() > 1))
        assert np.unique(tied.values).shape == tied.values.shape  # no lane ends at two stop lines
    assert n_signs >= 20 and n_signals >= 10 and n_shared >= 1


def test_two_stop_lines_may_not_hold_one_lane():
    b = build(womd.from_scenario(womd.to_scenario(junction_scene(0))))
    s = b.stop_lines
    rows = s.lanes.rows()
    i, j = [k for k in range(len(s)) if rows[k].size][:2]
    rows[j] = np.r_[rows[j], rows[i][:1]]
    bad = b.replace(stop_lines=StopLines(points=s.points, lanes=type(s.lanes).from_rows(rows, np.int32),
                                         control=s.control, intersection=s.intersection))
    with pytest.raises(MapValidationError, match=rf"lane {int(rows[i][0])} is tied to stop lines \[{i}, {j}\]"):
        validate(bad)


def test_untied_bars_near_one_lane_end_tie_it_to_the_nearer_bar():
    # Two bars given without ties (as a source that leaves the tie to the builder gives them): lane A
    # ends on bar 0 and 1.41 m from bar 1's end, lane B on bar 1 only. The geometric tie alone put A on both.
    lanes = Lanes.create([np.array([[0.0, 0.0, 0.0], [20.0, 0.0, 0.0]]), np.array([[0.0, 3.5, 0.0], [21.0, 3.5, 0.0]])])
    bars = np.array([[[20.0, -1.75, 0.0], [20.0, 1.75, 0.0]], [[21.0, 1.0, 0.0], [21.0, 4.0, 0.0]]])
    m = MapData(lanes=lanes, stop_lines=StopLines.create(bars), stop_signs=StopSigns.create(bars[:, 0], [0, 1]))
    built = build(m)
    assert built.stop_lines.lanes.rows()[0].tolist() == [0]
    assert built.stop_lines.lanes.rows()[1].tolist() == [1]
    assert built.lanes.stop_line.tolist() == [0, 1]
    # a bar whose only lane end is nearer another bar is tied to none, and says so
    bars[1] = [[20.8, -1.75, 0.0], [20.8, 1.75, 0.0]]
    m = MapData(lanes=lanes, stop_lines=StopLines.create(bars), stop_signs=StopSigns.create(bars[:, 0], [0, 1]))
    with pytest.raises(MapValidationError, match=r"stop_lines\[1\]: tied to no lane \(the lanes ending within 1.5 m "
                                                 r"of it \(\[0\]\) are tied to other stop lines\)"):
        build(m)


def test_the_builder_and_the_built_map_reader_run_one_set_of_checks(tmp_path, monkeypatch):
    """``build`` ends by calling ``validate_built`` on what it returns, and ``load_built`` (the reader of
    a ``.tzb``) calls the same function: replacing it changes both."""
    m = womd.from_scenario(womd.to_scenario(junction_scene(3)))
    p = save(build(m), tmp_path / "j.tzb")
    calls = []

    def refuse(mm, config=None):
        calls.append(mm)
        raise MapValidationError("refused by the shared check")

    monkeypatch.setattr(builder, "validate_built", refuse)
    monkeypatch.setattr(sources, "validate_built", refuse)
    with pytest.raises(MapValidationError, match="refused by the shared check"):
        build(m)
    with pytest.raises(MapValidationError, match="refused by the shared check"):
        load_built(p)
    assert len(calls) == 2
    monkeypatch.undo()
    validate_built(load_built(p))
