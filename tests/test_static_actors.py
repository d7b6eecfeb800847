"""Static actors and the road-user composition:
nothing a generator places overlaps anything else or leaves the road at reset, over 1,000 seeds per
generator; static actors never move; they appear among the partners with their kind's type code;
a lane-block closure stops an IDM vehicle before it or, with lane changes on, sees it pass beside
the closed lane; a taper's cones stay inside their own lane, so
the adjacent lane stays passable; the IDM share and behaviour-mode mix, per-class kinematic ranges
and the earlier ``init.idm_fraction`` key are configuration."""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env import engine as core
from terrazero_env.config import (
    Consequence,
    EngineConfig,
    InitConfig,
    RoadUsersConfig,
    StaticGenerator,
    StaticKind,
)
from terrazero_env.config.io import config_from_dict, config_to_dict

NONE = {k: Consequence.NONE for k in ("collision", "offroad", "wrong_way")}
GENERATORS = [g.name.lower() for g in StaticGenerator]


def _engine(W: int, maps: tuple[str, ...] = ("grid_town",), n_agents: tuple[int, int] = (4, 4), **road_users) -> core.Engine:
    cfg = EngineConfig(num_worlds=W, slots_per_world=4, max_agents_per_world=64, maps=maps, consequences=NONE,
                       init=InitConfig(num_agents=n_agents), road_users=RoadUsersConfig(**road_users))
    return core.Engine(cfg)


def _boxes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.stack([a["x"], a["y"], a["heading"], a["length"], a["width"]], axis=1), np.float64)


def _overlapping_pairs(a: np.ndarray) -> int:
    n = len(a)
    i, j = np.triu_indices(n, 1)
    hits = core.obb_overlap_batch(_boxes(a[i]), _boxes(a[j]))
    return int(hits.sum())


@pytest.mark.parametrize("gen", GENERATORS)
def test_nothing_placed_overlaps_anything_at_reset_over_1000_seeds(gen: str) -> None:
    """Every static actor and every agent placed after them have disjoint boxes and no static actor
    leaves the road, in 1,000 reset worlds on two maps of opposite handedness; the generator does
    place its actors in most worlds (the property is not vacuous)."""
    W = 50
    e = _engine(W, maps=("grid_town", "grid_town_lht"), n_agents=(8, 8), **{gen: (1, 2)}, worker_prob=1.0,
                static_tries=50)
    placed = 0
    for rep in range(20):
        e.reset(seeds=np.arange(W) + 1000 * rep)
        for w in range(W):
            a = e.agents[w, : e.num_agents(w)]
            assert _overlapping_pairs(a) == 0, f"{gen}: overlapping boxes in world {w}, seed {w + 1000 * rep}"
            st = a[a["kind"] != StaticKind.NONE]
            placed += len(st) > 0
            assert (st["role"] == 1).all()
            if len(st):
                rm = e.road_maps[e.world_map[w]]
                assert not core.footprint_offroad(rm, _boxes(st), st["z"]).any(), f"{gen}: a static actor off the road"
    assert placed >= 700, f"{gen}: placed in only {placed} of 1000 worlds"


def test_static_actors_never_move_and_are_typed_partners() -> None:
    """Over 100 steps of random actions every static actor keeps its pose bit for bit; ego
    observations show static actors with their kind's type code among the partners."""
    e = _engine(8, n_agents=(6, 6), parked=(1, 2), crash_chain=1, cone_taper=1, lane_block=1, debris=2,
                worker_prob=1.0, idm_fraction=0.5)
    e.reset(seeds=np.arange(8))
    before = e.agents.copy()
    static = before["kind"] != StaticKind.NONE
    assert static.sum() > 40
    rng = np.random.default_rng(0)
    seen: set[int] = set()
    L = e.obs_layout.groups["partners"]
    col = [f[1] for f in L.features if f[0] == "actor_type"][0]
    for _ in range(100):
        e.step(rng.integers(0, 1 << 20, e.actions.shape).astype(np.int32) % np.array(
            [max(e.num_actions(int(c)), 1) if c >= 0 else 1 for c in e.agent_type]))
        obs = e.observations[e.valid]
        types = obs[:, L.start:L.start + L.count * L.width].reshape(len(obs), L.count, L.width)[:, :, col]
        seen |= set(np.unique(types).astype(int).tolist())
    after = e.agents
    for k in ("x", "y", "heading", "speed", "length", "width", "kind", "alive"):
        assert np.array_equal(before[k][static], after[k][static]), k
    for name in ("static_vehicle", "cone", "debris"):
        assert core.OBS_TYPES[name] in seen, f"no {name} seen among the partners"


