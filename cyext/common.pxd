# cython: language_level=3
"""The engine's layout, declared once: constants, enums and C structs shared by every module.

Every enum here is exported to Python by ``vocabulary.pxi`` (names ordered by these values), and
``tests/test_vocabulary.py`` holds the Python-side enums of ``terrazero_env.config`` and
``terrazero_env.maps`` equal to them.
"""

# Agent classes (terrazero_env.maps.schema.AgentType).
cdef enum:
    CLS_CAR = 0
    CLS_TRUCK = 1
    CLS_BUS = 2
    CLS_PEDESTRIAN = 3
    CLS_CYCLIST = 4
    N_CLASSES = 5

# Dynamics models (terrazero_env.config.DynamicsModel).
cdef enum:
    DYN_UNICYCLE = 0
    DYN_BICYCLE_ACCEL = 1
    DYN_BICYCLE_JERK = 2
    DYN_BICYCLE_TIRE = 3
    N_DYNAMICS = 4

# Consequences of a violation (terrazero_env.config.Consequence).
cdef enum:
    CONSEQ_NONE = 0
    CONSEQ_STOP = 1
    CONSEQ_REMOVE = 2
    N_CONSEQUENCES = 3

# Agent roles.
cdef enum:
    ROLE_CONTROLLED = 0
    ROLE_STATIC = 1
    ROLE_LOG = 2
    ROLE_IDM = 3
    ROLE_CROSSER = 4           # rule-based pedestrian crossing at a crosswalk (pedestrians.pxd)
    ROLE_JAYWALKER = 5         # rule-based pedestrian crossing mid-block (pedestrians.pxd)
    N_ROLES = 6

# Roles a logged agent can take in a log or hybrid scene (TerraZero appendix D.2; the columns of
# terrazero_env.config.LogRoles, in field order).
cdef enum:
    LOGROLE_REPLAY = 0         # replays its track exactly and leaves when the track ends (ROLE_LOG)
    LOGROLE_IDM = 1            # the IDM driver from its logged state (ROLE_IDM; vehicles only)
    LOGROLE_POLICY = 2         # the policy, towards its logged goal when reachable (ROLE_CONTROLLED)
    LOGROLE_PLANNER = 3        # the IDM hand-over, then planner-driven (ROLE_IDM + PlanState.on; vehicles only)
    N_LOG_ROLES = 4

# Kinds of crossing group at a crosswalk (terrazero_env.config.CrossingGroup; pedestrians.pxd).
cdef enum:
    GROUP_SINGLE = 0
    GROUP_PACK = 1
    GROUP_BIDIRECTIONAL = 2
    GROUP_STAGGERED = 3
    N_GROUP_KINDS = 4

# How a stop line is controlled (terrazero_env.maps.schema.ControlType; MapC.sl_control).
cdef enum:
    SLC_NONE = 0
    SLC_SIGNAL = 1
    SLC_STOP_SIGN = 2
    N_CONTROL_TYPES = 3

# Scene initialization (terrazero_env.config.InitMode).
cdef enum:
    INIT_RANDOM = 0
    INIT_LOG = 1
    INIT_HYBRID = 2
    N_INIT_MODES = 3

# What reaching the goal does (terrazero_env.config.GoalBehavior).
cdef enum:
    GOAL_NEW_GOAL = 0
    GOAL_HALT = 1
    N_GOAL_BEHAVIORS = 2

# Per-slot event counters (columns of Engine.counters).
cdef enum:
    CNT_COLLISION = 0
    CNT_OFFROAD = 1
    CNT_WRONG_WAY = 2
    CNT_GOAL = 3
    CNT_COMFORT = 4
    CNT_STOP_LINE = 5
    CNT_RED_LIGHT = 6
    N_COUNTERS = 7

