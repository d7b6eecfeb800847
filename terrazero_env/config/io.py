"""Configuration as plain data: YAML presets, dict round trips and dotted keyword overrides.

A config file lists only what differs from the defaults (``EngineConfig()``, the paper's values)::

    # assets/presets/quick.yaml
    num_worlds: 2
    slots_per_world: 4
    init: {num_agents: [4, 8]}
    rewards:
      collision: {vehicle: [1.0, 1.0]}

Enums are written by lower-case name, per-class tuples as ``{car: ..., truck: ..., ...}`` mappings,
and each reward parameter as ``{vehicle: ..., pedestrian: ..., cyclist: ...}`` where a setting is a
number (fixed), ``[min, max]`` (sampled per agent) or ``null`` (off). ``init.log_roles`` is written per
class as role weights, ``{car: {replay: 1, idm: 1}, cyclist: {replay: 1}}``; a class left out keeps its
entry, and a class given is replaced whole.

Overrides use dotted names: ``obs.dtype="float16"``, ``init.num_agents=[4, 8]``,
``rewards.collision=[0, 3]`` (every column that is not null), ``rewards.collision.cyclist=null``,
``classes.car.max_speed=25``. The command line's ``--set KEY=VALUE`` options become such overrides
through :func:`parse_set_options`, the one parser of them (every command and the training entries),
and :func:`override_name` is the one check of an override's name.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import typing
from collections.abc import Mapping
from enum import IntEnum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..foundation import safe_yaml
from ..foundation.safe_files import atomic_write
from . import (
    VIOLATIONS,
    AgentType,
    ClassSpec,
    Consequence,
    DynamicsModel,
    EngineConfig,
)

__all__ = ["TRAIN_SECTION", "apply_overrides", "config_from_dict", "config_to_dict", "dump_config", "load_config",
           "load_train_section", "override_name", "parse_set_options", "presets"]

_CLASS_NAMES = [a.name.lower() for a in AgentType]
_COLUMNS = ("vehicle", "pedestrian", "cyclist")
_PER_CLASS_INIT = ("class_weights", "controlled", "goal_dropout")


@functools.cache
def _enum_fields(cls: type) -> dict[str, type[IntEnum]]:
    """The fields of a config dataclass whose annotation is an ``IntEnum`` (read as its member names)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if isinstance(hints[f.name], type) and issubclass(hints[f.name], IntEnum)}


