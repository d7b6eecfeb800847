"""Vector-environment wrappers (installed as ``terrazero_env.wrappers``).

The DPSA and SGR wrappers and the Stable-Baselines3 adapter live here; this package never imports
torch.
"""

__all__: list[str] = []
