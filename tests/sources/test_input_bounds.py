"""Inputs stay inside their bounds: paths inside their roots, scan links inside their scan roots, text within its
length bounds, a byte-order mark accepted, and an empty sample world named as such.

A path a record names that escapes its root (by ``..``, by being absolute, or through a symbolic link inside
the root) is quarantined with the reason and its file is never opened: the image reader is spied on, and the
file outside holds a valid image that would otherwise be read.
"""

import csv
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import read_questions
from data_contracts.scan_datasets import SCANNET
from readers import common, mcq
from readers.common import MAX_LABEL_CHARS, MAX_OPTION_CHARS, MAX_QUESTION_CHARS, EmptySourceError
from readers.mcq import omnispatial_questions, read_omnispatial, read_spatialab, spatialab_questions
from readers.scannet import read_scannet
from readers.scannetpp import list_scannetpp_scenes
from readers.scans import list_scans, read_scans
from readers.scene_graphs import read_visual_genome

ESCAPES = "path escapes its root"


def _outside_image(path: Path) -> Path:
    """A valid PNG at ``path`` (outside every root): a reader that followed a path to it could embed it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), 200, dtype=np.uint8)).save(path)
    return path


@pytest.fixture
def opened(monkeypatch) -> list[Path]:
    """Every image file the readers open, resolved (the image readers of ``readers.mcq`` and ``readers.common``
    are spied on)."""
    paths: list[Path] = []
    for module in (mcq, common):
        real = module.read_image_file

        def spy(path, *args, _real=real, **kwargs):
            paths.append(Path(path).resolve())
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(module, "read_image_file", spy)
    return paths


def _reasons(log) -> dict[str, str]:
    return {row["record_id"]: row["reason"] for row in log.rows}


class TestPathsStayInsideTheirRoots:
    def test_spatialab_image_names_that_escape_are_quarantined_and_never_opened(self, world_copy, opened):
        root = world_copy / "spatialab"
        table = root / "spatialab.json"
        records = json.loads(table.read_text())
        outside = _outside_image(world_copy.parent / "outside.png")
        image_folder = next(folder for folder in (root / "img", root / "images") if folder.is_dir())
        (image_folder / "link.png").symlink_to(outside)
        escaping = {
            "dotdot": "../../../../../outside.png",  # by ..
            "absolute": str(outside),
            "link": "link.png",  # a link inside the root to a file outside
            "passwd": "/etc/passwd",
        }
        table.write_text(
            json.dumps(
                records
                + [
                    {**records[0], "id": record_id, "Image_Filename": name}
                    for record_id, name in escaping.items()
                ]
            )
        )

        frame, log = read_spatialab(table)

        reasons = _reasons(log)
        assert set(reasons) == set(escaping)
        for record_id, name in escaping.items():
            assert reasons[record_id].startswith(f"{ESCAPES}: ")
            assert name.rsplit("/", 1)[-1] in reasons[record_id]  # names the path
        assert "resolves to /etc/passwd" in reasons["passwd"]
        assert frame.height == len(records)  # the good rows go on
        assert opened and all(path.is_relative_to(root.resolve()) for path in opened)
        assert outside.resolve() not in opened
        assert outside.read_bytes() not in {cell["bytes"] for cell in frame["image"]}

    def test_omnispatial_paths_that_escape_are_quarantined_and_never_opened(self, world_copy, opened):
        root = world_copy / "omnispatial"
        records = json.loads((root / "data.json").read_text())
        first, second = (
            records[0],
            next(r for r in records if r["id"].split("_")[0] != records[0]["id"].split("_")[0]),
        )
        # a task folder that climbs out of the root to an image of the same name
        _outside_image(world_copy.parent / "elsewhere" / f"{first['id'].split('_')[0]}.png")
        first["task_type"] = "../../elsewhere"
        # an image inside the root that is a link to a file outside
        stem = second["id"].split("_")[0]
        linked = next((root / second["task_type"]).glob(f"{stem}.*"))
        linked.unlink()
        linked.symlink_to(_outside_image(world_copy.parent / "outside.png"))
        (root / "data.json").write_text(json.dumps(records))

        frame, log = read_omnispatial(root)

        escaped = [row for row in log.rows if row["reason"].startswith(ESCAPES)]
        assert f"../../elsewhere/{first['id']}" in {row["record_id"] for row in escaped}
        assert any(str(linked) in row["reason"] for row in escaped)
        shared = [
            r for r in records if r["id"].split("_")[0] == stem and r["task_type"] == second["task_type"]
        ]
        assert len(log) == len(escaped) == 1 + len(shared)
        assert frame.height == len(records) - len(log)
        assert all(path.is_relative_to(root.resolve()) for path in opened)

    def test_visual_genome_image_paths_that_escape_are_quarantined_and_never_opened(self, world_copy, opened):
        vg = world_copy / "visual_genome"
        image_data = json.loads((vg / "image_data.json").read_text())
        objects = json.loads((vg / "objects.json").read_text())
        outside = _outside_image(world_copy.parent / "outside.jpg")
        # an id that climbs out of the images folder, and an image that is a link to a file outside
        image_data[0]["image_id"] = objects[0]["image_id"] = "../../../outside"
        image_data[0].pop("url", None)
        linked = next((vg / "VG_100K").glob(f"{image_data[1]['image_id']}.*"))
        linked.unlink()
        linked.symlink_to(outside)
        (vg / "image_data.json").write_text(json.dumps(image_data))
        (vg / "objects.json").write_text(json.dumps(objects))

        frame, log = read_visual_genome(vg)

        reasons = _reasons(log)
        assert reasons["../../../outside"].startswith(f"{ESCAPES}: ")
        assert "outside.jpg" in reasons["../../../outside"]
        assert reasons[str(image_data[1]["image_id"])].startswith(f"{ESCAPES}: {linked}")
        assert frame.height == len(image_data) - 2
        assert outside.resolve() not in opened and opened

    def test_the_helper_follows_links_and_refuses_absolute_paths(self, tmp_path):
        root = tmp_path / "root"
        (root / "img").mkdir(parents=True)
        (root / "img" / "out.png").symlink_to(tmp_path / "out.png")
        assert common.path_escape_problem(root / "img" / "7.png", root) == ""
        assert common.path_escape_problem(root / "img" / "out.png", root) == (
            f"{ESCAPES}: {root / 'img' / 'out.png'} resolves to {tmp_path / 'out.png'}, outside {root}"
        )
        assert common.path_escape_problem(root / "/etc/passwd", root).startswith(f"{ESCAPES}: /etc/passwd")

    def test_in_a_hub_snapshot_links_may_resolve_into_the_repositorys_blobs_only(self, tmp_path):
        """``huggingface_hub`` stores a snapshot's files as links into the repository's ``blobs/``: those are read;
        a link to another repository's blob, or a name that climbs into ``blobs/``, is not."""
        repo = tmp_path / "hub" / "datasets--ciol-research--SpatiaLab"
        snapshot = repo / "snapshots" / "0123abc"
        (snapshot / "img").mkdir(parents=True)
        (repo / "blobs").mkdir()
        (repo / "blobs" / "feed").write_bytes(b"png")
        other = tmp_path / "hub" / "datasets--someone--Else" / "blobs"
        other.mkdir(parents=True)
        (other / "beef").write_bytes(b"png")
        (snapshot / "img" / "1.png").symlink_to(repo / "blobs" / "feed")
        (snapshot / "img" / "2.png").symlink_to(other / "beef")
        assert common.path_escape_problem(snapshot / "img" / "1.png", snapshot) == ""
        assert common.path_escape_problem(snapshot / "img" / "2.png", snapshot).startswith(ESCAPES)
        assert common.path_escape_problem(snapshot / "../../blobs/feed", snapshot).startswith(ESCAPES)


