# The batched simulator: W worlds x K controlled slots, stepped without the GIL. Included by
# _engine.pyx. This file owns the Engine class: its fields, construction and buffers, the table and
# layout loading, and the Python API (reset, step, assign_maps, accessors). The work behind the API
# lives in module-level functions taking the engine, one file per concern, included by _engine.pyx
# after this one; docs/design.md ("Where each concept lives") is the one list of them.

cdef enum:
    MAX_GRID = 32          # action values per axis and class


cdef class Engine:
    """Steps ``num_worlds`` worlds, each with up to ``slots_per_world`` policy-controlled slots.

    Buffers (numpy, allocated once, written in place; row ``w * K + k`` is slot k of world w):

    * ``observations`` float32/float16 ``[W*K, obs_dim]`` (layout: ``obs_layout``)
    * ``actions`` int32 ``[W*K]``: an index into the slot's class action grid (``num_actions(cls)``)
    * ``rewards`` float32, ``terminated``/``truncated``/``valid`` bool ``[W*K]``
    * ``agent_type`` int32 ``[W*K]`` (``AgentType``, -1 for an empty slot)
    * ``counters`` int32 ``[W*K, len(COUNTER_NAMES)]``, cumulative since the world's reset.
    * ``episode_metrics`` float32 ``[W*K, len(EPISODE_METRIC_NAMES)]``: per-episode driving metrics
      since the world's reset (metrics.pxd; meanings in ``terrazero_env.evaluation.metrics``).

    ``valid[i]`` is True when slot i held a live controlled agent at the start of the last step (or
    after the last reset): its reward, flags and observation are meaningful. A slot whose agent
    terminated keeps its final observation and is invalid from the next step on.

    Built by the env layer (``terrazero_env.engine.Engine``), which resolves the configuration and
    the maps; the engine imports neither ``terrazero_env.config`` nor ``terrazero_env.maps``:

    * ``settings``: the configuration's scalar settings as a flat dict keyed by dotted names
      (``terrazero_env.engine.engine_settings``), holding exactly the keys of ``ENGINE_SETTINGS``
      (a missing or extra key raises ``ValueError`` naming it);
    * ``road_maps``: a list of :class:`RoadMap`; worlds on one map share it;
    * ``tables``: the config flattened in the engine's column order (``EngineConfig.tables`` called
      with ``REWARD_PARAMS`` and ``CLASS_PARAMS``) plus ``alpha``, the indices into
      ``REWARD_PARAMS`` of the observed reward parameters;
    * ``world_map``: the map index of each world (default: round-robin);
    * ``num_threads``: OpenMP threads stepping worlds in parallel (1: the calling thread only), at
      most four per CPU core.

    One engine serves one Python thread at a time: a method that changes or reads the engine's state
    (``step``, ``reset``, ``set_scene``, ``assign_maps``, ``get_state``, ``set_state``, the signal and
    agent accessors) called while another thread is inside one raises ``RuntimeError`` at once
    instead of racing it (the step releases the GIL). Give each thread its own engine.
    """

    cdef readonly object settings, obs_layout, road_maps, world_map
    cdef readonly object observations, actions, rewards, terminated, truncated, valid, agent_type, counters
    cdef readonly object episode_metrics
    cdef readonly object slot_agent
    cdef readonly int num_worlds, slots_per_world, max_agents, num_threads
    cdef object _buffers, _slot_nact, _tables, _agent_store
    cdef object _scratch                     # per-step scratch outside the engine state (neighbour grid)
    cdef Agent* agents
    cdef Rng* rngs
    cdef MapC** wmap
    cdef const unsigned char** wreach        # per world: its map's track_goal_reachable (appendix D.5)
    cdef int* t
    cdef unsigned char* sig_log              # [W]: 1 where the world replays its map's logged signals
    cdef int* n_agents
    cdef int* grid_head
    cdef int* grid_next
    cdef double* d2buf
    cdef int* idxbuf
    cdef int* nbr_head                       # [W * NBR_BUCKETS] the neighbour grid (neighbours.pxd)
    cdef int* nbr_next                       # [W * A]
    cdef int* nbr_cx                         # [W * A] the cell each agent is filed under
    cdef int* nbr_cy
    cdef int* nbr_cand                       # [W * A] one query's candidates
    cdef int* nbr_peds                       # [W * A] the world's pedestrians
    cdef int* prev_np
    cdef int* prev_nr
    cdef int* prev_nt
    cdef int* slot_of
    cdef int* act
    cdef int* nact
    cdef float* rew
    cdef double* rterms                      # [W * K, N_REWARD_TERMS]: this step's reward by term
    cdef int* sevt                           # [W * K]: this step's events, bits 1 << EVT_*
    cdef unsigned char* term
    cdef unsigned char* trunc
    cdef unsigned char* valid_p
    cdef int* atype
    cdef int* cnt
    cdef float* em
    cdef MetricParams metp
    cdef float* obs_f
    cdef uint16_t* obs_h
    cdef Py_ssize_t obs_dim
    cdef EgoLayout ego
    cdef EntityLayout partners, road, traffic
    cdef SigParams sigp
    cdef IdmParams idmp
    cdef double idm_fraction, idm_fraction_hi   # range of the IDM share (drawn per world at reset)
    cdef double worker_prob_hi               # top of statp.worker_prob's range
    cdef double* mix_draws                   # [W, 3]: this episode's IDM share, worker probability, planner share
    cdef double planner_fraction, planner_fraction_hi   # range of the planner share of IDM vehicles
    cdef double route_blocks, route_block_lo, route_block_hi, route_block_offset  # placement.pxi (_route_blocks)
    cdef double route_block_w[3]  # stopped vehicle, construction zone, crash cluster (relative frequencies)
    cdef PlannerParams planp                 # planner-driven traffic (planner.pxd)
    cdef PlanState* plan                     # [W * max_agents]: per-row planner state (on for planner vehicles)
    cdef PedParams pedp                      # rule-based pedestrians (pedestrians.pxd)
    cdef PedState* ped                       # [W * max_agents]: their per-row state
    cdef long long* ped_stats                # [W, N_PED_STATS]
    cdef double* ped_rates                   # [W, 2]: this episode's crossing and jaywalk rates
    cdef StaticParams statp                  # static-actor generators (static_actors.pxd)
    cdef double ckin_lo[N_CLASSES]           # per-class kinematic coefficient ranges
    cdef double ckin_hi[N_CLASSES]
    cdef StopRules stop_rules
    cdef Py_ssize_t s_cap, g_cap, i_cap      # per-world capacity of the signal-state arrays
    cdef object _sig                         # numpy owners of the signal-state arrays
    cdef object _lanescratch                 # numpy owners of the lane-graph scratch (lg)
    cdef unsigned char* sig_head
    cdef unsigned char* sig_sl
    cdef double* sig_sl_timer
    cdef int* sig_stage
    cdef unsigned char* sig_phase
    cdef double* sig_timer
    cdef int* sig_barrier
    cdef unsigned char* sig_perm
    cdef double* tr_d2
    cdef int* tr_idx
    cdef double* lt_d2                       # traffic-light candidates, per world (g_cap each)
    cdef int* lt_idx
    cdef Py_ssize_t l_cap                    # per-world capacity of the lane-graph scratch (lanes)
    cdef LaneGraphScratch* lg                # per world: scratch of the topology goal distance
    cdef RewardForm rform                    # forms of the velocity-alignment and speed-limit terms
    cdef double cp[N_CLASSES * N_CP]
    cdef double grid_long[N_CLASSES * MAX_GRID]
    cdef double grid_lat[N_CLASSES * MAX_GRID]
    cdef int n_long[N_CLASSES]
    cdef int n_lat[N_CLASSES]
    cdef double rlo[N_CLASSES * N_REWARD]
    cdef double rhi[N_CLASSES * N_REWARD]
    cdef unsigned char ron[N_CLASSES * N_REWARD]
    cdef double class_weight[N_CLASSES]
    cdef unsigned char controlled_cls[N_CLASSES]
    cdef double goal_dropout[N_CLASSES]
    cdef double log_role_w[N_CLASSES * N_LOG_ROLES]  # InitConfig.log_role_table(): weights of each role
    cdef int log_role_only[N_CLASSES]        # the one role of a class with a single non-zero weight, else -1
    cdef double offroad_tol                  # m: EngineConfig.offroad_tolerance
    cdef bint lane_tracking                  # EngineConfig.lane_tracking (rules.lane_state_tracked)
    cdef double dt, wrong_way_angle, lane_max_dist, lane_align_cos, z_gate, agent_cell, noise_std, noise_clip, state_dropout
    cdef int neighbour_mode                   # NEIGHBOURS_* (neighbours.pxd): how neighbour queries are answered
    cdef int horizon, conseq_collision, conseq_offroad, conseq_wrong_way, conseq_red_light, init_mode, goal_behavior
    cdef int n_min, n_max, tries, randomize_kin
    cdef double p_random, v0_lo, v0_hi, goal_lo, goal_hi, goal_fwd, clearance, kin_lo, kin_hi
    cdef double goal_lane_change             # share of first goals moved onto a neighbour lane (placement.pxi)
    cdef bint goal_turnable                  # InitConfig.goal_turnable (placement.pxi, _assign_goal)
    cdef bint _busy                          # a thread is inside a state method (see _enter)

    def __cinit__(self):
        self.agents = NULL
        self.rngs = NULL
        self.wmap = NULL
        self.wreach = NULL
        self.lg = NULL
        self.l_cap = 0
        self._lanescratch = None
        self._buffers = None
        self._scratch = None
        self._busy = False

    def __init__(self, settings, road_maps, tables, world_map=None, num_threads=1):
        self.num_threads = check_num_threads(num_threads)
        _check_settings(settings)
        self.settings = dict(settings)
        s = self.settings
        W, K, A = s["num_worlds"], s["slots_per_world"], s["max_agents_per_world"]
        self.num_worlds, self.slots_per_world, self.max_agents = W, K, A
        o = {k[4:]: v for k, v in s.items() if k.startswith("obs.")}
        self.road_maps = list(road_maps)
        if not self.road_maps or not all(isinstance(r, RoadMap) for r in self.road_maps):
            raise TypeError("road_maps must be a non-empty list of RoadMap objects")
        if world_map is None:
            world_map = np.arange(W) % len(self.road_maps)
        world_map = np.asarray(world_map, np.int64)
        if world_map.shape != (W,) or world_map.min() < 0 or world_map.max() >= len(self.road_maps):
            raise ValueError(f"world_map must be {W} map indices in [0, {len(self.road_maps)})")
        self.world_map = world_map
        _load_tables(self, s, tables)
        alpha = [int(i) for i in tables["alpha"]]
        self.obs_layout = ObsLayout(o, [REWARD_PARAMS[i] for i in alpha])
        _load_obs_layout(self, o, alpha)

        # Agents live in a numpy-owned byte buffer so read-only structured views (``agents``) keep
        # the memory alive on their own.
        self._agent_store = np.zeros(W * A * sizeof(Agent), np.uint8)
        self.agents = <Agent*>_ptr_mut(self._agent_store)
        self.rngs = <Rng*>calloc(W, sizeof(Rng))
        self.wmap = <MapC**>calloc(W, sizeof(MapC*))
        self.wreach = <const unsigned char**>calloc(W, sizeof(unsigned char*))
        if self.rngs == NULL or self.wmap == NULL or self.wreach == NULL:
            raise MemoryError("cannot allocate the engine's world state")
        cdef Py_ssize_t w
        for w in range(W):
            _bind_map(self, w, self.road_maps[world_map[w]])
        _alloc_buffers(self, W, K, A, np.float16 if o["dtype"] == "float16" else np.float32)
        self.s_cap = self.g_cap = self.i_cap = 0
        self._sig = None
        self._ensure_signal_capacity()

    cdef int _enter(self) except -1:
        """Mark the engine busy, or raise if another thread is inside it. Runs with the GIL held and
        calls no Python code between the test and the set, so two threads cannot both pass."""
        if self._busy:
            raise RuntimeError("Engine is being used by another thread: one engine serves one thread at a "
                               "time (give each thread its own engine, or serialize the calls)")
        self._busy = True
        return 0

    cdef _ensure_signal_capacity(self):
        """Per-world signal arrays and lane-graph scratch sized for the largest map in use
        (signal_store.pxi)."""
        _grow_signal_store(self)
        _grow_lane_scratch(self)

    def signal_states(self, int world):
        """Each signal head's state in world ``world`` (0 red, 1 yellow, 2 green), uint8 ``[G]``."""
        _check_world(self, world)
        self._enter()
        try:
            n = (<RoadMap>self.road_maps[self.world_map[world]]).c.n_heads
            return self._sig["head"][world, :n].copy()
        finally:
            self._busy = False

    def stop_line_states(self, int world):
        """Each stop line's state (0 red, 1 yellow, 2 green, 3 no signal), uint8 ``[S]``."""
        _check_world(self, world)
        self._enter()
        try:
            n = (<RoadMap>self.road_maps[self.world_map[world]]).c.n_stop_lines
            return self._sig["sl"][world, :n].copy()
        finally:
            self._busy = False

    def set_stop_line_state(self, int world, int stop_line, int state, double hold):
        """Script one stop line under the Christmas controller: show ``state`` (0 red, 1 yellow,
        2 green) for ``hold`` seconds, then resume cycling. For tests and scripted scenarios."""
        _check_world(self, world)
        self._enter()
        try:
            _set_stop_line_state(self, world, stop_line, state, hold)
        finally:
            self._busy = False

    def __dealloc__(self):
        free(self.rngs)
        free(self.wmap)
        free(self.wreach)
        free(self.lg)

    @property
    def pedestrian_stats(self):
        """Per-world counters of the pedestrian generators since each world's reset, int64
        ``[W, len(PEDESTRIAN_STATS)]`` (a read-only view; columns named by ``PEDESTRIAN_STATS``)."""
        v = self._buffers["ped_stats"].view()
        v.flags.writeable = False
        return v

    @property
    def episode_mix(self):
        """Per-world shares of this episode, float64 ``[W, 3]``: the IDM share of background vehicles,
        the probability that a construction zone has workers and the planner share of the IDM
        vehicles, each drawn at the world's reset from its configured range
        (``RoadUsersConfig.idm_fraction`` / ``worker_prob`` / ``planner_fraction``; a read-only view)."""
        v = self._buffers["mix_draws"].view()
        v.flags.writeable = False
        return v

    @property
    def pedestrian_rates(self):
        """Per-world Poisson rates of this episode, float64 ``[W, 2]``: crossing events per crosswalk
        per second and jaywalkers per world per second, each drawn at the world's reset from its
        configured range (``PedestrianConfig.crossing_rate`` / ``jaywalk_rate``; a read-only view)."""
        v = self._buffers["ped_rates"].view()
        v.flags.writeable = False
        return v
    # ----------------------------------------------------------------------------------------- API

    @property
    def obs_dim(self):
        return self.obs_dim

    def num_actions(self, cls):
        """Size of the action grid of an agent class (``AgentType``)."""
        c = int(cls)
        if not 0 <= c < N_CLASSES:
            raise ValueError(f"unknown agent type {cls!r}: expected 0..{N_CLASSES - 1}")
        return self.n_long[c] * self.n_lat[c]

    def action_values(self, cls):
        """The (longitudinal, lateral) pair behind each action index of a class, float64 ``[n, 2]``."""
        self.num_actions(cls)
        c = int(cls)
        return np.array([[self.grid_long[c * MAX_GRID + i // self.n_lat[c]], self.grid_lat[c * MAX_GRID + i % self.n_lat[c]]]
                         for i in range(self.n_long[c] * self.n_lat[c])])

    def reset(self, world_ids=None, seeds=None):
        """Reset the named worlds (all when None) with the given seeds, integers in [0, 2**64)
        (default: the world index). Other worlds are untouched. Bad ids or seeds raise before any
        world changes. Interruptible: a pending KeyboardInterrupt (Ctrl-C) is raised between worlds;
        the worlds reset until then are reset, the others untouched."""
        self._enter()
        try:
            return self._reset(world_ids, seeds)
        finally:
            self._busy = False

    cdef _reset(self, world_ids, seeds):
        W = self.num_worlds
        ids = np.arange(W) if world_ids is None else np.atleast_1d(np.asarray(world_ids))
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise ValueError(f"world_ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= W):
            raise ValueError(f"world_ids must lie in [0, {W}), got {ids.tolist()}")
        if np.unique(ids).size != ids.size:
            raise ValueError(f"world_ids must name each world once, got {ids.tolist()}")
        sd = ids.astype(np.uint64) if seeds is None else check_seeds(seeds, ids.shape[0])
        cdef long long[::1] idv = np.ascontiguousarray(ids, np.int64)
        cdef unsigned long long[::1] sv = np.ascontiguousarray(sd, np.uint64)
        cdef Py_ssize_t k, n = idv.shape[0]
        for k in range(n):
            with nogil:
                _reset_world(self, idv[k], sv[k])
            if k + 1 < n:
                PyErr_CheckSignals()  # between worlds, with the GIL: Ctrl-C stops a long reset

    def step(self, actions=None):
        """Advance every world by dt. ``actions`` (optional): int ``[W*K]`` copied into the actions
        buffer; otherwise the buffer as it stands is used. Raises ValueError before any state
        changes on a wrong shape or dtype or an index outside a live slot's action grid."""
        self._enter()
        try:
            return self._step(actions)
        finally:
            self._busy = False

    cdef _step(self, actions):
        a = self.actions if actions is None else np.asarray(actions)
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers (int32), got dtype {a.dtype}")
        if a.shape != self.actions.shape:
            raise ValueError(f"actions must have shape {self.actions.shape}, got {a.shape}")
        # Only slots whose agent is live and controlled now read an action (nact > 0).
        nact = self._slot_nact
        bad = (nact > 0) & ((a < 0) | (a >= nact))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"action {int(a[i])} out of range for slot {i} "
                             f"(agent type {int(self.agent_type[i])} has actions 0..{int(nact[i]) - 1})")
        if actions is not None:
            self.actions[:] = a
        cdef Py_ssize_t w
        cdef int nt = self.num_threads
        if nt == 1:
            with nogil:
                for w in range(self.num_worlds):
                    _step_world(self, w)
        else:
            # Worlds are independent (own agents, generator and scratch), so any thread may step any
            # world and the result does not depend on the thread count.
            for w in prange(self.num_worlds, nogil=True, num_threads=nt, schedule="static"):
                _step_world(self, w)

    def assign_maps(self, world_ids, road_maps):
        """Put worlds on other maps (``RoadMap`` objects; e.g. drawn from a ``Dataset``) before
        resetting them. Maps no world uses any more are released."""
        self._enter()
        try:
            return self._assign_maps(world_ids, road_maps)
        finally:
            self._busy = False

    cdef _assign_maps(self, world_ids, road_maps):
        ids = np.atleast_1d(np.asarray(world_ids, np.int64))
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_worlds):
            raise ValueError(f"world_ids must lie in [0, {self.num_worlds})")
        if len(road_maps) != ids.shape[0]:
            raise ValueError(f"one RoadMap per world id: {ids.shape[0]} ids, {len(road_maps)} maps")
        for rm_obj in road_maps:
            if not isinstance(rm_obj, RoadMap):
                raise TypeError(f"expected RoadMap objects, got {type(rm_obj).__name__}")
        in_use = [self.road_maps[i] for i in self.world_map]
        for w, rm_obj in zip(ids, road_maps):
            in_use[int(w)] = rm_obj
        unique = []
        for m in in_use:
            if not any(m is u for u in unique):
                unique.append(m)
        self.road_maps = unique
        self.world_map = np.array([next(k for k, u in enumerate(unique) if u is m) for m in in_use], np.int64)
        self._ensure_signal_capacity()
        cdef Py_ssize_t w_i
        for w_i in range(self.num_worlds):
            _bind_map(self, w_i, self.road_maps[self.world_map[w_i]])

    def get_state(self):
        """A copy of everything that evolves between resets and steps (agents, per-world random
        generators, step counts, output buffers, signal timers), as a dict of NumPy arrays.
        ``set_state`` on an engine built with the same config and maps continues bit for bit."""
        self._enter()
        try:
            return _get_state(self)
        finally:
            self._busy = False

    def set_state(self, state):
        """Restore a ``get_state`` snapshot in place. The engine must have the same shapes and maps
        (same config); a mismatch raises ValueError naming the entry, before anything changes."""
        self._enter()
        try:
            return _set_state(self, state)
        finally:
            self._busy = False

    @property
    def world_steps(self):
        """Steps since each world's reset, int32 ``[W]`` (a view)."""
        return self._buffers["t"]

    def num_agents(self, int world):
        """Agents (of every role) in world ``world`` now."""
        _check_world(self, world)
        return int(self._buffers["n_agents"][world])

    def buffer_nbytes(self):
        """Bytes of per-world state and buffers (excluding the shared maps), per world."""
        own = sum(a.nbytes for a in self._buffers.values()) + sum(a.nbytes for a in self._scratch.values())
        own += self.num_worlds * self.max_agents * sizeof(Agent) + self.num_worlds * sizeof(Rng)
        return own / self.num_worlds

    def agent_states(self, int world):
        """A copy of world ``world``'s agents as a dict of arrays (for inspection and rendering);
        ``log_index`` is the logged track an agent of a log scene started from, -1 for others."""
        self._enter()
        try:
            return _agent_states(self, world)
        finally:
            self._busy = False

    @property
    def agents(self):
        """Read-only structured view ``[W, max_agents]`` of every agent slot in every world (zero
        copy; rows past ``n_agents[w]`` are unused). Fields (metres, radians, m/s): ``x y z heading
        speed length width height goal_x goal_y`` (float64), ``cls`` (AgentType), ``role``
        (``ROLES``: 0 policy, 1 static, 2 log replay, 3 IDM, 4 crosswalk crosser, 5 jaywalker), ``slot`` (controlled slot or -1), ``alive``, and this
        step's flags ``collided offroad wrong_way red_light ran_stop_line goal_reached`` (int32)."""
        return _agents_view(self)

    @property
    def reward_terms(self):
        """This step's reward of every slot by term, float64 ``[W * K, len(REWARD_TERMS)]`` (a read-only
        view; rows of slots not judged this step are 0). The terms are added in column order:
        ``rewards == float32(float32(sum of all but the last column, left to right) + float32(last))``
        bit for bit (``terrazero_env.replay.reward_from_terms``)."""
        v = self._buffers["reward_terms"].view()
        v.flags.writeable = False
        return v

    @property
    def step_events(self):
        """This step's events of every slot, int32 ``[W * K]`` bits ``1 << i`` for the i-th name of
        ``STEP_EVENTS`` (goal, collision, off-road, wrong way, stop sign run, red light, pedestrian
        incursion, comfort); 0 for slots not judged this step. A read-only view."""
        v = self._buffers["step_events"].view()
        v.flags.writeable = False
        return v

    def replay_frame(self, int world):
        """World ``world``'s agents now, for a replay (``terrazero_env.replay``): ``[n_agents]`` arrays
        ``x y heading speed a_long a_lat length width`` (float64; metres, radians, m/s, m/s^2), ``cls``,
        ``kind`` (``STATIC_KINDS``), ``mover`` (``MOVERS``: who moves it), ``alive`` (int8), ``slot``,
        ``events`` (``step_events`` bits: a judged slot's own; an IDM vehicle's collision, red light
        and stop sign) and ``partner`` (the lowest-index agent a collision overlaps, -1) (int32)."""
        self._enter()
        try:
            return _replay_frame(self, world)
        finally:
            self._busy = False

    def planner_state(self, int world):
        """A copy of world ``world``'s planner state, per agent row (``[n_agents]`` arrays; planner.pxd):
        ``planner`` (bool, a planner-driven IDM vehicle), ``speed_factor`` (its plan's target speed as a
        fraction of the speed limit), ``lat_off`` (its plan's offset from its lane's centre, m, left
        positive), ``choice`` (the winning proposal, offset index * number of speeds + speed index in
        the configured order after sorting offsets by size and speeds fastest first; -1 before its
        first plan), ``score``, and the counters since the reset ``replans``, ``lane_changes``,
        ``all_vetoed`` (int64)."""
        self._enter()
        try:
            return _planner_state(self, world)
        finally:
            self._busy = False

    @property
    def n_agents_per_world(self):
        """Agents placed in each world, int32 ``[W]`` (a read-only view)."""
        v = self._buffers["n_agents"].view()
        v.flags.writeable = False
        return v

    def set_scene(self, world, agents, seed=0):
        """Replace world ``world``'s scene with the given agents (for tests and scripted scenarios).

        ``agents``: a list of dicts with keys ``cls`` (AgentType), ``x``, ``y``, ``heading`` and
        optionally ``z``, ``speed``, ``steer`` (steering angle, rad, within the class's range; 0),
        ``length``, ``width``, ``height``, ``controlled`` (default True
        for classes the config controls), ``idm`` (a rule-based IDM vehicle; ``idm_mode`` 0 default,
        1 assertive, 2 cautious; ``planner`` True makes it planner-driven, planner.pxd), ``kind`` (a static
        actor's ``StaticKind``), ``goal`` ((x, y)), ``goal_hidden``,
        ``kin`` (4 values),
        ``rw`` ({reward parameter name: value}). Unspecified reward parameters are sampled as at reset.
        ``seed``: an integer in [0, 2**64) for the world's generator.

        Every spec is checked (keys, types, finite numbers, positive dimensions, ranges, an IDM
        vehicle on a lane) before the world is cleared: a rejected scene raises TypeError or
        ValueError naming ``agents[i].key`` and leaves the engine as it was.
        """
        if isinstance(world, (bool, np.bool_)) or not isinstance(world, (int, np.integer)):
            raise TypeError(f"world must be an integer, got {type(world).__name__} {world!r}")
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds}), got {world}")
        s = check_engine_seed(seed)
        self._enter()
        try:
            _set_scene(self, int(world), agents, s)
        finally:
            self._busy = False

    def reference_actions(self, out=None, **settings):
        """The reference driver's action for every slot (``reference.pxd``): int32 ``[W * K]``, one
        index of the slot's class grid for each slot that reads an action now (0 elsewhere), written
        into ``out`` when given (a C-contiguous int32 array of that shape). It drives each controlled
        agent through its own dynamics and grid along the lane-graph route to its goal, with the IDM
        law and the rule-based vehicles' constraints for speed and pure pursuit for steering. Settings
        (keyword arguments, values of ours; ``_engine._REFERENCE_SETTINGS`` holds each one's default,
        bounds and unit): ``preview`` (s, 0.3), ``goal_speed`` (m/s, 2.0), ``goal_decel`` (m/s^2,
        1.0), ``action_price`` (0.05), ``comfort_price`` (100.0), ``walk_speed`` (m/s, 1.2),
        ``lane_angle`` (rad, 0.6), ``horizon`` (s, 2.5), ``curve_accel`` (m/s^2, 2.0), ``curve_full_radius`` (m, 25.0; 0: off), ``turn_in`` (m,
        3.0), ``accel_tau`` (s, 0.5), ``steer_tolerance`` (rad, 0.05), the passing settings and
        ``swept_path`` (m, 1.5), ``swept_margin`` (m, 0.2). Reads the engine's state and
        changes none of it."""
        s = _reference_settings(settings)
        self._enter()
        try:
            return _reference_actions(self, out, s)
        finally:
            self._busy = False

    def reference_plan(self, int world, **settings):
        """What the reference driver decides for each slot of ``world`` now, as ``[K]`` arrays: the
        ``lane`` its route starts on and its arc length ``lane_s`` (m), the ``route_lane`` after it,
        ``sweep_points`` (poses predicted along the route), the asked-for ``accel`` (m/s^2) and
        ``steer`` (rad), the desired speed ``v0`` (m/s), the ``gap`` to the nearest constraint (m),
        the agent row of that constraint (``leader``, -1 for a stopping point or none), the lateral
        offset from the route lane's centre it drives at (``lat_off``, m, + left: a pass) and the
        ``action``; -1 or NaN for slots it does not drive. Settings as ``reference_actions``."""
        s = _reference_settings(settings)
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds}), got {world}")
        self._enter()
        try:
            return _reference_plan(self, world, s)
        finally:
            self._busy = False

    def set_ego_driver(self, worlds, slots, mode, int idm_mode=0):
        """Drive the controlled agents of the given (world, slot) pairs by a rule-based law from now
        until their world's next reset: ``mode`` ``"idm"`` (the IDM vehicle law, ``roadusers.pxd``) or
        ``"planner"`` (the planner traffic's logic, ``planner.pxd``), along the lane-graph route to the
        agent's goal, with its own kinematics rather than the class's action grid. The agents stay
        controlled: rules, rewards, counters and episode metrics are measured as for a policy's; their
        actions are no longer read (``terrazero_env.drivers``: the baseline egos). Each pair must hold
        a live controlled car, truck or bus on a lane; a bad pair raises ValueError before any change."""
        self._enter()
        try:
            _set_ego_driver_checked(self, worlds, slots, mode, idm_mode)
        finally:
            self._busy = False

    def hand_to_idm(self, worlds, slots, int idm_mode=0):
        """Hand slot ``slots[j]`` of world ``worlds[j]`` (integers or equal-length 1-D integer arrays) to
        the rule-based IDM driver (behaviour mode ``idm_mode``: 0 default, 1 assertive, 2 cautious) at its
        agent's present pose and speed, on the lane under it. The slot is no longer valid and reads no
        action; its ``episode_metrics`` row is cleared and then accumulates the IDM driver's steps,
        distance, progress along the lane under it and the posted-limit reference (handover.pxi).
        Every pair is checked before any changes: a slot without a live controlled car, truck or bus on
        a lane raises ValueError naming it."""
        self._enter()
        try:
            _hand_over_checked(self, worlds, slots, idm_mode)
        finally:
            self._busy = False


cdef _check_world(Engine e, Py_ssize_t world):
    """A world index of an accessor: in [0, num_worlds); a negative one does not count from the end."""
    if not 0 <= world < e.num_worlds:
        raise ValueError(f"world must lie in [0, {e.num_worlds}), got {world}")


cdef void* _ptr_mut(a):
    """Data pointer of a C-contiguous numpy array we own."""
    cdef cnp.ndarray arr = a
    return cnp.PyArray_DATA(arr)

