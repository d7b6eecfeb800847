"""Model ``.zip`` files that load without unpickling: the trust boundary for ``PPO.save`` files.

Stable-Baselines3 stores a model as a zip whose ``.pth`` entries (weights, optimizer state) are read
with ``torch.load(weights_only=True)``, but whose ``data`` entry keeps every attribute that is not
JSON (spaces, schedules, the policy and buffer classes) as a cloudpickle, and unpickling runs
whatever code the file contains. :meth:`terrazero_env.agents.PPO.save` therefore adds one more
entry, ``terrazero.json``, describing each of those attributes as plain data (a space by its bounds,
a schedule by its parameters, a class by a name from a fixed list), and :func:`load_model` hands
them to SB3's ``load`` as ``custom_objects``, so no pickle in ``data`` is ever opened. The zip stays
an ordinary SB3 file: ``PPO.load`` (which unpickles) still reads it. A zip without that entry, or
with an attribute the entry cannot describe (a user's own schedule function, say), is refused unless
the caller passes ``trust_pickle=True``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule

from terrazero_env.foundation.safe_files import UnsafeFileError, load_json

from .rollout_buffer import MaskedRolloutBuffer

__all__ = ["MAX_BUFFER_BYTES", "MAX_ENTRY_RATIO", "SAFE_ENTRY", "PickleRefusedError", "add_safe_entry", "check_archive",
           "load_model", "pickled_attributes"]

#: The zip entry holding the plain-data description of ``data``'s pickled attributes.
SAFE_ENTRY = "terrazero.json"
SAFE_FORMAT = 1


MAX_ENTRY_RATIO = 200
"""Largest ratio of an entry's declared (uncompressed) size to the whole zip's size; deflated weights
and JSON compress a few times at most, a zip bomb by thousands."""
MAX_ENTRY_BYTES = 4 * 1024**3
"""Largest declared size of one entry (bytes)."""
MAX_BUFFER_BYTES = 4 * 1024**3
"""Largest rollout buffer a loaded model's ``n_steps`` x ``n_envs`` x observation size may ask for
(bytes of float32 observations), checked before SB3 allocates it."""
MAX_JSON_ENTRY_BYTES = 64 * 1024 * 1024
"""Largest ``data`` or safe entry read as JSON (bytes)."""


class PickleRefusedError(ValueError):
    """A file would have to be unpickled (which can run code) and the caller did not opt in."""


class _NotPlain(Exception):
    """An attribute that plain data cannot describe."""


# ----------------------------------------------------------------------------------- encoding

def _classes(model_class: type) -> dict[str, type]:
    """Every class a safe entry may name: the policies of ``model_class`` (its ``policy_aliases``:
    for :class:`~terrazero_env.agents.PPO`, SB3's and ``DeepSetsPolicy``), rollout buffers, torch
    layers and optimizers. The model's class is passed in, so this module never imports ``ppo``
    (which imports this one to write the entry)."""
    out: dict[str, type] = {f"policy:{k}": v for k, v in getattr(model_class, "policy_aliases", {}).items()}
    out.update({"buffer:RolloutBuffer": RolloutBuffer, "buffer:MaskedRolloutBuffer": MaskedRolloutBuffer})
    for mod, base, tag in ((torch.nn, torch.nn.Module, "torch.nn"), (torch.optim, torch.optim.Optimizer, "torch.optim")):
        for name in dir(mod):
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, base):
                out[f"{tag}:{name}"] = obj
    return out


def _encode(value: Any, classes: dict[type, str]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return {"tuple" if isinstance(value, tuple) else "list": [_encode(v, classes) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NotPlain(f"a dict with non-string keys {list(value)[:3]}")
        return {"dict": {k: _encode(v, classes) for k, v in value.items()}}
    if isinstance(value, type):
        if value not in classes:
            raise _NotPlain(f"class {value.__module__}.{value.__qualname__}")
        return {"class": classes[value]}
    if isinstance(value, spaces.Box):
        low, high = np.asarray(value.low), np.asarray(value.high)
        return {"box": {"low": low.ravel().tolist(), "high": high.ravel().tolist(), "shape": list(value.shape),
                        "dtype": np.dtype(value.dtype).str}}
    if isinstance(value, spaces.Discrete):
        return {"discrete": {"n": int(value.n), "start": int(value.start)}}
    if isinstance(value, spaces.MultiDiscrete):
        return {"multidiscrete": {"nvec": np.asarray(value.nvec).tolist(), "start": np.asarray(value.start).tolist()}}
    if isinstance(value, ConstantSchedule):
        return {"constant_schedule": float(value.val)}
    if isinstance(value, LinearSchedule):
        return {"linear_schedule": [float(value.start), float(value.end), float(value.end_fraction)]}
    if isinstance(value, FloatSchedule):
        return {"float_schedule": _encode(value.value_schedule, classes)}
    raise _NotPlain(f"a {type(value).__name__}")


def _decode(value: Any, classes: dict[str, type]) -> Any:
    if not isinstance(value, dict):
        return value
    (kind, v), = value.items()
    if kind == "list":
        return [_decode(x, classes) for x in v]
    if kind == "tuple":
        return tuple(_decode(x, classes) for x in v)
    if kind == "dict":
        return {k: _decode(x, classes) for k, x in v.items()}
    if kind == "class":
        if v not in classes:
            raise ValueError(f"names class {v!r}, which is not one a model may use")
        return classes[v]
    if kind == "box":
        dtype = np.dtype(v["dtype"])
        shape = tuple(int(s) for s in v["shape"])
        return spaces.Box(np.asarray(v["low"], dtype).reshape(shape), np.asarray(v["high"], dtype).reshape(shape),
                          shape, dtype)
    if kind == "discrete":
        return spaces.Discrete(int(v["n"]), start=int(v["start"]))
    if kind == "multidiscrete":
        return spaces.MultiDiscrete(np.asarray(v["nvec"], np.int64), start=np.asarray(v["start"], np.int64))
    if kind == "constant_schedule":
        return ConstantSchedule(float(v))
    if kind == "linear_schedule":
        return LinearSchedule(*(float(x) for x in v))
    if kind == "float_schedule":
        return FloatSchedule(_decode(v, classes))
    raise ValueError(f"unknown entry kind {kind!r}")


# --------------------------------------------------------------------------------- save / load

def _zip_path(path: str | Path) -> Path:
    """Where SB3's ``save`` wrote ``path`` (it adds ``.zip`` to a name without a suffix)."""
    p = Path(path)
    return p if p.suffix else Path(f"{p}.zip")


def check_archive(archive: zipfile.ZipFile, path: str | Path, size: int) -> None:
    """Refuse a zip whose entries declare more bytes than a model can hold: any entry beyond
    :data:`MAX_ENTRY_BYTES` or :data:`MAX_ENTRY_RATIO` times the file's ``size`` (a zip bomb), checked
    from the central directory before anything is decompressed."""
    limit = min(MAX_ENTRY_BYTES, MAX_ENTRY_RATIO * max(size, 1) + 1024 * 1024)
    for info in archive.infolist():
        if info.file_size > limit:
            raise ValueError(f"{path}: zip entry {info.filename!r} declares {info.file_size} bytes, over the "
                             f"{limit}-byte limit for a {size}-byte file (refused: a zip bomb?)")


def _read_json_entry(archive: zipfile.ZipFile, name: str, path: str | Path) -> Any:
    info = archive.getinfo(name)
    if info.file_size > MAX_JSON_ENTRY_BYTES:
        raise ValueError(f"{path}: zip entry {name!r} declares {info.file_size} bytes, over the "
                         f"{MAX_JSON_ENTRY_BYTES}-byte limit")
    try:
        doc = load_json(archive.read(name), f"{path}: zip entry {name!r}")
    except UnsafeFileError as e:
        raise ValueError(str(e)) from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: zip entry {name!r} is a {type(doc).__name__}, not a JSON object")
    return doc


def pickled_attributes(archive: zipfile.ZipFile, path: str | Path = "<zip>") -> list[str]:
    """The attributes that a zip's ``data`` entry stores as pickles (read as JSON, nothing unpickled)."""
    if "data" not in archive.namelist():
        return []
    data = _read_json_entry(archive, "data", path)
    return [k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v]


def _check_sizes(data: dict[str, Any], described: dict[str, Any], path: str | Path) -> None:
    """Bound the sizes a ``data`` entry hands SB3's constructor before it allocates the rollout buffer."""
    for name, hi in (("n_steps", 10**6), ("n_envs", 10**6), ("batch_size", 10**8), ("n_epochs", 10**4)):
        v = data.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi):
            raise ValueError(f"{path}: zip entry 'data' has {name} {v!r}, outside [1, {hi}]")
    obs = described.get("observation_space")
    width = 1
    if isinstance(obs, dict) and isinstance(obs.get("box"), dict):
        shape = obs["box"].get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and 0 <= d <= 10**7 for d in shape):
            raise ValueError(f"{path}: {SAFE_ENTRY} has an observation shape {shape!r} that is not a list of sizes")
        width = int(np.prod(shape, dtype=np.float64)) if shape else 1
    need = 4 * int(data.get("n_steps") or 1) * int(data.get("n_envs") or 1) * width
    if need > MAX_BUFFER_BYTES:
        raise ValueError(f"{path}: zip entry 'data' asks for a rollout buffer of {need} bytes (n_steps "
                         f"{data.get('n_steps')} x n_envs {data.get('n_envs')} x {width} observation values), "
                         f"over the {MAX_BUFFER_BYTES}-byte limit")