class TestLinkedScanFolders:
    def test_a_scan_folder_linking_to_its_root_is_refused_and_the_others_read_once(self, world_copy, caplog):
        scans = world_copy / "scannet" / "scans"
        before = list_scans(SCANNET, scans)
        frames_before = read_scans(before).frames.height
        (scans / "scene0004_00").symlink_to(".")  # the issue's loop: the other scans' frames again
        (scans / "scene0005_00").symlink_to(before[0].folder.name)  # another scan again
        (scans / "scene0006_00").symlink_to(world_copy)  # outside the root

        with caplog.at_level(logging.WARNING, logger="readers.common"):
            after = list_scans(SCANNET, scans)

        assert [scan.key for scan in after] == [scan.key for scan in before]
        refused = {
            name: message
            for name in ("scene0004_00", "scene0005_00", "scene0006_00")
            for message in caplog.messages
            if name in message
        }
        assert set(refused) == {"scene0004_00", "scene0005_00", "scene0006_00"}
        assert "resolves to its root" in refused["scene0004_00"]
        assert f"scan folder {before[0].folder.resolve()}" in refused["scene0005_00"]
        assert ESCAPES in refused["scene0006_00"]
        assert read_scans(after).frames.height == frames_before  # no frame read twice
        tables = read_scannet(scans)
        assert tables.frames.height == frames_before
        assert tables.frames.select("scene_id", "frame_index").is_duplicated().sum() == 0

    def test_a_link_to_a_scan_kept_elsewhere_inside_the_root_is_a_scan(self, tmp_path, caplog):
        root = tmp_path / "scannetpp"
        for name in ("data/a", "data/b", "archive/c"):
            (root / name).mkdir(parents=True)
        links = {
            "c": "../archive/c",  # a scan kept elsewhere inside the root: listed
            "c_again": "../archive/c",  # the same scan a second time: refused
            "into_a": "a",  # another scan: refused
            "loop": ".",  # the data folder, holding every scan: refused
            "up": "../..",  # above the root: refused
        }
        for name, target in links.items():
            (root / "data" / name).symlink_to(target)

        with caplog.at_level(logging.WARNING, logger="readers.common"):
            listed = list_scannetpp_scenes(root)

        assert [path.name for path in listed] == ["a", "b", "c"]
        assert sorted(name for name in links if any(f"/{name} refused" in m for m in caplog.messages)) == [
            "c_again",
            "into_a",
            "loop",
            "up",
        ]


