"""The ``terrazero maps`` commands, run in-process and through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from conftest import tiny_junction

from terrazero_env.cli import main
from terrazero_env.maps import bundled_maps, load
from terrazero_env.maps.jsonmap import save_json


@pytest.fixture
def json_map(tmp_path):
    p = tmp_path / "tiny.json"
    save_json(tiny_junction(tracks=True), p)
    return p


def test_build_json_to_tzb_then_inspect(tmp_path, json_map, capsys):
    out = tmp_path / "tiny.tzb"
    assert main(["maps", "build", str(json_map), "-o", str(out)]) == 0
    assert "24 lanes" in capsys.readouterr().out
    m = load(out)
    assert len(m.lanes) == 24 and m.tracks is not None and len(m.intersections) == 1
    assert main(["maps", "inspect", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["stop_lines"] == 4 and info["handedness"] == "right"
    assert info["lanes_without_successor"] == 0


@pytest.mark.parametrize("name", bundled_maps())
def test_inspect_and_render_every_bundled_map(tmp_path, name, capsys):
    assert main(["maps", "inspect", name]) == 0
    text = capsys.readouterr().out
    assert "handedness:" in text and "bounds:" in text
    png = tmp_path / f"{name}.png"
    assert main(["maps", "render", name, "-o", str(png), "--dpi", "60"]) == 0
    img = mpimg.imread(png)
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert np.unique(img.reshape(-1, img.shape[-1]), axis=0).shape[0] > 10  # not a blank canvas


def test_build_reports_invalid_input_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    d = json.loads(json.dumps({"lanes": [{"centerline": [[0, 0], [0, 0]]}]}))
    bad.write_text(json.dumps(d))
    assert main(["maps", "build", str(bad), "-o", str(tmp_path / "x.tzb")]) == 2
    err = capsys.readouterr().err
    assert "lanes.centerline[0]: zero-length segment" in err
    assert not (tmp_path / "x.tzb").exists()


def test_inspect_reports_a_corrupt_file(tmp_path, capsys):
    p = tmp_path / "broken.tzb"
    p.write_bytes(b"TZBIN\r\n\x1a" + b"\0" * 10)
    assert main(["maps", "inspect", str(p)]) == 2
    assert "truncated" in capsys.readouterr().err


def test_unknown_source_and_missing_map(tmp_path, capsys):
    assert main(["maps", "inspect", "no_such_map"]) == 2
    assert "no bundled map named 'no_such_map'" in capsys.readouterr().err
    p = tmp_path / "m.osm.gz"
    p.write_bytes(b"x")
    assert main(["maps", "inspect", str(p)]) == 2
    assert "unknown map source type" in capsys.readouterr().err


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("terrazero")  # installed beside the interpreter
    assert exe.is_file(), f"console script missing: {exe}"
    r = subprocess.run([str(exe), "maps", "list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and set(r.stdout.split()) == set(bundled_maps())


@pytest.mark.parametrize("dpi", ["100000", "0", "-5"])
def test_render_refuses_an_unbounded_resolution_in_one_line(tmp_path, capsys, dpi):
    png = tmp_path / "m.png"
    assert main(["maps", "render", "grid_town", "-o", str(png), "--dpi", dpi]) == 2
    err = capsys.readouterr().err
    assert "dpi must be an integer in [10, 600]" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not png.exists()


@pytest.mark.parametrize("argv", [["--help"], ["maps", "--help"], ["maps", "build", "--help"], ["render", "--help"],
                                  ["train", "--help"], ["eval", "--help"]])
def test_every_help_page_prints(argv, capsys):
    """``--help`` of the tool and of each subcommand prints its usage and exits 0 (argparse expands
    ``%`` in help texts, so a bare percent sign would crash the page)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "usage: terrazero" in capsys.readouterr().out
