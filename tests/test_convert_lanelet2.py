"""Lanelet2 ``.osm`` converter: CARLA maps checked against the lanelet2 library, plus hand-written maps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from realdata import fetch

from terrazero_env.maps import ControlType, LaneType, MapValidationError, Movement, RoadLineType, build, save
from terrazero_env.maps.analysis import handedness_votes, lane_graph_report, successor_gaps
from terrazero_env.maps.convert import converter_for
from terrazero_env.maps.convert.lanelet2 import convert, utm_project
from terrazero_env.maps.render import render_map

TOWNS = ["carla_Town01", "carla_Town02", "carla_Town03", "carla_Town07", "carla_Town10HD"]


@pytest.fixture(scope="module")
def maps_dir() -> Path:
    return fetch("torchdrivesim", "0.2.3", "wheel") / "torchdrivesim" / "resources" / "maps"


def _osm(maps_dir: Path, town: str) -> Path:
    return maps_dir / town / f"{town}.osm"


def _reference(path: Path) -> dict:
    """From the lanelet2 library: lanes (non-degenerate lanelets, two for bidirectional ones), traffic
    lights referenced by lanelets, and the routing graph's successor pairs."""
    lanelet2 = pytest.importorskip("lanelet2")
    m = lanelet2.io.load(str(path), lanelet2.projection.UtmProjector(lanelet2.io.Origin(0, 0)))
    rules = lanelet2.traffic_rules.create(lanelet2.traffic_rules.Locations.Germany,
                                          lanelet2.traffic_rules.Participants.Vehicle)
    graph = lanelet2.routing.RoutingGraph(m, rules)
    lanelets = list(m.laneletLayer)
    degenerate = {ll.id for ll in lanelets if lanelet2.geometry.length2d(ll) == 0}
    lanes = sum(1 if rules.isOneWay(ll) else 2 for ll in lanelets if ll.id not in degenerate)
    lights = {re.id for ll in lanelets if ll.id not in degenerate for re in ll.regulatoryElements
              if re.attributes["subtype"] == "traffic_light"}
    following = {(a.id, b.id) for a in lanelets for b in graph.following(a, False)
                 if a.id not in degenerate and b.id not in degenerate}
    return {"lanes": lanes, "lanelets": len(lanelets), "degenerate": degenerate, "lights": len(lights),
            "following": following}


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.parametrize("town", TOWNS)
def test_carla_map_matches_lanelet2(maps_dir, town, tmp_path):
    path = _osm(maps_dir, town)
    raw = convert(path)
    m = build(raw)
    ref = _reference(path)
    assert len(m.lanes) == ref["lanes"]
    assert sorted(int(i) for i in raw.metadata["skipped_lanelets"]) == sorted(ref["degenerate"])
    assert len(set(raw.metadata["stop_line_sources"])) == ref["lights"]
    assert ref["lights"] <= len(m.stop_lines) <= ref["lights"] + 1
    assert (m.stop_lines.control == ControlType.SIGNAL).all()
    assert len(m.signals) >= len(m.stop_lines)
    assert successor_gaps(m).max() <= 0.5
    rep = lane_graph_report(m)
    n = len(m.lanes)
    assert 1 - rep["no_predecessor"].size / n >= 0.98
    assert 1 - rep["no_successor"].size / n >= 0.98
    # CARLA maps are drawn in CARLA's left-handed frame: once mirrored, traffic keeps right, and every
    # traffic light's ref_line lies at the downstream end of the lanelets it regulates.
    assert raw.metadata["mirrored_y"] is True
    votes = handedness_votes(m)
    assert votes["left"] > 10 * max(votes["right"], 1)
    ends = m.lanes.centerline.values[m.lanes.centerline.offsets[1:] - 1, :2]
    for s in range(len(m.stop_lines)):
        a, b = m.stop_lines.points[s, :, :2]
        e = ends[m.stop_lines.lanes.row(s)]
        t = np.clip((e - a) @ (b - a) / ((b - a) @ (b - a)), 0.0, 1.0)
        assert np.linalg.norm(a + t[:, None] * (b - a) - e, axis=1).max() < 0.5
    # The graph is the lanelet2 routing graph read the other way (lanelet2 reads the frame unmirrored).
    ids = [int(i) for i in raw.metadata["lanelet_ids"]]
    mine = {(ids[i], ids[j]) for i, j in zip(m.lanes.successors.row_ids(), m.lanes.successors.values)}
    assert mine == {(b, a) for a, b in ref["following"]}
    # Signal heads carry their CARLA actor and the controller programs come from the sidecar JSON.
    actors = {int(a) for prog in raw.metadata["tl_programs"] for st in prog for a in st["actor_states"]}
    assert all(s["actor_id"] in actors for s in raw.metadata["signal_actors"])
    save(m, tmp_path / f"{town}.tzb")
    assert (tmp_path / f"{town}.tzb").stat().st_size > 0


