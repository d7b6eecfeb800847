"""Worlds stepped in worker processes that share their buffers with the parent.

    from terrazero_env.envs.workers import MultiProcessEngine
    eng = MultiProcessEngine(config, num_workers=4)   # the Python API of ``terrazero_env.engine.Engine``
    eng.reset(np.arange(config.num_worlds), seeds)    # int64 [n] each
    eng.step(actions)                                 # int [W*K]
    eng.observations                                  # [W*K, obs_dim], in shared memory
    eng.close()

Worker p runs its own ``terrazero_env.engine.Engine`` over the contiguous block of worlds
``worker_bounds[p]:worker_bounds[p + 1]`` (blocks differ in size by at most one world). Every buffer
the parent exposes lives in one ``multiprocessing.shared_memory`` segment. A step writes the actions
there, sends each worker one byte over its pipe and waits for a one-byte answer; meanwhile each worker
steps its engine and copies its outputs into its rows of the segment. Resets, ``set_scene``,
``agent_states`` and ``assign_scenarios`` go to the worker that owns the world. With a ``dataset``
(a :class:`~terrazero_env.maps.Dataset`), every worker holds its own copy and builds the road maps of
the scenarios its worlds are put on; the parent draws the scenarios (from the worlds' seeds) and
sends only their indices. Worlds are independent and seeded per world,
so a rollout is bit-identical whatever the number of workers.

The parent checks actions, world ids and seeds before anything is sent (with the messages of
``Engine``), so a bad call changes no world. An exception raised in a worker is raised again in the
parent (same type and message, the worker's traceback as its ``__cause__``); a worker that dies closes the
engine and raises RuntimeError. Workers are daemon processes that ignore SIGINT and exit on
``close()``, when the engine is garbage collected, at interpreter exit, or when their pipe to the
parent breaks (the parent died); the parent unlinks the segment.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import operator
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from .. import engine as core
from ..config import AgentType, EngineConfig

__all__ = ["MultiProcessEngine", "WorkerTraceback", "default_context"]

#: Per-slot buffers ``[W*K, ...]`` that workers copy out of their engines.
_SLOT_FIELDS = ("observations", "rewards", "terminated", "truncated", "valid", "agent_type", "counters",
                "slot_agent")
_ALIGN = 64  # bytes: every buffer in the segment starts on a cache line
_JOIN_TIMEOUT = 5.0  # seconds a worker gets to exit before it is terminated
#: Default seconds the parent waits for one exchange with the workers (a reset of many large worlds
#: takes seconds, a step milliseconds) before it gives up on a stopped or hung worker.
DEFAULT_TIMEOUT = 600.0

# Requests (first byte) and replies.
_STEP, _RESET, _STATES, _SCENE, _ASSIGN, _QUIT = b"s", b"r", b"a", b"c", b"m", b"q"
_OK, _ERROR = b"K", b"E"

_Spec = Sequence[tuple[str, str, tuple[int, ...]]]


def default_context() -> str:
    """The start method workers use unless told otherwise: forkserver on Linux, else spawn."""
    return "forkserver" if sys.platform.startswith("linux") else "spawn"


def _segment_size(spec: _Spec) -> int:
    """Bytes a segment holding the buffers of ``spec`` (name, dtype string, shape) needs."""
    end = 0
    for _, dtype, shape in spec:
        end = -(-end // _ALIGN) * _ALIGN + int(np.prod(shape)) * np.dtype(dtype).itemsize
    return max(end, 1)


def _segment_arrays(buf: memoryview, spec: _Spec) -> dict[str, np.ndarray]:
    """The buffers of ``spec`` as numpy views of ``buf``, laid out as ``_segment_size`` counts."""
    out, end = {}, 0
    for name, dtype, shape in spec:
        start = -(-end // _ALIGN) * _ALIGN
        count = int(np.prod(shape))
        out[name] = np.frombuffer(buf, np.dtype(dtype), count, start).reshape(shape)
        end = start + count * np.dtype(dtype).itemsize
    return out


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker (the ``__cause__`` of its copy in the parent)."""


