"""Each raw-format reader on the sample world and on broken copies of it."""

import json

import numpy as np
import polars as pl
import pytest

from assets.sources.assets import with_origin
from data_contracts import mcq_questions, rgbd_frames, rgbd_scenes, scene_graphs
from data_contracts.validation import check_frame
from readers.common import MissingInputError
from readers.mcq import read_omnispatial, read_spatialab
from readers.scannet import read_scannet, rigid_pose_problem
from readers.scene_graphs import read_visual_genome


def _truth(world):
    return json.loads((world / "truth" / "world.json").read_text())


class TestOmniSpatial:
    def test_reads_every_question(self, small_world):
        records = json.loads((small_world / "omnispatial" / "data.json").read_text())
        frame, log = read_omnispatial(small_world / "omnispatial")
        assert frame.height == len(records) and len(log) == 0
        assert check_frame(with_origin(frame, "sample_world"), mcq_questions.McqQuestionsWithImage).passed
        by_id = {(r["task_type"], r["id"]): r for r in records}
        for row in frame.iter_rows(named=True):
            source, task_type, record_id = row["question_id"].split("/")
            assert (source, task_type) == ("omnispatial", row["task_type"])
            record = by_id[(task_type, record_id)]
            assert row["answer_index"] == record["answer"]  # 0-based index kept as is
            assert row["answer"] == "ABCD"[record["answer"]]
        assert set(frame["split"]) <= {"train", "test"}

    def test_split_is_stable_and_groups_images(self, small_world):
        first, _ = read_omnispatial(small_world / "omnispatial")
        second, _ = read_omnispatial(small_world / "omnispatial")
        assert first["split"].to_list() == second["split"].to_list()
        prefixes = first.with_columns(first["question_id"].str.extract(r"/(\d+)_", 1).alias("image"))
        assert prefixes.group_by("image").agg(pl.col("split").n_unique().alias("n"))["n"].max() == 1

    def test_the_hash_split_has_a_test_image(self, small_world):
        """A set whose every image hashes into train (here: a tiny test fraction) still has one image in test, so a
        benchmark read from its test split is not empty."""
        frame, _ = read_omnispatial(small_world / "omnispatial", test_fraction=1e-9)
        images = frame.with_columns(frame["question_id"].str.extract(r"/(\d+)_", 1).alias("image"))
        assert images.filter(pl.col("split") == "test")["image"].n_unique() == 1
        assert images.filter(pl.col("split") == "train").height > 0

    def test_broken_rows_are_quarantined(self, world_copy):
        data_path = world_copy / "omnispatial" / "data.json"
        records = json.loads(data_path.read_text())
        records[0]["answer"] = len(records[0]["options"]) + 3  # out of range
        del records[1]["question"]  # missing field
        # a missing image and a corrupt image
        victim, corrupt = records[2], records[-1]

        def image_of(r):
            return next((world_copy / "omnispatial" / r["task_type"]).glob(r["id"].split("_")[0] + ".*"))

        image_of(victim).unlink()
        image_of(corrupt).write_bytes(b"not an image at all")
        data_path.write_text(json.dumps(records))
        frame, log = read_omnispatial(world_copy / "omnispatial")
        reasons = log.reason_counts()
        assert reasons["answer out of range"] == 1
        assert reasons["missing fields"] == 1
        assert reasons["missing image"] >= 1 and reasons["corrupt image"] >= 1
        assert frame.height + len(log) == len(records)  # nothing lost
        assert all(row["source_file"] for row in log.rows)

    def test_a_null_question_is_quarantined_naming_it(self, world_copy):
        data_path = world_copy / "omnispatial" / "data.json"
        records = json.loads(data_path.read_text())
        records[0]["question"] = None
        records[1]["question"] = "   "
        data_path.write_text(json.dumps(records))
        frame, log = read_omnispatial(world_copy / "omnispatial")
        assert [(row["record_id"], row["reason"]) for row in log.rows] == [
            (records[0]["id"], "missing fields: question is null"),
            (records[1]["id"], "missing fields: question is blank"),
        ]
        assert all(row["source_file"] == str(data_path) for row in log.rows)
        kept = {row["question_id"].rsplit("/", 1)[-1] for row in frame.iter_rows(named=True)}
        assert kept == {(r["id"]) for r in records[2:]}
        assert frame["question"].to_list() == [r["question"] for r in records[2:]]

    def test_a_wrongly_typed_id_is_quarantined_as_such(self, world_copy):
        """A list, dict or float id is reported as a wrong id type (by its position), not as a missing image."""
        data_path = world_copy / "omnispatial" / "data.json"
        records = json.loads(data_path.read_text())
        records[0]["id"] = [1, 0]
        records[1]["id"] = {"image": 1}
        records[2]["id"] = 12.0
        records[3]["task_type"] = ["Complex_Logic"]
        data_path.write_text(json.dumps(records))
        frame, log = read_omnispatial(world_copy / "omnispatial")
        assert [(row["record_id"], row["reason"]) for row in log.rows] == [
            ("#0", "wrong id type: id is a list ([1, 0]), expected text or an integer"),
            ("#1", "wrong id type: id is a dict ({'image': 1}), expected text or an integer"),
            ("#2", "wrong id type: id is a float (12.0), expected text or an integer"),
            (records[3]["id"], "wrong field type: task_type is a list (['Complex_Logic']), expected text"),
        ]
        assert frame.height == len(records) - 4

    def test_an_integer_id_is_an_id(self, world_copy):
        """An integer id names its image like the text id does."""
        data_path = world_copy / "omnispatial" / "data.json"
        records = json.loads(data_path.read_text())
        image_number = int(records[0]["id"].split("_")[0])
        records = [{**records[0], "id": image_number}]
        data_path.write_text(json.dumps(records))
        frame, log = read_omnispatial(world_copy / "omnispatial")
        assert len(log) == 0
        assert frame["question_id"].to_list() == [f"omnispatial/{records[0]['task_type']}/{image_number}"]

    def test_an_empty_file_gives_no_row_and_no_record(self, world_copy):
        """``[]`` reads as nothing at all (the source asset then fails, see ``test_empty_sources``)."""
        (world_copy / "omnispatial" / "data.json").write_text("[]")
        frame, log = read_omnispatial(world_copy / "omnispatial")
        assert frame.height == 0 and len(log) == 0

    def test_malformed_json_quarantines_the_file(self, world_copy):
        (world_copy / "omnispatial" / "data.json").write_text('[{"id": "1_0", ')
        frame, log = read_omnispatial(world_copy / "omnispatial")
        assert frame.height == 0 and list(log.reason_counts()) == ["malformed JSON"]

    def test_missing_folder_names_the_config_field(self, tmp_path):
        with pytest.raises(MissingInputError, match="omnispatial_root"):
            read_omnispatial(tmp_path / "nowhere")


