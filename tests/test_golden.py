"""Every golden rollout (tests/golden.py) reproduces its recorded hash: observations, rewards, flags,
validity, agent types, counters and agent states of a fixed seed on every bundled map and preset."""

from __future__ import annotations

import json

import pytest
from golden import GOLDEN, cases, compute

RECORDED = json.loads(GOLDEN.read_text())


def test_every_case_is_recorded():
    assert sorted(RECORDED) == sorted(cases())


@pytest.mark.parametrize("key", sorted(cases()))
def test_rollout_matches_the_recorded_hash(key):
    assert compute(cases()[key]) == RECORDED[key], (
        f"{key}: the rollout changed; if on purpose, re-record with `python tests/golden.py --record` "
        "in its own commit and say why")
