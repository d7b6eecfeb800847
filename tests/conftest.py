"""Shared fixtures: a tiny hand-made 4-way junction whose every derived value is known by hand."""

from __future__ import annotations

import os
import shutil

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

from terrazero_env.maps import (  # noqa: E402
    AgentType,
    Handedness,
    Intersections,
    Lanes,
    MapData,
    Movement,
    Polygons,
    Signals,
    StopLines,
    StopSigns,
    Tracks,
)


@pytest.fixture(scope="session", autouse=True)
def _sb3_log_folder(tmp_path_factory):
    """Stock SB3 models (the third-party client tests) make a ``tempdir/SB3-<time>`` folder on every
    ``learn`` without a log folder; ``SB3_LOGDIR`` keeps them in this session's temporary folder
    instead of the machine's."""
    if "SB3_LOGDIR" in os.environ:
        yield
        return
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3_logs"))
    try:
        yield
    finally:
        os.environ.pop("SB3_LOGDIR", None)


ARM = 40.0  # length of each approach (m)
HALF = 5.0  # half size of the junction box (m)
OFF = 1.75  # lane centre offset from the road axis (m): one lane each way, 3.5 m wide


def _line(a, b, step=5.0):
    a, b = np.asarray(a, float), np.asarray(b, float)
    k = max(2, int(np.ceil(np.linalg.norm(b - a) / step)) + 1)
    return np.linspace(a, b, k)


def _bezier(p0, p1, p2, k=12):
    t = np.linspace(0, 1, k)[:, None]
    p0, p1, p2 = (np.asarray(p, float) for p in (p0, p1, p2))
    return (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t**2 * p2


def tiny_junction(with_intersections: bool = True, tie_stop_lines: bool = True, tracks: bool = False) -> MapData:
    """A right-hand-traffic plus junction: four legs, one lane in and one out per leg, and left,
    straight and right connectors from every incoming lane. Incoming lanes 0..3 (from E, N, W, S),
    outgoing 4..7, then 12 connectors (3 per incoming lane: right, straight, left)."""
    rot = [np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) for a in (0, np.pi / 2, np.pi, 3 * np.pi / 2)]
    incoming, outgoing = [], []
    for r in rot:  # leg pointing along +x, rotated
        incoming.append(_line(r @ [HALF + ARM, OFF], r @ [HALF, OFF]))  # driving towards the centre
        outgoing.append(_line(r @ [HALF, -OFF], r @ [HALF + ARM, -OFF]))
    connectors, succ_in, conn_succ, movements = [], [[] for _ in range(4)], [], []
    for i in range(4):
        start = incoming[i][-1]
        # Legs are numbered counter-clockwise (E, N, W, S); arriving from leg i, a right turn leaves on
        # leg i + 1 and a left turn on leg i + 3.
        for j, mv in (((i + 1) % 4, Movement.RIGHT), ((i + 2) % 4, Movement.STRAIGHT), ((i + 3) % 4, Movement.LEFT)):
            end = outgoing[j][0]
            if mv == Movement.STRAIGHT:
                pts = _line(start, end, 2.0)
            else:
                d_in = incoming[i][-1] - incoming[i][-2]
                d_in /= np.linalg.norm(d_in)
                d_out = outgoing[j][1] - outgoing[j][0]
                d_out /= np.linalg.norm(d_out)
                # Control point where the two tangent lines meet.
                A = np.stack([d_in, -d_out], axis=1)
                s = np.linalg.solve(A, end - start)
                pts = _bezier(start, start + s[0] * d_in, end)
            succ_in[i].append(8 + len(connectors))
            connectors.append(pts)
            conn_succ.append([4 + j])
            movements.append(mv)
    # Outgoing lanes loop back to the opposite incoming lane through a U-turn far out, keeping the
    # graph closed: outgoing j connects to incoming j via a semicircle.
    uturns, uturn_succ = [], []
    for j in range(4):
        a, b = outgoing[j][-1], incoming[j][0]
        centre = (a + b) / 2
        r = np.linalg.norm(b - a) / 2
        base = np.arctan2(*(a - centre)[::-1])
        ang = base + np.linspace(0, np.pi, 9)
        arc = centre + r * np.stack([np.cos(ang), np.sin(ang)], axis=1)
        arc[-1] = b
        uturns.append(arc)
        uturn_succ.append([j])
    centerlines = incoming + outgoing + connectors + uturns
    n_uturn0 = 8 + len(connectors)
    successors = [succ_in[i] for i in range(4)] + [[n_uturn0 + j] for j in range(4)] + conn_succ + uturn_succ
    lanes = Lanes.create(centerlines, width=3.5, successors=successors)
    bars = []
    for i in range(4):
        e = incoming[i][-1]
        d = incoming[i][-1] - incoming[i][-2]
        d /= np.linalg.norm(d)
        nrm = np.array([-d[1], d[0]])
        bars.append([e + nrm * OFF, e - nrm * OFF])
    stop_lines = StopLines.create(np.array(bars), [[i] for i in range(4)] if tie_stop_lines else None)
    # Signals on stop lines 0 and 2 (one head per movement), stop signs on 1 and 3.
    sig_sl = [0, 0, 0, 2, 2, 2]
    sig_mv = [Movement.LEFT, Movement.STRAIGHT, Movement.RIGHT] * 2
    signals = Signals.create(sig_sl, sig_mv, np.array([bars[s][0] for s in sig_sl]))
    stop_signs = StopSigns.create(np.array([bars[1][1], bars[3][1]]), [1, 3])
    crosswalk = Polygons([[[HALF, -3.5], [HALF + 3, -3.5], [HALF + 3, 3.5], [HALF, 3.5]]])
    trk = None
    if tracks:
        steps = 5
        state = np.zeros((2, steps, 6))
        state[:, :, 0] = np.linspace(30, 26, steps)
        state[:, :, 1] = OFF
        state[:, :, 3] = np.pi
        state[:, :, 4] = -10.0
        valid = np.ones((2, steps), bool)
        valid[1, :2] = False
        trk = Tracks(agent_type=np.array([AgentType.CAR, AgentType.CYCLIST], np.uint8),
                     size=np.array([[4.5, 2.0, 1.5], [1.8, 0.6, 1.7]], np.float32), state=state, valid=valid)
    return MapData(
        lanes=lanes,
        crosswalks=crosswalk,
        stop_lines=stop_lines,
        signals=signals,
        stop_signs=stop_signs,
        intersections=Intersections.create([list(range(8, 20))]) if with_intersections else None,
        handedness=Handedness.RIGHT,
        tracks=trk,
        name="tiny_junction",
        metadata={"source": "tests"},
    )


