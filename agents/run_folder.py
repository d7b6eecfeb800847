"""A training run's folder: its checkpoints, written by every rank with ``latest`` moved once all are
done (:mod:`terrazero_env.agents.checkpoint` holds the file formats), and safe copies of its files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terrazero_env.foundation.safe_files import atomic_write, read_bytes, refuse_link

from . import checkpoint as ckpt
from .distributed import Sync
from .ppo import PPO
from .settings import TrainSettings

__all__ = ["Run", "copy_file"]


@dataclass
class Run:
    out: Path
    settings: TrainSettings
    sync: Sync
    model: PPO
    display: Any
    #: The checkpoint folder :meth:`save` wrote last (None before the first): what ``latest`` names
    #: once every rank is done, known here without reading the pointer back.
    latest: Path | None = None

    def save(self, iteration: int, seconds: float) -> Path:
        """A checkpoint after ``iteration`` iterations and ``seconds`` of training, written by every
        rank; ``latest`` moves when all are done."""
        folder = self.out / "checkpoints" / f"iter_{iteration:06d}"
        if self.sync.is_main:
            folder.mkdir(parents=True, exist_ok=True)
        self.sync.barrier()
        folder.mkdir(parents=True, exist_ok=True)
        ckpt._run_path(self.out, self.out / "checkpoints", "checkpoint folder")
        ckpt._run_path(self.out, folder, "checkpoint folder")
        extra = {"iteration": iteration, "seconds": seconds}
        ckpt.save_rank_state(self.model, folder / f"rank{self.sync.rank}.pt", self.sync.rank, self.sync.world_size,
                             extra)
        if self.sync.is_main:
            refuse_link(folder / "model.zip", "checkpoint file")
            self.model.save(folder / "model.zip")
            copy_file(self.out / "config.yaml", folder / "config.yaml")
        self.sync.barrier()
        if self.sync.is_main:
            ckpt.mark_latest(folder)
        self.latest = folder
        return folder


def copy_file(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst`` atomically (never writing through a link planted at ``dst``)."""
    atomic_write(dst, read_bytes(src, 1 << 34, "run file"), "run file")
