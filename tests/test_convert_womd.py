"""WOMD scenes: Scenario TFRecords (framing, proto schema) and GPUDrive JSON into MapData with tracks."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from womd_scenes import maps_differ, scene, to_gpudrive_json

from terrazero_env.maps import build
from terrazero_env.maps.builder import MapValidationError
from terrazero_env.maps.convert import converter_for, gpudrive_json, womd
from terrazero_env.maps.convert import womd_proto as pb
from terrazero_env.maps.convert.tfrecord import iter_records, masked_crc32c, record_offsets, write_records
from terrazero_env.maps.schema import AgentType, ControlType, LaneType, Movement
from terrazero_env.maps.sources import load_source
from terrazero_env.maps.terrabin import load, save

# ---------------------------------------------------------------- TFRecord framing

def test_crc32c_matches_the_castagnoli_check_value():
    # RFC 3720 B.4 / the CRC catalogue: CRC-32C("123456789") = 0xE3069283; TFRecord masks it.
    c = 0xE3069283
    assert masked_crc32c(b"123456789") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_records_round_trip_and_offsets(tmp_path):
    recs = [b"", b"a", os.urandom(1000), b"xyz" * 7]
    p = write_records(tmp_path / "r.tfrecord", recs)
    assert list(iter_records(p)) == recs
    offs = record_offsets(p)
    assert offs == [0, 16, 33, 33 + 1016]


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-3], "truncated"),
    (lambda b: b[:7], "truncated header"),
    (lambda b: b[:8] + bytes([b[8] ^ 1]) + b[9:], "length's CRC"),
    (lambda b: b[:20] + bytes([b[20] ^ 0x40]) + b[21:], "data's CRC"),
    (lambda b: struct.pack("<Q", 1 << 40) + struct.pack("<I", masked_crc32c(struct.pack("<Q", 1 << 40))) + b[12:],
     "limit"),
])
def test_damaged_files_are_rejected_with_a_named_reason(tmp_path, damage, message):
    p = write_records(tmp_path / "r.tfrecord", [b"0123456789abcdef"])
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(MapValidationError, match=message):
        list(iter_records(p))


# ---------------------------------------------------------------- schema

def test_proto_field_numbers_follow_waymo_schema():
    # Hand-encoded wire bytes with Waymo's numbers: Scenario.scenario_id = 5, sdc_track_index = 6,
    # map_features = 8 -> MapFeature.id = 1, lane = 3 -> LaneCenter.speed_limit_mph = 1, type = 2,
    # polyline = 8 -> MapPoint.x = 1; exit_lanes = 10 packed; tracks = 2 -> Track.id = 1, object_type = 2,
    # states = 3 -> ObjectState.center_x = 2, valid = 11.
    point = b"\x09" + struct.pack("<d", 3.5)
    lane = b"\x09" + struct.pack("<d", 25.0) + b"\x10\x02" + b"\x42" + bytes([len(point)]) + point + b"\x52\x02\x04\x05"
    feature = b"\x08\x07" + b"\x1a" + bytes([len(lane)]) + lane
    state = b"\x11" + struct.pack("<d", -2.0) + b"\x58\x01"
    track = b"\x08\x2a\x10\x03" + b"\x1a" + bytes([len(state)]) + state
    data = b"\x2a\x03abc" + b"\x30\x00" + b"\x42" + bytes([len(feature)]) + feature + b"\x12" + bytes([len(track)]) + track
    sc = pb.Scenario.FromString(data)
    assert sc.scenario_id == "abc" and sc.HasField("sdc_track_index")
    f = sc.map_features[0]
    assert f.id == 7 and f.WhichOneof("feature_data") == "lane"
    assert f.lane.speed_limit_mph == 25.0 and f.lane.type == 2 and f.lane.polyline[0].x == 3.5
    assert list(f.lane.exit_lanes) == [4, 5]
    t = sc.tracks[0]
    assert (t.id, t.object_type, t.states[0].center_x, t.states[0].valid) == (42, 3, -2.0, True)
    # and writing gives those bytes back
    assert pb.Scenario.FromString(sc.SerializeToString()) == sc


# ---------------------------------------------------------------- TFRecord scenes

@pytest.fixture
def tfrecord(tmp_path):
    a = scene()
    b = scene(offset=(0.0, 0.0))
    b.scenario_id = "synthetic0002"
    return womd.write_tfrecord(tmp_path / "training.tfrecord-00000-of-00001", [a, b])


def test_tfrecord_scene_maps_lanes_signals_signs_and_tracks(tfrecord):
    assert converter_for(tfrecord) is womd.convert
    raw = load_source(tfrecord)
    m = build(raw)
    assert m.name == "synthetic0001" and len(m.lanes) == 9
    md = m.metadata
    ids = {i: k for k, i in enumerate([10, 11, 12, 13, 14, 20, 21, 30, 40])}
    succ = m.lanes.successors
    assert sorted(succ.row(ids[10]).tolist()) == [ids[11], ids[12]]
    assert m.lanes.right_neighbor[ids[10]] == ids[20] and m.lanes.left_neighbor[ids[20]] == ids[10]
    assert m.lanes.lane_type[ids[40]] == LaneType.BIKE and m.lanes.lane_type[ids[21]] == LaneType.VEHICLE
    assert m.lanes.speed_limit[ids[20]] == pytest.approx(45 * 0.44704)
    # two heads on one stop line (where the approach lane ends), straight and left
    assert len(m.signals) == 2 and len(set(m.signals.stop_line.tolist())) == 1
    assert sorted(m.signals.movement.tolist()) == [Movement.STRAIGHT, Movement.LEFT]
    bar = int(m.signals.stop_line[0])
    assert m.stop_lines.control[bar] == ControlType.SIGNAL and m.lanes.stop_line[ids[10]] == bar
    assert md["logged_signals"]["lane_ids"] == [11, 12]
    assert md["logged_signals"]["states"][0][:40] == [4] * 40 and md["logged_signals"]["states"][0][40:] == [6] * 51
    # the stop sign controls the end of lane 30
    assert len(m.stop_signs) == 1 and m.lanes.stop_line[ids[30]] == int(m.stop_signs.stop_line[0])
    assert m.stop_lines.control[m.lanes.stop_line[ids[30]]] == ControlType.STOP_SIGN
    # road features; speed bumps and driveways kept in metadata
    assert len(m.road_lines) == 3 and len(m.road_edges) == 2 and len(m.crosswalks) == 1
    assert len(md["speed_bumps"]) == 1 and len(md["driveways"]) == 1
    # tracks: "other" and the never-valid vehicle dropped, rows remapped
    t = m.tracks
    assert t.agent_type.tolist() == [AgentType.CAR, AgentType.PEDESTRIAN, AgentType.CYCLIST]
    assert md["track_ids"] == [7, 8, 9] and md["tracks_dropped"] == 2
    assert md["sdc_track"] == 0 and md["tracks_to_predict"] == [0, 2]
    assert t.state.shape == (3, 91, 6) and t.dt == pytest.approx(0.1)
    assert not t.valid[1, :5].any() and np.all(t.state[1, :5] == 0)
    # recentred: the map's box centre is the origin; the shift is recorded
    origin = np.array(md["origin"])
    assert origin[:2].tolist() == [1210.0, -3400.0]
    assert t.state[0, 0, 0] == pytest.approx(-50 + 1200 - 1210)


def test_tfrecord_index_and_scenario_pick_a_record(tfrecord, tmp_path):
    assert womd.scenario_ids(tfrecord) == ["synthetic0001", "synthetic0002"]
    assert womd.convert(tfrecord, index=1).name == "synthetic0002"
    assert womd.convert(tfrecord, scenario="synthetic0002").metadata["origin"][:2] == [10.0, 0.0]
    with pytest.raises(MapValidationError, match="out of range"):
        womd.convert(tfrecord, index=2)
    with pytest.raises(MapValidationError, match="no scenario with id 'nope'"):
        womd.convert(tfrecord, scenario="nope")
    got = [(i, sid, type(m).__name__) for i, sid, m in womd.iter_maps(tfrecord)]
    assert got == [(0, "synthetic0001", "MapData"), (1, "synthetic0002", "MapData")]


def test_a_record_that_is_not_a_scenario_is_named(tmp_path):
    p = write_records(tmp_path / "x.tfrecord", [womd.to_scenario(scene()).SerializeToString(), b"\xff\xff\xff\xff"])
    with pytest.raises(MapValidationError, match="record 1: not a WOMD Scenario proto"):
        womd.convert(p, index=1)
    errs = [m for _, _, m in womd.iter_maps(p)]
    assert isinstance(errs[1], MapValidationError) and not isinstance(errs[0], Exception)


def test_a_track_with_the_wrong_step_count_is_named(tmp_path):
    sc = womd.to_scenario(scene())
    del sc.tracks[2].states[-1]
    p = write_records(tmp_path / "x.tfrecord", [sc.SerializeToString()])
    with pytest.raises(MapValidationError, match="track 9 has 90 states"):
        womd.convert(p)


# ---------------------------------------------------------------- GPUDrive JSON

def test_json_infers_the_lane_graph_the_proto_states(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(to_gpudrive_json(scene(with_graph=False))))
    m_json = build(load_source(p))
    m_pb = build(womd.from_scenario(womd.to_scenario(scene())))
    assert maps_differ(m_json.lanes.successors, m_pb.lanes.successors) is None
    assert m_json.lanes.left_neighbor.tolist() == m_pb.lanes.left_neighbor.tolist()
    assert m_json.lanes.right_neighbor.tolist() == m_pb.lanes.right_neighbor.tolist()
    # exits 13, 14, 21, bike lane 40, lane 30 at the stop sign have no successor
    assert m_json.metadata["lanes_without_successor"] == 5
    assert m_json.metadata["source"] == "gpudrive_json"
    assert len(m_json.signals) == 2 and len(m_json.stop_signs) == 1
    assert m_json.tracks.state.shape == (3, 91, 6)
    assert np.all(m_json.tracks.state[~m_json.tracks.valid] == 0)


def test_json_and_tfrecord_of_the_same_scene_give_the_same_map(tmp_path):
    d = to_gpudrive_json(scene(with_graph=False))
    from_json = gpudrive_json.from_dict(d)
    p = womd.write_tfrecord(tmp_path / "x.tfrecord", [gpudrive_json.to_scene(d)])
    from_pb = womd.convert(p)
    meta_json = dict(from_json.metadata)
    assert meta_json.pop("lanes_without_successor") == 5
    assert meta_json.pop("source") == "gpudrive_json" and from_pb.metadata["source"] == "womd_tfrecord"
    assert maps_differ(from_json.replace(metadata={**meta_json, "source": "womd_tfrecord"}), from_pb) is None


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["roads"].append({"type": "pothole", "geometry": []}), "roads\\[.*'type' must be one of"),
    (lambda d: d["roads"][0].update(geometry=[{"x": 1}]), "not {x, y, z} numbers"),
    (lambda d: d["objects"][0].update(heading=[0.0] * 90), "must all have 91 steps"),
    (lambda d: d["objects"][0].update(type="spaceship"), "objects\\[0\\].type"),
    (lambda d: d.update(tl_states={"11": {"state": ["go"], "x": [0], "y": [0], "z": [0], "time_index": [500]}}),
     "time_index"),
    (lambda d: d.update(tl_states={"11": {"state": ["purple"], "x": [0], "y": [0], "z": [0]}}), "tl_states"),
    (lambda d: d["roads"][0]["geometry"][3].update(x=float("nan")), "not finite"),
])
def test_malformed_json_names_the_problem(tmp_path, edit, message):
    d = to_gpudrive_json(scene(with_graph=False))
    edit(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(MapValidationError, match=message):
        load_source(p)


def test_truncated_json_is_named(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(json.dumps(to_gpudrive_json(scene()))[:5000])
    with pytest.raises(MapValidationError, match="not valid JSON"):
        load_source(p)


def test_limits_bound_the_work_a_scene_can_ask(monkeypatch):
    from terrazero_env.maps.convert import womd_scene

    monkeypatch.setitem(womd_scene.LIMITS, "tracks", 4)
    with pytest.raises(MapValidationError, match="5 tracks, over the limit of 4"):
        womd_scene.to_map_data(scene())


# ---------------------------------------------------------------- terrabin and CLI

def test_built_scene_round_trips_through_terrabin(tfrecord, tmp_path):
    m = build(womd.convert(tfrecord))
    m2 = load(save(m, tmp_path / "s.tzb"))
    assert maps_differ(m, m2) is None or "metadata" in maps_differ(m, m2)  # tuples vs lists after JSON
    assert m2.metadata["logged_signals"]["lane_ids"] == [11, 12]
    assert np.array_equal(np.asarray(m2.tracks.state), m.tracks.state)


def test_cli_builds_inspects_and_renders_a_record(tfrecord, tmp_path):
    cli = [sys.executable, "-m", "terrazero_env.cli", "maps"]
    out = tmp_path / "s.tzb"
    r = subprocess.run(cli + ["build", str(tfrecord), "--index", "1", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert load(out).name == "synthetic0002"
    r = subprocess.run(cli + ["inspect", str(tfrecord), "--scenario", "synthetic0001", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["counts"]["lanes"] == 9
    assert info["womd"]["sdc_track"] == 0 and info["womd"]["logged_signal_heads"] == 2
    assert info["womd"]["logged_signal_steps"] == 91
    png = tmp_path / "s.png"
    r = subprocess.run(cli + ["render", str(out), "-o", str(png), "--dpi", "40"], capture_output=True, text=True)
    assert r.returncode == 0 and png.stat().st_size > 1000, r.stderr
    r = subprocess.run(cli + ["build", str(tfrecord), "--index", "5", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "out of range" in r.stderr


# ---------------------------------------------------------------- real files

WOMD_DIR = os.environ.get("TERRAZERO_WOMD_DIR")


def _real_files() -> list[Path]:
    if not WOMD_DIR:
        return []
    root = Path(WOMD_DIR)
    return sorted(p for p in root.rglob("*") if p.is_file() and (p.suffix == ".json" or ".tfrecord" in p.name))


@pytest.mark.realdata
@pytest.mark.skipif(not WOMD_DIR, reason="set TERRAZERO_WOMD_DIR to a folder of WOMD TFRecords or GPUDrive JSON")
@pytest.mark.parametrize("path", _real_files() or [None], ids=lambda p: p.name if p else "none")
def test_real_scenes_build_and_both_readers_agree(path, tmp_path):
    if path is None:
        pytest.skip(f"no .json or .tfrecord files under {WOMD_DIR}")
    if path.suffix == ".json":
        d = json.loads(path.read_text())
        m = gpudrive_json.from_dict(d)
        built = build(m)
        assert len(built.lanes) > 0 and built.tracks is not None
        rec = womd.write_tfrecord(tmp_path / "x.tfrecord", [gpudrive_json.to_scene(d)])
        again = womd.convert(rec)
        meta = {**m.metadata, "source": "womd_tfrecord"}
        meta.pop("lanes_without_successor")
        assert maps_differ(m.replace(metadata=meta), again) is None
    else:
        n = 0
        for _, _, m in womd.iter_maps(path):
            if not isinstance(m, Exception):
                build(m)
                n += 1
        assert n > 0


# ---------------------------------------------------------------- datasets

def test_build_dataset_converts_in_parallel_rejects_per_scene_and_resumes(tmp_path):
    from terrazero_env.maps import Dataset
    from terrazero_env.maps.build_dataset import build_dataset

    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    scenes = []
    for k in range(3):
        s = scene(offset=(100.0 * k, 0.0))
        s.scenario_id = f"scene{k}"
        scenes.append(s)
    bad = scene()
    bad.scenario_id = "nolanes"
    bad.lanes = []
    womd.write_tfrecord(src / "a.tfrecord-00000-of-00002", scenes[:2] + [bad])
    (src / "sub" / "c.json").write_text(json.dumps({**to_gpudrive_json(scenes[2]), "scenario_id": "scene2"}))
    (src / "sub" / "broken.json").write_text("{")
    lines: list[str] = []
    out = tmp_path / "ds"
    r = build_dataset([str(src)], out, workers=2, progress=False, on_reject=lines.append)
    assert r.scenes == ["scene0.tzb", "scene1.tzb", "scene2.tzb"]
    assert r.converted_files == 3 and r.resumed_files == 0
    assert len(lines) == 2 and any("record 2: " in x and "nolanes" in x and "no lane" in x for x in lines)
    assert any("broken.json" in x and "not valid JSON" in x for x in lines)
    assert (out / "rejected.txt").read_text().count("\n") == 2
    ds = Dataset(out / "manifest.yaml")
    assert len(ds) == 3 and ds.groups == {("womd", "logged"): [0, 1, 2]}
    assert ds[2].tracks is not None and ds[2].metadata["scenario_id"] == "scene2"
    # a rerun converts only the file whose output went missing; a new file is picked up
    (out / "scene1.tzb").unlink()
    r2 = build_dataset([str(src)], out, workers=1, progress=False, on_reject=lines.append)
    assert r2.converted_files == 1 and r2.resumed_files == 2 and (out / "scene1.tzb").is_file()
    s3 = scene()
    s3.scenario_id = "scene3"
    womd.write_tfrecord(src / "b.tfrecord", [s3])
    r3 = build_dataset([str(src / "*.tfrecord*")], out, workers=1, progress=False, on_reject=lines.append)
    assert r3.converted_files == 1 and r3.resumed_files == 1 and "scene3.tzb" in r3.scenes


def test_build_dataset_names_an_input_that_matches_nothing(tmp_path):
    from terrazero_env.maps.build_dataset import build_dataset

    with pytest.raises(FileNotFoundError, match="names no file"):
        build_dataset([str(tmp_path / "nothing*.tfrecord")], tmp_path / "ds", progress=False)


# ---------------------------------------------------------------- logged signals in the engine

def _signal_engine(m, mode, replay=True, controller=None):
    from terrazero_env import engine as core
    from terrazero_env.config import EngineConfig, InitConfig, SignalConfig, SignalController

    cfg = EngineConfig(num_worlds=2, slots_per_world=2, max_agents_per_world=8, episode_length=200,
                       init=InitConfig(mode=mode, num_agents=(1, 2)),
                       signals=SignalConfig(controller=controller or SignalController.CHRISTMAS,
                                            replay_logged=replay))
    e = core.Engine(cfg, maps=m)
    e.reset(seeds=[1, 2])
    return e


def test_log_mode_worlds_see_the_logged_lights_and_random_mode_the_controller():
    from terrazero_env.config import InitMode
    from terrazero_env.maps.signal_plan import logged_head_states

    m = build(womd.convert(_tf(scene())))
    expect = logged_head_states(m)  # heads [straight: red 40 steps then green; left: red arrow]
    assert expect.shape == (2, 91)
    assert expect[0, :40].tolist() == [0] * 40 and expect[0, 40:].tolist() == [2] * 51 and not expect[1].any()
    e = _signal_engine(m, InitMode.LOG)
    seen = [e.signal_states(0).copy()]
    for _ in range(120):
        e.step(np.zeros(4, np.int32))
        seen.append(e.signal_states(0).copy())
    seen = np.array(seen).T
    assert np.array_equal(seen[:, :91], expect)
    assert np.all(seen[:, 91:] == expect[:, -1:])  # the last logged state holds after the log ends
    # randomly initialized worlds on the same map run the controller: their lights change on their own
    r = _signal_engine(m, InitMode.RANDOM)
    states = [r.signal_states(0).copy()]
    for _ in range(400):
        r.step(np.zeros(4, np.int32))
        states.append(r.signal_states(0).copy())
    states = np.array(states)
    assert len({tuple(s) for s in states}) > 2 and not np.array_equal(states[:91].T, expect)
    # and replay can be switched off
    off = _signal_engine(m, InitMode.LOG, replay=False)
    states = [off.signal_states(0).copy()]
    for _ in range(400):
        off.step(np.zeros(4, np.int32))
        states.append(off.signal_states(0).copy())
    assert not np.array_equal(np.array(states)[:91].T, expect)


def _tf(s):
    import tempfile

    d = tempfile.mkdtemp()
    return womd.write_tfrecord(Path(d) / "s.tfrecord", [s])


def test_logged_signal_metadata_is_checked():
    from terrazero_env.maps.signal_plan import logged_head_states

    m = build(womd.convert(_tf(scene())))
    bad = {**m.metadata, "logged_signals": {"states": [[4] * 91]}}
    with pytest.raises(MapValidationError, match="1 rows for 2 signal heads"):
        logged_head_states(m.replace(metadata=bad))
    bad = {**m.metadata, "logged_signals": {"states": [[4] * 91, [9] * 91]}}
    with pytest.raises(MapValidationError, match="codes must be"):
        logged_head_states(m.replace(metadata=bad))
