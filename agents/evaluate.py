"""``terrazero eval``: closed-loop rollouts of a trained policy, with 95% confidence intervals.

    terrazero eval runs/quick --episodes 200 --deterministic --json eval.json

An episode is one slot's agent from its world's reset to its termination or truncation. Worlds run in
rounds: every round resets each world from a seed derived from ``(seed, global world index)``, and
the episodes of a round are ordered by slot (world-major). The first ``episodes`` slots that hold a
controlled agent, in that order, are the sample; they are chosen before their outcomes are known, so
short episodes (collisions) are not over-represented. The number of worlds is the preset's, or fewer
when the sample needs fewer (rounded up to a multiple of the number of maps, so every world index
keeps its map): with ``deterministic`` actions a smaller sample is a prefix of a larger one.

Per episode, from the engine's counters (``terrazero_env.engine.COUNTER_NAMES``, cumulative since
the world's reset): whether the goal was reached, and whether a collision, off-road, wrong-way,
red-light, stop-line or comfort violation happened at least once; the return (sum of rewards); and
the progress, ``1 - d_end / d_start`` for the distance between the agent and its goal (from
``Engine.agents``), or 1 when the goal was reached (with ``goal_behavior: new_goal`` the agent then
drives on to a new goal). Rates get a Wilson score interval, means a Student t interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config import EngineConfig
from terrazero_env.config_io import load_config

from .policies import layout_from_env
from .ppo import PPO

__all__ = ["RATES", "check_compatible", "evaluate", "format_table", "load_checkpoint", "mean_interval", "resolve_run", "summarize",
           "t_quantile", "wilson_interval"]

#: Two-sided 95% standard normal quantile.
Z95 = 1.959963984540054

#: Rate rows: (key, label, engine counter). A counter the engine lacks gives a row without a value.
RATES: tuple[tuple[str, str, str], ...] = (
    ("goal_reach_rate", "goal reach", "goal_reached"),
    ("collision_rate", "collision", "collision"),
    ("offroad_rate", "off-road", "offroad"),
    ("red_light_rate", "red-light violation", "red_light"),
    ("wrong_way_rate", "wrong-way", "wrong_way"),
    ("comfort_violation_rate", "comfort violation", "comfort_violations"),
    ("stop_line_rate", "stop-line violation", "stop_line"),
)
#: Mean rows: (key, label, per-episode value, decimals shown).
MEANS: tuple[tuple[str, str, str, int], ...] = (
    ("mean_progress", "progress", "progress", 3),
    ("mean_return", "return", "return", 2),
)


# ------------------------------------------------------------------------------------- intervals

def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for ``successes`` out of ``n``."""
    if n <= 0:
        raise ValueError(f"a rate needs at least one episode, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, {n}], got {successes}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 or n successes the matching bound is exactly 0 or 1 (not 1 - 1e-16 from rounding).
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        if df > 1:
            total = 1.0
            for k in range(1, (df - 3) // 2 + 1):  # 1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ...
                term *= (2 * k) / (2 * k + 1) * c2
                total += term
        return (2 / math.pi) * (theta + s * math.cos(theta) * total)
    total, term = 1.0, 1.0
    for k in range(1, (df - 2) // 2 + 1):  # 1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ...
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return s * total


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t (e.g. 12.706 for df=1): exact series inverted
    by bisection up to df=200, the Cornish-Fisher expansion (A&S 26.7.5) beyond."""
    if df < 1:
        raise ValueError(f"df must be positive, got {df}")
    if df > 200:
        z = _normal_quantile(0.5 + level / 2)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
        return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    lo, hi = 0.0, 1.0
    while _t_two_sided(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _normal_quantile(p: float) -> float:
    """Standard normal quantile by bisection on ``erf`` (used for the large-df t expansion)."""
    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% Student t interval (NaN bounds for a single value)."""
    x = np.asarray(values, float)
    if x.size == 0:
        raise ValueError("a mean needs at least one episode")
    m = float(x.mean())
    if x.size == 1:
        return m, math.nan, math.nan
    half = t_quantile(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


# ----------------------------------------------------------------------------- checkpoint + config

def resolve_run(checkpoint: str | Path, preset: str | None = None) -> tuple[Path, EngineConfig, str]:
    """``(zip path, config, where the config came from)`` for a ``.zip`` from ``PPO.save``, a run
    directory holding ``checkpoint.zip``, or a checkpoint folder holding ``model.zip``
    (``RUN/checkpoints/iter_NNNNNN``). The config is ``preset`` when given, else the ``config.yaml``
    beside the zip or one folder up (``RUN/checkpoints/x.zip``)."""
    p = Path(checkpoint)
    if p.is_dir():
        found = [p / name for name in ("checkpoint.zip", "model.zip") if (p / name).is_file()]
        if not found:
            raise FileNotFoundError(f"no checkpoint.zip (or model.zip) in run directory {p}")
        zip_path = found[0]
    elif p.is_file():
        zip_path = p
    elif p.suffix != ".zip" and Path(f"{p}.zip").is_file():
        zip_path = Path(f"{p}.zip")
    else:
        raise FileNotFoundError(f"checkpoint not found: {p}")
    if preset is not None:
        return zip_path, load_config(preset), str(preset)
    candidates = [zip_path.parent / "config.yaml", zip_path.parent.parent / "config.yaml"]
    for c in candidates:
        if c.is_file():
            return zip_path, load_config(c), str(c)
    raise FileNotFoundError(f"no config for checkpoint {zip_path}: neither {candidates[0]} nor {candidates[1]} "
                            "exists; pass --preset")


def load_checkpoint(path: str | Path, device: str = "cpu") -> PPO:
    """``PPO.load`` with a one-line ``ValueError`` naming the file when it cannot be read."""
    try:
        return PPO.load(str(path), device=device)
    except Exception as e:  # a zip that is not an SB3 save fails in many ways (BadZipFile, KeyError, ...)
        detail = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"cannot load checkpoint {path}: {type(e).__name__}" + (f": {detail}" if detail else "")) from e


def check_compatible(model: Any, venv: Any, config_name: str) -> None:
    """The env's observations and actions must be what the policy was built for."""
    want = tuple(model.observation_space.shape)
    have = tuple(venv.single_observation_space.shape)
    if want != have:
        raise ValueError(f"observation size mismatch: the checkpoint's policy takes {want[0] if len(want) == 1 else want} "
                         f"values per agent, {config_name} produces {have[0] if len(have) == 1 else have}")
    kwargs = getattr(model, "policy_kwargs", None) or {}
    layout = kwargs.get("layout")
    if layout is not None:
        from_env = layout_from_env(venv)
        env_layout = from_env["layout"]
        ours = {k: list(v) for k, v in layout.items()}
        if ours != env_layout:
            diff = sorted(k for k in set(ours) | set(env_layout) if ours.get(k) != env_layout.get(k))
            raise ValueError(f"observation layout mismatch in group(s) {', '.join(diff)}: the checkpoint's policy has "
                             f"{ {k: ours.get(k) for k in diff} }, {config_name} has { {k: env_layout.get(k) for k in diff} } "
                             f"(both {have[0]} values per agent)")
        trained = sorted(int(t) for t in kwargs.get("agent_types", [1]))
        unseen = sorted(set(from_env["agent_types"]) - set(trained))
        if unseen:
            raise ValueError(f"agent type mismatch: {config_name} controls agent type code(s) {unseen} "
                             f"(1 vehicle, 2 pedestrian, 3 cyclist) that the checkpoint's policy was not built for "
                             f"(it has {trained})")
    n_model = getattr(model.action_space, "n", None)
    n_env = getattr(venv.single_action_space, "n", None)
    if n_model != n_env:
        raise ValueError(f"action space mismatch: the checkpoint's policy has {n_model} actions, {config_name} has {n_env}")


# ----------------------------------------------------------------------------------- evaluation

def _world_seed(seed: int, index: int) -> int:
    ss = np.random.SeedSequence([int(seed) % (1 << 128), int(index)])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))  # fits the engine's int64 seeds


def _num_worlds(config: EngineConfig, episodes: int) -> int:
    m = len(config.maps)
    need = min(config.num_worlds, -(-episodes // config.slots_per_world))
    return max(m, -(-need // m) * m)


def _check_video_path(path: str | Path) -> Path:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".mp4", ".gif"):
        raise ValueError(f"--video: write a .mp4 or .gif file, got {path}")
    if suffix == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise ValueError(f"writing {path} needs imageio-ffmpeg (pip install 'terrazero-env[video]'); "
                             "or write a .gif") from None
    return path


def evaluate(model: Any, config: EngineConfig, episodes: int = 100, seed: int = 0, deterministic: bool = False,
             *, video: str | Path | None = None, config_name: str = "the config",
             video_dpi: int = 80, video_fps: int = 10, video_zoom: float | None = None) -> dict[str, Any]:
    """Run exactly ``episodes`` completed episodes of ``model`` (anything with SB3's ``predict``) on
    ``config`` and return ``{"rows": {key: row}, "per_episode": {...}, ...}``; a row holds
    ``label``, ``kind`` ("rate" or "mean"), ``value``, ``ci_low``, ``ci_high``, ``n`` and, for rates,
    ``count`` (or ``value`` None and a ``note`` when the engine has no such counter). ``video``: a
    ``.gif`` (or ``.mp4`` with imageio-ffmpeg) of world 0 over the first round, from its reset until its
    last agent's episode ends; ``video_zoom``: half-width (m) of a window that follows the first live
    controlled agent (None: the whole map). Deterministic in ``seed``."""
    if episodes < 1:
        raise ValueError(f"episodes must be positive, got {episodes}")
    if video_zoom is not None and not (np.isfinite(video_zoom) and video_zoom > 0):
        raise ValueError(f"video zoom: a positive number of metres, got {video_zoom!r}")
    video_path = _check_video_path(video) if video is not None else None
    for src in config.maps:  # a missing map stops before any work
        terrazero_env.maps.load_source(src)
    cfg = config.with_overrides(num_worlds=_num_worlds(config, episodes))
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
    try:
        check_compatible(model, venv, config_name)
        device = getattr(model, "device", torch.device("cpu"))
        devices = [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # sampled actions follow ``seed``; global RNG untouched
            torch.manual_seed(int(seed) % (1 << 63))
            per, rounds, video_out = _rollouts(lambda obs: model.predict(obs, deterministic=deterministic)[0], venv,
                                               episodes, seed, video_path, video_dpi, video_fps, video_zoom)
    finally:
        venv.close()
    result: dict[str, Any] = {"episodes": episodes, "seed": int(seed), "deterministic": bool(deterministic),
                              "maps": list(cfg.maps), "worlds": cfg.num_worlds, "slots_per_world": cfg.slots_per_world,
                              "rounds": rounds, "rows": summarize(per), "per_episode": per}
    if video_out is not None:
        result["video"] = video_out
    return result


def _rollouts(act: Callable[[np.ndarray], np.ndarray], venv: Any, episodes: int, seed: int,
              video_path: Path | None, video_dpi: int, video_fps: int,
              video_zoom: float | None = None) -> tuple[dict[str, Any], int, str | None]:
    """Per-episode outcomes (``events``: counter name -> happened at least once; ``counts``; ``progress``;
    ``return``; ``length`` in steps), the number of rounds, and the video written (or None)."""
    e = venv.engine
    W, K, n = venv.num_worlds, venv.slots_per_world, venv.num_envs
    names = list(core.COUNTER_NAMES)
    counters: list[np.ndarray] = []
    progress: list[float] = []
    returns: list[float] = []
    lengths: list[int] = []
    recorder = None
    video_out = None
    horizon = int(venv.config.episode_length)
    empty_rounds = 0
    rnd = 0
    while len(returns) < episodes:
        seeds = [_world_seed(seed, rnd * W + w) for w in range(W)]
        obs, info = venv.reset(seed=seeds)
        valid = np.asarray(info["valid"], bool).copy()
        order = np.nonzero(valid)[0][: episodes - len(returns)]  # this round's share of the sample, slot order
        if order.size == 0:
            empty_rounds += 1
            if empty_rounds >= 10:
                raise RuntimeError(f"no controlled agent could be placed in 10 rounds of {W} worlds on "
                                   f"{list(venv.config.maps)}; lower init.num_agents or use a larger map")
            rnd += 1
            continue
        empty_rounds = 0
        wanted = np.zeros(n, bool)
        wanted[order] = True
        agent = np.asarray(e.slot_agent).copy()
        world = np.arange(n) // K
        d_start = _goal_distance(e, world, agent)
        live = valid.copy()
        ret = np.zeros(n)
        steps = np.zeros(n, np.int64)
        final = np.zeros((n, len(names)), np.int64)
        d_end = np.full(n, np.nan)
        if rnd == 0 and video_path is not None:
            from terrazero_env.render import RolloutRecorder

            recorder = RolloutRecorder(e, 0, dpi=video_dpi, zoom=video_zoom)
            recorder.capture()
        for _ in range(horizon + 2):
            record = recorder is not None and live[:K].any()
            if not (live & wanted).any() and not record:
                break
            obs, rew, term, trunc, info = venv.step(np.asarray(act(np.array(obs)), np.int64).reshape(n))
            step_valid = np.asarray(info["valid"], bool)
            stepped = live & step_valid
            ret[stepped] += rew[stepped]
            steps[stepped] += 1
            ended = live & (~step_valid | term | trunc)
            if ended.any():
                idx = np.nonzero(ended)[0]
                final[idx] = e.counters[idx]
                d_end[idx] = _goal_distance(e, world[idx], agent[idx])
                live &= ~ended
            if record:
                recorder.capture()
        else:
            if (live & wanted).any():
                raise RuntimeError(f"episodes did not end within {horizon + 2} steps (episode_length {horizon})")
        if recorder is not None:
            video_out = str(recorder.save(video_path, fps=video_fps))
            recorder = None
        goal_col = names.index("goal_reached") if "goal_reached" in names else None
        for r in order:
            counters.append(final[r].copy())
            reached = goal_col is not None and final[r, goal_col] > 0
            progress.append(1.0 if reached else float(1.0 - d_end[r] / d_start[r]) if d_start[r] > 0 else 0.0)
            returns.append(float(ret[r]))
            lengths.append(int(steps[r]))
        rnd += 1
    c = np.array(counters, np.int64).reshape(-1, len(names))
    per = {"events": {name: (c[:, k] > 0).tolist() for k, name in enumerate(names)},
           "counts": {name: c[:, k].tolist() for k, name in enumerate(names)},
           "progress": progress, "return": returns, "length": lengths}
    return per, rnd, video_out


def _goal_distance(e: Any, world: np.ndarray, agent: np.ndarray) -> np.ndarray:
    """Distance from each (world, agent index) to its goal; NaN where the slot has no agent."""
    out = np.full(world.shape, np.nan)
    ok = agent >= 0
    a = e.agents[world[ok], agent[ok]]
    out[ok] = np.hypot(a["goal_x"] - a["x"], a["goal_y"] - a["y"])
    return out


def summarize(per: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Table rows (see :func:`evaluate`) from per-episode outcomes."""
    rows: dict[str, dict[str, Any]] = {}
    n = len(per["return"])
    for key, label, counter in RATES:
        if counter not in per["events"]:
            rows[key] = {"label": f"{label} rate", "kind": "rate", "value": None, "ci_low": None, "ci_high": None,
                         "n": n, "note": f"not measured: the engine has no {counter!r} counter"}
            continue
        k = int(np.sum(per["events"][counter]))
        lo, hi = wilson_interval(k, n)
        rows[key] = {"label": f"{label} rate", "kind": "rate", "value": k / n, "ci_low": lo, "ci_high": hi, "n": n,
                     "count": k}
    for key, label, field, digits in MEANS:
        m, lo, hi = mean_interval(np.asarray(per[field], float))
        if math.isnan(lo):  # one episode: no interval (None keeps the JSON output valid)
            lo = hi = None
        rows[key] = {"label": f"mean {label}", "kind": "mean", "value": m, "ci_low": lo, "ci_high": hi, "n": n,
                     "digits": digits}
    return rows


def format_table(result: dict[str, Any]) -> str:
    """The rows of :func:`evaluate` as an aligned text table."""
    rows = result["rows"]
    label_w = max(len("metric"), *(len(r["label"]) for r in rows.values()))

    def num(x: float | None, digits: int) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "n/a"
        return f"{x:.{digits}f}"

    cells = []
    for r in rows.values():
        if r["value"] is None:
            cells.append((r["label"], "n/a", r["note"], ""))
            continue
        digits = r.get("digits", 3)
        value = num(r["value"], digits)
        ci = f"[{num(r['ci_low'], digits)}, {num(r['ci_high'], digits)}]"
        extra = f"{r['count']}/{r['n']}" if r["kind"] == "rate" else f"n={r['n']}"
        cells.append((r["label"], value, ci, extra))
    value_w = max(len("value"), *(len(c[1]) for c in cells))
    ci_w = max(len("95% CI"), *(len(c[2]) for c in cells if c[3]))
    lines = [f"{'metric':<{label_w}}  {'value':>{value_w}}  {'95% CI':<{ci_w}}  episodes"]
    lines.append("-" * len(lines[0]))
    for label, value, ci, extra in cells:
        lines.append(f"{label:<{label_w}}  {value:>{value_w}}  {ci:<{ci_w}}  {extra}".rstrip())
    lines.append("rates: Wilson score interval; means: Student t interval. progress: 1 - final/initial distance "
                 "to the goal, 1 once the goal is reached.")
    return "\n".join(lines)
