"""terrazero-env: a fast procedural multi-agent driving simulator for reinforcement learning.

Implements TerraZero (procedural object-level simulation, traffic rules, self-play PPO recipe) and
FAST (DPSA sampling, SMPO loss). See the README for what works today.
"""

__version__ = "0.1.0"

from . import maps  # noqa: E402
from .config import EngineConfig  # noqa: E402
from .config_io import load_config  # noqa: E402
from .envs import DriveEnv, aec_env, make_vec, parallel_env, register  # noqa: E402

#: PettingZoo convention: ``env()`` is the AEC form, ``parallel_env()`` the parallel one.
env = aec_env

register()

__all__ = ["DriveEnv", "EngineConfig", "env", "load_config", "make_vec", "maps", "parallel_env", "__version__"]