@pytest.fixture
def tiny() -> MapData:
    return tiny_junction()


def straight_road(length: float = 200.0) -> MapData:
    """Two opposing lanes along x (right-hand traffic) closed into a loop by U-turns at both ends,
    with straight road edges at y = +-3.5 m. Lane 0 runs east at y = -1.75, lane 1 west at y = +1.75."""
    east = _line([0, -OFF], [length, -OFF], 5.0)
    west = _line([length, OFF], [0, OFF], 5.0)
    ang = np.linspace(-np.pi / 2, np.pi / 2, 9)
    turn_east = np.stack([length + OFF * np.cos(ang), OFF * np.sin(ang)], axis=1)  # (L,-1.75) -> (L, 1.75)
    turn_west = np.stack([-OFF * np.cos(ang), -OFF * np.sin(ang)], axis=1)  # (0, 1.75) -> (0, -1.75)
    turn_east[0], turn_east[-1] = east[-1], west[0]
    turn_west[0], turn_west[-1] = west[-1], east[0]
    lanes = Lanes.create([east, west, turn_east, turn_west], width=3.5, successors=[[2], [3], [1], [0]])
    edges = [np.array([[-20.0, -3.5], [length + 20.0, -3.5]]), np.array([[-20.0, 3.5], [length + 20.0, 3.5]])]
    from terrazero_env.maps import Polylines

    return MapData(lanes=lanes, road_edges=Polylines(edges), intersections=Intersections.create([]),
                   handedness=Handedness.RIGHT, name="straight_road")


CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through selenium (Debian's ``chromium`` and ``chromium-driver``; ``.ci/run``
    installs them); the browser tests skip, saying why, where they are absent."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
                "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()
