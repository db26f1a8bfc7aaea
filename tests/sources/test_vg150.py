"""The VG150 h5 layout and the prompt-style Parquet variant, written by the tests from the sample world.

The VG150 files follow the common release: ``VG-SGG-with-attri.h5`` (``boxes_1024`` centre boxes,
``labels``, ``attributes``, ``img_to_first/last_box``, ``img_to_first/last_rel``, ``relationships``,
``predicates`` and ``split``, one code per image: 0 train, 2 test), ``VG-SGG-dicts-with-attri.json``
and ``image_data.json`` (which lists the corrupted images the h5 leaves out); the images live in
``VG_100K/`` beside the annotations or in a folder of their own. The prompt-style variant is a Hub
snapshot: ``data/train-00000-of-00001.parquet`` with ``image_id, image, objects, relationships``.
"""

import json
import shutil

import dagster as dg
import h5py
import numpy as np
import polars as pl
import pytest

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import SOURCE_ASSETS, with_origin
from data_contracts import scene_graphs
from data_contracts.images import read_image_file
from data_contracts.storage import read_table
from data_contracts.validation import check_frame
from pipelines.io_manager import ParquetIOManager
from readers.common import MissingInputError
from readers.scene_graphs import (
    VG150_CORRUPTED_IMAGES,
    detect_scene_graph_layout,
    read_scene_graph_parquet,
    read_scene_graphs,
    read_vg150,
    read_visual_genome,
)
from tests.sources.hub_cache import add_to_hub_cache, hub_cache  # noqa: F401


def _write_vg150(world, target, box_scale=1024, split_codes=None, images_target=None):
    """Convert the world's raw VG files to the VG150 layout (centre boxes scaled to the longer side).

    ``split_codes`` gives the h5 ``split`` code of each image (all 0, train, by default);
    ``images_target`` is where ``VG_100K/`` goes (beside the annotations by default).
    """
    vg = world / "visual_genome"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(vg / "VG_100K", (images_target or target) / "VG_100K")
    image_data = json.loads((vg / "image_data.json").read_text())
    objects = {str(o["image_id"]): o["objects"] for o in json.loads((vg / "objects.json").read_text())}
    relations = {
        str(r["image_id"]): r["relationships"] for r in json.loads((vg / "relationships.json").read_text())
    }
    labels = sorted({o["names"][0] for objs in objects.values() for o in objs})
    predicates = sorted({r["predicate"].lower() for rels in relations.values() for r in rels})
    label_index = {name: i + 1 for i, name in enumerate(labels)}
    predicate_index = {name: i + 1 for i, name in enumerate(predicates)}
    # a corrupted image listed in image_data.json but absent from the h5 rows, as in the real release
    corrupted = {"image_id": int(sorted(VG150_CORRUPTED_IMAGES)[0]), "width": 10, "height": 10, "url": ""}
    boxes, box_labels, first_box, last_box, rels, rel_preds, first_rel, last_rel = (
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    )
    for info in image_data:
        image_objects = objects[str(info["image_id"])]
        scale = box_scale / max(info["width"], info["height"])
        index_of = {}
        first_box.append(len(boxes))
        for obj in image_objects:
            index_of[obj["object_id"]] = len(boxes)
            boxes.append(
                [
                    (obj["x"] + obj["w"] / 2) * scale,
                    (obj["y"] + obj["h"] / 2) * scale,
                    obj["w"] * scale,
                    obj["h"] * scale,
                ]
            )
            box_labels.append([label_index[obj["names"][0]]])
        last_box.append(len(boxes) - 1)
        first_rel.append(len(rels) if relations.get(str(info["image_id"])) else -1)
        for rel in relations.get(str(info["image_id"]), []):
            rels.append([index_of[rel["subject"]["object_id"]], index_of[rel["object"]["object_id"]]])
            rel_preds.append([predicate_index[rel["predicate"].lower()]])
        last_rel.append(len(rels) - 1 if first_rel[-1] >= 0 else -1)
    with h5py.File(target / "VG-SGG-with-attri.h5", "w") as h5:
        h5[f"boxes_{box_scale}"] = np.array(boxes, dtype=np.int32)
        h5["labels"] = np.array(box_labels, dtype=np.int64)
        h5["attributes"] = np.zeros((len(boxes), 10), dtype=np.int64)
        h5["img_to_first_box"], h5["img_to_last_box"] = np.array(first_box), np.array(last_box)
        h5["img_to_first_rel"], h5["img_to_last_rel"] = np.array(first_rel), np.array(last_rel)
        h5["relationships"] = np.array(rels, dtype=np.int64).reshape(-1, 2)
        h5["predicates"] = np.array(rel_preds, dtype=np.int64).reshape(-1, 1)
        h5["split"] = np.array(
            split_codes if split_codes is not None else [0] * len(image_data), dtype=np.int64
        )
    (target / "VG-SGG-dicts-with-attri.json").write_text(
        json.dumps(
            {
                "idx_to_label": {str(v): k for k, v in label_index.items()},
                "idx_to_predicate": {str(v): k for k, v in predicate_index.items()},
                "idx_to_attribute": {},
            }
        )
    )
    (target / "image_data.json").write_text(json.dumps([corrupted, *image_data]))
    return image_data


