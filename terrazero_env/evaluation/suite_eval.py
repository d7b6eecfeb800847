"""``terrazero eval RUN --suite NAME``: a trained policy (or a baseline driver) on the scenario
families of a suite; torch-free.

    terrazero eval runs/quick --suite interplan --json interplan.json
    terrazero eval runs/quick --suite longtail --scenes 20 --json longtail.json

``interplan`` composes InterPlan's scenes and scores them its way
(:mod:`terrazero_env.evaluation.interplan`); the rest of this docstring is about ``longtail``.

For each family of the suite (:mod:`terrazero_env.evaluation.suites`: the declarative specs, the seed scan that
finds scenes where the ego meets the family's feature, and the table), this module rolls the policy
out with deterministic actions on exactly those scenes, one kept episode per scene (the qualifying
slot of a world reset with the scene's seed; the other controlled slots of that world drive too, under
the same policy, but are not scored), through :func:`terrazero_env.evaluation.evaluate.rollout`, and
scores every episode with the nuPlan-style closed-loop score of :mod:`terrazero_env.evaluation.metrics`. The
run's config supplies observation, reward and kinematic settings, so the policy sees the layout it
was trained on; the family supplies map, road users and agent counts. Ego progress is measured
against the IDM driver from the same start (``progress_reference="idm"``, one extra rollout per
batch of scenes) or the posted limit (``"limit"``); see :mod:`terrazero_env.evaluation.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import terrazero_env
from terrazero_env.config import EngineConfig

from .evaluate import actor_for, check_progress_reference, closed_loop_from, rollout, write_replays
from .suites import family_config, family_row, find_scenes, get_suite, suite_mean

__all__ = ["evaluate_suite"]


def evaluate_suite(model: Any, config: EngineConfig, suite: str = "longtail", scenes: int = 20, seed: int = 0,
                   *, families: Sequence[str] | None = None, config_name: str = "the config",
                   on_family: Callable[[dict[str, Any]], None] | None = None,
                   progress_reference: str = "idm", replay: str | Path | None = None,
                   sampled: bool = False) -> dict[str, Any]:
    """Evaluate ``model`` (anything with SB3's ``predict``, or a :class:`~terrazero_env.drivers.Driver`) on ``scenes`` qualifying scenes of every
    family of ``suite`` (or only those named in ``families``), with deterministic actions (with
    ``sampled``, a policy's sampled actions, following ``seed``; a driver is unaffected). Returns
    ``{"suite", "seed", "scenes", "families": [row, ...], "mean": row, "closed_loop": {family: {metric:
    [per episode]}}, "scene_seeds": {family: [[seed, slot], ...]}}`` (rows: :func:`~terrazero_env.evaluation.suites.family_row`).
    ``on_family`` is called with each row as soon as it is ready; ``progress_reference``: ``"idm"`` or
    ``"limit"``, named in the result. ``replay``: a folder receiving each scene's browser replay
    (``FAMILY/scene_NNNN.tzr`` and ``.html``) and an ``index.html``, a row per family, each scene with
    its score. Deterministic in ``seed``. With ``suite="interplan"`` the result is
    :func:`terrazero_env.evaluation.interplan.evaluate_interplan`'s (per-scene terms under
    ``per_scene``; ``progress_reference`` does not apply: InterPlan measures progress along the
    expert route)."""
    if isinstance(scenes, bool) or not isinstance(scenes, (int, np.integer)) or scenes < 1:
        raise ValueError(f"scenes must be a positive integer, got {scenes!r}")
    if suite == "interplan":
        return _evaluate_interplan(model, config, scenes, seed, families, config_name, on_family, replay, sampled)
    check_progress_reference(progress_reference)
    fams = get_suite(suite)
    if families is not None:
        known = [f.name for f in fams]
        unknown = [f for f in families if f not in known]
        if unknown:
            raise ValueError(f"unknown {suite} families {unknown}; known: {', '.join(known)}")
        fams = tuple(f for f in fams if f.name in families)
    rows: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    closed_all: dict[str, dict[str, list[float]]] = {}
    seeds_all: dict[str, list[list[int]]] = {}
    for fam in fams:
        found, scanned = find_scenes(config, fam, int(scenes), seed)
        cfg = family_config(config, fam).with_overrides(num_worlds=min(config.num_worlds, int(scenes)))
        venv = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
        try:
            actor = actor_for(model, venv, not sampled, config_name)
            with actor.seeded(seed):
                store: dict[tuple[int, int], Any] | None = {} if replay is not None else None
                per, _, _ = rollout(actor, venv, len(found), seed, scenes=[(s.seed, s.slot) for s in found],
                                    progress_reference=progress_reference, replays=store)
        finally:
            venv.close()
        closed = closed_loop_from(per, float(cfg.dt))
        if replay is not None:
            entries += write_replays(replay, per, closed["score"], store, range(len(found)), config_name,
                                     group=fam.name, prefix=f"{fam.name}/scene_", index=False, driver=actor.name)
        row = family_row(fam, scanned, per, closed)
        rows.append(row)
        closed_all[fam.name] = {k: v.tolist() for k, v in closed.items()}
        seeds_all[fam.name] = [[s.seed, s.slot] for s in found]
        if on_family is not None:
            on_family(row)
    out = {"suite": suite, "seed": int(seed), "scenes": int(scenes), "deterministic": not sampled,
           "progress_reference": progress_reference, "families": rows,
           "mean": suite_mean(rows), "closed_loop": closed_all, "scene_seeds": seeds_all}
    if replay is not None:
        from terrazero_env.viewer import write_index

        write_index(replay, entries, f"{suite} suite: a row per family, each scene with its score")
        out["replays"] = entries
    return out


def _evaluate_interplan(model: Any, config: EngineConfig, scenes: int, seed: int, families: Sequence[str] | None,
                        config_name: str, on_family: Callable[[dict[str, Any]], None] | None,
                        replay: str | Path | None, sampled: bool = False) -> dict[str, Any]:
    """The ``interplan`` suite (:func:`terrazero_env.evaluation.interplan.evaluate_interplan`): a
    baseline driver as it is, a model on its most likely actions after its spaces are checked
    against the scenes' env."""
    from . import interplan

    fams = interplan.INTERPLAN if families is None else tuple(interplan.get_family(f) for f in families)
    check_env = terrazero_env.envs.TerraZeroVectorEnv(interplan.scene_config(config, fams[0].maps[0], 1),
                                                      autoreset_mode="Disabled")
    try:
        actor = actor_for(model, check_env, not sampled, config_name)
    finally:
        check_env.close()
    with actor.seeded(seed):
        out = interplan.evaluate_interplan(actor, config, int(scenes), int(seed), families=[f.name for f in fams],
                                           on_family=on_family, replay=replay, label=config_name)
    out["deterministic"] = not sampled
    return out