def add_safe_entry(model: Any, path: str | Path) -> None:
    """Add :data:`SAFE_ENTRY` to the zip that ``model.save(path)`` just wrote; an attribute that
    plain data cannot describe is left out (loading it then needs ``trust_pickle``)."""
    zp = _zip_path(path)
    classes = {cls: name for name, cls in _classes(type(model)).items()}
    with zipfile.ZipFile(zp, "r") as z:
        names = pickled_attributes(z, zp)
    described: dict[str, Any] = {}
    undescribed: dict[str, str] = {}
    for name in names:
        try:
            described[name] = _encode(getattr(model, name), classes)
        except (_NotPlain, AttributeError) as e:
            undescribed[name] = str(e)
    entry = {"format": SAFE_FORMAT, "attributes": described, "undescribed": undescribed}
    with zipfile.ZipFile(zp, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(SAFE_ENTRY, json.dumps(entry))


def load_model(cls: Any, path: str | Path, device: str | torch.device = "cpu", trust_pickle: bool = False,
               **kwargs: Any) -> Any:
    """``cls.load(path)`` without unpickling anything: every pickled attribute of ``data`` is
    rebuilt from :data:`SAFE_ENTRY`. Raises :class:`PickleRefusedError` when that is impossible,
    unless ``trust_pickle`` (then SB3 unpickles the file: only for files you trust)."""
    if trust_pickle:
        return cls.load(str(path), device=device, **kwargs)
    try:
        size = Path(path).stat().st_size
        archive = zipfile.ZipFile(path, "r")
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a model zip ({e})") from None
    with archive as z:
        check_archive(z, path, size)
        pickled = pickled_attributes(z, path)
        data = _read_json_entry(z, "data", path) if "data" in z.namelist() else {}
        entry = _read_json_entry(z, SAFE_ENTRY, path) if SAFE_ENTRY in z.namelist() else None
    if entry is not None and (entry.get("format") != SAFE_FORMAT
                              or not isinstance(entry.get("attributes"), dict)):
        raise ValueError(f"{path}: {SAFE_ENTRY} is not of format {SAFE_FORMAT}")
    described = {} if entry is None else entry["attributes"]
    missing = [k for k in pickled if k not in described]
    if missing:
        why = ("it was not written by terrazero_env.agents.PPO.save" if entry is None
               else f"{SAFE_ENTRY} cannot describe {', '.join(missing)}")
        raise PickleRefusedError(
            f"{path} stores {', '.join(missing)} as pickled Python objects ({why}); unpickling a file runs any code "
            "it contains, so it is not loaded. If you trust where the file came from, pass --trust-pickle "
            "(trust_pickle=True in Python)")
    _check_sizes(data, described, path)
    classes = _classes(cls)
    try:
        custom = {k: _decode(described[k], classes) for k in pickled}
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{path}: {SAFE_ENTRY} is malformed ({e})") from None
    return cls.load(str(path), device=device, custom_objects=custom, **kwargs)
