"""``python -m terrazero_env.agents.launch``: the ``terrazero train`` command as a module, for
``torchrun`` (which launches a module or script per rank)::

    torchrun --nproc-per-node 8 -m terrazero_env.agents.launch --preset planner --out runs/planner
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m terrazero_env.agents.launch --preset planner --out runs/planner

Every rank parses the same arguments (declared once in :mod:`terrazero_env.config.train_options`) and runs
:func:`terrazero_env.agents.train.train_from_args`; rank 0 prints and writes the run folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from terrazero_env.config.train_options import add_train_arguments

from .distributed import shutdown
from .train import train_from_args


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m terrazero_env.agents.launch",
                                description="train PPO with DPSA sampling, on one device or under torchrun")
    add_train_arguments(p)
    args = p.parse_args(argv)
    try:
        train_from_args(args)
        return 0
    except (FileNotFoundError, ValueError) as e:
        print(f"terrazero: error: {e}", file=sys.stderr)
        return 2
    finally:
        shutdown()


if __name__ == "__main__":
    sys.exit(main())
