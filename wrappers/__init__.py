"""Vector-environment wrappers (installed as ``terrazero_env.wrappers``).

The DPSA and SGR wrappers and the Stable-Baselines3 adapter live here; this package never imports
torch.
"""

from __future__ import annotations

from typing import Any

from .double_buffer import DoubleBufferedEnv
from .dpsa import DPSA, SGR, SamplingCounter, SamplingStats
from .live_vector import LiveVectorEnv, make_dpsa_vec

# ``SB3VecEnv`` is loaded on first access (stable-baselines3 imports torch) and kept out of
# ``__all__`` so that a star import does not load it either.
__all__ = ["DPSA", "SGR", "DoubleBufferedEnv", "LiveVectorEnv", "SamplingCounter", "SamplingStats", "make_dpsa_vec"]


def __getattr__(name: str) -> Any:
    if name == "SB3VecEnv":
        from .sb3 import SB3VecEnv

        return SB3VecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
