"""Every benchmark loader on small files written here in the benchmark's native format.

The layouts are the public releases' (SpatiaLab ``data.json`` + ``img/``, OmniSpatial task folders,
CV-Bench ``test_2d/test_3d.parquet``, BLINK ``<Subset>/val-*.parquet``, the 3DSRBench VLMEvalKit TSV,
STVQA-7K ``data/<split>-*.parquet``), locally and as Hub snapshots in an offline cache.
"""

import base64
import csv
import json
import shutil

import pandas as pd
import polars as pl
import pytest

from data_contracts.eval_items import EvalItems
from data_contracts.images import IMAGE_DTYPE, sniff_format
from data_contracts.validation import check_frame
from readers.common import EmptySourceError, MissingInputError
from tests.eval.conftest import image_bytes
from tests.sources.hub_cache import add_to_hub_cache, hub_cache  # noqa: F401
from training.eval.benchmarks import (
    BenchmarkSources,
    attach_reference_boxes,
    limit_items,
    load_3dsrbench,
    load_benchmarks,
    load_blink,
    load_cvbench,
    load_dge_tasks,
    load_omnispatial,
    load_spatialab,
    load_stvqa,
    make_circular_variants,
    normalize_benchmark_names,
    split_benchmark_locations,
)


def _valid(frame):
    report = check_frame(frame, EvalItems)
    assert report.passed, report.as_metadata()
    return frame


def _by_id(frame):
    return {row["item_id"]: row for row in frame.iter_rows(named=True)}


def test_omnispatial_zero_based_answers_and_any_extension(tmp_path):
    root = tmp_path / "OmniSpatial"
    (root / "Perspective_Taking").mkdir(parents=True)
    (root / "Perspective_Taking" / "7.jpg").write_bytes(image_bytes("JPEG"))
    (root / "Perspective_Taking" / "8.png").write_bytes(image_bytes())
    records = [
        {
            "id": "7_0",
            "task_type": "Perspective_Taking",
            "sub_task_type": "Egocentric",
            "question": "Which is left?",
            "options": ["cup", "lamp", "sofa"],
            "answer": 0,
        },
        {
            "id": "7_1",
            "task_type": "Perspective_Taking",
            "sub_task_type": "Hypothetical",
            "question": "Pick the option in the image.",
            "options": [],
            "answer": 3,
        },
        {
            "id": "8_0",
            "task_type": "Perspective_Taking",
            "sub_task_type": "Allocentric",
            "question": "Where?",
            "options": ["left", "right"],
            "answer": 2,
        },  # out of range: quarantined
        {
            "id": "9_0",
            "task_type": "Perspective_Taking",
            "sub_task_type": "Allocentric",
            "question": "No image?",
            "options": ["left", "right"],
            "answer": 1,
        },  # missing image: quarantined
    ]
    (root / "data.json").write_text(json.dumps(records))
    frame, log = load_omnispatial(root)
    items = _by_id(_valid(frame))
    first, second = "omnispatial/Perspective_Taking/7_0", "omnispatial/Perspective_Taking/7_1"
    assert set(items) == {first, second}
    assert (items[first]["answer_index"], items[first]["answer"]) == (0, "A")
    assert (items[second]["options"], items[second]["answer"]) == ([], "D")
    assert items[first]["category"] == "Egocentric"
    assert items[first]["task_type"] == "Perspective_Taking"
    assert sniff_format(items[first]["images"][0]["bytes"]) == "jpeg"
    reasons = sorted(row["reason"].split(":")[0] for row in log.rows)
    assert reasons == ["answer out of range", "missing image"]
    assert all(row["source_asset"] == "eval_items" for row in log.rows)


def test_omnispatial_hash_split(small_world):
    everything, _ = load_omnispatial(small_world / "omnispatial", split="all")
    train, _ = load_omnispatial(small_world / "omnispatial", split="train")
    test, _ = load_omnispatial(small_world / "omnispatial", split="test")
    assert train.height + test.height == everything.height > 0


