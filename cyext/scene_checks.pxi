# Input checks of the Engine's entry points, run with the GIL held before any state changes, so a
# rejected call leaves the engine exactly as it was: scripted scene specs (``Engine.set_scene``:
# every key, type, range and finiteness, and that an IDM vehicle starts on a lane), seeds (Python or
# NumPy integers in [0, 2**64)) and thread counts. Each returns the input converted to the plain
# Python values the callers use; each error names the offending entry (``agents[3].kin``).
# Module-level functions of _engine.pyx; nothing here runs on the step path.

import math as _math
import os as _os
from collections.abc import Mapping as _Mapping

# Keys a scene spec may hold (documented in Engine.set_scene).
SCENE_KEYS = ("cls", "x", "y", "heading", "z", "speed", "steer", "length", "width", "height", "controlled", "idm",
              "idm_mode", "planner", "kind", "goal", "goal_hidden", "kin", "rw", "crossing")
# Keys of a scripted crossing (``crossing``: a non-reactive pedestrian, InterPlan's jaywalker).
CROSSING_KEYS = ("goal", "speed", "trigger", "distance")
_SCENE_REQUIRED = ("cls", "x", "y", "heading")
N_IDM_MODES = 3       # IDM_MODE 0 default, 1 assertive, 2 cautious (roadusers.pxd)
MAX_SEED = 2 ** 64 - 1


def max_threads():
    """The largest ``num_threads`` an engine accepts: four per CPU core of this machine."""
    return max(1, _os.cpu_count() or 1) * 4


def check_num_threads(n, where="num_threads"):
    """``n`` as an int in [1, max_threads()]; anything else raises TypeError/ValueError naming it."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{where} must be an integer, got {type(n).__name__} {n!r}")
    cap = max_threads()
    if not 1 <= int(n) <= cap:
        raise ValueError(f"{where} must lie in [1, {cap}] (4 per CPU core), got {int(n)}")
    return int(n)


def check_engine_seed(seed, where="seed"):
    """``seed`` as a Python int in [0, 2**64): bools, floats and strings raise TypeError, negative or
    too large integers ValueError (they are never wrapped or cast)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{where} must be a non-negative integer, got {type(seed).__name__} {seed!r}")
    s = int(seed)
    if not 0 <= s <= MAX_SEED:
        raise ValueError(f"{where} must be a non-negative integer below 2**64, got {s}")
    return s


def check_seeds(seeds, Py_ssize_t n):
    """``seeds`` as a uint64 array of ``n`` seeds, each checked like ``check_engine_seed``."""
    if isinstance(seeds, np.ndarray):
        if seeds.dtype.kind not in "iu" or seeds.ndim > 1:
            raise TypeError(f"seeds must be a 1-D array of integers, got {seeds.dtype} {seeds.shape}")
        sd = np.atleast_1d(seeds)
        if sd.shape != (n,):
            raise ValueError(f"seeds must be {n} integers (one per world id), got shape {sd.shape}")
        if sd.dtype.kind == "i" and sd.size and sd.min() < 0:
            raise ValueError(f"seeds must be non-negative integers below 2**64, got {int(sd.min())}")
        return np.ascontiguousarray(sd.astype(np.uint64))
    items = [seeds] if isinstance(seeds, (int, np.integer)) else list(seeds)
    if len(items) != n:
        raise ValueError(f"seeds must be {n} integers (one per world id), got {len(items)}")
    return np.array([check_engine_seed(s, f"seeds[{i}]") for i, s in enumerate(items)], np.uint64)


#: Every number of a scene but the heading (wrapped, whatever its size) lies within +-SCENE_BOUND
#: (metres, m/s, reward weights): a finite 1e300 would overflow the squared distances and turn
#: observations into NaN. Speeds and sizes have tighter bounds of their own.
SCENE_BOUND = 1e6
SCENE_MAX_SPEED = 200.0
SCENE_MAX_SIZE = 100.0


cdef double _finite_value(v, Py_ssize_t i, str key) except? -1:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"agents[{i}].{key} must be a number, got {type(v).__name__} {v!r}")
    if not _math.isfinite(float(v)):
        raise ValueError(f"agents[{i}].{key} must be finite, got {v!r}")
    if abs(float(v)) > SCENE_BOUND and key != "heading":  # a heading of any finite size is wrapped
        raise ValueError(f"agents[{i}].{key} must lie within +-{SCENE_BOUND:g}, got {v!r}")
    return float(v)