# Per-episode driving metrics of a controlled slot (columns of Engine.episode_metrics; metrics.pxd
# owns their update, terrazero_env.evaluation.metrics their meaning and the closed-loop score). Counts are
# events or steps, distances metres, times seconds, speeds m/s; the last three columns are the
# running state the update needs (contact last step, heading and yaw rate last step).
cdef enum:
    EM_STEPS = 0
    EM_COLLISIONS = 1
    EM_AT_FAULT_COLLISIONS = 2
    EM_MAX_IMPACT_SPEED = 3
    EM_MIN_TTC = 4
    EM_TTC_STEPS = 5
    EM_MIN_GAP = 6
    EM_MIN_LEAD_HEADWAY = 7
    EM_OFFROAD_STEPS = 8
    EM_WRONG_WAY_DIST = 9
    EM_OVERSPEED = 10
    EM_SPEEDING_STEPS = 11
    EM_SPEED_SUM = 12
    EM_LIMIT_SUM = 13
    EM_PROGRESS = 14
    EM_REF_PROGRESS = 15
    EM_DISTANCE = 16
    EM_STALL_TIME = 17
    EM_HARD_BRAKES = 18
    EM_HARD_ACCELS = 19
    EM_MAX_LON_ACCEL = 20
    EM_MIN_LON_ACCEL = 21
    EM_MAX_LAT_ACCEL = 22
    EM_MAX_LON_JERK = 23
    EM_MAX_JERK = 24
    EM_MAX_YAW_RATE = 25
    EM_MAX_YAW_ACCEL = 26
    EM_COMFORT_STEPS = 27
    EM_RED_LIGHTS = 28
    EM_STOP_SIGNS = 29
    EM_YELLOW_ENTRIES = 30
    EM_AT_FAULT_OBJECT_COLLISIONS = 31   # at-fault onsets whose at-fault partners are all static objects
    EM_MAX_OFFROAD_EXCURSION = 32        # m: largest distance of a box corner beyond the drivable area
    EM_IN_CONTACT = 33
    EM_PREV_HEADING = 34
    EM_PREV_YAW_RATE = 35
    N_EPISODE_METRICS = 36

# How a controlled agent's collision happened (metrics.collision_type; nuPlan's collision types, with
# the lateral case split by who moved sideways). At fault: STOPPED_OTHER, FRONT, LATERAL_EGO.
cdef enum:
    COLL_STOPPED_EGO = 0
    COLL_STOPPED_OTHER = 1
    COLL_REAR = 2
    COLL_FRONT = 3
    COLL_LATERAL_EGO = 4
    COLL_LATERAL_OTHER = 5
    COLL_SIDE_HIT = 6
    N_COLLISION_TYPES = 7

# Signal states (per head and, aggregated, per stop line).
cdef enum:
    SIG_RED = 0
    SIG_YELLOW = 1
    SIG_GREEN = 2
    SIG_OFF = 3
    N_SIGNAL_STATES = 4

# Stop-sign states of an agent (the ego observation's one-hot).
cdef enum:
    STOP_NOT_IN_REGION = 0
    STOP_MUST_STOP = 1
    STOP_CLEARED = 2
    N_STOP_STATES = 3

# Reward parameters (terrazero_env.config.REWARD_PARAMS order).
cdef enum:
    RW_GOAL = 0
    RW_COLLISION = 1
    RW_BOUNDARY = 2
    RW_COMFORT = 3
    RW_LANE_ALIGN = 4
    RW_LANE_CENTER = 5
    RW_VELOCITY = 6
    RW_VEL_ALIGN = 7
    RW_REVERSE = 8
    RW_TIMESTEP = 9
    RW_STOP_LINE = 10
    RW_RED_LIGHT = 11
    RW_ROAD_INCURSION = 12
    RW_SPEED_LIMIT = 13
    RW_EDGE_PREFERENCE = 14
    RW_GOAL_PROGRESS = 15
    RW_TARGET_SPEED = 16
    RW_WRONG_WAY = 17
    RW_DELTA_GOAL = 18
    RW_V_GOAL = 19
    RW_GAMMA_COL = 20
    RW_B_CENTER = 21
    RW_V_SPEED_LIM = 22
    N_REWARD = 23

# Terms of a controlled agent's step reward (rewards.step_reward; the columns of Engine.reward_terms),
# in the order they are added. NEW_GOAL_CHARGE is the potential-shaped goal progress charged back
# when the step drew a new goal (world_step._judge), added to the float32 reward after the rest.
cdef enum:
    RT_GOAL = 0
    RT_COLLISION = 1
    RT_BOUNDARY = 2
    RT_COMFORT = 3
    RT_LANE_ALIGN = 4
    RT_LANE_CENTER = 5
    RT_VEL_ALIGN = 6
    RT_EDGE_PREFERENCE = 7
    RT_VELOCITY = 8
    RT_REVERSE = 9
    RT_TIMESTEP = 10
    RT_STOP_LINE = 11
    RT_RED_LIGHT = 12
    RT_ROAD_INCURSION = 13
    RT_SPEED_LIMIT = 14
    RT_GOAL_PROGRESS = 15
    RT_WRONG_WAY = 16
    RT_NEW_GOAL_CHARGE = 17
    N_REWARD_TERMS = 18

# Events of one step (bit 1 << EVT_* of Engine.step_events and of Engine.replay_frame's events).
cdef enum:
    EVT_GOAL = 0
    EVT_COLLISION = 1
    EVT_OFFROAD = 2
    EVT_WRONG_WAY = 3
    EVT_STOP_LINE = 4          # ran a stop sign's line without stopping (traffic.pxd)
    EVT_RED_LIGHT = 5
    EVT_INCURSION = 6          # a pedestrian on the carriageway off a crosswalk
    EVT_COMFORT = 7            # one comfort limit or more exceeded
    N_EVENTS = 8

