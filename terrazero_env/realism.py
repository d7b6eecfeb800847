"""The realism table moved to :mod:`terrazero_env.evaluation.realism`; its command is ``terrazero realism``.

This name stays so that ``python -m terrazero_env.realism`` and ``from terrazero_env.realism import ...``
keep working, with a ``DeprecationWarning`` that says where it lives now."""

from __future__ import annotations

import warnings

from .evaluation.realism import *  # noqa: F403  (the same names as before the move)
from .evaluation.realism import main, realism_table  # noqa: F401

warnings.warn("terrazero_env.realism moved to terrazero_env.evaluation.realism; the command is `terrazero realism`",
              DeprecationWarning, stacklevel=2)

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m terrazero_env.realism"))
