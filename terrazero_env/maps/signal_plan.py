"""Static signal plans of a built map: which heads are green together under each controller.

Computed once per map (the engine's ``RoadMap`` stores the arrays) so the per-step controller tick
only walks precomputed stage lists (TerraZero section 4.5):

* legs: the signalized stop lines of an intersection, ordered clockwise by their approach direction
  starting from traffic heading south (canonical order for the round-robin controller);
* NEMA stages: legs paired with the opposite approach (major pair first, then the minor pair, then
  any unpaired leg); for each pair a protected-left stage (both legs' left heads) then a through
  stage (both legs' straight and right heads); an unpaired leg gets one stage with all its heads.
  When protected lefts are flipped to permissive, the left stage is skipped and left heads go green
  with their leg's through stage (``perm`` heads).
"""

from __future__ import annotations

import numpy as np

from .schema import MapData, Movement

__all__ = ["STAGE_LEFT", "STAGE_THROUGH", "STAGE_ALL", "signal_plan"]

#: Kinds of NEMA stage (``stage_kind``). Maps sit below the engine and may not import it, so these
#: stay declared here; they must equal the engine's ``STAGE_*`` enum of ``cyext/signals.pxd``
#: (exported as ``SIGNAL_STAGES``), which ``tests/test_vocabulary.py`` checks.
STAGE_LEFT, STAGE_THROUGH, STAGE_ALL = 0, 1, 2


def _approach_heading(m: MapData, stop_line: int) -> float:
    """Direction of travel across a stop line (from its first controlled lane's end tangent)."""
    lanes = m.stop_lines.lanes.row(stop_line)
    cl = m.lanes.centerline
    end = int(cl.offsets[lanes[0] + 1]) - 1
    d = cl.values[end, :2] - cl.values[end - 1, :2]
    return float(np.arctan2(d[1], d[0]))


def signal_plan(m: MapData) -> dict[str, np.ndarray]:
    """CSR arrays: per intersection its legs (``leg_off``/``legs``), per intersection its NEMA
    stages (``stage_off``) with each stage's kind, heads (``stage_head_off``/``stage_heads``) and
    permissive-left heads (``stage_perm_off``/``stage_perm``); per leg its heads (``leg_head_off``/
    ``leg_heads``), for the round-robin controller."""
    g = m.signals
    n_inter = len(m.intersections) if m.intersections is not None else 0
    legs_of: list[list[int]] = [[] for _ in range(n_inter)]
    heads_of_sl: dict[int, list[int]] = {}
    for h in range(len(g)):
        sl = int(g.stop_line[h])
        heads_of_sl.setdefault(sl, []).append(h)
        i = int(m.stop_lines.intersection[sl])
        if i >= 0 and sl not in legs_of[i]:
            legs_of[i].append(sl)
    leg_off, legs, leg_head_off, leg_heads = [0], [], [0], []
    stage_off, kinds, stage_head_off, stage_heads, stage_perm_off, stage_perm = [0], [], [0], [], [0], []
    for i in range(n_inter):
        heading = {sl: _approach_heading(m, sl) for sl in legs_of[i]}
        # Clockwise from "heading south" (-pi/2): sort by clockwise angle from that direction.
        order = sorted(legs_of[i], key=lambda sl: (-(heading[sl] + np.pi / 2)) % (2 * np.pi))
        for sl in order:
            legs.append(sl)
            leg_heads.extend(heads_of_sl[sl])
            leg_head_off.append(len(leg_heads))
        leg_off.append(len(legs))
        # Pair opposite approaches (heading difference near pi).
        unpaired = list(order)
        pairs: list[list[int]] = []
        while unpaired:
            a = unpaired.pop(0)
            mate = next((b for b in unpaired
                         if abs(abs(np.angle(np.exp(1j * (heading[a] - heading[b])))) - np.pi) < np.pi / 4), None)
            if mate is not None:
                unpaired.remove(mate)
                pairs.append([a, mate])
            else:
                pairs.append([a])
        pairs.sort(key=len, reverse=True)  # the two-way pairs (major roads) first
        for pair in pairs:
            heads = [h for sl in pair for h in heads_of_sl[sl]]
            lefts = [h for h in heads if g.movement[h] in (Movement.LEFT, Movement.UTURN)]
            others = [h for h in heads if h not in lefts]
            if len(pair) == 2 and lefts and others:
                for kind, hs, perm in ((STAGE_LEFT, lefts, []), (STAGE_THROUGH, others, lefts)):
                    kinds.append(kind)
                    stage_heads.extend(hs)
                    stage_head_off.append(len(stage_heads))
                    stage_perm.extend(perm)
                    stage_perm_off.append(len(stage_perm))
            else:
                kinds.append(STAGE_ALL)
                stage_heads.extend(heads)
                stage_head_off.append(len(stage_heads))
                stage_perm_off.append(len(stage_perm))
        stage_off.append(len(kinds))

    def arr(v: list[int], dt: type = np.int32) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(v, dtype=dt))

    return {
        "leg_off": arr(leg_off, np.int64), "legs": arr(legs),
        "leg_head_off": arr(leg_head_off, np.int64), "leg_heads": arr(leg_heads),
        "stage_off": arr(stage_off, np.int64), "stage_kind": arr(kinds, np.uint8),
        "stage_head_off": arr(stage_head_off, np.int64), "stage_heads": arr(stage_heads),
        "stage_perm_off": arr(stage_perm_off, np.int64), "stage_perm": arr(stage_perm),
    }