@pytest.mark.realdata
@pytest.mark.parametrize("town", ["carla_Town01", "carla_Town10HD"])
def test_unmirrored_graph_equals_lanelet2_routing(maps_dir, town):
    path = _osm(maps_dir, town)
    raw = convert(path, mirror_y=False)
    ref = _reference(path)
    ids = [int(i) for i in raw.metadata["lanelet_ids"]]
    mine = {(ids[i], ids[j]) for i, row in enumerate(raw.lanes.successors.rows()) for j in row}
    assert mine == ref["following"]


@pytest.mark.realdata
def test_projection_matches_lanelet2_utm(maps_dir):
    lanelet2 = pytest.importorskip("lanelet2")
    path = _osm(maps_dir, "carla_Town02")
    m = lanelet2.io.load(str(path), lanelet2.projection.UtmProjector(lanelet2.io.Origin(0, 0)))
    raw = convert(path, mirror_y=False)
    ids = [int(i) for i in raw.metadata["lanelet_ids"]]
    for k in range(0, len(ids), 7):
        ll = m.laneletLayer[ids[k]]
        left = np.array([[p.x, p.y] for p in ll.leftBound])
        right = np.array([[p.x, p.y] for p in ll.rightBound])
        cl = raw.lanes.centerline.row(k)[:, :2]
        np.testing.assert_allclose(cl[0], (left[0] + right[0]) / 2, atol=1e-3)
        np.testing.assert_allclose(cl[-1], (left[-1] + right[-1]) / 2, atol=1e-3)
    rng = np.random.default_rng(0)
    lat, lon = rng.uniform(47.0, 47.02, 20), rng.uniform(8.0, 8.03, 20)
    proj = lanelet2.projection.UtmProjector(lanelet2.io.Origin(47.01, 8.015))
    ref = np.array([[proj.forward(lanelet2.core.GPSPoint(a, o, 0)).x, proj.forward(lanelet2.core.GPSPoint(a, o, 0)).y]
                    for a, o in zip(lat, lon)])
    x, y = utm_project(lat, lon, (47.01, 8.015))
    np.testing.assert_allclose(np.stack([x, y], axis=1), ref, atol=1e-3)


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.parametrize("town", ["carla_Town03", "carla_Town10HD"])
def test_carla_render(maps_dir, town, tmp_path):
    render_map(build(convert(_osm(maps_dir, town))), tmp_path / f"l2_{town}.png")
    assert (tmp_path / f"l2_{town}.png").stat().st_size > 10_000


# --------------------------------------------------------------------------------------------------
# hand-written maps


def _node(i: int, x: float, y: float) -> str:
    return (f'<node id="{i}" lat="0" lon="0"><tag k="local_x" v="{x}"/><tag k="local_y" v="{y}"/>'
            f'<tag k="ele" v="1.5"/></node>')


def _way(i: int, nodes: list[int], tags: dict[str, str] | None = None) -> str:
    nd = "".join(f'<nd ref="{n}"/>' for n in nodes)
    tg = "".join(f'<tag k="{k}" v="{v}"/>' for k, v in (tags or {}).items())
    return f'<way id="{i}">{nd}{tg}</way>'


def _lanelet(i: int, left: int, right: int, tags: dict[str, str] | None = None, regs: tuple[int, ...] = ()) -> str:
    members = f'<member type="way" ref="{left}" role="left"/><member type="way" ref="{right}" role="right"/>'
    members += "".join(f'<member type="relation" ref="{r}" role="regulatory_element"/>' for r in regs)
    tg = "".join(f'<tag k="{k}" v="{v}"/>' for k, v in {"type": "lanelet", "subtype": "road", **(tags or {})}.items())
    return f'<relation id="{i}">{members}{tg}</relation>'


