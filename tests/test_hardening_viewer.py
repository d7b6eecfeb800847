"""Hostile replays against the viewer, its server and the ``.tzr`` reader (docs/hardening.md, third
pass, with its limits table).

Classes: script injection from any string a replay holds (names, meta, map name, labels, titles with
``</script>``); a server reachable by DNS rebinding, reading through links out of its folder, blocked
by a FIFO; work a small file declares (overlapping arrays, huge sizes, a gzip bomb) counted before
anything is allocated; one bad replay dropping a whole index; tracebacks from header fields of the
wrong type. Reading that could allocate runs in a child process under an address-space cap
(``RLIMIT_AS``) and a timeout, as tests/test_hardening.py does; the server runs in a child process too,
so a request that hangs fails the test instead of the run. The browser checks need Debian's
``chromium`` and ``chromium-driver`` and skip, saying so, where they are absent.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config.io import load_config
from terrazero_env.replay import (
    MAGIC,
    MAX_ARRAYS,
    MAX_RAW_BYTES,
    Replay,
    ReplayError,
    ReplayRecorder,
    load_replay,
    load_replay_header,
    save_replay,
)
from terrazero_env.viewer import _folder_entries, index_html, viewer_html, write_index, write_viewer

TIMEOUT = 60.0
MEMORY_CAP = 3 * 1024**3  # bytes of address space

# One string that is markup three ways: an element with an inline handler, the end of a script element
# followed by a new one, and an attribute break-out. Each sets window.pwned if it ever runs.
X = '<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script>"><svg onload="window.pwned=3">'


def _cap() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_child(code: str, *, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter under the memory cap; a signal death or a timeout fails the
    calling test with the input named."""
    argv = [sys.executable, "-c", textwrap.dedent(code)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=_cap,
                           env={**os.environ, "PYTHONWARNINGS": "default", "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: no exit within {timeout} s for {argv[2]!r:.400}")
    if r.returncode < 0:
        pytest.fail(f"crash: signal {-r.returncode} for {argv[2]!r:.400}\n{r.stderr[-2000:]}")
    return r


# --------------------------------------------------------------------------------------------------
# replays: a real one, a hostile one (markup in every string), and raw streams built by hand

@pytest.fixture(scope="module")
def recorded() -> Replay:
    cfg = load_config("quick").with_overrides(num_worlds=1)
    e = core.Engine(cfg)
    e.reset([0], [3])
    rec = ReplayRecorder(e, meta={"title": "good one", "score": 12.5})
    rec.capture()
    for _ in range(8):
        e.step(e.reference_actions())
        rec.capture()
    rep = rec.replay()
    policy = int(np.flatnonzero(rep.arrays["slot"][0] >= 0)[0])
    events = np.array([[2, policy, 0b11, -1], [5, policy, 1 << 5, -1]], np.int64)  # goal+collision, red light
    return Replay(rep.header, rep.arrays, events)


def _hostile(rep: Replay) -> Replay:
    """``rep`` with the markup string in every string field a page shows: every vocabulary entry, the
    map's name, the meta's title, group, driver, events and config."""
    names = {k: [f"{n}{X}" for n in v] for k, v in rep.header["names"].items()}
    meta = {**rep.meta, "title": f"T{X}", "group": f"G{X}", "driver": f"D{X}", "events": [f"E{X}"],
            "config": f"C{X}", "focus": int(rep.events[0, 1])}
    header = {**rep.header, "names": names, "meta": meta, "map": {**rep.header["map"], "name": f"M{X}"}}
    return Replay(header, rep.arrays, rep.events)


@pytest.fixture(scope="module")
def files(recorded, tmp_path_factory):
    d = tmp_path_factory.mktemp("replays")
    good = save_replay(recorded, d / "good.tzr")
    hostile = save_replay(_hostile(recorded), d / "hostile.tzr")
    return {"dir": d, "good": good, "hostile": hostile, "raw": gzip.decompress(good.read_bytes())}


def _split(raw: bytes) -> tuple[dict, bytes]:
    (hlen,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    return json.loads(raw[start:start + hlen]), raw[start + hlen:]


def _join(header: dict | bytes, body: bytes) -> bytes:
    hb = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((-(len(MAGIC) + 4 + len(hb))) % 8)
    return MAGIC + struct.pack("<I", len(hb)) + hb + body


def _write(path: Path, raw: bytes) -> Path:
    path.write_bytes(gzip.compress(raw, mtime=0))
    return path


# --------------------------------------------------------------------------------------------------
# 1. script injection: generated HTML holds no markup but its own

VIEWER_TAGS = {"html", "head", "meta", "title", "style", "body", "div", "button", "label", "select", "option", "span",
               "h3", "i", "canvas", "script"}
INDEX_TAGS = {"html", "head", "meta", "title", "style", "body", "h2", "table", "tr", "th", "td", "a", "span"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in: dict | None = None
        self.title = ""
        self._title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in = dict(attrs)
            self.scripts.append((self._in, ""))
        self._title = tag == "title"

    def handle_endtag(self, tag):
        self._in = None if tag == "script" else self._in
        self._title = False

    def handle_data(self, data):
        if self._in is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        if self._title:
            self.title += data


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    p.close()
    return p


def _csp_of(page: str) -> str:
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert m, "no Content-Security-Policy meta"
    return m.group(1).replace("&#x27;", "'")


def _assert_only_own_markup(page: str, allowed: set[str], scripts: int) -> _Tags:
    p = _parse(page)
    assert {t for t, _ in p.tags} <= allowed, {t for t, _ in p.tags} - allowed
    handlers = [(t, a) for t, attrs in p.tags for a in attrs if a.lower().startswith("on")]
    assert handlers == [], handlers
    assert not [a for _, attrs in p.tags for a in attrs.values() if a and "javascript:" in a.lower()]
    assert len(p.scripts) == scripts, [a for a, _ in p.scripts]
    return p


def test_a_page_of_a_hostile_replay_holds_no_markup_but_its_own(files):
    """Every string of the replay (and a label and a title with ``</script>``) lands as text: the page
    parses to the template's tags only, one data block per replay and one script, and its CSP allows
    exactly that script (by hash) and its stylesheet."""
    page = viewer_html([files["hostile"], files["good"]], labels=[f"L{X}", "B"])
    p = _assert_only_own_markup(page, VIEWER_TAGS, scripts=3)
    data = [t for a, t in p.scripts if a.get("type") == "application/octet-stream"]
    assert len(data) == 2 and all(re.fullmatch(r"[A-Za-z0-9+/=]+", t) for t in data)
    assert [a["data-tz-label"] for a, _ in p.scripts[:2]] == [f"L{X}", "B"]  # the label, as an attribute's text
    assert p.title == f"T{X} | good one"
    (own,) = [t for a, t in p.scripts if "type" not in a]
    policy = _csp_of(page)
    digest = base64.b64encode(hashlib.sha256(own.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "unsafe-inline" not in policy
    assert policy.startswith("default-src 'none'")
    page = viewer_html(files["good"], title=f"</title></script>{X}")
    assert _assert_only_own_markup(page, VIEWER_TAGS, scripts=2).title == f"</title></script>{X}"


def test_an_index_of_hostile_titles_groups_and_links_holds_no_markup_but_its_own():
    page = index_html([{"href": f"a{X}.html", "title": f"T{X}", "group": f"G{X}", "score": f"S{X}"},
                       {"href": "javascript:window.pwned=4", "title": "js", "score": float("nan")},
                       {"href": "b.html", "title": "bad", "group": "unreadable", "error": f"R{X}"}],
                      title=f"</title>{X}")
    p = _assert_only_own_markup(page, INDEX_TAGS, scripts=0)
    assert p.title == f"</title>{X}"
    hrefs = [a["href"] for t, a in p.tags if t == "a"]
    assert len(hrefs) == 2 and not any(h.lower().startswith("javascript:") for h in hrefs), hrefs
    assert "script-src 'none'" in _csp_of(page)


def test_the_viewer_script_builds_its_dom_from_text_only():
    """The one rule on the JavaScript side: no HTML strings are parsed (no innerHTML, outerHTML,
    insertAdjacentHTML, document.write, eval); the browser test below shows it holds at run time."""
    js = (Path(__file__).parents[1] / "terrazero_env" / "viewer_assets" / "viewer.js").read_text()
    code = re.sub(r"//[^\n]*", "", js)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setAttribute(\"on"):
        assert sink not in code, sink


# --------------------------------------------------------------------------------------------------
# 3. work a small file declares: counted before anything is allocated (in a child under the cap)

def _load_in_child(path: Path, before: str = "") -> tuple[str, float, int]:
    r = run_child(f"""
        import resource, time
        from terrazero_env import replay_format as replay  # the reader and its limits
        {before}
        t = time.perf_counter()
        try:
            replay.load_replay({str(path)!r})
            print("LOADED")
        except replay.ReplayError as e:
            dt = time.perf_counter() - t
            print("REFUSED", round(dt, 3), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, e)
    """, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("REFUSED"), r.stdout[-2000:]
    _, seconds, rss, message = r.stdout.split(" ", 3)
    return message.strip(), float(seconds), int(rss)


def _with_entries(raw: bytes, extra: int, count: int, nbytes: int, step: int = 0) -> bytes:
    """``raw`` plus ``count`` entries of ``nbytes`` each (i2, quantized: float64 when decoded) at the
    offset ``step * k`` into a block of zeros of ``extra`` bytes appended to the arrays."""
    header, body = _split(raw)
    base = len(body)
    header["arrays"] += [{"name": f"junk{k}", "dtype": "i2", "shape": [nbytes // 2], "offset": base + step * k,
                          "nbytes": nbytes, "unit": 0.01, "delta": False} for k in range(count)]
    return _join(header, body + bytes(extra))


HUGE = {  # case -> (how the header lies, fragment of the refusal)
    "3,000 entries over one block": (lambda raw: _with_entries(raw, 8 << 20, 3000, 8 << 20), "over the limit of 256"),
    f"{MAX_ARRAYS - 40} entries over one block": (lambda raw: _with_entries(raw, 8 << 20, MAX_ARRAYS - 40, 8 << 20),
                                                  "overlap"),
    "two entries one byte apart": (lambda raw: _with_entries(raw, 64, 2, 16, step=14), "overlap"),
    "an array of 2 GiB past the end": (lambda raw: _with_entries(raw, 0, 1, 1 << 31), "runs past the end"),
    "a shape of 2**40": (lambda raw: _edit(raw, "x", shape=[2**40, 2**40], nbytes=2**82), "'shape' must be"),
    "a shape product that overflows int64": (lambda raw: _edit(raw, "x", shape=[2**31, 2**31, 2**3], nbytes=0),
                                             "does not match"),
    "frames and agents at their limits": (lambda raw: _frames(raw, 2**20, 2**16), "must have shape"),
}


def _edit(raw: bytes, name: str, **fields) -> bytes:
    header, body = _split(raw)
    for ent in header["arrays"]:
        if ent["name"] == name:
            ent.update(fields)
    return _join(header, body)


def _frames(raw: bytes, T: int, N: int) -> bytes:
    header, body = _split(raw)
    header["frames"], header["agents"] = T, N
    return _join(header, body)


@pytest.mark.parametrize("case", list(HUGE))
def test_sizes_a_small_file_declares_are_refused_before_allocating(files, tmp_path, case):
    """The red team's 43 KB file listing 3,000 arrays over the same bytes (24 GB decoded), and its
    variants: refused with ReplayError naming the problem, within a second and 600 MiB."""
    make, fragment = HUGE[case]
    path = _write(tmp_path / "huge.tzr", make(files["raw"]))
    assert path.stat().st_size < 200_000
    message, seconds, rss_kib = _load_in_child(path)
    assert fragment in message and str(path) in message and "\n" not in message, message
    assert seconds < 1.0 and rss_kib < 600 * 1024, (seconds, rss_kib)


def test_a_gzip_bomb_stops_at_the_inflate_limit(tmp_path):
    path = tmp_path / "bomb.tzr"
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(path, "wb") as f:
        f.write(z.compress(MAGIC + struct.pack("<I", 2) + b"{}" + b"  "))
        chunk = bytes(1 << 20)
        for _ in range(MAX_RAW_BYTES // len(chunk) + 8):
            f.write(z.compress(chunk))
        f.write(z.flush())
    assert path.stat().st_size < 1 << 20
    message, seconds, rss_kib = _load_in_child(path)
    assert "decompresses to more than" in message, message
    assert seconds < 5.0 and rss_kib < 900 * 1024, (seconds, rss_kib)


def test_the_decoded_bytes_are_counted_against_their_limit(files):
    message, _, _ = _load_in_child(files["good"], "replay.MAX_DECODED_BYTES = 1000")
    assert "decoded, over the 1000-byte limit" in message, message


# --------------------------------------------------------------------------------------------------
# 5. header fields of the wrong type: one line naming the field, where they enter

def _header_edit(fn):
    def make(raw: bytes) -> bytes:
        header, body = _split(raw)
        fn(header)
        return _join(header, body)
    return make


def _set(path: str, value):
    def fn(h):
        *up, last = path.split(".")
        node = h
        for k in up:
            node = node[k] if not k.isdigit() else node[int(k)]
        node[int(last) if last.isdigit() else last] = value
    return _header_edit(fn)


def _entry(name: str, **fields):
    return _header_edit(lambda h: next(e for e in h["arrays"] if e["name"] == name).update(fields))


def _events(rows):
    def make(raw: bytes) -> bytes:
        header, body = _split(raw)
        ent = next(e for e in header["arrays"] if e["name"] == "events")
        data = np.asarray(rows, "<i4").tobytes()
        ent.update(shape=[len(rows), 4], nbytes=len(data), offset=len(body))
        return _join(header, body + data)
    return make


BAD = {  # case -> (edit of the raw stream, fragment of the one-line refusal)
    "meta a list": (_set("meta", ["title"]), "'meta' must be an object, got a list"),
    "meta a string": (_set("meta", "x"), "'meta' must be an object"),
    "title a number": (_set("meta.title", 5), "'meta.title' must be a string or null, got an integer 5"),
    "group an object": (_set("meta.group", {"a": 1}), "'meta.group' must be a string"),
    "driver a list": (_set("meta.driver", ["x"]), "'meta.driver' must be a string"),
    "score a string": (_set("meta.score", "high"), "'meta.score' must be a number"),
    "focus a float": (_set("meta.focus", 1.5), "'meta.focus' must be an integer"),
    "names a list": (_set("names", []), "'names' must be an object"),
    "movers a dict": (_set("names.movers", {"0": "policy"}), "'names.movers' must be a list of strings"),
    "a class a number": (_set("names.classes.0", 7), "'names.classes' must be a list of strings"),
    "map a list": (_set("map", []), "'map' must be an object"),
    "map name a number": (_set("map.name", 3), "'map.name' must be a string"),
    "dt a string": (_set("dt", "0.1"), "'dt' must be a positive number"),
    "frames a boolean": (_set("frames", True), "'frames' must be an integer"),
    "first_step negative": (_set("first_step", -1), "'first_step' must be a non-negative integer"),
    "arrays an object": (_set("arrays", {}), "'arrays' must be a list"),
    "an entry a list": (_set("arrays.0", [1, 2]), "array entry 0 must be an object"),
    "an entry name a number": (_set("arrays.0.name", 3), "'name' must be a string"),
    "an offset a float": (_entry("x", offset=0.5), "'offset' must be a non-negative integer"),
    "an offset a string": (_entry("x", offset="0"), "'offset' must be a non-negative integer"),
    "a shape a string": (_entry("x", shape="big"), "'shape' must be a list"),
    "delta a string": (_entry("x", delta="yes"), "'delta' must be true or false"),
    "a unit negative": (_entry("x", unit=-1), "'unit' must be a positive number"),
    "a dtype a list": (_entry("x", dtype=["i4"]), "unknown dtype"),
    "an array listed twice": (_header_edit(lambda h: h["arrays"].append(dict(h["arrays"][0]))), "listed twice"),
    "reward terms of another count": (_set("names.reward_terms", ["a"]), "array 'reward_terms' must have shape"),
    "header not UTF-8": (lambda raw: _join(b'{"format":"terrazero-replay","title":"\xff\xfe"}', b""), "not UTF-8"),
    "header NaN": (_set("meta.score", float("nan")), "NaN or Infinity"),
    "header nested 10,000 deep": (lambda raw: _join(b'{"a":' + b"[" * 10_000 + b"]" * 10_000 + b"}", b""),
                                  "nested deeper"),
    "header not an object": (lambda raw: _join(b"[1, 2]", b""), "does not describe a terrazero replay"),
    "an event partner below -1": (_events([[1, 0, 1, -7]]), "an event names a frame or agent outside"),
    "lane offsets that run past their points": (_entry("map_lanes_off", delta=False), "must rise from 0"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_header_field_of_the_wrong_type_is_one_line_naming_it(files, tmp_path, case):
    make, fragment = BAD[case]
    path = _write(tmp_path / "bad.tzr", make(files["raw"]))
    with pytest.raises(ReplayError) as e:
        load_replay(path)
    msg = str(e.value)
    assert fragment in msg and str(path) in msg and "\n" not in msg, msg


def test_bytes_after_the_gzip_stream_and_a_truncated_stream_are_refused(files, tmp_path):
    data = files["good"].read_bytes()
    (tmp_path / "tail.tzr").write_bytes(data + b"junk")
    with pytest.raises(ReplayError, match="4 bytes after the gzip stream"):
        load_replay(tmp_path / "tail.tzr")
    (tmp_path / "cut.tzr").write_bytes(data[:-20])
    with pytest.raises(ReplayError, match="not a gzip stream or truncated"):
        load_replay(tmp_path / "cut.tzr")


def test_what_the_reader_would_refuse_is_never_written(recorded, tmp_path):
    from terrazero_env.config.io import load_config as lc

    e = core.Engine(lc("quick").with_overrides(num_worlds=1))
    with pytest.raises(ValueError, match="'meta.title' must be a string"):
        ReplayRecorder(e, meta={"title": 5})
    with pytest.raises(ValueError, match="'meta' must be an object"):
        save_replay(Replay({**recorded.header, "meta": ["x"]}, recorded.arrays, recorded.events), tmp_path / "a.tzr")
    with pytest.raises(ValueError, match="'meta.score' must be a number"):
        save_replay(Replay({**recorded.header, "meta": {"score": "x"}}, recorded.arrays, recorded.events),
                    tmp_path / "b.tzr")
    assert not list(tmp_path.iterdir())


def test_pages_and_replays_are_written_atomically_never_through_a_planted_link(files, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    for name, write in (("r.tzr", lambda p: save_replay(load_replay(files["good"]), p)),
                        ("r.html", lambda p: write_viewer(files["good"], p)),
                        ("index.html", lambda p: write_index(p.parent, [{"href": "a.html", "title": "a"}]))):
        os.symlink(victim, tmp_path / name)
        with pytest.raises(ValueError, match="symbolic link"):
            write(tmp_path / name)
    assert victim.read_text() == "untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "r.html", "r.tzr", "victim.txt"]


# --------------------------------------------------------------------------------------------------
# 4. one bad replay is named in the index; the others are listed

def test_one_bad_replay_is_named_and_the_rest_are_listed(files, tmp_path):
    shutil.copy(files["good"], tmp_path / "good.tzr")
    (tmp_path / "fam").mkdir()
    shutil.copy(files["good"], tmp_path / "fam" / "also_good.tzr")
    bad = {"meta_list.tzr": BAD["meta a list"], "title_number.tzr": BAD["title a number"],
           "not_utf8.tzr": BAD["header not UTF-8"], "score_string.tzr": BAD["score a string"]}
    for name, (make, _) in bad.items():
        _write(tmp_path / name, make(files["raw"]))
    (tmp_path / "junk.tzr").write_bytes(b"\xff" * 40)
    entries = {e["href"]: e for e in _folder_entries(tmp_path)}
    assert entries["view/good.tzr"]["title"] == "good one" and entries["view/good.tzr"]["score"] == 12.5
    assert entries["view/fam/also_good.tzr"]["group"] == "fam"
    for name, (_, fragment) in bad.items():
        e = entries[f"view/{name}"]
        assert e["group"] == "unreadable" and fragment in e["error"] and name in e["title"], e
        assert str(tmp_path) not in e["title"]  # named by its place in the folder
    assert "not a gzip stream" in entries["view/junk.tzr"]["error"]
    page = index_html(list(entries.values()))
    assert page.count("<a href=") == 2 and "title_number.tzr (unreadable: " in page
    assert load_replay_header(tmp_path / "good.tzr")["meta"]["title"] == "good one"


# --------------------------------------------------------------------------------------------------
# 2. the server: Host checked, links out refused, a FIFO never blocks it (real HTTP, a child process)

@pytest.fixture(scope="module")
def served(files, tmp_path_factory):
    top = tmp_path_factory.mktemp("served")
    root, outside = top / "root", top / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(files["good"], root / "good.tzr")
    shutil.copy(files["hostile"], root / "hostile.tzr")
    _write(root / "meta_list.tzr", BAD["meta a list"][0](files["raw"]))
    header, body = _split(files["raw"])
    header["meta"]["title"] = "SECRET-TITLE"
    _write(outside / "secret.tzr", _join(header, body))
    os.symlink(outside / "secret.tzr", root / "out.tzr")
    os.symlink(root / "good.tzr", root / "inside_link.tzr")
    os.symlink(outside, root / "linked_folder")
    os.mkfifo(root / "stuck.tzr")
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from terrazero_env.viewer import serve
            s = serve({str(root)!r}, port=0, background=True)
            print(s.server_address[1], flush=True)
            time.sleep({TIMEOUT * 10})
        """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_cap)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.stderr.read() if proc.poll() is not None else line
        yield {"port": int(line), "root": root}
    finally:
        proc.kill()  # this test's own child, by its handle
        proc.wait(10)


def _get(port: int, path: str, host: str | None = "default", timeout: float = 10.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {} if host is None else {"Host": f"127.0.0.1:{port}" if host == "default" else host}
        if host is None:
            conn.putrequest("GET", path, skip_host=True)
            conn.endheaders()
        else:
            conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    except TimeoutError:
        pytest.fail(f"GET {path}: no answer within {timeout} s (the server is blocked)")
    finally:
        conn.close()


@pytest.mark.parametrize("host,status", [
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("LOCALHOST:{port}", 200), ("[::1]:{port}", 200),
    ("evil.example:{port}", 403), ("evil.example", 403), ("127.0.0.1.evil.example:{port}", 403),
    ("localhost.evil.example:{port}", 403), ("127.0.0.1:1", 403), ("", 403), (None, 403),
])
def test_a_request_addressed_to_another_host_is_refused(served, host, status):
    """DNS rebinding: a page on evil.example that points its name at 127.0.0.1 still sends its own
    name as Host; only the server's own names (with its port) are answered."""
    port = served["port"]
    for path in ("/", "/view/good.tzr", "/index.json"):
        code, _, body = _get(port, path, None if host is None else host.format(port=port))
        assert code == status, (host, path, code, body[:200])


def test_the_host_check_answers_the_bound_and_allowed_names_and_on_every_interface_literal_addresses(tmp_path):
    from terrazero_env.viewer import _allowed_hosts, _host_ok, serve

    allowed = _allowed_hosts("192.168.1.5", 8765, ["mybox.lan"])
    for host in ("192.168.1.5:8765", "mybox.lan:8765", "MyBox.lan:8765", "localhost:8765", "[::1]:8765"):
        assert _host_ok(host, allowed, 8765, False), host
    for host in ("evil.example:8765", "10.0.0.1:8765", "mybox.lan", "mybox.lan:80", " ", "[::1]"):
        assert not _host_ok(host, allowed, 8765, False), host
    wild = _allowed_hosts("0.0.0.0", 8765, [])
    assert _host_ok("10.0.0.1:8765", wild, 8765, True) and _host_ok("[fe80::1]:8765", wild, 8765, True)
    assert not _host_ok("evil.example:8765", wild, 8765, True) and not _host_ok("10.0.0.1:80", wild, 8765, True)
    assert "localhost" in _allowed_hosts("127.0.0.1", 80, []) and "localhost" not in allowed
    os.mkfifo(tmp_path / "one.tzr")
    with pytest.raises(ValueError, match="not a replay file or a folder"):
        serve(tmp_path / "one.tzr", port=0, background=True)


def test_a_link_out_of_the_served_folder_is_refused_and_never_read(served):
    port = served["port"]
    code, _, index = _get(port, "/")
    assert code == 200 and "SECRET-TITLE" not in index
    assert "out.tzr (unreadable: a link pointing outside the served folder" in index
    entries = {e["href"]: e for e in json.loads(_get(port, "/index.json")[2])}
    assert "outside" in entries["view/out.tzr"]["error"] and "view/linked_folder/secret.tzr" not in entries
    assert entries["view/inside_link.tzr"]["title"] == "good one"  # a link inside the folder is fine
    for path in ("/view/out.tzr", "/view/linked_folder/secret.tzr", "/view/../outside/secret.tzr",
                 "/view/%2e%2e/outside/secret.tzr", "/view/..%2foutside%2fsecret.tzr"):
        code, _, body = _get(port, path)
        assert code in (403, 404) and "SECRET-TITLE" not in body, (path, code)
    assert _get(port, "/view/inside_link.tzr")[0] == 200


def test_a_fifo_in_the_served_folder_blocks_nothing(served):
    port = served["port"]
    t = time.perf_counter()
    code, _, index = _get(port, "/")
    assert code == 200 and "stuck.tzr (unreadable: " in index and "FIFO" in index
    code, _, body = _get(port, "/view/stuck.tzr")
    assert code == 400 and "FIFO" in body
    assert _get(port, "/view/good.tzr")[0] == 200
    assert time.perf_counter() - t < 10


def test_the_served_index_names_a_bad_replay_and_lists_the_rest(served):
    code, _, index = _get(served["port"], "/")
    assert code == 200 and "meta_list.tzr (unreadable: " in index and "&#x27;meta&#x27; must be an object" in index
    assert 'href="view/good.tzr"' in index and 'href="view/hostile.tzr"' in index
    _assert_only_own_markup(index, INDEX_TAGS, scripts=0)


def test_served_pages_carry_a_content_security_policy(served):
    code, headers, page = _get(served["port"], "/view/hostile.tzr")
    assert code == 200
    policy = headers["Content-Security-Policy"]
    assert policy.startswith("default-src 'none'") and "frame-ancestors 'none'" in policy
    assert "script-src 'sha256-" in policy and headers["X-Content-Type-Options"] == "nosniff"
    _assert_only_own_markup(page, VIEWER_TAGS, scripts=2)
    code, headers, _ = _get(served["port"], "/")
    assert "script-src 'none'" in headers["Content-Security-Policy"]


# --------------------------------------------------------------------------------------------------
# the pages in a real browser: nothing injected runs, the CSP blocks what would, the page still works

def _open(browser, url: str) -> None:
    browser.get_log("browser")
    browser.get(url)
    for _ in range(200):
        if browser.execute_script("return !!(window.tzViewer && (window.tzViewer.ready || window.tzViewer.error))"):
            break
        time.sleep(0.05)
    assert browser.execute_script("return window.tzViewer.error") is None
    assert browser.execute_script("return window.tzViewer.ready") is True


def _console_errors(browser) -> list:
    return [m for m in browser.get_log("browser") if m["level"] in ("SEVERE", "WARNING")]


def test_a_hostile_replay_page_runs_no_injected_script(browser, files, tmp_path):
    """Every string of the replay is drawn as text: the legend, the pane title, the agent panel (class,
    kind, mover, events, reward terms) and the timeline's marker titles show the markup as characters,
    no element was made from it, and window.pwned stays undefined."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    page = write_viewer([files["hostile"], files["good"]], tmp_path / "hostile.html", labels=[f"L{X}", "B"])
    _open(browser, page.as_uri())
    rep = load_replay(files["hostile"])
    agent, frame = int(rep.events[0, 1]), int(rep.events[0, 0])
    browser.execute_script("window.tzViewer.setLayer('ids', true); window.tzViewer.setFrame(arguments[1]);"
                           "window.tzViewer.select(arguments[0])", agent, frame)
    tl = browser.find_element(By.ID, "tz-timeline-canvas")
    marker = browser.execute_script("return window.tzViewer.state().markers[0]")
    ActionChains(browser).move_to_element_with_offset(tl, int(marker["x"] - tl.size["width"] / 2), 0).perform()
    time.sleep(0.3)
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img, svg, iframe, object, embed').length") == 0
    assert browser.execute_script("return document.scripts.length") == 3
    text = browser.execute_script("return document.getElementById('tz-app').textContent")
    legend = browser.execute_script("return document.getElementById('tz-legend').textContent")
    info = browser.execute_script("return document.getElementById('tz-info').textContent")
    titles = browser.execute_script("return Array.from(document.querySelectorAll('.tz-title')).map(e => e.textContent)")
    assert X in legend and "reward" in info and X.lower() in info  # class names are shown lower-cased
    assert titles[0].startswith(f"L{X}: T{X}") and X in text
    assert X in tl.get_attribute("title")
    assert browser.title == f"T{X} | good one"


def test_the_policy_blocks_what_injected_markup_would_run_and_the_page_still_works(browser, files, tmp_path):
    """Under the page's own CSP the normal page opens and plays with no console error; markup put into
    the page by any path (here by the test itself) runs no handler."""
    page = write_viewer(files["good"], tmp_path / "good.html")
    _open(browser, page.as_uri())
    browser.execute_script("window.tzViewer.play()")
    time.sleep(0.4)
    browser.execute_script("window.tzViewer.pause(); window.tzViewer.select(2); window.tzViewer.jumpEvent(1)")
    assert browser.execute_script("return window.tzViewer.state().frame") > 0
    assert _console_errors(browser) == []
    browser.execute_script("document.body.insertAdjacentHTML('beforeend', arguments[0])",
                           '<img src="x" onerror="window.pwned=1"><a id="js" href="javascript:window.pwned=2">x</a>')
    browser.execute_script("document.getElementById('js').click()")
    time.sleep(0.5)
    assert browser.execute_script("return typeof window.pwned") == "undefined"


def test_a_served_page_works_under_its_header_policy(browser, served):
    _open(browser, f"http://127.0.0.1:{served['port']}/view/good.tzr")
    assert browser.execute_script("return window.tzViewer.state().panes[0].title") == "good one"
    assert _console_errors(browser) == []
    browser.get(f"http://localhost:{served['port']}/")
    assert "good one" in browser.page_source and "stuck.tzr" in browser.page_source
