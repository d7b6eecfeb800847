"""SUMO ``.net.xml`` converter: real RESCO networks checked against sumolib, plus hand-written networks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from realdata import fetch

from terrazero_env.maps import ControlType, Handedness, LaneType, MapValidationError, Movement, build, save
from terrazero_env.maps.analysis import handedness_votes, lane_graph_report, successor_gaps
from terrazero_env.maps.convert import converter_for
from terrazero_env.maps.convert.sumo import convert
from terrazero_env.maps.render import render_map

RESCO = ["cologne1", "cologne3", "cologne8", "ingolstadt1", "ingolstadt7", "ingolstadt21", "arterial4x4", "grid4x4"]
_NOT_DRIVEN = {"pedestrian", "wheelchair", "tram", "rail_urban", "rail", "rail_electric", "rail_fast", "rail_slow",
               "cityrail", "lightrail", "ship", "subway", "aircraft", "cable_car", "container", "drone"}


@pytest.fixture(scope="module")
def resco() -> Path:
    return fetch("sumo-rl", "1.4.5", "wheel") / "sumo_rl" / "nets" / "RESCO"


def _reference(path: Path) -> dict:
    """Counts straight from sumolib: lanes that carry road vehicles (normal and internal edges),
    pedestrian-only normal lanes, the lane graph, controlled links and traffic lights."""
    sumolib = pytest.importorskip("sumolib")
    net = sumolib.net.readNet(str(path), withInternal=True)
    driven, sidewalks, junctions = set(), 0, set()
    for edge in net.getEdges(withInternal=True):
        func = edge.getFunction()
        if func not in ("", "normal", "internal"):
            continue
        for lane in edge.getLanes():
            perm = set(lane.getPermissions())
            if perm - _NOT_DRIVEN:
                driven.add(lane.getID())
                if func == "internal":
                    junctions.add(edge.getID()[1:].rsplit("_", 1)[0])
            elif func in ("", "normal") and perm and perm <= {"pedestrian", "wheelchair"}:
                sidewalks += 1
    links, controlled = set(), []
    for edge in net.getEdges(withInternal=True):
        for lane in edge.getLanes():
            for c in lane.getOutgoing():
                src = c.getFromLane().getID()
                dst = c.getViaLaneID() or c.getToLane().getID()
                if src in driven and dst in driven:
                    links.add((src, dst))
                    if c.getTLSID() and edge.getFunction() != "internal":
                        controlled.append(src)
    return {"lanes": len(driven), "sidewalks": sidewalks, "links": links, "signals": len(controlled),
            "stop_lines": len(set(controlled)), "tls": len(net.getTrafficLights()), "junctions": len(junctions)}


@pytest.mark.realdata
@pytest.mark.parametrize("name", RESCO)
def test_resco_network_matches_sumolib(resco, name, tmp_path):
    path = resco / name / f"{name}.net.xml"
    raw = convert(path)
    m = build(raw)
    ref = _reference(path)
    assert len(m.lanes) == ref["lanes"]
    assert len(m.sidewalks) >= ref["sidewalks"]
    ids = raw.metadata["lane_ids"]
    mine = {(ids[i], ids[j]) for i, j in zip(m.lanes.successors.row_ids(), m.lanes.successors.values)}
    assert mine == ref["links"]
    assert len(m.signals) == ref["signals"]
    assert len(m.stop_lines) == ref["stop_lines"]
    assert len(raw.metadata["tl_programs"]) == ref["tls"]
    assert len(m.intersections) == ref["junctions"]
    assert (m.stop_lines.control == ControlType.SIGNAL).sum() == ref["stop_lines"]
    assert successor_gaps(m).max() <= 0.5
    rep = lane_graph_report(m)
    n = len(m.lanes)
    assert 1 - rep["no_predecessor"].size / n >= 0.8
    assert 1 - rep["no_successor"].size / n >= 0.8
    # Every signal head is tied to its stop line, and its (tl, linkIndex) indexes the program's state string.
    for k, link in enumerate(raw.metadata["signal_links"]):
        states = raw.metadata["tl_programs"][link["tl"]][0]["phases"][0]["state"]
        assert 0 <= link["link_index"] < len(states)
        assert m.signals.stop_line[k] >= 0
    assert m.handedness == Handedness.RIGHT
    votes = handedness_votes(m)
    assert votes["left"] > votes["right"]  # opposite traffic on the left: right-hand traffic
    save(m, tmp_path / f"{name}.tzb")
    assert (tmp_path / f"{name}.tzb").stat().st_size > 0


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["cologne1", "ingolstadt7"])
def test_resco_render(resco, name, tmp_path):
    m = build(convert(resco / name / f"{name}.net.xml"))
    render_map(m, tmp_path / f"sumo_{name}.png")
    assert (tmp_path / f"sumo_{name}.png").stat().st_size > 10_000


@pytest.mark.realdata
def test_lane_attributes_from_network(resco):
    raw = convert(resco / "cologne1" / "cologne1.net.xml")
    ids = raw.metadata["lane_ids"]
    sumolib = pytest.importorskip("sumolib")
    net = sumolib.net.readNet(str(resco / "cologne1" / "cologne1.net.xml"), withInternal=True)
    for i, lid in enumerate(ids):
        lane = net.getLane(lid)
        assert raw.lanes.speed_limit[i] == pytest.approx(lane.getSpeed(), rel=1e-5)
        assert raw.lanes.width[i] == pytest.approx(lane.getWidth(), rel=1e-5)
        shape = np.asarray(lane.getShape())
        cl = raw.lanes.centerline.row(i)[:, :2] + raw.metadata["origin_shift"]
        np.testing.assert_allclose(cl[0], shape[0], atol=0.02)
        np.testing.assert_allclose(cl[-1], shape[-1], atol=0.02)


# --------------------------------------------------------------------------------------------------
# hand-written networks

_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<net version="1.9"{net_attrs}>
    <location netOffset="-100.00,-200.00" convBoundary="0.00,0.00,200.00,10.00" origBoundary="0,0,1,1" projParameter="!"/>
    <type id="road" speed="13.89" width="3.50"/>
{body}
</net>
"""

