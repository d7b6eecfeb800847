"""Static signal plans of a built map: which heads go green together under each controller.

Computed once per map (the engine's ``RoadMap`` stores the arrays) so the per-step controller tick
only walks precomputed stage lists (TerraZero section 4.5):

* legs: the signalized stop lines of an intersection, ordered clockwise by their approach direction
  starting from traffic heading south (canonical order for the round-robin controller);
* NEMA phases on two rings between barriers: legs are paired with the opposite approach (major pair
  first, then the minor pair, then any unpaired leg) and each pair (or lone leg) is one barrier group.
  In a pair (A, B), ring 0 runs B's protected left then A's through (straight and right heads),
  ring 1 A's protected left then B's through, leaving out empty phases, so any phase of one ring
  may run with any phase of the other (NEMA phases 1, 2 | 5, 6: opposing lefts, a leg's left with
  its own through, opposing throughs). A lone leg gets one phase with all its heads on ring 0.
  "Left" is the turn across oncoming traffic (a right turn under left-hand traffic).
  When protected lefts are flipped to permissive, left phases are skipped and left heads go green
  with their leg's through phase (``perm`` heads).
"""

from __future__ import annotations

import numpy as np

from .schema import MapData, Movement

__all__ = ["LOGGED_STATE_COLOURS", "STAGE_LEFT", "STAGE_THROUGH", "STAGE_ALL", "logged_head_states", "signal_plan"]

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
    phases (``stage_off``, ordered by barrier group, then ring, then sequence) with each phase's kind,
    ring (0 or 1, ``stage_ring``), barrier group (``stage_barrier``), heads (``stage_head_off``/
    ``stage_heads``) and permissive-left heads (``stage_perm_off``/``stage_perm``); per leg its heads (``leg_head_off``/
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
    # The turn across oncoming traffic ("left" below): LEFT where traffic keeps right, RIGHT where
    # it keeps left; U-turns cross it either way.
    across = (Movement.RIGHT if int(m.handedness) == 1 else Movement.LEFT, Movement.UTURN)
    leg_off, legs, leg_head_off, leg_heads = [0], [], [0], []
    stage_off, kinds, stage_head_off, stage_heads, stage_perm_off, stage_perm = [0], [], [0], [], [0], []
    rings: list[int] = []
    barriers: list[int] = []
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
        for barrier, pair in enumerate(pairs):
            lefts = {sl: [h for h in heads_of_sl[sl] if g.movement[h] in across] for sl in pair}
            others = {sl: [h for h in heads_of_sl[sl] if h not in lefts[sl]] for sl in pair}
            if len(pair) == 2:
                # Ring 0: B's left, then A's through; ring 1: A's left, then B's through. A leg's left
                # is a protected-left phase (skipped when permissive) only if its through carries it.
                a, b = pair
                phases = []
                for ring, left_leg, through_leg in ((0, b, a), (1, a, b)):
                    if lefts[left_leg]:
                        kind = STAGE_LEFT if others[left_leg] else STAGE_ALL
                        phases.append((ring, kind, lefts[left_leg], []))
                    if others[through_leg]:
                        kind = STAGE_THROUGH if lefts[through_leg] else STAGE_ALL
                        phases.append((ring, kind, others[through_leg], lefts[through_leg]))
            else:
                phases = [(0, STAGE_ALL, heads_of_sl[pair[0]], [])]
            for ring, kind, hs, perm in phases:
                kinds.append(kind)
                rings.append(ring)
                barriers.append(barrier)
                stage_heads.extend(hs)
                stage_head_off.append(len(stage_heads))
                stage_perm.extend(perm)
                stage_perm_off.append(len(stage_perm))
        stage_off.append(len(kinds))

    def arr(v: list[int], dt: type = np.int32) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(v, dtype=dt))

    return {
        "leg_off": arr(leg_off, np.int64), "legs": arr(legs),
        "leg_head_off": arr(leg_head_off, np.int64), "leg_heads": arr(leg_heads),
        "stage_off": arr(stage_off, np.int64), "stage_kind": arr(kinds, np.uint8),
        "stage_ring": arr(rings, np.uint8), "stage_barrier": arr(barriers),
        "stage_head_off": arr(stage_head_off, np.int64), "stage_heads": arr(stage_heads),
        "stage_perm_off": arr(stage_perm_off, np.int64), "stage_perm": arr(stage_perm),
    }


#: Waymo's TrafficSignalLaneState codes (unknown, arrow stop/caution/go, stop, caution, go, flashing
#: stop, flashing caution) as the engine's head states (0 red, 1 yellow, 2 green, 3 off); a flashing
#: red is a stop, a flashing yellow a caution. Logged steps without a state (-1) are off.
LOGGED_STATE_COLOURS = np.array([3, 0, 1, 2, 0, 1, 2, 0, 1], np.uint8)
#: The most logged steps a map may carry (a bound on the work of a file's metadata).
MAX_LOGGED_STEPS = 100_000


def logged_head_states(m: MapData) -> np.ndarray:
    """uint8 ``[G, T]``: each signal head's logged state per step as the engine's colours, from
    ``metadata["logged_signals"]["states"]`` (one row of Waymo state codes per head, in head order,
    as the WOMD converters write it); ``[G, 0]`` when the map has no logged signals.
    ``MapValidationError`` when the rows do not match the heads or hold unknown codes."""
    from .builder import MapValidationError

    g = len(m.signals)
    logged = (m.metadata or {}).get("logged_signals") if isinstance(m.metadata, dict) else None
    rows = logged.get("states") if isinstance(logged, dict) else None
    if not rows:
        return np.zeros((g, 0), np.uint8)
    if not isinstance(rows, list) or len(rows) != g:
        raise MapValidationError(f"metadata.logged_signals.states: {len(rows) if isinstance(rows, list) else rows!r} "
                                 f"rows for {g} signal heads")
    t = len(rows[0]) if isinstance(rows[0], list) else -1
    if not 0 < t <= MAX_LOGGED_STEPS or any(not isinstance(r, list) or len(r) != t for r in rows):
        raise MapValidationError(f"metadata.logged_signals.states: every row needs the same number of steps "
                                 f"(1..{MAX_LOGGED_STEPS})")
    try:
        codes = np.asarray(rows, np.int64)
    except (TypeError, ValueError):
        raise MapValidationError("metadata.logged_signals.states: rows must hold integer state codes") from None
    if codes.min() < -1 or codes.max() >= LOGGED_STATE_COLOURS.shape[0]:
        raise MapValidationError("metadata.logged_signals.states: codes must be -1 (none) or Waymo's 0..8")
    return np.ascontiguousarray(np.where(codes < 0, 3, LOGGED_STATE_COLOURS[np.clip(codes, 0, 8)]).astype(np.uint8))
