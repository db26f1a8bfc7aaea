"""Writers of every on-disk format of the sample world, each in its real source's layout.

- ScanNet (SensReader export plus the scan's mesh, segments and aggregation);
- Visual Genome v1.4 raw JSON (`image_data`, `objects`, `relationships`, `attributes`) with the
  real files' quirks: relationship subjects/objects come with `name` or with `names` (plus
  `merged_object_ids`), a few predicates are upper case, a few attribute entries lack `attributes`;
- OmniSpatial `data.json` (0-based `answer`) with images in `<task_type>/<image number>.png`;
- SpatiaLab JSON (1-based `Answer` over `Option_1..Option_4`);
- COCO instances (non-contiguous category ids, `[x, y, w, h]` boxes, uncompressed RLE masks);
- the truth file.

Files are written deterministically (no timestamps, fixed JPEG quality and PNG settings, JSON in a
fixed key order), so equal inputs give byte-identical files.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from assets.sample_world.catalogue import CATALOGUE
from assets.sample_world.realism import ScanNoise, misregistered_pose, noisy_depth, vertex_segments
from assets.sample_world.render import SURFACE_CEILING, SURFACE_FLOOR, SURFACE_OBJECT, MeshPiece
from assets.sample_world.scene import Scene, View

logger = logging.getLogger(__name__)

DEPTH_SCALE = 1000.0
"""Depth PNG units per metre (millimetres)."""
VG_URL = "https://cs.stanford.edu/people/rak248/VG_100K/{image_id}.jpg"
UPPER_CASE_PREDICATE_RATE = 0.1
MISSING_ATTRIBUTES_RATE = 0.05


def write_json(path: Path, data: Any, indent: int | None = None) -> None:
    """Write JSON (UTF-8, keys in insertion order, newline at the end)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")


def write_png(path: Path, array: np.ndarray) -> None:
    """Write a uint8 RGB/grey or uint16 grey array as PNG (zlib level 1: the fastest to write; the
    pixels are the same at every level, the files about 1.4x larger than at Pillow's default 6).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_png(Path(folder) / "a.png", np.array([[0, 65535]], dtype=np.uint16))
    ...     np.asarray(Image.open(Path(folder) / "a.png")).tolist()
    [[0, 65535]]
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if array.dtype not in (np.uint8, np.uint16):
        raise TypeError(f"PNG arrays must be uint8 or uint16, got {array.dtype}")
    image = Image.fromarray(np.ascontiguousarray(array))
    image.save(path, format="PNG", compress_level=1)


def write_jpeg(path: Path, rgb: np.ndarray, quality: int) -> None:
    """Write a uint8 RGB array as baseline JPEG with a fixed quality and 4:2:0 subsampling."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(rgb)).save(
        path, format="JPEG", quality=quality, subsampling=2, optimize=False
    )


def matrix_text(matrix: np.ndarray) -> str:
    """A matrix as ScanNet writes it: one row per line, space-separated decimals.

    >>> matrix_text(np.eye(2))
    '1.00000000 0.00000000\\n0.00000000 1.00000000\\n'
    """
    return "".join(
        " ".join(f"{value:.8f}" for value in row) + "\n" for row in np.asarray(matrix, dtype=np.float64)
    )


def homogeneous(intrinsics: np.ndarray) -> np.ndarray:
    """A 3x3 intrinsics matrix padded to 4x4 (ScanNet's `intrinsic_*.txt`)."""
    padded = np.eye(4)
    padded[:3, :3] = intrinsics
    return padded


def depth_to_png_units(depth_m: np.ndarray) -> np.ndarray:
    """Metres to uint16 millimetres (0 stays 0 = missing; far values clip at 65535).

    >>> depth_to_png_units(np.array([0.0, 1.2344, 70.0])).tolist()
    [0, 1234, 65535]
    """
    return np.clip(np.round(depth_m * DEPTH_SCALE), 0, 65535).astype(np.uint16)


def rle_counts(mask: np.ndarray) -> list[int]:
    """COCO uncompressed RLE counts of a boolean mask (column-major, starting with a run of zeros).

    >>> rle_counts(np.array([[0, 1], [0, 1]], dtype=bool))
    [2, 2]
    """
    flat = np.asarray(mask, dtype=bool).T.ravel()
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    boundaries = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(boundaries).tolist()
    if flat.size and flat[0]:
        counts = [0] + counts
    return [int(count) for count in counts]