def _hand_map() -> str:
    """Two lanes side by side (x 0..50, y 0..3.5 and 3.5..7, driving +x), continuing into one lane
    (x 50..100), a bidirectional play street (x 100..150), a crosswalk, a dashed divider, a curb, a
    traffic light on the right lane's end, an all-way stop on the play street's far end."""
    nodes = [
        _node(1, 0, 0), _node(2, 50, 0), _node(3, 0, 3.5), _node(4, 50, 3.5), _node(5, 0, 7), _node(6, 50, 7),
        _node(7, 100, 0), _node(8, 100, 3.5), _node(9, 150, 0), _node(10, 150, 3.5),
        _node(11, 50, -1), _node(12, 50, 4.5), _node(13, 52, 0), _node(14, 52, 3.5),
        _node(15, 150, -1), _node(16, 150, 4.5),
    ]
    ways = [
        _way(100, [1, 2]), _way(101, [3, 4], {"type": "line_thin", "subtype": "dashed", "color": "white"}),
        _way(102, [5, 6], {"type": "curbstone"}),
        _way(103, [7, 2]),  # right bound of the second lane drawn against the direction of travel
        _way(104, [4, 8]), _way(105, [7, 9]), _way(106, [8, 10]),
        _way(107, [11, 12], {"type": "stop_line"}), _way(108, [15, 16], {"type": "stop_line"}),
        _way(109, [2, 4]), _way(110, [13, 14]),
    ]
    rels = [
        _lanelet(200, 101, 100, {"speed_limit": "36"}, regs=(300,)),   # right lane (y 0..3.5)
        _lanelet(201, 102, 101),                                       # left lane (y 3.5..7)
        _lanelet(202, 104, 103),
        _lanelet(203, 106, 105, {"subtype": "play_street"}, regs=(301,)),
        _lanelet(204, 109, 110, {"subtype": "crosswalk"}),
        '<relation id="300"><member type="way" ref="107" role="ref_line"/>'
        '<tag k="type" v="regulatory_element"/><tag k="subtype" v="traffic_light"/></relation>',
        '<relation id="301"><member type="relation" ref="203" role="yield"/>'
        '<member type="way" ref="108" role="ref_line"/>'
        '<tag k="type" v="regulatory_element"/><tag k="subtype" v="all_way_stop"/></relation>',
    ]
    return '<?xml version="1.0"?><osm version="0.6">' + "".join(nodes + ways + rels) + "</osm>"


def test_hand_written_map(tmp_path):
    p = tmp_path / "hand.osm"
    p.write_text(_hand_map())
    raw = convert(p)
    assert raw.metadata["lanelet_ids"] == ["200", "201", "202", "203", "203"]
    m = build(raw)
    cl = m.lanes.centerline
    np.testing.assert_allclose(cl.row(0)[[0, -1]], [[0, 1.75, 1.5], [50, 1.75, 1.5]])
    np.testing.assert_allclose(cl.row(2)[[0, -1], :2], [[50, 1.75], [100, 1.75]])
    np.testing.assert_allclose(cl.row(4)[[0, -1], :2], [[150, 1.75], [100, 1.75]])  # the reverse lane
    assert m.lanes.width[0] == pytest.approx(3.5)
    assert m.lanes.speed_limit[0] == pytest.approx(10.0)
    assert m.lanes.left_neighbor[0] == 1 and m.lanes.right_neighbor[1] == 0
    assert m.lanes.successors.row(0).tolist() == [2]
    assert m.lanes.successors.row(2).tolist() == [3]
    assert m.lanes.successors.row(4).tolist() == []
    assert len(m.crosswalks) == 1
    assert m.road_lines.line_type.tolist() == [RoadLineType.DASHED_WHITE]
    assert len(m.road_edges) == 1
    assert m.lanes.lane_type.tolist() == [LaneType.VEHICLE] * 5
    # Traffic light: a bar on its ref_line, one head (straight on); all-way stop: a bar with a stop sign.
    assert len(m.stop_lines) == 2
    assert m.stop_lines.lanes.row(0).tolist() == [0]
    assert m.stop_lines.control.tolist() == [ControlType.SIGNAL, ControlType.STOP_SIGN]
    assert m.signals.movement.tolist() == [Movement.STRAIGHT]
    assert m.signals.lanes.row(0).tolist() == [2]
    assert m.stop_signs.stop_line.tolist() == [1]
    assert m.intersections is not None
    assert converter_for(p) is convert


