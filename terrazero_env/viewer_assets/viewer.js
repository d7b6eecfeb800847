// TerraZero replay viewer: decodes .tzr replays (docs/replay.md) embedded in the page and draws them
// on a 2D canvas. No network: everything it needs is in the page. window.tzViewer exposes the state
// of what is drawn (for tests and scripts).
// Everything read from a replay is text, never markup (docs/hardening.md, third pass): the DOM is
// built with createElement and textContent only (the helper `node`); no innerHTML, no HTML strings.
"use strict";
(function () {
  const MAGIC = "TZREPLAY";
  const DTYPES = { u1: Uint8Array, i1: Int8Array, u2: Uint16Array, i2: Int16Array, i4: Int32Array,
                   u4: Uint32Array, f4: Float32Array };
  // Colours by mover (MOVERS order: policy, idm_ego, planner_ego, idm, planner, replay, static, pedestrian).
  const MOVER_COLOURS = ["#3d7be0", "#2bb3c0", "#8a5ce6", "#9aa3ad", "#c9a13b", "#7fbf6a", "#5b6068", "#f08a2c"];
  const KIND_COLOURS = [null, "#4c5566", "#c8402e", "#ff8000", "#f5dc1a", "#80522a"];
  const SIGNAL_COLOURS = ["#e03030", "#f2c81a", "#2ec04a", "#8a8a8a"];
  const EVENT_COLOURS = { goal: "#2ec04a", collision: "#ff3030", offroad: "#ff9a1f", wrong_way: "#d040d0",
                          stop_line: "#ffd84a", red_light: "#ff6a6a", incursion: "#40c0ff", comfort: "#777" };
  const LINE_COLOURS = ["#d8d8d8", "#b8b8b8", "#e0b020", "#e0b020", "#e0b020"];
  const LAYERS = [["lanes", "lanes"], ["arrows", "lane directions"], ["lines", "road lines"], ["edges", "road edges"],
                  ["crosswalks", "crosswalks"], ["sidewalks", "sidewalks"], ["stop_lines", "stop lines"],
                  ["signals", "signal heads"], ["trails", "trails"], ["goals", "goals"], ["ids", "agent ids"]];
  const TRAIL = 30;

  function b64bytes(text) {
    const s = atob(text.trim());
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }

  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function decode(raw) {
    const magic = new TextDecoder().decode(raw.subarray(0, 8));
    if (magic !== MAGIC) throw new Error("not a TerraZero replay (bad magic)");
    const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    const hlen = dv.getUint32(8, true);
    const header = JSON.parse(new TextDecoder().decode(raw.subarray(12, 12 + hlen)));
    if (header.format !== "terrazero-replay" || header.version !== 1)
      throw new Error("unsupported replay format " + header.format + " version " + header.version);
    const base = 12 + hlen;
    const arrays = {};
    for (const ent of header.arrays) {
      const T = DTYPES[ent.dtype];
      if (!T) throw new Error("array " + ent.name + ": unknown dtype " + ent.dtype);
      if (!(ent.offset >= 0 && ent.nbytes >= 0 && base + ent.offset + ent.nbytes <= raw.byteLength))
        throw new Error("array " + ent.name + " runs past the end of the replay");
      const n = ent.nbytes / T.BYTES_PER_ELEMENT;
      const copy = new T(n);
      copy.set(new T(raw.buffer.slice(raw.byteOffset + base + ent.offset, raw.byteOffset + base + ent.offset + ent.nbytes)));
      const row = ent.shape.slice(1).reduce((a, b) => a * b, 1);
      if (ent.delta && ent.shape[0] > 1) {
        for (let i = row; i < n; i++) copy[i] = copy[i] + copy[i - row];  // wraps in the typed array
      }
      let data = copy;
      if (ent.unit !== null && ent.unit !== undefined) {
        data = new Float64Array(n);
        for (let i = 0; i < n; i++) data[i] = copy[i] * ent.unit;
      }
      arrays[ent.name] = { data: data, shape: ent.shape, row: row };
    }
    return { header: header, a: arrays, T: header.frames, N: header.agents, K: header.slots };
  }

  function polylines(rep, name) {
    const pts = rep.a["map_" + name + "_pts"], off = rep.a["map_" + name + "_off"];
    const out = [];
    if (!pts || !off) return out;
    const p = pts.data, o = off.data;
    for (let r = 0; r + 1 < o.length; r++) {
      const line = [];
      for (let i = o[r]; i < o[r + 1]; i++) line.push([p[2 * i], p[2 * i + 1]]);
      out.push(line);
    }
    return out;
  }

  function buildMap(rep) {
    const paths = {};
    const mk = (lines, closed) => {
      const path = new Path2D();
      for (const l of lines) {
        if (!l.length) continue;
        path.moveTo(l[0][0], l[0][1]);
        for (let i = 1; i < l.length; i++) path.lineTo(l[i][0], l[i][1]);
        if (closed) path.closePath();
      }
      return path;
    };
    const lanes = polylines(rep, "lanes");
    paths.lanes = mk(lanes, false);
    paths.edges = mk(polylines(rep, "edges"), false);
    paths.crosswalks = mk(polylines(rep, "crosswalks"), true);
    paths.sidewalks = mk(polylines(rep, "sidewalks"), true);
    const lines = polylines(rep, "lines");
    const ltype = rep.a.map_line_type ? rep.a.map_line_type.data : new Uint8Array(lines.length);
    paths.lines = [];
    for (let t = 0; t < 5; t++) paths.lines.push(mk(lines.filter((_, i) => ltype[i] === t), false));
    paths.dashed = [1, 3];
    // lane direction: a chevron at the middle of every lane
    const arrows = new Path2D();
    for (const l of lanes) {
      if (l.length < 2) continue;
      const m = Math.floor((l.length - 1) / 2);
      const a = l[m], b = l[m + 1];
      const dx = b[0] - a[0], dy = b[1] - a[1], d = Math.hypot(dx, dy) || 1;
      const ux = dx / d, uy = dy / d, cx = (a[0] + b[0]) / 2, cy = (a[1] + b[1]) / 2;
      arrows.moveTo(cx - 1.2 * ux + 0.8 * uy, cy - 1.2 * uy - 0.8 * ux);
      arrows.lineTo(cx + 0.6 * ux, cy + 0.6 * uy);
      arrows.lineTo(cx - 1.2 * ux - 0.8 * uy, cy - 1.2 * uy + 0.8 * ux);
    }
    paths.arrows = arrows;
    let xmin = Infinity, ymin = Infinity, xmax = -Infinity, ymax = -Infinity;
    for (const l of lanes) for (const p of l) {
      xmin = Math.min(xmin, p[0]); xmax = Math.max(xmax, p[0]); ymin = Math.min(ymin, p[1]); ymax = Math.max(ymax, p[1]);
    }
    if (!isFinite(xmin)) { xmin = -50; xmax = 50; ymin = -50; ymax = 50; }
    return { paths: paths, bounds: [xmin, ymin, xmax, ymax] };
  }

  function eventsOf(rep) {
    const ev = rep.a.events, names = rep.header.names.events || [], out = [];
    if (!ev) return out;
    const d = ev.data;
    for (let r = 0; r < ev.shape[0]; r++) {
      const bits = d[4 * r + 2];
      for (let b = 0; b < names.length; b++) {
        if (!(bits & (1 << b)) || names[b] === "comfort") continue;
        out.push({ frame: d[4 * r], agent: d[4 * r + 1], kind: names[b], partner: d[4 * r + 3] });
      }
    }
    return out;
  }

  function at(arr, t, i) { return arr.data[t * arr.row + i]; }
  // The one way text reaches the page: an element whose content is `text` as text (never parsed as
  // markup), with optional children appended after it.
  function node(tag, text, ...children) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const c of children) e.appendChild(c);
    return e;
  }
  // Entry k of one of the replay's vocabularies (names.classes, ...), or k itself when it has none.
  function nameAt(list, k) { return Array.isArray(list) && list[k] !== undefined ? String(list[k]) : String(k); }
  // What moves an agent, in words: a baseline driver's ego by the driver's name (the replay's
  // meta.driver; a policy's ego stays "policy"). The IDM and planner drivers' egos move as the
  // engine's idm_ego and planner_ego; the reference driver's (and any other's) as "policy".
  const EGO_DRIVERS = { reference: "reference driver", idm: "IDM driver", planner: "planner driver" };
  function moverLabel(rep, m) {
    const base = nameAt(rep.header.names.movers, m);
    const driver = (rep.header.meta || {}).driver;
    if (base === "policy" && typeof driver === "string" && !["policy", "idm", "planner"].includes(driver)) {
      return (EGO_DRIVERS[driver] || driver + " driver") + " (ego)";
    }
    if (base === "idm_ego") return "IDM driver (ego)";
    if (base === "planner_ego") return "planner driver (ego)";
    return base.replace(/_/g, " ");
  }
  function num(v) { return v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(4); }

  // ------------------------------------------------------------------------------------ viewer
  function Viewer(reps, root) {
    this.reps = reps;
    this.maps = reps.map(buildMap);
    this.events = reps.map(eventsOf);
    this.T = Math.max.apply(null, reps.map(r => r.T));
    this.frame = 0;
    this.playing = false;
    this.speed = 1;
    this.follow = -1;
    this.selected = -1;
    this.hover = -1;
    this.layers = {};
    for (const [k] of LAYERS) this.layers[k] = k !== "ids";
    this.drawn = reps.map(() => []);
    this.errors = [];
    this.frameTimes = [];
    this.root = root;
    this._acc = 0;
    this._last = null;
    this.build();
    this.fit();
    const focus = (reps[0].header.meta || {}).focus;
    if (Number.isInteger(focus) && focus >= 0 && focus < reps[0].N) {  // the episode's own agent
      this.selected = this.follow = focus;
      this.cam.scale = Math.max(this.cam.scale, (this.canvases[0].clientWidth || 800) / 90);
      this.showInfo();
    }
    this.render();
    requestAnimationFrame(this.tick.bind(this));
  }

  Viewer.prototype.build = function () {
    const v = this;
    const $ = id => document.getElementById(id);
    $("tz-play").onclick = () => v.toggle();
    $("tz-back").onclick = () => v.setFrame(v.frame - 1);
    $("tz-fwd").onclick = () => v.setFrame(v.frame + 1);
    $("tz-prev-ev").onclick = () => v.jumpEvent(-1);
    $("tz-next-ev").onclick = () => v.jumpEvent(1);
    $("tz-fit").onclick = () => { v.follow = -1; v.fit(); v.render(); };
    $("tz-follow").onclick = () => v.setFollow(v.follow >= 0 ? -1 : (v.selected >= 0 ? v.selected : v.firstPolicy()));
    $("tz-speed").onchange = e => { v.speed = parseFloat(e.target.value); };
    const lay = $("tz-layers");
    for (const [k, label] of LAYERS) {
      const l = document.createElement("label");
      const c = document.createElement("input");
      c.type = "checkbox"; c.checked = v.layers[k]; c.dataset.layer = k;
      c.onchange = () => { v.layers[k] = c.checked; v.render(); };
      l.appendChild(c); l.appendChild(document.createTextNode(" " + label));
      lay.appendChild(l);
    }
    const legend = $("tz-legend");
    const names = this.reps[0].header.names.movers;
    names.forEach((n, i) => {
      const s = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = MOVER_COLOURS[i] || "#999";
      s.appendChild(swatch);
      s.appendChild(document.createTextNode(moverLabel(this.reps[0], i)));
      legend.appendChild(s);
    });
    const evLegend = $("tz-event-legend");
    for (const [k, colour] of Object.entries(EVENT_COLOURS)) {
      if (k === "comfort") continue;
      const sp = document.createElement("span");
      const label = { offroad: "off-road", stop_line: "stop sign run", wrong_way: "wrong way", red_light: "red light" }[k] || k;
      const swatch = node("i");
      swatch.style.background = colour;
      sp.appendChild(swatch);
      sp.appendChild(document.createTextNode(label));
      evLegend.appendChild(sp);
    }
    const panes = $("tz-panes");
    this.canvases = this.reps.map((rep, p) => {
      const div = document.createElement("div");
      div.className = "tz-pane";
      const c = document.createElement("canvas");
      c.dataset.pane = p;
      div.appendChild(c);
      const title = document.createElement("div");
      title.className = "tz-title";
      const m = rep.header.meta || {};
      title.textContent = (rep.label ? rep.label + ": " : "") + (m.title || rep.header.map.name || "replay") + (m.score !== undefined ? "  score " + Number(m.score).toFixed(1) : "");
      div.appendChild(title);
      panes.appendChild(div);
      this.bindPane(c, p);
      return c;
    });
    const tl = $("tz-timeline-canvas");
    this.timeline = tl;
    let scrub = false;
    const toFrame = ev => {
      const r = tl.getBoundingClientRect();
      const f = Math.round((ev.clientX - r.left) / r.width * (v.T - 1));
      v.setFrame(f);
    };
    tl.onmousedown = ev => { scrub = true; v.pause(); toFrame(ev); };
    tl.addEventListener("mousemove", ev => {  // name the events under the pointer
      const x = ev.clientX - tl.getBoundingClientRect().left;
      const near = (v.markers || []).filter(m => Math.abs(m.x - x) <= 3);
      tl.title = near.length ? near.slice(0, 8).map(m => "step " + m.frame + ": " + m.kind.replace("_", " ") +
        ", agent " + m.agent + (v.reps.length > 1 ? " (" + (v.reps[m.pane].label || "pane " + m.pane) + ")" : "")).join("\n") : "";
    });
    window.addEventListener("mousemove", ev => { if (scrub) toFrame(ev); });
    window.addEventListener("mouseup", () => { scrub = false; });
    window.addEventListener("keydown", ev => {
      if (ev.target.tagName === "SELECT" || ev.target.tagName === "INPUT") return;
      if (ev.key === " ") { v.toggle(); ev.preventDefault(); }
      else if (ev.key === "ArrowRight") v.setFrame(v.frame + 1);
      else if (ev.key === "ArrowLeft") v.setFrame(v.frame - 1);
      else if (ev.key === "n") v.jumpEvent(1);
      else if (ev.key === "p") v.jumpEvent(-1);
      else if (ev.key === "f") $("tz-follow").onclick();
      else if (ev.key === "r") $("tz-fit").onclick();
    });
    window.addEventListener("resize", () => v.render());
  };

  Viewer.prototype.bindPane = function (c, p) {
    const v = this;
    let drag = null;
    c.onmousedown = ev => { drag = { x: ev.clientX, y: ev.clientY, cx: v.cam.cx, cy: v.cam.cy, moved: false }; };
    window.addEventListener("mouseup", ev => {
      if (drag && !drag.moved && ev.target === c) {
        const r = c.getBoundingClientRect();
        v.infoPane = p;
        v.select(v.agentAt(p, ev.clientX - r.left, ev.clientY - r.top));
      }
      drag = null;
    });
    c.addEventListener("mousemove", ev => {
      const r = c.getBoundingClientRect();
      if (drag) {
        const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        if (drag.moved) {
          v.follow = -1;
          v.cam.cx = drag.cx - dx / v.cam.scale;
          v.cam.cy = drag.cy + dy / v.cam.scale;
          v.render();
        }
        return;
      }
      const h = v.agentAt(p, ev.clientX - r.left, ev.clientY - r.top);
      if (h !== v.hover || p !== v.infoPane) { v.hover = h; v.infoPane = p; v.showInfo(); v.render(); }
    });
    c.addEventListener("wheel", ev => {
      ev.preventDefault();
      const r = c.getBoundingClientRect();
      const k = Math.exp(-ev.deltaY * 0.0015);
      v.zoomAt(p, ev.clientX - r.left, ev.clientY - r.top, k);
    }, { passive: false });
  };

  Viewer.prototype.fit = function () {
    const b = this.maps[0].bounds;
    const c = this.canvases[0];
    const w = c.clientWidth || 800, h = c.clientHeight || 600;
    const scale = Math.min(w / Math.max(b[2] - b[0], 1), h / Math.max(b[3] - b[1], 1)) * 0.92;
    this.cam = { cx: (b[0] + b[2]) / 2, cy: (b[1] + b[3]) / 2, scale: scale };
  };

  Viewer.prototype.zoomAt = function (p, px, py, k) {
    const c = this.canvases[p];
    const w = c.clientWidth, h = c.clientHeight;
    const wx = this.cam.cx + (px - w / 2) / this.cam.scale, wy = this.cam.cy - (py - h / 2) / this.cam.scale;
    this.cam.scale = Math.min(Math.max(this.cam.scale * k, 0.05), 400);
    if (this.follow < 0) {
      this.cam.cx = wx - (px - w / 2) / this.cam.scale;
      this.cam.cy = wy + (py - h / 2) / this.cam.scale;
    }
    this.render();
  };

  Viewer.prototype.toScreen = function (c, x, y) {
    return [c.clientWidth / 2 + (x - this.cam.cx) * this.cam.scale, c.clientHeight / 2 - (y - this.cam.cy) * this.cam.scale];
  };

  Viewer.prototype.firstPolicy = function () {
    const rep = this.reps[0], t = Math.min(this.frame, rep.T - 1);
    for (let i = 0; i < rep.N; i++) if (at(rep.a.alive, t, i) && at(rep.a.slot, t, i) >= 0) return i;
    return -1;
  };

  Viewer.prototype.setFollow = function (i) { this.follow = i; if (i >= 0) this.selected = i; this.showInfo(); this.render(); };
  Viewer.prototype.select = function (i) { this.selected = i; if (this.follow >= 0 && i >= 0) this.follow = i; this.showInfo(); this.render(); };
  Viewer.prototype.toggle = function () { if (this.playing) this.pause(); else this.play(); };
  Viewer.prototype.play = function () { if (this.frame >= this.T - 1) this.frame = 0; this.playing = true; this._last = null; this.updateButtons(); };
  Viewer.prototype.pause = function () { this.playing = false; this.updateButtons(); };
  Viewer.prototype.updateButtons = function () { document.getElementById("tz-play").textContent = this.playing ? "pause" : "play"; };

  Viewer.prototype.setFrame = function (f) {
    this.frame = Math.max(0, Math.min(this.T - 1, Math.round(f)));
    this.showInfo();
    this.render();
  };

  Viewer.prototype.jumpEvent = function (dir) {
    const frames = [];
    for (const evs of this.events) for (const e of evs) frames.push(e.frame);
    frames.sort((a, b) => a - b);
    let target = null;
    if (dir > 0) { for (const f of frames) if (f > this.frame) { target = f; break; } }
    else { for (let i = frames.length - 1; i >= 0; i--) if (frames[i] < this.frame) { target = frames[i]; break; } }
    if (target !== null) {
      this.pause();
      const ev = this.events.flat().find(e => e.frame === target);
      if (ev) this.selected = ev.agent;
      this.setFrame(target);
    }
    return target;
  };

  Viewer.prototype.tick = function (now) {
    if (this.playing) {
      if (this._last !== null) {
        const dt = this.reps[0].header.dt || 0.1;
        this._acc += (now - this._last) / 1000 * this.speed / dt;
        const steps = Math.floor(this._acc);
        if (steps > 0) {
          this._acc -= steps;
          this.frame = Math.min(this.T - 1, this.frame + steps);
          if (this.frame >= this.T - 1) this.pause();
          this.showInfo();
          this.render();
        }
      }
      this._last = now;
    } else {
      this._last = null;
      this._acc = 0;
    }
    requestAnimationFrame(this.tick.bind(this));
  };

  Viewer.prototype.agentAt = function (p, px, py) {
    const c = this.canvases[p];
    let best = -1, bestD = 1e9;
    for (const d of this.drawn[p]) {
      const [sx, sy] = this.toScreen(c, d.x, d.y);
      const r = Math.max(d.length, d.width) * 0.5 * this.cam.scale + 4;
      const dist = Math.hypot(sx - px, sy - py);
      if (dist < r && dist < bestD) { best = d.i; bestD = dist; }
    }
    return best;
  };

  Viewer.prototype.render = function () {
    const t0 = performance.now();
    if (this.follow >= 0) {
      const rep = this.reps[0], t = Math.min(this.frame, rep.T - 1);
      if (this.follow < rep.N && at(rep.a.alive, t, this.follow)) {
        this.cam.cx = at(rep.a.x, t, this.follow);
        this.cam.cy = at(rep.a.y, t, this.follow);
      }
    }
    for (let p = 0; p < this.reps.length; p++) this.drawPane(p);
    this.drawTimeline();
    const rep = this.reps[0];
    const dt = rep.header.dt || 0.1;
    document.getElementById("tz-clock").textContent =
      "step " + (this.frame + (rep.header.first_step || 0)) + " / " + (this.T - 1 + (rep.header.first_step || 0)) +
      "   t = " + (this.frame * dt).toFixed(1) + " s";
    this.frameTimes.push(performance.now() - t0);
    if (this.frameTimes.length > 600) this.frameTimes.shift();
  };

  Viewer.prototype.drawPane = function (p) {
    const rep = this.reps[p], map = this.maps[p], c = this.canvases[p], L = this.layers;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) { c.width = Math.round(w * dpr); c.height = Math.round(h * dpr); }
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const s = this.cam.scale;
    const world = [dpr * s, 0, 0, -dpr * s, dpr * (w / 2 - this.cam.cx * s), dpr * (h / 2 + this.cam.cy * s)];
    const px = 1 / s;
    // The static map layers are drawn into an offscreen canvas twice the view's size around the camera
    // and copied, shifted, while the camera stays within its margin at the same zoom (playing, or
    // following an agent), so a frame redraws only what moves.
    const key = [c.width, c.height, s, L.sidewalks, L.lanes, L.crosswalks, L.arrows, L.lines, L.edges].join("|");
    if (!this.mapCache) this.mapCache = [];
    let cache = this.mapCache[p];
    const mx = c.width / 2, my = c.height / 2;
    const shift = cache ? [(this.cam.cx - cache.cx) * s * dpr, (this.cam.cy - cache.cy) * s * dpr] : null;
    if (!cache || cache.key !== key || Math.abs(shift[0]) > mx || Math.abs(shift[1]) > my) {
      const off = cache ? cache.canvas : document.createElement("canvas");
      off.width = 2 * c.width; off.height = 2 * c.height;
      const m = off.getContext("2d");
      m.setTransform(1, 0, 0, 1, 0, 0);
      m.fillStyle = "#30343a";
      m.fillRect(0, 0, off.width, off.height);
      m.setTransform(dpr * s, 0, 0, -dpr * s, off.width / 2 - dpr * this.cam.cx * s, off.height / 2 + dpr * this.cam.cy * s);
      this.drawMap(m, map, L, px);
      cache = this.mapCache[p] = { key: key, canvas: off, cx: this.cam.cx, cy: this.cam.cy };
    }
    const dx = (this.cam.cx - cache.cx) * s * dpr, dy = (this.cam.cy - cache.cy) * s * dpr;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.drawImage(cache.canvas, -mx - dx, -my + dy);
    // world transform: x right, y up
    ctx.setTransform.apply(ctx, world);
    ctx.lineJoin = "round";
    const t = Math.min(this.frame, rep.T - 1);
    if (L.stop_lines && rep.a.map_stop_lines) {
      const sl = rep.a.map_stop_lines.data, ctl = rep.a.map_stop_control.data;
      const st = rep.a.stop_line_states;
      ctx.lineWidth = Math.max(0.5, 3 * px);
      ctx.lineCap = "butt";
      for (let k = 0; k < ctl.length; k++) {
        const state = st && st.row > k ? at(st, t, k) : 3;
        ctx.strokeStyle = ctl[k] === 2 ? "#f4f4f4" : SIGNAL_COLOURS[Math.min(state, 3)];
        ctx.beginPath(); ctx.moveTo(sl[4 * k], sl[4 * k + 1]); ctx.lineTo(sl[4 * k + 2], sl[4 * k + 3]); ctx.stroke();
      }
    }
    if (L.signals && rep.a.map_signals && rep.a.signals) {
      const pos = rep.a.map_signals.data, sg = rep.a.signals;
      const r = Math.max(0.6, 3.5 * px);
      for (let g = 0; g < sg.row; g++) {
        ctx.fillStyle = SIGNAL_COLOURS[Math.min(at(sg, t, g), 3)];
        ctx.beginPath(); ctx.arc(pos[2 * g], pos[2 * g + 1], r, 0, 2 * Math.PI); ctx.fill();
        ctx.strokeStyle = "#111"; ctx.lineWidth = 0.8 * px; ctx.stroke();
      }
    }
    const a = rep.a;
    const drawn = [];
    if (L.trails) {
      ctx.strokeStyle = "rgba(230,230,230,0.35)"; ctx.lineWidth = 1.2 * px;
      ctx.beginPath();
      for (let i = 0; i < rep.N; i++) {
        if (!at(a.alive, t, i) || at(a.mover, t, i) === 6) continue;
        let started = false;
        for (let k = Math.max(0, t - TRAIL); k <= t; k++) {
          if (!at(a.alive, k, i)) { started = false; continue; }
          const x = at(a.x, k, i), y = at(a.y, k, i);
          if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
        }
      }
      ctx.stroke();
    }
    const evNow = {};
    for (const e of this.events[p]) if (e.frame === t) (evNow[e.agent] = evNow[e.agent] || []).push(e.kind);
    for (let i = 0; i < rep.N; i++) {
      if (!at(a.alive, t, i)) continue;
      const x = at(a.x, t, i), y = at(a.y, t, i), hd = at(a.heading, t, i);
      const len = at(a.length, t, i), wid = at(a.width, t, i), cls = at(a.cls, t, i);
      const kind = at(a.kind, t, i), mover = at(a.mover, t, i);
      const colour = kind > 0 && KIND_COLOURS[kind] ? KIND_COLOURS[kind] : MOVER_COLOURS[mover] || "#999";
      ctx.save();
      ctx.translate(x, y);
      ctx.rotate(hd);
      ctx.fillStyle = colour;
      if (cls === 3 || kind === 4) {
        ctx.beginPath(); ctx.arc(0, 0, Math.max(len, wid) * 0.5, 0, 2 * Math.PI); ctx.fill();
      } else if (kind === 3) {
        ctx.beginPath(); ctx.moveTo(len * 0.5, 0); ctx.lineTo(-len * 0.5, wid * 0.5); ctx.lineTo(-len * 0.5, -wid * 0.5); ctx.closePath(); ctx.fill();
      } else {
        ctx.fillRect(-len / 2, -wid / 2, len, wid);
        ctx.fillStyle = "rgba(255,255,255,0.85)";
        ctx.beginPath(); ctx.moveTo(len / 2, 0); ctx.lineTo(len / 2 - Math.min(1.2, len * 0.3), wid * 0.32);
        ctx.lineTo(len / 2 - Math.min(1.2, len * 0.3), -wid * 0.32); ctx.closePath(); ctx.fill();
      }
      const bad = evNow[i];
      if (bad || i === this.selected || i === this.hover) {
        ctx.strokeStyle = bad ? EVENT_COLOURS[bad[0]] : (i === this.selected ? "#ffffff" : "#ffe080");
        ctx.lineWidth = 2.2 * px;
        ctx.strokeRect(-len / 2 - px, -wid / 2 - px, len + 2 * px, wid + 2 * px);
      }
      ctx.restore();
      drawn.push({ i: i, x: x, y: y, heading: hd, length: len, width: wid, cls: cls, kind: kind, mover: mover,
                   colour: colour, slot: at(a.slot, t, i) });
    }
    if (L.goals) {
      ctx.lineWidth = 1.2 * px;
      for (const d of drawn) {
        if (d.slot < 0 || d.mover > 2) continue;
        const gx = at(a.goal_x, t, d.i), gy = at(a.goal_y, t, d.i), r = 1.2;
        ctx.strokeStyle = d.i === this.selected ? "#ffffff" : "rgba(120,180,255,0.8)";
        ctx.beginPath(); ctx.moveTo(gx - r, gy - r); ctx.lineTo(gx + r, gy + r); ctx.moveTo(gx - r, gy + r); ctx.lineTo(gx + r, gy - r); ctx.stroke();
        if (d.i === this.selected) { ctx.setLineDash([2, 2]); ctx.beginPath(); ctx.moveTo(d.x, d.y); ctx.lineTo(gx, gy); ctx.stroke(); ctx.setLineDash([]); }
      }
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (L.ids) {
      ctx.fillStyle = "#fff"; ctx.font = "10px sans-serif";
      for (const d of drawn) { const q = this.toScreen(c, d.x, d.y); ctx.fillText(String(d.i), q[0] + 4, q[1] - 4); }
    }
    this.drawn[p] = drawn;
  };

  Viewer.prototype.drawMap = function (ctx, map, L, px) {
    ctx.lineJoin = "round";
    if (L.sidewalks) { ctx.fillStyle = "#474b52"; ctx.fill(map.paths.sidewalks, "evenodd"); }
    if (L.lanes) { ctx.strokeStyle = "#565b63"; ctx.lineWidth = Math.max(3.4, 2 * px); ctx.lineCap = "round"; ctx.stroke(map.paths.lanes); }
    if (L.crosswalks) { ctx.fillStyle = "rgba(235,235,235,0.28)"; ctx.fill(map.paths.crosswalks); }
    if (L.lanes) { ctx.strokeStyle = "#6f7680"; ctx.lineWidth = 0.8 * px; ctx.stroke(map.paths.lanes); }
    if (L.arrows) { ctx.strokeStyle = "#8c95a1"; ctx.lineWidth = 1 * px; ctx.stroke(map.paths.arrows); }
    if (L.lines) {
      for (let k = 0; k < 5; k++) {
        ctx.strokeStyle = LINE_COLOURS[k]; ctx.lineWidth = 1.2 * px;
        ctx.setLineDash(map.paths.dashed.includes(k) ? [3, 3] : []);
        ctx.stroke(map.paths.lines[k]);
      }
      ctx.setLineDash([]);
    }
    if (L.edges) { ctx.strokeStyle = "#e8e8e8"; ctx.lineWidth = 1.6 * px; ctx.stroke(map.paths.edges); }
  };

  Viewer.prototype.drawTimeline = function () {
    const c = this.timeline, dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) { c.width = Math.round(w * dpr); c.height = Math.round(h * dpr); }
    const X = f => (this.T > 1 ? f / (this.T - 1) : 0) * (w - 1);
    const key = c.width + "x" + c.height;
    if (!this.tlCache || this.tlCache.key !== key) {  // the track and its event markers, drawn once per size
      const off = document.createElement("canvas");
      off.width = c.width; off.height = c.height;
      const m = off.getContext("2d");
      m.setTransform(dpr, 0, 0, dpr, 0, 0);
      m.fillStyle = "#2a2d33"; m.fillRect(0, 0, w, h);
      m.fillStyle = "#3d424a"; m.fillRect(0, h / 2 - 3, w, 6);
      this.markers = [];
      const rows = this.events.length;
      this.events.forEach((evs, p) => {
        for (const e of evs) {
          const x = X(e.frame);
          m.fillStyle = EVENT_COLOURS[e.kind] || "#ccc";
          const y0 = 4 + p * (h - 8) / rows, y1 = 4 + (p + 1) * (h - 8) / rows;
          m.fillRect(x - 1, y0, 3, y1 - y0);
          this.markers.push({ pane: p, frame: e.frame, kind: e.kind, agent: e.agent, x: x });
        }
      });
      this.tlCache = { key: key, canvas: off };
    }
    const ctx = c.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.drawImage(this.tlCache.canvas, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(X(this.frame) - 1.5, 0, 3, h);
  };

  // The hovered (else the selected) agent's state in the pane last pointed at.
  Viewer.prototype.showInfo = function () {
    const p = Math.min(this.infoPane || 0, this.reps.length - 1);
    const el = document.getElementById("tz-info");
    const i = this.hover >= 0 ? this.hover : this.selected;
    const rep = this.reps[p], a = rep.a, t = Math.min(this.frame, rep.T - 1), names = rep.header.names;
    if (i < 0 || i >= rep.N) { el.replaceChildren(node("i", "hover or click an agent")); return; }
    const table = node("table");
    const add = (k, v, bold) => {
      const key = node("td", bold ? null : k), val = node("td", bold ? null : v);
      val.className = "v";
      if (bold) { key.appendChild(node("b", k)); val.appendChild(node("b", v)); }
      table.appendChild(node("tr", null, key, val));
    };
    add("agent", i + (i === this.follow ? " (followed)" : ""));
    add("class", nameAt(names.classes, at(a.cls, t, i)).toLowerCase());
    const kind = at(a.kind, t, i);
    if (kind > 0) add("kind", nameAt(names.static_kinds, kind).toLowerCase());
    add("mover", moverLabel(rep, at(a.mover, t, i)));
    add("alive", at(a.alive, t, i) ? "yes" : "no");
    const slot = at(a.slot, t, i);
    if (slot >= 0) add("slot", slot);
    add("speed", at(a.speed, t, i).toFixed(2) + " m/s");
    add("accel long", at(a.a_long, t, i).toFixed(2) + " m/s²");
    add("accel lat", at(a.a_lat, t, i).toFixed(2) + " m/s²");
    add("size", at(a.length, t, i).toFixed(2) + " × " + at(a.width, t, i).toFixed(2) + " m");
    add("position", at(a.x, t, i).toFixed(2) + ", " + at(a.y, t, i).toFixed(2));
    add("heading", (at(a.heading, t, i) * 180 / Math.PI).toFixed(1) + "°");
    const evs = this.events[p].filter(e => e.frame === t && e.agent === i);
    for (const e of evs) add("event", e.kind + (e.kind === "collision" && e.partner >= 0 ? " with " + e.partner : ""));
    if (slot >= 0 && slot < rep.K && a.reward && at(a.slot_agent, t, slot) === i) {
      add("reward", num(at(a.reward, t, slot)), true);
      const rt = a.reward_terms, nt = (names.reward_terms || []).length;
      for (let k = 0; rt && k < nt; k++) {
        const val = rt.data[(t * rep.K + slot) * nt + k];
        if (val !== 0 && val !== undefined) add("\u00a0\u00a0" + nameAt(names.reward_terms, k).replace(/_/g, " "), num(val));
      }
    }
    el.replaceChildren(table);
  };

  Viewer.prototype.state = function () {
    return {
      frame: this.frame, frames: this.T, playing: this.playing, speed: this.speed, follow: this.follow,
      selected: this.selected, camera: Object.assign({}, this.cam), layers: Object.assign({}, this.layers),
      errors: this.errors.slice(),
      panes: this.reps.map((rep, p) => ({
        title: (rep.header.meta || {}).title || "", label: rep.label, frames: rep.T,
        agents: this.drawn[p].map(d => {
          const q = this.toScreen(this.canvases[p], d.x, d.y);
          return Object.assign({}, d, { sx: q[0], sy: q[1] });
        }),
      })),
      markers: (this.markers || []).slice(),
    };
  };

  // Draw n frames in a row (stepping through the replay) and report the time per frame, ms, each
  // frame rasterized before the clock stops (reading back one pixel flushes the canvas's deferred
  // drawing, which would otherwise land on some later frame).
  Viewer.prototype.benchmark = function (n) {
    const times = [];
    for (let k = 0; k < n; k++) {
      const t0 = performance.now();
      this.frame = k % this.T;
      this.render();
      for (const c of this.canvases) c.getContext("2d").getImageData(0, 0, 1, 1);
      times.push(performance.now() - t0);
    }
    const sorted = times.slice().sort((a, b) => a - b);
    const mean = times.reduce((a, b) => a + b, 0) / n;
    return { frames: n, mean_ms: mean, p50_ms: sorted[Math.floor(0.5 * (n - 1))], p95_ms: sorted[Math.floor(0.95 * (n - 1))],
             max_ms: sorted[n - 1], agents: this.drawn.reduce((a, d) => a + d.length, 0) };
  };

  async function start() {
    const hook = { ready: false, error: null };
    window.tzViewer = hook;
    try {
      const tags = Array.from(document.querySelectorAll("script[data-tz-replay]"));
      if (!tags.length) throw new Error("this page holds no replay");
      const reps = [];
      for (const tag of tags) {
        const rep = decode(await gunzip(b64bytes(tag.textContent)));
        rep.label = tag.dataset.tzLabel || "";
        reps.push(rep);
      }
      const v = new Viewer(reps, document.getElementById("tz-app"));
      Object.assign(hook, {
        viewer: v,
        state: () => v.state(),
        setFrame: f => { v.setFrame(f); return v.frame; },
        play: () => v.play(), pause: () => v.pause(),
        follow: i => v.setFollow(i), select: i => v.select(i),
        setLayer: (k, on) => { v.layers[k] = !!on; v.render(); },
        zoom: k => v.zoomAt(0, v.canvases[0].clientWidth / 2, v.canvases[0].clientHeight / 2, k),
        jumpEvent: d => v.jumpEvent(d),
        benchmark: n => v.benchmark(n),
        // n frames drawn one per animation frame; resolves to the mean interval between them (ms)
        benchmarkPlayback: n => new Promise(resolve => {
          let k = 0, t0 = null;
          const step = now => {
            if (t0 === null) t0 = now;
            v.frame = k % v.T; v.render();
            if (++k <= n) requestAnimationFrame(step); else resolve({ frames: n, interval_ms: (now - t0) / n });
          };
          requestAnimationFrame(step);
        }),
      });
      hook.ready = true;
    } catch (e) {
      hook.error = String(e && e.message || e);
      const el = document.getElementById("tz-error");
      if (el) el.textContent = "cannot show this replay: " + hook.error;
      console.error(e);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