def test_spatialab_one_based_with_digits_in_options(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(image_bytes())
    rows = [
        {
            "id": 1,
            "Category": "3D Geometry",
            "Sub_Category": "Height",
            "Question": "How high is the shelf?",
            "Option_1": "0.4 m",
            "Option_2": "1 m",
            "Option_3": "2 m",
            "Option_4": "3 m",
            "Answer": 2,
            "Image_Filename": "a.png",
        },
        {
            "id": 2,
            "Category": "Orientation",
            "Sub_Category": "Facing",
            "Question": "Which way?",
            "Option_1": "left",
            "Option_2": "right",
            "Option_3": "",
            "Option_4": "",
            "Answer": "1",
            "Image_Filename": "a.png",
        },
        {
            "id": 3,
            "Category": "Orientation",
            "Sub_Category": "Facing",
            "Question": "Which way?",
            "Option_1": "left",
            "Option_2": "right",
            "Option_3": "",
            "Option_4": "",
            "Answer": 0,
            "Image_Filename": "a.png",
        },
    ]
    with (tmp_path / "spatialab.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    frame, log = load_spatialab(tmp_path / "spatialab.csv")
    items = _by_id(_valid(frame))
    assert items["spatialab/1"]["answer"] == "B" and items["spatialab/1"]["options"][1] == "1 m"
    assert items["spatialab/2"]["answer"] == "A" and items["spatialab/2"]["options"] == ["left", "right"]
    assert items["spatialab/1"]["category"] == "3D Geometry"
    assert len(log) == 1 and "answer out of range" in log.rows[0]["reason"]  # 0 is not a 1-based answer


def _cvbench_record(idx, task, kind, source, answer, image):
    return {
        "idx": idx,
        "type": kind,
        "task": task,
        "image": image,
        "question": f"Question {idx}?",
        "choices": ["lamp", "chair", "sofa"] if task == "Relation" else ["1", "2", "3", "4"],
        "answer": answer,
        "prompt": "ignored",
        "filename": f"img/{kind}/{task.lower()}/{idx}.png",
        "source": source,
    }


def test_cvbench_parquet_sniffs_jpeg_under_png_names(tmp_path):
    folder = tmp_path / "CV-Bench"
    folder.mkdir()
    jpeg = {"bytes": image_bytes("JPEG", (40, 30)), "path": "img/2D/count/ade20k_1.png"}
    png = {"bytes": image_bytes("PNG", (50, 20)), "path": "img/3D/depth/omni3d_2.png"}
    two_d = [
        _cvbench_record(0, "Count", "2D", "ADE20K", "(B)", jpeg),
        _cvbench_record(1, "Relation", "2D", "COCO", "(C)", jpeg),
        _cvbench_record(2, "Count", "2D", "COCO", "B", jpeg),  # not "(B)": quarantined
        _cvbench_record(3, "Relation", "2D", "COCO", "(D)", jpeg),  # beyond 3 choices: quarantined
    ]
    three_d = [
        _cvbench_record(4, "Depth", "3D", "Omni3D", "(A)", png),
        _cvbench_record(5, "Distance", "3D", "Omni3D", "(A)", {"bytes": b"not an image", "path": "x.png"}),
    ]
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    pl.DataFrame(two_d, schema_overrides={"image": image_type}).write_parquet(folder / "test_2d.parquet")
    pl.DataFrame(three_d, schema_overrides={"image": image_type}).write_parquet(folder / "test_3d.parquet")
    frame, log = load_cvbench(folder)
    items = _by_id(_valid(frame))
    assert set(items) == {"cvbench/2d/0", "cvbench/2d/1", "cvbench/3d/4"}
    count = items["cvbench/2d/0"]
    assert (
        count["answer"],
        count["answer_index"],
        count["category"],
        count["task_type"],
        count["source"],
    ) == ("B", 1, "Count", "2D", "ADE20K")
    assert count["images"][0]["path"] == "img/2D/count/ade20k_1.jpg"  # the name now tells the truth
    assert (count["image_width"], count["image_height"]) == (40, 30)
    assert items["cvbench/3d/4"]["images"][0]["path"].endswith(".png")
    assert sorted(row["reason"].split(":")[0] for row in log.rows) == [
        "answer out of range",
        "bad answer",
        "image",
    ]


def test_cvbench_jsonl_with_image_folder(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "0.png").write_bytes(image_bytes("JPEG"))
    record = _cvbench_record(0, "Depth", "3D", "Omni3D", "(B)", None)
    record["filename"] = "img/0.png"
    (tmp_path / "test.jsonl").write_text(json.dumps(record) + "\n{broken\n")
    frame, log = load_cvbench(tmp_path)
    assert _valid(frame)["answer"].to_list() == ["B"]
    assert len(log) == 1 and "malformed JSON" in log.rows[0]["reason"]


def _tsv(path, records):
    frame = pd.DataFrame(records)
    frame.to_csv(path, sep="\t", index=False)  # NaN option cells are written empty, as pandas does


def test_3dsrbench_tsv_variants_and_nan_options(tmp_path):
    encoded = base64.b64encode(image_bytes("JPEG", (64, 48))).decode()
    nan = float("nan")
    records = [
        {
            "index": 1,
            "qid": "abcd1234",
            "question": "Is the cup higher?",
            "A": "yes",
            "B": "no",
            "C": nan,
            "D": nan,
            "answer": "A",
            "category": "height_higher",
            "image": encoded,
        },
        {
            "index": 2,
            "qid": "abcd1234-1",
            "question": "Is the cup higher?",
            "A": "no",
            "B": "yes",
            "C": nan,
            "D": nan,
            "answer": "B",
            "category": "height_higher",
            "image": "1",
        },  # image given by reference to row 1
        {
            "index": 3,
            "qid": "abcd1234-flip",
            "question": "Is the cup higher?",
            "A": "yes",
            "B": "no",
            "C": nan,
            "D": nan,
            "answer": "A",
            "category": "height_higher",
            "image": encoded,
        },
        {
            "index": 4,
            "qid": "efgh5678-flip-2",
            "question": "Which is in front?",
            "A": "x",
            "B": "y",
            "C": "z",
            "D": "w",
            "answer": "D",
            "category": "multi_object_facing",
            "image": encoded,
        },
        {
            "index": 5,
            "qid": "bad00001",
            "question": "Which?",
            "A": "x",
            "B": "y",
            "C": nan,
            "D": nan,
            "answer": "C",
            "category": "location_above",
            "image": encoded,
        },  # C is empty: quarantined
        {
            "index": 6,
            "qid": "bad00002",
            "question": "Which?",
            "A": "x",
            "B": "y",
            "C": nan,
            "D": nan,
            "answer": "A",
            "category": "location_above",
            "image": "%%%not base64 image%%%",
        },
    ]
    _tsv(tmp_path / "3dsrbench.tsv", records)
    frame, log = load_3dsrbench(tmp_path / "3dsrbench.tsv")
    items = _by_id(_valid(frame))
    assert set(items) == {
        "3dsrbench/abcd1234",
        "3dsrbench/abcd1234-1",
        "3dsrbench/abcd1234-flip",
        "3dsrbench/efgh5678-flip-2",
    }
    original = items["3dsrbench/abcd1234"]
    assert original["options"] == ["yes", "no"] and original["answer"] == "A"
    assert (original["question_key"], original["flipped"], original["circular_index"]) == (
        "3dsrbench/abcd1234",
        False,
        0,
    )
    rotated = items["3dsrbench/abcd1234-1"]
    assert (rotated["question_key"], rotated["circular_index"], rotated["answer"]) == (
        "3dsrbench/abcd1234",
        1,
        "B",
    )
    assert rotated["images"][0]["bytes"] == original["images"][0]["bytes"]
    assert items["3dsrbench/abcd1234-flip"]["flipped"] is True
    four = items["3dsrbench/efgh5678-flip-2"]
    assert (four["task_type"], four["circular_index"], four["answer"], len(four["options"])) == (
        "multi_object",
        2,
        "D",
        4,
    )
    reasons = sorted(row["reason"].split(":")[0] for row in log.rows)
    assert reasons == ["answer out of range", "image"]


def test_blink_hf_layout_multi_image_and_hidden_answers(tmp_path):
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    first = {"bytes": image_bytes("JPEG"), "path": "a.png"}
    second = {"bytes": image_bytes(), "path": "b.png"}
    subsets = {
        "Relative_Depth": [
            {
                "idx": "val_Relative_Depth_1",
                "question": "Which point is closer?",
                "sub_task": "Relative_Depth",
                "image_1": first,
                "image_2": None,
                "image_3": None,
                "image_4": None,
                "choices": ["A", "B"],
                "answer": "(A)",
            },
        ],
        "Spatial_Relation": [
            {
                "idx": "val_Spatial_Relation_1",
                "question": "Is the cat left of the dog?",
                "sub_task": "Spatial_Relation",
                "image_1": first,
                "image_2": second,
                "image_3": None,
                "image_4": None,
                "choices": ["yes", "no"],
                "answer": "(B)",
            },
            {
                "idx": "test_Spatial_Relation_1",
                "question": "Hidden?",
                "sub_task": "Spatial_Relation",
                "image_1": first,
                "image_2": None,
                "image_3": None,
                "image_4": None,
                "choices": ["yes", "no"],
                "answer": "?",
            },
        ],
    }
    for name, rows in subsets.items():
        (tmp_path / name).mkdir()
        overrides = {f"image_{k}": image_type for k in range(1, 5)}
        pl.DataFrame(rows, schema_overrides=overrides).write_parquet(
            tmp_path / name / "val-00000-of-00001.parquet"
        )
    frame, log = load_blink(tmp_path)
    items = _by_id(_valid(frame))
    assert set(items) == {"blink/val_Relative_Depth_1", "blink/val_Spatial_Relation_1"}
    relation = items["blink/val_Spatial_Relation_1"]
    assert (len(relation["images"]), relation["answer"], relation["category"]) == (2, "B", "Spatial_Relation")
    assert len(log) == 1 and "hidden" in log.rows[0]["reason"]


def _image_cell(fmt="PNG"):
    return {"bytes": image_bytes(fmt, (64, 48)), "path": "x.png"}


def test_stvqa_val_split_with_reference_boxes(tmp_path):
    scene = {
        "objects": [
            {"id": "chair.1", "bbox_2d": [100, 200, 300, 600]},
            {"id": "lamp.1", "bbox_2d": [5, 5, 5, 9]},
        ],
        "relationships": [],
    }
    rows = [
        {
            "image_id": "1",
            "images": [_image_cell()],
            "question_only": "Is the chair left of the lamp?",
            "options": ["yes", "no"],
            "answer": "B",
            "answer_option_text": "(B) no",
            "category": "relation",
            "level": "easy",
            "image_width": 64,
            "image_height": 48,
            "gt_scene": scene,
            "split": "val",
        },
        {
            "image_id": "2",
            "images": [_image_cell()],
            "question_only": "Train row",
            "options": ["yes", "no"],
            "answer": "A",
            "answer_option_text": "(A) yes",
            "category": "relation",
            "level": "easy",
            "image_width": 64,
            "image_height": 48,
            "gt_scene": scene,
            "split": "train",
        },
        {
            "image_id": "3",
            "images": [_image_cell()],
            "question_only": "Bad gold",
            "options": ["yes", "no"],
            "answer": "C",
            "answer_option_text": "(C) maybe",
            "category": "relation",
            "level": "hard",
            "image_width": 64,
            "image_height": 48,
            "gt_scene": scene,
            "split": "val",
        },
    ]
    pl.DataFrame(rows, schema_overrides={"images": pl.List(IMAGE_DTYPE)}).write_parquet(
        tmp_path / "stvqa.parquet"
    )
    frame, log = load_stvqa(tmp_path / "stvqa.parquet")
    items = _valid(frame).to_dicts()
    assert len(items) == 1 and items[0]["answer"] == "B" and items[0]["task_type"] == "easy"
    assert items[0]["reference_boxes"] == [
        {"bbox_2d": [100, 200, 300, 600], "label": "chair", "validity": 1.0}
    ]
    assert len(log) == 1 and "bad answer" in log.rows[0]["reason"]


def test_dge_heldout_choice_and_numeric(tmp_path):
    base = {
        "scene_id": "s0",
        "images": [_image_cell(), _image_cell("JPEG")],
        "frame_indices": [0, 5],
        "facts": "{}",
        "geometry_source": "scanned",
    }
    rows = [
        {
            **base,
            "task_id": "t1",
            "task_type": "depth_order",
            "question": "Which is closer?",
            "options": ["chair", "lamp"],
            "answer_index": 1,
            "answer": "B",
            "numeric_answer": None,
            "unit": None,
            "split": "test",
        },
        {
            **base,
            "task_id": "t2",
            "task_type": "absolute_distance",
            "question": "How far?",
            "options": [],
            "answer_index": None,
            "answer": "1.5",
            "numeric_answer": 1.5,
            "unit": "m",
            "split": "test",
        },
        {
            **base,
            "task_id": "t3",
            "task_type": "absolute_distance",
            "question": "How far?",
            "options": [],
            "answer_index": None,
            "answer": "2.5",
            "numeric_answer": 2.5,
            "unit": "m",
            "split": "train",
        },
    ]
    folder = tmp_path / "dge_tasks"
    folder.mkdir()
    pl.DataFrame(
        rows,
        schema_overrides={
            "images": pl.List(IMAGE_DTYPE),
            "options": pl.List(pl.String),
            "answer_index": pl.Int64,
            "numeric_answer": pl.Float64,
            "unit": pl.String,
        },
    ).write_parquet(folder / "scene0000_00.parquet")
    frame, log = load_dge_tasks(folder)
    items = _by_id(_valid(frame))
    assert set(items) == {"dge/t1", "dge/t2"} and len(log) == 0
    assert (items["dge/t1"]["answer"], items["dge/t1"]["answer_format"]) == ("B", "choice")
    numeric = items["dge/t2"]
    assert (numeric["answer_format"], numeric["numeric_answer"], numeric["unit"], numeric["answer"]) == (
        "numeric",
        1.5,
        "m",
        "1.5",
    )
    assert len(numeric["images"]) == 2


def test_circular_variants_limit_and_reference_boxes(tmp_path, small_world):
    items, _ = load_omnispatial(small_world / "omnispatial")
    rotated = _valid(make_circular_variants(items))
    expected = sum(max(len(options), 1) for options in items["options"].to_list())
    assert rotated.height == expected
    for _key, group in rotated.group_by("question_key"):
        golds = {row["options"][row["answer_index"]] for row in group.iter_rows(named=True) if row["options"]}
        assert len(golds) <= 1  # every rotation keeps the same gold option text
    assert make_circular_variants(rotated).height == rotated.height  # idempotent
    limited = limit_items(rotated, 2)
    assert limited["question_key"].n_unique() == 2 and limited.height > 2

    first = items["item_id"][0]
    pseudo_gt = pl.DataFrame(
        {
            "question_id": [first],
            "pseudo_gt": [[{"bbox_2d": [1, 2, 30, 40], "label": "box", "validity": 0.7}]],
        }
    )
    attached = _by_id(_valid(attach_reference_boxes(items, pseudo_gt)))
    assert attached[first]["reference_boxes"][0]["validity"] == 0.7
    assert all(not row["reference_boxes"] for item_id, row in attached.items() if item_id != first)


def test_load_benchmarks_from_sources(tmp_path, small_world):
    sources = BenchmarkSources(storage_root=str(small_world.parent), omnispatial_split="all")
    items, log = load_benchmarks(["omnispatial", "spatialab"], sources)
    assert set(items["benchmark"].unique()) == {"omnispatial", "spatialab"} and len(log) == 0
    assert items["origin"].unique().to_list() == ["sample_world"]  # both fell back to the sample world
    with pytest.raises(MissingInputError, match="cvbench_path"):
        load_benchmarks(["cvbench"], sources)
    with pytest.raises(MissingInputError):
        load_benchmarks(["stvqa"], BenchmarkSources(storage_root=str(tmp_path)))


def test_benchmark_names():
    assert normalize_benchmark_names("dge,CV-Bench, 3dsr") == ["dge_heldout", "cvbench", "3dsrbench"]
    assert len(normalize_benchmark_names(["all"])) == 7
    with pytest.raises(ValueError, match="unknown benchmark"):
        normalize_benchmark_names("mmlu")


# --------------------------------------------------------------------------------------------------
# Released layouts, wrong files, Hub datasets
# --------------------------------------------------------------------------------------------------


def _spatialab_release(folder, image_folder="img"):
    """SpatiaLab as released (``ciol-research/SpatiaLab``): ``data.json`` + ``img/``."""
    folder.mkdir(parents=True, exist_ok=True)
    records = [
        {
            "id": index,
            "Category": "Orientation",
            "Sub_Category": "Facing",
            "Question": f"Which way does object {index} face?",
            "Option_1": "left",
            "Option_2": "right",
            "Option_3": "towards the camera",
            "Option_4": "away from the camera",
            "Answer": 3,
            "Image_Filename": f"orientation_{index}.jpg",
        }
        for index in (1, 2)
    ]
    (folder / "data.json").write_text(json.dumps(records))
    (folder / image_folder).mkdir()
    for record in records:
        (folder / image_folder / record["Image_Filename"]).write_bytes(image_bytes("JPEG"))
    return records


def test_spatialab_release_layout(tmp_path):
    _spatialab_release(tmp_path / "SpatiaLab")
    frame, log = load_spatialab(tmp_path / "SpatiaLab")  # the folder, as a Hub snapshot gives it
    assert len(log) == 0 and _valid(frame)["answer"].to_list() == ["C", "C"]
    frame, _ = load_spatialab(tmp_path / "SpatiaLab" / "data.json")
    assert frame.height == 2


def test_a_benchmark_with_every_record_quarantined_fails_loudly(tmp_path):
    _spatialab_release(tmp_path / "SpatiaLab", image_folder="photos")
    with pytest.raises(
        EmptySourceError, match=r"SpatiaLab at .* all 2 records .*missing image: .*orientation_1"
    ):
        load_spatialab(tmp_path / "SpatiaLab")
    sources = BenchmarkSources(storage_root=str(tmp_path), spatialab_path=str(tmp_path / "SpatiaLab"))
    with pytest.raises(EmptySourceError, match="spatialab_images_dir"):
        load_benchmarks(["spatialab"], sources)


def test_spatial_eval_exits_2_naming_the_reasons(tmp_path, capsys):
    from training.eval.cli import main

    _spatialab_release(tmp_path / "SpatiaLab", image_folder="photos")
    status = main(
        [
            "--model",
            str(tmp_path / "no-model"),
            "--family",
            "qwen3_vl",
            "--benchmarks",
            "spatialab",
            "--spatialab-path",
            str(tmp_path / "SpatiaLab"),
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert status == 2
    error = capsys.readouterr().err
    assert "SpatiaLab" in error and "missing image" in error
    assert not (tmp_path / "out" / "report.md").exists()


def test_omnispatial_ids_repeating_across_task_folders(tmp_path):
    root = tmp_path / "OmniSpatial-test"
    records = []
    for task_type in ("Complex_Logic", "Spatial_Interaction"):
        (root / task_type).mkdir(parents=True)
        (root / task_type / "3.png").write_bytes(image_bytes())
        records.append(
            {
                "id": "3_0",
                "task_type": task_type,
                "sub_task_type": "Pattern_Recognition",
                "question": "Which comes next?",
                "options": ["a", "b"],
                "answer": 1,
            }
        )
    (root / "data.json").write_text(json.dumps(records))
    frame, log = load_omnispatial(root)
    assert len(log) == 0
    assert sorted(_valid(frame)["item_id"]) == [
        "omnispatial/Complex_Logic/3_0",
        "omnispatial/Spatial_Interaction/3_0",
    ]


def test_parquet_files_with_wrong_columns_name_them(tmp_path):
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    wrong = pl.DataFrame(
        [{"idx": 0, "image": {"bytes": image_bytes(), "path": "a.png"}, "text": "a caption"}],
        schema_overrides={"image": image_type},
    )
    (tmp_path / "cvbench").mkdir()
    wrong.write_parquet(tmp_path / "cvbench" / "test_2d.parquet")
    with pytest.raises(EmptySourceError, match=r"wrong columns: missing \['choices', 'answer', 'question'\]"):
        load_cvbench(tmp_path / "cvbench")
    (tmp_path / "blink" / "Relative_Depth").mkdir(parents=True)
    wrong.write_parquet(tmp_path / "blink" / "Relative_Depth" / "val-00000-of-00001.parquet")
    with pytest.raises(
        EmptySourceError, match=r"val-00000-of-00001.parquet: wrong columns: missing \['choices'"
    ):
        load_blink(tmp_path / "blink", subsets=["Relative_Depth"])
    wrong.write_parquet(tmp_path / "stvqa.parquet")
    with pytest.raises(EmptySourceError, match=r"wrong columns: missing \['images', 'options', 'answer'\]"):
        load_stvqa(tmp_path / "stvqa.parquet")
    _tsv(tmp_path / "other.tsv", [{"index": 1, "caption": "x"}])
    with pytest.raises(EmptySourceError, match=r"wrong columns: missing \['question', 'answer'"):
        load_3dsrbench(tmp_path / "other.tsv")


def test_published_stvqa_7k_layout(tmp_path):
    # OX-PIXL/STVQA-7K: data/train-*.parquet and data/val-*.parquet, one image per row, no split column
    data = tmp_path / "STVQA-7K" / "data"
    data.mkdir(parents=True)
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    for split, answer in (("train", "A"), ("val", "B")):
        row = {
            "image_id": f"{split}1",
            "images": {"bytes": image_bytes("JPEG", (64, 48)), "path": None},
            "question_only": f"Is the lamp left of the chair ({split})?",
            "options": ["yes", "no"],
            "answer": answer,
            "category": "relation",
            "level": "easy",
        }
        pl.DataFrame([row], schema_overrides={"images": image_type}).write_parquet(
            data / f"{split}-00000-of-00001.parquet"
        )
    frame, log = load_stvqa(tmp_path / "STVQA-7K")
    items = _valid(frame).to_dicts()
    assert len(log) == 0 and len(items) == 1
    assert (items[0]["answer"], items[0]["split"], items[0]["image_width"]) == ("B", "val", 64)


def test_3dsrbench_folder_holding_the_tsv(tmp_path):
    encoded = base64.b64encode(image_bytes("JPEG")).decode()
    record = {"index": 1, "qid": "q1", "question": "Higher?", "A": "yes", "B": "no", "C": float("nan")}
    record.update({"D": float("nan"), "answer": "A", "category": "height_higher", "image": encoded})
    (tmp_path / "3DSRBench").mkdir()
    _tsv(tmp_path / "3DSRBench" / "3dsrbench_v1_vlmevalkit_circular.tsv", [record])
    frame, _ = load_3dsrbench(tmp_path / "3DSRBench")
    assert _valid(frame)["item_id"].to_list() == ["3dsrbench/q1"]


def test_cvbench_combined_file_beside_the_split_files_is_not_read_twice(tmp_path):
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    cell = {"bytes": image_bytes(), "path": "img/2D/count/1.png"}
    record = _cvbench_record(1, "Count", "2D", "COCO", "(A)", cell)
    for name in ("test_2d.parquet", "test.parquet"):
        pl.DataFrame([record], schema_overrides={"image": image_type}).write_parquet(tmp_path / name)
    frame, log = load_cvbench(tmp_path)
    assert frame.height == 1 and len(log) == 0


def test_benchmarks_from_hub_datasets_offline(tmp_path, hub_cache):  # noqa: F811
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    release = tmp_path / "CV-Bench"
    release.mkdir()
    record = _cvbench_record(0, "Depth", "3D", "Omni3D", "(B)", {"bytes": image_bytes(), "path": "img/0.png"})
    pl.DataFrame([record], schema_overrides={"image": image_type}).write_parquet(release / "test_3d.parquet")
    add_to_hub_cache(hub_cache, "nyu-visionx/CV-Bench", release)
    _spatialab_release(tmp_path / "SpatiaLab")
    add_to_hub_cache(hub_cache, "ciol-research/SpatiaLab", tmp_path / "SpatiaLab", revision="v1")

    names, locations = split_benchmark_locations(
        "cvbench=hf://datasets/nyu-visionx/CV-Bench,spatialab=hf://datasets/ciol-research/SpatiaLab@v1"
    )
    sources = BenchmarkSources(storage_root=str(tmp_path)).with_locations(locations)
    assert (sources.cvbench_path, sources.spatialab_path) == (
        "hf://datasets/nyu-visionx/CV-Bench",
        "hf://datasets/ciol-research/SpatiaLab@v1",
    )
    items, log = load_benchmarks(names, sources)
    assert len(log) == 0
    assert dict(items.group_by("benchmark").len().iter_rows()) == {"cvbench": 1, "spatialab": 2}
    with pytest.raises(MissingInputError, match=r"ccvl/3DSRBench.*`threedsrbench_path`"):
        load_benchmarks(["3dsrbench"], BenchmarkSources(threedsrbench_path="hf://datasets/ccvl/3DSRBench"))


def test_split_benchmark_locations():
    assert split_benchmark_locations("omnispatial,3dsr=/data/3dsrbench.tsv") == (
        ["omnispatial", "3dsrbench"],
        {"3dsrbench": "/data/3dsrbench.tsv"},
    )
    with pytest.raises(ValueError, match="empty location"):
        split_benchmark_locations("cvbench=")
    with pytest.raises(ValueError, match="unknown benchmark"):
        split_benchmark_locations("mmlu=hf://datasets/cais/mmlu")


def test_items_say_whether_they_are_the_sample_worlds_and_a_mix_is_logged(tmp_path, small_world, caplog):
    """A real OmniSpatial folder beside the default (sample-world) SpatiaLab: every item carries its origin,
    and loading the two together warns by name."""
    real_folder = tmp_path / "omnispatial"
    shutil.copytree(small_world / "omnispatial", real_folder)
    sources = BenchmarkSources(storage_root=str(small_world.parent), omnispatial_root=str(real_folder))
    with caplog.at_level("WARNING", logger="training.eval.benchmarks"):
        items, _ = load_benchmarks(["omnispatial", "spatialab"], sources)
    _valid(items)
    origins = dict(items.group_by("benchmark").agg(pl.col("origin").unique()).iter_rows())
    assert origins == {"omnispatial": ["real"], "spatialab": ["sample_world"]}
    assert "sample_world: spatialab" in caplog.text and "real: omnispatial" in caplog.text
