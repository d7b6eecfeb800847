"""Where replays are written: ``terrazero eval --replay DIR`` (every episode or the K worst, with
``--vs`` side by side, with ``--suite`` an index per family), ``terrazero render --replay FILE`` and
``terrazero view``; each replay focused on its episode's agent and titled with its score."""

from __future__ import annotations

import re

import pytest

from terrazero_env.cli import main
from terrazero_env.replay import load_replay


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_replay_writes_every_episode_with_its_score(tmp_path, capsys):
    d = tmp_path / "all"
    code, out, err = _run(capsys, "eval", "--driver", "reference", "--preset", "quick", "--maps", "grid_town",
                          "--episodes", "4", "--progress-reference", "limit", "--replay", str(d))
    assert code == 0, err
    pages = sorted(p.name for p in d.glob("episode_*.html"))
    assert pages == [f"episode_{i:04d}.html" for i in range(4)]
    index = (d / "index.html").read_text()
    assert all(p in index for p in pages)
    for i in range(4):
        rep = load_replay(d / f"episode_{i:04d}.tzr")
        focus = rep.meta["focus"]
        assert rep.arrays["slot"][0, focus] >= 0, "the focus is the episode's controlled agent"
        assert rep.meta["episode"] == i and "score" in rep.meta and rep.meta["length"] + 1 <= rep.num_frames
    assert "wrote 4 replay page(s)" in out


def test_eval_replay_worst_keeps_the_lowest_scores(tmp_path, capsys):
    d = tmp_path / "worst"
    code, _, err = _run(capsys, "eval", "--driver", "reference", "--preset", "quick", "--maps", "grid_town",
                        "--episodes", "6", "--progress-reference", "limit", "--replay", str(d), "--replay-worst", "2",
                        "--json", str(tmp_path / "e.json"))
    assert code == 0, err
    import json

    scores = json.loads((tmp_path / "e.json").read_text())["closed_loop"]["score"]
    kept = sorted(int(re.findall(r"\d+", p.name)[0]) for p in d.glob("episode_*.tzr"))
    assert len(kept) == 2
    assert sorted(scores[i] for i in kept) == sorted(scores)[:2]


def test_eval_vs_replay_pairs_the_same_episodes_side_by_side(tmp_path, capsys):
    d = tmp_path / "vs"
    code, _, err = _run(capsys, "eval", "--driver", "reference", "--vs", "idm", "--preset", "quick", "--maps",
                        "grid_town", "--episodes", "3", "--progress-reference", "limit", "--replay", str(d),
                        "--replay-worst", "2")
    assert code == 0, err
    a = sorted(p.name for p in (d / "a").glob("*.tzr"))
    assert a == sorted(p.name for p in (d / "b").glob("*.tzr")) and len(a) == 2
    for name in a:
        ra, rb = load_replay(d / "a" / name), load_replay(d / "b" / name)
        assert (ra.arrays["x"][0] == rb.arrays["x"][0]).all(), "both start from the same scene"
        movers = ra.header["names"]["movers"]
        fa, fb = ra.meta["focus"], rb.meta["focus"]
        assert movers[int(ra.arrays["mover"][1, fa])] == "policy"      # the reference driver's actions
        assert movers[int(rb.arrays["mover"][1, fb])] == "idm_ego"     # the IDM ego
    vs = sorted(p.name for p in d.glob("vs_*.html"))
    assert len(vs) == 2 and all(v in (d / "index.html").read_text() for v in vs)
    page = (d / vs[0]).read_text()
    assert page.count("data-tz-replay=") == 2 and 'data-tz-label="A"' in page


def test_eval_suite_replay_writes_an_index_per_family(tmp_path, capsys):
    d = tmp_path / "suite"
    code, _, err = _run(capsys, "eval", "--driver", "reference", "--suite", "longtail", "--scenes", "1",
                        "--progress-reference", "limit", "--replay", str(d))
    assert code == 0, err
    index = (d / "index.html").read_text()
    families = sorted(p.name for p in d.iterdir() if p.is_dir())
    assert len(families) == 8 and index.count("<tr>") == 8
    for fam in families:
        rep = load_replay(d / fam / "scene_0000.tzr")
        assert rep.meta["group"] == fam and f"{fam}/scene_0000.html" in index


def test_replay_options_are_checked(tmp_path, capsys):
    code, _, err = _run(capsys, "eval", "--driver", "reference", "--episodes", "2", "--replay-worst", "1")
    assert code == 2 and "--replay-worst" in err and "--replay" in err
    code, _, err = _run(capsys, "eval", "--driver", "reference", "--suite", "longtail", "--replay", str(tmp_path),
                        "--replay-worst", "1")
    assert code == 2 and "does not combine" in err


def test_render_replay_and_view_html(tmp_path, capsys):
    tzr = tmp_path / "r" / "ep.tzr"
    code, out, err = _run(capsys, "render", "--preset", "quick", "--policy", "reference", "--steps", "30",
                          "--replay", str(tzr))
    assert code == 0, err
    rep = load_replay(tzr)
    assert rep.num_frames == 31 and (tmp_path / "r" / "ep.html").is_file()
    code, out, err = _run(capsys, "view", str(tzr), "--html", str(tmp_path / "page.html"))
    assert code == 0 and (tmp_path / "page.html").read_text().count("data-tz-replay=") == 1
    code, _, err = _run(capsys, "view", str(tmp_path), "--html", str(tmp_path / "x.html"))
    assert code == 2 and "folder" in err
    code, _, err = _run(capsys, "view", str(tmp_path / "missing"))
    assert code == 2 and "no such replay" in err
    code, _, err = _run(capsys, "render", "--preset", "quick")
    assert code == 2 and "name what to write" in err


@pytest.mark.parametrize("argv", [["view", "--help"]])
def test_view_help_prints(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0 and "usage: terrazero view" in capsys.readouterr().out