class TestTextBounds:
    def test_the_issues_over_long_question_is_quarantined_with_its_length_and_bound(self, world_copy):
        data = world_copy / "omnispatial" / "data.json"
        records = json.loads(data.read_text())
        records[0]["question"] = "Q" * 50_000_017
        records[1]["options"][0] = "o" * (MAX_OPTION_CHARS + 1)
        records[2]["task_type"] = "t" * (MAX_LABEL_CHARS + 1)
        data.write_text(json.dumps(records))

        frame, log = omnispatial_questions(world_copy / "omnispatial")

        reasons = [row["reason"] for row in log.rows]
        assert reasons == [
            f"text too long: question has 50,000,017 characters, at most {MAX_QUESTION_CHARS:,} allowed",
            f"text too long: option A has {MAX_OPTION_CHARS + 1:,} characters, at most {MAX_OPTION_CHARS:,} allowed",
            f"text too long: task_type has {MAX_LABEL_CHARS + 1} characters, at most {MAX_LABEL_CHARS} allowed",
        ]
        assert frame.height == len(records) - 3
        assert frame["question"].str.len_chars().max() <= MAX_QUESTION_CHARS

    def test_a_question_at_its_bound_is_kept_and_one_over_it_is_not(self, world_copy):
        table = world_copy / "spatialab" / "spatialab.json"
        records = json.loads(table.read_text())
        records[0]["Question"] = "q" * MAX_QUESTION_CHARS
        records[1]["Question"] = "q" * (MAX_QUESTION_CHARS + 1)
        table.write_text(json.dumps(records))

        frame, log = spatialab_questions(table)

        assert _reasons(log) == {
            str(
                records[1]["id"]
            ): f"text too long: Question has 4,001 characters, at most {MAX_QUESTION_CHARS:,} allowed"
        }
        assert frame.height == len(records) - 1

    def test_over_long_object_names_and_predicates_are_quarantined(self, world_copy):
        vg = world_copy / "visual_genome"
        objects = json.loads((vg / "objects.json").read_text())
        relationships = json.loads((vg / "relationships.json").read_text())
        objects[0]["objects"][0]["names"] = ["n" * (MAX_LABEL_CHARS + 1)]
        relationships[0]["relationships"][0]["predicate"] = "p" * (MAX_LABEL_CHARS + 1)
        (vg / "objects.json").write_text(json.dumps(objects))
        (vg / "relationships.json").write_text(json.dumps(relationships))

        frame, log = read_visual_genome(vg)

        too_long = [row["reason"] for row in log.rows if row["reason"].startswith("text too long")]
        assert (
            f"text too long: name has {MAX_LABEL_CHARS + 1} characters, at most {MAX_LABEL_CHARS} allowed"
            in too_long
        )
        names = {obj["name"] for objs in frame["objects"] for obj in objs}
        predicates = {rel["predicate"] for rels in frame["relationships"] for rel in rels}
        assert max(map(len, names | predicates)) <= MAX_LABEL_CHARS