def test_vg150_matches_raw_json(small_world, tmp_path):
    image_data = _write_vg150(small_world, tmp_path)
    assert detect_scene_graph_layout(tmp_path) == "vg150"
    frame, log = read_vg150(tmp_path)
    raw, _ = read_visual_genome(small_world / "visual_genome")
    assert frame.height == len(image_data) == raw.height
    assert len(log) == 0
    for vg150_row, raw_row in zip(
        frame.sort("image_id").iter_rows(named=True), raw.sort("image_id").iter_rows(named=True), strict=False
    ):
        assert [o["name"] for o in vg150_row["objects"]] == [o["name"] for o in raw_row["objects"]]
        for a, b in zip(vg150_row["objects"], raw_row["objects"], strict=False):
            # integer boxes at the 1024 scale lose at most a few grid units
            assert max(abs(x - y) for x, y in zip(a["bbox"], b["bbox"], strict=False)) <= 4
        assert len(vg150_row["relationships"]) == len(raw_row["relationships"])


def _prompt_style_rows(world, count=3, dangling=True):
    """Rows of the prompt-style variant (ids ``name.N``, pixel boxes, JSON strings) from the world's raw VG."""
    raw, _ = read_visual_genome(world / "visual_genome")
    rows = []
    for row in raw.head(count).iter_rows(named=True):
        counts = {}
        ids = {}
        objects = []
        for obj in row["objects"]:
            counts[obj["name"]] = counts.get(obj["name"], 0) + 1
            ids[obj["object_id"]] = f"{obj['name']}.{counts[obj['name']]}"
            objects.append({"id": ids[obj["object_id"]], "bbox": [round(v) for v in obj["bbox_px"]]})
        relations = [
            {"subject": ids[r["subject_id"]], "predicate": r["predicate"], "object": ids[r["object_id"]]}
            for r in row["relationships"]
        ]
        if dangling:
            relations.append({"subject": "ghost.1", "predicate": "on", "object": objects[0]["id"]})
        rows.append(
            {
                "image_id": row["image_id"],
                "image": row["image"],
                "objects": json.dumps(objects),
                "relationships": json.dumps(relations),
            }
        )
    return rows


def test_prompt_style_parquet(small_world, tmp_path):
    rows = _prompt_style_rows(small_world)
    path = tmp_path / "vg150_prompt.parquet"
    pl.DataFrame(rows).write_parquet(path)
    frame, log = read_scene_graph_parquet(path)
    assert frame.height == 3
    assert log.reason_counts() == {"dangling relation": 3}
    assert all("." in o["object_id"] for objs in frame["objects"] for o in objs)
    cell, width, height = read_image_file(next((small_world / "visual_genome" / "VG_100K").iterdir()))
    assert width > 0 and height > 0


def _materialize_scene_graphs(root, **fields):
    resources = {
        "io_manager": ParquetIOManager(root=str(root / "storage")),
        "storage": StorageResource(root=str(root / "storage")),
        "sources": SourcesResource(sample_world_root=str(root / "absent_world"), **fields),
    }
    return dg.materialize([SOURCE_ASSETS[1]], resources=resources)


def test_vg150_images_folder_is_configurable(small_world, tmp_path):
    # the usual download: annotations in one folder, VG_100K/ (and VG_100K_2/) in another
    annotations, images = tmp_path / "vg150", tmp_path / "visual_genome_images"
    image_data = _write_vg150(small_world, annotations, images_target=images)
    frame, log = read_vg150(annotations, images_dir=images)
    assert frame.height == len(image_data) and len(log) == 0
    frame, log = read_vg150(annotations, images_dir=images / "VG_100K")  # the images themselves
    assert frame.height == len(image_data)
    with pytest.raises(MissingInputError, match="visual_genome_images_dir"):
        read_vg150(annotations, images_dir=tmp_path / "nowhere")
    result = _materialize_scene_graphs(
        tmp_path, visual_genome_root=str(annotations), visual_genome_images_dir=str(images)
    )
    assert result.success
    assert read_table(tmp_path / "storage", "scene_graphs").height == len(image_data)


def test_vg150_without_its_images_fails_with_the_reasons(small_world, tmp_path):
    annotations = tmp_path / "vg150"
    _write_vg150(small_world, annotations, images_target=tmp_path / "elsewhere")
    with pytest.raises(Exception, match=r"gave no valid row.*missing image.*visual_genome_images_dir"):
        _materialize_scene_graphs(tmp_path, visual_genome_root=str(annotations))