def _plain(v: Any) -> Any:
    if isinstance(v, IntEnum):
        return v.name.lower()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def config_to_dict(cfg: EngineConfig) -> dict[str, Any]:
    """Every field of ``cfg`` as YAML/JSON-able data."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.name == "classes":
            out["classes"] = {AgentType(k).name.lower(): {g.name: _plain(getattr(s, g.name)) for g in dataclasses.fields(s)}
                              for k, s in sorted(v.items())}
        elif f.name == "rewards":
            out["rewards"] = {k: {c: (list(col) if col is not None else None) for c, col in zip(_COLUMNS, cols)}
                              for k, cols in v.items()}
        elif f.name == "consequences":
            out["consequences"] = {k: Consequence(x).name.lower() for k, x in v.items()}
        elif f.name in ("obs", "init", "signals", "idm", "road_users", "reward_forms"):
            sub = {}
            for g in dataclasses.fields(v):
                x = getattr(v, g.name)
                if dataclasses.is_dataclass(x):  # road_users.pedestrians
                    sub[g.name] = {h.name: _plain(getattr(x, h.name)) for h in dataclasses.fields(x)}
                elif g.name == "log_roles" and x is not None:  # per class: None or {replay:, idm:, policy:, planner:}
                    sub[g.name] = {n: None if r is None else dataclasses.asdict(r) for n, r in zip(_CLASS_NAMES, x)}
                else:
                    sub[g.name] = dict(zip(_CLASS_NAMES, _plain(x))) if g.name in _PER_CLASS_INIT else _plain(x)
            out[f.name] = sub
        else:
            out[f.name] = _plain(v)
    return out


def _enum(enum: type[IntEnum], v: Any, where: str) -> IntEnum:
    if isinstance(v, enum):
        return v
    if isinstance(v, str) and v.upper() in enum.__members__:
        return enum[v.upper()]
    if isinstance(v, int) and not isinstance(v, bool) and v in {int(e) for e in enum}:
        return enum(v)
    raise ValueError(f"{where}: {v!r} is not one of {[e.name.lower() for e in enum]}")


def _tuple(v: Any) -> Any:
    return tuple(_tuple(x) for x in v) if isinstance(v, (list, tuple)) else v


def _check_keys(given: Mapping[str, Any], allowed: set[str], where: str) -> None:
    if not isinstance(given, Mapping):
        raise ValueError(f"{where}: expected a mapping of its settings, got {type(given).__name__} {given!r:.80}")
    unknown = set(given) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(allowed)})")


def _per_class(v: Any, default: tuple, where: str) -> tuple:
    if isinstance(v, Mapping):
        _check_keys(v, set(_CLASS_NAMES), where)
        return tuple(v.get(n, d) for n, d in zip(_CLASS_NAMES, default))
    return _tuple(v)


def config_from_dict(d: Mapping[str, Any], base: EngineConfig | None = None) -> EngineConfig:
    """Build a config from (possibly partial) data on top of ``base`` (default: the paper's
    defaults). Unknown keys and bad values raise ``ValueError`` naming them.

    The one merge of settings into a config: YAML presets, ``--set`` overrides (through
    :func:`apply_overrides`) and :meth:`EngineConfig.with_overrides` all come here. Besides the YAML
    form (class and column names, enum names, lists), each value may come in the config's own form: a
    sub-config dataclass (``init=InitConfig(...)``), ``classes`` keyed by ``AgentType`` with
    ``ClassSpec`` values, a reward parameter as its full per-column tuple, enum members, tuples."""
    base = base or EngineConfig()
    if not isinstance(d, Mapping):
        raise ValueError(f"config: expected a mapping, got {type(d).__name__}")
    _check_keys(d, {f.name for f in dataclasses.fields(base)}, "config")
    if isinstance(d.get("init"), Mapping) and "idm_fraction" in d["init"]:
        # Backwards compatibility: the IDM share moved from init to road_users (road_users wins).
        ru = d.get("road_users") or {}
        if not isinstance(ru, Mapping):
            raise ValueError(f"road_users: expected a mapping, got {type(ru).__name__}")
        d = {**d, "init": {k: x for k, x in d["init"].items() if k != "idm_fraction"},
             "road_users": {"idm_fraction": d["init"]["idm_fraction"], **ru}}
    kw: dict[str, Any] = {}
    for key, v in d.items():
        if key == "classes" and isinstance(v, Mapping) and all(isinstance(c, AgentType) for c in v):
            kw["classes"] = {**base.classes, **v}  # the config's own form: AgentType -> ClassSpec
        elif key == "classes":
            _check_keys(v, set(_CLASS_NAMES), "classes")
            classes = dict(base.classes)
            for name, spec in v.items():
                cls = AgentType[name.upper()]
                _check_keys(spec, {g.name for g in dataclasses.fields(ClassSpec)}, f"classes.{name}")
                fields = {k: (_enum(DynamicsModel, x, f"classes.{name}.{k}") if k == "dynamics" else _tuple(x))
                          for k, x in spec.items()}
                classes[cls] = dataclasses.replace(classes[cls], **fields)
            kw["classes"] = classes
        elif key == "rewards":
            if not isinstance(v, Mapping):
                raise ValueError(f"rewards: expected a mapping of reward parameters, got {type(v).__name__} {v!r:.80}")
            rewards = dict(base.rewards)
            for name, cols in v.items():
                if name not in rewards:
                    raise ValueError(f"rewards: unknown parameter {name!r} (known: {sorted(rewards)})")
                rewards[name] = _reward_columns(cols, rewards[name], f"rewards.{name}")
            kw["rewards"] = rewards
        elif key == "consequences":
            _check_keys(v, set(VIOLATIONS), "consequences")
            kw["consequences"] = {**base.consequences,
                                  **{k: _enum(Consequence, x, f"consequences.{k}") for k, x in v.items()}}
        elif key in ("obs", "init", "signals", "idm", "road_users", "reward_forms") and isinstance(
                v, type(getattr(base, key))):
            kw[key] = v  # a whole sub-config, already checked by its own constructor
        elif key in ("obs", "init", "signals", "idm", "road_users", "reward_forms"):
            sub_base = getattr(base, key)
            _check_keys(v, {g.name for g in dataclasses.fields(sub_base)}, key)
            fields = {}
            for k, x in v.items():
                if dataclasses.is_dataclass(getattr(sub_base, k)):  # road_users.pedestrians
                    if not isinstance(x, Mapping):
                        raise ValueError(f"{key}.{k}: a mapping of its fields, got {x!r}")
                    nested = getattr(sub_base, k)
                    _check_keys(x, {g.name for g in dataclasses.fields(nested)}, f"{key}.{k}")
                    fields[k] = dataclasses.replace(nested, **{n: _tuple(y) for n, y in x.items()})
                elif k in _enum_fields(type(sub_base)):
                    fields[k] = _enum(_enum_fields(type(sub_base))[k], x, f"{key}.{k}")
                elif k in _PER_CLASS_INIT:
                    fields[k] = _per_class(x, getattr(sub_base, k), f"{key}.{k}")
                elif k == "log_roles" and key == "init" and isinstance(x, Mapping):
                    # {class: {role: weight}}; classes left out keep the base's entry (None: the default).
                    fields[k] = _per_class(x, sub_base.log_roles or (None,) * len(_CLASS_NAMES), f"{key}.{k}")
                else:
                    fields[k] = _tuple(x)
            kw[key] = dataclasses.replace(sub_base, **fields)
        else:
            kw[key] = _tuple(v)
    return dataclasses.replace(base, **kw)


def _setting(v: Any, where: str) -> Any:
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (float(v), float(v))
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return (float(v[0]), float(v[1]))
    raise ValueError(f"{where}: a number, [min, max] or null, got {v!r}")


def _reward_columns(v: Any, current: tuple, where: str) -> tuple:
    if isinstance(v, Mapping):
        _check_keys(v, set(_COLUMNS), where)
        return tuple(_setting(v[c], f"{where}.{c}") if c in v else cur for c, cur in zip(_COLUMNS, current))
    if isinstance(v, (list, tuple)) and len(v) == len(_COLUMNS):
        return _tuple(v)  # the config's own form, one entry per column (checked by EngineConfig)
    # One setting for every column that is on (null turns every column off).
    s = _setting(v, where)
    return tuple(s if (cur is not None or s is None) else None for cur in current)


def apply_overrides(cfg: EngineConfig, overrides: Mapping[str, Any]) -> EngineConfig:
    """Apply dotted-name overrides (``{"obs.dtype": "float16", "rewards.collision": [0, 3]}``)."""
    d: dict[str, Any] = {}
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = d
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {dotted!r} conflicts with another override")
        node[parts[-1]] = value
    return config_from_dict(d, cfg)


def override_name(key: Any, given: str | None = None) -> str:
    """An override's dotted name, stripped of surrounding blanks; a name that is empty or has an
    empty part (``""``, ``"train."``, ``"rewards..collision"``; ``__`` reads as ``.``) is refused with
    one error, for a ``--set`` option (``given``: the option's text) and a Python mapping alike."""
    if not isinstance(key, str):
        raise TypeError(f"override names are dotted strings such as rewards.collision, got {key!r}")
    name = key.strip()
    if not all(name.replace("__", ".").split(".")):
        shown = f"--set {given!r}" if given is not None else f"override {key!r}"
        raise ValueError(f"{shown} has an empty setting name (KEY=VALUE needs a dotted KEY such as rewards.collision "
                         "or train.ent_coef)")
    return name


def parse_set_options(pairs: typing.Iterable[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as overrides ``{KEY: VALUE}``, each value read as YAML (safely); a
    later option for the same key wins. The one parser of ``--set``: ``terrazero train`` and
    ``python -m terrazero_env.agents.launch`` (through ``agents.train.train_from_args``) and the CLI's
    other commands call it."""
    out: dict[str, Any] = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {kv!r}")
        name = override_name(key, kv)
        out[name] = safe_yaml.load(value, f"--set {name}")
    return out


def presets() -> list[str]:
    """Names of the bundled presets."""
    root = Path(str(resources.files("terrazero_env.assets"))) / "presets"
    return sorted(p.stem for p in root.glob("*.yaml"))


#: A config file's optional top-level section for the trainer (``terrazero train``), which the
#: engine config ignores; see :func:`load_train_section`.
TRAIN_SECTION = "train"


def _source_path(src: str | os.PathLike[str]) -> Path:
    path = Path(src)
    if not path.suffix:
        path = Path(str(resources.files("terrazero_env.assets"))) / "presets" / f"{src}.yaml"
        if not path.is_file():
            raise ValueError(f"unknown preset {str(src)!r}; presets: {', '.join(presets())}")
    elif not path.is_file():
        raise FileNotFoundError(f"config file {str(src)!r} does not exist")
    return path


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = safe_yaml.load_file(path) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def load_train_section(src: str | os.PathLike[str] | Mapping[str, Any] | EngineConfig | None) -> dict[str, Any]:
    """The ``train:`` section of a preset, YAML file or mapping (``{}`` when absent)."""
    if src is None or isinstance(src, EngineConfig):
        return {}
    data = src if isinstance(src, Mapping) else _read_yaml(_source_path(src))
    section = data.get(TRAIN_SECTION) or {}
    if not isinstance(section, Mapping):
        raise ValueError(f"{TRAIN_SECTION}: expected a mapping, got {type(section).__name__}")
    return dict(section)


def load_config(src: str | os.PathLike[str] | Mapping[str, Any] | EngineConfig | None = None,
                **overrides: Any) -> EngineConfig:
    """A config from a preset name, a YAML path, a mapping or a config, then keyword overrides
    (dotted names may be given with ``__`` in place of ``.``: ``obs__dtype="float16"``)."""
    if src is None:
        cfg = EngineConfig()
    elif isinstance(src, EngineConfig):
        cfg = src
    elif isinstance(src, Mapping):
        cfg = config_from_dict({k: v for k, v in src.items() if k != TRAIN_SECTION})
    else:
        path = _source_path(src)
        data = _read_yaml(path)
        cfg = config_from_dict({k: v for k, v in data.items() if k != TRAIN_SECTION})
    if overrides:
        cfg = apply_overrides(cfg, {k.replace("__", "."): v for k, v in overrides.items()})
    return cfg


def dump_config(cfg: EngineConfig, path: str | os.PathLike[str] | None = None) -> str:
    """The full config as YAML (written to ``path`` when given)."""
    text = yaml.safe_dump(copy.deepcopy(config_to_dict(cfg)), sort_keys=False)
    if path is not None:
        atomic_write(Path(path), text, "config file")
    return text