class _Segment(SharedMemory):
    """A shared-memory segment whose ``close`` tolerates numpy views that outlive it: the views keep
    the memoryview they were made from, hence the mapping, alive until the last of them goes."""

    def close(self) -> None:
        try:
            super().close()
        except BufferError:
            self._buf = None
            self._mmap = None
            if getattr(self, "_fd", -1) >= 0:
                os.close(self._fd)
                self._fd = -1


# ------------------------------------------------------------------------------------------ worker


class _WorldBlock:
    """One worker's engine and its rows of the shared buffers."""

    def __init__(self, engine: Any, shared: dict[str, np.ndarray], start: int, stop: int, dataset: Any = None):
        K = engine.slots_per_world
        rows, worlds = slice(start * K, stop * K), slice(start, stop)
        self.engine = engine
        o = engine.config.obs
        self.dataset_maps = (core.DatasetRoadMaps(dataset, obs_radius=o.road_radius,
                                                  obs_segment_length=o.road_segment_length)
                             if dataset is not None else None)
        self.K = K
        self.actions = shared["actions"][rows]
        self.slot_pairs = [(shared[n][rows], getattr(engine, n)) for n in _SLOT_FIELDS]
        self.world_pairs = [(shared["world_steps"][worlds], engine.world_steps),
                            (shared["n_agents"][worlds], engine.n_agents_per_world),
                            (shared["agents"][worlds], engine.agents.view(np.uint8).reshape(stop - start, -1))]

    def publish(self, worlds: np.ndarray | None = None) -> None:
        """Copy the engine's state of ``worlds`` (local indices; all when None) into shared memory."""
        if worlds is None:
            for dst, src in self.slot_pairs + self.world_pairs:
                dst[...] = src
            return
        rows = (worlds[:, None] * self.K + np.arange(self.K)).reshape(-1)
        for dst, src in self.slot_pairs:
            dst[rows] = src[rows]
        for dst, src in self.world_pairs:
            dst[worlds] = src[worlds]

    def handle(self, op: bytes, payload: bytes) -> bytes:
        """Serve one request; returns the reply payload."""
        e = self.engine
        if op == _STEP:
            try:
                e.step(self.actions)
            finally:
                self.publish()
            return b""
        if op == _RESET:
            n = len(payload) // 16
            ids = np.frombuffer(payload, np.int64, n).copy()
            try:
                e.reset(ids, np.frombuffer(payload, np.uint64, n, 8 * n).copy())
            finally:
                self.publish(np.unique(ids))
            return b""
        if op == _ASSIGN:
            if self.dataset_maps is None:
                raise ValueError("assign_scenarios needs an engine built with a dataset")
            n = len(payload) // 16
            ids = np.frombuffer(payload, np.int64, n)
            picks = np.frombuffer(payload, np.int64, n, 8 * n)
            e.assign_maps(ids.copy(), [self.dataset_maps[int(i)] for i in picks])
            return b""
        if op == _STATES:
            return pickle.dumps(e.agent_states(int(pickle.loads(payload))), pickle.HIGHEST_PROTOCOL)
        if op == _SCENE:
            world, agents, seed = pickle.loads(payload)
            try:
                e.set_scene(world, agents, seed)
            finally:
                self.publish(np.array([world]))
            return b""
        raise ValueError(f"unknown request {op!r}")


def _error_reply(exc: BaseException) -> bytes:
    tb = traceback.format_exc()
    try:
        body = pickle.dumps((exc, tb), pickle.HIGHEST_PROTOCOL)
        pickle.loads(body)
    except Exception:
        body = pickle.dumps((RuntimeError(f"{type(exc).__name__}: {exc}"), tb), pickle.HIGHEST_PROTOCOL)
    return _ERROR + body


def _serve(conn: Connection, segment: _Segment, spec: _Spec, config: EngineConfig, maps: Any,
           world_map: np.ndarray, start: int, stop: int, num_threads: int, dataset: Any) -> None:
    try:
        engine = core.Engine(config, maps=maps, world_map=world_map, num_threads=num_threads)
        block = _WorldBlock(engine, _segment_arrays(segment.buf, spec), start, stop, dataset)
        block.publish()
    except Exception as exc:
        conn.send_bytes(_error_reply(exc))
        return
    conn.send_bytes(_OK)
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):  # the parent is gone
            return
        op, payload = msg[:1], msg[1:]
        if op == _QUIT:
            return
        try:
            reply = _OK + block.handle(op, payload)
        except Exception as exc:
            reply = _error_reply(exc)
        try:
            conn.send_bytes(reply)
        except (BrokenPipeError, OSError):
            return


