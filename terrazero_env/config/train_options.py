"""The command-line options of the training command, declared once for both entry points: the
``terrazero train`` subcommand (:mod:`terrazero_env.cli`) and ``python -m terrazero_env.agents.launch``
(the module ``torchrun`` starts on every rank). Only argparse lives here, so the CLI builds its parser
without importing torch, and ``agents`` never imports the CLI; what the options do is
:func:`terrazero_env.agents.train.train_from_args`. The argument types that bound every number
(``int_in``, ``SEED``, ``positive_float``) live here too and are shared with the other commands, so a
bad number is an argparse error naming the option, never a traceback from deep inside.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

__all__ = ["MAX_SEED", "SEED", "THREADS", "add_train_arguments", "int_in", "positive_float", "prefer_huge_pages"]

MAX_SEED = 2**64 - 1


def prefer_huge_pages() -> None:
    """Ask torch's CPU allocator for transparent huge pages on large tensors (``THP_MEM_ALLOC_ENABLE=1``,
    unless the environment already sets it). The learner allocates tensors of tens of MB per minibatch
    (gathered observations, packed entities, activations); with 4 KiB pages their first touch costs more
    than the copy itself (BENCHMARKS.md, training pipeline). torch reads the variable once, at its first
    allocation: the training entry points call this before importing torch."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a decimal integer in [lo, hi], else an error saying the range."""

    def parse(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= v <= hi:
            top = "2**64 - 1" if hi == MAX_SEED else f"{hi:_}"
            raise argparse.ArgumentTypeError(f"must lie in [{lo}, {top}], got {v}")
        return v

    parse.__name__ = "integer"
    return parse


def positive_float(hi: float = math.inf) -> Callable[[str], float]:
    """An argparse type: a finite number in (0, hi]."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(v) and 0 < v <= hi):
            raise argparse.ArgumentTypeError(f"must be a finite number in (0, {hi}], got {text}")
        return v

    parse.__name__ = "number"
    return parse


#: Seeds follow Gymnasium: non-negative integers below 2**64 (no two seeds alias one run).
SEED = int_in(0, MAX_SEED)
#: Torch or engine threads: at most four per CPU core.
THREADS = int_in(1, 4 * (os.cpu_count() or 1))


def add_train_arguments(t: argparse.ArgumentParser) -> None:
    """Add the options of ``terrazero train`` (also ``python -m terrazero_env.agents.launch``) to ``t``;
    :func:`terrazero_env.agents.train.train_from_args` runs the command from the parsed namespace."""
    t.add_argument("--preset", default="quick", help="bundled preset (quick, planner, sim_agent)")
    t.add_argument("--config", default=None, help="a YAML config file (engine config and optional train: section) "
                                                  "instead of a preset")
    t.add_argument("--dataset", default=None, metavar="MANIFEST",
                   help="train on a scenario dataset: a manifest file (or 'bundled', the shipped one), a folder "
                        "or a glob of .tzb files; every world reset draws a scenario, balanced over its groups")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set rewards.collision=[0,3] or --set train.ent_coef=0.005")
    t.add_argument("--total-steps", type=int_in(1, 10**12), default=None,
                   help="agent steps over every rank (default: the preset's)")
    t.add_argument("--out", default="runs/quick", help="run folder: config, progress log, TensorBoard, checkpoints")
    t.add_argument("--resume", default=None, metavar="RUN", help="continue the newest checkpoint of this run folder")
    t.add_argument("--seed", type=SEED, default=None, help="an integer in [0, 2**64)")
    t.add_argument("--sampler", choices=["dpsa", "sgr", "autoreset"], default=None,
                   help="DPSA (default), synchronous global reset, or per-world autoreset")
    t.add_argument("--threshold", type=positive_float(1.0), default=None, help="DPSA termination-rate threshold")
    t.add_argument("--worlds", type=int_in(1, 65536), default=None, help="worlds per rank (default: the preset's)")
    t.add_argument("--n-steps", type=int_in(1, 10**6), default=None, help="rollout length per update")
    t.add_argument("--full-policy", action="store_true", help="the paper-sized Deep Sets policy (~3.4M parameters)")
    t.add_argument("--checkpoint-every", type=int_in(1, 10**9), default=None, help="iterations between checkpoints")
    t.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    t.add_argument("--torch-threads", type=THREADS, default=None)
    t.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                   help="a progress bar on a terminal, else one line per iteration")
    t.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard logs")
