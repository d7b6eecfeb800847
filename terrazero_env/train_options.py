"""The command-line options of the training command, declared once for both entry points: the
``terrazero train`` subcommand (:mod:`terrazero_env.cli`) and ``python -m terrazero_env.agents.launch``
(the module ``torchrun`` starts on every rank). Only argparse lives here, so the CLI builds its parser
without importing torch, and ``agents`` never imports the CLI; what the options do is
:func:`terrazero_env.agents.train.train_from_args`.
"""

from __future__ import annotations

import argparse

__all__ = ["add_train_arguments"]


def add_train_arguments(t: argparse.ArgumentParser) -> None:
    """Add the options of ``terrazero train`` (also ``python -m terrazero_env.agents.launch``) to ``t``;
    :func:`terrazero_env.agents.train.train_from_args` runs the command from the parsed namespace."""
    t.add_argument("--preset", default="quick", help="bundled preset (quick, planner, sim_agent)")
    t.add_argument("--config", default=None, help="a YAML config file (engine config and optional train: section) "
                                                  "instead of a preset")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set rewards.collision=[0,3] or --set train.ent_coef=0.005")
    t.add_argument("--total-steps", type=int, default=None, help="agent steps over every rank (default: the preset's)")
    t.add_argument("--out", default="runs/quick", help="run folder: config, progress log, TensorBoard, checkpoints")
    t.add_argument("--resume", default=None, metavar="RUN", help="continue the newest checkpoint of this run folder")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--sampler", choices=["dpsa", "sgr", "autoreset"], default=None,
                   help="DPSA (default), synchronous global reset, or per-world autoreset")
    t.add_argument("--threshold", type=float, default=None, help="DPSA termination-rate threshold")
    t.add_argument("--worlds", type=int, default=None, help="worlds per rank (default: the preset's)")
    t.add_argument("--n-steps", type=int, default=None, help="rollout length per update")
    t.add_argument("--full-policy", action="store_true", help="the paper-sized Deep Sets policy (~3.4M parameters)")
    t.add_argument("--checkpoint-every", type=int, default=None, help="iterations between checkpoints")
    t.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    t.add_argument("--torch-threads", type=int, default=None)
    t.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                   help="a progress bar on a terminal, else one line per iteration")
    t.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard logs")