class TestSpatiaLab:
    def test_one_based_answers(self, small_world):
        records = json.loads((small_world / "spatialab" / "spatialab.json").read_text())
        frame, log = read_spatialab(small_world / "spatialab" / "spatialab.json")
        assert frame.height == len(records) and len(log) == 0
        by_id = {str(r["id"]): r for r in records}
        for row in frame.iter_rows(named=True):
            record = by_id[row["question_id"].split("/", 1)[1]]
            assert row["answer_index"] == int(record["Answer"]) - 1
            assert row["options"][row["answer_index"]] == record[f"Option_{record['Answer']}"]

    def test_csv_with_digits_in_options(self, world_copy):
        import csv

        records = json.loads((world_copy / "spatialab" / "spatialab.json").read_text())
        records[0]["Option_1"] = "2 metres"
        records[0]["Answer"] = 2
        path = world_copy / "spatialab" / "spatialab.csv"
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
        frame, log = read_spatialab(path)
        assert frame.height == len(records) and frame["answer"][0] == "B"

    def test_wrong_types_and_null_fields_are_quarantined(self, world_copy):
        path = world_copy / "spatialab" / "spatialab.json"
        records = json.loads(path.read_text())
        records[0]["id"] = [7]
        records[1]["Question"] = None
        records[2]["Image_Filename"] = ["a.png"]
        path.write_text(json.dumps(records))
        frame, log = read_spatialab(path)
        assert [(row["record_id"], row["reason"]) for row in log.rows] == [
            ("#0", "wrong id type: id is a list ([7]), expected text or an integer"),
            (str(records[1]["id"]), "missing fields: Question is null"),
            (str(records[2]["id"]), "wrong field type: Image_Filename is a list (['a.png']), expected text"),
        ]
        assert frame.height == len(records) - 3


