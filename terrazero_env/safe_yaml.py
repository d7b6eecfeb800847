"""YAML with bounded work: the one way the package reads configs, specs, manifests and run files.

``yaml.safe_load`` never runs code, but aliases let a few hundred bytes describe a document of billions
of nodes (the "billion laughs"), and every consumer that walks it (merging a config, copying, dumping)
pays for the expansion. :func:`load` refuses documents that use more than ``MAX_ALIASES`` aliases,
hold more than ``MAX_NODES`` nodes, or exceed ``MAX_BYTES``, with an error naming the source. Plain
configs use no aliases or a handful.
"""

from __future__ import annotations

import os
from typing import IO, Any

import yaml

__all__ = ["MAX_ALIASES", "MAX_BYTES", "MAX_NODES", "YamlLimitError", "load", "load_file"]

MAX_ALIASES = 100
"""Alias uses (``*name``) allowed in one document."""
MAX_NODES = 200_000
"""Scalars, sequences and mappings allowed in one document, counted as parsed (before expansion)."""
MAX_BYTES = 16 * 1024 * 1024
"""Largest document read (bytes)."""


class YamlLimitError(ValueError):
    """A YAML document is larger or more aliased than the limits allow."""


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: Any, source: str) -> None:
        super().__init__(stream)
        self._source = source
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(f"{self._source}: more than {MAX_ALIASES} YAML aliases (refused: an alias "
                                     "bomb expands a small file into an enormous document)")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise YamlLimitError(f"{self._source}: more than {MAX_NODES} YAML nodes")
        return super().compose_node(parent, index)


def load(text: str | bytes | IO[str], source: str = "<yaml>") -> Any:
    """Parse one YAML document safely (no code, bounded size and aliases); ``source`` names it in errors."""
    if isinstance(text, (str, bytes)) and len(text) > MAX_BYTES:
        raise YamlLimitError(f"{source}: {len(text)} bytes, over the {MAX_BYTES}-byte limit for a YAML document")
    loader = _BoundedLoader(text, source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_file(path: str | os.PathLike[str]) -> Any:
    """:func:`load` on a file's contents (UTF-8)."""
    p = os.fspath(path)
    size = os.path.getsize(p)
    if size > MAX_BYTES:
        raise YamlLimitError(f"{p}: {size} bytes, over the {MAX_BYTES}-byte limit for a YAML document")
    with open(p, encoding="utf-8") as f:
        return load(f.read(), p)
