"""``terrazero eval``: closed-loop rollouts of a trained policy or a baseline driver, with 95%
confidence intervals; torch-free (a torch policy brings torch with it).

    terrazero eval runs/quick --episodes 200 --deterministic --json eval.json
    terrazero eval --driver reference --episodes 200

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
drives on to a new goal). Rates get a Wilson score interval, means a Student t interval; both, and
the table, come from the torch-free :mod:`terrazero_env.evaluation.metrics`.

The closed-loop score's ego progress is relative to a reference (``progress_reference``): ``"idm"``
(the default) replays each round from the same seeds with the scored agents handed to the IDM driver
at their start (``Engine.hand_to_idm``), the other controlled agents still driven by the policy, and
takes each IDM driver's progress along the lane after as many steps as the policy's episode lasted;
one extra rollout per round, whatever the number of worlds. Where a world has several scored slots
they are handed over together, so each one's reference drives among IDM drivers in those slots.
``"limit"`` keeps the engine's reference driving at the lane's posted limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config import EngineConfig
from terrazero_env.config.io import load_config
from terrazero_env.envs.conventions import check_seed
from terrazero_env.envs.vector import policy_layout

from .metrics import (
    PROGRESS_REFERENCES,
    RATES,
    closed_loop_metrics,
    compare,
    format_table,
    mean_interval,
    summarize,
    t_quantile,
    wilson_interval,
)
from .rollout import Actor, as_actor, drive

# The interval and table helpers live in :mod:`terrazero_env.evaluation.metrics`; they stay importable
# from here because ``evaluate`` returns their rows.
__all__ = ["RATES", "check_compatible", "check_progress_reference", "closed_loop_from", "compare_policies", "evaluate",
           "format_table", "idm_reference", "mean_interval", "resolve_run", "rollout", "summarize", "t_quantile",
           "wilson_interval", "write_replays"]


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
        from_env = policy_layout(venv)
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
    ss = np.random.SeedSequence([int(seed), int(index)])  # seed checked in [0, 2**64) by evaluate
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
             video_dpi: int = 80, video_fps: int = 10, video_zoom: float | None = None,
             filmstrip: str | Path | None = None, filmstrip_episodes: int = 3,
             progress_reference: str = "idm", replay: str | Path | None = None, replay_worst: int | None = None,
             replay_episodes: Sequence[int] | None = None) -> dict[str, Any]:
    """Run exactly ``episodes`` completed episodes of ``model`` (anything with SB3's ``predict``) on
    ``config`` and return ``{"rows": {key: row}, "per_episode": {...}, ...}``; a row holds
    ``label``, ``kind`` ("rate" or "mean"), ``value``, ``ci_low``, ``ci_high``, ``n`` and, for rates,
    ``count`` (or ``value`` None and a ``note`` when the engine has no such counter). ``video``: a
    ``.gif`` (or ``.mp4`` with imageio-ffmpeg) of world 0 over the first round, from its reset until its
    last agent's episode ends; ``video_zoom``: half-width (m) of a window that follows the first live
    controlled agent (None: the whole map). ``closed_loop`` holds the per-episode closed-loop metrics
    (:func:`terrazero_env.evaluation.metrics.closed_loop_metrics`: the score, its terms and FAST's metrics);
    ``filmstrip``: a PNG of the ``filmstrip_episodes`` lowest-scoring episodes, 6 frames each.
    ``progress_reference``: what ego progress is measured against, ``"idm"`` or ``"limit"`` (see the
    module docstring); the result names it. ``replay``: a folder that receives a browser replay of
    every episode (``episode_NNNN.tzr`` and ``.html``, :mod:`terrazero_env.viewer`, and an
    ``index.html``), or of the ``replay_worst`` lowest-scoring ones, or of the episode indices in
    ``replay_episodes``; ``result["replays"]`` lists them. Deterministic in ``seed``."""
    chosen = _check_replay_options(replay, replay_worst, replay_episodes, episodes)
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
    seed = check_seed(seed, "seed")  # [0, 2**64): no two seeds alias one evaluation
    if seed is None:
        raise TypeError("seed must be a non-negative integer below 2**64, got None")
    if video_zoom is not None and not (np.isfinite(video_zoom) and video_zoom > 0):
        raise ValueError(f"video zoom: a positive number of metres, got {video_zoom!r}")
    video_path = _check_video_path(video) if video is not None else None
    check_progress_reference(progress_reference)
    for src in config.maps:  # a missing map stops before any work
        terrazero_env.maps.load_source(src)
    cfg = config.with_overrides(num_worlds=_num_worlds(config, episodes))
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
    try:
        actor = actor_for(model, venv, deterministic, config_name)
        with actor.seeded(seed):  # sampled actions follow ``seed``; the caller's random state untouched
            history: dict[int, list[np.ndarray]] | None = {} if filmstrip is not None else None
            store: dict[tuple[int, int], Any] | None = {} if replay is not None else None
            per, rounds, video_out = rollout(actor, venv, episodes, seed, video=video_path, video_dpi=video_dpi,
                                             video_fps=video_fps, video_zoom=video_zoom, history=history,
                                             progress_reference=progress_reference, replays=store)
        closed = closed_loop_from(per, float(cfg.dt))
        if replay is not None:
            picks = chosen if chosen is not None else (
                np.argsort(closed["score"], kind="stable")[:replay_worst].tolist() if replay_worst else range(episodes))
            replays = write_replays(replay, per, closed["score"], store, picks, config_name, driver=actor.name)
        if filmstrip is not None:
            film = _worst_filmstrip(venv.engine, per, closed["score"], history, filmstrip, filmstrip_episodes)
    finally:
        venv.close()
    result: dict[str, Any] = {"episodes": episodes, "seed": int(seed), "deterministic": bool(deterministic),
                              "maps": list(cfg.maps), "worlds": cfg.num_worlds, "slots_per_world": cfg.slots_per_world,
                              "rounds": rounds, "progress_reference": progress_reference,
                              "rows": summarize(per), "per_episode": per,
                              "closed_loop": {k: v.tolist() for k, v in closed.items()}}
    if filmstrip is not None:
        result["filmstrip"] = film
    if replay is not None:
        result["replays"] = replays
    if video_out is not None:
        result["video"] = video_out
    return result


def _check_replay_options(replay: Any, worst: int | None, picks: Sequence[int] | None,
                          episodes: int) -> list[int] | None:
    """Check ``evaluate``'s replay options; the episode indices named by ``picks``, if any."""
    if replay is None:
        if worst is not None or picks is not None:
            raise ValueError("replay_worst and replay_episodes choose what goes into a replay folder: pass replay")
        return None
    if worst is not None and picks is not None:
        raise ValueError("give replay_worst or replay_episodes, not both")
    if worst is not None and (isinstance(worst, bool) or not isinstance(worst, (int, np.integer)) or worst < 1):
        raise ValueError(f"replay_worst must be a positive integer, got {worst!r}")
    if picks is None:
        return None
    out = [int(i) for i in picks]
    bad = [i for i in out if not 0 <= i < episodes]
    if bad:
        raise ValueError(f"replay_episodes {bad} outside [0, {episodes})")
    return out


def write_replays(folder: str | Path, per: dict[str, Any], score: np.ndarray, store: dict[tuple[int, int], Any],
                  picks: Sequence[int], config_name: str, group: str = "", prefix: str = "episode_",
                  index: bool = True, driver: str = "policy") -> list[dict[str, Any]]:
    """Write the replays of the episodes ``picks`` (indices into ``per``) from ``store`` (:func:`rollout`'s
    ``replays``: a recording per round and world) into ``folder``, each focused on its episode's agent
    and titled with its score; ``driver`` names what drove the scored agents (``"policy"`` or a
    baseline driver's name: the viewer labels them so); returns the viewer's index entries."""
    from terrazero_env.viewer import write_episode_replays

    eps = []
    for i in picks:
        rnd, w, agent = per["episode_id"][int(i)]
        s = float(score[int(i)])
        happened = [k for k, v in per["events"].items() if v[int(i)]]
        eps.append({"replay": store[(rnd, w)], "name": f"{prefix}{int(i):04d}", "focus": int(agent),
                    "title": f"{group} scene {int(i)}" if group else f"episode {int(i)} (round {rnd}, world {w})",
                    "score": s if np.isfinite(s) else None, "group": group, "episode": int(i),
                    "return": float(per["return"][int(i)]), "length": int(per["length"][int(i)]),
                    "events": happened, "config": config_name, "driver": driver})
    entries = write_episode_replays(folder, eps, title=f"TerraZero replays ({config_name})", index=index)
    return [{**ent, "episode": int(i)} for ent, i in zip(entries, picks)]


def actor_for(model: Any, venv: Any, deterministic: bool, config_name: str) -> Actor:
    """The :class:`~terrazero_env.evaluation.rollout.Actor` for ``model``: a model with SB3's
    ``predict`` is checked against the env first (:func:`check_compatible`); a baseline driver, an
    actor or a callable on the observations is taken as it is."""
    if callable(getattr(model, "predict", None)) and hasattr(model, "observation_space"):
        check_compatible(model, venv, config_name)
    return as_actor(model, deterministic)


def check_progress_reference(name: str) -> None:
    """``name`` must be one of :data:`terrazero_env.evaluation.metrics.PROGRESS_REFERENCES`."""
    if name not in PROGRESS_REFERENCES:
        raise ValueError(f"progress reference must be one of {', '.join(PROGRESS_REFERENCES)}, got {name!r}")


def closed_loop_from(per: dict[str, Any], dt: float) -> dict[str, np.ndarray]:
    """The closed-loop metrics of :func:`rollout`'s episodes, against the reference they were run with
    (the IDM rollouts' progress, or the engine's posted-limit column)."""
    ref = per["reference_progress"] if per["progress_reference"] == "idm" else None
    return closed_loop_metrics(np.asarray(per["engine_metrics"]), dt, goal_reached=per["events"].get("goal_reached"),
                               returns=per["return"], reference_progress=ref)


def compare_policies(model_a: Any, model_b: Any, config: EngineConfig, episodes: int = 100, seed: int = 0,
                     deterministic: bool = False, progress_reference: str = "idm", **kwargs: Any) -> dict[str, Any]:
    """Run ``model_a`` and ``model_b`` on the same episodes (``config`` and ``seed`` fix every world's
    scene, so episode i of A and of B start identically) and compare their closed-loop metrics pair by
    pair (:func:`terrazero_env.evaluation.metrics.compare`: means, A - B and its delete-one jackknife 95% interval).
    ``kwargs`` go to :func:`evaluate` for A (e.g. ``filmstrip``); both use ``progress_reference``.
    ``replay``: a folder receiving A's replays under ``a/``, B's of the same episodes under ``b/`` and,
    per episode, a page playing both side by side in step (``vs_NNNN.html``, listed by ``index.html``);
    ``replay_worst``: only the episodes where A scored lowest."""
    replay = kwargs.pop("replay", None)
    worst = kwargs.pop("replay_worst", None)
    folder = Path(replay) if replay is not None else None
    res_a = evaluate(model_a, config, episodes, seed, deterministic, progress_reference=progress_reference,
                     replay=None if folder is None else folder / "a", replay_worst=worst, **kwargs)
    picks = None if folder is None else [ent["episode"] for ent in res_a["replays"]]
    res_b = evaluate(model_b, config, episodes, seed, deterministic, progress_reference=progress_reference,
                     config_name=kwargs.get("config_name", "the config"),
                     replay=None if folder is None else folder / "b", replay_episodes=picks)
    out = {"a": res_a, "b": res_b, "comparison": compare(res_a["closed_loop"], res_b["closed_loop"])}
    if folder is not None:
        from terrazero_env.viewer import write_side_by_side

        score_b = {ent["episode"]: ent["score"] for ent in res_b["replays"]}
        pairs = [(f"a/{ea['replay']}", f"b/{ea['replay']}",
                  {"name": f"vs_{ea['episode']:04d}", "score": ea["score"],
                   "title": f"episode {ea['episode']}: A {_fmt(ea['score'])} | B {_fmt(score_b[ea['episode']])}"})
                 for ea in res_a["replays"]]
        out["replays"] = write_side_by_side(folder, pairs, title="A (left) and B (right), in step")
    return out


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.1f}"


def rollout(actor: Actor, venv: Any, episodes: int, seed: int, *, video: Path | None = None, video_dpi: int = 80,
            video_fps: int = 10, video_zoom: float | None = None, history: dict[int, list[np.ndarray]] | None = None,
            scenes: Sequence[tuple[int, int]] | None = None, progress_reference: str = "limit",
            replays: dict[tuple[int, int], Any] | None = None) -> tuple[dict[str, Any], int, str | None]:
    """Drive ``actor`` (:func:`~terrazero_env.evaluation.rollout.as_actor`) through rounds of ``venv``'s
    worlds (an autoreset-disabled :class:`~terrazero_env.envs.TerraZeroVectorEnv`) until ``episodes``
    episodes are complete. Returns per-episode outcomes (``events``: counter name -> happened at
    least once; ``counts``; ``progress``; ``return``; ``length`` in steps; ``engine_metrics``: the
    slot's ``Engine.episode_metrics`` row when the episode ended; ``episode_id``: (round, world, agent
    index); ``agent_class``: the agent's class, an ``AgentType`` index), the number of rounds, and the
    video written (or None). ``video``: a ``.gif``/``.mp4`` of world 0 over the first round.
    ``history``, when given, receives every round's ``Engine.agents`` snapshots (one per step, for the
    filmstrip of the worst episodes). ``scenes``, when given,
    replaces the derived seeds: ``(world seed, slot)`` pairs, ``W`` per round, each world reset with
    its seed and only the named slot's episode kept (the long-tail suite's qualifying scenes);
    ``episodes`` must be their number. ``progress_reference``: ``"idm"`` adds an IDM reference
    rollout per round (:func:`idm_reference`); ``reference_progress`` holds each episode's reference
    (m) either way. The actor's ``begin`` is called after every reset with the slots holding a
    controlled agent (a baseline driver takes them over). ``replays``, when given, receives a
    :class:`~terrazero_env.replay.Replay` of every world with a kept episode, per ``(round, world)``,
    recorded from its reset until its kept episodes end."""
    e = venv.engine
    W, K, n = venv.num_worlds, venv.slots_per_world, venv.num_envs
    names = list(core.COUNTER_NAMES)
    n_em = len(core.EPISODE_METRIC_NAMES)
    counters: list[np.ndarray] = []
    engine_rows: list[np.ndarray] = []
    episode_ids: list[tuple[int, int, int]] = []
    classes: list[int] = []
    progress: list[float] = []
    returns: list[float] = []
    lengths: list[int] = []
    references: list[float] = []
    ref_col = list(core.EPISODE_METRIC_NAMES).index("reference_progress")
    goal_col = names.index("goal_reached") if "goal_reached" in names else None
    recorder = None
    video_out = None
    horizon = int(venv.config.episode_length)
    empty_rounds = 0
    rnd = 0
    while len(returns) < episodes:
        if scenes is None:
            seeds = [_world_seed(seed, rnd * W + w) for w in range(W)]
        else:  # unused worlds of the last round repeat its first scene; their episodes are not kept
            chunk = list(scenes[rnd * W:(rnd + 1) * W])
            seeds = [int(s) for s, _ in chunk] + [int(chunk[0][0])] * (W - len(chunk))
        _, info = venv.reset(seed=seeds)
        valid = np.asarray(info["valid"], bool).copy()
        live_slots = np.flatnonzero(valid)
        actor.begin(e, live_slots // K, live_slots % K)
        if scenes is None:
            order = np.nonzero(valid)[0][: episodes - len(returns)]  # this round's share of the sample, slot order
        else:
            order = np.array([w * K + int(k) for w, (_, k) in enumerate(chunk)], np.int64)
            if not valid[order].all():
                raise RuntimeError(f"round {rnd}: a scene's slot holds no controlled agent after its reset")
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
        cls = np.asarray(e.agents["cls"])[world, np.maximum(agent, 0)].copy()
        d_start = _goal_distance(e, world, agent)
        ret = np.zeros(n)
        steps = np.zeros(n, np.int64)
        final = np.zeros((n, len(names)), np.int64)
        final_em = np.zeros((n, n_em), np.float64)
        if history is not None:
            frames = [np.array(e.agents)]
        d_end = np.full(n, np.nan)
        recs: dict[int, Any] = {}
        if replays is not None:
            from terrazero_env.replay import ReplayRecorder

            recs = {int(w): ReplayRecorder(e, int(w)) for w in np.unique(order // K)}
            for rec in recs.values():
                rec.capture()
        watch = wanted.copy()
        if rnd == 0 and video is not None:
            from terrazero_env.render import RolloutRecorder

            recorder = RolloutRecorder(e, 0, dpi=video_dpi, zoom=video_zoom)
            recorder.capture()
            watch[:K] = True  # the video runs until world 0's last episode ends
        live = valid
        for step in drive(actor, e, valid, watch, horizon + 2):
            for w in recs:
                if (step.before & wanted)[w * K:(w + 1) * K].any():
                    recs[w].capture()
            stepped = step.before & step.valid
            ret[stepped] += e.rewards[stepped]
            steps[stepped] += 1
            if step.ended.any():
                idx = np.nonzero(step.ended)[0]
                final[idx] = e.counters[idx]
                final_em[idx] = e.episode_metrics[idx]
                d_end[idx] = _goal_distance(e, world[idx], agent[idx])
            if recorder is not None and step.before[:K].any():
                recorder.capture()
            if history is not None:
                frames.append(np.array(e.agents))
            live = step.live
        if (live & wanted).any():
            raise RuntimeError(f"episodes did not end within {horizon + 2} steps (episode_length {horizon})")
        if recorder is not None:
            video_out = str(recorder.save(video, fps=video_fps))
            recorder = None
        for w, rec in recs.items():
            replays[(rnd, w)] = rec.replay()
        if history is not None:
            history[rnd] = frames
        if progress_reference == "idm":
            # on a fork of the actor's generator: its sampled actions in later rounds stay those of an
            # evaluation without the reference
            with actor.forked():
                reference = idm_reference(actor, venv, seeds, order, steps)
        else:
            reference = final_em[:, ref_col]
        for r in order:
            counters.append(final[r].copy())
            engine_rows.append(final_em[r].copy())
            episode_ids.append((rnd, int(r // K), int(agent[r])))
            classes.append(int(cls[r]))
            reached = goal_col is not None and final[r, goal_col] > 0
            progress.append(1.0 if reached else float(1.0 - d_end[r] / d_start[r]) if d_start[r] > 0 else 0.0)
            returns.append(float(ret[r]))
            lengths.append(int(steps[r]))
            references.append(float(reference[r]))
        rnd += 1
    c = np.array(counters, np.int64).reshape(-1, len(names))
    per = {"events": {name: (c[:, k] > 0).tolist() for k, name in enumerate(names)},
           "counts": {name: c[:, k].tolist() for k, name in enumerate(names)},
           "progress": progress, "return": returns, "length": lengths,
           "engine_metrics": np.array(engine_rows, np.float64).reshape(-1, n_em).tolist(),
           "episode_id": [list(t) for t in episode_ids], "agent_class": classes, "progress_reference": progress_reference,
           "reference_progress": references}
    return per, rnd, video_out


def idm_reference(actor: Actor, venv: Any, seeds: Sequence[int], order: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Each scored slot's reference progress (m, ``[num_envs]``, 0 elsewhere): the worlds reset again
    from ``seeds``, the slots of ``order`` handed to the IDM driver (``Engine.hand_to_idm``), the
    others driven by ``actor``, and each handed slot's progress read after ``steps[slot]`` steps (the
    length of the actor's episode). One rollout for all worlds; its length is the longest episode."""
    e = venv.engine
    K, n = venv.slots_per_world, venv.num_envs
    col = list(core.EPISODE_METRIC_NAMES).index("progress")
    _, info = venv.reset(seed=list(seeds))
    valid = np.asarray(info["valid"], bool)
    live_slots = np.flatnonzero(valid)
    actor.begin(e, live_slots // K, live_slots % K)
    e.hand_to_idm(order // K, order % K)
    need = np.zeros(n, np.int64)
    need[order] = steps[order]
    out = np.zeros(n)
    for step in drive(actor, e, valid, limit=int(need.max(initial=0)), until_done=False):
        due = np.nonzero(need == step.t)[0]
        if due.size:
            out[due] = e.episode_metrics[due, col]
    return out


def _worst_filmstrip(e: Any, per: dict[str, Any], score: np.ndarray, history: dict[int, list[np.ndarray]],
                     path: str | Path, count: int) -> str:
    """Draw the ``count`` lowest-scoring episodes (ties: the earliest) as 6 frames each, centred on the
    episode's agent, from the recorded ``Engine.agents`` snapshots."""
    from terrazero_env.evaluation.plots import filmstrip

    worst = np.argsort(score, kind="stable")[:count]
    strips = []
    for i in worst:
        rnd, w, agent = per["episode_id"][int(i)]
        snaps = history[rnd]
        length = max(int(per["length"][int(i)]), 1)
        steps = np.unique(np.linspace(0, min(length, len(snaps) - 1), 6).round().astype(int))
        rm = e.road_maps[int(e.world_map[w])]
        strips.append({"map": rm.map_data, "agent": agent, "steps": steps.tolist(), "dt": float(e.config.dt),
                       "states": [snaps[t][w] for t in steps],
                       "title": f"episode {int(i)} (round {rnd}, world {w}): score {float(score[i]):.0f}"})
    return str(filmstrip(strips, path))


def _goal_distance(e: Any, world: np.ndarray, agent: np.ndarray) -> np.ndarray:
    """Distance from each (world, agent index) to its goal; NaN where the slot has no agent."""
    out = np.full(world.shape, np.nan)
    ok = agent >= 0
    a = e.agents[world[ok], agent[ok]]
    out[ok] = np.hypot(a["goal_x"] - a["x"], a["goal_y"] - a["y"])
    return out
