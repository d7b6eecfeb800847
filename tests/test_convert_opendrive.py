"""OpenDRIVE converter: hand-checkable synthetic roads, malformed input, and real CARLA towns."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from realdata import fetch

from terrazero_env.maps import Handedness, LaneType, MapValidationError, build, load, save
from terrazero_env.maps.analysis import lane_graph_report, successor_gaps
from terrazero_env.maps.convert import converter_for
from terrazero_env.maps.convert._opendrive_geometry import Geometry, plan_view
from terrazero_env.maps.convert.opendrive import convert

# --------------------------------------------------------------------------------------------------
# synthetic files

LANE_W = 3.0


def _xodr(geometry: str, length: float, *, rule: str = "", elevation: str = "", header: bool = True,
          left_lane: bool = True) -> str:
    """One road whose lane -1 is centred on the reference line (lane offset +W/2), with an optional
    left driving lane +1 and a sidewalk -2."""
    left = (f'<left><lane id="1" type="driving"><width sOffset="0" a="{LANE_W}" b="0" c="0" d="0"/>'
            '<roadMark sOffset="0" type="solid" color="yellow"/></lane></left>') if left_lane else ""
    return f"""<?xml version="1.0"?>
<OpenDRIVE>
  {'<header revMajor="1" revMinor="6" name="synthetic"/>' if header else ''}
  <road name="r" length="{length}" id="1" junction="-1" {rule}>
    <link/>
    <type s="0" type="town"><speed max="36" unit="km/h"/></type>
    <planView>{geometry}</planView>
    <elevationProfile>{elevation}</elevationProfile>
    <lanes>
      <laneOffset s="0" a="{LANE_W / 2}" b="0" c="0" d="0"/>
      <laneSection s="0">
        {left}
        <center><lane id="0" type="none"><roadMark sOffset="0" type="broken" color="white"/></lane></center>
        <right>
          <lane id="-1" type="driving"><width sOffset="0" a="{LANE_W}" b="0" c="0" d="0"/></lane>
          <lane id="-2" type="sidewalk"><width sOffset="0" a="2" b="0" c="0" d="0"/></lane>
        </right>
      </laneSection>
    </lanes>
  </road>
