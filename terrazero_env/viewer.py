"""The browser replay viewer: self-contained HTML pages and a local server for a folder of replays.

    from terrazero_env.viewer import write_viewer
    write_viewer("episode.tzr", "episode.html")         # one file: opens from disk, no network
    write_viewer(["a.tzr", "b.tzr"], "vs.html")         # side by side, in step (one timeline)

    terrazero view runs/replays                          # serve a folder on localhost, with an index

A page holds the viewer's JavaScript and stylesheet (``viewer_assets/``) and each replay's ``.tzr``
bytes (base64), which the page decodes itself (``DecompressionStream``); nothing is fetched.
``window.tzViewer.state()`` in the page reports what is drawn (frame, camera, every drawn agent with its
world and screen position, the timeline's event markers).
"""

from __future__ import annotations

import base64
import html
import json
import os
import threading
from collections.abc import Sequence
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from .replay import Replay, ReplayError, load_replay, save_replay

__all__ = ["index_html", "serve", "viewer_html", "write_episode_replays", "write_index", "write_viewer",
           "write_side_by_side"]

_ASSETS = Path(__file__).resolve().parent / "viewer_assets"


@cache
def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


def _replay_bytes(src: Any) -> tuple[bytes, dict[str, Any]]:
    """The ``.tzr`` bytes of a path or a :class:`Replay` (checked by loading), and its meta."""
    if isinstance(src, Replay):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            p = save_replay(src, Path(d) / "r.tzr")
            return p.read_bytes(), src.meta
    path = Path(src)
    rep = load_replay(path)  # the trust boundary: a page is only made of a replay that reads back
    return path.read_bytes(), rep.meta


def viewer_html(replays: Any | Sequence[Any], title: str | None = None,
                labels: Sequence[str] | None = None) -> str:
    """One self-contained page showing ``replays`` (a ``.tzr`` path or :class:`Replay`, or a list of
    them: side by side, in step, each pane titled with its ``labels`` entry before its own title)."""
    items = list(replays) if isinstance(replays, (list, tuple)) else [replays]
    if not items:
        raise ValueError("viewer_html needs at least one replay")
    labels = [""] * len(items) if labels is None else [str(x) for x in labels]
    if len(labels) != len(items):
        raise ValueError(f"one label per replay: {len(items)} replays, {len(labels)} labels")
    blobs = [_replay_bytes(r) for r in items]
    if title is None:
        title = " | ".join(str(m.get("title", "replay")) for _, m in blobs)
    scripts = "\n".join(f'<script type="application/octet-stream" data-tz-replay="{k}" '
                        f'data-tz-label="{html.escape(lab)}">{base64.b64encode(b).decode()}</script>'
                        for k, ((b, _), lab) in enumerate(zip(blobs, labels)))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_asset("viewer.css")}</style></head>
<body><div id="tz-app">
<div id="tz-top">
<button id="tz-play" title="play / pause (space)">play</button>
<button id="tz-back" title="one step back (left arrow)">&#9664;</button>
<button id="tz-fwd" title="one step on (right arrow)">&#9654;</button>
<label>speed <select id="tz-speed"><option value="0.25">0.25x</option><option value="0.5">0.5x</option>
<option value="1" selected>1x</option><option value="2">2x</option><option value="4">4x</option>
<option value="8">8x</option></select></label>
<button id="tz-prev-ev" title="previous event (p)">&#8676; event</button>
<button id="tz-next-ev" title="next event (n)">event &#8677;</button>
<button id="tz-follow" title="follow the selected agent (f)">follow</button>
<button id="tz-fit" title="whole map (r)">fit</button>
<span id="tz-clock"></span>
<span id="tz-legend"></span>
</div>
<div id="tz-error"></div>
<div id="tz-main"><div id="tz-panes"></div>
<div id="tz-side"><h3>agent</h3><div id="tz-info"><i>hover or click an agent</i></div>
<h3>events on the timeline</h3><div id="tz-event-legend"></div>
<h3>layers</h3><div id="tz-layers"></div>
<h3>keys</h3><div>space play/pause, arrows step, n/p next/previous event, f follow, r fit, wheel zoom, drag pan</div>
</div></div>
<div id="tz-timeline"><canvas id="tz-timeline-canvas"></canvas></div>
</div>
{scripts}
<script>{_asset("viewer.js")}</script>
</body></html>
"""


def write_viewer(replays: Any | Sequence[Any], out: str | os.PathLike[str], title: str | None = None,
                 labels: Sequence[str] | None = None) -> Path:
    """Write :func:`viewer_html` to ``out`` and return its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(viewer_html(replays, title, labels), encoding="utf-8")
    return out


def index_html(entries: Sequence[dict[str, Any]], title: str = "TerraZero replays") -> str:
    """An index page: ``entries`` of ``{"href", "title", "group" (optional), "score" (optional)}``,
    one table row per group (a suite's family), each entry a link with its score."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(str(e.get("group", "")), []).append(e)
    rows = []
    for g, items in groups.items():
        links = " ".join(
            f'<a href="{html.escape(quote(str(e["href"])))}">{html.escape(str(e.get("title", e["href"])))}'
            + (f' <span class="s">{float(e["score"]):.1f}</span>' if e.get("score") is not None else "") + "</a>"
            for e in items)
        rows.append(f"<tr><th>{html.escape(g) if g else '&nbsp;'}</th><td>{links}</td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font:14px system-ui,sans-serif;background:#1d1f23;color:#e6e6e6;margin:20px}}
table{{border-collapse:collapse}} th{{text-align:left;padding:4px 12px 4px 0;vertical-align:top;color:#9cc3ff}}
td a{{display:inline-block;margin:2px 8px 2px 0;color:#e6e6e6;background:#2f333a;padding:2px 6px;border-radius:3px;text-decoration:none}}
td a:hover{{background:#444a54}} .s{{color:#ffd27a}}</style></head>
<body><h2>{html.escape(title)}</h2><table>{''.join(rows)}</table></body></html>
"""