_T_JUNCTION = """
    <edge id=":J_0" function="internal">
        <lane id=":J_0_0" index="0" speed="13.89" length="10.00" shape="95.00,-1.75 105.00,-1.75"/>
    </edge>
    <edge id=":J_1" function="internal">
        <lane id=":J_1_0" index="0" speed="8.00" length="8.00" shape="95.00,-1.75 99.00,-3.00 101.75,-5.00"/>
    </edge>
    <edge id=":J_c0" function="crossing" crossingEdges="B">
        <lane id=":J_c0_0" index="0" allow="pedestrian" speed="1.00" length="7.00" width="4.00" shape="106.00,3.50 106.00,-3.50"/>
    </edge>
    <edge id=":J_w0" function="walkingarea">
        <lane id=":J_w0_0" index="0" allow="pedestrian" speed="1.00" length="1.00" width="4.00" shape="104.00,3.50 108.00,3.50 108.00,6.00 104.00,6.00"/>
    </edge>
    <edge id="A" from="W" to="J" priority="1" type="road">
        <lane id="A_0" index="0" speed="13.89" length="95.00" shape="0.00,-1.75 95.00,-1.75"/>
        <lane id="A_1" index="1" allow="bicycle" speed="6.00" length="95.00" width="1.50" shape="0.00,0.75 95.00,0.75"/>
    </edge>
    <edge id="B" from="J" to="E" priority="1" type="road">
        <lane id="B_0" index="0" speed="13.89" length="95.00" shape="105.00,-1.75 200.00,-1.75"/>
    </edge>
    <edge id="C" from="J" to="S" priority="1">
        <lane id="C_0" index="0" speed="8.00" length="95.00" shape="101.75,-5.00 101.75,-100.00"/>
    </edge>
    <edge id="D" from="S2" to="W2" priority="1">
        <lane id="D_0" index="0" allow="pedestrian" speed="1.00" length="50.00" width="2.00" shape="0.00,5.00 50.00,5.00"/>
        <lane id="D_1" index="1" allow="tram" speed="10.00" length="50.00" shape="0.00,8.00 50.00,8.00"/>
    </edge>
    <tlLogic id="J" type="static" programID="0" offset="0">
        <phase duration="30" state="Gr"/>
        <phase duration="3" state="yr"/>
        <phase duration="30" state="rG"/>
    </tlLogic>
    <junction id="J" type="{jtype}" x="100.00" y="0.00" incLanes="A_0 A_1" intLanes=":J_0_0 :J_1_0" shape="95,0 105,0"/>
    <junction id="W" type="dead_end" x="0.00" y="0.00" incLanes="" intLanes="" shape="0,0"/>
    <junction id="E" type="dead_end" x="200.00" y="0.00" incLanes="B_0" intLanes="" shape="200,0"/>
    <junction id="S" type="dead_end" x="101.75" y="-100.00" incLanes="C_0" intLanes="" shape="100,-100"/>
    <connection from="A" to="B" fromLane="0" toLane="0" via=":J_0_0" {ctl0}dir="s" state="{state}"/>
    <connection from="A" to="C" fromLane="0" toLane="0" via=":J_1_0" {ctl1}dir="r" state="{state}"/>
    <connection from=":J_0" to="B" fromLane="0" toLane="0" dir="s" state="M"/>
    <connection from=":J_1" to="C" fromLane="0" toLane="0" dir="r" state="M"/>
"""


