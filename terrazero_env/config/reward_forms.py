"""Forms of some reward terms (TerraZero appendix B, table 8): which of two readings the
velocity-alignment, speed-limit and goal-progress terms take. ``EngineConfig`` holds one
:class:`RewardForms` as ``reward_forms``; ``terrazero_env.config`` re-exports every name here. Every
default keeps the project's earlier behaviour; the paper's forms (and the route form of the goal
progress, ours) are opt-in, and the quick preset chooses its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ..foundation.checks import check_enum, check_float
from ..foundation.checks import set_field as _set

__all__ = ["GoalProgressForm", "ProgressShaping", "RewardForms", "SpeedLimitSource", "VelAlignForm"]


class VelAlignForm(IntEnum):
    """How the velocity-alignment term measures the distance to the target speed (appendix B, table 8)."""

    NORMALIZED = 0
    """``-alpha_va * dt * |v - v_target| / v_max`` (this project's form so far, the default: per step and
    relative to the agent's top speed like the velocity term)."""
    TABLE8 = 1
    """The paper's: ``-alpha_va * |dv|`` of table 8, made per step by dt as appendix B states for every
    velocity- and speed-based term, so ``-alpha_va * dt * |v - v_target|`` (m/s, not divided by v_max)."""


class SpeedLimitSource(IntEnum):
    """Which cap the speed-limit term compares the speed with (appendix B, table 8)."""

    SAMPLED = 0
    """The agent's sampled ``v_speed_lim`` parameter only (the default so far)."""
    LANE = 1
    """The paper's: "resolved per lane from the posted limit when one is available" (appendix B, v_lim):
    the posted limit of the agent's current lane, the sampled ``v_speed_lim`` off every lane or where a
    lane has no posted limit."""


class GoalProgressForm(IntEnum):
    """How the goal-progress shaping term measures the distance it pays for closing (ours: the paper holds
    the term at zero, table 8)."""

    EUCLIDEAN = 0
    """Metres of straight-line distance to the goal gained per step (the default so far). Cutting a
    corner, or crossing into the opposing lane toward a goal beyond a turn, gains it too."""
    ROUTE = 1
    """Metres of driving distance to the goal gained per step, along the lane graph (successor lanes and
    lane changes to same-direction neighbours, as ``ObsConfig.topology_goal_distance`` measures it): only
    driving along lanes toward the goal pays. Nothing is paid while the distance is unknown (off every
    lane, against the lane's direction, past the goal), and one step pays at most one step's travel at
    the agent's top speed (``rewards.pxd: route_progress``)."""


class ProgressShaping(IntEnum):
    """How the goal-progress term turns the distance to the goal into a reward per step (ours: the paper
    holds the term at zero, table 8)."""

    DIFFERENCE = 0
    """``d_prev - d``: the metres gained since the last step (the default so far). A new goal starts
    afresh, so every metre driven toward any goal pays: waiting (at a red light, behind a car) forfeits
    that income for as long as it lasts."""
    POTENTIAL = 1
    """Potential-based shaping (Ng, Harada and Russell, 1999) with the potential ``-d`` and the discount
    ``goal_progress_gamma``: ``d_prev - gamma * d`` per step, and on the step that reaches a goal and
    draws the next one, ``d_prev - gamma * d_new``, so the metres to the new goal are charged back.
    Summed with the discount over a car's run it telescopes to the potential at its ends, so it changes
    no decision the unshaped reward makes (a wait costs what delaying the goal bonus costs, not a
    stream of progress), while every step still pays for moving toward the goal. A step that removes
    the car (a collision, leaving the road) is paid as any other: the car forfeits the potential left,
    ``-d``, on top of the penalty. Steps where the distance is unknown (ROUTE off the lanes) pay
    nothing, as in DIFFERENCE, and a new goal whose distance is unknown is not charged."""


@dataclass(frozen=True)
class RewardForms:
    """Which form some reward terms take (appendix B). Every default keeps the project's earlier
    behaviour; the paper's forms are opt-in."""

    vel_align: VelAlignForm = VelAlignForm.NORMALIZED
    """Velocity alignment: NORMALIZED (default, ours) or TABLE8 (the paper's ``-alpha_va * |dv|`` of table 8,
    per step)."""
    speed_limit: SpeedLimitSource = SpeedLimitSource.SAMPLED
    """Speed-limit term's cap: SAMPLED (default, ours) or LANE (the paper's, appendix B: the lane's posted
    limit)."""
    goal_progress: GoalProgressForm = GoalProgressForm.EUCLIDEAN
    """Goal-progress shaping (weight ``rewards.goal_progress``): EUCLIDEAN (default) or ROUTE (along the lane
    graph; ours)."""
    route_max_distance: float = 200.0
    """ROUTE: the lane-graph search stops this far out (m); a goal further along the lanes counts as
    unknown (ours, as ``ObsConfig.topology_max_distance``)."""
    goal_progress_shaping: ProgressShaping = ProgressShaping.DIFFERENCE
    """Goal-progress shaping's per-step reward: DIFFERENCE (default: metres gained) or POTENTIAL
    (potential-based, discounted by ``goal_progress_gamma``; ours)."""
    goal_progress_gamma: float = 0.99
    """POTENTIAL: the shaping's discount per step, in [0, 1]; policy invariance needs the learner's own
    discount (table 14: 0.99)."""

    def __post_init__(self) -> None:
        _set(self, "vel_align", check_enum("RewardForms.vel_align", self.vel_align, VelAlignForm))
        _set(self, "speed_limit", check_enum("RewardForms.speed_limit", self.speed_limit, SpeedLimitSource))
        _set(self, "goal_progress", check_enum("RewardForms.goal_progress", self.goal_progress, GoalProgressForm))
        _set(self, "goal_progress_shaping", check_enum("RewardForms.goal_progress_shaping",
                                                       self.goal_progress_shaping, ProgressShaping))
        check_float("RewardForms.goal_progress_gamma", self.goal_progress_gamma, 0.0, 1.0)
        check_float("RewardForms.route_max_distance", self.route_max_distance, 0.0, lo_open=True, unit=" of metres")