def write_index(folder: str | os.PathLike[str], entries: Sequence[dict[str, Any]], title: str = "TerraZero replays",
                name: str = "index.html") -> Path:
    """Write :func:`index_html` as ``folder/name``."""
    p = Path(folder) / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(index_html(entries, title), encoding="utf-8")
    return p


def write_episode_replays(folder: str | os.PathLike[str], episodes: Sequence[dict[str, Any]],
                          title: str = "TerraZero replays", index: bool = True) -> list[dict[str, Any]]:
    """Write each of ``episodes`` (dicts with ``replay`` (a :class:`Replay`), ``name`` (a file stem,
    may hold a ``family/`` folder), ``title``, and optionally ``score``, ``group``, ``focus`` (the agent
    to select) and further meta) as ``folder/NAME.tzr`` and a self-contained ``folder/NAME.html``,
    then an ``index.html`` grouping them. Returns the index entries (``href``, ``replay``, ...)."""
    root = Path(folder)
    entries = []
    for ep in episodes:
        rep = ep["replay"]
        meta = {**rep.meta, **{k: v for k, v in ep.items() if k not in ("replay", "name")}}
        rep = Replay({**rep.header, "meta": meta}, rep.arrays, rep.events)
        tzr = save_replay(rep, root / f"{ep['name']}.tzr")
        page = write_viewer(tzr, root / f"{ep['name']}.html")
        entries.append({"href": page.relative_to(root).as_posix(), "replay": tzr.relative_to(root).as_posix(),
                        "title": str(ep.get("title", ep["name"])), "group": ep.get("group", ""),
                        "score": ep.get("score")})
    if index:
        write_index(root, entries, title)
    return entries


def write_side_by_side(folder: str | os.PathLike[str], pairs: Sequence[tuple[str, str, dict[str, Any]]],
                       title: str = "TerraZero replays side by side",
                       labels: Sequence[str] = ("A", "B")) -> list[dict[str, Any]]:
    """For each ``(replay A, replay B, entry)`` (paths relative to ``folder``), a page
    ``folder/entry["name"].html`` playing both in step (panes titled by ``labels``), and an
    ``index.html`` of them."""
    root = Path(folder)
    entries = []
    for a, b, ent in pairs:
        page = write_viewer([root / a, root / b], root / f"{ent['name']}.html", ent.get("title"), labels)
        entries.append({"href": page.relative_to(root).as_posix(), "title": str(ent.get("title", ent["name"])),
                        "group": ent.get("group", ""), "score": ent.get("score")})
    write_index(root, entries, title)
    return entries


def _folder_entries(root: Path) -> list[dict[str, Any]]:
    entries = []
    for p in sorted(root.rglob("*.tzr")):
        rel = p.relative_to(root).as_posix()
        try:
            meta = load_replay(p).meta
        except ReplayError as e:
            entries.append({"href": f"view/{rel}", "title": f"{rel} (unreadable: {e})", "group": "unreadable"})
            continue
        entries.append({"href": f"view/{rel}", "title": str(meta.get("title", rel)),
                        "group": str(meta.get("group", Path(rel).parent.as_posix() if "/" in rel else "")),
                        "score": meta.get("score")})
    return entries


def _handler(root: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the command prints the address
            return

        def _send(self, code: int, body: str, ctype: str = "text/html; charset=utf-8") -> None:
            data = body.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = unquote(urlparse(self.path).path)
            if path in ("/", "/index.html"):
                if root.is_file():
                    self._send(200, viewer_html(root))
                else:
                    self._send(200, index_html(_folder_entries(root), f"replays in {root.name}"))
                return
            if path.startswith("/view/") and root.is_dir():
                target = (root / path[len("/view/"):]).resolve()
                if root.resolve() not in target.parents or target.suffix != ".tzr" or not target.is_file():
                    self._send(404, "no such replay")
                    return
                try:
                    self._send(200, viewer_html(target))
                except ReplayError as e:
                    self._send(400, html.escape(str(e)))
                return
            if path == "/index.json" and root.is_dir():
                self._send(200, json.dumps(_folder_entries(root)), "application/json")
                return
            self._send(404, "not found")

    return Handler


def serve(path: str | os.PathLike[str], port: int = 8765, host: str = "127.0.0.1", *,
          background: bool = False) -> ThreadingHTTPServer:
    """Serve a ``.tzr`` file or a folder of them (searched recursively) on ``http://host:port/``: the
    index lists every replay (grouped by its meta's ``group``) and ``/view/REL`` shows one. Blocks
    until interrupted unless ``background`` (then the running server is returned; ``shutdown()`` it)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such replay or folder: {root}")
    if root.is_file():
        load_replay(root)
    server = ThreadingHTTPServer((host, int(port)), _handler(root))
    if background:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return server
