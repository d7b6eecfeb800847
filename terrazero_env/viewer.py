"""The browser replay viewer: self-contained HTML pages and a local server for a folder of replays.

    from terrazero_env.viewer import write_viewer
    write_viewer("episode.tzr", "episode.html")         # one file: opens from disk, no network
    write_viewer(["a.tzr", "b.tzr"], "vs.html")         # side by side, in step (one timeline)

    terrazero view runs/replays                          # serve a folder on localhost, with an index

A page holds the viewer's JavaScript and stylesheet (``viewer_assets/``) and each replay's ``.tzr``
bytes (base64), which the page decodes itself (``DecompressionStream``); nothing is fetched.
``window.tzViewer.state()`` in the page reports what is drawn (frame, camera, every drawn agent with its
world and screen position, the timeline's event markers).

Replays are files users share, so everything read from one is text, never markup (docs/hardening.md,
third pass): Python escapes every string it writes into a page (one function, :func:`_text`), the
replay bytes go into the page as base64 (nothing in them can end their element), the page's script
builds its DOM with ``textContent`` only, and every page carries a Content-Security-Policy that runs
no script but its own (by hash) and loads nothing. The server answers only requests addressed to the
names it serves (a ``Host`` check against DNS rebinding), reads only regular files inside its folder
(a link pointing out of it is refused, a FIFO never blocks it), and lists a bad replay in its index
with the reason instead of failing the index.
"""

from __future__ import annotations

import base64
import hashlib
import html
import ipaddress
import json
import os
import socket
import stat
import threading
from collections.abc import Iterable, Sequence
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from .foundation.safe_files import atomic_write
from .replay import (
    Replay,
    ReplayError,
    encode_replay,
    load_replay_header,
    read_replay_file,
    replay_from_bytes,
    save_replay,
)

__all__ = ["MAX_INDEX_ENTRIES", "index_html", "serve", "viewer_html", "write_episode_replays", "write_index",
           "write_viewer", "write_side_by_side"]

_ASSETS = Path(__file__).resolve().parent / "viewer_assets"
#: Replays a served folder's index lists (the walk stops after them; the index says how many more).
MAX_INDEX_ENTRIES = 10_000
_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


@cache
def _asset(name: str) -> str:
    text = (_ASSETS / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # our own file; it must not end its element
        raise RuntimeError(f"viewer asset {name} holds a closing script or style tag")
    return text


# ------------------------------------------------------------------------------ the one escaping rule
# Every string that reaches a page, as element content or as a double-quoted attribute value, goes
# through _text: html.escape with quotes, so a replay's title, a label, a group, a reason or a file
# name is shown as text whatever it holds.

def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _policy(script: str | None, style: str, *, served: bool = False) -> str:
    """The Content-Security-Policy of a page whose only script and stylesheet are ``script`` and
    ``style`` (inline, allowed by hash): nothing else runs (no other inline script, no event-handler
    attribute, no ``javascript:`` URL), nothing is fetched, images only from ``data:``/``blob:``.
    ``served``: the HTTP header's form, which may also forbid framing."""
    parts = ["default-src 'none'", f"script-src '{_sha256(script)}'" if script is not None else "script-src 'none'",
             f"style-src '{_sha256(style)}'", "img-src data: blob:", "base-uri 'none'", "form-action 'none'"]
    if served:
        parts.append("frame-ancestors 'none'")
    return "; ".join(parts)


def _csp_meta(policy: str) -> str:
    return f'<meta http-equiv="Content-Security-Policy" content="{_text(policy)}">'


def _replay_bytes(src: Any) -> tuple[bytes, dict[str, Any]]:
    """The ``.tzr`` bytes of a path or a :class:`Replay`, checked by the reader (the trust boundary: a
    page is only made of bytes that read back), and its meta. A file is read once: the bytes checked
    are the bytes embedded."""
    if isinstance(src, Replay):
        data = encode_replay(src)
        return data, replay_from_bytes(data, "replay").meta
    data = read_replay_file(src)
    return data, replay_from_bytes(data, str(Path(src))).meta


def _data_block(k: int, data: bytes, label: str) -> str:
    """A replay's bytes as a data block: base64, whose alphabet holds no ``<``, so nothing in a replay
    (a ``</script>`` in its title included) can end the element."""
    b64 = base64.b64encode(data).decode("ascii")
    if not frozenset(b64.encode("ascii")) <= _BASE64:
        raise AssertionError("base64 outside its alphabet")
    return (f'<script type="application/octet-stream" data-tz-replay="{k}" data-tz-label="{_text(label)}">'
            f'{b64}</script>')


def _viewer_policy(*, served: bool = False) -> str:
    return _policy(_asset("viewer.js"), _asset("viewer.css"), served=served)


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
        title = " | ".join(str(m.get("title") or "replay") for _, m in blobs)
    scripts = "\n".join(_data_block(k, b, lab) for k, ((b, _), lab) in enumerate(zip(blobs, labels)))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{_csp_meta(_viewer_policy())}
<title>{_text(title)}</title>
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
    """Write :func:`viewer_html` to ``out`` (atomically; a link at ``out`` is refused) and return its path."""
    out = Path(out)
    page = viewer_html(replays, title, labels)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, page, "viewer page")
    return out


