"""The ``terrazero`` command line.

    terrazero maps build SRC -o OUT.tzb      validate + derive a map source and write terrabin
    terrazero maps inspect FILE [--json]     counts, bounds, handedness, lane-graph health
    terrazero maps render FILE -o map.png    draw a map with matplotlib
    terrazero maps list                      bundled maps
    terrazero maps regenerate [--out-dir D]  rebuild the bundled maps from their YAML specs
    terrazero render --preset quick --steps 200 -o rollout.mp4   record a rollout (GIF fallback)
    terrazero render --preset planner --policy reference --replay ep.tzr   a browser replay (+ ep.html)
    terrazero view runs/replays              serve replays on localhost (eval --replay DIR writes them)
    terrazero train --preset quick --total-steps 50000 --out runs/quick   train PPO with DPSA
    terrazero eval runs/quick --episodes 100 [--deterministic] [--json eval.json]   evaluate a checkpoint
    terrazero eval runs/early --vs runs/final [--chart vs.png] [--filmstrip worst.png]   paired comparison
    terrazero eval --driver reference --preset quick --maps carla_town01   a baseline driver's table
    terrazero eval runs/quick --vs idm        a run against a baseline driver on the same episodes

Bad input (an option out of range, a ``--set`` value of the wrong type, a missing or corrupt file)
ends the command with one line on stderr naming the setting and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .config.train_options import (
    SEED,
    THREADS,
    add_train_arguments,
    int_in,
    positive_float,
    prefer_huge_pages,
)
from .drivers import DRIVERS
from .evaluation.metrics import PROGRESS_REFERENCES
from .evaluation.suites import SUITES
from .maps import MapValidationError, TerrabinError, build
from .maps.analysis import summary
from .maps.sources import bundled_maps, load_built, load_source, regenerate

if TYPE_CHECKING:

    from .config import EngineConfig

__all__ = ["main"]


def _cmd_build(args: argparse.Namespace) -> int:
    from .maps.terrabin import save

    t0 = time.perf_counter()
    m = build(load_source(args.src, trust_pickle=args.trust_pickle, index=args.index, scenario=args.scenario))
    t1 = time.perf_counter()
    path = save(m, args.output)
    c = m.counts()
    print(f"built {args.src} -> {path} in {1e3 * (t1 - t0):.1f} ms: {c['lanes']} lanes, "
          f"{c['lane_points']} lane points, {c['intersections']} intersections, {path.stat().st_size / 1024:.1f} KiB")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    m = load_built(args.file, trust_pickle=args.trust_pickle, index=args.index, scenario=args.scenario)
    info = summary(m)
    md = m.metadata if isinstance(m.metadata, dict) else {}
    if md.get("source") in ("womd_tfrecord", "gpudrive_json"):
        logged = md.get("logged_signals") or {}
        info["womd"] = {"scenario_id": md.get("scenario_id"), "source": md.get("source"),
                        "sdc_track": md.get("sdc_track"), "tracks_to_predict": md.get("tracks_to_predict"),
                        "tracks_dropped": md.get("tracks_dropped"), "logged_signal_heads": len(logged.get("states", [])),
                        "logged_signal_steps": len((logged.get("states") or [[]])[0]),
                        "signals_skipped": md.get("signals_skipped")}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"map:        {info['name'] or args.file}")
    print(f"handedness: {info['handedness']}-hand traffic")
    b = info["bounds"]
    print(f"bounds:     x [{b['xmin']:.1f}, {b['xmax']:.1f}]  y [{b['ymin']:.1f}, {b['ymax']:.1f}]  "
          f"({b['width_m']:.0f} m x {b['height_m']:.0f} m)")
    for k, v in info["counts"].items():
        print(f"  {k:<14}{v}")
    print(f"lane length: {info['total_lane_length_m'] / 1000:.2f} km; lanes without predecessor: "
          f"{info['lanes_without_predecessor']}, without successor: {info['lanes_without_successor']}; "
          f"max successor gap {info['max_successor_gap_m']:.3f} m")
    if "womd" in info:
        w = info["womd"]
        print(f"WOMD scene {w['scenario_id']} ({w['source']}): SDC track {w['sdc_track']}, tracks to predict "
              f"{w['tracks_to_predict']}, {w['tracks_dropped']} tracks dropped; logged signals: "
              f"{w['logged_signal_heads']} heads x {w['logged_signal_steps']} steps ({w['signals_skipped']} skipped)")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from .maps.render import render_map

    m = load_built(args.file, trust_pickle=args.trust_pickle, index=args.index, scenario=args.scenario)
    render_map(m, args.output, dpi=args.dpi)
    print(f"wrote {args.output}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for name in bundled_maps():
        print(name)
    return 0


def _cmd_build_dataset(args: argparse.Namespace) -> int:
    from .maps.build_dataset import build_dataset

    r = build_dataset(args.inputs, args.output, workers=args.workers, cache_size=args.cache_size,
                      progress=not args.quiet)
    print(f"{len(r.scenes)} scenes in {r.out_dir} ({r.converted_files} files converted, {r.resumed_files} done "
          f"before), {len(r.rejected)} rejected (listed in {r.out_dir / 'rejected.txt'}), {r.seconds:.1f} s; "
          f"manifest {r.manifest}")
    return 0


def _cmd_regenerate(args: argparse.Namespace) -> int:
    for p in regenerate(args.out_dir):
        print(f"wrote {p} ({p.stat().st_size / 1024:.1f} KiB)")
    return 0


def _cmd_render_rollout(args: argparse.Namespace) -> int:
    import numpy as np

    from . import engine as core
    from .config.io import load_config
    from .render import RolloutRecorder

    if args.output is None and args.replay is None:
        raise ValueError("name what to write: -o OUT (.gif or .mp4), --replay FILE (.tzr), or both")
    _check_outputs(("-o", args.output), ("--replay", args.replay))
    if args.replay is not None:
        from pathlib import Path

        page = Path(f"{args.replay}.html") if Path(args.replay).suffix != ".tzr" else Path(args.replay).with_suffix(".html")
        _check_outputs(("--replay's page", str(page)))
    cfg = load_config(args.preset, **_set_overrides(args.set)).with_overrides(num_worlds=1)
    engine = core.Engine(cfg)
    engine.reset([0], [args.seed])
    rec = RolloutRecorder(engine, 0, zoom=args.zoom, dpi=args.dpi) if args.output is not None else None
    replay = None
    if args.replay is not None:
        from .replay import ReplayRecorder

        replay = ReplayRecorder(engine, 0, meta={"title": f"{args.preset}, seed {args.seed}, {args.policy} actions"})
    rng = np.random.default_rng(args.seed)
    hold = np.array([int(np.nonzero((engine.action_values(c) == 0).all(axis=1))[0][0]) for c in range(5)])
    for r in (rec, replay):
        if r is not None:
            r.capture()
    for _ in range(args.steps):
        types = engine.agent_type
        if args.policy == "random":
            nact = np.array([engine.num_actions(max(int(t), 0)) for t in types])
            acts = (rng.random(types.shape[0]) * nact).astype(np.int32)
        elif args.policy == "reference":
            acts = engine.reference_actions()
        else:  # keep the current speed and curvature
            acts = hold[np.maximum(types, 0)].astype(np.int32)
        engine.step(acts)
        for r in (rec, replay):
            if r is not None:
                r.capture()
    if rec is not None:
        out = rec.save(args.output, fps=args.fps)
        print(f"wrote {out} ({len(rec.frames)} frames)")
    if replay is not None:
        from pathlib import Path

        from .viewer import write_viewer

        path = replay.save(args.replay)
        page = write_viewer(path, Path(f"{path}.html") if path.suffix != ".tzr" else path.with_suffix(".html"))
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {replay.replay().num_frames} frames) and {page}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from terrazero_env.agents.train import train_from_args  # imports torch

    train_from_args(args)
    return 0


#: How a table names the reference its ego progress was measured against (``--progress-reference``).
_REFERENCE_TEXT = {"idm": "IDM driver from the same start", "limit": "posted-limit driver"}


def _check_outputs(*named: tuple[str, str | None]) -> None:
    """Before any work: every file a command will write must be a name that is not a link and not
    something other than a regular file (``foundation.safe_files.check_write_target``; the writes
    themselves are atomic)."""
    from .foundation.safe_files import check_write_target

    for option, path in named:
        if path is not None:
            check_write_target(path, option)


def _check_output_folder(option: str, path: str | None) -> None:
    """A folder a command writes into: named, not a link, a folder if it exists."""
    import os

    if path is None:
        return
    if not path:
        raise ValueError(f"{option}: a folder name is needed, got ''")
    if os.path.islink(path):
        raise ValueError(f"{option} {path} is a symbolic link; refusing to write through it")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} {path} exists and is not a folder")


def _eval_subjects(args: argparse.Namespace):
    """What ``terrazero eval`` compares: ``(A, B or None, config, where the config came from)``, each
    subject a ``(label, run zip or None, driver name or None)``. A is the positional run or
    ``--driver NAME``; B is ``--vs``'s run or driver (a driver's name, when no file or folder of that
    name exists). The config is ``--preset``/``--config`` when given, else the first run's saved
    config, else the quick preset (drivers alone)."""
    from pathlib import Path

    from .config.io import load_config
    from .evaluation.evaluate import resolve_run

    if (args.checkpoint is None) == (args.driver is None):
        raise ValueError("name what to evaluate: a run (checkpoint .zip, run directory or checkpoint folder) "
                         f"or a baseline with --driver {{{','.join(DRIVERS)}}}, not both")
    subjects = []
    found_cfg = None
    for spec, is_driver in ((args.checkpoint, False), (args.driver, True), (args.vs, False)):
        if spec is None:
            continue
        if is_driver or (spec in DRIVERS and not Path(spec).exists()):
            subjects.append((f"the {spec} driver", None, spec))
            continue
        zip_path, cfg, source = resolve_run(spec, args.preset)
        if found_cfg is None:
            found_cfg = (cfg, source)
        subjects.append((str(zip_path), zip_path, None))
    if args.preset is not None:
        cfg, source = load_config(args.preset), str(args.preset)
    elif found_cfg is not None:
        cfg, source = found_cfg
    else:
        cfg, source = load_config("quick"), "quick"
    return subjects[0], (subjects[1] if len(subjects) > 1 else None), cfg, source


def _eval_model(subject, args: argparse.Namespace):
    """The policy (loaded from its zip) or the baseline driver of an eval subject. Only a policy
    imports torch (and takes ``--torch-threads``): a driver runs without it."""
    from .drivers import make_driver

    _, zip_path, driver = subject
    if driver is not None:
        return make_driver(driver)
    import torch

    from terrazero_env.agents.evaluate import load_checkpoint

    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    return load_checkpoint(zip_path, device=args.device, trust_pickle=args.trust_pickle)


def _cmd_eval(args: argparse.Namespace) -> int:
    from .evaluation.evaluate import compare_policies, evaluate, format_table
    from .evaluation.metrics import format_closed_loop, format_comparison

    if args.chart is not None and args.vs is None:
        raise ValueError("--chart draws a --vs comparison: name a second run or driver with --vs")
    if args.suite is None and args.scenes is not None:
        raise ValueError("--scenes sets the scenes per family of a --suite: name one with --suite")
    if args.suite is None and args.sampled:
        raise ValueError("--sampled is for a --suite (episodes are sampled unless --deterministic): name one with --suite")
    if args.suite is not None and args.deterministic:
        raise ValueError("--suite takes the most likely actions already (--sampled samples them); drop --deterministic")
    if args.suite is not None:
        clash = [opt for opt, v in (("--vs", args.vs), ("--maps", args.maps), ("--video", args.video),
                                    ("--filmstrip", args.filmstrip), ("--episodes", args.episodes)) if v]
        if clash:
            raise ValueError(f"--suite fixes its own maps and scenes; it does not combine with {', '.join(clash)}")
    if args.episodes is None:
        args.episodes = 100
    _check_outputs(("--json", args.json), ("--video", args.video), ("--filmstrip", args.filmstrip),
                   ("--chart", args.chart))
    _check_output_folder("--replay", args.replay)
    subject_a, subject_b, cfg, source = _eval_subjects(args)
    if args.suite is not None:
        return _eval_suite(args, subject_a, cfg, source)
    if args.maps:
        cfg = cfg.with_overrides(maps=tuple(args.maps))
    model = _eval_model(subject_a, args)
    mode = "deterministic" if args.deterministic else "sampled"
    if subject_b is not None:
        model_b = _eval_model(subject_b, args)
        actions = (f"{mode} policy actions" if subject_a[2] is None or subject_b[2] is None
                   else "the drivers' actions")
        try:
            out = compare_policies(model, model_b, cfg, episodes=args.episodes, seed=args.seed,
                                   deterministic=args.deterministic, config_name=f"config {source}",
                                   filmstrip=args.filmstrip, progress_reference=args.progress_reference,
                                   **_replay_options(args))
        except RuntimeError as e:
            raise ValueError(str(e)) from e
        print(f"A = {subject_a[0]}\nB = {subject_b[0]}\nboth on {', '.join(out['a']['maps'])} (config {source}): "
              f"{args.episodes} paired episodes, seed {args.seed}, {actions}, "
              f"ego progress vs the {_REFERENCE_TEXT[args.progress_reference]}")
        print(format_comparison(out["comparison"], "A", "B"))
        _print_replays(out, args.replay)
        if args.chart:
            from .evaluation.plots import comparison_chart

            print(f"wrote {comparison_chart(out['comparison'], args.chart, 'A', 'B')}")
        if "filmstrip" in out["a"]:
            print(f"wrote {out['a']['filmstrip']} (A's lowest-scoring episodes)")
        if args.json:
            from .foundation.safe_files import atomic_write

            doc = {"a": subject_a[0], "b": subject_b[0], "config": source, "episodes": args.episodes,
                   "seed": args.seed, "deterministic": args.deterministic,
                   "progress_reference": args.progress_reference, "comparison": out["comparison"],
                   "rows_a": out["a"]["rows"], "rows_b": out["b"]["rows"],
                   "closed_loop_a": out["a"]["closed_loop"], "closed_loop_b": out["b"]["closed_loop"]}
            atomic_write(args.json, json.dumps(doc, indent=1), "--json")
            print(f"wrote {args.json}")
        return 0
    try:
        result = evaluate(model, cfg, episodes=args.episodes, seed=args.seed, deterministic=args.deterministic,
                          video=args.video, video_dpi=args.video_dpi, video_zoom=args.video_zoom, config_name=f"config {source}",
                          filmstrip=args.filmstrip, progress_reference=args.progress_reference,
                          **_replay_options(args))
    except RuntimeError as e:
        raise ValueError(str(e)) from e
    actions = f"{mode} actions" if subject_a[2] is None else "the driver's actions"
    print(f"{subject_a[0]} on {', '.join(result['maps'])} (config {source}): {result['episodes']} episodes, "
          f"seed {result['seed']}, {actions}, {result['worlds']} worlds x {result['slots_per_world']} slots "
          f"in {result['rounds']} round(s); ego progress vs the {_REFERENCE_TEXT[args.progress_reference]}")
    print(format_table(result))
    print(format_closed_loop(result["closed_loop"]))
    _print_replays(result, args.replay)
    for key in ("video", "filmstrip"):
        if key in result:
            print(f"wrote {result[key]}")
    if args.json:
        from .foundation.safe_files import atomic_write

        who = {"checkpoint": str(subject_a[1])} if subject_a[2] is None else {"driver": subject_a[2]}
        out = {**who, "config": source, **result}
        atomic_write(args.json, json.dumps(out, indent=1), "--json")
        print(f"wrote {args.json}")
    return 0


def _eval_suite(args: argparse.Namespace, subject, cfg: EngineConfig, source: str) -> int:
    """``terrazero eval RUN --suite NAME`` (or ``--driver NAME --suite NAME``): one row per family as
    it finishes, then the mean."""
    from .evaluation.interplan import format_interplan
    from .evaluation.suite_eval import evaluate_suite
    from .evaluation.suites import format_suite, get_suite

    model = _eval_model(subject, args)
    interplan = args.suite == "interplan"
    # InterPlan's interplan10 split has 10 scenes per family
    scenes = (10 if interplan else 20) if args.scenes is None else args.scenes
    names = [f.name for f in get_suite(args.suite)]
    actions = ("the driver's actions" if subject[2] is not None
               else "sampled actions" if args.sampled else "deterministic actions")
    reference = ("ego progress along the expert route (InterPlan's score)" if interplan
                 else f"ego progress vs the {_REFERENCE_TEXT[args.progress_reference]}")
    print(f"{subject[0]} (config {source}) on the {args.suite} suite: {len(names)} families x {scenes} scenes, "
          f"seed {args.seed}, {actions}, {reference}")
    try:
        out = evaluate_suite(model, cfg, args.suite, scenes, args.seed, config_name=f"config {source}",
                             progress_reference=args.progress_reference, replay=_replay_options(args).get("replay"),
                             sampled=args.sampled,
                             on_family=lambda r: print(f"  {r['family']}: score {r['score']:.1f} ({r['scenes']} scenes"
                                                       + (f" of {r['scanned']} seeds)" if "scanned" in r else ")"),
                                                       flush=True))
    except RuntimeError as e:
        raise ValueError(str(e)) from e
    print(format_interplan(out["families"], out["mean"]) if interplan else format_suite(out["families"], out["mean"]))
    _print_replays(out, args.replay)
    if args.json:
        from .foundation.safe_files import atomic_write

        who = {"checkpoint": str(subject[1])} if subject[2] is None else {"driver": subject[2]}
        atomic_write(args.json, json.dumps({**who, "config": source, **out}, indent=1), "--json")
        print(f"wrote {args.json}")
    return 0


def _replay_options(args: argparse.Namespace) -> dict[str, object]:
    """``--replay DIR`` / ``--replay-worst K`` of ``terrazero eval`` as keyword arguments."""
    if args.replay_worst is not None and args.replay is None:
        raise ValueError("--replay-worst chooses the episodes of a --replay folder: name one with --replay")
    if args.replay_worst is not None and args.suite is not None:
        raise ValueError("--suite writes a replay of every scene; --replay-worst does not combine with it")
    if args.replay is None:
        return {}
    return {"replay": args.replay, "replay_worst": args.replay_worst} if args.suite is None else {"replay": args.replay}


def _print_replays(result: dict, folder: str | None) -> None:
    if result.get("replays") is not None:
        print(f"wrote {len(result['replays'])} replay page(s) and {folder}/index.html; open them from disk, "
              f"or: terrazero view {folder}")


def _cmd_view(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .viewer import serve, write_viewer

    if args.html is not None:
        if Path(args.path).is_dir():
            raise ValueError("--html writes the page of one replay: name a .tzr file, not a folder")
        _check_outputs(("--html", args.html))
        print(f"wrote {write_viewer(args.path, args.html)}")
        return 0
    server = serve(args.path, args.port, args.host, background=True, allowed_hosts=args.allow_host)
    url = f"http://{server.server_address[0]}:{server.server_address[1]}/"
    print(f"serving {args.path} at {url} (Ctrl-C stops)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        import threading

        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _set_overrides(pairs: Sequence[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` options as config overrides (values read as YAML): the one ``--set`` parser,
    :func:`terrazero_env.config.io.parse_set_options`, which ``train`` uses too."""
    from .config.io import parse_set_options

    return parse_set_options(pairs)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line (``terrazero train: error: argument --seed: ...``)
    and exit status 2; ``--help`` prints the usage as usual."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _VersionAction(argparse.Action):
    """``--version``: build facts are read only when asked for (argparse's own action formats eagerly)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from ._build_info import version_line

        print(version_line())
        parser.exit()


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="terrazero", description="TerraZero driving simulator tools")
    p.add_argument("--version", action=_VersionAction,
                   help="print the version and how the engine was built (compiler, OpenMP, debug), then exit")
    sub = p.add_subparsers(dest="group", required=True)
    maps = sub.add_parser("maps", help="build, inspect and render maps")
    ms = maps.add_subparsers(dest="command", required=True)
    b = ms.add_parser("build", help="validate a map source (.json, .yaml spec, .tzb) and write .tzb")
    b.add_argument("src")
    b.add_argument("-o", "--output", required=True)
    b.set_defaults(func=_cmd_build)
    i = ms.add_parser("inspect", help="print counts, bounds, handedness and lane-graph health")
    i.add_argument("file", help="a map source or a bundled map name")
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=_cmd_inspect)
    r = ms.add_parser("render", help="draw a map to an image")
    r.add_argument("file", help="a map source or a bundled map name")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--dpi", type=int, default=150, help="an integer in [10, 600]")
    r.set_defaults(func=_cmd_render)
    ls = ms.add_parser("list", help="list bundled maps")
    ls.set_defaults(func=_cmd_list)
    for sp in (b, i, r):
        sp.add_argument("--trust-pickle", action="store_true",
                        help="allow a ScenarioNet .pkl (a Python pickle: reading it runs code from the file; "
                             "only for files you trust)")
        pick = sp.add_mutually_exclusive_group()
        pick.add_argument("--index", type=int, default=None,
                          help="WOMD TFRecord: the record number of the scenario to read (default 0)")
        pick.add_argument("--scenario", default=None, help="WOMD TFRecord: the scenario_id to read")
    bd = ms.add_parser("build-dataset", help="convert a folder or glob of scenario files (WOMD TFRecords, GPUDrive "
                                              "JSON, map files) into OUT/*.tzb with a manifest, in parallel, resumably")
    bd.add_argument("inputs", nargs="+", help="files, folders (searched recursively) or glob patterns")
    bd.add_argument("-o", "--output", required=True, help="the dataset folder (created; a rerun resumes)")
    bd.add_argument("--workers", type=int_in(1, 1024), default=None, help="worker processes (default: one per core)")
    bd.add_argument("--cache-size", type=int_in(1, 100_000), default=64,
                    help="maps a training process keeps open (written into the manifest)")
    bd.add_argument("--quiet", action="store_true", help="no progress output")
    bd.set_defaults(func=_cmd_build_dataset)
    g = ms.add_parser("regenerate", help="rebuild the bundled maps from their YAML specs")
    g.add_argument("--out-dir", default=None, help="where to write (default: the package's assets folder)")
    g.set_defaults(func=_cmd_regenerate)
    rr = sub.add_parser("render", help="record a rollout of one world to a video or GIF")
    rr.add_argument("--preset", default="quick")
    rr.add_argument("--steps", type=int_in(0, 10**6), default=200)
    rr.add_argument("--seed", type=SEED, default=0, help="an integer in [0, 2**64)")
    rr.add_argument("--policy", choices=["hold", "random", "reference"], default="hold",
                    help="hold: keep speed and curvature; random: uniform actions; reference: the reference driver")
    rr.add_argument("--zoom", type=positive_float(), default=None,
                    help="half-width (m) of a window on the first controlled agent")
    rr.add_argument("--dpi", type=int_in(1, 10**6), default=80)
    rr.add_argument("--fps", type=int_in(1, 1000), default=10)
    rr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="dotted config override, e.g. --set init.num_agents=[10,20]")
    rr.add_argument("-o", "--output", default=None, help=".mp4 (needs imageio-ffmpeg) or .gif")
    rr.add_argument("--replay", default=None, metavar="FILE",
                    help="also (or instead of -o) record the rollout as a browser replay FILE (.tzr) with "
                         "its self-contained page FILE.html beside it")
    rr.set_defaults(func=_cmd_render_rollout)
    t = sub.add_parser("train", help="train PPO (SMPO, V-trace, PopArt, priorities) with DPSA sampling")
    add_train_arguments(t)
    t.set_defaults(func=_cmd_train)
    ev = sub.add_parser("eval", help="closed-loop rollouts of a trained policy or a baseline driver: rates and means with 95%% CIs")
    ev.add_argument("checkpoint", nargs="?", default=None,
                    help="a checkpoint .zip (PPO.save), a run directory holding checkpoint.zip, "
                         "or a checkpoint folder holding model.zip (or --driver in its place)")
    ev.add_argument("--driver", default=None, choices=list(DRIVERS),
                    help="evaluate a baseline driver instead of a run: reference (the drivability check on "
                         "the policy's own action grid), idm (the engine's IDM law) or planner (the planner "
                         "traffic's PDM-style logic); worlds of --preset/--config (default quick)")
    ev.add_argument("--episodes", type=int_in(1, 10**7), default=None,
                    help="completed episodes (one per agent slot and world reset; default 100)")
    ev.add_argument("--preset", "--config", dest="preset", default=None,
                    help="preset name or config YAML (default: config.yaml beside the checkpoint or one folder "
                         "up; the quick preset for drivers alone)")
    ev.add_argument("--maps", nargs="+", default=None, metavar="MAP", help="maps to evaluate on (default: the config's)")
    ev.add_argument("--seed", type=SEED, default=0, help="an integer in [0, 2**64)")
    ev.add_argument("--deterministic", action="store_true", help="take the most likely action instead of sampling")
    ev.add_argument("--sampled", action="store_true",
                    help="with --suite: sample the policy's actions (seeded by --seed) instead of its most likely ones")
    ev.add_argument("--video", default=None, metavar="OUT",
                    help="record world 0 over the first round: .gif, or .mp4 (needs imageio-ffmpeg)")
    ev.add_argument("--video-dpi", type=int_in(1, 10**6), default=80, help="video resolution")
    ev.add_argument("--video-zoom", type=positive_float(), default=None, metavar="M",
                    help="half-width (m) of a window that follows the first controlled agent (default: whole map)")
    ev.add_argument("--json", default=None, metavar="OUT", help="also write the rows and per-episode outcomes as JSON")
    ev.add_argument("--vs", default=None, metavar="RUN_B",
                    help="compare with a second run or a driver (reference, idm, planner) on the same seeds and "
                         "scenes: each metric's means, "
                         "A - B and its delete-one jackknife 95%% interval (* when it excludes zero)")
    ev.add_argument("--chart", default=None, metavar="PNG", help="with --vs: bar charts of the metrics with intervals")
    ev.add_argument("--filmstrip", default=None, metavar="PNG",
                    help="6 frames of each of the 3 lowest-scoring episodes (of A with --vs)")
    ev.add_argument("--suite", default=None, choices=sorted(SUITES),
                    help="evaluate on a suite of scenario families instead, deterministic actions, one row per "
                         "family: interplan (InterPlan's eight families as scripted scenes, scored as InterPlan "
                         "scores them; terrazero_env.evaluation.interplan) or longtail (the earlier InterPlan-like "
                         "families found by a seed scan; terrazero_env.evaluation.suites)")
    ev.add_argument("--progress-reference", choices=PROGRESS_REFERENCES, default="idm",
                    help="what the score's ego progress is measured against: idm (default), the IDM driver "
                         "from the same start in the same scene (one extra rollout per round), or limit, a "
                         "driver at the lane's posted limit (the engine's reference)")
    ev.add_argument("--scenes", type=int_in(1, 10**5), default=None,
                    help="with --suite: scenes per family (default 10 for interplan, its official split; 20 for longtail)")
    ev.add_argument("--trust-pickle", action="store_true",
                    help="allow a checkpoint zip that needs unpickling (any SB3 zip not written by terrazero); "
                         "unpickling runs code from the file: only for files you trust")
    ev.add_argument("--device", default="cpu")
    ev.add_argument("--torch-threads", type=THREADS, default=None)
    ev.add_argument("--replay", default=None, metavar="DIR",
                    help="write a browser replay of every episode (or scene, with --suite) to DIR: .tzr files, "
                         "a self-contained .html page each and an index.html (with --vs: both runs side by side)")
    ev.add_argument("--replay-worst", type=int_in(1, 10**7), default=None, metavar="K",
                    help="with --replay: only the K lowest-scoring episodes (of A with --vs)")
    ev.set_defaults(func=_cmd_eval)
    vw = sub.add_parser("view", help="serve a replay (.tzr) or a folder of them on localhost in the browser viewer")
    vw.add_argument("path", help="a .tzr file or a folder searched for them")
    vw.add_argument("--port", type=int_in(0, 65535), default=8765, help="0: any free port")
    vw.add_argument("--host", default="127.0.0.1",
                    help="the address to listen on (default: loopback only; 0.0.0.0 lets the network in)")
    vw.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="a host name the server also answers to, besides localhost and the addresses it listens "
                         "on (repeatable; requests naming any other Host are refused, against DNS rebinding)")
    vw.add_argument("--open", action="store_true", help="open the page in the default browser")
    vw.add_argument("--html", default=None, metavar="OUT",
                    help="instead of serving, write one self-contained page of the replay to OUT")
    vw.set_defaults(func=_cmd_view)
    rl = sub.add_parser("realism", help="how real simulated traffic looks beside logged traffic (WOSAC-style "
                                         "likelihoods; IDM, planner and --policy rollouts)")
    from .evaluation.realism import add_arguments as _realism_arguments

    _realism_arguments(rl)
    rl.set_defaults(func=_cmd_realism)
    return p


def _cmd_realism(args: argparse.Namespace) -> int:
    from .evaluation.realism import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    prefer_huge_pages()  # the commands import torch lazily, after this
    try:
        return int(args.func(args))
    except (MapValidationError, TerrabinError, OSError, ValueError, TypeError, OverflowError, KeyError) as e:
        # Bad input, not a bug: one line naming the problem (messages already name the setting).
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"terrazero: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