def _worker_main(conn: Connection, segment_name: str, spec: _Spec, config: EngineConfig, maps: Any,
                 world_map: np.ndarray, start: int, stop: int, num_threads: int, dataset: Any = None) -> None:
    """Worker process entry point: serve requests for worlds ``start:stop`` until told to quit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes its workers
    segment = _Segment(name=segment_name)
    try:
        _serve(conn, segment, spec, config, maps, world_map, start, stop, num_threads, dataset)
    finally:
        segment.close()  # _serve's views of the segment are gone once it returns
        conn.close()


# ------------------------------------------------------------------------------------------ parent


def _shutdown(conns: list[Connection], procs: list[Any], segment: _Segment) -> None:
    """Stop the workers (politely, then by force), close the pipes, unlink and close the segment."""
    for conn in conns:
        with contextlib.suppress(OSError, ValueError):  # a worker that is already gone
            conn.send_bytes(_QUIT)
    for proc in procs:
        proc.join(_JOIN_TIMEOUT)
        if proc.is_alive():
            proc.terminate()
            proc.join(_JOIN_TIMEOUT)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for conn in conns:
        conn.close()
    with contextlib.suppress(FileNotFoundError):  # already unlinked
        segment.unlink()
    segment.close()


def _exclusive(method: Any) -> Any:
    """Run ``method`` holding the engine's busy flag; a second thread calling in meanwhile gets
    ``RuntimeError`` at once (as ``Engine`` does) instead of interleaving its messages with the first
    thread's on the workers' pipes, which would deadlock both."""

    @functools.wraps(method)
    def run(self: MultiProcessEngine, *args: Any, **kwargs: Any) -> Any:
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("MultiProcessEngine is being used by another thread: one engine serves one thread "
                               "at a time (give each thread its own engine, or serialize the calls)")
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy.release()

    return run


class MultiProcessEngine:
    """``num_worlds`` worlds split over ``num_workers`` processes, with the Python API of
    ``terrazero_env.engine.Engine`` (see the module docstring).

    Buffers (numpy views of shared memory, rewritten by every step; row ``w * K + k`` is slot k of
    world w): ``observations`` float32/float16 ``[W*K, obs_dim]``, ``actions`` int32 ``[W*K]``,
    ``rewards`` float32, ``terminated``/``truncated``/``valid`` bool ``[W*K]``, ``agent_type`` and
    ``slot_agent`` int32 ``[W*K]``, ``counters`` int32 ``[W*K, 5]``; properties ``world_steps``,
    ``n_agents_per_world`` (int32 ``[W]``) and ``agents`` (structured ``[W, max_agents]``).

    ``maps``, ``world_map`` and ``num_threads`` (OpenMP threads in each worker) mean what they mean
    for ``Engine``. ``context``: the multiprocessing start method ("forkserver", "spawn"; default
    ``default_context()``). ``timeout``: seconds to wait for the workers' answers to one call; a worker
    that does not answer in time (stopped, hung) closes the engine with an error naming it.
    ``dataset``: a :class:`~terrazero_env.maps.Dataset` whose scenarios :meth:`assign_scenarios` puts
    worlds on.
    """

    def __reduce__(self) -> Any:
        # Its worlds live in other processes (a copy would share or orphan them): say so plainly.
        raise TypeError("an env whose worlds run in worker processes (num_workers > 1) cannot be copied or "
                        "pickled; build it with num_workers=1 to copy or pickle it")

    def __init__(self, config: EngineConfig, num_workers: int = 2, *, maps: Any = None,
                 world_map: np.ndarray | Sequence[int] | None = None, num_threads: int = 1,
                 context: str | None = None, timeout: float = DEFAULT_TIMEOUT, dataset: Any = None):
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        W, K = config.num_worlds, config.slots_per_world
        if not (isinstance(num_workers, (int, np.integer)) and 1 <= num_workers <= W):
            raise ValueError(f"num_workers must be an integer in [1, num_worlds={W}], got {num_workers!r}")
        core.check_num_threads(num_threads)
        if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < float("inf")):
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.dataset = dataset
        self._busy = threading.Lock()  # one calling thread at a time (see _exclusive)
        self._closed = True  # until the workers are up
        # A one-world engine answers the questions that do not depend on the worlds.
        self._template = core.Engine(config.with_overrides(num_worlds=1), maps=maps)
        t = self._template
        self.config = config
        self.num_worlds, self.slots_per_world, self.max_agents = W, K, t.max_agents
        self.num_workers, self.num_threads = int(num_workers), int(num_threads)
        self.obs_dim, self.obs_layout, self.road_maps = t.obs_dim, t.obs_layout, t.road_maps
        if world_map is None:
            world_map = np.arange(W) % len(self.road_maps)
        world_map = np.asarray(world_map, np.int64)
        if world_map.shape != (W,) or world_map.min() < 0 or world_map.max() >= len(self.road_maps):
            raise ValueError(f"world_map must be {W} map indices in [0, {len(self.road_maps)})")
        self.world_map = world_map
        #: Worker p owns worlds ``worker_bounds[p]:worker_bounds[p + 1]``.
        self.worker_bounds = np.arange(self.num_workers + 1) * W // self.num_workers
        self._class_actions = np.array([t.num_actions(c) for c in AgentType], np.int64)
        self._agent_dtype = t.agents.dtype

        i4, f4, b1 = (np.dtype(t).str for t in (np.int32, np.float32, np.bool_))
        spec = [("observations", t.observations.dtype.str, (W * K, t.obs_dim)),
                ("actions", i4, (W * K,)), ("rewards", f4, (W * K,)),
                ("terminated", b1, (W * K,)), ("truncated", b1, (W * K,)), ("valid", b1, (W * K,)),
                ("agent_type", i4, (W * K,)), ("counters", i4, (W * K, t.counters.shape[1])),
                ("slot_agent", i4, (W * K,)), ("world_steps", i4, (W,)), ("n_agents", i4, (W,)),
                ("agents", np.dtype(np.uint8).str, (W, t.max_agents * self._agent_dtype.itemsize))]
        ctx = mp.get_context(context or default_context())
        segment = _Segment(create=True, size=_segment_size(spec))
        self.segment_name = segment.name
        conns: list[Connection] = []
        procs: list[Any] = []
        self._finalizer = weakref.finalize(self, _shutdown, conns, procs, segment)
        shared = _segment_arrays(segment.buf, spec)
        self.observations, self.actions, self.rewards = shared["observations"], shared["actions"], shared["rewards"]
        self.terminated, self.truncated, self.valid = shared["terminated"], shared["truncated"], shared["valid"]
        self.agent_type, self.counters, self.slot_agent = shared["agent_type"], shared["counters"], shared["slot_agent"]
        self._world_steps, self._n_agents, self._agents = shared["world_steps"], shared["n_agents"], shared["agents"]

        self._conns, self._procs = conns, procs
        try:
            for p in range(self.num_workers):
                a, b = int(self.worker_bounds[p]), int(self.worker_bounds[p + 1])
                parent_end, child_end = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, name=f"terrazero-worker-{p}", daemon=True,
                                   args=(child_end, segment.name, spec, config.with_overrides(num_worlds=b - a),
                                         maps, world_map[a:b], a, b, self.num_threads, dataset))
                proc.start()
                child_end.close()
                conns.append(parent_end)
                procs.append(proc)
            self._closed = False
            _, error = self._collect(range(self.num_workers))
        except BaseException:
            self.close()
            raise
        if error is not None:
            self.close()
            raise error[0] from error[1]

    # ------------------------------------------------------------------------------- plumbing

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("MultiProcessEngine is closed")

    def _worker_name(self, p: int) -> str:
        return f"worker {p} (worlds {int(self.worker_bounds[p])}..{int(self.worker_bounds[p + 1]) - 1})"

    def _request(self, messages: dict[int, bytes]) -> dict[int, bytes]:
        """Send each worker p its message and wait for every answer; raises the first worker error
        (after all answers are in) and returns each worker's reply payload."""
        self._check_open()
        try:
            for p, msg in messages.items():
                try:
                    self._conns[p].send_bytes(msg)
                except OSError:  # BrokenPipeError: the worker is gone before it could read
                    raise self._died(p) from None
            replies, error = self._collect(messages)
        except BaseException:
            self.close()  # a worker died or the exchange was interrupted: the pipes are out of step
            raise
        if error is not None:
            raise error[0] from error[1]
        return replies

    def _died(self, p: int) -> RuntimeError:
        self._procs[p].join(_JOIN_TIMEOUT)
        return RuntimeError(f"{self._worker_name(p)} died (exit code {self._procs[p].exitcode})")

    def _collect(self, workers: Any) -> tuple[dict[int, bytes], tuple[BaseException, WorkerTraceback] | None]:
        """Every answer of ``workers``: the reply payloads and the first error (with its traceback)."""
        replies: dict[int, bytes] = {}
        error = None
        deadline = time.monotonic() + self.timeout
        for p in workers:
            if not self._conns[p].poll(max(0.0, deadline - time.monotonic())):
                self._procs[p].kill()  # unresponsive: it could not take a polite request to quit either
                raise RuntimeError(f"{self._worker_name(p)} did not answer within {self.timeout:g} s (stopped or hung); "
                                   "the engine is closed")
            try:
                msg = self._conns[p].recv_bytes()
            except (EOFError, OSError):
                raise self._died(p) from None
            if msg[:1] == _ERROR and error is None:
                exc, tb = pickle.loads(msg[1:])
                error = (exc, WorkerTraceback(f"raised in {self._worker_name(p)}:\n{tb}"))
            replies[p] = msg[1:]
        return replies, error

    def _owner(self, world: int) -> int:
        return int(np.searchsorted(self.worker_bounds, world, side="right")) - 1

    def _live_action_counts(self) -> np.ndarray:
        """Action-grid size of each slot that reads an action on the next step, else 0, int64
        ``[W*K]``: a slot reads one while its agent was live at the last step or reset and was
        neither terminated nor truncated by it."""
        live = self.valid & ~self.terminated & ~self.truncated & (self.agent_type >= 0)
        return np.where(live, self._class_actions[np.maximum(self.agent_type, 0)], 0)

    # ------------------------------------------------------------------------------------ API

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def world_steps(self) -> np.ndarray:
        """Steps since each world's reset, int32 ``[W]`` (a view of shared memory)."""
        return self._world_steps

    @property
    def n_agents_per_world(self) -> np.ndarray:
        """Agents placed in each world, int32 ``[W]`` (a read-only view)."""
        v = self._n_agents.view()
        v.flags.writeable = False
        return v

    @property
    def agents(self) -> np.ndarray:
        """Read-only structured view ``[W, max_agents]`` of every agent slot in every world, with the
        fields of ``Engine.agents``; refreshed by every step, reset and ``set_scene``."""
        v = self._agents.view(self._agent_dtype).reshape(self.num_worlds, self.max_agents)
        v.flags.writeable = False
        return v

    def num_agents(self, world: int) -> int:
        """Agents (of every role) in world ``world`` now."""
        world = operator.index(world)
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds}), got {world}")
        return int(self._n_agents[world])

    def num_actions(self, cls: int) -> int:
        """Size of the action grid of an agent class (``AgentType``)."""
        return self._template.num_actions(cls)

    def action_values(self, cls: int) -> np.ndarray:
        """The (longitudinal, lateral) pair behind each action index of a class, float64 ``[n, 2]``."""
        return self._template.action_values(cls)

    @_exclusive
    def reset(self, world_ids: np.ndarray | Sequence[int] | None = None,
              seeds: np.ndarray | Sequence[int] | None = None) -> None:
        """Reset the named worlds (all when None) with the given seeds, integers in [0, 2**64)
        (default: the world index). Other worlds are untouched; bad ids or seeds raise first."""
        W = self.num_worlds
        ids = np.arange(W) if world_ids is None else np.atleast_1d(np.asarray(world_ids))
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise ValueError(f"world_ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= W):
            raise ValueError(f"world_ids must lie in [0, {W}), got {ids.tolist()}")
        if np.unique(ids).size != ids.size:
            raise ValueError(f"world_ids must name each world once, got {ids.tolist()}")
        if seeds is None:
            sd = ids.astype(np.uint64)
        else:
            sd = core.check_seeds(seeds, ids.shape[0])
        ids = ids.astype(np.int64)
        owner = np.searchsorted(self.worker_bounds, ids, side="right") - 1
        messages = {}
        for p in np.unique(owner).tolist():
            mine = owner == p
            local = ids[mine] - self.worker_bounds[p]
            messages[p] = _RESET + local.tobytes() + sd[mine].tobytes()
        if messages:
            self._request(messages)

    @_exclusive
    def step(self, actions: np.ndarray | None = None) -> None:
        """Advance every world by dt. ``actions`` (optional): int ``[W*K]`` copied into the actions
        buffer; otherwise the buffer as it stands is used. Raises ValueError before any worker is
        told to step on a wrong shape or dtype or an index outside a live slot's action grid."""
        self._check_open()
        a = self.actions if actions is None else np.asarray(actions)
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers (int32), got dtype {a.dtype}")
        if a.shape != self.actions.shape:
            raise ValueError(f"actions must have shape {self.actions.shape}, got {a.shape}")
        nact = self._live_action_counts()
        bad = (nact > 0) & ((a < 0) | (a >= nact))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"action {int(a[i])} out of range for slot {i} "
                             f"(agent type {int(self.agent_type[i])} has actions 0..{int(nact[i]) - 1})")
        if actions is not None:
            self.actions[:] = a
        self._request({p: _STEP for p in range(self.num_workers)})

    @_exclusive
    def assign_scenarios(self, world_ids: np.ndarray | Sequence[int], indices: np.ndarray | Sequence[int]) -> None:
        """Put worlds on the dataset's scenarios ``indices`` (one per world id) before resetting them;
        each owning worker builds (or takes from its cache) the scenario's road map."""
        if self.dataset is None:
            raise ValueError("assign_scenarios needs a MultiProcessEngine built with dataset=")
        ids = np.atleast_1d(np.asarray(world_ids, np.int64))
        picks = np.atleast_1d(np.asarray(indices, np.int64))
        if ids.ndim != 1 or picks.shape != ids.shape:
            raise ValueError(f"one scenario index per world id: {ids.shape} ids, {picks.shape} indices")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_worlds):
            raise ValueError(f"world_ids must lie in [0, {self.num_worlds}), got {ids.tolist()}")
        if picks.size and (picks.min() < 0 or picks.max() >= len(self.dataset)):
            raise ValueError(f"scenario indices must lie in [0, {len(self.dataset)}), got {picks.tolist()}")
        owner = np.searchsorted(self.worker_bounds, ids, side="right") - 1
        messages = {}
        for p in np.unique(owner).tolist():
            mine = owner == p
            messages[p] = _ASSIGN + (ids[mine] - self.worker_bounds[p]).tobytes() + picks[mine].tobytes()
        if messages:
            self._request(messages)

    @_exclusive
    def agent_states(self, world: int) -> dict[str, np.ndarray]:
        """A copy of world ``world``'s agents as a dict of arrays (``Engine.agent_states``)."""
        world = operator.index(world)
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds})")
        p = self._owner(world)
        local = world - int(self.worker_bounds[p])
        return pickle.loads(self._request({p: _STATES + pickle.dumps(local)})[p])

    @_exclusive
    def set_scene(self, world: int, agents: list[dict[str, Any]], seed: int = 0) -> None:
        """Replace world ``world``'s scene with the given agents (``Engine.set_scene``)."""
        world = operator.index(world)
        if not 0 <= world < self.num_worlds:
            raise ValueError(f"world must lie in [0, {self.num_worlds})")
        p = self._owner(world)
        local = world - int(self.worker_bounds[p])
        self._request({p: _SCENE + pickle.dumps((local, list(agents), int(seed)), pickle.HIGHEST_PROTOCOL)})

    def worker_pids(self) -> list[int]:
        """Process ids of the workers, in world order."""
        return [proc.pid for proc in self._procs]

    def close(self) -> None:
        """Stop the workers and unlink the shared memory (idempotent). The buffers stay readable
        until the last view of them is gone."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> MultiProcessEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