cdef double _finite(spec, Py_ssize_t i, str key, bint positive=False) except? -1:
    cdef double d = _finite_value(spec[key], i, key)
    if positive and d <= 0:
        raise ValueError(f"agents[{i}].{key} must be positive metres, got {spec[key]!r}")
    if positive and key != "speed" and d > SCENE_MAX_SIZE:
        raise ValueError(f"agents[{i}].{key} must be at most {SCENE_MAX_SIZE:g} m, got {spec[key]!r}")
    if key == "speed" and abs(d) > SCENE_MAX_SPEED:
        raise ValueError(f"agents[{i}].speed must lie within +-{SCENE_MAX_SPEED:g} m/s, got {spec[key]!r}")
    return d


cdef _flag(spec, Py_ssize_t i, str key):
    v = spec[key]
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and int(v) in (0, 1)):
        return bool(v)
    raise TypeError(f"agents[{i}].{key} must be a bool, got {type(v).__name__} {v!r}")


cdef _index(spec, Py_ssize_t i, str key, int n, str what):
    v = spec[key]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"agents[{i}].{key} must be an integer ({what}), got {type(v).__name__} {v!r}")
    if not 0 <= int(v) < n:
        raise ValueError(f"agents[{i}].{key}: unknown {what} {int(v)} (expected 0..{n - 1})")
    return int(v)


cdef _numbers(spec, Py_ssize_t i, str key, Py_ssize_t n, bint positive):
    v = spec[key]
    if isinstance(v, (str, bytes, _Mapping)):
        raise TypeError(f"agents[{i}].{key} must be {n} numbers, got {type(v).__name__}")
    try:
        vals = list(v)
    except TypeError:
        raise TypeError(f"agents[{i}].{key} must be {n} numbers, got {type(v).__name__} {v!r}") from None
    if len(vals) != n:
        raise ValueError(f"agents[{i}].{key} must hold {n} numbers, got {len(vals)}")
    out = []
    for k, x in enumerate(vals):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise TypeError(f"agents[{i}].{key}[{k}] must be a number, got {type(x).__name__} {x!r}")
        if not _math.isfinite(float(x)) or (positive and float(x) <= 0):
            raise ValueError(f"agents[{i}].{key}[{k}] must be {'positive and ' if positive else ''}finite, "
                             f"got {x!r}")
        if abs(float(x)) > SCENE_BOUND:
            raise ValueError(f"agents[{i}].{key}[{k}] must lie within +-{SCENE_BOUND:g}, got {x!r}")
        out.append(float(x))
    return tuple(out)


cdef dict _checked_crossing(c, Py_ssize_t i, Py_ssize_t n, dict s):
    """``agents[i].crossing`` checked: a pedestrian that is neither controlled nor IDM-driven, with a
    ``goal`` (x, y) away from its start, a positive ``speed`` (m/s), and optionally the ``trigger`` agent
    (an index into the same scene) and ``distance`` (m, >= 0; 0 starts at once)."""
    if not isinstance(c, _Mapping):
        raise TypeError(f"agents[{i}].crossing must be a dict ({', '.join(CROSSING_KEYS)}), got {type(c).__name__}")
    for key in c:
        if key not in CROSSING_KEYS:
            raise TypeError(f"agents[{i}].crossing: unexpected key {key!r} (known: {', '.join(CROSSING_KEYS)})")
    if s["cls"] != CLS_PEDESTRIAN:
        raise ValueError(f"agents[{i}].crossing: only a pedestrian can cross (cls {CLS_PEDESTRIAN}), got cls {s['cls']}")
    if s.get("idm", False) or s.get("controlled", False):
        raise ValueError(f"agents[{i}].crossing: a scripted crossing is neither controlled nor IDM-driven; "
                         "set controlled=False")
    for key in ("goal", "speed"):
        if key not in c:
            raise ValueError(f"agents[{i}].crossing.{key} is required")
    out = {"goal": _numbers(c, i, "goal", 2, False), "speed": _finite(c, i, "speed", True),
           "trigger": -1, "distance": 0.0}
    if (out["goal"][0] - s["x"]) ** 2 + (out["goal"][1] - s["y"]) ** 2 < 1e-6:
        raise ValueError(f"agents[{i}].crossing.goal must lie away from the pedestrian's start")
    if "distance" in c:
        out["distance"] = _finite(c, i, "distance")
        if out["distance"] < 0:
            raise ValueError(f"agents[{i}].crossing.distance must be >= 0 m, got {c['distance']!r}")
    if "trigger" in c:
        out["trigger"] = _index(c, i, "trigger", n, "agent of this scene")
        if out["trigger"] == i:
            raise ValueError(f"agents[{i}].crossing.trigger must name another agent")
    elif out["distance"] > 0:
        raise ValueError(f"agents[{i}].crossing: a trigger distance needs a trigger agent")
    return out