def _write(tmp_path: Path, *, signal: bool = True, jtype: str = "traffic_light", state: str = "O",
           net_attrs: str = "", body: str | None = None, name: str = "t.net.xml") -> Path:
    ctl0 = 'tl="J" linkIndex="0" ' if signal else ""
    ctl1 = 'tl="J" linkIndex="1" ' if signal else ""
    text = _TEMPLATE.format(net_attrs=net_attrs, body=body if body is not None else
                            _T_JUNCTION.format(jtype=jtype, ctl0=ctl0, ctl1=ctl1, state=state))
    p = tmp_path / name
    p.write_text(text)
    return p


def test_hand_written_signalised_junction(tmp_path):
    raw = convert(_write(tmp_path))
    ids = raw.metadata["lane_ids"]
    assert ids == [":J_0_0", ":J_1_0", "A_0", "A_1", "B_0", "C_0"]
    lane = {lid: i for i, lid in enumerate(ids)}
    m = build(raw)
    # Successors go through the internal lanes.
    assert m.lanes.successors.row(lane["A_0"]).tolist() == sorted([lane[":J_0_0"], lane[":J_1_0"]])
    assert m.lanes.successors.row(lane[":J_0_0"]).tolist() == [lane["B_0"]]
    assert m.lanes.successors.row(lane[":J_1_0"]).tolist() == [lane["C_0"]]
    # Types, widths (lane, then edge type, then the 3.2 m default) and speeds.
    assert m.lanes.lane_type[lane["A_1"]] == LaneType.BIKE
    assert m.lanes.lane_type[lane["A_0"]] == LaneType.VEHICLE
    assert m.lanes.width[lane["A_1"]] == pytest.approx(1.5)
    assert m.lanes.width[lane["A_0"]] == pytest.approx(3.5)
    assert m.lanes.width[lane["C_0"]] == pytest.approx(3.2)
    assert m.lanes.speed_limit[lane[":J_1_0"]] == pytest.approx(8.0)
    assert m.lanes.left_neighbor[lane["A_0"]] == lane["A_1"]
    assert m.lanes.right_neighbor[lane["A_1"]] == lane["A_0"]
    # One intersection: the junction's internal lanes.
    assert len(m.intersections) == 1
    assert sorted(m.intersections.lanes.row(0).tolist()) == [lane[":J_0_0"], lane[":J_1_0"]]
    # One stop line at the end of A_0, one head per controlled connection.
    assert len(m.stop_lines) == 1
    np.testing.assert_allclose(m.stop_lines.points[0, :, 0] + 100.0, [95.0, 95.0])
    assert m.stop_lines.lanes.row(0).tolist() == [lane["A_0"]]
    assert m.stop_lines.control[0] == ControlType.SIGNAL
    assert sorted(m.signals.movement.tolist()) == sorted([Movement.STRAIGHT, Movement.RIGHT])
    assert raw.metadata["signal_links"] == [{"tl": "J", "link_index": 0}, {"tl": "J", "link_index": 1}]
    assert raw.metadata["tl_programs"]["J"][0]["phases"][2] == {"duration": 30.0, "state": "rG"}
    # Pedestrian-only lane -> sidewalk, walking area -> sidewalk, crossing -> crosswalk, tram lane dropped.
    assert len(m.sidewalks) == 2
    assert len(m.crosswalks) == 1
    assert "D_1" not in ids
    # Recentred on the middle of convBoundary, netOffset kept.
    assert raw.metadata["origin_shift"] == [100.0, 5.0]
    assert raw.metadata["net_offset"] == [-100.0, -200.0]
    assert len(m.road_edges) >= 3
    assert converter_for(tmp_path / "t.net.xml") is convert


def test_hand_written_stop_junctions(tmp_path):
    m = build(convert(_write(tmp_path, signal=False, jtype="allway_stop", state="w")))
    assert len(m.signals) == 0 and len(m.stop_signs) == 1
    assert m.stop_lines.control.tolist() == [ControlType.STOP_SIGN]
    m = build(convert(_write(tmp_path, signal=False, jtype="priority_stop", state="s")))
    assert len(m.stop_signs) == 1
    m = build(convert(_write(tmp_path, signal=False, jtype="priority", state="M")))
    assert len(m.stop_lines) == 0 and len(m.stop_signs) == 0


