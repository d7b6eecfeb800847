"""Hostile inputs to the WOMD readers (Scenario TFRecords, GPUDrive JSON) and to ``maps build-dataset``
(docs/hardening.md, third pass). Allocation cases run in a child process under an address-space cap
(``RLIMIT_AS``) with a timeout, so a runaway allocation, a recursion or a hang fails the test naming the
input instead of taking the run down. Every input is synthetic (tests/womd_scenes.py): no WOMD data.

Classes: (1) memory or work a small input asks for, counted before anything is allocated; (2) writes
outside the output folder (links at the manifest, the markers, the scene files; tampered markers);
(3) hangs on FIFOs; (4) one bad input stopping the whole build; (5) silent acceptance (string booleans,
duplicate ids, truncated scenes kept on resume); (6) errors that name no file or field.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from womd_scenes import hostile_json, hostile_records, scene, to_gpudrive_json

from terrazero_env.foundation.safe_files import UnsafeFileError
from terrazero_env.maps.build_dataset import build_dataset
from terrazero_env.maps.builder import MapValidationError
from terrazero_env.maps.convert import gpudrive_json, womd
from terrazero_env.maps.convert.tfrecord import iter_records, write_records
from terrazero_env.maps.convert.womd_scene import LIMITS, SceneLane
from terrazero_env.maps.terrabin import load

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0
MEMORY_CAP = 2 * 1024**3  # bytes of address space: every hostile input asked for more


def _cap() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_child(code: str | None = None, *, args: list[str] | None = None, timeout: float = TIMEOUT,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``code`` (or ``python ARGS``) in a fresh interpreter under the memory cap; a signal death or a
    timeout fails the calling test naming the input."""
    argv = [sys.executable, *(args if args is not None else ["-c", textwrap.dedent(code or "")])]
    env = {**os.environ, "PYTHONWARNINGS": "default", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=_cap, cwd=cwd or ROOT,
                           env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: no exit within {timeout} s for {argv[1:]!r:.300}")
    if r.returncode < 0:
        pytest.fail(f"crash: signal {-r.returncode} for {argv[1:]!r:.300}\n{r.stderr[-2000:]}")
    return r


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_child(args=["-m", "terrazero_env.cli", *args], cwd=cwd)


def _tf(path: Path, scenes) -> Path:
    return womd.write_tfrecord(path, scenes)


def _named(sid: str, offset: float = 0.0):
    s = scene(offset=(offset, 0.0))
    s.scenario_id = sid
    return s


def _json(path: Path, d) -> Path:
    path.write_text(json.dumps(d))
    return path


# --------------------------------------------------------------------------------------------------
# 1. memory or work from a small input: counted before anything is allocated

RECORD_CASES = {  # hostile record -> fragment of the refusal
    "60000 signal steps": "signal steps, over the limit of 2000",
    "200000 signalled lanes": "signal cells (signalled lanes x steps), over the limit",
    "tracks x steps": "track cells (tracks x steps), over the limit",
    "100000 tracks": "tracks, over the limit of 4096",
    "100000 states": "states in one track, over the limit of 2000",
    "empty neighbours": "links, over the limit",
    "polygon points": "points, over the limit",
    "packed exit lanes": "links, over the limit",
    "unknown fields": "protobuf elements, over the limit",
    "nested groups": "unknown protobuf groups nested deeper than",
}


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_a_small_record_asking_for_a_large_allocation_is_refused_before_allocating(case, tmp_path):
    """Each record is at most a few MB; before, it took GBs (signal rows, track arrays), TiB requests,
    uncounted objects, or a RecursionError. Now: one MapValidationError naming the record and the limit,
    within the cap, from the TFRecord reader and from build-dataset (which goes on to the good record)."""
    data = hostile_records()[case]
    assert len(data) < 8 * 1024 * 1024
    p = write_records(tmp_path / "hostile.tfrecord", [data, womd.to_scenario(_named("good")).SerializeToString()])
    r = run_child(f"""
        from terrazero_env.maps.builder import MapValidationError
        from terrazero_env.maps.convert import womd
        try:
            womd.convert({str(p)!r}, index=0)
        except MapValidationError as e:
            print("REFUSED", e)
        else:
            print("ACCEPTED")
        from terrazero_env.maps.build_dataset import build_dataset
        lines = []
        rep = build_dataset([{str(p)!r}], {str(tmp_path / "ds")!r}, workers=1, progress=False, on_reject=lines.append)
        print("SCENES", rep.scenes, len(lines))
        print("LINE", lines[0])
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "REFUSED" in out and "record 0" in out and RECORD_CASES[case] in out, out
    assert "SCENES ['good.tzb'] 1" in out and "record 0" in out.split("LINE", 1)[1], out


JSON_CASES = {  # hostile document -> fragment of the refusal (None: reads within the cap)
    "objects x steps": "tracks, over the limit of 4096",
    "containers": "JSON objects and arrays, over the limit",
    "polygon points": "points, over the limit",
    "20000 lanes": None,
}


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_a_small_json_asking_for_a_large_allocation_is_refused_or_read_within_the_cap(case, tmp_path):
    """Objects x steps was allocated before its check (9.6 GB for 1.9 MB); the lane-graph inference of
    20,000 lanes (2 MB, inside the limits) built a 20,000 x 20,000 matrix (6 GB): it now reads and builds
    within the cap (a grid search); containers and polygon points are counted before they are parsed."""
    p = tmp_path / "hostile.json"
    p.write_text(hostile_json()[case])
    r = run_child(f"""
        from terrazero_env.maps import build
        from terrazero_env.maps.builder import MapValidationError
        from terrazero_env.maps.convert import gpudrive_json
        try:
            m = build(gpudrive_json.convert({str(p)!r}))
        except MapValidationError as e:
            print("REFUSED", e)
        else:
            print("BUILT", len(m.lanes))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    want = JSON_CASES[case]
    if want is None:
        assert "BUILT 20000" in r.stdout, r.stdout
    else:
        assert "REFUSED" in r.stdout and str(p) in r.stdout and want in r.stdout, r.stdout


def test_a_gzip_tfrecord_is_refused_from_its_first_bytes_without_inflating(tmp_path):
    """A 100 KB gzip member of 100 MB of zeros: named as GZIP from its magic, nothing inflated."""
    p = tmp_path / "z.tfrecord"
    p.write_bytes(gzip.compress(b"\0" * (100 * 1024 * 1024), compresslevel=9))
    assert p.stat().st_size < 200_000
    r = run_child(f"""
        import resource
        from terrazero_env.maps.builder import MapValidationError
        from terrazero_env.maps.convert.tfrecord import iter_records
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            list(iter_records({str(p)!r}))
        except MapValidationError as e:
            print("REFUSED", e)
        print("GREW_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    assert "REFUSED" in r.stdout and "GZIP-compressed" in r.stdout, (r.stdout, r.stderr)
    assert int(r.stdout.split("GREW_KB")[1]) < 20_000, r.stdout
    zl = tmp_path / "zl.tfrecord"
    import zlib

    zl.write_bytes(zlib.compress(b"\0" * 100_000))
    with pytest.raises(MapValidationError, match="ZLIB-compressed"):
        list(iter_records(zl))


def test_the_census_counts_what_the_parse_holds():
    """The wire census agrees with the parsed message on the synthetic scene."""
    sc = womd.to_scenario(scene())
    c = womd.census(sc.SerializeToString(), "x")
    assert c["tracks"] == len(sc.tracks) and c["features"] == len(sc.map_features)
    assert c["lanes"] == sum(f.WhichOneof("feature_data") == "lane" for f in sc.map_features)
    assert c["steps"] == 91 and c["track_states"] == 5 * 91 and c["signal_states"] == 2 * 91
    n_pts = sum(len(getattr(f, f.WhichOneof("feature_data")).polyline) if f.WhichOneof("feature_data") in
                ("lane", "road_line", "road_edge") else len(getattr(f, f.WhichOneof("feature_data")).polygon)
                if f.WhichOneof("feature_data") in ("crosswalk", "speed_bump", "driveway") else 1
                for f in sc.map_features)
    assert c["points"] == n_pts + 2 * 91  # and every signal state's stop point


def _reference_infer(lanes):
    """The lane-graph inference as it was (dense: lanes x lanes and lanes x segments), for comparison."""
    good = [i for i, ln in enumerate(lanes) if ln.polyline.shape[0] >= 2
            and np.all(np.linalg.norm(np.diff(ln.polyline[:, :2], axis=0), axis=1)[[0, -1]] > 1e-6)]
    dirs = [gpudrive_json._dirs(lanes[i].polyline) for i in good]
    starts = np.array([lanes[i].polyline[0, :2] for i in good])
    ends = np.array([lanes[i].polyline[-1, :2] for i in good])
    d_in, d_out = np.array([d[0] for d in dirs]), np.array([d[1] for d in dirs])
    gap = np.linalg.norm(ends[:, None, :] - starts[None, :, :], axis=2)
    link = (gap <= gpudrive_json.SUCCESSOR_GAP) & (d_out @ d_in.T >= np.cos(gpudrive_json.SUCCESSOR_ANGLE))
    np.fill_diagonal(link, False)
    for a, b in zip(*np.nonzero(link)):
        lanes[good[a]].exit.append(lanes[good[b]].id)
        lanes[good[b]].entry.append(lanes[good[a]].id)
    seg_a = np.concatenate([lanes[i].polyline[:-1, :2] for i in good])
    seg_b = np.concatenate([lanes[i].polyline[1:, :2] for i in good])
    seg_lane = np.concatenate([np.full(len(lanes[i].polyline) - 1, k) for k, i in enumerate(good)])
    ab = seg_b - seg_a
    ab_len2 = np.maximum((ab ** 2).sum(1), 1e-12)
    seg_dir = ab / np.sqrt(ab_len2)[:, None]
    lo, hi = gpudrive_json.NEIGHBOR_OFFSET
    bike = np.array([lanes[i].type == 3 for i in good])
    for k, i in enumerate(good):
        p = lanes[i].polyline[:, :2]
        cum = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))]
        j = max(min(int(np.searchsorted(cum, cum[-1] / 2)), len(p) - 1), 1)
        mid, h = p[j - 1] + (p[j] - p[j - 1]) * 0.5, (p[j] - p[j - 1]) / np.linalg.norm(p[j] - p[j - 1])
        t = np.clip(((mid - seg_a) * ab).sum(1) / ab_len2, 0.0, 1.0)
        off = seg_a + ab * t[:, None] - mid
        dist = np.linalg.norm(off, axis=1)
        lateral = h[0] * off[:, 1] - h[1] * off[:, 0]
        ok = (seg_lane != k) & (bike[seg_lane] == bike[k]) & (seg_dir @ h >= np.cos(gpudrive_json.NEIGHBOR_ANGLE)) & \
            (dist >= lo) & (dist <= hi) & (np.abs(off @ h) < 0.5 * dist)
        for side, sign in (("left", 1), ("right", -1)):
            cand = np.nonzero(ok & (sign * lateral > 0))[0]
            if cand.shape[0]:
                getattr(lanes[i], side).append(lanes[good[int(seg_lane[cand[np.argmin(dist[cand])]])]].id)


@pytest.mark.parametrize("seed", range(4))
def test_the_grid_lane_graph_inference_gives_the_dense_ones_links(seed):
    """Random lanes (parallel pairs 2-6 m apart, chains with small gaps, bike lanes, long segments):
    the grid search finds the same successors and neighbours as the dense matrices did."""
    rng = np.random.default_rng(seed)

    def lanes():
        out, k = [], 0
        for _ in range(60):
            x0, y0 = rng.uniform(-150, 150, 2)
            a = rng.uniform(-np.pi, np.pi)
            d = np.array([np.cos(a), np.sin(a)])
            n = np.array([-d[1], d[0]])
            length = rng.uniform(5, 60)
            step = rng.choice([0.5, 2.0, length / 2, length])  # long segments too
            for off in (0.0, rng.uniform(2.0, 6.0) * rng.choice([-1, 1])):
                pts = np.array([[x0, y0]]) + off * n + np.outer(np.arange(0, length + 1e-9, step), d)
                out.append(SceneLane(k, np.c_[pts, np.zeros(len(pts))], int(rng.choice([1, 2, 3]))))
                k += 1
                nxt = pts[-1] + rng.uniform(-0.3, 0.3, 2)
                b = a + rng.uniform(-1.0, 1.0)
                pts2 = nxt + np.outer(np.arange(0, 20.0, 1.0), [np.cos(b), np.sin(b)])
                out.append(SceneLane(k, np.c_[pts2, np.zeros(len(pts2))], 2))
                k += 1
        return out

    a = lanes()
    b = [SceneLane(ln.id, ln.polyline.copy(), ln.type) for ln in a]
    gpudrive_json.infer_lane_graph(a)
    _reference_infer(b)
    n_links = 0
    for x, y in zip(a, b):
        assert (x.exit, x.entry, x.left, x.right) == (y.exit, y.entry, y.left, y.right), x.id
        n_links += len(x.exit) + len(x.left) + len(x.right)
    assert n_links > 50  # the scene has links to find


def test_the_search_pairs_are_bounded_when_every_lane_starts_at_one_point(monkeypatch):
    """5,000 lanes from one point: 25 million candidate successor pairs, over the search limit:
    refused in one line instead of a quadratic loop."""
    lanes = [SceneLane(i, np.array([[0.0, 0.0, 0.0], [np.cos(i), np.sin(i), 0.0]]) * 10, 2) for i in range(5000)]
    for ln in lanes:
        ln.polyline = ln.polyline[::-1].copy()  # every lane ends at the origin too
    lanes += [SceneLane(10_000 + i, np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]) * (i + 1), 2) for i in range(5000)]
    monkeypatch.setitem(LIMITS, "search_pairs", 10_000_000)
    with pytest.raises(MapValidationError, match="f.json: lane successors: 25.* candidate pairs for the "
                                                 "nearest-lane search, over the limit"):
        gpudrive_json.infer_lane_graph(lanes, "f.json")


# --------------------------------------------------------------------------------------------------
# 2. writes outside the output folder, 3. FIFOs

@pytest.fixture
def inputs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _tf(src / "a.tfrecord", [_named("scene0"), _named("scene1", 100.0)])
    _json(src / "c.json", {**to_gpudrive_json(_named("scene2", 200.0))})
    return src


def _build(src: Path, out: Path, **kw):
    lines: list[str] = []
    r = build_dataset([str(src)], out, workers=1, progress=False, on_reject=lines.append, **kw)
    return r, lines


@pytest.mark.parametrize("name", ["manifest.yaml", "rejected.txt"])
def test_a_link_where_an_output_file_goes_is_refused_and_its_target_untouched(inputs, tmp_path, name):
    out = tmp_path / "ds"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / name).symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        _build(inputs, out)
    assert victim.read_text() == "precious" and not list(out.glob("*.tzb"))  # refused before any work


def test_a_linked_marker_folder_or_marker_is_refused(inputs, tmp_path):
    out = tmp_path / "ds"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / ".done").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="marker folder .* symbolic link"):
        _build(inputs, out)
    assert not list(elsewhere.iterdir())
    (out / ".done").unlink()
    _build(inputs, out)
    marker = next((out / ".done").iterdir())
    marker.unlink()
    marker.symlink_to(tmp_path / "victim.json")
    with pytest.raises(UnsafeFileError, match="marker .* symbolic link"):
        _build(inputs, out)
    assert not (tmp_path / "victim.json").exists()


def test_a_tampered_marker_is_not_trusted_and_the_manifest_names_only_files_inside(inputs, tmp_path):
    """A marker naming ``../outside.tzb`` (a valid map beside the folder): its input is converted again,
    one line says why, and the manifest names only scenes inside the folder."""
    from terrazero_env.maps import Dataset

    out = tmp_path / "ds"
    _build(inputs, out)
    shutil.copy(out / "scene0.tzb", tmp_path / "outside.tzb")
    for marker in (out / ".done").iterdir():
        r = json.loads(marker.read_text())
        if r["written"] and r["written"][0]["file"] == "scene0.tzb":
            r["written"][0]["file"] = "../outside.tzb"
            marker.write_text(json.dumps(r))
    rep, lines = _build(inputs, out)
    assert rep.converted_files == 1 and rep.resumed_files == 1
    assert any("not a plain .tzb name" in x and "converting the file again" in x for x in lines), lines
    text = (out / "manifest.yaml").read_text()
    assert "outside" not in text and rep.scenes == ["scene0.tzb", "scene1.tzb", "scene2.tzb"]
    assert [f.resolve().parent for f in Dataset(out / "manifest.yaml").files] == [out.resolve()] * 3


@pytest.mark.parametrize("damage", ["truncate", "replace", "link", "missing"])
def test_a_damaged_scene_is_rebuilt_on_resume_not_trusted(inputs, tmp_path, damage):
    out = tmp_path / "ds"
    _build(inputs, out)
    f = out / "scene1.tzb"
    victim = tmp_path / "victim.tzb"
    victim.write_bytes(b"precious")
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:1000])
    elif damage == "replace":
        shutil.copy(out / "scene0.tzb", f)
    elif damage == "link":
        f.unlink()
        f.symlink_to(victim)
    else:
        f.unlink()
    rep, lines = _build(inputs, out)
    assert rep.converted_files == 1 and rep.resumed_files == 1, lines
    assert any("scene1.tzb" in x and "converting the file again" in x for x in lines), lines
    assert victim.read_bytes() == b"precious"
    if damage == "link":  # the link is refused, never written through: that scene is rejected, named
        assert any("scene1" in x and "symbolic link" in x for x in lines) and "scene1.tzb" not in rep.scenes
    else:
        assert load(f).metadata["scenario_id"] == "scene1" and "scene1.tzb" in rep.scenes


def test_a_fifo_at_the_manifest_is_refused_without_blocking(inputs, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    os.mkfifo(out / "manifest.yaml")
    r = _cli("maps", "build-dataset", str(inputs), "-o", str(out), "--quiet", "--workers", "1")
    assert r.returncode == 2 and "FIFO" in r.stderr and "manifest.yaml" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    os.unlink(out / "manifest.yaml")
    os.mkfifo(out / ".done")
    r = _cli("maps", "build-dataset", str(inputs), "-o", str(out), "--quiet", "--workers", "1")
    assert r.returncode == 2 and "FIFO" in r.stderr and ".done" in r.stderr, r.stderr


def test_fifo_inputs_and_markers_are_refused_without_blocking(inputs, tmp_path):
    fifo = tmp_path / "x.tfrecord"
    os.mkfifo(fifo)
    jfifo = tmp_path / "x.json"
    os.mkfifo(jfifo)
    r = run_child(f"""
        from terrazero_env.maps.builder import MapValidationError
        from terrazero_env.maps.convert import gpudrive_json, womd
        for f in (lambda: womd.convert({str(fifo)!r}), lambda: gpudrive_json.convert({str(jfifo)!r}),
                  lambda: list(womd.iter_maps({str(fifo)!r}))):
            try:
                f()
            except MapValidationError as e:
                print("REFUSED", e)
    """, timeout=60)
    assert r.stdout.count("REFUSED") == 3 and r.stdout.count("FIFO") == 3, (r.stdout, r.stderr)
    out = tmp_path / "ds"
    _build(inputs, out)
    marker = next((out / ".done").iterdir())
    marker.unlink()
    os.mkfifo(marker)
    r = _cli("maps", "build-dataset", str(inputs), "-o", str(out), "--quiet", "--workers", "1")
    assert r.returncode == 2 and "FIFO" in r.stderr and "marker" in r.stderr, r.stderr


# --------------------------------------------------------------------------------------------------
# 4. one bad input does not stop the job; 5. silent acceptance; 6. errors name the file and field

def _bad_inputs(src: Path) -> dict[str, str]:
    """Bad files beside the good ones -> a fragment of the line naming each."""
    d = to_gpudrive_json(_named("bad"))
    bad = {}
    _json(src / "meta_list.json", {**d, "scenario_id": "m", "metadata": [1, 2]})
    bad["meta_list.json"] = "metadata must be an object"
    v = json.loads(json.dumps(d))
    v["scenario_id"] = "strbool"
    v["objects"][1]["valid"] = ["false"] * 91
    _json(src / "strbool.json", v)
    bad["strbool.json"] = "objects[1].valid[0]: expected true or false"
    (src / "latin1.json").write_bytes(b'{"scenario_id": "\xe9t\xe9", "objects": [], "roads": []}')
    bad["latin1.json"] = "not UTF-8"
    _json(src / "surrogate.json", {**d, "scenario_id": "\udc80x"})
    bad["surrogate.json"] = "lone surrogate"
    (src / "list.json").write_text("[1, 2]")
    bad["list.json"] = "JSON object, got a list"
    (src / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    bad["deep.json"] = "nested deeper"
    dup = json.loads(json.dumps(d))
    dup["scenario_id"] = "duplanes"
    dup["roads"][1]["id"] = dup["roads"][0]["id"]
    _json(src / "duplanes.json", dup)
    bad["duplanes.json"] = "lane id 10 appears twice"
    raw = womd.to_scenario(_named("PLACEHOLDER_ID")).SerializeToString()
    raw = raw.replace(b"\x0ePLACEHOLDER_ID", b"\x0e\xffLACEHOLDER_ID")
    write_records(src / "utf8.tfrecord", [raw, womd.to_scenario(_named("after_utf8", 300.0)).SerializeToString()])
    bad["utf8.tfrecord record 0"] = "scenario_id is not UTF-8"
    return bad


@pytest.mark.parametrize("workers", ["1", "2"])
def test_bad_inputs_are_one_line_each_and_the_manifest_lists_the_good_scenes(inputs, tmp_path, workers):
    """A malformed JSON, a ``metadata`` list, string booleans, non-UTF-8 bytes and ids, a list, deep JSON
    and duplicate lane ids beside good files: the build goes on, prints one line per bad input naming
    the file and why, exits 0, and the manifest lists exactly the good scenes."""
    bad = _bad_inputs(inputs)
    out = tmp_path / "ds"
    r = _cli("maps", "build-dataset", str(inputs), "-o", str(out), "--quiet", "--workers", workers)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if x.startswith("rejected ")]
    assert len(lines) == len(bad), r.stderr
    for name, why in bad.items():
        assert sum(name in x and why in x for x in lines) == 1, (name, why, lines)
    from terrazero_env.maps import Dataset

    ds = Dataset(out / "manifest.yaml")
    assert sorted(f.name for f in ds.files) == ["after_utf8.tzb", "scene0.tzb", "scene1.tzb", "scene2.tzb"]
    assert f"{len(bad)} rejected" in r.stdout
    assert (out / "rejected.txt").read_text().count("\n") == len(bad)


def test_a_build_where_nothing_is_built_exits_non_zero_with_the_count(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    bad = _bad_inputs(src)
    (src / "utf8.tfrecord").unlink()
    bad.pop("utf8.tfrecord record 0")
    out = tmp_path / "ds"
    r = _cli("maps", "build-dataset", str(src), "-o", str(out), "--quiet", "--workers", "1")
    assert r.returncode == 2 and f"every scene was rejected ({len(bad)})" in r.stderr.splitlines()[-1], r.stderr
    assert (out / "rejected.txt").read_text().count("\n") == len(bad) and not (out / "manifest.yaml").exists()


def test_a_worker_that_dies_costs_only_its_file(inputs, tmp_path):
    """A worker process killed while converting one file (as the kernel's OOM killer would): that file
    is one failed line and gets no marker (a rerun tries it again); the other files are built."""
    out = tmp_path / "ds"
    r = run_child(f"""
        import os
        import terrazero_env.maps.build_dataset as bd
        real = bd.convert_file
        def dying(path, out):
            if path.endswith("c.json"):
                os._exit(9)
            return real(path, out)
        bd.convert_file = dying
        lines = []
        rep = bd.build_dataset([{str(inputs)!r}], {str(out)!r}, workers=2, progress=False, on_reject=lines.append)
        print("SCENES", rep.scenes, "FAILED", [os.path.basename(f) for f in rep.failed_files])
        print("LINES", lines)
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "SCENES ['scene0.tzb', 'scene1.tzb'] FAILED ['c.json']" in r.stdout, r.stdout
    assert "c.json: the worker converting it failed" in r.stdout
    rep, _ = _build(inputs, out)
    assert rep.converted_files == 1 and rep.scenes == ["scene0.tzb", "scene1.tzb", "scene2.tzb"]


JSON_FIELD_CASES = [  # (edit of the synthetic scene's JSON, fragment naming the field)
    (lambda d: d["objects"][0].update(valid=["true"] * 91), "objects[0].valid[0]: expected true or false"),
    (lambda d: d["objects"][0].update(valid=[1] * 91), "objects[0].valid[0]: expected true or false"),
    (lambda d: d["objects"][0]["heading"].__setitem__(3, "0.5"), "objects[0].heading[3]: expected a number"),
    (lambda d: d["objects"][0].update(length="4.5"), "objects[0].length: expected a number"),
    (lambda d: d["objects"][0]["velocity"][0].pop("y"), "objects[0].velocity[0]: a point is not {x, y} numbers"),
    (lambda d: d["objects"][0]["position"][2].update(x="1"), "objects[0].position[2].x: a point is not {x, y, z}"),
    (lambda d: d["objects"][0].update(id="7"), "objects[0].id: expected an integer"),
    (lambda d: d["objects"][1].update(id=d["objects"][0]["id"]), "objects[1].id: object id 7 appears twice"),
    (lambda d: d["objects"][0].update(type=3), "objects[0].type: one of"),
    (lambda d: d["roads"][2].update(id={"a": 1}), "roads[2].id: expected an integer"),
    (lambda d: d["roads"][2].update(map_element_id=True), "roads[2].map_element_id: expected an integer"),
    (lambda d: d["roads"][2].update(geometry={"x": 1}), "roads[2].geometry: expected a list"),
    (lambda d: d.update(metadata=[1, 2]), "metadata must be an object, got [1, 2] (a list)"),
    (lambda d: d.update(metadata={"sdc_track_index": "0"}), "metadata.sdc_track_index: expected an integer"),
    (lambda d: d.update(metadata={"tracks_to_predict": 3}), "metadata.tracks_to_predict: expected a list"),
    (lambda d: d.update(metadata={"objects_of_interest": [None]}), "metadata.objects_of_interest[0]: expected"),
    (lambda d: d.update(tl_states=[1]), "tl_states must be an object"),
    (lambda d: d.update(tl_states={"abc": {"state": ["go"], "x": [0], "y": [0], "z": [0]}}),
     "tl_states['abc']: the key must be a lane id"),
    (lambda d: d.update(tl_states={"11": {"state": ["go"], "x": ["0"], "y": [0], "z": [0]}}),
     "tl_states['11'].x[0]: expected a number"),
    (lambda d: d.update(tl_states={"11": {"state": ["go"], "x": [], "y": [0], "z": [0]}}), "tl_states['11'].x: needs"),
    (lambda d: d.update(tl_states={"11": "go"}), "tl_states['11']: expected an object"),
    (lambda d: d.update(scenario_id=12), "scenario_id must be a string"),
    (lambda d: d.update(scenario_id="a\nb"), "a control character"),
]


@pytest.mark.parametrize("edit,fragment", JSON_FIELD_CASES, ids=[c[1][:40] for c in JSON_FIELD_CASES])
def test_a_json_value_of_the_wrong_type_is_one_error_naming_the_file_and_field(tmp_path, edit, fragment):
    """Values are checked where they enter: strings for numbers or booleans, booleans for integers,
    lists for objects, duplicate ids. Before: silently converted ("false" read as valid), or an
    AttributeError/ValueError naming nothing."""
    d = to_gpudrive_json(scene(with_graph=False))
    edit(d)
    p = _json(tmp_path / "bad.json", d)
    with pytest.raises(MapValidationError) as e:
        gpudrive_json.convert(p)
    msg = str(e.value)
    assert str(p) in msg and fragment in msg and "\n" not in msg, msg


def test_duplicate_lane_and_track_ids_in_a_record_are_refused_naming_the_scene(tmp_path):
    s = scene()
    s.lanes[3].id = s.lanes[2].id
    with pytest.raises(MapValidationError, match="scenario synthetic0001: lane id 12 appears twice"):
        womd.convert(_tf(tmp_path / "a.tfrecord", [s]))
    s = scene()
    s.track_ids = np.array([7, 8, 9, 10, 7])
    with pytest.raises(MapValidationError, match="record 0 .*scenario synthetic0001.*track id 7 appears twice"):
        womd.convert(_tf(tmp_path / "b.tfrecord", [s]))


def test_a_non_utf8_scenario_id_in_a_record_is_one_error_and_the_cli_says_one_line(tmp_path):
    raw = womd.to_scenario(_named("PLACEHOLDER_ID")).SerializeToString().replace(b"\x0ePLACEHOLDER_ID",
                                                                                 b"\x0e\xffLACEHOLDER_ID")
    p = write_records(tmp_path / "u.tfrecord", [raw])
    with pytest.raises(MapValidationError, match="record 0: scenario_id is not UTF-8 text"):
        womd.convert(p)
    bad = tmp_path / "meta.json"
    _json(bad, {**to_gpudrive_json(scene()), "metadata": [1]})
    for src in (p, bad):
        r = _cli("maps", "build", str(src), "-o", str(tmp_path / "x.tzb"))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(src) in r.stderr, r.stderr


def test_a_file_of_many_tiny_records_is_bounded(tmp_path, monkeypatch):
    """A record costs 16 bytes of file: offsets are listed up to MAX_RECORDS, and a build lists at most
    MAX_REJECTED_PER_FILE rejected scenes of one file (then skips the rest, saying so)."""
    import terrazero_env.maps.build_dataset as bd
    from terrazero_env.maps.convert import tfrecord

    p = write_records(tmp_path / "tiny.tfrecord", [b""] * 50)
    monkeypatch.setattr(tfrecord, "MAX_RECORDS", 20)
    with pytest.raises(MapValidationError, match="more than 20 records"):
        womd.convert(p, index=3)
    monkeypatch.setattr(bd, "MAX_REJECTED_PER_FILE", 5)
    r = bd.convert_file(str(p), str(tmp_path))
    assert len(r["rejected"]) == 6 and "the rest of the file is skipped" in r["rejected"][-1]