# Who moves an agent (Engine.replay_frame's mover column).
cdef enum:
    MOVER_POLICY = 0          # a controlled slot reading actions
    MOVER_IDM_EGO = 1         # a controlled slot driven by the IDM law (Engine.set_ego_driver)
    MOVER_PLANNER_EGO = 2     # a controlled slot driven by the planner (Engine.set_ego_driver)
    MOVER_IDM = 3             # a rule-based IDM vehicle
    MOVER_PLANNER = 4         # a planner-driven IDM vehicle (planner.pxd)
    MOVER_REPLAY = 5          # a logged track replayed
    MOVER_STATIC = 6          # a static actor (or a vehicle halted at its goal)
    MOVER_PEDESTRIAN = 7      # a rule-based pedestrian (pedestrians.pxd)
    N_MOVERS = 8

# Columns of the per-class parameter table (EngineConfig.tables()["class_params"]).
cdef enum:
    CP_DYN = 0
    CP_LEN_LO = 1
    CP_LEN_HI = 2
    CP_WID_LO = 3
    CP_WID_HI = 4
    CP_HGT_LO = 5
    CP_HGT_HI = 6
    CP_VMAX = 7
    CP_VREV = 8
    CP_AMAX = 9
    CP_DMAX = 10
    CP_ALATMAX = 11
    CP_STEERMAX = 12
    CP_WHEELBASE = 13
    CP_COMF_ALONG = 14
    CP_COMF_ALAT = 15
    CP_COMF_JLONG = 16
    CP_COMF_JLAT = 17
    CP_CORNERING = 18
    CP_MASS = 19
    CP_WEIGHT = 20
    CP_STEERRATE = 21  # steering-rate limit (rad/s); negative: the angle follows the command at once
    CP_REARAXLE = 22   # rear axle behind the box centre, as a fraction of the length (0: turns about the centre)
    N_CP = 23

# Observation road types (table 11).
cdef enum:
    ROAD_LANE = 0
    ROAD_LINE = 1
    ROAD_EDGE = 2
    N_ROAD_TYPES = 3

# Kinematic coefficients (appendix D.4).
cdef enum:
    KIN_THROTTLE = 0
    KIN_STEER = 1
    KIN_ACC = 2
    KIN_VEL = 3
    N_KIN = 4

# What a static actor is (Agent.kind; terrazero_env.config.StaticKind). Ordinary agents are KIND_NONE.
cdef enum:
    KIND_NONE = 0
    KIND_PARKED = 1            # a parked car, bus or truck at the curb
    KIND_CRASHED = 2           # a vehicle of a crashed-vehicle cluster
    KIND_CONE = 3              # a traffic cone of a construction zone
    KIND_WORKER = 4            # a stationary worker of a construction zone (pedestrian-sized)
    KIND_DEBRIS = 5            # an isolated piece of debris
    N_KINDS = 6

# Static-actor generators (TerraZero section 4.4, figure 4; terrazero_env.config.StaticGenerator).
cdef enum:
    GEN_PARKED = 0             # a row of parked vehicles along the curb
    GEN_CRASH_DISC = 1         # crashed vehicles scattered uniformly over a disc
    GEN_CRASH_CHAIN = 2        # a rear-end chain along a lane
    GEN_CRASH_TBONE = 3        # one vehicle across another's side
    GEN_CRASH_FAN = 4          # vehicles fanned outward from a common point
    GEN_CONE_GRID = 5          # a rectangular grid of cones
    GEN_CONE_TAPER = 6         # a diagonal taper of cones across part of a lane
    GEN_LANE_BLOCK = 7         # a perpendicular line of cones closing a lane
    GEN_DEBRIS = 8             # one piece of debris off the lane centre
    N_GENERATORS = 9


ctypedef struct SegGridC:
    # Segments of a polyline set indexed by a uniform grid (see SegmentGrid).
    Py_ssize_t n_segments
    const double* seg          # [S, 6]: ax, ay, az, bx, by, bz
    const int* seg_row         # [S]
    const double* seg_s0       # [S]
    double x0, y0, cell_size
    Py_ssize_t nx, ny
    const long long* cell_start
    const int* cell_items


ctypedef struct ObsSegC:
    # Road geometry cut into observation segments, with per-cell candidate lists.
    Py_ssize_t n
    const float* seg           # [n, 8]: mid x, mid y, mid z, length, width, cos, sin, road type
    double x0, y0, cell_size
    Py_ssize_t nx, ny
    const long long* cell_start
    const int* cell_items      # per cell: candidate segments within radius, essential first, near first