cdef list _checked_scene(Engine e, int world, agents):
    """The scene specs of ``Engine.set_scene`` checked and converted to plain Python values (floats,
    ints, bools, tuples), in a fresh list of fresh dicts. Raises before anything changes."""
    if not 0 <= world < e.num_worlds:
        raise ValueError(f"world must lie in [0, {e.num_worlds}), got {world}")
    if isinstance(agents, (str, bytes, _Mapping)):
        raise TypeError(f"agents must be a list of dicts, got {type(agents).__name__}")
    try:
        specs = list(agents)
    except TypeError:
        raise TypeError(f"agents must be a list of dicts, got {type(agents).__name__}") from None
    if len(specs) > e.max_agents:
        raise ValueError(f"{len(specs)} agents exceed max_agents_per_world={e.max_agents}")
    out = []
    cdef Py_ssize_t i
    for i, spec in enumerate(specs):
        if not isinstance(spec, _Mapping):
            raise TypeError(f"agents[{i}] must be a dict, got {type(spec).__name__}")
        for key in spec:
            if key not in SCENE_KEYS:
                raise TypeError(f"agents[{i}]: unexpected key {key!r} (known: {', '.join(SCENE_KEYS)})")
        for key in _SCENE_REQUIRED:
            if key not in spec:
                raise ValueError(f"agents[{i}].{key} is required")
        s = {"cls": _index(spec, i, "cls", N_CLASSES, "agent type")}
        for key in ("x", "y", "heading", "z", "speed", "steer"):
            if key in spec:
                s[key] = _finite(spec, i, key)
        if "steer" in spec and abs(s["steer"]) > e.cp[s["cls"] * N_CP + CP_STEERMAX]:
            raise ValueError(f"agents[{i}].steer must lie within the class's steering range "
                             f"+-{e.cp[s['cls'] * N_CP + CP_STEERMAX]} rad, got {spec['steer']!r}")
        for key in ("length", "width", "height"):
            if key in spec:
                s[key] = _finite(spec, i, key, True)
        for key in ("controlled", "idm", "planner", "goal_hidden"):
            if key in spec:
                s[key] = _flag(spec, i, key)
        if s.get("planner", False) and not s.get("idm", False):
            raise ValueError(f"agents[{i}].planner: a planner vehicle is an IDM vehicle; set idm too")
        if "idm_mode" in spec:
            s["idm_mode"] = _index(spec, i, "idm_mode", N_IDM_MODES, "IDM mode (0 default, 1 assertive, 2 cautious)")
        if "kind" in spec:
            s["kind"] = _index(spec, i, "kind", N_KINDS, "static kind (StaticKind)")
        if "goal" in spec:
            s["goal"] = _numbers(spec, i, "goal", 2, False)
        if "kin" in spec:
            s["kin"] = _numbers(spec, i, "kin", 4, True)
        if "rw" in spec:
            rw = spec["rw"]
            if not isinstance(rw, _Mapping):
                raise TypeError(f"agents[{i}].rw must be a dict of reward parameters, got {type(rw).__name__}")
            s["rw"] = {}
            for name in rw:
                if name not in REWARD_PARAMS:
                    raise ValueError(f"agents[{i}].rw: unknown reward parameter {name!r} "
                                     f"(known: {', '.join(REWARD_PARAMS)})")
                s["rw"][name] = _finite_value(rw[name], i, f"rw.{name}")
        if "crossing" in spec:
            s["crossing"] = _checked_crossing(spec["crossing"], i, len(specs), s)
        if s.get("idm", False):
            q = (<RoadMap>e.road_maps[e.world_map[world]]).lanes.query(
                np.array([[s["x"], s["y"], s.get("z", 0.0)]]))
            if q["row"][0] < 0:
                raise ValueError(f"agents[{i}]: an IDM vehicle must start on a lane")
        out.append(s)
    return out
