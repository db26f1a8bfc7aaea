"""The `spatial-sample-world` command line."""

from __future__ import annotations

import json

import pytest

from assets.sample_world.cli import main


def test_cli_writes_a_world_and_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "world"
    status = main(
        [
            "--out",
            str(out),
            "--scenes",
            "1",
            "--views",
            "2",
            "--seed",
            "5",
            "--width",
            "64",
            "--height",
            "48",
            "--no-progress",
            "--json",
        ]
    )
    assert status == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_scenes"] == 1 and summary["num_views"] == 2
    assert summary["root"] == str(out)
    truth = json.loads((out / "truth" / "world.json").read_text())
    assert truth["config"]["seed"] == 5 and truth["config"]["width"] == 64


def test_cli_uses_the_storage_root_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPATIAL_DATA_ROOT", str(tmp_path))
    assert main(["--scenes", "1", "--views", "1", "--width", "64", "--height", "48", "--no-progress"]) == 0
    assert (tmp_path / "sample_world" / "truth" / "world.json").is_file()
    assert "sample world:" in capsys.readouterr().out


def test_cli_rejects_a_bad_config(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "w"), "--width", "65", "--height", "48"]) == 2
    assert "depth_downsample" in capsys.readouterr().err


def test_cli_chooses_the_camera_path_and_the_scan_realism(tmp_path, capsys):
    out = tmp_path / "world"
    flags = ["--scenes", "1", "--views", "4", "--width", "64", "--height", "48", "--no-progress"]
    assert main(["--out", str(out), *flags, "--camera-path", "handheld", "--scan-realism", "exact"]) == 0
    config = json.loads((out / "truth" / "world.json").read_text())["config"]
    assert config["camera_path"] == "handheld" and config["scan_realism"] == "exact"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["--out", str(tmp_path / "w2"), *flags, "--camera-path", "spiral"])
    assert exited.value.code == 2
    assert "invalid choice: 'spiral'" in capsys.readouterr().err


def test_the_config_the_asset_and_the_command_share_one_default_camera_path():
    from assets.sample_world.cli import make_parser
    from assets.sample_world.config import DEFAULT_WORLD_CAMERA_PATH, SampleWorldConfig
    from assets.sources.sample_world import SampleWorldAssetConfig

    command = make_parser().parse_args([]).camera_path
    assert SampleWorldConfig().camera_path == SampleWorldAssetConfig().camera_path == command
    assert command == DEFAULT_WORLD_CAMERA_PATH == "mixed"


def test_the_command_and_the_asset_show_each_setting_with_the_config_s_default_and_description():
    from assets.sample_world.cli import FLAGS, make_parser
    from assets.sample_world.config import setting_default, setting_help
    from assets.sources.sample_world import SampleWorldAssetConfig

    actions = {action.dest: action for action in make_parser()._actions}
    for name in FLAGS.values():
        assert (actions[name].default, actions[name].help) == (setting_default(name), setting_help(name)), (
            name
        )
    asset_fields = {
        name: field for name, field in SampleWorldAssetConfig.model_fields.items() if name != "force"
    }
    assert set(asset_fields) <= set(FLAGS.values())
    for name, field in asset_fields.items():
        assert (field.default, field.description) == (setting_default(name), setting_help(name)), name
    assert (
        setting_default("arkitscenes_videos") == setting_default("scannetpp_scenes") == 1
    )  # the default world's