ctypedef struct MapC:
    # One loaded map: pointers into arrays owned by a RoadMap (shared by all its worlds).
    Py_ssize_t n_lanes
    const double* lane_pts     # [P, 3]
    const long long* lane_off  # [L + 1]
    const double* lane_s0      # [P]: arc length of each point along its lane
    const long long* succ_off  # [L + 1]
    const int* succ            # successor lane ids
    const float* lane_width
    const float* lane_bend     # [L, 4]: tightest radius (m), turn side, clearance left, right (maps/bends.py)
    const float* lane_speed
    const int* lane_inter
    const unsigned char* lane_signalized  # 1 for lanes inside a signalized intersection
    const int* lane_left       # [L]: adjacent same-direction lane on the left, -1 if none
    const int* lane_right      # [L]: adjacent same-direction lane on the right, -1 if none
    SegGridC lanes
    SegGridC edges
    SegGridC walks             # sidewalk rings
    SegGridC crosswalks        # crosswalk rings
    ObsSegC obs
    const long long* walk_off  # sidewalk ring offsets (for containment)
    const double* walk_pts
    Py_ssize_t n_walks
    const long long* cross_off
    const double* cross_pts
    Py_ssize_t n_cross
    double cx, cy              # map centre (spawn bounds)
    const int* spawn_lanes     # lanes where random agents may start
    Py_ssize_t n_spawn_lanes
    double xmin, ymin, xmax, ymax
    int handedness             # 0 right-hand traffic, 1 left-hand traffic
    const double* walk_bbox    # [n_walks, 4]: xmin, ymin, xmax, ymax of each sidewalk ring
    const double* cross_bbox   # [n_cross, 4]
    # stop lines and signals
    Py_ssize_t n_stop_lines, n_heads, n_inter
    const double* sl_pts       # [S, 2, 3]
    const unsigned char* sl_control   # [S] ControlType
    const int* lane_stop_line  # [L]
    const int* head_sl         # [G]
    const double* head_pos     # [G, 3]: where each signal head stands (traffic-light observations)
    const long long* leg_off   # [I + 1] -> legs
    const int* legs
    const long long* leg_head_off     # [n_legs + 1] -> leg_heads
    const int* leg_heads
    const long long* stage_off        # [I + 1] -> stages
    const unsigned char* stage_kind
    const unsigned char* stage_ring   # [n_stages] NEMA ring (0 or 1)
    const int* stage_barrier          # [n_stages] barrier group within its intersection
    const long long* stage_head_off   # [n_stages + 1] -> stage_heads
    const int* stage_heads
    const long long* stage_perm_off   # [n_stages + 1] -> stage_perm
    const int* stage_perm
    const long long* conf_off  # [L + 1]: intersection lanes that cross or merge with each lane
    const int* conf
    # logged tracks (log and hybrid initialization)
    Py_ssize_t n_tracks, track_steps
    const double* track_state  # [A, T, 6]: x, y, z, heading, vx, vy
    const unsigned char* track_valid  # [A, T]
    const unsigned char* track_type   # [A]
    const float* track_size    # [A, 3]
    # logged signal states (worlds initialized from the log replay them; signals.pxd signals_replay)
    Py_ssize_t head_log_steps
    const unsigned char* head_log     # [G, head_log_steps]: SIG_* of each head at each step


ctypedef struct Agent:
    # pose and motion (world frame, metres, radians, m/s)
    double x, y, z, heading, cos_h, sin_h
    double speed               # signed longitudinal speed
    double v_lat, yaw_rate     # lateral velocity and yaw rate (tire model, unicycle)
    double a_long, a_lat       # accelerations this step
    double prev_a_long, prev_a_lat
    double j_long, j_lat       # jerks this step
    double steer               # steering angle (rad)
    double length, width, height, wheelbase
    # task
    double goal_x, goal_y, goal_z
    double prev_goal_dist
    double kin[N_KIN]
    double rw[N_REWARD]        # sampled reward parameters
    float rw_norm[N_REWARD]    # the same, normalized to [-1, 1] for the observation
    # lane state
    int lane
    double lane_heading_res, lane_lat, lane_width, lane_speed
    double lane_arc            # arc length of the nearest centerline point along the lane (m)
    # flags
    int cls, dyn, role, slot, alive
    int goal_hidden, collided, offroad, wrong_way, on_crosswalk, halted, goal_reached
    int log_index
    int n_comfort
    # traffic rules
    double front_x, front_y    # front centre before this step's motion (swept-path test)
    int stop_state, red_light, ran_stop_line
    int kind                   # KIND_*: what a static actor is (fills the padding before stop_dwell)
    double stop_dwell, stop_need
    # rule-based driving (IDM + pure pursuit along a lane-graph route)
    double lane_s
    int route_lane, idm_mode
    int ego_driver             # EGO_*: a controlled agent driven by a rule-based law (drivers.py), 0 by its actions
    double lc_wait             # seconds before the vehicle may change lane again (lanechange.pxd)
    double lc_reach            # while it crosses to a new lane: extra pure-pursuit lookahead, seconds of travel
