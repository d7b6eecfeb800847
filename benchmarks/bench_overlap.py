"""Collection and update at once on two cores, by threads of one process: what it would gain.

    python benchmarks/bench_overlap.py [--preset quick] [--iterations 6]

Builds two learners as ``terrazero train --preset PRESET`` does (seeds 0 and 1, one torch thread
each, one warm-up iteration), then times, per iteration, (1) the collection of one rollout alone
(``PPO.collect_rollouts``: engine steps and the policy's forward passes), (2) one update alone
(``PPO.train``), and (3) the two at once: one thread collects rollouts on the first learner while
another updates the second. The engine step and torch's kernels release the GIL; the Python between
them does not, so the threads slow each other down. The last line estimates the iteration of an
overlapped learner (collection of the next rollout while the update of this one runs) against the
serial one: during the shared time the update advances at its concurrent rate, after it alone.
Wall-clock seconds; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import threading
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="quick")
    p.add_argument("--iterations", type=int, default=6)
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    from terrazero_env.agents.train import TrainSettings, build_model

    from terrazero_env import load_config
    from terrazero_env.config.io import load_train_section

    cfg = load_config(args.preset)

    def learner(seed: int):
        d = dict(load_train_section(args.preset))
        d["preset"] = args.preset
        model = build_model(cfg, TrainSettings.from_mapping(d), seed=seed, device="cpu")
        model.learn(model.n_steps * model.n_envs)
        _, callback = model._setup_learn(10**12, None, reset_num_timesteps=False)
        return model, callback

    (a, cb_a), (b, _) = learner(0), learner(1)
    k = args.iterations

    def collect(n: int) -> None:
        for _ in range(n):
            a.collect_rollouts(a.env, cb_a, a.rollout_buffer, a.n_steps)

    def update(n: int) -> None:
        for _ in range(n):
            b.train()

    t = time.perf_counter()
    collect(k)
    c_alone = (time.perf_counter() - t) / k
    t = time.perf_counter()
    update(k)
    u_alone = (time.perf_counter() - t) / k
    took: dict[str, float] = {}

    def timed(name: str, fn, n: int) -> None:
        t0 = time.perf_counter()
        fn(n)
        took[name] = (time.perf_counter() - t0) / n

    # twice as many collections, so the update runs beside a collection all along
    threads = [threading.Thread(target=timed, args=("collect", collect, 2 * k)),
               threading.Thread(target=timed, args=("update", update, k))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    c_both, u_both = took["collect"], took["update"]
    # overlapped iteration: the update runs at its concurrent rate while the collection lasts
    done_during = c_both / u_both  # fraction of an update done while one collection runs
    overlapped = c_both + (1.0 - done_during) * u_alone if done_during < 1.0 else u_both
    serial = c_alone + u_alone
    print(f"alone: collection {1e3 * c_alone:.1f} ms, update {1e3 * u_alone:.1f} ms, serial iteration {1e3 * serial:.1f} ms")
    print(f"at once: collection {1e3 * c_both:.1f} ms, update {1e3 * u_both:.1f} ms")
    print(f"overlapped iteration (estimate) {1e3 * overlapped:.1f} ms: {serial / overlapped:.2f}x the serial one")
    a.env.close()
    b.env.close()


if __name__ == "__main__":
    main()
