"""The JSON reader's inferred lane graph against a scene's true one: the same scene written as a Scenario
TFRecord (which keeps ``exit_lanes`` and neighbours) and as GPUDrive JSON (which drops them), read both
ways and compared link by link; and road-edge jumps cut where WOMD's 0.5 m sampling breaks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from womd_scenes import junction_scene, line, scene, to_gpudrive_json

from terrazero_env.maps import build
from terrazero_env.maps.convert import gpudrive_json, womd
from terrazero_env.maps.convert.tfrecord import iter_records
from terrazero_env.maps.convert.womd_scene import POLYLINE_JUMP, Scene, to_map_data


def _both(s: Scene, tmp_path: Path) -> tuple[Scene, Scene]:
    """The scene as read from its TFRecord (true graph) and from its GPUDrive JSON (inferred graph)."""
    rec = womd.write_tfrecord(tmp_path / f"{s.scenario_id}.tfrecord", [s])
    truth = womd.to_scene(womd.parse(next(iter_records(rec))))
    p = tmp_path / f"{s.scenario_id}.json"
    p.write_text(json.dumps(to_gpudrive_json(s)))
    return truth, gpudrive_json.to_scene(gpudrive_json.read_document(p))


def test_the_inferred_graph_recovers_every_true_successor_of_the_synthetic_scenes(tmp_path):
    total: dict[str, int] = {}
    for s in [scene()] + [junction_scene(k) for k in range(24)]:
        truth, inferred = _both(s, tmp_path)
        roads = to_gpudrive_json(s)["roads"]
        assert all(set(r) == {"id", "type", "map_element_id", "geometry"} for r in roads)  # no graph in the JSON
        for k, v in gpudrive_json.successor_agreement(truth, inferred).items():
            total[k] = total.get(k, 0) + v
    # docs/womd.md, "The inferred lane graph against the true one", quotes these figures
    assert total == {"lanes": 568, "true": 687, "recovered": 687, "missed": 0, "invented": 62,
                     "neighbours_true": 39, "neighbours_recovered": 39, "neighbours_missed": 0,
                     "neighbours_invented": 40}


def test_invented_links_are_lanes_ending_together_and_parallel_connectors(tmp_path):
    # Two approach lanes ending at one point: geometry cannot tell whose connectors are whose, so each
    # gets the other's. Side by side at 3.5 m, they keep their true lane change and invent nothing.
    for seed, expect_invented in ((1, True), (0, False)):
        truth, inferred = _both(junction_scene(seed), tmp_path)
        ends = {}
        for ln in truth.lanes:
            if len(ln.exit) > 1:  # the approaches (a connector has one exit)
                ends.setdefault(tuple(np.round(ln.polyline[-1, :2], 3)), []).append(ln.id)
        shared = [ids for ids in ends.values() if len(ids) > 1]
        a = gpudrive_json.successor_agreement(truth, inferred)
        assert a["missed"] == 0
        assert bool(shared) == expect_invented == (a["invented"] > 0)
        if shared:
            by_id = {ln.id: ln for ln in inferred.lanes}
            true_by_id = {ln.id: ln for ln in truth.lanes}
            x, y = shared[0][:2]
            assert set(true_by_id[y].exit) <= set(by_id[x].exit)  # x inherits y's connectors


def test_a_missed_link_is_counted(tmp_path):
    s = scene()
    # lane 11 moved 0.8 m sideways: it starts 0.8 m off lane 10's end and ends 0.8 m off lane 13's start
    s.lanes[1].polyline = s.lanes[1].polyline + np.array([0.0, 0.8, 0.0])
    truth, inferred = _both(s, tmp_path)
    a = gpudrive_json.successor_agreement(truth, inferred)
    assert (a["true"], a["recovered"], a["missed"], a["invented"]) == (5, 3, 2, 0)


def test_road_edge_jumps_are_cut_and_counted():
    s = scene()
    edge = np.concatenate([line(-60, -9, -20, -9), line(30, -9, 80, -9)])  # a 50 m jump between two curbs
    s.road_edges = [(110, 1, edge + np.array([1200.0, -3400.0, 0.0]))]
    m = to_map_data(s)
    assert len(m.road_edges) == 2 and m.metadata["polyline_jumps_split"] == 1
    seg = np.linalg.norm(np.diff(m.road_edges.values[:, :2], axis=0), axis=1)[m.road_edges.row_ids()[1:]
                                                                             == m.road_edges.row_ids()[:-1]]
    assert seg.max() <= POLYLINE_JUMP
    build(m)
    # a gap under the limit stays one polyline
    s.road_edges = [(110, 1, line(-60, -9, 80, -9, step=1.9) + np.array([1200.0, -3400.0, 0.0]))]
    assert len(to_map_data(s).road_edges) == 1


WOMD_DIR = os.environ.get("TERRAZERO_WOMD_DIR")


@pytest.mark.realdata
@pytest.mark.skipif(not WOMD_DIR, reason="set TERRAZERO_WOMD_DIR to a folder of WOMD TFRecords")
def test_real_tfrecord_scenes_inferred_graph_against_the_true_one(tmp_path):
    files = sorted(Path(WOMD_DIR).rglob("*.tfrecord*")) if WOMD_DIR else []
    if not files:
        pytest.skip(f"no .tfrecord files under {WOMD_DIR}")
    for f in files:
        for rec in iter_records(f):
            truth = womd.to_scene(womd.parse(rec))
            inferred = gpudrive_json.to_scene(json.loads(json.dumps(to_gpudrive_json(truth))))
            a = gpudrive_json.successor_agreement(truth, inferred)
            print(f.name, truth.scenario_id, a)
            assert a["recovered"] >= 0.95 * a["true"] and a["invented"] <= 0.05 * a["true"]