class TestVisualGenome:
    def test_reads_objects_relations_attributes(self, small_world):
        frame, log = read_visual_genome(small_world / "visual_genome")
        objects = json.loads((small_world / "visual_genome" / "objects.json").read_text())
        assert frame.height == len(objects) and len(log) == 0
        assert check_frame(with_origin(frame, "sample_world"), scene_graphs.SceneGraphs).passed
        assert frame["relationships"].list.len().sum() > 0
        assert any(len(o["attributes"]) for objs in frame["objects"] for o in objs)

    def test_quirks_are_quarantined(self, world_copy):
        vg = world_copy / "visual_genome"
        objects = json.loads((vg / "objects.json").read_text())
        relationships = json.loads((vg / "relationships.json").read_text())
        image_data = json.loads((vg / "image_data.json").read_text())
        first = objects[0]["objects"]
        first[0]["w"] = 0  # zero-area box
        first[1]["x"] = image_data[0]["width"] + 50  # entirely outside the image
        relationships[0]["relationships"].append(
            {
                "relationship_id": 999,
                "predicate": "ON",
                "subject": {"object_id": 123456, "name": "ghost"},
                "object": {"object_id": first[2]["object_id"], "names": ["thing"]},
            }
        )
        (vg / "objects.json").write_text(json.dumps(objects))
        (vg / "relationships.json").write_text(json.dumps(relationships))
        missing_image = next((vg / "VG_100K").glob(f"{image_data[-1]['image_id']}.*"))
        missing_image.unlink()
        frame, log = read_visual_genome(vg)
        reasons = log.reason_counts()
        assert reasons["bad box"] == 2
        assert reasons["dangling relation"] >= 1
        assert reasons["missing image"] == 1
        assert frame.height == len(image_data) - 1
        assert check_frame(with_origin(frame, "sample_world"), scene_graphs.SceneGraphs).passed


