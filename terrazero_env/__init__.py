"""terrazero-env: a fast procedural multi-agent driving simulator for reinforcement learning.

Implements TerraZero (procedural object-level simulation, traffic rules, self-play PPO recipe) and
FAST (DPSA sampling, SMPO loss). See the README for what works today.
"""

__version__ = "0.1.0"

from . import maps  # noqa: E402

__all__ = ["maps", "__version__"]
