"""WOSAC-style realism (terrazero_env.evaluation.realism) on the bundled logged scenario usa_us101 (12.9 s of
NGSIM tracks) with WOSAC's window, 1.1 s of history and 8 s driven: the logged replay reaches the
largest likelihood the smoothed histograms allow, and the baselines score below it."""

from __future__ import annotations

import numpy as np
import pytest

from terrazero_env.evaluation.realism import ALPHA, BINS, WEIGHTS, format_realism, realism_table


@pytest.fixture(scope="module")
def table():
    return realism_table("usa_us101", rollouts=4, history_steps=11, future_steps=80)


def test_logged_replay_scores_the_maximum_realism_on_its_own_scenario(table) -> None:
    """Every rollout equal to the log puts all R samples in the logged bin: p = (R + a) / (R + a B)
    for each histogram feature, (R + a) / (R + 2a) for the indicators, and the meta score is their
    weighted mean."""
    R = table["rollouts"]
    log = table["policies"]["log"]
    best = {k: (R + ALPHA) / (R + ALPHA * (BINS[k][2] if k in BINS else 2)) for k in WEIGHTS}
    for k in WEIGHTS:
        assert log[k] == pytest.approx(best[k], rel=1e-12)
    assert log["meta"] == pytest.approx(sum(w * best[k] for k, w in WEIGHTS.items()) / sum(WEIGHTS.values()))


def test_constant_velocity_and_idm_score_below_the_logged_replay(table) -> None:
    """The baselines do not reproduce the logged future: their meta scores are lower, and so are the
    kinematic likelihoods."""
    log = table["policies"]["log"]
    for name in ("constant_velocity", "idm"):
        pol = table["policies"][name]
        assert pol["meta"] < log["meta"]
        assert pol["linear_acceleration"] < log["linear_acceleration"]
    assert table["future_s"] == pytest.approx(8.0) and table["history_s"] == pytest.approx(1.1)
    assert "meta" in format_realism(table)


def test_unknown_policy_and_short_log_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown realism policy"):
        realism_table("usa_lanker", rollouts=2, history_steps=5, policies=("replay",))
    with pytest.raises(ValueError, match="fewer than history"):
        realism_table("usa_lanker", rollouts=2, history_steps=40)   # its log holds 1.6 s
    with pytest.raises(ValueError, match="no logged tracks"):
        realism_table("grid_town", rollouts=2)


def test_edge_distance_in_blocks_matches_shapely_and_one_block():
    """The blocked road-edge distance gives shapely's point-to-segment distance, whatever the block size
    (the blocks bound its memory on scenes with thousands of edge segments)."""
    import shapely

    from terrazero_env.evaluation import realism as rz

    rng = np.random.default_rng(5)
    pts = rng.normal(size=(300, 2)) * 40
    edges = rng.normal(size=(70, 4)) * 40
    lines = shapely.linestrings(edges.reshape(-1, 2, 2))
    want = shapely.distance(shapely.points(pts)[:, None], lines[None]).min(1)
    whole = rz._edge_distance(pts, edges)
    np.testing.assert_allclose(whole, want, rtol=0, atol=1e-9)
    old = rz.EDGE_BLOCK_PAIRS
    try:
        rz.EDGE_BLOCK_PAIRS = 7 * 70  # seven points a block, the last block short
        assert np.array_equal(rz._edge_distance(pts, edges), whole)
    finally:
        rz.EDGE_BLOCK_PAIRS = old