def test_kind_codes_follow_the_observation_types() -> None:
    """Parked and crashed vehicles share the static-vehicle code, workers read as pedestrians."""
    codes = dict(zip(core.STATIC_KINDS, core.KIND_CODES))
    assert codes["PARKED"] == codes["CRASHED"] == core.OBS_TYPES["static_vehicle"]
    assert codes["CONE"] == core.OBS_TYPES["cone"] and codes["DEBRIS"] == core.OBS_TYPES["debris"]
    assert codes["WORKER"] == core.OBS_TYPES["pedestrian"]


#: Metres between the IDM vehicle's start and a lane-block closure. grid_town's lanes between two
#: junctions leave at most about 25 m of straight before a closure (its 8 m corner fillets).
BLOCK_LEAD = 20.0


def _block_scene(e: core.Engine, seed: int) -> tuple[list[dict], np.ndarray, float] | None:
    """The cones of one lane-block closure, and a pose ``BLOCK_LEAD`` metres before the closure on its lane."""
    e.reset(seeds=np.array([seed]))
    a = e.agents[0, : e.num_agents(0)]
    cones = a[a["kind"] == StaticKind.CONE]
    if len(cones) == 0:
        return None
    h = float(cones["heading"][0])
    c = np.array([cones["x"].mean(), cones["y"].mean()])
    start = c - BLOCK_LEAD * np.array([np.cos(h), np.sin(h)])
    rm = e.road_maps[e.world_map[0]]
    q = rm.lanes.query(np.array([start, c]))
    # A straight stretch of the closed lane itself (no junction between): the start projects onto
    # the same lane's centre ``BLOCK_LEAD`` metres before the cones.
    if q["row"][0] < 0 or q["row"][0] != q["row"][1] or abs(q["lateral"][0]) > 0.3 or \
            abs(np.cos(q["heading"][0] - h)) < 0.999:
        return None
    spec = [{"cls": 0, "x": float(b["x"]), "y": float(b["y"]), "heading": float(b["heading"]),
             "length": float(b["length"]), "width": float(b["width"]), "controlled": False} for b in cones]
    return spec, start, h


@pytest.mark.parametrize("lane_change", [False, True])
def test_lane_block_leaves_its_lane_impassable_to_an_idm_vehicle(lane_change: bool) -> None:
    """An IDM vehicle driving at 8 m/s toward a lane-block closure 20 m ahead never touches a cone and
    never passes the line inside the closed lane: it comes to rest in front of the line, or (with
    lane changes on, where an adjacent lane is free) passes the line beside the closed lane."""
    e = _engine(1, lane_block=1, worker_prob=0.0, n_agents=(1, 1), lane_change=lane_change)
    runs = changed = 0
    for seed in range(120):
        scene = _block_scene(e, seed)
        if scene is None:
            continue
        spec, start, h = scene
        car = {"cls": 0, "x": float(start[0]), "y": float(start[1]), "heading": h, "speed": 8.0, "idm": True,
               "length": 4.5, "width": 1.9}
        e.set_scene(0, spec + [car], seed=seed)
        i = len(spec)
        half_lane = 0.5 * float(np.asarray(e.road_maps[e.world_map[0]].map_data.lanes.width).min())
        passed = False
        for _ in range(200):
            e.step()
            a = e.agents[0, : e.num_agents(0)]
            hits = core.obb_overlap_batch(_boxes(a[[i] * i]), _boxes(a[:i]))
            assert not hits.any(), f"seed {seed}: the IDM vehicle drove into the closure"
            ahead = (a["x"][:i].mean() - a["x"][i]) * np.cos(h) + (a["y"][:i].mean() - a["y"][i]) * np.sin(h)
            if ahead < 0 and not passed:
                lat = -(a["x"][i] - start[0]) * np.sin(h) + (a["y"][i] - start[1]) * np.cos(h)
                assert abs(lat) > half_lane, f"seed {seed}: passed the closure inside the closed lane"
                passed = True
        a = e.agents[0]
        if passed:
            assert lane_change, f"seed {seed}: passed the closure with lane changes off"
            changed += 1
        else:
            assert abs(a["speed"][i]) < 0.2 and 2.0 < ahead < 12.0, f"seed {seed}: speed {a['speed'][i]}, gap {ahead}"
        runs += 1
        if runs >= 5:
            break
    assert runs >= 3, "too few straight closures to test"
    # grid_town's roads have two lanes each way: some closures leave a free lane beside them.
    assert (changed > 0) == lane_change


