"""One rollout for every actor: the step loop that every evaluation drives its episodes through.

An *actor* chooses the actions of an engine's controlled slots. :func:`as_actor` turns what a user
hands over into one:

* a trained policy, anything with Stable-Baselines3's ``predict(obs, deterministic)`` (our ``PPO``,
  an SB3 model): :class:`PolicyActor`;
* a baseline driver (:class:`terrazero_env.drivers.Driver`: the reference, IDM and planner drivers),
  which reads the engine's state: :class:`DriverActor`;
* any callable taking the observations (float32 ``[W * K, D]``) and returning one action per slot:
  :class:`CallableActor`.

:func:`drive` steps an engine with an actor until the slots it watches have finished their episodes
(or for a fixed number of steps), yielding after each step what changed; the closed-loop evaluation
(:mod:`terrazero_env.evaluation.evaluate`: ``terrazero eval``, ``--vs``, ``--video``, ``--replay``),
its IDM reference rollout, the long-tail and InterPlan suites and the realism rollouts of a policy all
step through it. Nothing here imports torch: a torch policy brings torch with it, and its random
generator is seeded and forked through :meth:`Actor.seeded` and :meth:`Actor.forked` (Waymax's
``rollout`` takes any actor the same way).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Actor", "CallableActor", "DriverActor", "PolicyActor", "Step", "as_actor", "drive"]


class Actor(ABC):
    """Chooses the actions of an engine's controlled slots (see the module docstring)."""

    #: what the viewer and tables call the ego this actor drives ("policy", or a driver's name)
    name = "actor"

    def begin(self, engine: Any, worlds: np.ndarray, slots: np.ndarray) -> None:  # noqa: B027 (an optional hook)
        """Called after every reset (or scene set-up) with the (world, slot) pairs whose episodes are
        driven; nothing by default."""

    @abstractmethod
    def act(self, engine: Any, obs: np.ndarray) -> np.ndarray:
        """One action index per slot (``[W * K]``; entries of slots without an agent are ignored)."""

    def seeded(self, seed: int) -> AbstractContextManager[None]:
        """A context in which the actor's sampled actions follow ``seed``, leaving the caller's
        random state as it was; a deterministic actor needs none."""
        return nullcontext()

    def forked(self) -> AbstractContextManager[None]:
        """A context whose random draws leave the actor's generator where it was (the IDM reference
        rollout draws policy actions for the unscored slots without moving the scored episodes')."""
        return nullcontext()


class DriverActor(Actor):
    """A baseline :class:`~terrazero_env.drivers.Driver`: it reads the engine, not the observations."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.name = str(getattr(driver, "name", "driver"))

    def begin(self, engine: Any, worlds: np.ndarray, slots: np.ndarray) -> None:
        self.driver.begin(engine, np.asarray(worlds, np.int64), np.asarray(slots, np.int64))

    def act(self, engine: Any, obs: np.ndarray) -> np.ndarray:
        return self.driver.act(engine)


class PolicyActor(Actor):
    """A model with SB3's ``predict(obs, deterministic=...) -> (actions, state)``. When the model is a
    torch module's owner (it has a ``device``), torch's generators are seeded and forked around its
    sampled actions; torch is never imported here (a torch model has imported it already)."""

    name = "policy"

    def __init__(self, model: Any, deterministic: bool = False) -> None:
        self.model = model
        self.deterministic = bool(deterministic)

    def act(self, engine: Any, obs: np.ndarray) -> np.ndarray:
        return self.model.predict(np.array(obs), deterministic=self.deterministic)[0]

    def _torch(self) -> Any:
        return sys.modules.get("torch") if hasattr(self.model, "device") else None

    @contextmanager
    def seeded(self, seed: int) -> Iterator[None]:
        torch = self._torch()
        if torch is None:
            yield
            return
        device = self.model.device
        devices = [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(int(seed) % (1 << 63))
            yield

    @contextmanager
    def forked(self) -> Iterator[None]:
        torch = self._torch()
        if torch is None:
            yield
            return
        cuda = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=cuda):
            yield


class CallableActor(Actor):
    """A function of the observations (``fn(obs) -> actions``), e.g. a hand-written controller."""

    name = "callable"

    def __init__(self, fn: Callable[[np.ndarray], Any]) -> None:
        self.fn = fn

    def act(self, engine: Any, obs: np.ndarray) -> np.ndarray:
        return self.fn(np.array(obs))


def as_actor(subject: Any, deterministic: bool = False) -> Actor:
    """The :class:`Actor` for ``subject``: an actor as it is, a baseline driver, a model with
    ``predict`` (sampled or, with ``deterministic``, most likely actions), or a callable on the
    observations. Anything else raises ``TypeError``."""
    from ..drivers import Driver

    if isinstance(subject, Actor):
        return subject
    if isinstance(subject, Driver):
        return DriverActor(subject)
    if callable(getattr(subject, "predict", None)):
        return PolicyActor(subject, deterministic)
    if callable(subject):
        return CallableActor(subject)
    raise TypeError(f"cannot drive with {type(subject).__name__}: pass a model with predict(obs, deterministic), "
                    "a terrazero_env.drivers.Driver, an Actor or a callable taking the observations")


@dataclass
class Step:
    """What one step changed: ``before`` the slots live when it was taken, ``valid`` the engine's
    valid flags after it, ``ended`` the live slots whose episode ended (terminated, truncated or left
    without an agent), ``live`` those still running; ``t`` counts steps from 1."""

    t: int
    before: np.ndarray
    valid: np.ndarray
    ended: np.ndarray
    live: np.ndarray


def drive(actor: Actor, engine: Any, live: np.ndarray, watch: np.ndarray | None = None, limit: int = 1,
          until_done: bool = True) -> Iterator[Step]:
    """Step ``engine`` with ``actor`` at most ``limit`` times, yielding a :class:`Step` after each.
    ``live``: bool ``[W * K]``, the slots whose episodes are running; with ``until_done`` the loop
    stops before a step once no slot of ``watch`` (default: all) is live, else it takes all ``limit``
    steps. The caller reads whatever it records from the engine between steps."""
    n = engine.num_worlds * engine.slots_per_world
    live = np.asarray(live, bool).copy()
    watch = np.ones(n, bool) if watch is None else np.asarray(watch, bool)
    for t in range(1, int(limit) + 1):
        if until_done and not (live & watch).any():
            return
        before = live.copy()
        engine.step(np.asarray(actor.act(engine, engine.observations), np.int64).reshape(n))
        valid = np.asarray(engine.valid, bool).copy()
        ended = live & (~valid | np.asarray(engine.terminated, bool) | np.asarray(engine.truncated, bool))
        live &= ~ended
        yield Step(t, before, valid, ended, live.copy())
