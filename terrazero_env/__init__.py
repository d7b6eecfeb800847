"""terrazero-env: a fast procedural multi-agent driving simulator for reinforcement learning.

Implements TerraZero (procedural object-level simulation, traffic rules, self-play PPO recipe) and
FAST (DPSA sampling, SMPO loss). See docs/status.md for what works today.
"""

from . import maps
from ._build_info import build_info
from ._version import __version__
from .config import EngineConfig
from .config.io import load_config
from .envs import DriveEnv, aec_env, make_vec, parallel_env, register

#: PettingZoo convention: ``env()`` is the AEC form, ``parallel_env()`` the parallel one.
env = aec_env

register()

__all__ = ["DriveEnv", "EngineConfig", "__version__", "build_info", "env", "load_config", "make_vec", "maps",
           "parallel_env"]