</OpenDRIVE>
"""


def _write(tmp_path: Path, text: str, name: str = "road.xodr") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def clothoid_closed_form(x0, y0, h0, k0, k1, length):
    """End point of a clothoid from Fresnel integrals (scipy), any start curvature."""
    special = pytest.importorskip("scipy.special")
    c = (k1 - k0) / length
    a = np.sqrt(np.pi / abs(c))
    w0, w1 = k0 / c, length + k0 / c  # heading = h0 - k0^2 / (2c) + c/2 * (u + k0/c)^2
    s0, c0 = special.fresnel(w0 / a)
    s1, c1 = special.fresnel(w1 / a)
    z = a * ((c1 - c0) + 1j * np.sign(c) * (s1 - s0))
    z *= np.exp(1j * (h0 - k0 * k0 / (2 * c)))
    return x0 + z.real, y0 + z.imag


# --------------------------------------------------------------------------------------------------
# geometry


@pytest.mark.parametrize("k0,k1,length", [(0.0, 0.05, 80.0), (-0.02, 0.04, 120.0), (0.03, 0.01, 60.0)])
def test_spiral_end_matches_fresnel_closed_form(tmp_path, k0, k1, length):
    x0, y0, h0 = 12.0, -7.0, 0.4
    geom = (f'<geometry s="0" x="{x0}" y="{y0}" hdg="{h0}" length="{length}">'
            f'<spiral curvStart="{k0}" curvEnd="{k1}"/></geometry>')
    m = build(convert(_write(tmp_path, _xodr(geom, length, left_lane=False))))
    assert len(m.lanes) == 1
    end = m.lanes.centerline.row(0)[-1]
    ex, ey = clothoid_closed_form(x0, y0, h0, k0, k1, length)
    assert np.hypot(end[0] - ex, end[1] - ey) < 0.01
    # Sampled every metre of reference line; the lane is on it, so its step is the arc step.
    step = np.linalg.norm(np.diff(m.lanes.centerline.row(0)[:, :2], axis=0), axis=1)
    assert step.max() <= 1.0 + 1e-6 and step.sum() == pytest.approx(length, abs=0.01)


LINE_ARC_PP3 = (
    '<geometry s="0" x="0" y="0" hdg="0" length="10"><line/></geometry>'
    f'<geometry s="10" x="10" y="0" hdg="0" length="{5 * np.pi}"><arc curvature="0.1"/></geometry>'
    f'<geometry s="{10 + 5 * np.pi}" x="20" y="10" hdg="{np.pi / 2}" length="5">'
    '<paramPoly3 aU="0" bU="1" cU="0" dU="0" aV="0" bV="0" cV="0" dV="0" pRange="arcLength"/></geometry>'
    f'<geometry s="{15 + 5 * np.pi}" x="20" y="15" hdg="{np.pi / 2}" length="4">'
    '<paramPoly3 aU="0" bU="4" cU="0" dU="0" aV="0" bV="0" cV="2" dV="0" pRange="normalized"/></geometry>'
)
LINE_ARC_PP3_LENGTH = 19 + 5 * np.pi


def test_line_arc_parampoly3_by_hand(tmp_path):
    elevation = '<elevation s="0" a="1" b="0.1" c="0" d="0"/>'
    m = build(convert(_write(tmp_path, _xodr(LINE_ARC_PP3, LINE_ARC_PP3_LENGTH, elevation=elevation))))
    assert len(m.lanes) == 2 and m.name == "synthetic"
    along = m.lanes.centerline.row(0)  # lane -1 (lanes come in id order), centred on the reference line
    # Line: (0,0) -> (10,0); quarter arc of radius 10 centred at (10,10) -> (20,10); straight
    # paramPoly3 (p = s) -> (20,15); normalized paramPoly3: u = 4p, v = 2p^2 -> local (4, 2).
    for target in ([0, 0], [10, 0], [20, 10], [20, 15]):
        assert np.min(np.linalg.norm(along[:, :2] - target, axis=1)) < 1e-6
    assert along[-1, :2] == pytest.approx([20 - 2, 15 + 4], abs=1e-9)
    mid_arc = along[np.argmin(np.linalg.norm(along[:, :2] - [17.07, 2.93], axis=1))]
    assert np.hypot(mid_arc[0] - 10, mid_arc[1] - 10) == pytest.approx(10, abs=1e-9)
    # z = 1 + 0.1 s: at the arc's end s = 10 + 5 pi.
    at_arc_end = along[np.argmin(np.linalg.norm(along[:, :2] - [20, 10], axis=1))]
    assert at_arc_end[2] == pytest.approx(1 + 0.1 * (10 + 5 * np.pi))
    # The left lane runs against the reference line (RHT), 3 m to the left of it.
    against = m.lanes.centerline.row(1)
    end_heading = np.pi / 2 + np.arctan2(4, 4)  # d(u, v)/dp = (4, 4p) at p = 1
    left_normal = np.array([-np.sin(end_heading), np.cos(end_heading)])
    assert against[0, :2] == pytest.approx(along[-1, :2] + LANE_W * left_normal, abs=1e-9)
    assert against[-1, :2] == pytest.approx([0, LANE_W], abs=1e-9)
    assert m.lanes.width == pytest.approx([LANE_W, LANE_W])
    assert m.lanes.speed_limit == pytest.approx([10.0, 10.0])
    assert set(m.lanes.lane_type.tolist()) == {LaneType.VEHICLE}
    # Road lines: yellow solid on lane +1's outer border and the dashed white centre mark.
    assert sorted(m.road_lines.line_type.tolist()) == [1, 2]
    assert len(m.sidewalks) == 1 and len(m.road_edges) == 2


def test_plan_view_poly3_is_arc_length_parametrised():
    g = Geometry(0.0, 0.0, 0.0, 0.0, 10.0, "poly3", (0.0, 0.0, 0.02, 0.0))
    x, y, _ = plan_view([g], np.linspace(0, 10, 201))
    step = np.linalg.norm(np.diff(np.stack([x, y], 1), axis=0), axis=1)
    assert step == pytest.approx(0.05, abs=1e-5)
    assert y == pytest.approx(0.02 * x**2, abs=1e-9)


@pytest.mark.parametrize("rule,option,left_hand", [("", None, False), ('rule="RHT"', None, False),
                                                    ('rule="LHT"', None, True), ("", Handedness.LEFT, True)])
def test_handedness_rule_attribute(tmp_path, rule, option, left_hand):
    geom = '<geometry s="0" x="0" y="0" hdg="0" length="30"><line/></geometry>'
    m = build(convert(_write(tmp_path, _xodr(geom, 30.0, rule=rule)), handedness=option))
    assert m.handedness == (Handedness.LEFT if left_hand else Handedness.RIGHT)
    right_lane = m.lanes.centerline.row(0)  # lane -1, y = 0
    left_lane = m.lanes.centerline.row(1)  # lane +1, y = 3
    assert right_lane[0, 1] == pytest.approx(0) and left_lane[0, 1] == pytest.approx(LANE_W)
    going_east = right_lane[-1, 0] > right_lane[0, 0]
    assert going_east != left_hand
    assert (left_lane[-1, 0] > left_lane[0, 0]) == left_hand


def test_registered_for_xodr_suffix():
    assert converter_for("town.xodr") is convert


# --------------------------------------------------------------------------------------------------
# malformed input


@pytest.mark.parametrize("text,fragment", [
    ("this is not xml <", "not a well-formed"),
    ("<OpenDRIVE><road/></OpenDRIVE>", "<header>"),
    ('<OpenDRIVE><header/></OpenDRIVE>', "<road>"),
    ('<Foo/>', "<OpenDRIVE>"),
])
def test_malformed_file_names_the_problem(tmp_path, text, fragment):
    with pytest.raises(MapValidationError, match=fragment):
        convert(_write(tmp_path, text))


@pytest.mark.parametrize("geometry,fragment", [
    ('<geometry s="0" x="abc" y="0" hdg="0" length="10"><line/></geometry>', r"road 1 <geometry>.*x='abc'"),
    ('<geometry s="0" x="0" y="0" hdg="0" length="-3"><line/></geometry>', r"road 1 <geometry>.*negative"),
    ('<geometry s="0" x="0" y="0" hdg="0" length="10"><spiral curvStart="0"/></geometry>', r"<spiral>.*curvEnd"),
    ('<geometry s="0" x="0" y="0" hdg="nan" length="10"><line/></geometry>', "not finite"),
    ('<geometry s="0" x="0" y="0" hdg="0" length="10"/>', "expected one of line"),
    ("", r"road 1 <planView>.*no geometry"),
])
def test_bad_geometry_names_the_element(tmp_path, geometry, fragment):
    with pytest.raises(MapValidationError, match=fragment):
        convert(_write(tmp_path, _xodr(geometry, 10.0)))


def test_huge_lengths_are_refused_before_sampling(tmp_path):
    """One attribute must not make the converter sample gigabytes of geometry."""
    big = '<geometry s="0" x="0" y="0" hdg="0" length="1e7"><spiral curvStart="0" curvEnd="0.001"/></geometry>'
    with pytest.raises(MapValidationError, match=r"road 1 <geometry>.*length 1e\+07 m is over the"):
        convert(_write(tmp_path, _xodr(big, 10.0)))
    line = '<geometry s="0" x="0" y="0" hdg="0" length="10"><line/></geometry>'
    with pytest.raises(MapValidationError, match=r"road 1: length 1e\+07 m is outside"):
        convert(_write(tmp_path, _xodr(line, 1e7)))


def test_duplicate_road_ids_are_refused(tmp_path):
    line = '<geometry s="0" x="0" y="0" hdg="0" length="10"><line/></geometry>'
    text = _xodr(line, 10.0)
    road = text[text.index("<road "):text.index("</road>") + len("</road>")]
    text = text.replace("</road>", "</road>\n" + road, 1)
    with pytest.raises(MapValidationError, match="two roads have the id '1'"):
        convert(_write(tmp_path, text))


# --------------------------------------------------------------------------------------------------
# real CARLA towns

TOWNS = ["Town01", "Town03", "Town10HD"]
_cache: dict[str, tuple] = {}


def _folder() -> Path:
    return fetch("osm-to-xodr", "0.3.0", "sdist") / "osm_to_xodr-0.3.0" / "data" / "carla-opendrive-examples"


def _town(name: str):
    if name not in _cache:
        path = _folder() / f"{name}.xodr"
        raw = convert(path)
        _cache[name] = (path, raw, build(raw))
    return _cache[name]


def _xml_driving_lanes(path: Path) -> int:
    """Driving lanes straight from the XML: one per lane element per lane section of positive length."""
    n = 0
    for road in ET.parse(path).getroot().iter("road"):
        secs = road.findall("lanes/laneSection")
        starts = [float(s.get("s")) for s in secs] + [float(road.get("length"))]
        order = np.argsort(starts[:-1], kind="stable")
        ends = sorted(starts[:-1])[1:] + [starts[-1]]
        for i, k in enumerate(order):
            if ends[i] - starts[k] > 1e-3:
                n += sum(ln.get("type") in ("driving", "biking", "bus") for ln in secs[k].iter("lane"))
    return n


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.parametrize("name", TOWNS)
def test_carla_town_converts_and_builds(name, tmp_path):
    path, raw, m = _town(name)
    assert raw.metadata["source"] == "opendrive" and raw.metadata["file"] == f"{name}.xodr"
    assert m.name == name and m.handedness == Handedness.RIGHT
    assert len(m.lanes) == _xml_driving_lanes(path)
    junctions = len(ET.parse(path).getroot().findall("junction"))
    assert 0 < len(m.intersections) <= junctions
    assert len(m.stop_lines) > 0 and len(m.signals) > 0
    assert (m.stop_lines.lanes.lengths() > 0).all() and (m.stop_lines.intersection >= 0).all()
    assert (m.signals.lanes.lengths() > 0).all()
    # Every bar lies across the ends of the lanes it controls.
    cl = m.lanes.centerline
    for i in range(len(m.stop_lines)):
        a, b = m.stop_lines.points[i, 0, :2], m.stop_lines.points[i, 1, :2]
        ends = cl.values[cl.offsets[m.stop_lines.lanes.row(i) + 1] - 1, :2]
        t = np.clip((ends - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1)
        assert np.linalg.norm(a + t[:, None] * (b - a) - ends, axis=1).max() < 0.05
    assert len(m.road_edges) > 0 and len(m.road_lines) > 0 and len(m.sidewalks) > 0
    out = save(m, tmp_path / f"{name}.tzb")
    assert len(load(out).lanes) == len(m.lanes)


@pytest.mark.realdata
@pytest.mark.parametrize("name", TOWNS)
def test_carla_lane_graph_is_connected_and_continuous(name):
    _, raw, m = _town(name)
    gaps = successor_gaps(m)
    assert gaps.size > len(m.lanes) and gaps.max() <= 0.5
    rep = lane_graph_report(m)
    n = len(m.lanes)
    connected = n - np.union1d(rep["no_predecessor"], rep["no_successor"]).size
    assert connected / n >= 0.99, (rep["no_predecessor"], rep["no_successor"])
    assert raw.metadata["dropped_links"] <= 1
    # Lanes run the legal way: along their section's neighbours, never head-on to a successor.
    cl = m.lanes.centerline
    first, last = cl.offsets[:-1], cl.offsets[1:] - 1
    d_out = cl.values[last, :2] - cl.values[last - 1, :2]
    d_in = cl.values[first + 1, :2] - cl.values[first, :2]
    src, dst = m.lanes.successors.row_ids(), m.lanes.successors.values
    cos = np.sum(d_out[src] * d_in[dst], 1) / np.linalg.norm(d_out[src], axis=1) / np.linalg.norm(d_in[dst], axis=1)
    assert np.mean(cos > 0.5) > 0.99


@pytest.mark.realdata
def test_carla_crosswalks_and_stop_signs():
    path, _, m = _town("Town10HD")
    objs = [o for o in ET.parse(path).getroot().iter("object") if o.get("type") == "crosswalk"]
    assert len(m.crosswalks) == len(objs) == 16
    assert len(m.stop_signs) > 0


@pytest.mark.realdata
def test_real_spiral_road_matches_fresnel_and_the_next_geometry():
    path = _folder() / "Mine_01.xodr"
    found = 0
    for road in ET.parse(path).getroot().iter("road"):
        geoms = road.findall("planView/geometry")
        for i, g in enumerate(geoms):
            sp = g.find("spiral")
            if sp is None:
                continue
            vals = {k: float(g.get(k)) for k in ("s", "x", "y", "hdg", "length")}
            k0, k1 = float(sp.get("curvStart")), float(sp.get("curvEnd"))
            geo = Geometry(vals["s"], vals["x"], vals["y"], vals["hdg"], vals["length"], "spiral", (k0, k1))
            x, y, _ = plan_view([geo], np.array([vals["s"] + vals["length"]]))
            ex, ey = clothoid_closed_form(vals["x"], vals["y"], vals["hdg"], k0, k1, vals["length"])
            assert np.hypot(x[0] - ex, y[0] - ey) < 0.01
            if i + 1 < len(geoms):
                nxt = geoms[i + 1]
                assert np.hypot(x[0] - float(nxt.get("x")), y[0] - float(nxt.get("y"))) < 0.01
            found += 1
    assert found >= 1
    build(convert(path))