@pytest.mark.parametrize(
    ("attrs", "kind"),
    [
        ('allow="bus"', LaneType.BUS),
        ('allow="bus taxi"', LaneType.BUS),
        ('allow="bicycle"', LaneType.BIKE),
        ('disallow="pedestrian"', LaneType.VEHICLE),
        ("", LaneType.VEHICLE),
    ],
)
def test_lane_types_from_permissions(tmp_path, attrs, kind):
    body = f"""
    <edge id="A" from="a" to="b"><lane id="A_0" index="0" {attrs} speed="10" length="50" shape="0,0 50,0"/></edge>"""
    m = convert(_write(tmp_path, body=body))
    assert m.lanes.lane_type.tolist() == [kind]


def test_lefthand_network(tmp_path):
    m = convert(_write(tmp_path, net_attrs=' lefthand="true"'))
    assert m.handedness == Handedness.LEFT
    ids = m.metadata["lane_ids"]
    a0, a1 = ids.index("A_0"), ids.index("A_1")
    assert m.lanes.right_neighbor[a0] == a1 and m.lanes.left_neighbor[a1] == a0


_NO_INTERNAL = """
    <edge id="A" from="W" to="J" priority="1">
        <lane id="A_0" index="0" speed="13.89" length="95.00" shape="0.00,-1.60 95.00,-1.60"/>
    </edge>
    <edge id="B" from="J" to="E" priority="1">
        <lane id="B_0" index="0" speed="13.89" length="95.00" shape="105.00,-1.60 200.00,-1.60"/>
    </edge>
    <edge id="C" from="J" to="S" priority="1">
        <lane id="C_0" index="0" speed="13.89" length="95.00" shape="101.60,-5.00 101.60,-100.00"/>
    </edge>
    <tlLogic id="J" type="static" programID="0" offset="0"><phase duration="30" state="GG"/></tlLogic>
    <junction id="J" type="traffic_light" x="100.00" y="0.00" incLanes="A_0" intLanes="" shape="95,0 105,0"/>
    <connection from="A" to="B" fromLane="0" toLane="0" tl="J" linkIndex="0" dir="s" state="O"/>
    <connection from="A" to="C" fromLane="0" toLane="0" tl="J" linkIndex="1" dir="r" state="O"/>
"""


def test_network_without_internal_lanes_gets_connectors(tmp_path):
    raw = convert(_write(tmp_path, body=_NO_INTERNAL))
    assert raw.metadata["lane_ids"] == ["A_0", "B_0", "C_0", "A_0->B_0", "A_0->C_0"]
    assert raw.metadata["synthesized_connectors"] == 2
    m = build(raw)
    assert m.lanes.successors.row(0).tolist() == [3, 4]
    assert m.lanes.successors.row(3).tolist() == [1]
    assert m.lanes.successors.row(4).tolist() == [2]
    assert successor_gaps(m).max() < 1e-9
    assert sorted(m.intersections.lanes.row(0).tolist()) == [3, 4]
    assert m.lanes.movement[3] == Movement.STRAIGHT and m.lanes.movement[4] == Movement.RIGHT
    assert [m.signals.lanes.row(k).tolist() for k in range(len(m.signals))] == [[3], [4]]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("this is not xml <", "XML parse error"),
        ('<?xml version="1.0"?><osm version="0.6"></osm>', "<osm>"),
        ('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/></edge>'
         '<connection from="A" to="Z" fromLane="0" toLane="0"/></net>', "'Z_0'"),
        ('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,zz"/></edge></net>', "'A_0'"),
        ('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/></edge>'
         '<edge id="B" from="b" to="c"><lane id="B_0" index="0" shape="10,0 20,0"/></edge>'
         '<connection from="A" to="B" fromLane="0" toLane="0" tl="X" linkIndex="0"/></net>', "'X'"),
        ('<net><edge id=":Q_0" function="internal"><lane id=":Q_0_0" index="0" shape="0,0 10,0"/></edge></net>',
         "'Q'"),
        ("<net></net>", "no road lanes"),
        ('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/></edge>'
         '<edge id="A" from="b" to="c"><lane id="A_1" index="0" shape="10,0 20,0"/></edge></net>',
         "edge 'A': id is used twice"),
        ('<net><edge id="A" from="a" to="b"><lane id="A_0" index="0" shape="0,0 10,0"/>'
         '<lane id="A_0" index="1" shape="0,3 10,3"/></edge></net>', "lane 'A_0': id is used twice"),
    ],
)
def test_malformed_input_raises(tmp_path, text, needle):
    p = tmp_path / "bad.net.xml"
    p.write_text(text)
    with pytest.raises(MapValidationError, match=needle.replace("(", r"\(")):
        convert(p)
