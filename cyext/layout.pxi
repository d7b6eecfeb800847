# Observation layout, declared once here and read by Python (policies, tests) through ObsLayout.
# Included by _engine.pyx.

#: Ego features of table 9 in row order: (name, width); alpha_params is as wide as the active
#: reward parameters.
EGO_FEATURES = (
    ("agent_type", 1), ("rel_goal_pos", 2), ("goal_dropout_flag", 1), ("state_dropout_flag", 1),
    ("speed", 1), ("vehicle_dims", 2), ("collision_state", 1), ("steering_angle", 1), ("acceleration", 2),
    ("stop_sign_state", 3), ("alpha_params", -1), ("kinematic_params", 4), ("lane_state", 2),
    ("lateral_velocity", 1), ("yaw_rate", 1), ("road_curvature", 1), ("topology_goal_distance", 1),
    ("stop_line_ahead", 5),
)
#: Partner features of table 10 (acceleration is optional, off by default).
PARTNER_FEATURES = (("rel_pos", 2), ("vehicle_dims", 2), ("rel_heading", 2), ("speed", 1), ("actor_type", 1),
                    ("acceleration", 2))
#: Road-segment features of table 11.
ROAD_FEATURES = (("rel_pos", 2), ("segment_dims", 2), ("rel_angle", 2), ("road_type", 1))
#: Traffic-entity features of table 12: the nearest stop lines (entity type 0) with their signal state,
#: then, when ``ObsConfig.traffic_lights`` is on, the nearest signal heads (entity type 1).
TRAFFIC_FEATURES = (("entity_type", 1), ("rel_pos", 3), ("signal_state", 4), ("stop_line_endpoints", 4))

#: Fixed observation normalisers (appendix C, tables 9-12; fed to the writers through ``ObsNorm``).
#: A ``*_scale`` multiplies the raw value, a ``*_range`` divides it. ``goal_scale`` and
#: ``speed_scale`` come from ``ObsConfig`` (``speed_scale`` serves ego and partner speeds alike, so a
#: policy compares them on one scale); ``ObsLayout.normalisers`` reports all of them.
OBS_NORMALISERS = {
    "position_scale": 0.02,          # 1/m: 50 m reads as 1
    "height_scale": 0.1,             # 1/m
    "width_range": 15.0,             # m
    "length_range": 30.0,            # m
    "steer_range": 3.141592653589793,
    "accel_long_range": 5.0,         # m/s^2
    "accel_lat_range": 4.0,          # m/s^2
    "lane_heading_range": 3.141592653589793,
    "lane_lateral_range": 2.5,       # m
    "lateral_velocity_range": 5.0,   # m/s (ours)
    "yaw_rate_range": 1.0,           # rad/s (ours)
    "curvature_range": 0.1,          # 1/m (ours): a 10 m radius reads as 1
    "segment_range": 100.0,          # m
}


def _check_width(group, features, int width):
    total = sum(w for _, w in features)
    if total != width:
        raise ImportError(f"observation layout: the {group} features add up to {total} values but the writer "
                          f"packs {width} (observe.pxd)")


_check_width("partner", PARTNER_FEATURES[:-1], PARTNER_WIDTH)
_check_width("partner acceleration", PARTNER_FEATURES[-1:], PARTNER_ACCEL_WIDTH)
_check_width("road", ROAD_FEATURES, ROAD_WIDTH)
_check_width("traffic", TRAFFIC_FEATURES, TRAFFIC_WIDTH)


class ObsGroup:
    """One observation group: ``count`` entities of ``width`` values from column ``start``."""

    def __init__(self, name, start, count, width, features):
        self.name = name
        self.start = start
        self.count = count
        self.width = width
        self.features = tuple(features)  # (feature name, offset inside the entity, width)

    @property
    def stop(self):
        return self.start + self.count * self.width

    @property
    def slice(self):
        return slice(self.start, self.stop)

    def feature(self, name):
        """Slice of a feature inside one entity (ego: inside the row)."""
        for n, off, w in self.features:
            if n == name:
                return slice(off, off + w)
        raise KeyError(f"{self.name} has no feature {name!r}; it has {[f[0] for f in self.features]}")

    def __repr__(self):
        return f"ObsGroup({self.name!r}, start={self.start}, count={self.count}, width={self.width})"


class ObsLayout:
    """Where every observation group and feature lives in a row of ``Engine.observations``.

    ``groups``: ego, partners, road, traffic (only the enabled ones). A policy splits a row with
    ``layout.groups["road"].slice`` and reshapes it to ``[count, width]``; no column index is ever
    typed by hand. ``normalisers``: every scale the writers apply (see ``OBS_NORMALISERS``);
    ``bound``: every value lies in [-bound, bound].
    """

    def __init__(self, obs, alpha_names):
        o = obs
        groups = {}
        start = 0
        ego = []
        off = 0
        for name, width in EGO_FEATURES:
            if not o[name]:
                continue
            if name == "alpha_params":
                width = len(alpha_names)
                if width == 0:
                    continue
            ego.append((name, off, width))
            off += width
        groups["ego"] = ObsGroup("ego", 0, 1, off, ego)
        start = off
        if o["partners"] and o["max_partners"] > 0:
            feats, w = [], 0
            for name, width in PARTNER_FEATURES:
                if name == "acceleration" and not o["partner_acceleration"]:
                    continue
                feats.append((name, w, width))
                w += width
            groups["partners"] = ObsGroup("partners", start, o["max_partners"], w, feats)
            start += o["max_partners"] * w
        if o["road"] and o["max_road_segments"] > 0:
            feats, w = [], 0
            for name, width in ROAD_FEATURES:
                feats.append((name, w, width))
                w += width
            groups["road"] = ObsGroup("road", start, o["max_road_segments"], w, feats)
            start += o["max_road_segments"] * w
        if o["traffic"] and o["max_traffic"] > 0:
            feats, w = [], 0
            for name, width in TRAFFIC_FEATURES:
                feats.append((name, w, width))
                w += width
            n = o["max_traffic"] + (o["max_traffic_lights"] if o["traffic_lights"] else 0)
            groups["traffic"] = ObsGroup("traffic", start, n, w, feats)
            start += n * w
        self.groups = groups
        self.dim = start
        self.alpha_names = tuple(alpha_names)
        self.normalisers = dict(OBS_NORMALISERS, goal_scale=float(o["goal_scale"]), speed_scale=float(o["speed_scale"]))
        self.bound = OBS_BOUND

    def split(self, obs):
        """Views of a ``[..., dim]`` array per group, entity groups reshaped to ``[..., count, width]``."""
        out = {}
        for name, g in self.groups.items():
            part = obs[..., g.slice]
            out[name] = part if name == "ego" else part.reshape(tuple(obs.shape[: obs.ndim - 1]) + (g.count, g.width))
        return out

    def __repr__(self):
        return f"ObsLayout(dim={self.dim}, groups={list(self.groups.values())})"
