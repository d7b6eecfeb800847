# Signal storage of the Engine (and, sized the same way, the lane-graph scratch of the topology goal
# distance, ``_grow_lane_scratch``): per-world arrays of signal-head, stop-line and controller state,
# sized for the largest map in use and grown (keeping their content) when ``assign_maps`` brings a
# bigger one; the per-world view of them handed to ``signals.pxd`` (``_sig_state``); and scripting
# one stop line (``Engine.set_stop_line_state``). Module-level functions of _engine.pyx taking the
# engine; the controller logic itself lives in ``signals.pxd``.

cdef _grow_signal_store(Engine e):
    """Per-world signal arrays sized for the largest map in use (grown, keeping their content,
    when a bigger map arrives through ``assign_maps``)."""
    cdef RoadMap rm
    S = max([1] + [(<RoadMap>r).c.n_stop_lines for r in e.road_maps])
    G = max([1] + [(<RoadMap>r).c.n_heads for r in e.road_maps])
    I = max([1] + [(<RoadMap>r).c.n_inter for r in e.road_maps])
    if S <= e.s_cap and G <= e.g_cap and I <= e.i_cap and e._sig is not None:
        return
    S, G, I = max(S, e.s_cap), max(G, e.g_cap), max(I, e.i_cap)
    W = e.num_worlds
    new = {"head": np.full((W, G), 3, np.uint8), "sl": np.full((W, S), 3, np.uint8),
           "sl_timer": np.zeros((W, S)), "stage": np.zeros((W, 2 * I), np.int32),
           "phase": np.zeros((W, 2 * I), np.uint8), "timer": np.zeros((W, 2 * I)),
           "barrier": np.zeros((W, I), np.int32), "perm": np.zeros((W, I), np.uint8),
           "tr_d2": np.zeros((W, S)), "tr_idx": np.zeros((W, S), np.int32),
           "lt_d2": np.zeros((W, G)), "lt_idx": np.zeros((W, G), np.int32)}
    if e._sig is not None:
        for k, old in e._sig.items():
            new[k][:, : old.shape[1]] = old
    e._sig = new
    e.s_cap, e.g_cap, e.i_cap = S, G, I
    e.sig_head = <unsigned char*>_ptr_mut(new["head"])
    e.sig_sl = <unsigned char*>_ptr_mut(new["sl"])
    e.sig_sl_timer = <double*>_ptr_mut(new["sl_timer"])
    e.sig_stage = <int*>_ptr_mut(new["stage"])
    e.sig_phase = <unsigned char*>_ptr_mut(new["phase"])
    e.sig_timer = <double*>_ptr_mut(new["timer"])
    e.sig_barrier = <int*>_ptr_mut(new["barrier"])
    e.sig_perm = <unsigned char*>_ptr_mut(new["perm"])
    e.tr_d2 = <double*>_ptr_mut(new["tr_d2"])
    e.tr_idx = <int*>_ptr_mut(new["tr_idx"])
    e.lt_d2 = <double*>_ptr_mut(new["lt_d2"])
    e.lt_idx = <int*>_ptr_mut(new["lt_idx"])

cdef _grow_lane_scratch(Engine e):
    """Per-world scratch of ``lanegraph.lane_graph_distance``, sized for the map in use with the most
    lanes (grown when ``assign_maps`` brings a bigger one; the search leaves it clean between calls)."""
    cdef Py_ssize_t L = max([1] + [(<RoadMap>r).c.n_lanes for r in e.road_maps]), W = e.num_worlds, w
    if L <= e.l_cap and e._lanescratch is not None:
        return
    new = {"pot": np.full((W, L), np.inf), "entry": np.zeros((W, L)), "done": np.zeros((W, L), np.uint8),
           "touched": np.zeros((W, L), np.int32)}
    if e.lg == NULL:
        e.lg = <LaneGraphScratch*>calloc(W, sizeof(LaneGraphScratch))
        if e.lg == NULL:
            raise MemoryError()
    e._lanescratch = new
    e.l_cap = L
    for w in range(W):
        e.lg[w].pot = <double*>_ptr_mut(new["pot"]) + w * L
        e.lg[w].entry = <double*>_ptr_mut(new["entry"]) + w * L
        e.lg[w].done = <unsigned char*>_ptr_mut(new["done"]) + w * L
        e.lg[w].touched = <int*>_ptr_mut(new["touched"]) + w * L

cdef void _sig_state(Engine e, Py_ssize_t w, SigState* st) noexcept nogil:
    st.head = e.sig_head + w * e.g_cap
    st.sl = e.sig_sl + w * e.s_cap
    st.sl_timer = e.sig_sl_timer + w * e.s_cap
    st.stage = e.sig_stage + w * 2 * e.i_cap
    st.phase = e.sig_phase + w * 2 * e.i_cap
    st.timer = e.sig_timer + w * 2 * e.i_cap
    st.barrier = e.sig_barrier + w * e.i_cap
    st.perm = e.sig_perm + w * e.i_cap

cdef _set_stop_line_state(Engine e, int world, int stop_line, int state, double hold):
    if e.sigp.controller != CTRL_CHRISTMAS:
        raise ValueError("set_stop_line_state scripts the Christmas controller only")
    cdef RoadMap rm = e.road_maps[e.world_map[world]]
    if not 0 <= stop_line < rm.c.n_stop_lines or e._sig["sl"][world, stop_line] == 3:
        raise ValueError(f"stop line {stop_line} of world {world} has no signal")
    if state not in (0, 1, 2) or not hold > 0:
        raise ValueError("state must be 0 (red), 1 (yellow) or 2 (green) and hold > 0 seconds")
    e._sig["sl"][world, stop_line] = state
    e._sig["sl_timer"][world, stop_line] = hold
    heads = np.nonzero(np.asarray(rm.map_data.signals.stop_line) == stop_line)[0]
    e._sig["head"][world, heads] = state