_INDEX_STYLE = """body{font:14px system-ui,sans-serif;background:#1d1f23;color:#e6e6e6;margin:20px}
table{border-collapse:collapse} th{text-align:left;padding:4px 12px 4px 0;vertical-align:top;color:#9cc3ff}
td a{display:inline-block;margin:2px 8px 2px 0;color:#e6e6e6;background:#2f333a;padding:2px 6px;border-radius:3px;text-decoration:none}
td a:hover{background:#444a54} .s{color:#ffd27a} .bad{color:#ff9a8a}"""


def _index_policy(*, served: bool = False) -> str:
    return _policy(None, _INDEX_STYLE, served=served)


def _score(v: Any) -> str:
    """A score as shown in an index: a real number to one decimal, anything else nothing."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return ""
    return f' <span class="s">{float(v):.1f}</span>'


def index_html(entries: Sequence[dict[str, Any]], title: str = "TerraZero replays") -> str:
    """An index page: ``entries`` of ``{"href", "title", "group" (optional), "score" (optional)}``,
    one table row per group (a suite's family), each entry a link with its score; an entry with
    ``"error"`` is listed as text with its reason instead of a link."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        g = e.get("group")
        groups.setdefault("" if g is None else str(g), []).append(e)
    rows = []
    for g, items in groups.items():
        cells = []
        for e in items:
            label = e.get("title")
            label = e.get("href", "") if label is None else label
            if e.get("error") is not None:
                cells.append(f'<span class="bad">{_text(label)}</span>')
                continue
            href = quote(str(e["href"]), errors="surrogateescape")  # a path: quoted, so never a javascript: URL
            cells.append(f'<a href="{_text(href)}">{_text(label)}{_score(e.get("score"))}</a>')
        rows.append(f"<tr><th>{_text(g) if g else '&nbsp;'}</th><td>{' '.join(cells)}</td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{_csp_meta(_index_policy())}
<title>{_text(title)}</title>
<style>{_INDEX_STYLE}</style></head>
<body><h2>{_text(title)}</h2><table>{''.join(rows)}</table></body></html>
"""


def write_index(folder: str | os.PathLike[str], entries: Sequence[dict[str, Any]], title: str = "TerraZero replays",
                name: str = "index.html") -> Path:
    """Write :func:`index_html` as ``folder/name`` (atomically; a link there is refused)."""
    p = Path(folder) / name
    page = index_html(entries, title)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(p, page, "index page")
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


# ------------------------------------------------------------------------------ the served folder

class _Refused(Exception):
    """A path the server will not read: (HTTP status, reason)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _inside(root_real: str, path: str) -> str:
    """The real path of ``path`` if it lies inside the folder ``root_real`` (links are followed only
    while they stay inside); :class:`_Refused` otherwise."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        raise _Refused(404, "no such replay") from None
    if os.path.commonpath([root_real, real]) != root_real:
        raise _Refused(403, "a link pointing outside the served folder (refused)")
    return real


def _replay_paths(root: Path) -> Iterable[str]:
    """Relative paths of the ``*.tzr`` names under ``root`` (links listed, linked folders not entered),
    sorted, at most :data:`MAX_INDEX_ENTRIES` + 1."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(files):
            if name.endswith(".tzr"):
                found.append(name if rel_folder == "." else f"{rel_folder}/{name}".replace(os.sep, "/"))
                if len(found) > MAX_INDEX_ENTRIES:
                    return sorted(found)
    return sorted(found)


def _folder_entries(root: Path) -> list[dict[str, Any]]:
    """The index of a served folder: one entry per ``*.tzr`` (its meta's title, group and score, read
    from the header only); a replay that cannot be read is listed with its reason, never stopping the
    others."""
    root_real = os.path.realpath(root)
    rels = list(_replay_paths(root))
    more = len(rels) > MAX_INDEX_ENTRIES
    entries = []
    for rel in rels[:MAX_INDEX_ENTRIES]:
        href = f"view/{rel}"
        real = None
        try:
            real = _inside(root_real, os.path.join(root, rel))
            header = load_replay_header(real)
        except _Refused as e:
            entries.append(_bad_entry(href, rel, e.reason))
            continue
        except (ReplayError, OSError) as e:  # one bad replay is named, the others still listed
            entries.append(_bad_entry(href, rel, str(e) if real is None else str(e).replace(real, rel)))
            continue
        meta = header.get("meta", {})
        default_group = rel.rsplit("/", 1)[0] if "/" in rel else ""
        entries.append({"href": href, "title": meta.get("title") or rel,
                        "group": meta.get("group") if meta.get("group") is not None else default_group,
                        "score": meta.get("score")})
    if more:
        entries.append({"href": "", "title": f"more than {MAX_INDEX_ENTRIES} replays: the rest are not listed",
                        "group": "unreadable", "error": "too many replays"})
    return entries


def _bad_entry(href: str, rel: str, reason: str) -> dict[str, Any]:
    return {"href": href, "title": f"{rel} (unreadable: {reason})", "group": "unreadable", "error": reason}


def _allowed_hosts(host: str, port: int, extra: Iterable[str]) -> frozenset[str]:
    """The ``Host`` header values the server answers: the loopback names and the bound host, with the
    port (and without it on port 80)."""
    names = {"localhost", "127.0.0.1", "[::1]", *extra}
    if host and host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    out = {f"{n.lower()}:{port}" for n in names}
    if port == 80:
        out |= {n.lower() for n in names}
    return frozenset(out)


def _host_ok(value: str | None, allowed: frozenset[str], port: int, wildcard: bool) -> bool:
    """Whether a request's ``Host`` header names this server. A page elsewhere that rebinds its own
    DNS name to 127.0.0.1 still sends its own name, and is refused; bound to every interface, a
    literal IP address with the port is answered too (a literal cannot be rebound)."""
    if value is None:
        return False
    v = value.strip().lower()
    if v in allowed:
        return True
    if not wildcard:
        return False
    name, _, p = v.rpartition(":")
    if p != str(port) or not name:
        return False
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        return False
    return True


def _handler(root: Path) -> type[BaseHTTPRequestHandler]:
    root_real = os.path.realpath(root)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the command prints the address
            return

        def _send(self, code: int, body: str, ctype: str = "text/html; charset=utf-8",
                  policy: str = "default-src 'none'; frame-ancestors 'none'") -> None:
            data = body.encode("utf-8", "replace")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Security-Policy", policy)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, reason: str) -> None:
            self._send(code, f"<!DOCTYPE html><title>{code}</title><p>{_text(reason)}</p>")

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            srv = self.server
            if not _host_ok(self.headers.get("Host"), srv.tz_allowed_hosts, srv.server_address[1], srv.tz_wildcard):
                self._error(403, "this server answers only requests addressed to its own names (Host refused)")
                return
            path = unquote(urlparse(self.path).path, errors="surrogateescape")
            if path in ("/", "/index.html"):
                if root.is_file():
                    try:
                        self._send(200, viewer_html(root), policy=_viewer_policy(served=True))
                    except ReplayError as e:
                        self._error(400, str(e))
                else:
                    self._send(200, index_html(_folder_entries(root), f"replays in {root.name}"),
                               policy=_index_policy(served=True))
                return
            if path.startswith("/view/") and root.is_dir():
                rel = real = path[len("/view/"):]
                try:
                    if not rel.endswith(".tzr") or "\0" in rel:
                        raise _Refused(404, "no such replay")
                    real = _inside(root_real, os.path.join(root_real, rel))
                    if not real.endswith(".tzr"):
                        raise _Refused(404, "no such replay")
                    page = viewer_html(real)
                except _Refused as e:
                    self._error(e.status, e.reason)
                    return
                except FileNotFoundError:
                    self._error(404, "no such replay")
                    return
                except (ReplayError, OSError) as e:
                    self._error(400, str(e).replace(real, rel))
                    return
                self._send(200, page, policy=_viewer_policy(served=True))
                return
            if path == "/index.json" and root.is_dir():
                self._send(200, json.dumps(_folder_entries(root)), "application/json")
                return
            self._error(404, "not found")

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    tz_allowed_hosts: frozenset[str] = frozenset()
    tz_wildcard = False


def serve(path: str | os.PathLike[str], port: int = 8765, host: str = "127.0.0.1", *,
          background: bool = False, allowed_hosts: Sequence[str] = ()) -> ThreadingHTTPServer:
    """Serve a ``.tzr`` file or a folder of them (searched recursively) on ``http://host:port/``: the
    index lists every replay (grouped by its meta's ``group``; a bad one with its reason) and
    ``/view/REL`` shows one. Only requests whose ``Host`` is ``localhost``, ``127.0.0.1``, ``[::1]``,
    ``host`` or one of ``allowed_hosts`` (each with the port) are answered (others get 403: a web page
    cannot reach the server by rebinding its DNS name). Blocks until interrupted unless ``background``
    (then the running server is returned; ``shutdown()`` it)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such replay or folder: {root}")
    mode = root.stat().st_mode
    if stat.S_ISREG(mode):
        replay_from_bytes(read_replay_file(root), str(root))
    elif not stat.S_ISDIR(mode):
        raise ValueError(f"{root}: not a replay file or a folder")
    cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6}) if ":" in host else _Server
    server = cls((host, int(port)), _handler(root))
    server.tz_allowed_hosts = _allowed_hosts(host, server.server_address[1], allowed_hosts)
    server.tz_wildcard = host in ("", "0.0.0.0", "::")
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
