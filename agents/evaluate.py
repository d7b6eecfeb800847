"""The learner's side of ``terrazero eval``: loading a ``PPO.save`` checkpoint without unpickling.

The evaluation itself (rounds of worlds, the closed-loop score, ``--vs``, videos, replays) is torch-free
and lives in :mod:`terrazero_env.evaluation.evaluate`, driven through the one step loop of
:mod:`terrazero_env.evaluation.rollout`; its names stay importable from here.
"""

from __future__ import annotations

from pathlib import Path

from terrazero_env.evaluation.evaluate import (
    RATES,
    check_compatible,
    check_progress_reference,
    closed_loop_from,
    compare_policies,
    evaluate,
    format_table,
    mean_interval,
    resolve_run,
    rollout,
    summarize,
    t_quantile,
    wilson_interval,
    write_replays,
)

from .modelzip import PickleRefusedError, load_model
from .ppo import PPO

__all__ = ["RATES", "check_compatible", "check_progress_reference", "closed_loop_from", "compare_policies", "evaluate",
           "format_table", "load_checkpoint", "mean_interval", "resolve_run", "rollout", "summarize", "t_quantile",
           "wilson_interval", "write_replays"]


def load_checkpoint(path: str | Path, device: str = "cpu", trust_pickle: bool = False) -> PPO:
    """Load a ``PPO.save`` zip without unpickling (see :mod:`terrazero_env.agents.modelzip`), with a
    one-line ``ValueError`` naming the file when it cannot be read or its weights are not finite. A
    zip with pickled attributes this package did not describe (any other SB3 file) is refused unless
    ``trust_pickle``."""
    try:
        model = load_model(PPO, path, device=device, trust_pickle=trust_pickle)
    except PickleRefusedError:
        raise
    except Exception as e:  # a zip that is not an SB3 save fails in many ways (BadZipFile, KeyError, ...)
        detail = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"cannot load checkpoint {path}: {type(e).__name__}" + (f": {detail}" if detail else "")) from e
    import torch

    for name, tensor in model.policy.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"checkpoint {path}: the policy's {name} holds NaN or infinite values (refused: its "
                             "actions would be meaningless)")
    return model
