"""Training algorithms and policies (installed as ``terrazero_env.agents``); the only package that
imports torch.

* :class:`PPO`: Stable-Baselines3 PPO with SMPO masking, V-trace, PopArt and prioritized segment
  sampling (TerraZero section 5.1, appendix E; FAST section III);
* :class:`DeepSetsPolicy`: the permutation-invariant actor-critic (``PPO("DeepSetsPolicy", env)``);
* :mod:`losses`: the maths as plain functions (masked GAE, V-trace, masked PPO loss, PopArt, priorities);
* :mod:`targets`: the rollout maths batched in torch on the training device (what PPO runs; ``losses``'
  NumPy versions are its references).
"""

from . import losses, targets
from .policies import DeepSetsPolicy
from .ppo import PPO, MaskedRolloutBuffer

__all__ = ["PPO", "DeepSetsPolicy", "MaskedRolloutBuffer", "losses", "targets"]
