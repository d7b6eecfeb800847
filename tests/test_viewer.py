"""The replay viewer in a real browser (headless Chromium driven by Selenium): the page loads from disk
with no console error; what it draws at the first, a middle and the last step is the engine's state;
scrubbing, stepping, follow mode, hovering and clicking change what is drawn; the events are on the
timeline; two replays play side by side in step; and ``terrazero view`` serves a folder of them.

The browser tests need Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and
skip, saying so, where they are absent."""

from __future__ import annotations

import io
import json
import shutil
import time
import urllib.request

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config.io import load_config
from terrazero_env.render import with_kinds
from terrazero_env.replay import HEADING_UNIT, POS_UNIT, ReplayRecorder, load_replay
from terrazero_env.viewer import index_html, serve, viewer_html, write_viewer

STEPS = 80


def _record(preset: str = "planner", seed: int = 6, steps: int = STEPS, **overrides):
    """A rollout of one world under the reference driver, recorded, with the engine's states per step.
    One car of the policy's holds the top of its class grid (full throttle, full lateral jerk) the
    whole time, as an untrained policy may: the reference driver keeps the rules, so without it the
    episode could hold no rule event for the timeline to mark."""
    cfg = load_config(preset, **overrides).with_overrides(num_worlds=1)
    e = core.Engine(cfg)
    e.reset([0], [seed])
    s = e.agent_states(0)
    car = core.AGENT_CLASSES.index("CAR")
    reckless = int(s["slot"][np.flatnonzero((s["slot"] >= 0) & (s["cls"] == car) & s["alive"])[0]])
    grid = e.action_values(car)
    top = int(np.lexsort((grid[:, 1], grid[:, 0]))[-1])
    rec = ReplayRecorder(e, meta={"title": f"{preset} seed {seed}", "score": 42.0})
    states = [with_kinds(e, 0, e.agent_states(0))]
    rec.capture()
    for _ in range(steps):
        actions = e.reference_actions()
        actions[reckless] = top
        e.step(actions)
        rec.capture()
        states.append(with_kinds(e, 0, e.agent_states(0)))
    return rec, states


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    rec, states = _record(**{"init.num_agents": [30, 30], "road_users.pedestrians.jaywalk_rate": 0.2})
    path = rec.save(tmp_path_factory.mktemp("replays") / "planner.tzr")
    return path, states


def _open(browser, page):
    browser.get(page.as_uri() if hasattr(page, "as_uri") else page)
    for _ in range(100):
        ok = browser.execute_script("return window.tzViewer && (window.tzViewer.ready || window.tzViewer.error)")
        if ok:
            break
        time.sleep(0.05)
    assert browser.execute_script("return window.tzViewer.error") is None
    assert browser.execute_script("return window.tzViewer.ready") is True
    return lambda: browser.execute_script("return window.tzViewer.state()")


@pytest.fixture(scope="module")
def page(recorded, tmp_path_factory):
    path, _ = recorded
    return write_viewer(path, tmp_path_factory.mktemp("pages") / "planner.html")


def _errors(browser):
    return [m for m in browser.get_log("browser") if m["level"] in ("SEVERE", "WARNING")]


def test_the_page_is_self_contained_and_loads_without_console_errors(browser, page):
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "<link" not in text
    browser.get_log("browser")
    state = _open(browser, page)()
    assert state["frame"] == 0 and state["frames"] == STEPS + 1
    assert _errors(browser) == []