class TestScanNet:
    def test_reads_frames_sorted_numerically(self, small_world):
        tables = read_scannet(small_world / "scannet" / "scans")
        truth = _truth(small_world)
        assert tables.scenes.height == len(truth["scenes"])
        assert check_frame(with_origin(tables.frames, "sample_world"), rgbd_frames.RgbdFrames).passed
        assert check_frame(with_origin(tables.scenes, "sample_world"), rgbd_scenes.RgbdScenes).passed
        for scene in tables.scenes.iter_rows(named=True):
            indices = tables.frames.filter(tables.frames["scene_id"] == scene["scene_id"])[
                "frame_index"
            ].to_list()
            assert indices == sorted(indices) and len(indices) == scene["num_frames"]
        row = tables.frames.row(0, named=True)
        assert row["depth_scale"] == 1000.0
        assert row["depth_width"] < row["color_width"]  # ScanNet: depth is coarser than colour

    def test_bad_poses_are_quarantined(self, world_copy):
        scene = sorted((world_copy / "scannet" / "scans").iterdir())[0]
        (scene / "pose" / "0.txt").write_text("-inf -inf -inf -inf\n" * 4)
        (scene / "pose" / "1.txt").write_text("2 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n")  # scaled, not rigid
        tables = read_scannet(world_copy / "scannet" / "scans")
        reasons = tables.quarantine.reason_counts()
        assert reasons["pose is not finite (ScanNet marks invalid poses with -inf)"] == 1
        assert reasons["pose is not rigid"] == 1
        kept = tables.frames.filter(tables.frames["scene_id"] == scene.name)["frame_index"].to_list()
        assert 0 not in kept and 1 not in kept and len(kept) >= 1

    def test_a_frame_missing_one_file_is_quarantined(self, world_copy):
        """A frame whose colour image or depth image is gone is left out with a record naming the missing file."""
        scene = sorted((world_copy / "scannet" / "scans").iterdir())[0]
        (scene / "color" / "0.jpg").unlink()
        (scene / "depth" / "1.png").unlink()
        tables = read_scannet(world_copy / "scannet" / "scans")
        records = {row["record_id"]: row for row in tables.quarantine.to_frame().iter_rows(named=True)}
        assert records[f"{scene.name}/0"]["reason"] == (
            f"missing file: frame lacks its colour image {scene / 'color' / '0.jpg'}"
        )
        assert records[f"{scene.name}/1"]["reason"] == (
            f"missing file: frame lacks its depth image {scene / 'depth' / '1.png'}"
        )
        assert records[f"{scene.name}/1"]["source_file"] == str(scene / "depth" / "1.png")
        kept = tables.frames.filter(tables.frames["scene_id"] == scene.name)["frame_index"].to_list()
        assert kept == [2]

    def test_an_empty_scan_folder_is_quarantined(self, world_copy):
        """An empty scan folder gives one record naming it; the other scans are read as before."""
        scans = world_copy / "scannet" / "scans"
        scene_ids = sorted(path.name for path in scans.iterdir())
        (scans / "scene9999_00").mkdir()
        tables = read_scannet(scans)
        (record,) = tables.quarantine.rows
        assert record["record_id"] == "scene9999_00"
        assert record["reason"].startswith(f"empty scan folder: {scans / 'scene9999_00'} holds no file")
        assert sorted(tables.scenes["scene_id"].to_list()) == scene_ids
        assert tables.frames.height == sum(len(list((scans / s / "color").iterdir())) for s in scene_ids)

    def test_one_scan_folder_reads_as_its_scans_folder_does(self, world_copy):
        """``read_scannet`` of one scan's folder gives that scan's rows, and an empty one its record."""
        scans = world_copy / "scannet" / "scans"
        scene = sorted(scans.iterdir())[0]
        whole = read_scannet(scans)
        alone = read_scannet(scene)
        assert alone.scenes["scene_id"].to_list() == [scene.name]
        assert alone.frames.equals(whole.frames.filter(whole.frames["scene_id"] == scene.name))
        empty = scans / "scene9999_00"
        empty.mkdir()
        (record,) = read_scannet(empty).quarantine.rows
        assert (record["record_id"], record["source_file"]) == ("scene9999_00", str(empty))
        assert record["reason"].startswith("empty scan folder:")

    def test_a_truncated_colour_jpeg_is_quarantined(self, world_copy):
        """A colour JPEG cut short (its header still reads, so PIL gives its size) is quarantined by name."""
        from PIL import Image

        scene = sorted((world_copy / "scannet" / "scans").iterdir())[0]
        colour = scene / "color" / "1.jpg"
        colour.write_bytes(colour.read_bytes()[: colour.stat().st_size // 2])
        with Image.open(colour) as image:
            assert image.size[0] > 0  # the header alone does not show the damage
        depth = scene / "depth" / "2.png"
        depth.write_bytes(depth.read_bytes()[:-20])
        tables = read_scannet(world_copy / "scannet" / "scans")
        records = {row["record_id"]: row for row in tables.quarantine.rows}
        assert records[f"{scene.name}/1"]["reason"] == (
            f"truncated image: {colour} does not end with the JPEG end-of-image marker (FF D9)"
        )
        assert records[f"{scene.name}/1"]["source_file"] == str(colour)
        assert records[f"{scene.name}/2"]["reason"] == (
            f"truncated image: {depth} does not end with the PNG IEND chunk"
        )
        assert len(records) == 2
        kept = tables.frames.filter(tables.frames["scene_id"] == scene.name)["frame_index"].to_list()
        assert kept == [0]

    def test_scene_without_usable_frames(self, world_copy):
        scene = sorted((world_copy / "scannet" / "scans").iterdir())[0]
        for pose in (scene / "pose").iterdir():
            pose.write_text("nan " * 16)
        tables = read_scannet(world_copy / "scannet" / "scans")
        assert scene.name not in tables.scenes["scene_id"].to_list()
        assert "scene has no usable frame" in tables.quarantine.reason_counts()


@pytest.mark.parametrize(
    "pose, problem",
    [
        (np.eye(4), ""),  # identity is rigid
        (np.diag([1.0, 1.0, -1.0, 1.0]), "determinant"),  # a reflection
        (np.full((4, 4), np.inf), "not finite"),  # ScanNet's invalid marker
    ],
)
def test_rigid_pose_problem(pose, problem):
    result = rigid_pose_problem(pose)
    assert (problem in result) if problem else result == ""