def test_vg150_with_test_images_and_without_its_images_names_the_missing_images(small_world, tmp_path):
    """The real h5 marks some images test: with the images folder elsewhere, the kept splits' images are all
    missing and the others left out by split; the failure names the missing images, not the kept splits."""
    vg = small_world / "visual_genome"
    count = len(json.loads((vg / "image_data.json").read_text()))
    annotations = tmp_path / "vg150"
    _write_vg150(
        small_world,
        annotations,
        split_codes=[2 if index % 2 else 0 for index in range(count)],
        images_target=tmp_path / "elsewhere",
    )
    with pytest.raises(
        Exception, match=r"gave no valid row.*missing image.*visual_genome_images_dir"
    ) as failure:
        _materialize_scene_graphs(tmp_path, visual_genome_root=str(annotations))
    assert "scene_graph_splits" not in str(failure.value)


def test_vg150_split_is_kept_and_test_images_never_reach_scene_graphs(small_world, tmp_path):
    vg = small_world / "visual_genome"
    count = len(json.loads((vg / "image_data.json").read_text()))
    codes = [2 if index % 2 else 0 for index in range(count)]  # 0 train, 2 test (the h5 convention)
    image_data = _write_vg150(small_world, tmp_path / "vg150", split_codes=codes)
    frame, log = read_vg150(tmp_path / "vg150")
    assert len(log) == 0 and check_frame(with_origin(frame, "real"), scene_graphs.SceneGraphs).passed
    expected = {
        str(info["image_id"]): "test" if code == 2 else "train"
        for info, code in zip(image_data, codes, strict=True)
    }
    assert dict(frame.select("image_id", "split").iter_rows()) == expected

    read = read_scene_graphs(tmp_path / "vg150", keep_splits=["train", "val"])
    assert read.layout == "vg150" and set(read.frame["split"]) == {"train"}
    assert read.excluded_by_split == {"test": codes.count(2)}

    result = _materialize_scene_graphs(tmp_path, visual_genome_root=str(tmp_path / "vg150"))
    assert result.success
    table = read_table(tmp_path / "storage", "scene_graphs")
    assert set(table["split"]) == {"train"} and table.height == codes.count(0)
    event = next(m for m in result.get_asset_materialization_events() if m.asset_key.path == ["scene_graphs"])
    metadata = event.materialization.metadata
    assert metadata["excluded_by_split"].value == {"test": codes.count(2)}
    assert metadata["rows_by_split"].value == {"train": codes.count(0)}


def test_raw_and_parquet_splits_default_sensibly(small_world, tmp_path):
    raw, _ = read_visual_genome(small_world / "visual_genome")
    assert set(raw["split"]) == {"train"}  # raw Visual Genome has no split
    relabelled, _ = read_visual_genome(small_world / "visual_genome", split="val")
    assert set(relabelled["split"]) == {"val"}
    data = tmp_path / "snapshot" / "data"
    data.mkdir(parents=True)
    rows = _prompt_style_rows(small_world, dangling=False)
    pl.DataFrame(rows[:2]).write_parquet(data / "train-00000-of-00001.parquet")
    pl.DataFrame(rows[2:]).write_parquet(data / "test-00000-of-00001.parquet")
    frame, log = read_scene_graph_parquet(tmp_path / "snapshot")
    assert len(log) == 0
    assert sorted(frame["split"].to_list()) == ["test", "train", "train"]  # from the file names


def test_prompt_style_hub_snapshot_is_detected_and_read(small_world, tmp_path, hub_cache):  # noqa: F811
    # JosephZ/vg150_train_sgg_prompt as snapshot_download leaves it: README.md + data/*.parquet
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    (release / "README.md").write_text("---\nconfigs:\n- config_name: default\n---\n")
    rows = _prompt_style_rows(small_world, dangling=False)
    pl.DataFrame(rows).write_parquet(release / "data" / "train-00000-of-00001.parquet")
    assert detect_scene_graph_layout(release) == "parquet"
    snapshot = add_to_hub_cache(hub_cache, "JosephZ/vg150_train_sgg_prompt", release)
    assert detect_scene_graph_layout(snapshot) == "parquet"
    result = _materialize_scene_graphs(
        tmp_path, visual_genome_root="hf://datasets/JosephZ/vg150_train_sgg_prompt"
    )
    assert result.success
    table = read_table(tmp_path / "storage", "scene_graphs")
    assert table.height == len(rows) and set(table["split"]) == {"train"}


def test_parquet_with_wrong_columns_names_the_missing_ones(small_world, tmp_path):
    rows = _prompt_style_rows(small_world, count=1)
    path = tmp_path / "captions.parquet"  # another data set's file: image and caption only
    pl.DataFrame(
        [{"image_id": rows[0]["image_id"], "image": rows[0]["image"], "caption": "a room"}]
    ).write_parquet(path)
    frame, log = read_scene_graph_parquet(path)
    assert frame.height == 0 and len(log) == 1
    assert log.rows[0]["record_id"] == "captions.parquet"
    assert log.rows[0]["reason"].startswith("wrong columns: missing ['objects', 'relationships']")
    with pytest.raises(Exception, match=r"wrong columns: missing \['objects', 'relationships'\]"):
        _materialize_scene_graphs(tmp_path, visual_genome_root=str(path))