@pytest.mark.parametrize("frame", [0, STEPS // 2, STEPS])
def test_the_agents_drawn_are_the_engines_states(browser, page, recorded, frame):
    _, states = recorded
    state = _open(browser, page)
    browser.execute_script("window.tzViewer.setFrame(arguments[0])", frame)
    drawn = {a["i"]: a for a in state()["panes"][0]["agents"]}
    s = states[frame]
    alive = set(np.flatnonzero(s["alive"]).tolist())
    assert set(drawn) == alive
    for i in alive:
        d = drawn[i]
        assert abs(d["x"] - s["x"][i]) <= POS_UNIT / 2 + 1e-9 and abs(d["y"] - s["y"][i]) <= POS_UNIT / 2 + 1e-9
        assert abs(np.angle(np.exp(1j * (d["heading"] - s["heading"][i])))) <= HEADING_UNIT / 2 + 1e-9
        assert abs(d["length"] - s["length"][i]) <= 0.006 and d["cls"] == s["cls"][i]
        assert d["kind"] == s["kind"][i]
    movers = list(core.MOVERS)
    assert {movers[d["mover"]] for d in drawn.values()} >= {"policy", "idm", "static"}
    assert any(d["kind"] > 0 for d in drawn.values()), "no static actor of the generators in the scene"


def test_scrubbing_and_stepping_change_what_is_drawn(browser, page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    state = _open(browser, page)
    before = {a["i"]: (a["x"], a["y"]) for a in state()["panes"][0]["agents"]}
    tl = browser.find_element(By.ID, "tz-timeline-canvas")
    ActionChains(browser).move_to_element_with_offset(tl, int(tl.size["width"] * 0.25), 0).click().perform()
    s = state()
    assert abs(s["frame"] - round(0.75 * STEPS)) <= 1
    after = {a["i"]: (a["x"], a["y"]) for a in s["panes"][0]["agents"]}
    moved = [i for i in set(before) & set(after) if np.hypot(*np.subtract(before[i], after[i])) > 1.0]
    assert moved
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    assert state()["frame"] == s["frame"] + 1
    browser.find_element(By.ID, "tz-back").click()
    browser.find_element(By.ID, "tz-back").click()
    assert state()["frame"] == s["frame"] - 1


def test_play_advances_and_pause_stops(browser, page):
    state = _open(browser, page)
    browser.execute_script("document.getElementById('tz-speed').value='8';"
                           "document.getElementById('tz-speed').dispatchEvent(new Event('change'));"
                           "window.tzViewer.play()")
    time.sleep(0.6)
    browser.execute_script("window.tzViewer.pause()")
    f = state()["frame"]
    assert f > 5
    time.sleep(0.3)
    assert state()["frame"] == f


def test_follow_keeps_the_agent_at_the_centre(browser, page, recorded):
    _, states = recorded
    state = _open(browser, page)
    policy = [a for a in state()["panes"][0]["agents"] if a["mover"] == 0]
    i = policy[0]["i"]
    browser.execute_script("window.tzViewer.zoom(6); window.tzViewer.follow(arguments[0])", i)
    for frame in (10, 40):
        browser.execute_script("window.tzViewer.setFrame(arguments[0])", frame)
        s = state()
        if not states[frame]["alive"][i]:
            continue
        assert s["follow"] == i
        assert abs(s["camera"]["cx"] - states[frame]["x"][i]) < 0.01
        me = next(a for a in s["panes"][0]["agents"] if a["i"] == i)
        w = browser.execute_script("return document.querySelector('.tz-pane canvas').clientWidth")
        h = browser.execute_script("return document.querySelector('.tz-pane canvas').clientHeight")
        assert abs(me["sx"] - w / 2) < 1 and abs(me["sy"] - h / 2) < 1
    browser.execute_script("window.tzViewer.follow(-1)")
    cam = state()["camera"]
    browser.execute_script("window.tzViewer.setFrame(70)")
    assert state()["camera"]["cx"] == cam["cx"]


def test_clicking_an_agent_shows_its_state_and_reward_terms(browser, page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    state = _open(browser, page)
    browser.execute_script("window.tzViewer.setFrame(20)")
    policy = next(a for a in state()["panes"][0]["agents"] if a["mover"] == 0)
    browser.execute_script("window.tzViewer.follow(arguments[0]); window.tzViewer.zoom(8);"
                           "window.tzViewer.follow(-1)", policy["i"])
    me = next(a for a in state()["panes"][0]["agents"] if a["i"] == policy["i"])
    canvas = browser.find_element(By.CSS_SELECTOR, ".tz-pane canvas")
    off_x = int(me["sx"] - canvas.size["width"] / 2)
    off_y = int(me["sy"] - canvas.size["height"] / 2)
    ActionChains(browser).move_to_element_with_offset(canvas, off_x, off_y).click().perform()
    assert state()["selected"] == policy["i"]
    info = browser.find_element(By.ID, "tz-info").text
    assert "policy" in info and "reward" in info and "timestep" in info


def test_events_are_marked_on_the_timeline_and_jumped_to(browser, page, recorded):
    path, _ = recorded
    rep = load_replay(path)
    names = list(core.STEP_EVENTS)
    expect = sorted((int(t), int(i), names[b]) for t, i, bits, _ in rep.events for b in range(len(names))
                    if bits & (1 << b) and names[b] != "comfort")
    assert expect, "the recorded episode has no event to mark"
    state = _open(browser, page)
    marks = sorted((m["frame"], m["agent"], m["kind"]) for m in state()["markers"])
    assert marks == expect
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    tl = browser.find_element(By.ID, "tz-timeline-canvas")
    m = state()["markers"][0]
    ActionChains(browser).move_to_element_with_offset(tl, int(m["x"] - tl.size["width"] / 2), 0).perform()
    assert f"step {m['frame']}: {m['kind'].replace('_', ' ')}, agent {m['agent']}" in tl.get_attribute("title")
    first = browser.execute_script("return window.tzViewer.jumpEvent(1)")
    assert first == min(t for t, _, _ in expect if t > 0)
    assert state()["frame"] == first


def test_layer_toggles_and_a_screenshot_of_the_scene(browser, page, tmp_path):
    from PIL import Image

    state = _open(browser, page)
    policy = next(a for a in state()["panes"][0]["agents"] if a["mover"] == 0)
    browser.execute_script("window.tzViewer.zoom(5); window.tzViewer.follow(arguments[0]);"
                           "window.tzViewer.setFrame(30)", policy["i"])
    img = np.asarray(Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")).astype(int)
    (tmp_path / "shot.png").write_bytes(browser.get_screenshot_as_png())
    blue = (np.abs(img - np.array([0x3D, 0x7B, 0xE0])).sum(-1) < 30).sum()
    assert blue > 50, "no policy agent (blue) in the screenshot"
    browser.execute_script("window.tzViewer.setLayer('lanes', false); window.tzViewer.setLayer('edges', false)")
    assert state()["layers"]["lanes"] is False
    img2 = np.asarray(Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")).astype(int)
    assert (np.abs(img - img2).sum(-1) > 30).sum() > 500, "turning the lanes off changed nothing"


def test_two_replays_play_side_by_side_in_step(browser, recorded, tmp_path):
    path, _ = recorded
    rec_b, _ = _record(seed=6, steps=STEPS - 20, **{"init.num_agents": [30, 30],
                                                     "road_users.pedestrians.jaywalk_rate": 0.2})
    b = rec_b.save(tmp_path / "b.tzr")
    page = write_viewer([path, b], tmp_path / "vs.html", labels=["A", "B"])
    state = _open(browser, page)
    s = state()
    assert len(s["panes"]) == 2 and s["frames"] == STEPS + 1
    browser.execute_script("window.tzViewer.setFrame(30)")
    s = state()
    pa = {a["i"]: a for a in s["panes"][0]["agents"]}
    pb = {a["i"]: a for a in s["panes"][1]["agents"]}
    common = set(pa) & set(pb)
    assert common and all(abs(pa[i]["x"] - pb[i]["x"]) < 1e-6 for i in common)  # same scene, same step
    assert [p["title"] for p in s["panes"]] == ["planner seed 6"] * 2
    assert [p["label"] for p in s["panes"]] == ["A", "B"]
    titles = browser.execute_script("return Array.from(document.querySelectorAll('.tz-title')).map(e => e.textContent)")
    assert titles[0].startswith("A: planner seed 6") and titles[1].startswith("B: ")


def test_the_server_lists_and_serves_a_folder(recorded, tmp_path):
    path, _ = recorded
    (tmp_path / "family_a").mkdir()
    shutil.copy(path, tmp_path / "family_a" / "one.tzr")
    (tmp_path / "broken.tzr").write_bytes(b"not a replay")
    server = serve(tmp_path, port=0, background=True)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        index = urllib.request.urlopen(base + "/").read().decode()
        assert "view/family_a/one.tzr" in index and "unreadable" in index
        entries = json.loads(urllib.request.urlopen(base + "/index.json").read())
        assert {e["href"] for e in entries} == {"view/family_a/one.tzr", "view/broken.tzr"}
        page = urllib.request.urlopen(base + "/view/family_a/one.tzr").read().decode()
        assert 'data-tz-replay="0"' in page
        for bad in ("/view/../etc/passwd", "/view/broken.tzr", "/nothing"):
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(base + bad)
    finally:
        server.shutdown()
        server.server_close()


def test_an_index_groups_entries_by_family():
    text = index_html([{"href": "a/1.html", "title": "scene 1", "group": "jaywalker", "score": 71.25},
                       {"href": "a/2.html", "title": "scene 2", "group": "jaywalker"},
                       {"href": "b/1.html", "title": "scene 1", "group": "construction_zone", "score": 10}])
    assert text.count("<tr>") == 2 and "71.2" in text and 'href="a/2.html"' in text


def test_a_page_refuses_what_is_not_a_replay(tmp_path):
    (tmp_path / "x.tzr").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a gzip"):
        viewer_html(tmp_path / "x.tzr")
    with pytest.raises(ValueError, match="at least one"):
        viewer_html([])


def test_a_baseline_drivers_ego_is_named_by_its_driver(browser, tmp_path):
    """A replay whose meta names a baseline driver (``terrazero eval --driver reference --replay``)
    labels the ego by the driver in the legend and the agent panel; a policy's stays "policy"."""
    rec, _ = _record(steps=5)
    pages = {}
    for driver in ("reference", "policy"):
        tzr = rec.save(tmp_path / f"{driver}.tzr", driver=driver)
        pages[driver] = write_viewer(tzr, tmp_path / f"{driver}.html")
    state = _open(browser, pages["reference"])
    legend = browser.execute_script("return document.getElementById('tz-legend').textContent")
    assert "reference driver (ego)" in legend and "policy" not in legend
    ego = next(a for a in state()["panes"][0]["agents"] if a["mover"] == 0)
    browser.execute_script("window.tzViewer.select(arguments[0])", ego["i"])
    info = browser.execute_script("return document.getElementById('tz-info').textContent")
    assert "reference driver (ego)" in info
    _open(browser, pages["policy"])
    legend = browser.execute_script("return document.getElementById('tz-legend').textContent")
    assert "policy" in legend and "driver (ego)" not in legend.replace("IDM driver (ego)", "").replace(
        "planner driver (ego)", "")
