# The batched simulator: W worlds x K controlled slots, stepped without the GIL.
# Included by _engine.pyx. Step order per world (fixed): dynamics -> log replay -> agent grid ->
# rules (collision, off-road, lane, wrong way, comfort, goal) -> reward -> consequences ->
# truncation -> observations.

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

    ``valid[i]`` is True when slot i held a live controlled agent at the start of the last step (or
    after the last reset): its reward, flags and observation are meaningful. A slot whose agent
    terminated keeps its final observation and is invalid from the next step on.

    Built by the env layer (``terrazero_env.engine.Engine``), which resolves the configuration and
    the maps; the engine imports neither ``terrazero_env.config`` nor ``terrazero_env.maps``:

    * ``config``: an ``EngineConfig`` (read for its scalar settings);
    * ``road_maps``: a list of :class:`RoadMap`; worlds on one map share it;
    * ``tables``: the config flattened in the engine's column order (``EngineConfig.tables`` called
      with ``REWARD_PARAMS`` and ``CLASS_PARAMS``) plus ``alpha``, the indices into
      ``REWARD_PARAMS`` of the observed reward parameters;
    * ``world_map``: the map index of each world (default: round-robin);
    * ``num_threads``: OpenMP threads stepping worlds in parallel (1: the calling thread only).
    """

    cdef readonly object config, obs_layout, road_maps, world_map
    cdef readonly object observations, actions, rewards, terminated, truncated, valid, agent_type, counters
    cdef readonly object slot_agent
    cdef readonly int num_worlds, slots_per_world, max_agents, num_threads
    cdef object _buffers, _slot_nact, _tables, _agent_store
    cdef Agent* agents
    cdef Rng* rngs
    cdef MapC** wmap
    cdef int* t
    cdef int* n_agents
    cdef int* grid_head
    cdef int* grid_next
    cdef double* d2buf
    cdef int* idxbuf
    cdef int* prev_np
    cdef int* prev_nr
    cdef int* prev_nt
    cdef int* slot_of
    cdef int* act
    cdef int* nact
    cdef float* rew
    cdef unsigned char* term
    cdef unsigned char* trunc
    cdef unsigned char* valid_p
    cdef int* atype
    cdef int* cnt
    cdef float* obs_f
    cdef uint16_t* obs_h
    cdef Py_ssize_t obs_dim
    cdef EgoLayout ego
    cdef EntityLayout partners, road, traffic
    cdef SigParams sigp
    cdef IdmParams idmp
    cdef double idm_fraction
    cdef StopRules stop_rules
    cdef Py_ssize_t s_cap, g_cap, i_cap      # per-world capacity of the signal-state arrays
    cdef object _sig                         # numpy owners of the signal-state arrays
    cdef unsigned char* sig_head
    cdef unsigned char* sig_sl
    cdef double* sig_sl_timer
    cdef int* sig_stage
    cdef unsigned char* sig_phase
    cdef double* sig_timer
    cdef unsigned char* sig_perm
    cdef double* tr_d2
    cdef int* tr_idx
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
    cdef double dt, wrong_way_angle, lane_max_dist, z_gate, agent_cell, noise_std, noise_clip, state_dropout
    cdef int horizon, conseq_collision, conseq_offroad, conseq_wrong_way, init_mode, goal_behavior
    cdef int n_min, n_max, tries, randomize_kin
    cdef double p_random, v0_lo, v0_hi, goal_lo, goal_hi, goal_fwd, clearance, kin_lo, kin_hi

    def __cinit__(self):
        self.agents = NULL
        self.rngs = NULL
        self.wmap = NULL
        self._buffers = None

    def __init__(self, config, road_maps, tables, world_map=None, int num_threads=1):
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self.num_threads = num_threads
        self.config = config
        W, K, A = config.num_worlds, config.slots_per_world, config.max_agents_per_world
        self.num_worlds, self.slots_per_world, self.max_agents = W, K, A
        o = config.obs
        self.road_maps = list(road_maps)
        if not self.road_maps or not all(isinstance(r, RoadMap) for r in self.road_maps):
            raise TypeError("road_maps must be a non-empty list of RoadMap objects")
        if world_map is None:
            world_map = np.arange(W) % len(self.road_maps)
        world_map = np.asarray(world_map, np.int64)
        if world_map.shape != (W,) or world_map.min() < 0 or world_map.max() >= len(self.road_maps):
            raise ValueError(f"world_map must be {W} map indices in [0, {len(self.road_maps)})")
        self.world_map = world_map
        self._load_tables(config, tables)
        alpha = [int(i) for i in tables["alpha"]]
        self.obs_layout = ObsLayout(o, [REWARD_PARAMS[i] for i in alpha])
        self._set_obs_layout(o, alpha)

        # Agents live in a numpy-owned byte buffer so read-only structured views (``agents``) keep
        # the memory alive on their own.
        self._agent_store = np.zeros(W * A * sizeof(Agent), np.uint8)
        self.agents = <Agent*>_ptr_mut(self._agent_store)
        self.rngs = <Rng*>calloc(W, sizeof(Rng))
        self.wmap = <MapC**>calloc(W, sizeof(MapC*))
        if self.rngs == NULL or self.wmap == NULL:
            raise MemoryError("cannot allocate the engine's world state")
        cdef RoadMap rm
        cdef Py_ssize_t w
        for w in range(W):
            rm = self.road_maps[world_map[w]]
            self.wmap[w] = &rm.c
        dtype = np.float16 if o.dtype == "float16" else np.float32
        b = {
            "observations": np.zeros((W * K, self.obs_dim), dtype),
            "actions": np.zeros(W * K, np.int32),
            "rewards": np.zeros(W * K, np.float32),
            "terminated": np.zeros(W * K, np.bool_),
            "truncated": np.zeros(W * K, np.bool_),
            "valid": np.zeros(W * K, np.bool_),
            "agent_type": np.full(W * K, -1, np.int32),
            "counters": np.zeros((W * K, N_COUNTERS), np.int32),
            "slot_agent": np.full(W * K, -1, np.int32),
            "slot_nact": np.zeros(W * K, np.int32),
            "t": np.zeros(W, np.int32),
            "n_agents": np.zeros(W, np.int32),
            "grid_head": np.zeros(W * AGENT_BUCKETS, np.int32),
            "grid_next": np.zeros(W * A, np.int32),
            "d2buf": np.zeros(W * A, np.float64),
            "idxbuf": np.zeros(W * A, np.int32),
            "prev_np": np.zeros(W * K, np.int32),
            "prev_nr": np.zeros(W * K, np.int32),
        }
        self._buffers = b
        self.observations, self.actions, self.rewards = b["observations"], b["actions"], b["rewards"]
        self.terminated, self.truncated, self.valid = b["terminated"], b["truncated"], b["valid"]
        self.agent_type, self.counters, self.slot_agent = b["agent_type"], b["counters"], b["slot_agent"]
        self._slot_nact = b["slot_nact"]
        self.obs_f = <float*>_ptr_mut(b["observations"]) if dtype == np.float32 else NULL
        self.obs_h = <uint16_t*>_ptr_mut(b["observations"]) if dtype == np.float16 else NULL
        self.act = <int*>_ptr_mut(b["actions"])
        self.nact = <int*>_ptr_mut(b["slot_nact"])
        self.rew = <float*>_ptr_mut(b["rewards"])
        self.term = <unsigned char*>_ptr_mut(b["terminated"])
        self.trunc = <unsigned char*>_ptr_mut(b["truncated"])
        self.valid_p = <unsigned char*>_ptr_mut(b["valid"])
        self.atype = <int*>_ptr_mut(b["agent_type"])
        self.cnt = <int*>_ptr_mut(b["counters"])
        self.slot_of = <int*>_ptr_mut(b["slot_agent"])
        self.t = <int*>_ptr_mut(b["t"])
        self.n_agents = <int*>_ptr_mut(b["n_agents"])
        self.grid_head = <int*>_ptr_mut(b["grid_head"])
        self.grid_next = <int*>_ptr_mut(b["grid_next"])
        self.d2buf = <double*>_ptr_mut(b["d2buf"])
        self.idxbuf = <int*>_ptr_mut(b["idxbuf"])
        self.prev_np = <int*>_ptr_mut(b["prev_np"])
        self.prev_nr = <int*>_ptr_mut(b["prev_nr"])
        b["prev_nt"] = np.zeros(W * K, np.int32)
        self.prev_nt = <int*>_ptr_mut(b["prev_nt"])
        self.s_cap = self.g_cap = self.i_cap = 0
        self._sig = None
        self._ensure_signal_capacity()

    cdef _ensure_signal_capacity(self):
        """Per-world signal arrays sized for the largest map in use (grown, keeping their content,
        when a bigger map arrives through ``assign_maps``)."""
        cdef RoadMap rm
        S = max([1] + [(<RoadMap>r).c.n_stop_lines for r in self.road_maps])
        G = max([1] + [(<RoadMap>r).c.n_heads for r in self.road_maps])
        I = max([1] + [(<RoadMap>r).c.n_inter for r in self.road_maps])
        if S <= self.s_cap and G <= self.g_cap and I <= self.i_cap and self._sig is not None:
            return
        S, G, I = max(S, self.s_cap), max(G, self.g_cap), max(I, self.i_cap)
        W = self.num_worlds
        new = {"head": np.full((W, G), 3, np.uint8), "sl": np.full((W, S), 3, np.uint8),
               "sl_timer": np.zeros((W, S)), "stage": np.zeros((W, I), np.int32),
               "phase": np.zeros((W, I), np.uint8), "timer": np.zeros((W, I)), "perm": np.zeros((W, I), np.uint8),
               "tr_d2": np.zeros((W, S)), "tr_idx": np.zeros((W, S), np.int32)}
        if self._sig is not None:
            for k, old in self._sig.items():
                new[k][:, : old.shape[1]] = old
        self._sig = new
        self.s_cap, self.g_cap, self.i_cap = S, G, I
        self.sig_head = <unsigned char*>_ptr_mut(new["head"])
        self.sig_sl = <unsigned char*>_ptr_mut(new["sl"])
        self.sig_sl_timer = <double*>_ptr_mut(new["sl_timer"])
        self.sig_stage = <int*>_ptr_mut(new["stage"])
        self.sig_phase = <unsigned char*>_ptr_mut(new["phase"])
        self.sig_timer = <double*>_ptr_mut(new["timer"])
        self.sig_perm = <unsigned char*>_ptr_mut(new["perm"])
        self.tr_d2 = <double*>_ptr_mut(new["tr_d2"])
        self.tr_idx = <int*>_ptr_mut(new["tr_idx"])

    cdef void _sig_state(self, Py_ssize_t w, SigState* st) noexcept nogil:
        st.head = self.sig_head + w * self.g_cap
        st.sl = self.sig_sl + w * self.s_cap
        st.sl_timer = self.sig_sl_timer + w * self.s_cap
        st.stage = self.sig_stage + w * self.i_cap
        st.phase = self.sig_phase + w * self.i_cap
        st.timer = self.sig_timer + w * self.i_cap
        st.perm = self.sig_perm + w * self.i_cap

    def signal_states(self, int world):
        """Each signal head's state in world ``world`` (0 red, 1 yellow, 2 green), uint8 ``[G]``."""
        n = (<RoadMap>self.road_maps[self.world_map[world]]).c.n_heads
        return self._sig["head"][world, :n].copy()

    def stop_line_states(self, int world):
        """Each stop line's state (0 red, 1 yellow, 2 green, 3 no signal), uint8 ``[S]``."""
        n = (<RoadMap>self.road_maps[self.world_map[world]]).c.n_stop_lines
        return self._sig["sl"][world, :n].copy()

    def set_stop_line_state(self, int world, int stop_line, int state, double hold):
        """Script one stop line under the Christmas controller: show ``state`` (0 red, 1 yellow,
        2 green) for ``hold`` seconds, then resume cycling. For tests and scripted scenarios."""
        if self.config.signals.controller != CTRL_CHRISTMAS:
            raise ValueError("set_stop_line_state scripts the Christmas controller only")
        cdef RoadMap rm = self.road_maps[self.world_map[world]]
        if not 0 <= stop_line < rm.c.n_stop_lines or self._sig["sl"][world, stop_line] == 3:
            raise ValueError(f"stop line {stop_line} of world {world} has no signal")
        if state not in (0, 1, 2) or not hold > 0:
            raise ValueError("state must be 0 (red), 1 (yellow) or 2 (green) and hold > 0 seconds")
        self._sig["sl"][world, stop_line] = state
        self._sig["sl_timer"][world, stop_line] = hold
        heads = np.nonzero(np.asarray(rm.map_data.signals.stop_line) == stop_line)[0]
        self._sig["head"][world, heads] = state

    def __dealloc__(self):
        free(self.rngs)
        free(self.wmap)

    cdef _load_tables(self, cfg, tb):
        for key, cols in (("class_params", N_CP), ("reward_lo", N_REWARD), ("reward_hi", N_REWARD),
                          ("reward_on", N_REWARD)):
            if np.shape(tb[key]) != (N_CLASSES, cols):
                raise ValueError(f"tables[{key!r}] must be [{N_CLASSES}, {cols}], got {np.shape(tb[key])}")
        self._tables = tb
        cdef int c, i
        if tb["grid_long"].shape[1] > MAX_GRID or tb["grid_lat"].shape[1] > MAX_GRID:
            raise ValueError(f"action grids are limited to {MAX_GRID} values per axis")
        for c in range(N_CLASSES):
            self.n_long[c] = tb["n_long"][c]
            self.n_lat[c] = tb["n_lat"][c]
            for i in range(MAX_GRID):
                self.grid_long[c * MAX_GRID + i] = tb["grid_long"][c, i] if i < tb["grid_long"].shape[1] else 0.0
                self.grid_lat[c * MAX_GRID + i] = tb["grid_lat"][c, i] if i < tb["grid_lat"].shape[1] else 0.0
            for i in range(N_CP):
                self.cp[c * N_CP + i] = tb["class_params"][c, i]
            for i in range(N_REWARD):
                self.rlo[c * N_REWARD + i] = tb["reward_lo"][c, i]
                self.rhi[c * N_REWARD + i] = tb["reward_hi"][c, i]
                self.ron[c * N_REWARD + i] = tb["reward_on"][c, i]
            self.class_weight[c] = cfg.init.class_weights[c]
            self.controlled_cls[c] = 1 if cfg.init.controlled[c] else 0
            self.goal_dropout[c] = cfg.init.goal_dropout[c]
        # Agent-grid cells must exceed the sum of two half-diagonals plus the spawn clearance.
        longest = max(max(s.length[1], s.width[1]) * 1.5 for s in cfg.classes.values())
        self.agent_cell = max(16.0, 2.0 * longest + 2.0 * cfg.init.spawn_clearance + 1.0)
        self.dt = cfg.dt
        self.horizon = cfg.episode_length
        self.wrong_way_angle = cfg.wrong_way_angle
        self.lane_max_dist = cfg.lane_max_distance
        self.z_gate = cfg.obs.z_gate
        cq = {k: int(v) for k, v in cfg.consequences.items()}
        self.conseq_collision = cq.get("collision", CONSEQ_NONE)
        self.conseq_offroad = cq.get("offroad", CONSEQ_NONE)
        self.conseq_wrong_way = cq.get("wrong_way", CONSEQ_NONE)
        ini = cfg.init
        self.init_mode = int(ini.mode)
        self.goal_behavior = int(ini.goal_behavior)
        self.n_min, self.n_max = ini.num_agents
        self.tries = ini.placement_tries
        self.randomize_kin = 1 if ini.randomize_kinematics else 0
        self.p_random = ini.p_random
        self.v0_lo, self.v0_hi = ini.initial_speed
        self.goal_lo, self.goal_hi = ini.goal_distance
        self.goal_fwd = ini.goal_min_forward
        self.clearance = ini.spawn_clearance
        self.kin_lo, self.kin_hi = ini.kinematic_range
        idm = cfg.idm
        for k in range(3):
            self.idmp.v0_scale[k] = idm.v0_scale[k]
            self.idmp.time_headway[k] = idm.time_headway[k]
            self.idmp.max_accel[k] = idm.max_accel[k]
            self.idmp.comfort_decel[k] = idm.comfort_decel[k]
            self.idmp.min_gap[k] = idm.min_gap[k]
        self.idmp.delta = idm.delta
        self.idmp.lookahead = idm.lookahead
        self.idmp.reroll_prob = idm.reroll_prob
        self.idmp.max_decel = idm.max_decel
        self.idmp.curve_accel = idm.curve_lat_accel
        self.idmp.side_margin = idm.side_margin
        self.idm_fraction = ini.idm_fraction
        sg = cfg.signals
        self.sigp.controller = int(sg.controller)
        self.sigp.green_med, self.sigp.green_sig = sg.christmas_green
        self.sigp.yellow_med, self.sigp.yellow_sig = sg.christmas_yellow
        self.sigp.red_med, self.sigp.red_sig = sg.christmas_red
        self.sigp.left_green = sg.left_green
        self.sigp.through_green = sg.through_green
        self.sigp.yellow = sg.yellow
        self.sigp.all_red = sg.all_red
        self.sigp.perm_prob = sg.permissive_left_prob
        self.stop_rules.stop_speed = sg.stop_speed
        self.stop_rules.dwell_lo, self.stop_rules.dwell_hi = sg.stop_dwell
        self.stop_rules.region = sg.stop_region
        self.noise_std = cfg.obs.noise_std
        self.noise_clip = cfg.obs.noise_clip
        self.state_dropout = cfg.obs.state_dropout

    cdef _set_obs_layout(self, o, alpha):
        cdef EgoLayout* e = &self.ego
        L = self.obs_layout
        self.obs_dim = L.dim
        ego = {n: off for n, off, w in L.groups["ego"].features}
        e.agent_type = ego.get("agent_type", -1)
        e.rel_goal_pos = ego.get("rel_goal_pos", -1)
        e.goal_dropout_flag = ego.get("goal_dropout_flag", -1)
        e.state_dropout_flag = ego.get("state_dropout_flag", -1)
        e.speed = ego.get("speed", -1)
        e.vehicle_dims = ego.get("vehicle_dims", -1)
        e.collision_state = ego.get("collision_state", -1)
        e.steering_angle = ego.get("steering_angle", -1)
        e.acceleration = ego.get("acceleration", -1)
        e.stop_sign_state = ego.get("stop_sign_state", -1)
        e.alpha_params = ego.get("alpha_params", -1)
        e.kinematic_params = ego.get("kinematic_params", -1)
        e.lane_state = ego.get("lane_state", -1)
        e.n_alpha = len(alpha)
        for k, i in enumerate(alpha):
            e.alpha_idx[k] = i
        e.kin_lo, e.kin_hi = self.config.init.kinematic_range
        nm = L.normalisers
        e.n.position_scale = nm["position_scale"]
        e.n.height_scale = nm["height_scale"]
        e.n.goal_scale = nm["goal_scale"]
        e.n.speed_scale = nm["speed_scale"]
        e.n.width_range = nm["width_range"]
        e.n.length_range = nm["length_range"]
        e.n.steer_range = nm["steer_range"]
        e.n.accel_long_range = nm["accel_long_range"]
        e.n.accel_lat_range = nm["accel_lat_range"]
        e.n.lane_heading_range = nm["lane_heading_range"]
        e.n.lane_lateral_range = nm["lane_lateral_range"]
        e.n.segment_range = nm["segment_range"]
        self._entity_layout(&self.partners, L.groups.get("partners"), o.partner_radius, o)
        self._entity_layout(&self.road, L.groups.get("road"), o.road_radius, o)
        self._entity_layout(&self.traffic, L.groups.get("traffic"), o.traffic_radius, o)
        g = L.groups.get("partners")
        if g is not None and o.partner_acceleration:
            self.partners.accel = g.feature("acceleration").start

    cdef _entity_layout(self, EntityLayout* ent, g, double radius, o):
        ent.start = g.start if g is not None else 0
        ent.max_n = g.count if g is not None else 0
        ent.width = g.width if g is not None else 0
        ent.radius = radius
        ent.radius2 = radius * radius
        ent.z_gate = o.z_gate
        ent.dropout = o.slot_dropout
        ent.accel = -1
        ent.n = self.ego.n

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
        """Reset the named worlds (all when None) with the given integer seeds (default: the world
        index). Other worlds are untouched."""
        W = self.num_worlds
        ids = np.arange(W) if world_ids is None else np.atleast_1d(np.asarray(world_ids))
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise ValueError(f"world_ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= W):
            raise ValueError(f"world_ids must lie in [0, {W}), got {ids.tolist()}")
        if seeds is None:
            sd = ids.astype(np.uint64)
        else:
            sd = np.atleast_1d(np.asarray(seeds))
            if sd.dtype.kind not in "iu" or sd.shape != ids.shape:
                raise ValueError(f"seeds must be {ids.shape[0]} integers, got {sd.dtype} {sd.shape}")
            sd = sd.astype(np.int64).astype(np.uint64)
        cdef long long[::1] idv = np.ascontiguousarray(ids, np.int64)
        cdef unsigned long long[::1] sv = np.ascontiguousarray(sd, np.uint64)
        cdef Py_ssize_t k, n = idv.shape[0]
        with nogil:
            for k in range(n):
                self._reset_world(idv[k], sv[k])

    def step(self, actions=None):
        """Advance every world by dt. ``actions`` (optional): int ``[W*K]`` copied into the actions
        buffer; otherwise the buffer as it stands is used. Raises ValueError before any state
        changes on a wrong shape or dtype or an index outside a live slot's action grid."""
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
                    self._step_world(w)
        else:
            # Worlds are independent (own agents, generator and scratch), so any thread may step any
            # world and the result does not depend on the thread count.
            for w in prange(self.num_worlds, nogil=True, num_threads=nt, schedule="static"):
                self._step_world(w)

    def assign_maps(self, world_ids, road_maps):
        """Put worlds on other maps (``RoadMap`` objects; e.g. drawn from a ``Dataset``) before
        resetting them. Maps no world uses any more are released."""
        ids = np.atleast_1d(np.asarray(world_ids, np.int64))
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_worlds):
            raise ValueError(f"world_ids must lie in [0, {self.num_worlds})")
        if len(road_maps) != ids.shape[0]:
            raise ValueError(f"one RoadMap per world id: {ids.shape[0]} ids, {len(road_maps)} maps")
        cdef RoadMap rm
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
            rm = self.road_maps[self.world_map[w_i]]
            self.wmap[w_i] = &rm.c

    def get_state(self):
        """A copy of everything that evolves between resets and steps (agents, per-world random
        generators, step counts, output buffers, signal timers), as a dict of NumPy arrays.
        ``set_state`` on an engine built with the same config and maps continues bit for bit."""
        rng = np.empty(self.num_worlds * sizeof(Rng), np.uint8)
        if self.num_worlds:
            memcpy(<void*>_ptr_mut(rng), <void*>self.rngs, self.num_worlds * sizeof(Rng))
        state = {"agents": self._agent_store.copy(), "rngs": rng, "world_map": self.world_map.copy()}
        state.update({f"buffer/{k}": v.copy() for k, v in self._buffers.items()})
        state.update({f"signal/{k}": v.copy() for k, v in self._sig.items()})
        return state

    def set_state(self, state):
        """Restore a ``get_state`` snapshot in place. The engine must have the same shapes and maps
        (same config); a mismatch raises ValueError naming the entry, before anything changes."""
        expected = {"agents": self._agent_store, "world_map": self.world_map}
        expected.update({f"buffer/{k}": v for k, v in self._buffers.items()})
        expected.update({f"signal/{k}": v for k, v in self._sig.items()})
        missing = sorted((set(expected) | {"rngs"}) - set(state))
        if missing:
            raise ValueError(f"engine state lacks {', '.join(missing)}")
        for k, v in expected.items():
            got = np.asarray(state[k])
            if got.shape != v.shape or got.dtype != v.dtype:
                raise ValueError(f"engine state {k!r}: expected {v.dtype} {v.shape}, got {got.dtype} {got.shape} "
                                 "(was it saved by an engine with another config?)")
        if not np.array_equal(state["world_map"], self.world_map):
            raise ValueError("engine state 'world_map': the snapshot's worlds use other maps than this engine's")
        rng = np.ascontiguousarray(state["rngs"], np.uint8)
        if rng.shape != (self.num_worlds * sizeof(Rng),):
            raise ValueError(f"engine state 'rngs': expected {self.num_worlds * sizeof(Rng)} bytes, got {rng.shape}")
        for k, v in expected.items():
            if k != "world_map":
                np.copyto(v, state[k])
        if self.num_worlds:
            memcpy(<void*>self.rngs, <void*>_ptr_mut(rng), self.num_worlds * sizeof(Rng))

    @property
    def world_steps(self):
        """Steps since each world's reset, int32 ``[W]`` (a view)."""
        return self._buffers["t"]

    def num_agents(self, int world):
        return int(self._buffers["n_agents"][world])

    def buffer_nbytes(self):
        """Bytes of per-world state and buffers (excluding the shared maps), per world."""
        own = sum(a.nbytes for a in self._buffers.values())
        own += self.num_worlds * self.max_agents * sizeof(Agent) + self.num_worlds * sizeof(Rng)
        return own / self.num_worlds

    def agent_states(self, int world):
        """A copy of world ``world``'s agents as a dict of arrays (for inspection and rendering)."""
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds})")
        cdef Py_ssize_t n = self.n_agents[world], i
        cdef Agent* a
        names = ("x", "y", "z", "heading", "speed", "v_lat", "yaw_rate", "a_long", "a_lat", "j_long", "j_lat",
                 "steer", "length", "width", "height", "goal_x", "goal_y", "lane", "lane_heading_res", "lane_lat",
                 "cls", "role", "slot", "alive", "goal_hidden", "collided", "offroad", "wrong_way")
        out = {k: np.zeros(n) for k in names}
        out["kin"] = np.zeros((n, 4))
        out["rw"] = np.zeros((n, N_REWARD))
        for i in range(n):
            a = &self.agents[world * self.max_agents + i]
            vals = (a.x, a.y, a.z, a.heading, a.speed, a.v_lat, a.yaw_rate, a.a_long, a.a_lat, a.j_long, a.j_lat,
                    a.steer, a.length, a.width, a.height, a.goal_x, a.goal_y, a.lane, a.lane_heading_res, a.lane_lat,
                    a.cls, a.role, a.slot, a.alive, a.goal_hidden, a.collided, a.offroad, a.wrong_way)
            for k, v in zip(names, vals):
                out[k][i] = v
            out["kin"][i] = [a.kin[0], a.kin[1], a.kin[2], a.kin[3]]
            out["rw"][i] = [a.rw[k] for k in range(N_REWARD)]
        for k in ("lane", "cls", "role", "slot", "alive", "goal_hidden", "collided", "offroad", "wrong_way"):
            out[k] = out[k].astype(np.int64)
        return out

    @property
    def agents(self):
        """Read-only structured view ``[W, max_agents]`` of every agent slot in every world (zero
        copy; rows past ``n_agents[w]`` are unused). Fields (metres, radians, m/s): ``x y z heading
        speed length width height goal_x goal_y`` (float64), ``cls`` (AgentType), ``role``
        (0 policy, 1 static, 2 log replay, 3 IDM), ``slot`` (controlled slot or -1), ``alive``, and this
        step's flags ``collided offroad wrong_way red_light ran_stop_line goal_reached`` (int32)."""
        cdef Agent probe
        cdef size_t b = <size_t>&probe
        fields = [("x", <size_t>&probe.x - b), ("y", <size_t>&probe.y - b), ("z", <size_t>&probe.z - b),
                  ("heading", <size_t>&probe.heading - b), ("speed", <size_t>&probe.speed - b),
                  ("length", <size_t>&probe.length - b), ("width", <size_t>&probe.width - b),
                  ("height", <size_t>&probe.height - b), ("goal_x", <size_t>&probe.goal_x - b),
                  ("goal_y", <size_t>&probe.goal_y - b)]
        ints = [("cls", <size_t>&probe.cls - b), ("role", <size_t>&probe.role - b), ("slot", <size_t>&probe.slot - b),
                ("alive", <size_t>&probe.alive - b), ("collided", <size_t>&probe.collided - b),
                ("offroad", <size_t>&probe.offroad - b), ("wrong_way", <size_t>&probe.wrong_way - b),
                ("red_light", <size_t>&probe.red_light - b), ("ran_stop_line", <size_t>&probe.ran_stop_line - b),
                ("goal_reached", <size_t>&probe.goal_reached - b)]
        dt = np.dtype({"names": [n for n, _ in fields] + [n for n, _ in ints],
                       "formats": ["<f8"] * len(fields) + ["<i4"] * len(ints),
                       "offsets": [o for _, o in fields] + [o for _, o in ints],
                       "itemsize": sizeof(Agent)})
        view = self._agent_store.view(dt).reshape(self.num_worlds, self.max_agents)
        view.flags.writeable = False
        return view

    @property
    def n_agents_per_world(self):
        """Agents placed in each world, int32 ``[W]`` (a read-only view)."""
        v = self._buffers["n_agents"].view()
        v.flags.writeable = False
        return v

    def set_scene(self, int world, agents, int seed=0):
        """Replace world ``world``'s scene with the given agents (for tests and scripted scenarios).

        ``agents``: a list of dicts with keys ``cls`` (AgentType), ``x``, ``y``, ``heading`` and
        optionally ``z``, ``speed``, ``length``, ``width``, ``height``, ``controlled`` (default True
        for classes the config controls), ``idm`` (a rule-based IDM vehicle; ``idm_mode`` 0 default,
        1 assertive, 2 cautious), ``goal`` ((x, y)), ``goal_hidden``, ``kin`` (4 values),
        ``rw`` ({reward parameter name: value}). Unspecified reward parameters are sampled as at reset.
        """
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds})")
        if len(agents) > self.max_agents:
            raise ValueError(f"{len(agents)} agents exceed max_agents_per_world={self.max_agents}")
        cdef Agent* a
        cdef Py_ssize_t i, k, base = world * self.max_agents, slot = 0, r
        cdef int c
        self._clear_world(world, seed)
        for i, spec in enumerate(agents):
            c = int(spec["cls"])
            if not 0 <= c < N_CLASSES:
                raise ValueError(f"agents[{i}]: unknown agent type {spec['cls']!r}")
            a = &self.agents[base + i]
            memset(a, 0, sizeof(Agent))
            self._init_agent(world, a, c, ROLE_STATIC)
            a.x, a.y, a.heading = float(spec["x"]), float(spec["y"]), float(spec["heading"])
            a.z = float(spec.get("z", 0.0))
            a.cos_h, a.sin_h = np.cos(a.heading), np.sin(a.heading)
            a.speed = float(spec.get("speed", 0.0))
            a.length = float(spec.get("length", a.length))
            a.width = float(spec.get("width", a.width))
            a.height = float(spec.get("height", a.height))
            a.wheelbase = a.length * self.cp[c * N_CP + CP_WHEELBASE]
            if "kin" in spec:
                for k in range(4):
                    a.kin[k] = float(spec["kin"][k])
            for name, v in spec.get("rw", {}).items():
                k = REWARD_PARAMS.index(name)
                a.rw[k] = float(v)
                a.rw_norm[k] = self._normalize_rw(c, k, a.rw[k])
            controlled = spec.get("controlled", bool(self.controlled_cls[c])) and not spec.get("idm", False)
            if spec.get("idm", False):
                # A rule-based IDM vehicle on the lane under it (nearest centerline in its direction).
                q = (<RoadMap>self.road_maps[self.world_map[world]]).lanes.query(np.array([[a.x, a.y, a.z]]))
                if q["row"][0] < 0:
                    raise ValueError(f"agents[{i}]: an IDM vehicle must start on a lane")
                a.role = ROLE_IDM
                a.lane = int(q["row"][0])
                a.lane_s = float(q["s"][0])
                a.route_lane = -1
                a.idm_mode = int(spec.get("idm_mode", 0))
            elif controlled and slot < self.slots_per_world:
                a.role = ROLE_CONTROLLED
                a.slot = slot
                slot += 1
            a.goal_x, a.goal_y = spec.get("goal", (a.x, a.y))
            a.goal_hidden = 1 if spec.get("goal_hidden", False) else 0
            a.alive = 1
            self.n_agents[world] = i + 1
        with nogil:
            self._finish_reset(world)

    # ------------------------------------------------------------------------------ world internals

    cdef double _normalize_rw(self, int c, int k, double v) noexcept nogil:
        cdef double lo = self.rlo[c * N_REWARD + k], hi = self.rhi[c * N_REWARD + k]
        if not self.ron[c * N_REWARD + k] or hi <= lo:
            return 0.0
        return 2.0 * (v - lo) / (hi - lo) - 1.0

    cdef void _init_agent(self, Py_ssize_t w, Agent* a, int c, int role) noexcept nogil:
        """Class, sampled dimensions, kinematic coefficients and reward parameters."""
        cdef Rng* rng = &self.rngs[w]
        cdef const double* cp = &self.cp[c * N_CP]
        cdef int k
        cdef double lo, hi
        a.cls = c
        a.dyn = <int>cp[CP_DYN]
        a.role = role
        a.slot = -1
        a.lane = -1
        a.log_index = -1
        a.length = rng_range(rng, cp[CP_LEN_LO], cp[CP_LEN_HI])
        a.width = rng_range(rng, cp[CP_WID_LO], cp[CP_WID_HI])
        a.height = rng_range(rng, cp[CP_HGT_LO], cp[CP_HGT_HI])
        a.wheelbase = a.length * cp[CP_WHEELBASE]
        for k in range(4):
            a.kin[k] = rng_range(rng, self.kin_lo, self.kin_hi) if self.randomize_kin else 1.0
        for k in range(N_REWARD):
            if self.ron[c * N_REWARD + k]:
                lo = self.rlo[c * N_REWARD + k]
                hi = self.rhi[c * N_REWARD + k]
                a.rw[k] = rng_range(rng, lo, hi) if hi > lo else lo
            else:
                a.rw[k] = 0.0
            a.rw_norm[k] = <float>self._normalize_rw(c, k, a.rw[k])

    cdef void _clear_world(self, Py_ssize_t w, unsigned long long seed) noexcept nogil:
        cdef Py_ssize_t k, r, K = self.slots_per_world
        rng_seed(&self.rngs[w], seed)
        self.t[w] = 0
        self.n_agents[w] = 0
        memset(&self.agents[w * self.max_agents], 0, self.max_agents * sizeof(Agent))
        for k in range(K):
            r = w * K + k
            self.slot_of[r] = -1
            self.nact[r] = 0
            self.atype[r] = -1
            self.rew[r] = 0
            self.term[r] = 0
            self.trunc[r] = 0
            self.valid_p[r] = 0
            self.prev_np[r] = 0
            self.prev_nr[r] = 0
            self.prev_nt[r] = 0
            memset(&self.cnt[r * N_COUNTERS], 0, N_COUNTERS * sizeof(int))
        if self.obs_f != NULL:
            memset(&self.obs_f[w * K * self.obs_dim], 0, K * self.obs_dim * sizeof(float))
        else:
            memset(&self.obs_h[w * K * self.obs_dim], 0, K * self.obs_dim * sizeof(uint16_t))

    cdef void _reset_world(self, Py_ssize_t w, unsigned long long seed) noexcept nogil:
        self._clear_world(w, seed)
        cdef const MapC* m = self.wmap[w]
        cdef bint use_log = self.init_mode == 1 or (self.init_mode == 2 and rng_uniform(&self.rngs[w]) >= self.p_random)
        if use_log and m.n_tracks > 0:
            self._init_from_log(w)
        else:
            self._init_random(w)
        self._finish_reset(w)

    cdef void _finish_reset(self, Py_ssize_t w) noexcept nogil:
        """Slot tables, lane state, goal distances and first observations after placement."""
        cdef Py_ssize_t i, r, K = self.slots_per_world, base = w * self.max_agents
        cdef const MapC* m = self.wmap[w]
        cdef Agent* a
        cdef SigState st
        self._sig_state(w, &st)
        signals_reset(m, &self.sigp, &st, &self.rngs[w])
        for i in range(self.n_agents[w]):
            a = &self.agents[base + i]
            a.cos_h = cos(a.heading)
            a.sin_h = sin(a.heading)
            if a.role != ROLE_IDM:  # IDM vehicles keep the lane of their route
                lane_state(m, a, self.lane_max_dist, self.z_gate)
            a.prev_goal_dist = sqrt((a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2)
            if a.role == ROLE_CONTROLLED and a.slot >= 0:
                r = w * K + a.slot
                self.slot_of[r] = <int>i
                self.atype[r] = a.cls
                self.nact[r] = self.n_long[a.cls] * self.n_lat[a.cls]
                self.valid_p[r] = 1
        grid_build(&self.agents[base], self.n_agents[w], &self.grid_head[w * AGENT_BUCKETS],
                   &self.grid_next[base], self.agent_cell)
        for i in range(self.n_agents[w]):
            a = &self.agents[base + i]
            if a.alive and a.role == ROLE_CONTROLLED:
                a.collided = collides(&self.agents[base], i, &self.grid_head[w * AGENT_BUCKETS],
                                      &self.grid_next[base], self.agent_cell, self.z_gate, 0.0)
        self._observe_world(w)

    cdef bint _place_on_lane(self, Py_ssize_t w, Agent* a) noexcept nogil:
        cdef const MapC* m = self.wmap[w]
        cdef Rng* rng = &self.rngs[w]
        cdef Py_ssize_t lane
        cdef double s, jitter
        if m.n_spawn_lanes == 0:
            return False
        lane = m.spawn_lanes[rng_int(rng, m.n_spawn_lanes)]
        s = rng_range(rng, 0.0, lane_length(m, lane))
        lane_point(m, lane, s, &a.x, &a.y, &a.z, &a.heading)
        a.lane = <int>lane
        a.lane_s = s
        a.route_lane = -1
        jitter = rng_range(rng, -0.2, 0.2)
        a.x -= jitter * sin(a.heading)
        a.y += jitter * cos(a.heading)
        a.heading += rng_range(rng, -0.05, 0.05)
        return True

    cdef bint _place_on_sidewalk(self, Py_ssize_t w, Agent* a) noexcept nogil:
        cdef const MapC* m = self.wmap[w]
        cdef Rng* rng = &self.rngs[w]
        cdef Py_ssize_t ring
        cdef const double* bb
        cdef int k
        if m.n_walks == 0:
            return self._place_on_lane(w, a)
        for k in range(20):
            ring = rng_int(rng, m.n_walks)
            bb = &m.walk_bbox[4 * ring]
            a.x = rng_range(rng, bb[0], bb[2])
            a.y = rng_range(rng, bb[1], bb[3])
            if point_in_rings(a.x, a.y, m.walk_pts, m.walk_off, m.walk_bbox, m.n_walks):
                a.z = m.walk_pts[3 * m.walk_off[ring] + 2]
                a.heading = rng_range(rng, -3.141592653589793, 3.141592653589793)
                return True
        return False

    cdef bint _assign_goal(self, Py_ssize_t w, Agent* a) noexcept nogil:
        """A goal ahead along the lane graph (pedestrians: straight ahead along their heading)."""
        cdef const MapC* m = self.wmap[w]
        cdef Rng* rng = &self.rngs[w]
        cdef double d, s, dt2, t
        cdef Py_ssize_t seg
        if a.cls == CLS_PEDESTRIAN:
            d = rng_range(rng, 0.25 * self.goal_lo, 0.25 * self.goal_hi)
            a.goal_x = a.x + d * cos(a.heading)
            a.goal_y = a.y + d * sin(a.heading)
            a.goal_z = a.z
            return True
        seg = seggrid_nearest(&m.lanes, a.x, a.y, a.z, self.lane_max_dist, self.z_gate, &dt2, &t)
        if seg < 0:
            return False
        s = m.lanes.seg_s0[seg] + t * sqrt((m.lanes.seg[6 * seg + 3] - m.lanes.seg[6 * seg]) ** 2
                                           + (m.lanes.seg[6 * seg + 4] - m.lanes.seg[6 * seg + 1]) ** 2)
        return sample_goal(m, rng, m.lanes.seg_row[seg], s, a.x, a.y, cos(a.heading), sin(a.heading),
                           self.goal_lo, self.goal_hi, self.goal_fwd, 8, &a.goal_x, &a.goal_y, &a.goal_z)

    cdef int _sample_class(self, Py_ssize_t w) noexcept nogil:
        cdef double total = 0.0, u
        cdef int c
        for c in range(N_CLASSES):
            total += self.class_weight[c]
        u = rng_uniform(&self.rngs[w]) * total
        for c in range(N_CLASSES):
            if u < self.class_weight[c]:
                return c
            u -= self.class_weight[c]
        return CLS_CAR

    cdef void _init_random(self, Py_ssize_t w) noexcept nogil:
        """Random placement under rejection sampling (appendix D.1): collision-free with a
        clearance, on the road, aligned with the lane, at low speed, outside signalized
        intersections; controlled agents also need a goal ahead."""
        cdef Rng* rng = &self.rngs[w]
        cdef const MapC* m = self.wmap[w]
        cdef Py_ssize_t base = w * self.max_agents, n = 0, target, k, j
        cdef int attempt, c, slots = 0, role
        cdef Agent* a
        cdef bint ok
        target = self.n_min + rng_int(rng, self.n_max - self.n_min + 1)
        for k in range(target):
            for attempt in range(self.tries):
                c = self._sample_class(w)
                role = ROLE_CONTROLLED if (self.controlled_cls[c] and slots < self.slots_per_world) else ROLE_STATIC
                a = &self.agents[base + n]
                memset(a, 0, sizeof(Agent))
                self._init_agent(w, a, c, role)
                ok = self._place_on_sidewalk(w, a) if c == CLS_PEDESTRIAN else self._place_on_lane(w, a)
                if not ok:
                    continue
                a.cos_h = cos(a.heading)
                a.sin_h = sin(a.heading)
                a.alive = 1
                for j in range(n):
                    if obb_overlap(a.x, a.y, a.heading, a.length + 2 * self.clearance, a.width + 2 * self.clearance,
                                   self.agents[base + j].x, self.agents[base + j].y, self.agents[base + j].heading,
                                   self.agents[base + j].length, self.agents[base + j].width) and \
                            fabs(self.agents[base + j].z - a.z) <= self.z_gate:
                        ok = False
                        break
                if not ok:
                    continue
                if c != CLS_PEDESTRIAN and offroad(m, a, self.z_gate):
                    continue
                if role == ROLE_CONTROLLED:
                    if not self._assign_goal(w, a):
                        continue
                    a.speed = rng_range(rng, self.v0_lo, self.v0_hi)
                    a.slot = slots
                    a.goal_hidden = 1 if rng_uniform(rng) < self.goal_dropout[c] else 0
                    slots += 1
                else:
                    a.goal_x = a.x
                    a.goal_y = a.y
                    if c <= CLS_BUS and self.idm_fraction > 0 and rng_uniform(rng) < self.idm_fraction:
                        a.role = ROLE_IDM
                        a.idm_mode = rng_int(rng, 3)
                        a.speed = rng_range(rng, self.v0_lo, self.v0_hi)
                n += 1
                break
        self.n_agents[w] = <int>n

    cdef void _init_from_log(self, Py_ssize_t w) noexcept nogil:
        """Agents at their logged state at step 0; controlled ones get their last logged position
        as goal (appendix D.5), the rest replay the log."""
        cdef const MapC* m = self.wmap[w]
        cdef Py_ssize_t base = w * self.max_agents, n = 0, j, T = m.track_steps, last, tt
        cdef const double* st
        cdef Agent* a
        cdef int c, slots = 0
        for j in range(m.n_tracks):
            if n >= self.max_agents:
                break
            if not m.track_valid[j * T]:
                continue
            c = m.track_type[j]
            a = &self.agents[base + n]
            memset(a, 0, sizeof(Agent))
            self._init_agent(w, a, c, ROLE_LOG)
            st = &m.track_state[(j * T) * 6]
            a.x, a.y, a.z, a.heading = st[0], st[1], st[2], st[3]
            a.speed = st[4] * cos(st[3]) + st[5] * sin(st[3])
            a.length = m.track_size[3 * j]
            a.width = m.track_size[3 * j + 1]
            a.height = m.track_size[3 * j + 2]
            a.wheelbase = a.length * self.cp[c * N_CP + CP_WHEELBASE]
            a.log_index = <int>j
            a.alive = 1
            last = 0
            for tt in range(T):
                if m.track_valid[j * T + tt]:
                    last = tt
            a.goal_x = m.track_state[(j * T + last) * 6]
            a.goal_y = m.track_state[(j * T + last) * 6 + 1]
            a.goal_z = m.track_state[(j * T + last) * 6 + 2]
            if self.controlled_cls[c] and slots < self.slots_per_world and \
                    (a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2 >= self.goal_fwd * self.goal_fwd:
                a.role = ROLE_CONTROLLED
                a.slot = slots
                a.goal_hidden = 1 if rng_uniform(&self.rngs[w]) < self.goal_dropout[c] else 0
                slots += 1
            n += 1
        self.n_agents[w] = <int>n

    cdef void _step_world(self, Py_ssize_t w) noexcept nogil:
        cdef Py_ssize_t K = self.slots_per_world, base = w * self.max_agents, i, k, r, n = self.n_agents[w]
        cdef const MapC* m = self.wmap[w]
        cdef Agent* a
        cdef const double* cp
        cdef const double* trk
        cdef int c, act, T, nl
        cdef StepEvents ev
        cdef double d, speed
        cdef bint remove
        cdef int prev_lane
        cdef SigState st
        self._sig_state(w, &st)
        # A world past its horizon has ended: its slots are no longer valid until it is reset.
        cdef bint over = self.t[w] >= self.horizon
        self.t[w] += 1
        T = self.t[w]
        for k in range(K):
            r = w * K + k
            self.rew[r] = 0
            self.term[r] = 0
            self.trunc[r] = 0
            i = self.slot_of[r]
            self.valid_p[r] = 1 if (not over and i >= 0 and self.agents[base + i].alive and
                                    self.agents[base + i].role == ROLE_CONTROLLED) else 0
        # 0. signals advance
        signals_tick(m, &self.sigp, &st, &self.rngs[w], self.dt)
        # 1. dynamics and log replay
        for i in range(n):
            a = &self.agents[base + i]
            if not a.alive:
                continue
            if a.role == ROLE_CONTROLLED:
                if over:
                    continue
                front_centre(a, &a.front_x, &a.front_y)
                c = a.cls
                act = self.act[w * K + a.slot]
                nl = self.n_lat[c]
                step_dynamics(a, &self.cp[c * N_CP], a.dyn, self.grid_long[c * MAX_GRID + act // nl],
                              self.grid_lat[c * MAX_GRID + act % nl], self.dt)
            elif a.role == ROLE_IDM:
                front_centre(a, &a.front_x, &a.front_y)
                prev_lane = a.lane
                idm_step(m, &self.agents[base], n, i, self.cp, &self.idmp, st.sl, &self.rngs[w], self.dt)
                memset(&ev, 0, sizeof(StepEvents))
                traffic_rules(m, a, prev_lane, st.sl, &self.stop_rules, &self.rngs[w], self.dt, &ev)
            elif a.role == ROLE_LOG:
                if T < m.track_steps and m.track_valid[a.log_index * m.track_steps + T]:
                    trk = &m.track_state[(a.log_index * m.track_steps + T) * 6]
                    a.x, a.y, a.z, a.heading = trk[0], trk[1], trk[2], trk[3]
                    a.cos_h = cos(a.heading)
                    a.sin_h = sin(a.heading)
                    a.speed = trk[4] * a.cos_h + trk[5] * a.sin_h
                else:
                    a.alive = 0
        # 2. agent grid
        grid_build(&self.agents[base], n, &self.grid_head[w * AGENT_BUCKETS], &self.grid_next[base], self.agent_cell)
        # 3-6. rules, rewards, consequences for controlled agents (IDM vehicles: collisions only)
        for i in range(n):
            a = &self.agents[base + i]
            if a.alive and a.role == ROLE_IDM:
                a.collided = collides(&self.agents[base], i, &self.grid_head[w * AGENT_BUCKETS], &self.grid_next[base],
                                      self.agent_cell, self.z_gate, 0.0)
            if not a.alive or a.role != ROLE_CONTROLLED or over:
                continue
            c = a.cls
            cp = &self.cp[c * N_CP]
            r = w * K + a.slot
            memset(&ev, 0, sizeof(StepEvents))
            a.collided = collides(&self.agents[base], i, &self.grid_head[w * AGENT_BUCKETS], &self.grid_next[base],
                                  self.agent_cell, self.z_gate, 0.0)
            ev.collided = a.collided
            prev_lane = a.lane
            lane_state(m, a, self.lane_max_dist, self.z_gate)
            speed = fabs(a.speed)
            if c == CLS_PEDESTRIAN:
                a.offroad = 0
                a.on_crosswalk = point_in_rings(a.x, a.y, m.cross_pts, m.cross_off, m.cross_bbox, m.n_cross)
                ev.incursion = (a.lane >= 0 and fabs(a.lane_lat) < 0.5 * a.lane_width and not a.on_crosswalk)
                a.wrong_way = 0
            else:
                a.offroad = offroad(m, a, self.z_gate)
                ev.offroad = a.offroad
                a.wrong_way = (a.lane >= 0 and m.lane_inter[a.lane] < 0 and
                               fabs(a.lane_heading_res) > self.wrong_way_angle and speed > 0.5)
                ev.wrong_way = a.wrong_way
                traffic_rules(m, a, prev_lane, st.sl, &self.stop_rules, &self.rngs[w], self.dt, &ev)
            a.n_comfort = ((fabs(a.a_long) > cp[CP_COMF_ALONG]) + (fabs(a.a_lat) > cp[CP_COMF_ALAT]) +
                           (fabs(a.j_long) > cp[CP_COMF_JLONG]) + (fabs(a.j_lat) > cp[CP_COMF_JLAT]))
            ev.comfort_violations = a.n_comfort
            d = sqrt((a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2)
            ev.goal_progress = a.prev_goal_dist - d
            a.prev_goal_dist = d
            ev.goal = d < a.rw[RW_DELTA_GOAL] and speed < a.rw[RW_V_GOAL]
            a.goal_reached = ev.goal
            self.rew[r] = <float>step_reward(a, &ev, cp, self.dt, m.handedness)
            self.cnt[r * N_COUNTERS + CNT_COLLISION] += ev.collided
            self.cnt[r * N_COUNTERS + CNT_OFFROAD] += ev.offroad
            self.cnt[r * N_COUNTERS + CNT_WRONG_WAY] += ev.wrong_way
            self.cnt[r * N_COUNTERS + CNT_GOAL] += ev.goal
            self.cnt[r * N_COUNTERS + CNT_COMFORT] += ev.comfort_violations
            self.cnt[r * N_COUNTERS + CNT_STOP_LINE] += ev.stop_line
            self.cnt[r * N_COUNTERS + CNT_RED_LIGHT] += ev.red_light
            remove = ((ev.collided and self.conseq_collision == CONSEQ_REMOVE) or
                      (ev.offroad and self.conseq_offroad == CONSEQ_REMOVE) or
                      (ev.wrong_way and self.conseq_wrong_way == CONSEQ_REMOVE))
            if not remove and ((ev.collided and self.conseq_collision == CONSEQ_STOP) or
                               (ev.offroad and self.conseq_offroad == CONSEQ_STOP) or
                               (ev.wrong_way and self.conseq_wrong_way == CONSEQ_STOP)):
                a.speed = 0.0
                a.a_long = 0.0
                a.a_lat = 0.0
                a.v_lat = 0.0
                a.yaw_rate = 0.0
            if remove:
                a.alive = 0
                self.term[r] = 1
                self.nact[r] = 0
            elif ev.goal:
                if self.goal_behavior == 0 and self._assign_goal(w, a):
                    a.prev_goal_dist = sqrt((a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2)
                else:
                    a.halted = 1
                    a.role = ROLE_STATIC
                    self.nact[r] = 0
                    a.speed = 0.0
                    a.a_long = 0.0
                    a.a_lat = 0.0
                    self.term[r] = 1
        # 7. truncation at the horizon
        if T >= self.horizon:
            for k in range(K):
                r = w * K + k
                if self.valid_p[r] and not self.term[r]:
                    self.trunc[r] = 1
                    self.nact[r] = 0
        # 8. observations
        self._observe_world(w)

    cdef void _observe_world(self, Py_ssize_t w) noexcept nogil:
        cdef Py_ssize_t K = self.slots_per_world, base = w * self.max_agents, k, r, i
        cdef const MapC* m = self.wmap[w]
        cdef ObsOut out
        cdef Agent* a
        cdef bint drop
        cdef SigState st
        self._sig_state(w, &st)
        cdef double* tr_d2 = self.tr_d2
        cdef int* tr_idx = self.tr_idx
        out.f = self.obs_f
        out.h = self.obs_h
        out.dim = self.obs_dim
        out.noise_std = self.noise_std
        out.noise_clip = self.noise_clip
        out.rng = &self.rngs[w]
        for k in range(K):
            r = w * K + k
            i = self.slot_of[r]
            if i < 0 or not self.valid_p[r]:
                continue
            a = &self.agents[base + i]
            drop = self.state_dropout > 0 and rng_uniform(&self.rngs[w]) < self.state_dropout
            write_ego(&out, r * self.obs_dim, &self.ego, a, drop)
            if self.partners.max_n > 0:
                self.prev_np[r] = write_partners(&out, r * self.obs_dim, &self.partners, &self.agents[base],
                                                 self.n_agents[w], i, &self.d2buf[base], &self.idxbuf[base],
                                                 self.prev_np[r])
            if self.road.max_n > 0:
                self.prev_nr[r] = write_road(&out, r * self.obs_dim, &self.road, &m.obs, a, self.prev_nr[r])
            if self.traffic.max_n > 0:
                self.prev_nt[r] = write_traffic(&out, r * self.obs_dim, &self.traffic, m, a, st.sl,
                                                tr_d2 + w * self.s_cap, tr_idx + w * self.s_cap, self.prev_nt[r])


cdef void* _ptr_mut(a):
    """Data pointer of a C-contiguous numpy array we own."""
    cdef cnp.ndarray arr = a
    return cnp.PyArray_DATA(arr)

