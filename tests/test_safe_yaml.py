"""YAML inputs are bounded: an alias bomb, a huge document or too many nodes is refused with an error
naming the source, before any consumer expands it; ordinary configs load as before."""

from __future__ import annotations

import pytest

import terrazero_env
from terrazero_env.foundation import safe_yaml

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefghijkl", "bcdefghijklm"))


def test_alias_bomb_is_refused_naming_the_source():
    assert len(BOMB) < 600  # expands to 9**13 strings
    with pytest.raises(safe_yaml.YamlLimitError, match=r"bomb.yaml: more than 100 YAML aliases"):
        safe_yaml.load(BOMB, "bomb.yaml")


def test_alias_bomb_in_a_config_file_is_refused(tmp_path):
    p = tmp_path / "run.yaml"
    p.write_text("num_worlds: 2\n" + BOMB)
    with pytest.raises(ValueError, match="more than 100 YAML aliases"):
        terrazero_env.load_config(p)


def test_alias_bomb_in_a_map_spec_is_refused(tmp_path):
    from terrazero_env.maps.sources import load_spec

    p = tmp_path / "town.yaml"
    p.write_text("generator: grid\nparams:\n  " + BOMB.replace("\n", "\n  "))
    with pytest.raises(ValueError, match="more than 100 YAML aliases"):
        load_spec(p)


def test_limits_on_size_and_nodes(monkeypatch):
    monkeypatch.setattr(safe_yaml, "MAX_BYTES", 100)
    with pytest.raises(safe_yaml.YamlLimitError, match="over the 100-byte limit"):
        safe_yaml.load("x: " + "y" * 200, "big")
    monkeypatch.setattr(safe_yaml, "MAX_BYTES", 10_000)
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 50)
    with pytest.raises(safe_yaml.YamlLimitError, match="more than 50 YAML nodes"):
        safe_yaml.load("[" + ", ".join(["1"] * 60) + "]", "many")


def test_ordinary_documents_and_a_few_aliases_load():
    assert safe_yaml.load("a: &x {b: 1}\nc: *x\nd: [1, 2.5, null]") == {"a": {"b": 1}, "c": {"b": 1}, "d": [1, 2.5, None]}
    with pytest.raises(Exception, match="could not determine a constructor"):
        safe_yaml.load("!!python/object/apply:os.system ['true']")