class TestByteOrderMark:
    def test_a_data_json_with_a_byte_order_mark_is_read(self, world_copy):
        data = world_copy / "omnispatial" / "data.json"
        records = json.loads(data.read_text())
        data.write_text(json.dumps(records), encoding="utf-8-sig")
        assert data.read_bytes().startswith(b"\xef\xbb\xbf")

        frame, log = omnispatial_questions(world_copy / "omnispatial")

        assert (frame.height, len(log)) == (len(records), 0)

    def test_csv_jsonl_and_visual_genome_files_with_a_byte_order_mark_are_read(self, world_copy):
        records = json.loads((world_copy / "spatialab" / "spatialab.json").read_text())
        table = world_copy / "spatialab" / "spatialab.csv"
        with table.open("w", newline="", encoding="utf-8-sig") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
        lines = world_copy / "spatialab" / "spatialab.jsonl"
        lines.write_text("\n".join(json.dumps(record) for record in records), encoding="utf-8-sig")
        for path in (table, lines):
            frame, log = spatialab_questions(path)
            assert (frame.height, len(log)) == (len(records), 0), path.name
        vg = world_copy / "visual_genome"
        for name in ("image_data.json", "objects.json"):
            (vg / name).write_text((vg / name).read_text(), encoding="utf-8-sig")
        frame, log = read_visual_genome(vg)
        assert frame.height == len(json.loads((vg / "image_data.json").read_text(encoding="utf-8-sig")))


def test_an_empty_sample_world_source_names_the_sample_world_not_a_field_never_set(world_copy, tmp_path):
    (world_copy / "omnispatial" / "data.json").write_text("[]")
    sources = SourcesResource(sample_world_root=str(world_copy))

    with pytest.raises(EmptySourceError) as failure:
        read_questions(sources, StorageResource(root=str(tmp_path / "data")))

    message = str(failure.value)
    assert message.startswith(
        f"OmniSpatial at {world_copy / 'omnispatial'} holds no record: it is the built-in sample world's"
    )
    assert "regenerate it by materializing the `sample_world` asset with `force: true`" in message
    assert "`sample_world_root`" in message
    assert "check the config field `omnispatial_root`" not in message
    assert failure.value.config_field == "sample_world_root"
