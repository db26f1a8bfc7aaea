"""The VG150 h5 layout and the prompt-style Parquet variant, written by the tests from the sample world."""

import json
import shutil

import h5py
import numpy as np
import polars as pl

from data_contracts.images import read_image_file
from readers.scene_graphs import (
    VG150_CORRUPTED_IMAGES,
    detect_scene_graph_layout,
    read_scene_graph_parquet,
    read_vg150,
    read_visual_genome,
)


def _write_vg150(world, target, box_scale=1024):
    """Convert the world's raw VG files to the VG150 layout (centre boxes scaled to the longer side)."""
    vg = world / "visual_genome"
    shutil.copytree(vg / "VG_100K", target / "VG_100K")
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
        h5["split"] = np.zeros(len(image_data), dtype=np.int64)
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


def test_prompt_style_parquet(small_world, tmp_path):
    raw, _ = read_visual_genome(small_world / "visual_genome")
    rows = []
    for row in raw.head(3).iter_rows(named=True):
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
        relations.append({"subject": "ghost.1", "predicate": "on", "object": objects[0]["id"]})  # dangling
        rows.append(
            {
                "image_id": row["image_id"],
                "image": row["image"],
                "objects": json.dumps(objects),
                "relationships": json.dumps(relations),
            }
        )
    path = tmp_path / "vg150_prompt.parquet"
    pl.DataFrame(rows).write_parquet(path)
    frame, log = read_scene_graph_parquet(path)
    assert frame.height == 3
    assert log.reason_counts() == {"dangling relation": 3}
    assert all("." in o["object_id"] for objs in frame["objects"] for o in objs)
    cell, width, height = read_image_file(next((small_world / "visual_genome" / "VG_100K").iterdir()))
    assert width > 0 and height > 0
