"""CommonRoad converter: real scenarios against commonroad-io's reader, log initialisation, bad input."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from realdata import fetch

from terrazero_env.maps import MapValidationError, build
from terrazero_env.maps.analysis import lane_graph_report, successor_gaps
from terrazero_env.maps.convert import converter_for
from terrazero_env.maps.convert.commonroad import convert
from terrazero_env.maps.schema import AgentType, ControlType, Movement

#: Real scenarios: a signalised US intersection with NGSIM tracks, a small synthetic crossing with
#: stop lines, a US101 highway stretch with NGSIM tracks, a German town and a US suburb.
SCENARIOS = [
    "USA_Lanker-1_4_T-1.xml",
    "ZAM_Intersection-1_1_T-1.xml",
    "USA_US101-17_1_T-1.xml",
    "DEU_Flensburg-16_1_T-1.xml",
    "USA_Peach-3_1_T-1.xml",
]
WITH_STOP_LINES = ["USA_Lanker-1_4_T-1.xml", "ZAM_Intersection-1_1_T-1.xml", "USA_Peach-3_1_T-1.xml"]


def _scenario(name: str) -> Path:
    root = fetch("commonroad-reach", "2025.2.1", "sdist")
    hits = sorted(root.glob(f"*/scenarios/{name}"))
    if not hits:
        pytest.skip(f"{name} is not in the commonroad-reach source archive")
    return hits[0]


@functools.cache
def _converted(name: str):
    raw = convert(_scenario(name))
    return raw, build(raw)


@functools.cache
def _reference(name: str):
    reader = pytest.importorskip("commonroad.common.file_reader")
    scenario, _ = reader.CommonRoadFileReader(str(_scenario(name))).open()
    return scenario


@pytest.mark.realdata
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_converts_and_builds(name):
    raw, built = _converted(name)
    assert raw.metadata["source"] == "commonroad"
    assert raw.metadata["benchmark_id"] == name[:-4]
    assert raw.name == name[:-4]
    # Recentred: the lane network's bounding box is centred at the origin.
    x0, y0, x1, y1 = built.bounds()
    assert abs(x0 + x1) < 0.5 * (x1 - x0) and abs(y0 + y1) < 0.5 * (y1 - y0)
    report = lane_graph_report(built)
    assert report["max_successor_gap"] <= 0.5
    assert successor_gaps(built).max(initial=0.0) <= 0.5
    assert np.all(built.lanes.width > 0.5) and np.all(built.lanes.width < 10.0)
    assert len(built.road_lines) + len(built.road_edges) > 0
    assert converter_for(_scenario(name)) is convert


@pytest.mark.realdata
@pytest.mark.parametrize("name", SCENARIOS)
def test_counts_match_commonroad_io(name):
    raw, built = _converted(name)
    ref = _reference(name)
    net = ref.lanelet_network
    assert len(built.lanes) == len(net.lanelets)
    assert sorted(raw.metadata["lanelet_ids"]) == sorted(ll.lanelet_id for ll in net.lanelets)
    assert len(raw.metadata["traffic_lights"]) == len(net.traffic_lights)
    assert len(built.stop_lines) == sum(ll.stop_line is not None for ll in net.lanelets)
    assert len(built.intersections) == len(net.intersections)
    n_tracks = len(built.tracks) if built.tracks is not None else 0
    assert n_tracks == len(ref.dynamic_obstacles)


@pytest.mark.realdata
@pytest.mark.parametrize("name", SCENARIOS)
def test_lane_graph_and_neighbours_match_commonroad_io(name):
    raw, built = _converted(name)
    net = _reference(name).lanelet_network
    ids = raw.metadata["lanelet_ids"]
    row = {lid: i for i, lid in enumerate(ids)}
    for ll in net.lanelets:
        i = row[ll.lanelet_id]
        assert sorted(ids[j] for j in built.lanes.successors.row(i)) == sorted(
            set(ll.successor) | {p.lanelet_id for p in net.lanelets if ll.lanelet_id in p.predecessor})
        left = ll.adj_left if ll.adj_left is not None and ll.adj_left_same_direction else None
        assert (ids[built.lanes.left_neighbor[i]] if built.lanes.left_neighbor[i] >= 0 else None) == left
        # The centerline lies between the bounds: its first point is the middle of the bounds' first points.
        start = 0.5 * (ll.left_vertices[0] + ll.right_vertices[0]) - np.asarray(raw.metadata["offset"][:2])
        assert np.linalg.norm(built.lanes.centerline.row(i)[0, :2] - start) < 0.5


@pytest.mark.realdata
@pytest.mark.parametrize("name", WITH_STOP_LINES)
def test_stop_lines_guard_intersections(name):
    _, built = _converted(name)
    cl = built.lanes.centerline
    entering = 0
    for s in range(len(built.stop_lines)):
        lanes = built.stop_lines.lanes.row(s)
        assert lanes.size == 1
        lane = int(lanes[0])
        # The bar lies across the lane's end.
        a, b = built.stop_lines.points[s, :, :2]
        end = cl.row(lane)[-1, :2]
        t = np.clip((end - a) @ (b - a) / ((b - a) @ (b - a)), 0.0, 1.0)
        assert np.linalg.norm(a + t * (b - a) - end) <= 1.5
        entering += bool((built.lanes.intersection[built.lanes.successors.row(lane)] >= 0).any())
    assert entering == len(built.stop_lines)
    assert np.all(built.stop_lines.intersection >= 0)


@pytest.mark.realdata
def test_traffic_lights_become_signals_with_cycles():
    raw, built = _converted("USA_Lanker-1_4_T-1.xml")
    net = _reference("USA_Lanker-1_4_T-1.xml").lanelet_network
    assert len(built.signals) > 0
    assert np.all(built.stop_lines.control == ControlType.SIGNAL)
    table = raw.metadata["traffic_lights"]
    for light in net.traffic_lights:
        entry = table[str(light.traffic_light_id)]
        cycle = light.traffic_light_cycle
        assert [e["duration"] for e in entry["cycle"]] == [int(c.duration) for c in cycle.cycle_elements]
        assert [e["color"] for e in entry["cycle"]] == [c.state.value for c in cycle.cycle_elements]
        assert entry["time_offset"] == int(cycle.time_offset)
    # One signal per (stop line, movement).
    pairs = set(zip(built.signals.stop_line.tolist(), built.signals.movement.tolist()))
    assert len(pairs) == len(built.signals)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["USA_Lanker-1_4_T-1.xml", "USA_US101-17_1_T-1.xml", "DEU_Flensburg-16_1_T-1.xml"])
def test_tracks_keep_length_step_and_size(name):
    raw, built = _converted(name)
    ref = _reference(name)
    tr = built.tracks
    assert tr is not None and tr.dt == pytest.approx(0.1) == pytest.approx(ref.dt)
    offset = np.asarray(raw.metadata["offset"][:2])
    by_order = ref.dynamic_obstacles
    ids = sorted(o.obstacle_id for o in by_order)
    assert len(ids) == len(tr)
    types = {"car": AgentType.CAR, "truck": AgentType.TRUCK, "bus": AgentType.BUS,
             "pedestrian": AgentType.PEDESTRIAN, "bicycle": AgentType.CYCLIST}
    # Rows follow file order, which is the reader's order too.
    for j, ob in enumerate(by_order):
        states = [ob.initial_state, *ob.prediction.trajectory.state_list]
        steps = [s.time_step for s in states]
        assert int(tr.valid[j].sum()) == len(states)
        assert np.array_equal(np.nonzero(tr.valid[j])[0], np.asarray(steps))
        assert tr.size[j, 0] == pytest.approx(ob.obstacle_shape.length, abs=1e-5)
        assert tr.size[j, 1] == pytest.approx(ob.obstacle_shape.width, abs=1e-5)
        assert tr.agent_type[j] == types.get(ob.obstacle_type.value, AgentType.CAR)
        for s in (states[0], states[-1]):
            got = tr.state[j, s.time_step]
            assert np.allclose(got[:2], np.asarray(s.position) - offset, atol=1e-6)
            assert got[3] == pytest.approx(s.orientation)
            assert np.hypot(got[4], got[5]) == pytest.approx(abs(s.velocity), abs=1e-9)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["USA_Lanker-1_4_T-1.xml", "USA_US101-17_1_T-1.xml"])
def test_log_initialisation_places_agents_at_logged_positions(name):
    from terrazero_env.config import EngineConfig, InitConfig, InitMode
    from terrazero_env.engine import Engine

    _, built = _converted(name)
    cfg = EngineConfig(num_worlds=1, slots_per_world=4, max_agents_per_world=64,
                       init=InitConfig(mode=InitMode.LOG, num_agents=(1, 64)))
    engine = Engine(cfg, maps=built)
    engine.reset()
    s = engine.agent_states(0)
    tr = built.tracks
    first = np.nonzero(tr.valid[:, 0])[0][:64]
    assert len(s["x"]) == first.size > 0
    assert np.allclose(s["x"], tr.state[first, 0, 0], atol=1e-6)
    assert np.allclose(s["y"], tr.state[first, 0, 1], atol=1e-6)
    assert np.allclose(s["length"], tr.size[first, 0], atol=1e-5)
    # The logged vehicles stand on lanes of the converted map, heading the legal way.
    assert np.all(s["lane"] >= 0)
    assert not s["offroad"].any() and not s["wrong_way"].any()


# --------------------------------------------------------------------------------------------------
# malformed input

_BOUND = "<{side}><point><x>{x0}</x><y>{y}</y></point>{more}<lineMarking>solid</lineMarking></{side}>"


def _lanelet(lid: int, x0: float, x1: float, extra: str = "", one_point: bool = False) -> str:
    def bound(side: str, y: float) -> str:
        more = "" if one_point else f"<point><x>{x1}</x><y>{y}</y></point>"
        return _BOUND.format(side=side, x0=x0, y=y, more=more)
    return f'<lanelet id="{lid}">{bound("leftBound", 1.75)}{bound("rightBound", -1.75)}{extra}</lanelet>'


def _write(tmp_path: Path, body: str, root: str = "commonRoad") -> Path:
    p = tmp_path / "ZAM_Test-1_1_T-1.xml"
    p.write_text(f'<?xml version="1.0"?><{root} benchmarkID="ZAM_Test-1_1_T-1" timeStepSize="0.1">{body}</{root}>')
    return p


def test_minimal_scenario_converts(tmp_path):
    body = _lanelet(1, 0, 10, '<successor ref="2"/>') + _lanelet(2, 10, 20, '<predecessor ref="1"/>')
    m = build(convert(_write(tmp_path, body)))
    assert len(m.lanes) == 2 and m.lanes.successors.row(0).tolist() == [1]
    assert m.metadata["offset"] == [10.0, 0.0, 0.0]
    assert np.allclose(m.lanes.centerline.row(0)[:, :2], [[-10, 0], [0, 0]])
    assert m.lanes.width[0] == pytest.approx(3.5)
    assert m.tracks is None


def test_not_xml_is_rejected(tmp_path):
    p = tmp_path / "bad.xml"
    p.write_text("this is not <xml")
    with pytest.raises(MapValidationError, match="bad.xml: not a well-formed XML"):
        convert(p)


def test_wrong_root_is_rejected(tmp_path):
    with pytest.raises(MapValidationError, match="root element is <OpenDRIVE>"):
        convert(_write(tmp_path, "", root="OpenDRIVE"))


def test_one_point_bound_is_rejected(tmp_path):
    body = _lanelet(7, 0, 10, one_point=True)
    with pytest.raises(MapValidationError, match=r"lanelet 7\.leftBound: has 1 point"):
        convert(_write(tmp_path, body))


def test_dangling_successor_is_rejected(tmp_path):
    body = _lanelet(1, 0, 10, '<successor ref="99"/>')
    with pytest.raises(MapValidationError, match=r"lanelet 1\.successor: lanelet 99 does not exist"):
        convert(_write(tmp_path, body))


def test_degenerate_lanelet_is_rejected(tmp_path):
    with pytest.raises(MapValidationError, match="lanelet 3: degenerate"):
        convert(_write(tmp_path, _lanelet(3, 5, 5)))


def _controlled_scenario(tmp_path: Path, stop_refs: str) -> Path:
    stop = f"<stopLine><lineMarking>solid</lineMarking>{stop_refs}</stopLine>"
    body = (_lanelet(1, 0, 10, f'<successor ref="2"/>{stop}') + _lanelet(2, 10, 20, '<predecessor ref="1"/>') +
            '<trafficSign id="10"><trafficSignElement><trafficSignID>206</trafficSignID></trafficSignElement>'
            '<position><point><x>9</x><y>-3</y></point></position></trafficSign>'
            '<trafficLight id="20"><cycle><cycleElement><duration>30</duration><color>green</color></cycleElement>'
            '<cycleElement><duration>10</duration><color>red</color></cycleElement><timeOffset>5</timeOffset></cycle>'
            '<direction>straight</direction><active>true</active></trafficLight>'
            '<dynamicObstacle id="30"><type>pedestrian</type><shape><circle><radius>0.4</radius></circle></shape>'
            '<initialState><position><point><x>2</x><y>3</y></point></position><orientation><exact>1.5</exact>'
            '</orientation><time><exact>2</exact></time><velocity><exact>1.2</exact></velocity></initialState>'
            '</dynamicObstacle>')
    return _write(tmp_path, body)


def test_stop_sign_on_stop_line(tmp_path):
    m = build(convert(_controlled_scenario(tmp_path, '<trafficSignRef ref="10"/>')))
    assert len(m.stop_lines) == 1 and len(m.stop_signs) == 1 and len(m.signals) == 0
    assert m.stop_lines.control[0] == ControlType.STOP_SIGN
    assert m.stop_lines.lanes.row(0).tolist() == [0]
    assert np.allclose(m.stop_signs.position[0], [-1.0, -3.0, 0.0])  # recentred by the 10 m offset
    # The bar spans the lanelet's end.
    assert np.allclose(m.stop_lines.points[0, :, :2], [[0.0, 1.75], [0.0, -1.75]])
    assert m.metadata["traffic_lights"]["20"] == {"cycle": [{"color": "green", "duration": 30},
                                                            {"color": "red", "duration": 10}],
                                                  "time_offset": 5, "direction": "straight", "active": True,
                                                  "stop_lines": []}
    tr = m.tracks
    assert tr is not None and tr.state.shape == (1, 3, 6) and tr.valid[0].tolist() == [False, False, True]
    assert tr.agent_type[0] == AgentType.PEDESTRIAN and tr.size[0, :2].tolist() == pytest.approx([0.8, 0.8])
    assert tr.state[0, 2, :2].tolist() == pytest.approx([-8.0, 3.0])
    assert tr.state[0, 2, 4:].tolist() == pytest.approx([1.2 * np.cos(1.5), 1.2 * np.sin(1.5)])
    assert convert(_controlled_scenario(tmp_path, ""), tracks=False).tracks is None


def test_signal_wins_over_stop_sign(tmp_path):
    raw = convert(_controlled_scenario(tmp_path, '<trafficSignRef ref="10"/><trafficLightRef ref="20"/>'))
    m = build(raw)
    assert len(m.stop_signs) == 0 and m.signals.movement.tolist() == [int(Movement.STRAIGHT)]
    assert m.stop_lines.control[0] == ControlType.SIGNAL
    assert raw.metadata["warnings"] == {"stop_sign_under_signal": 1}
    assert raw.metadata["traffic_lights"]["20"]["stop_lines"] == [0]


def test_dangling_traffic_light_is_rejected(tmp_path):
    with pytest.raises(MapValidationError, match=r"lanelet 1\.stopLine\.trafficLightRef: traffic light 21"):
        convert(_controlled_scenario(tmp_path, '<trafficLightRef ref="21"/>'))


@pytest.mark.parametrize("tag,ident", [("trafficSign", 10), ("trafficLight", 20)])
def test_duplicate_sign_and_light_ids_are_rejected(tmp_path, tag, ident):
    p = _controlled_scenario(tmp_path, '<trafficSignRef ref="10"/>')
    text = p.read_text()
    start = text.index(f'<{tag} id="{ident}">')
    element = text[start:text.index(f"</{tag}>", start) + len(f"</{tag}>")]
    p.write_text(text.replace(element, element + element, 1))
    with pytest.raises(MapValidationError, match=f"{tag} {ident}: id is used twice"):
        convert(p)