def write_ply(path: Path, vertices: np.ndarray, colors: np.ndarray, triangles: np.ndarray) -> None:
    """Write a binary little-endian PLY laid out like ScanNet's `_vh_clean_2.ply`
    (float x, y, z; uchar red, green, blue, alpha; faces as `list uchar int`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "ply\nformat binary_little_endian 1.0\ncomment sample world\n"
        f"element vertex {len(vertices)}\n"
        "property float x\nproperty float y\nproperty float z\n"
        "property uchar red\nproperty uchar green\nproperty uchar blue\nproperty uchar alpha\n"
        f"element face {len(triangles)}\nproperty list uchar int vertex_indices\nend_header\n"
    )
    vertex_type = np.dtype(
        [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("r", "u1"), ("g", "u1"), ("b", "u1"), ("a", "u1")]
    )
    vertex_data = np.empty(len(vertices), dtype=vertex_type)
    for index, axis in enumerate("xyz"):
        vertex_data[axis] = vertices[:, index]
    for index, channel in enumerate("rgb"):
        vertex_data[channel] = colors[:, index]
    vertex_data["a"] = 255
    face_type = np.dtype([("n", "u1"), ("i0", "<i4"), ("i1", "<i4"), ("i2", "<i4")])
    face_data = np.empty(len(triangles), dtype=face_type)
    face_data["n"] = 3
    for index in range(3):
        face_data[f"i{index}"] = triangles[:, index]
    with path.open("wb") as handle:
        handle.write(header.encode("ascii"))
        handle.write(vertex_data.tobytes())
        handle.write(face_data.tobytes())


@dataclass(frozen=True)
class SegmentedMesh:
    """A scene's mesh as a scan's segmented mesh: vertices, colours, triangles, the segment of each vertex, the
    segments of each annotated object and the ``(object id, label)`` of every annotated object (the scene's
    objects, then, in the realistic mode, the room's floor, walls and ceiling)."""

    vertices: np.ndarray
    colors: np.ndarray
    triangles: np.ndarray
    segment_of_vertex: np.ndarray
    object_segments: dict[int, list[int]]
    annotated: list[tuple[int, str]]


def segmented_mesh(scene: Scene, pieces: list[MeshPiece], noise: ScanNoise | None) -> SegmentedMesh:
    """The scene's pieces as one segmented mesh: one segment per piece, or with ``noise`` cells of
    ``segment_size_m`` (over-segmented) and the room's surfaces annotated as objects after the scene's."""
    structure_ids: dict[int, int] = {}
    if noise is not None:
        next_id = max((scene_object.object_id for scene_object in scene.objects), default=-1) + 1
        for index, piece in enumerate(pieces):
            if piece.surface != SURFACE_OBJECT:
                structure_ids[index] = next_id
                next_id += 1
    vertices, colors, triangles, segment_of_vertex = [], [], [], []
    object_segments: dict[int, list[int]] = {}
    offset = 0
    for index, piece in enumerate(pieces):
        vertices.append(piece.vertices)
        colors.append(
            np.tile(np.round(np.asarray(piece.rgb) * 255.0).astype(np.uint8), (len(piece.vertices), 1))
        )
        triangles.append(piece.triangles + offset)
        if noise is None:
            local = np.zeros(len(piece.vertices), dtype=np.int64)
        else:
            local = vertex_segments(piece.vertices, noise.segment_size_m)
        segment_ids = offset + local  # unique: a piece has no more segments than vertices
        segment_of_vertex.append(segment_ids)
        object_id = piece.object_id if piece.surface == SURFACE_OBJECT else structure_ids.get(index, -1)
        if object_id >= 0:
            object_segments.setdefault(object_id, []).extend(sorted(set(segment_ids.tolist())))
        offset += len(piece.vertices)
    names = {SURFACE_FLOOR: "floor", SURFACE_CEILING: "ceiling"}
    annotated = [(scene_object.object_id, scene_object.category) for scene_object in scene.objects] + [
        (object_id, names.get(pieces[index].surface, "wall")) for index, object_id in structure_ids.items()
    ]
    return SegmentedMesh(
        np.concatenate(vertices).astype(np.float32),
        np.concatenate(colors),
        np.concatenate(triangles),
        np.concatenate(segment_of_vertex),
        object_segments,
        annotated,
    )


class ScanNetSceneWriter:
    """Writes one ScanNet-like scan folder `scannet/scans/<scene_id>/`.

    With `noise` (the realistic mode, :mod:`assets.sample_world.realism`) the depth is noisy with
    holes, the recorded poses carry a registration error (both drawn from `rng`), the mesh is
    over-segmented and the room's surfaces are annotated objects.
    """

    def __init__(
        self,
        scans_dir: Path,
        scene: Scene,
        jpeg_quality: int,
        noise: ScanNoise | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.scene = scene
        self.folder = scans_dir / scene.scene_id
        self.jpeg_quality = jpeg_quality
        self.noise = noise
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.num_frames = 0

    def write_frame(self, view: View, rgb: np.ndarray, depth_m: np.ndarray, instance: np.ndarray) -> None:
        """Colour JPEG, depth PNG (uint16 mm), pose, and the instance PNG (uint16, objectId + 1)."""
        index = view.frame_index
        pose = view.pose
        if self.noise is not None:
            depth_m = noisy_depth(depth_m, self.rng, self.noise)
            pose = misregistered_pose(pose, self.rng, self.noise)
        write_jpeg(self.folder / "color" / f"{index}.jpg", rgb, self.jpeg_quality)
        write_png(self.folder / "depth" / f"{index}.png", depth_to_png_units(depth_m))
        (self.folder / "pose").mkdir(parents=True, exist_ok=True)
        (self.folder / "pose" / f"{index}.txt").write_text(matrix_text(pose))
        write_png(
            self.folder / "instance-filt" / f"{index}.png", (instance.astype(np.int64) + 1).astype(np.uint16)
        )
        self.num_frames += 1

    def write_scene_files(self, views: list[View], pieces: list[MeshPiece]) -> None:
        """Intrinsics, the meta `.txt`, the mesh, its segments and the aggregation."""
        first = views[0]
        intrinsic_dir = self.folder / "intrinsic"
        intrinsic_dir.mkdir(parents=True, exist_ok=True)
        (intrinsic_dir / "intrinsic_color.txt").write_text(matrix_text(homogeneous(first.color_intrinsics)))
        (intrinsic_dir / "intrinsic_depth.txt").write_text(matrix_text(homogeneous(first.depth_intrinsics)))
        (intrinsic_dir / "extrinsic_color.txt").write_text(matrix_text(np.eye(4)))
        (intrinsic_dir / "extrinsic_depth.txt").write_text(matrix_text(np.eye(4)))
        scene_id = self.scene.scene_id
        color_k, depth_k = first.color_intrinsics, first.depth_intrinsics
        meta = [
            "axisAlignment = " + " ".join(f"{value:g}" for value in np.eye(4).ravel()),
            f"colorHeight = {first.height}",
            f"colorWidth = {first.width}",
            f"depthHeight = {first.depth_height}",
            f"depthWidth = {first.depth_width}",
            f"fx_color = {color_k[0, 0]:.6f}",
            f"fx_depth = {depth_k[0, 0]:.6f}",
            f"fy_color = {color_k[1, 1]:.6f}",
            f"fy_depth = {depth_k[1, 1]:.6f}",
            f"mx_color = {color_k[0, 2]:.6f}",
            f"mx_depth = {depth_k[0, 2]:.6f}",
            f"my_color = {color_k[1, 2]:.6f}",
            f"my_depth = {depth_k[1, 2]:.6f}",
            f"numColorFrames = {len(views)}",
            f"numDepthFrames = {len(views)}",
            "numIMUmeasurements = 0",
            f"sceneType = {self.scene.scene_type}",
        ]
        (self.folder / f"{scene_id}.txt").write_text("\n".join(meta) + "\n")

        mesh = segmented_mesh(self.scene, pieces, self.noise)
        write_ply(self.folder / f"{scene_id}_vh_clean_2.ply", mesh.vertices, mesh.colors, mesh.triangles)
        segments_name = f"{scene_id}_vh_clean_2.0.010000.segs.json"
        write_json(
            self.folder / segments_name,
            {
                "params": {
                    "kThresh": "0.0001",
                    "segMinVerts": "20",
                    "minPoints": "750",
                    "maxPoints": "5000",
                    "thinThresh": "0.05",
                    "flatThresh": "0.001",
                    "minLength": "0.02",
                    "maxLength": "1",
                },
                "sceneId": scene_id,
                "segIndices": mesh.segment_of_vertex.tolist(),
            },
        )
        write_json(
            self.folder / f"{scene_id}.aggregation.json",
            {
                "sceneId": f"scannet.{scene_id}",
                "appId": "Aggregator.v2",
                "segGroups": [
                    {
                        "id": object_id,
                        "objectId": object_id,
                        "segments": mesh.object_segments[object_id],
                        "label": label,
                    }
                    for object_id, label in mesh.annotated
                ],
                "segmentsFile": f"scannet.{segments_name}",
            },
        )


def _vg_box(box: tuple[int, int, int, int]) -> dict[str, int]:
    x1, y1, x2, y2 = box
    return {"x": x1, "y": y1, "w": x2 - x1, "h": y2 - y1}


class VisualGenomeWriter:
    """Collects Visual-Genome-like images and annotations; `finish` writes the four JSON files."""

    def __init__(self, folder: Path, jpeg_quality: int) -> None:
        self.folder = folder
        self.jpeg_quality = jpeg_quality
        self.image_data: list[dict] = []
        self.objects: list[dict] = []
        self.relationships: list[dict] = []
        self.attributes: list[dict] = []
        self.next_relationship_id = 1
        self.num_objects = 0
        self.num_relationships = 0

    def add_image(
        self,
        image_id: int,
        rgb: np.ndarray,
        objects: list[dict],
        relationships: list[tuple[int, str, int]],
        rng: np.random.Generator,
    ) -> None:
        """Add one image.

        Args:
            image_id (`int`): the image id (also the JPEG name).
            rgb (`np.ndarray`): the image.
            objects (`list[dict]`): `{object_id, box (x1, y1, x2, y2), name, synset, attributes}` each.
            relationships (`list[tuple[int, str, int]]`): `(subject object_id, predicate, object object_id)`.
            rng (`np.random.Generator`): draws the quirks (name shape, upper-case predicates).
        """
        height, width = rgb.shape[:2]
        write_jpeg(self.folder / "VG_100K" / f"{image_id}.jpg", rgb, self.jpeg_quality)
        self.image_data.append(
            {
                "image_id": image_id,
                "url": VG_URL.format(image_id=image_id),
                "width": width,
                "height": height,
                "coco_id": None,
                "flickr_id": None,
            }
        )
        by_id = {entry["object_id"]: entry for entry in objects}
        self.objects.append(
            {
                "image_id": image_id,
                "objects": [
                    {
                        "object_id": entry["object_id"],
                        **_vg_box(entry["box"]),
                        "names": [entry["name"]],
                        "synsets": [entry["synset"]],
                    }
                    for entry in objects
                ],
            }
        )
        attribute_entries = []
        for entry in objects:
            record = {
                "object_id": entry["object_id"],
                **_vg_box(entry["box"]),
                "names": [entry["name"]],
                "synsets": [entry["synset"]],
            }
            if rng.uniform() >= MISSING_ATTRIBUTES_RATE:
                record["attributes"] = list(entry["attributes"])
            attribute_entries.append(record)
        self.attributes.append({"image_id": image_id, "attributes": attribute_entries})

        def reference(object_id: int) -> dict:
            entry = by_id[object_id]
            base = {"object_id": object_id, **_vg_box(entry["box"])}
            if rng.uniform() < 0.5:
                return {**base, "name": entry["name"], "synsets": [entry["synset"]]}
            return {**base, "names": [entry["name"]], "merged_object_ids": [], "synsets": [entry["synset"]]}

        records = []
        for subject_id, predicate, object_id in relationships:
            written = predicate.upper() if rng.uniform() < UPPER_CASE_PREDICATE_RATE else predicate
            records.append(
                {
                    "relationship_id": self.next_relationship_id,
                    "predicate": written,
                    "synsets": [],
                    "subject": reference(subject_id),
                    "object": reference(object_id),
                }
            )
            self.next_relationship_id += 1
        self.relationships.append({"image_id": image_id, "relationships": records})
        self.num_objects += len(objects)
        self.num_relationships += len(records)

    def finish(self) -> None:
        """Write `image_data.json`, `objects.json`, `relationships.json`, `attributes.json`."""
        write_json(self.folder / "image_data.json", self.image_data)
        write_json(self.folder / "objects.json", self.objects)
        write_json(self.folder / "relationships.json", self.relationships)
        write_json(self.folder / "attributes.json", self.attributes)


class OmniSpatialWriter:
    """Collects OmniSpatial-like questions; images go to `<task_type>/<image number>.png`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.records: list[dict] = []
        self.num_images = 0

    def add_image(self, image_number: int, rgb: np.ndarray, questions: list) -> list[str]:
        """Write the image and record its questions (all of one task type); returns their ids."""
        task_type = questions[0].task_type
        write_png(self.folder / task_type / f"{image_number}.png", rgb)
        ids = []
        for index, question in enumerate(questions):
            question_id = f"{image_number}_{index}"
            self.records.append(
                {
                    "id": question_id,
                    "task_type": question.task_type,
                    "sub_task_type": question.sub_task_type,
                    "question": question.question,
                    "options": list(question.options),
                    "answer": question.answer_index,
                }
            )
            ids.append(question_id)
        self.num_images += 1
        return ids

    def finish(self) -> None:
        """Write `data.json`."""
        write_json(self.folder / "data.json", self.records, indent=2)


class SpatiaLabWriter:
    """Collects SpatiaLab-like questions (1-based `Answer`); images go to `images/`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.records: list[dict] = []
        self.num_images = 0

    def add_image(self, image_filename: str, rgb: np.ndarray, questions: list) -> list[int]:
        """Write the image and record its questions (each with exactly 4 options); returns their ids."""
        write_png(self.folder / "images" / image_filename, rgb)
        ids = []
        for question in questions:
            if len(question.options) != 4:
                raise ValueError(f"SpatiaLab questions need 4 options, got {question.options}")
            question_id = len(self.records) + 1
            record = {
                "id": question_id,
                "Category": question.task_type,
                "Sub_Category": question.sub_task_type,
                "Question": question.question,
            }
            for index, option in enumerate(question.options, start=1):
                record[f"Option_{index}"] = option
            record["Answer"] = question.answer_index + 1
            record["Image_Filename"] = image_filename
            self.records.append(record)
            ids.append(question_id)
        self.num_images += 1
        return ids

    def finish(self) -> None:
        """Write `spatialab.json`."""
        write_json(self.folder / "spatialab.json", self.records, indent=2)


class CocoWriter:
    """Collects COCO instances for the OmniSpatial-like images; `finish` writes `instances.json`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.images: list[dict] = []
        self.annotations: list[dict] = []

    def add_image(
        self, image_id: int, file_name: str, instance: np.ndarray, objects: list[tuple[int, str]]
    ) -> dict[int, int]:
        """Add an image and one annotation per `(object_id, category)`; returns object id -> annotation id."""
        height, width = instance.shape
        self.images.append(
            {
                "id": image_id,
                "file_name": file_name,
                "width": width,
                "height": height,
                "license": 0,
                "date_captured": "",
            }
        )
        annotation_ids = {}
        for object_id, category in objects:
            mask = instance == object_id
            rows, columns = np.nonzero(mask)
            x1, y1 = int(columns.min()), int(rows.min())
            x2, y2 = int(columns.max()) + 1, int(rows.max()) + 1
            annotation_id = len(self.annotations) + 1
            self.annotations.append(
                {
                    "id": annotation_id,
                    "image_id": image_id,
                    "category_id": CATALOGUE[category].coco_id,
                    "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)],
                    "area": float(mask.sum()),
                    "segmentation": {"counts": rle_counts(mask), "size": [height, width]},
                    "iscrowd": 0,
                }
            )
            annotation_ids[object_id] = annotation_id
        return annotation_ids

    def finish(self) -> None:
        """Write `instances.json`."""
        categories = [
            {"id": template.coco_id, "name": template.category, "supercategory": template.supercategory}
            for template in sorted(CATALOGUE.values(), key=lambda template: template.coco_id)
        ]
        write_json(
            self.path,
            {
                "info": {"description": "sample world instances", "version": "1.0", "year": 2026},
                "licenses": [{"id": 0, "name": "synthetic", "url": ""}],
                "images": self.images,
                "annotations": self.annotations,
                "categories": categories,
            },
        )
