"""Where maps come from: files by suffix, procedural specs, and the bundled assets.

``load_source`` is the single entry point the CLI and the environments use:

* ``.tzb``: a built terrabin file (read into memory once);
* ``.json``: the human-readable layout of :mod:`terrazero_env.maps.jsonmap`, or a GPUDrive/PufferDrive
  scenario (:mod:`terrazero_env.maps.convert.gpudrive_json`) (raw, needs ``build``);
* ``.yaml`` / ``.yml``: a procedural spec ``{generator: grid, seed: 0, params: {...}}`` (raw);
* ``.xodr``, ``.net.xml``, ``.xml``, ``.osm``, ``.pkl``, ``.tfrecord`` (WOMD; ``index``/``scenario``
  pick one of its scenarios): real formats through
  :mod:`terrazero_env.maps.convert` (raw);
* a bare name such as ``grid_town``: the bundled map of that name.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..foundation import safe_yaml
from . import procedural
from .builder import MapValidationError, build, validate_built
from .jsonmap import load_json
from .schema import MapData
from .terrabin import load, save

__all__ = ["asset_path", "bundled_maps", "load_built", "load_source", "load_spec", "regenerate"]

def _assets_dir() -> Path:
    return Path(str(resources.files("terrazero_env.assets"))) / "maps"


def bundled_maps() -> list[str]:
    """Names of the maps shipped with the package."""
    return sorted(p.stem for p in _assets_dir().glob("*.tzb"))


def asset_path(name: str) -> Path:
    """Path of the bundled map ``name`` (``.tzb``)."""
    p = _assets_dir() / f"{name}.tzb"
    if not p.is_file():
        raise FileNotFoundError(f"no bundled map named {name!r}; bundled maps: {', '.join(bundled_maps())}")
    return p


def load_spec(path: str | os.PathLike[str]) -> MapData:
    """Generate the raw map a procedural YAML spec describes."""
    try:
        spec: Any = safe_yaml.load_file(path)
    except yaml.YAMLError as exc:
        raise MapValidationError(f"{os.fspath(path)}: not valid YAML ({exc})") from None
    if not isinstance(spec, dict) or "generator" not in spec:
        raise MapValidationError(f"{os.fspath(path)}: a procedural spec needs a 'generator' key "
                                 f"(one of {', '.join(procedural.KINDS)})")
    unknown = set(spec) - {"generator", "seed", "params"}
    if unknown:
        raise MapValidationError(f"{os.fspath(path)}: unknown keys {sorted(unknown)} (expected generator, seed, params)")
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise MapValidationError(f"{os.fspath(path)}: 'params' must be a mapping")
    try:
        return procedural.generate(spec["generator"], int(spec.get("seed", 0)), **params)
    except (TypeError, ValueError) as e:
        raise MapValidationError(f"{os.fspath(path)}: {e}") from None


def load_source(src: str | os.PathLike[str], *, trust_pickle: bool = False, index: int | None = None,
                scenario: str | None = None) -> MapData:
    """Read any supported map source; ``.tzb`` and bundled maps come back built, others raw.
    ``trust_pickle``: allow formats that are Python pickles (ScenarioNet ``.pkl``; unpickling runs
    code from the file). ``index`` / ``scenario``: which scenario of a multi-scenario file (a WOMD
    TFRecord) to read, by record number or ``scenario_id`` (default: the first)."""
    s = os.fspath(src)
    p = Path(s)
    suffix = p.suffix.lower()
    from .convert import CONVERTERS, converter_for, is_tfrecord

    if (index is not None or scenario is not None) and not is_tfrecord(p):
        raise ValueError(f"{s}: --index/--scenario select a scenario of a WOMD TFRecord; this source holds one map")
    if is_tfrecord(p):
        if p.exists() and not p.is_file():
            raise MapValidationError(f"map source {s}: not a regular file (a folder, FIFO or device; refused)")
        if not p.is_file():
            raise FileNotFoundError(f"map source not found: {s}")
        from .convert import womd

        return womd.convert(p, index=index, scenario=scenario)
    if suffix == "" and not p.exists():
        return load(asset_path(s))
    if p.exists() and not p.is_file():
        raise MapValidationError(f"map source {s}: not a regular file (a folder, FIFO or device; refused)")
    if not p.is_file():
        raise FileNotFoundError(f"map source not found: {s}")
    if suffix == ".tzb":
        return load(p)
    if suffix == ".json":
        return load_json(p)
    if suffix in (".yaml", ".yml"):
        return load_spec(p)

    convert = converter_for(p)
    if convert is not None:
        return convert(p, trust_pickle=True) if trust_pickle else convert(p)
    known = ", ".join([".tzb", ".json", ".yaml"] + [c[0] for c in CONVERTERS])
    raise ValueError(f"{s}: unknown map source type {suffix!r} (supported: {known})")


def load_built(src: str | os.PathLike[str], *, trust_pickle: bool = False, index: int | None = None,
               scenario: str | None = None) -> MapData:
    """A simulation-ready map from any source: ``.tzb`` files and bundled maps are built already (and
    pass :func:`~terrazero_env.maps.builder.validate_built` here, as a fresh build would), every
    other source is built now (``trust_pickle`` as for :func:`load_source`)."""
    p = Path(os.fspath(src))
    built = p.suffix.lower() == ".tzb" or (p.suffix == "" and not p.exists())
    if not built:
        return build(load_source(src, trust_pickle=trust_pickle, index=index, scenario=scenario))
    if index is not None or scenario is not None:
        raise ValueError(f"{os.fspath(src)}: --index/--scenario select a scenario of a WOMD TFRecord; "
                         "this source holds one map")
    m = load_source(src)
    try:
        validate_built(m)
    except MapValidationError as e:
        raise MapValidationError(f"{os.fspath(src)}: {e}") from None
    return m


def regenerate(out_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Rebuild every bundled map from its YAML spec (``assets/maps/NAME.yaml`` -> ``NAME.tzb``)."""
    src_dir = _assets_dir()
    dst = Path(out_dir) if out_dir is not None else src_dir
    dst.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in sorted(src_dir.glob("*.yaml")):
        written.append(save(build(load_spec(spec)), dst / f"{spec.stem}.tzb"))
    return written