def test_taper_cones_stay_inside_their_lane() -> None:
    """Every cone of a taper lies inside the half width of the lane nearest to it, and all the cones
    of one taper share that lane: the adjacent lane holds none of them and stays passable."""
    e = _engine(50, cone_taper=1, worker_prob=0.0, n_agents=(1, 1))
    checked = 0
    for rep in range(4):
        e.reset(seeds=np.arange(50) + 100 * rep)
        for w in range(50):
            a = e.agents[w, : e.num_agents(w)]
            cones = a[a["kind"] == StaticKind.CONE]
            if len(cones) == 0:
                continue
            rm = e.road_maps[e.world_map[w]]
            q = rm.lanes.query(np.stack([cones["x"], cones["y"]], axis=1))
            widths = np.asarray(rm.map_data.lanes.width)[q["row"]]
            assert (np.abs(q["lateral"]) + 0.5 * cones["width"] < 0.5 * widths).all()
            assert len(set(q["row"].tolist())) == 1
            checked += 1
    assert checked > 150


def test_idm_share_and_mode_mix_are_configuration() -> None:
    """With every background vehicle IDM-driven and only the cautious mode weighted, every IDM
    vehicle starts cautious; the YAML key init.idm_fraction of earlier configs still reads."""
    cfg = config_from_dict({"init": {"idm_fraction": 1.0, "num_agents": [12, 12], "controlled": {"car": False}},
                            "road_users": {"idm_modes": [0, 0, 1]}, "num_worlds": 4})
    assert cfg.road_users.idm_fraction == 1.0
    assert config_from_dict(config_to_dict(cfg)) == cfg
    e = core.Engine(cfg)
    e.reset(seeds=np.arange(4))
    roles = np.concatenate([e.agents[w, : e.num_agents(w)]["role"] for w in range(4)])
    assert (roles == 3).all()
    modes = np.concatenate([e.agents[w, : e.num_agents(w)]["idm_mode"] for w in range(4)])
    assert (modes == 2).all()
    assert cfg.with_overrides(init={"idm_fraction": 0.25}).road_users.idm_fraction == 0.25


def test_class_kinematic_ranges_apply_per_class() -> None:
    """Per-class kinematic ranges: pedestrians fixed at 1 and cars within their own narrower range."""
    ranges = ((0.9, 1.1), (0.5, 1.5), (0.5, 1.5), (1.0, 1.0), (0.8, 1.2))
    cfg = EngineConfig(num_worlds=2, init=InitConfig(num_agents=(20, 20), class_weights=(1, 0, 0, 1, 0),
                                                     class_kinematic_ranges=ranges))
    e = core.Engine(cfg)
    e.reset(seeds=np.arange(2))
    for w in range(2):
        s = e.agent_states(w)
        ped = s["cls"] == 3
        assert ped.any() and (~ped).any()
        assert (s["kin"][ped] == 1.0).all()
        assert ((s["kin"][~ped] >= 0.9) & (s["kin"][~ped] <= 1.1)).all()


def test_idm_share_and_worker_probability_ranges_are_drawn_per_world():
    """``idm_fraction`` and ``worker_prob`` given as ``(min, max)`` give each world its own share at
    reset, inside the range, and the IDM share decides how many background vehicles are IDM-driven;
    fixed values are used as they are."""
    from terrazero_env.config.io import load_config
    role = {name: k for k, name in enumerate(core.ROLES)}
    cfg = load_config("quick", num_worlds=24, maps=["grid_town"], max_agents_per_world=40, **{
        "init.num_agents": [30, 30], "road_users.idm_fraction": [0.0, 1.0], "road_users.worker_prob": [0.2, 0.4],
        "road_users.parked": 0})
    eng = core.Engine(cfg)
    eng.reset(seeds=np.arange(24))
    mix = eng.episode_mix.copy()
    assert np.all((mix[:, 0] >= 0) & (mix[:, 0] <= 1)) and np.all((mix[:, 1] >= 0.2) & (mix[:, 1] <= 0.4))
    assert len(np.unique(mix[:, 0])) == 24
    share = []
    for w in range(24):
        a = eng.agents[w, : eng.num_agents(w)]
        background = a[(a["role"] != role["CONTROLLED"]) & (a["cls"] <= 2)]
        share.append(np.mean(background["role"] == role["IDM"]))
    # the realised IDM share follows the drawn one (14 background vehicles per world)
    assert np.corrcoef(mix[:, 0], share)[0, 1] > 0.8
    fixed = core.Engine(load_config("quick", num_worlds=4, maps=["grid_town"], **{"road_users.idm_fraction": 0.25}))
    fixed.reset(seeds=np.arange(4))
    assert np.all(fixed.episode_mix[:, 0] == 0.25) and np.all(fixed.episode_mix[:, 1] == 0.5)
    with pytest.raises(ValueError, match="RoadUsersConfig.idm_fraction max"):
        load_config("quick", **{"road_users.idm_fraction": [0.5, 1.5]})
