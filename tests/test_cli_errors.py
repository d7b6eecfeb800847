"""Every bad input to the ``terrazero`` command ends it with exactly one line on stderr naming the
setting, and exit status 2, never a traceback: out-of-range or malformed numbers (negative or
2**70 seeds, ``--episodes -1``, ``--worlds 0``, a huge ``--total-steps``), ``--set`` values of the
wrong type or shape, unknown presets and missing or corrupt files, for train, eval, render and maps.
Run in-process (an uncaught exception fails the test) plus a few through the console script."""

from __future__ import annotations

import subprocess
import sys

import pytest

from terrazero_env.cli import main

BIG = str(2**70)

CASES = [  # (argv, fragment the one line must contain)
    ("train --set init.num_agents=abc", "InitConfig.num_agents"),
    ("train --set num_worlds=1e99", "EngineConfig.num_worlds"),
    (f"train --set num_worlds={BIG}", "EngineConfig.num_worlds"),
    ("train --set foo", "--set expects KEY=VALUE"),
    ("train --set dt=[1,2]", "EngineConfig.dt"),
    ("train --set nosuch.key=3", "unknown keys ['nosuch']"),
    ("train --total-steps 10000000000000", "argument --total-steps"),
    ("train --total-steps -1", "argument --total-steps"),
    ("train --total-steps 1e5", "argument --total-steps: expected an integer"),
    ("train --seed -5", "argument --seed: must lie in [0, 2**64 - 1]"),
    (f"train --seed {BIG}", "argument --seed"),
    ("train --worlds 0", "argument --worlds"),
    ("train --n-steps 0", "argument --n-steps"),
    ("train --threshold nan", "argument --threshold"),
    ("train --torch-threads 0", "argument --torch-threads"),
    ("train --config {tmp}/missing.yaml", "missing.yaml"),
    ("train --preset nosuch", "unknown preset 'nosuch'"),
    ("train --resume {tmp}/no_run", "cannot resume"),
    ("eval {tmp}/missing.zip", "checkpoint not found"),
    ("eval {tmp}/emptyrun", "no checkpoint.zip"),
    ("eval {tmp}/emptyrun --episodes -1", "argument --episodes"),
    ("eval {tmp}/emptyrun --episodes many", "argument --episodes: expected an integer"),
    ("eval {tmp}/emptyrun --seed -5", "argument --seed"),
    (f"eval {{tmp}}/emptyrun --seed {BIG}", "argument --seed"),
    ("eval {tmp}/emptyrun --torch-threads 100000", "argument --torch-threads"),
    ("render --set init.num_agents=abc -o {tmp}/x.gif", "InitConfig.num_agents"),
    ("render --set foo -o {tmp}/x.gif", "--set expects KEY=VALUE"),
    ("render --seed -5 -o {tmp}/x.gif", "argument --seed"),
    ("render --steps -1 -o {tmp}/x.gif", "argument --steps"),
    ("render --preset nosuch -o {tmp}/x.gif", "unknown preset"),
    ("render --dpi 0 -o {tmp}/x.gif", "argument --dpi"),
    ("render --fps 0 -o {tmp}/x.gif", "argument --fps"),
    ("render --zoom -1 -o {tmp}/x.gif", "argument --zoom"),
    ("maps inspect {tmp}/missing.tzb", "not found"),
    ("maps inspect {tmp}/bad.tzb", "not a terrabin file"),
    ("maps inspect {tmp}/bad.json", "not valid JSON"),
    ("maps build {tmp}/bad.json -o {tmp}/out.tzb", "not valid JSON"),
    ("maps build grid_town -o {tmp}/no_dir/x.tzb", "No such file or directory"),
    ("maps render grid_town -o {tmp}/x.png --dpi 100000", "dpi"),
    ("maps render grid_town -o {tmp}/x.png --dpi abc", "argument --dpi: invalid int value"),
    ("maps render grid_town -o {tmp}/no_dir/x.png", "No such file or directory"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "bad.tzb").write_bytes(b"garbage")
    (d / "bad.json").write_text("{")
    (d / "emptyrun").mkdir()
    return d


@pytest.mark.parametrize("argv,fragment", CASES, ids=[a for a, _ in CASES])
def test_bad_input_is_one_line_naming_the_setting(files, capsys, argv, fragment):
    """Property: exit status 2, nothing but one line on stderr, and that line names the problem."""
    args = argv.format(tmp=files).split()
    try:
        rc = main(args)
    except SystemExit as e:  # argparse usage errors exit through SystemExit
        rc = e.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0]
    assert lines[0].startswith("terrazero")


@pytest.mark.parametrize("argv,fragment", [
    ("eval {tmp}/emptyrun --seed -5", "argument --seed"),
    ("train --set init.num_agents=abc", "InitConfig.num_agents"),
    ("maps inspect {tmp}/bad.tzb", "not a terrabin file"),
])
def test_console_script_prints_one_line_and_exits_2(files, argv, fragment):
    """Property: the same holds end to end through a fresh interpreter (no traceback on stderr)."""
    r = subprocess.run([sys.executable, "-m", "terrazero_env.cli", *argv.format(tmp=files).split()],
                       capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and fragment in lines[0], r.stderr


@pytest.mark.parametrize("seed,error", [(-1, ValueError), (2**64, ValueError), (2**128, ValueError), (5.2, TypeError)])
def test_evaluate_refuses_seeds_that_would_alias(seed, error):
    """Property: evaluate() takes seeds in [0, 2**64) only; -1, 2**64 and 2**128 no longer wrap onto
    other seeds' episodes, and a float is not truncated."""
    from terrazero_env.agents.evaluate import evaluate

    from terrazero_env.config.io import load_config

    with pytest.raises(error, match="seed"):
        evaluate(None, load_config("quick"), episodes=1, seed=seed)
