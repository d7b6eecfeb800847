"""Training algorithms and policies (installed as ``terrazero_env.agents``); the only package that
imports torch.

* :class:`PPO`: Stable-Baselines3 PPO with SMPO masking, V-trace, PopArt and prioritized segment
  sampling (TerraZero section 5.1, appendix E; FAST section III);
* :class:`DeepSetsPolicy`: the permutation-invariant actor-critic (``PPO("DeepSetsPolicy", env)``);
* :mod:`losses`: the maths as plain functions (masked GAE, V-trace, masked PPO loss, PopArt, priorities);
* :mod:`targets`: the rollout maths batched in torch on the training device (what PPO runs; ``losses``'
  NumPy versions are its references).

Importing this package sets ``THP_MEM_ALLOC_ENABLE=1`` (unless already set) so that torch's CPU
allocator backs large tensors with transparent huge pages; it takes effect only when torch has not
allocated a tensor yet (:func:`terrazero_env.config.train_options.prefer_huge_pages`).
"""

from terrazero_env.config.train_options import prefer_huge_pages

prefer_huge_pages()  # THP_MEM_ALLOC_ENABLE=1 unless set: read by torch at its first allocation

from . import losses, targets  # noqa: E402
from .policies import DeepSetsPolicy  # noqa: E402
from .ppo import PPO, MaskedRolloutBuffer  # noqa: E402

__all__ = ["PPO", "DeepSetsPolicy", "MaskedRolloutBuffer", "losses", "targets"]
