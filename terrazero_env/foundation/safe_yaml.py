"""YAML with bounded work: the one way the package reads configs, specs, manifests and run files.

``yaml.safe_load`` never runs code, but aliases let a few hundred bytes describe a document of billions
of nodes (the "billion laughs"), and every consumer that walks it (merging a config, copying, dumping)
pays for the expansion. :func:`load` refuses documents that use more than ``MAX_ALIASES`` aliases,
hold more than ``MAX_NODES`` nodes as parsed or as expanded (every alias counted as the nodes it
stands for, so a few aliases of aliases cannot multiply), nest deeper than ``MAX_DEPTH``, refer to
themselves, or exceed ``MAX_BYTES``, with an error naming the source. Plain configs use no aliases
or a handful.
"""

from __future__ import annotations

import os
from typing import IO, Any

import yaml

from .safe_files import UnsafeFileError, read_text

__all__ = ["MAX_ALIASES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "YamlError", "YamlLimitError", "load", "load_file"]

MAX_ALIASES = 100
"""Alias uses (``*name``) allowed in one document."""
MAX_NODES = 200_000
"""Scalars, sequences and mappings allowed in one document, counted both as parsed and as expanded
(an alias counts as every node of what it refers to)."""
MAX_DEPTH = 64
"""Deepest nesting of sequences and mappings allowed."""
MAX_BYTES = 16 * 1024 * 1024
"""Largest document read (bytes)."""


class YamlError(ValueError):
    """A YAML document cannot be read: malformed, not UTF-8, or over a limit; the message names the source."""


class YamlLimitError(YamlError):
    """A YAML document is larger, deeper or more aliased than the limits allow."""


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: Any, source: str) -> None:
        super().__init__(stream)
        self._source = source
        self._aliases = 0
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(f"{self._source}: more than {MAX_ALIASES} YAML aliases (refused: an alias "
                                     "bomb expands a small file into an enormous document)")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise YamlLimitError(f"{self._source}: more than {MAX_NODES} YAML nodes")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(f"{self._source}: YAML nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def expanded_size(self, root: Any) -> int:
        """Nodes of the document with every alias expanded (memoized over the shared nodes, so the
        count itself costs one visit per distinct node); raises past ``MAX_NODES`` or on a cycle."""
        sizes: dict[int, int] = {}
        on_path: set[int] = set()
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            if done:
                on_path.discard(key)
                kids = _children(node)
                total = 1 + sum(sizes[id(k)] for k in kids)
                if total > MAX_NODES:
                    raise YamlLimitError(f"{self._source}: expands to more than {MAX_NODES} YAML nodes through "
                                         "its aliases (refused: an alias bomb)")
                sizes[key] = total
                continue
            if key in sizes:
                continue
            if key in on_path:
                raise YamlLimitError(f"{self._source}: a YAML alias refers to a node that contains it (refused)")
            on_path.add(key)
            stack.append((node, True))
            for k in _children(node):
                if id(k) not in sizes:
                    if id(k) in on_path:
                        raise YamlLimitError(f"{self._source}: a YAML alias refers to a node that contains it "
                                             "(refused)")
                    stack.append((k, False))
        return sizes[id(root)]


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def load(text: str | bytes | IO[str], source: str = "<yaml>") -> Any:
    """Parse one YAML document safely (no code, bounded size and aliases); ``source`` names it in errors."""
    if isinstance(text, (str, bytes)) and len(text) > MAX_BYTES:
        raise YamlLimitError(f"{source}: {len(text)} bytes, over the {MAX_BYTES}-byte limit for a YAML document")
    loader = _BoundedLoader(text, source)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            loader.expanded_size(node)
            return loader.construct_document(node)
        except RecursionError:
            raise YamlLimitError(f"{source}: YAML nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts (4,300)
            if isinstance(exc, YamlError):
                raise
            raise YamlError(f"{source}: not a value this reader takes ({(str(exc).splitlines() or ['?'])[0]})") from None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or \
                (str(exc).splitlines() or ["malformed"])[0]
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise YamlError(f"{source}: not valid YAML ({problem}{where})") from None
    finally:
        loader.dispose()


def load_file(path: str | os.PathLike[str]) -> Any:
    """:func:`load` on a regular file's contents (UTF-8; a FIFO or device is refused without blocking,
    bytes that are not UTF-8 are refused naming the file)."""
    p = os.fspath(path)
    try:
        text = read_text(p, MAX_BYTES, "YAML file")
    except UnsafeFileError as e:
        raise YamlLimitError(str(e)) from None
    return load(text, p)