def test_right_of_way_stop_lines_need_a_ref_line(tmp_path):
    reg = ('<relation id="302"><member type="relation" ref="202" role="yield"/>{ref}'
           '<tag k="type" v="regulatory_element"/><tag k="subtype" v="right_of_way"/></relation>')
    base = _hand_map().replace('<relation id="301">', reg.format(ref="") + '<relation id="301">')
    p = tmp_path / "row.osm"
    p.write_text(base)
    assert len(build(convert(p)).stop_signs) == 1  # only the all-way stop
    p.write_text(_hand_map().replace('<relation id="301">', reg.format(
        ref='<member type="way" ref="110" role="ref_line"/>') + '<relation id="301">'))
    m = build(convert(p))
    assert len(m.stop_signs) == 2
    assert m.stop_lines.lanes.row(int(m.stop_signs.stop_line[1])).tolist() == [2]  # sorted by element id


def test_lat_lon_map_is_projected_around_its_centre(tmp_path):
    nodes = "".join(f'<node id="{i}" lat="{la}" lon="{lo}"/>' for i, (la, lo) in enumerate(
        [(48.0, 11.0), (48.0, 11.001), (48.00003, 11.0), (48.00003, 11.001)], start=1))
    text = ('<?xml version="1.0"?><osm>' + nodes + _way(10, [1, 2]) + _way(11, [3, 4])
            + _lanelet(20, 11, 10) + "</osm>")
    p = tmp_path / "ll.osm"
    p.write_text(text)
    m = build(convert(p))
    c = m.lanes.centerline.row(0)
    assert np.abs(c[:, :2].mean(axis=0)).max() < 1.0  # centred on the map
    assert np.linalg.norm(c[-1, :2] - c[0, :2]) == pytest.approx(74.4, abs=0.5)  # 0.001 deg lon at 48 N
    assert m.lanes.width[0] == pytest.approx(3.34, abs=0.05)


def test_sidecar_json_used_when_regulatory_element_has_no_ref_line(tmp_path):
    text = _hand_map().replace('<member type="way" ref="107" role="ref_line"/>', "")
    p = tmp_path / "town.osm"
    p.write_text(text)
    (tmp_path / "town_stoplines.json").write_text(json.dumps([
        {"actor_id": 7, "agent_type": "traffic_light", "x": 49.0, "y": 1.75, "length": 1.0, "width": 3.5,
         "orientation": 0.0}]))
    (tmp_path / "town_traffic_light_controller.json").write_text(json.dumps(
        [[{"actor_states": {"7": "green"}, "duration": "20", "state": 0, "next_state": 0}]]))
    raw = convert(p)
    m = build(raw)
    np.testing.assert_allclose(m.stop_lines.points[0, :, :2], [[49.0, 0.0], [49.0, 3.5]])
    assert raw.metadata["signal_actors"][0]["actor_id"] == 7
    assert raw.metadata["tl_programs"][0][0]["actor_states"] == {"7": "green"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("definitely not xml", "XML parse error"),
        ('<?xml version="1.0"?><net version="1.9"></net>', "<net>"),
        ("<osm>" + _node(1, 0, 0) + '<way id="5"><nd ref="99"/></way></osm>', "way '5': node '99'"),
        ('<osm>' + _node(1, 0, 0) + _node(2, 1, 0) + _way(5, [1, 2]) + _lanelet(7, 5, 6) + "</osm>",
         "lanelet '7' right bound: way '6'"),
        ('<osm>' + _node(1, 0, 0) + _node(2, 9, 0) + _node(3, 0, 3) + _node(4, 9, 3) + _way(5, [3, 4])
         + _way(6, [1, 2]) + _lanelet(7, 5, 6, regs=(8,)) + "</osm>", "lanelet '7': regulatory element '8'"),
        ("<osm>" + _node(1, 0, 0) + '<relation id="3"><member type="way" ref="1" role="left"/>'
         '<tag k="type" v="lanelet"/></relation></osm>', "lanelet '3': no right bound"),
        ("<osm></osm>", "no nodes"),
        ("<osm>" + _node(1, 0, 0) + "</osm>", "no driving lanelets"),
        ('<osm><node id="4" lat="x" lon="1"/></osm>', "malformed node coordinate"),
        ('<osm><node id="4"/></osm>', "node '4': no local_x/local_y tags and no valid lat/lon"),
        ("<osm>" + _node(1, 0, 0) + _node(1, 5, 0) + "</osm>", "node '1': id is used twice"),
        ("<osm>" + _node(1, 0, 0) + _node(2, 9, 0) + _way(5, [1, 2]) + _way(5, [2, 1]) + "</osm>",
         "way '5': id is used twice"),
    ],
)
def test_malformed_input_raises(tmp_path, text, needle):
    p = tmp_path / "bad.osm"
    p.write_text(text)
    with pytest.raises(MapValidationError, match=needle):
        convert(p)
