"""`generate_sample_world`: sample, render and write the whole sample world.

Per scene: sample the room and objects, the camera views, render every view once, then write that
view into every format (ScanNet frame, Visual Genome image, and either an OmniSpatial-like or a
SpatiaLab-like image with its questions: even global view numbers go to OmniSpatial, odd ones to
SpatiaLab) and record the truth. The rooms after those are scans only, written as ARKitScenes videos
and ScanNet++ scenes (:mod:`assets.sample_world.scan_layouts`), their truth under ``layout_scans``.

A build holds the world's lock, writes into a private staging folder beside the root, stamps it
with a manifest of every file (size and SHA-256) and swaps it into place, so readers never see half
a world and concurrent builds do not mix their files (:mod:`assets.sample_world.completion`).
`ensure_sample_world` reuses a world whose stamp matches the configuration and its files, and
rebuilds anything else.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from assets.sample_world.catalogue import CATALOGUE
from assets.sample_world.completion import (
    MANIFEST_FILE,
    file_manifest,
    lock_path,
    new_staging_folder,
    remove_leftovers,
    stamp_identity,
    swap_into_place,
    verify_world,
    write_stamp,
)
from assets.sample_world.config import GENERATOR_VERSION, SampleWorldConfig
from assets.sample_world.facts import ViewFacts
from assets.sample_world.questions import OMNISPATIAL_TASKS, SPATIALAB_TASKS, Question, questions_for_image
from assets.sample_world.realism import ScanNoise
from assets.sample_world.relations import Relation, view_relationships
from assets.sample_world.render import SceneRenderer, ViewRender
from assets.sample_world.scan_layouts import (
    LayoutScan,
    write_arkitscenes_video,
    write_index_files,
    write_scannetpp_scene,
)
from assets.sample_world.scene import Scene, View, sample_scene, sample_views
from assets.sample_world.writers import (
    DEPTH_SCALE,
    CocoWriter,
    OmniSpatialWriter,
    ScanNetSceneWriter,
    SpatiaLabWriter,
    VisualGenomeWriter,
    write_json,
)
from data_contracts.storage import file_lock

logger = logging.getLogger(__name__)

OMNISPATIAL_TASK_TYPES = tuple(OMNISPATIAL_TASKS)
SPATIALAB_CATEGORIES = tuple(SPATIALAB_TASKS)
VG_OBJECT_ID_STRIDE = 100
"""Visual Genome object id = image_id * 100 + scene object id."""

CONVENTIONS = {
    "world_frame": "metres, z up, floor plane z = 0, room spans [0, width] x [0, depth] x [0, height]",
    "camera": "OpenCV (x right, y down, z forward); pose = 4x4 camera-to-world; pixel centres at integer (u, v)",
    "depth": "z-depth (not ray length); PNG uint16 millimetres, 0 = missing; depth image = colour size / depth_downsample",
    "instance_png": "uint16 at colour resolution, value = objectId + 1, 0 = no object (room surfaces)",
    "bbox_px": "[x1, y1, x2, y2] pixel edges of the instance mask: columns x1..x2-1, rows y1..y2-1",
    "visibility": "visible_pixels / unoccluded_pixels (pixels whose ray meets the object at all)",
    "truncation": "fraction of the unoccluded silhouette on an image plane extended by one image size on each side "
    "(sampled every truncation_stride pixels) that lies outside the image",
    "vg_object_id": f"image_id * {VG_OBJECT_ID_STRIDE} + object_id",
    "global_view_index": "scene_index * views_per_scene + frame_index; OmniSpatial image number when even, "
    "SpatiaLab image when odd; Visual Genome image_id = global_view_index + 1",
}


@dataclass(frozen=True)
class SampleWorldSummary:
    """What `generate_sample_world` wrote.

    Args:
        root (`Path`): the world's folder.
        generator_version (`str`): `GENERATOR_VERSION`.
        num_scenes, num_views, num_objects (`int`): rooms, camera views (ScanNet frames), objects (of the
            ScanNet-like rooms).
        num_arkitscenes_videos, num_scannetpp_scenes (`int`): further rooms written as ARKitScenes videos and
            ScanNet++ scenes.
        num_omnispatial_images, num_omnispatial_questions (`int`): OmniSpatial-like images and questions.
        num_spatialab_images, num_spatialab_questions (`int`): SpatiaLab-like images and questions.
        num_vg_images, num_vg_objects, num_vg_relationships (`int`): Visual-Genome-like counts.
        num_coco_images, num_coco_annotations (`int`): COCO-like counts.
        bytes_on_disk (`int`): total size of the written files.
        seconds (`float`): wall time of the generation.
        paths (`dict[str, Path]`): where each format lives (keys `truth`, `omnispatial_data`,
            `omnispatial_images`, `spatialab_json`, `spatialab_images`, `visual_genome`,
            `scannet_scans`, `arkitscenes_3dod`, `scannetpp`, `coco_instances`).
    """

    root: Path
    generator_version: str
    num_scenes: int
    num_views: int
    num_objects: int
    num_omnispatial_images: int
    num_omnispatial_questions: int
    num_spatialab_images: int
    num_spatialab_questions: int
    num_vg_images: int
    num_vg_objects: int
    num_vg_relationships: int
    num_coco_images: int
    num_coco_annotations: int
    num_arkitscenes_videos: int
    num_scannetpp_scenes: int
    bytes_on_disk: int
    seconds: float
    paths: dict[str, Path]

    def as_dict(self) -> dict:
        """JSON-friendly copy (paths as strings)."""
        data = dataclasses.asdict(self)
        data["root"] = str(self.root)
        data["paths"] = {key: str(value) for key, value in self.paths.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict) -> SampleWorldSummary:
        """The inverse of `as_dict`.

        >>> summary = SampleWorldSummary.from_dict({**dict.fromkeys(SampleWorldSummary.__dataclass_fields__, 0),
        ...     "root": "w", "paths": {"truth": "w/truth/world.json"}})
        >>> summary.paths["truth"].as_posix(), summary.from_dict(summary.as_dict()) == summary
        ('w/truth/world.json', True)
        """
        fields = {key: data[key] for key in cls.__dataclass_fields__}
        fields["root"] = Path(data["root"])
        fields["paths"] = {key: Path(value) for key, value in data["paths"].items()}
        return cls(**fields)


def world_paths(root: Path) -> dict[str, Path]:
    """Where each format lives under a world root.

    >>> world_paths(Path("w"))["omnispatial_data"].as_posix()
    'w/omnispatial/data.json'
    """
    return {
        "truth": root / "truth" / "world.json",
        "omnispatial_data": root / "omnispatial" / "data.json",
        "omnispatial_images": root / "omnispatial",
        "spatialab_json": root / "spatialab" / "spatialab.json",
        "spatialab_images": root / "spatialab" / "images",
        "visual_genome": root / "visual_genome",
        "scannet_scans": root / "scannet" / "scans",
        "arkitscenes_3dod": root / "arkitscenes" / "3dod",
        "scannetpp": root / "scannetpp",
        "coco_instances": root / "coco" / "instances.json",
    }


def _vector(values: np.ndarray, digits: int = 6) -> list[float]:
    return [round(float(value), digits) for value in np.asarray(values).ravel()]


def _matrix(values: np.ndarray) -> list[list[float]]:
    return [[float(value) for value in row] for row in np.asarray(values)]


def _object_truth(scene: Scene) -> list[dict]:
    records = []
    for scene_object in scene.objects:
        aabb_min, aabb_max = scene_object.aabb
        facing = scene_object.facing
        records.append(
            {
                "object_id": scene_object.object_id,
                "category": scene_object.category,
                "name": scene_object.name,
                "colour": scene_object.colour,
                "size_word": scene_object.size_word,
                "synset": scene_object.template.synset,
                "coco_category_id": scene_object.template.coco_id,
                "support_id": scene_object.support_id,
                "centroid": _vector(scene_object.centroid),
                "extents": _vector(scene_object.extents),
                "yaw": round(scene_object.yaw, 6),
                "volume": round(scene_object.volume, 6),
                "aabb": {"min": _vector(aabb_min), "max": _vector(aabb_max)},
                "obb": {
                    "center": _vector(scene_object.centroid),
                    "extents": _vector(scene_object.extents),
                    "rotation": [_vector(row) for row in scene_object.rotation],
                    "corners": [_vector(corner) for corner in scene_object.obb_corners],
                },
                "facing": None if facing is None else _vector(facing),
            }
        )
    return records


def _question_truth(
    dataset: str, question_id: str | int, scene: Scene, view: View, question: Question
) -> dict:
    return {
        "dataset": dataset,
        "id": question_id,
        "scene_id": scene.scene_id,
        "frame_index": view.frame_index,
        "task_type": question.task_type,
        "sub_task_type": question.sub_task_type,
        "template": question.template,
        "object_ids": list(question.object_ids),
        "answer_text": question.options[question.answer_index],
        "facts": question.facts,
    }


class _Writers:
    def __init__(self, root: Path, config: SampleWorldConfig) -> None:
        paths = world_paths(root)
        self.paths = paths
        self.omnispatial = OmniSpatialWriter(paths["omnispatial_images"])
        self.spatialab = SpatiaLabWriter(root / "spatialab")
        self.visual_genome = VisualGenomeWriter(paths["visual_genome"], config.jpeg_quality)
        self.coco = CocoWriter(paths["coco_instances"])
        self.scene_records: list[dict] = []
        self.question_records: list[dict] = []
        self.arkitscenes: list[LayoutScan] = []
        self.scannetpp: list[LayoutScan] = []


def _add_visual_genome_image(
    config: SampleWorldConfig,
    writers: _Writers,
    facts: ViewFacts,
    render: ViewRender,
    image_id: int,
    rng: np.random.Generator,
) -> tuple[dict[int, int], list[Relation]]:
    """Add a view to the Visual Genome-like files; returns its objects' ids there (by object id) and its relations."""
    vg_ids = {item.object_id: image_id * VG_OBJECT_ID_STRIDE + item.object_id for item in facts.annotated}
    vg_objects = [
        {
            "object_id": vg_ids[item.object_id],
            "box": item.visibility.bbox_px,
            "name": item.category,
            "synset": item.scene_object.template.synset,
            "attributes": [item.scene_object.colour]
            + ([item.scene_object.size_word] if item.scene_object.size_word else []),
        }
        for item in facts.annotated
    ]
    relations = view_relationships(facts, rng, config.max_relationships_per_image)
    writers.visual_genome.add_image(
        image_id,
        render.rgb,
        vg_objects,
        [
            (vg_ids[relation.subject_id], relation.predicate, vg_ids[relation.object_id])
            for relation in relations
        ],
        rng,
    )
    return vg_ids, relations


def _add_omnispatial_questions(
    config: SampleWorldConfig,
    writers: _Writers,
    scene: Scene,
    view: View,
    facts: ViewFacts,
    render: ViewRender,
    global_index: int,
    rng: np.random.Generator,
) -> tuple[str | None, dict[int, int]]:
    """Ask a view's OmniSpatial-like questions; returns its image path (None without questions) and COCO ids."""
    preferred = OMNISPATIAL_TASK_TYPES[(global_index // 2) % len(OMNISPATIAL_TASK_TYPES)]
    questions = questions_for_image(
        facts, OMNISPATIAL_TASKS, preferred, config.omnispatial_questions_per_image, rng, 2, 4
    )
    if not questions:
        return None, {}
    ids = writers.omnispatial.add_image(global_index, render.rgb, questions)
    omnispatial_image = f"{questions[0].task_type}/{global_index}.png"
    coco_ids = writers.coco.add_image(
        global_index,
        omnispatial_image,
        render.instance,
        [(item.object_id, item.category) for item in facts.annotated],
    )
    writers.question_records += [
        _question_truth("omnispatial", question_id, scene, view, question)
        for question_id, question in zip(ids, questions, strict=True)
    ]
    return omnispatial_image, coco_ids


def _add_spatialab_questions(
    config: SampleWorldConfig,
    writers: _Writers,
    scene: Scene,
    view: View,
    facts: ViewFacts,
    render: ViewRender,
    global_index: int,
    rng: np.random.Generator,
) -> str | None:
    """Ask a view's SpatiaLab-like questions; returns its image file name (None without questions)."""
    preferred = SPATIALAB_CATEGORIES[(global_index // 2) % len(SPATIALAB_CATEGORIES)]
    questions = questions_for_image(
        facts, SPATIALAB_TASKS, preferred, config.spatialab_questions_per_image, rng, 4, 4
    )
    if not questions:
        return None
    spatialab_image = f"{global_index}.png"
    ids = writers.spatialab.add_image(spatialab_image, render.rgb, questions)
    writers.question_records += [
        _question_truth("spatialab", question_id, scene, view, question)
        for question_id, question in zip(ids, questions, strict=True)
    ]
    return spatialab_image


def _view_object_truth(facts: ViewFacts, vg_ids: dict[int, int], coco_ids: dict[int, int]) -> list[dict]:
    """The truth of each object in a view: its visibility and its ids in the Visual Genome and COCO files."""
    return [
        {
            "object_id": item.object_id,
            "visible_pixels": item.visibility.visible_pixels,
            "unoccluded_pixels": item.visibility.unoccluded_pixels,
            "visibility": round(item.visibility.visibility, 6),
            "bbox_px": None if item.visibility.bbox_px is None else list(item.visibility.bbox_px),
            "truncation": round(item.visibility.truncation, 6),
            "truncated": item.visibility.truncated,
            "vg_object_id": vg_ids.get(item.object_id),
            "coco_annotation_id": coco_ids.get(item.object_id),
        }
        for item in facts.objects
    ]


def _write_scene(config: SampleWorldConfig, scene_index: int, writers: _Writers) -> None:
    """Render a ScanNet-like room's views and write them to its scan and to the image and question files."""
    scene = sample_scene(config, scene_index)
    views = sample_views(config, scene)
    renderer = SceneRenderer(scene)
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene_index, 2]))
    realistic = config.scan_realism == "realistic"
    scannet = ScanNetSceneWriter(
        writers.paths["scannet_scans"],
        scene,
        config.jpeg_quality,
        noise=ScanNoise() if realistic else None,
        rng=np.random.default_rng(np.random.SeedSequence([config.seed, scene_index, 3])),
    )
    view_records = []
    for view in views:
        render = renderer.render(view, config.truncation_stride)
        facts = ViewFacts.build(scene, view, render, config)
        global_index = scene_index * config.views_per_scene + view.frame_index
        scannet.write_frame(view, render.rgb, render.depth, render.instance)

        image_id = global_index + 1
        vg_ids, relations = _add_visual_genome_image(config, writers, facts, render, image_id, rng)

        omnispatial_image = spatialab_image = None
        coco_ids: dict[int, int] = {}
        if global_index % 2 == 0:
            omnispatial_image, coco_ids = _add_omnispatial_questions(
                config, writers, scene, view, facts, render, global_index, rng
            )
        else:
            spatialab_image = _add_spatialab_questions(
                config, writers, scene, view, facts, render, global_index, rng
            )

        view_records.append(
            {
                "frame_index": view.frame_index,
                "global_view_index": global_index,
                "width": view.width,
                "height": view.height,
                "depth_width": view.depth_width,
                "depth_height": view.depth_height,
                "depth_scale": DEPTH_SCALE,
                "color_intrinsics": _matrix(view.color_intrinsics),
                "depth_intrinsics": _matrix(view.depth_intrinsics),
                "pose": _matrix(view.pose),
                "vg_image_id": image_id,
                "omnispatial_image": omnispatial_image,
                "spatialab_image": spatialab_image,
                "objects": _view_object_truth(facts, vg_ids, coco_ids),
                "relationships": [
                    {
                        "subject_id": relation.subject_id,
                        "predicate": relation.predicate,
                        "object_id": relation.object_id,
                    }
                    for relation in relations
                ],
            }
        )
    scannet.write_scene_files(views, renderer.pieces)
    writers.scene_records.append(
        {
            "scene_id": scene.scene_id,
            "scene_index": scene.scene_index,
            "scene_type": scene.scene_type,
            "room": {"width": scene.room.width, "depth": scene.room.depth, "height": scene.room.height},
            "floor_plane": [0.0, 0.0, 1.0, 0.0],
            "light_position": _vector(renderer.light_position),
            "objects": _object_truth(scene),
            "views": view_records,
        }
    )


def _write_layout_scan(config: SampleWorldConfig, scene_index: int, writers: _Writers) -> None:
    """A room after the ScanNet-like ones: an ARKitScenes video, or after those a ScanNet++ scene."""
    scene = sample_scene(config, scene_index)
    renderer = SceneRenderer(scene)
    ordinal = scene_index - config.num_scenes
    if ordinal < config.arkitscenes_videos:
        writers.arkitscenes.append(
            write_arkitscenes_video(
                config, scene, ordinal, writers.paths["arkitscenes_3dod"], renderer, _object_truth(scene)
            )
        )
    else:
        writers.scannetpp.append(
            write_scannetpp_scene(
                config,
                scene,
                ordinal - config.arkitscenes_videos,
                writers.paths["scannetpp"],
                renderer,
                _object_truth(scene),
            )
        )


def _check_replaceable(root: Path) -> None:
    if root.exists() and not (
        (root / "truth" / "world.json").is_file()
        or (root / MANIFEST_FILE).is_file()
        or not any(root.iterdir())
    ):
        raise FileExistsError(
            f"{root} exists and is not a sample world (no truth/world.json); refusing to replace it."
        )


def config_record(config: SampleWorldConfig) -> dict:
    """The config fields that decide the content (everything except `root` and `show_progress`).

    >>> "root" in config_record(SampleWorldConfig())
    False
    """
    data = dataclasses.asdict(config)
    data.pop("root")
    data.pop("show_progress")
    return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def stamp_config(config: SampleWorldConfig) -> dict:
    """What a world's completion stamp records about its configuration.

    >>> stamp_config(SampleWorldConfig())["generator_version"] == GENERATOR_VERSION
    True
    """
    return {"generator_version": GENERATOR_VERSION, **config_record(config)}


def generate_sample_world(config: SampleWorldConfig) -> SampleWorldSummary:
    """Generate the sample world described by `config` under `config.root`.

    The build holds the world's lock. A build that had to wait for it while another build of the
    same folder finished a complete world of the same configuration returns that world instead of
    replacing it a second time (the content is the same, byte for byte).

    Args:
        config (`SampleWorldConfig`): what to generate and where.

    Returns:
        `SampleWorldSummary`: counts, size, time and paths of what was written.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     root = Path(folder) / "sample_world"
    ...     config = SampleWorldConfig(root=root, num_scenes=1, views_per_scene=2, width=64, height=48, show_progress=False)
    ...     summary = generate_sample_world(config)
    ...     written = (root / "truth" / "world.json").is_file()
    >>> summary.num_views, written
    (2, True)
    """
    before = stamp_identity(config.root)
    with file_lock(lock_path(config.root)) as waited:
        if waited and stamp_identity(config.root) != before:
            stamp = verify_world(config.root, stamp_config(config))
            if stamp is not None:
                logger.info("Sample world %s was just built by a concurrent build; reusing it", config.root)
                return SampleWorldSummary.from_dict(stamp["summary"])
        return _generate_locked(config)


def ensure_sample_world(config: SampleWorldConfig, force: bool = False) -> tuple[SampleWorldSummary, bool]:
    """A complete sample world for `config` under `config.root`, built only when needed.

    Under the world's lock: when the folder's completion stamp names this configuration and every
    file matches its manifest (size and SHA-256), the world is reused; otherwise (no stamp, another
    configuration, a missing, truncated or changed file, or `force`) it is rebuilt.

    Returns:
        `(summary, rebuilt)`: the summary recorded when the world was built, and whether it was built now.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     config = SampleWorldConfig(root=Path(folder) / "w", num_scenes=1, views_per_scene=1, width=64,
    ...         height=48, show_progress=False)
    ...     first = ensure_sample_world(config)[1]
    ...     second = ensure_sample_world(config)[1]
    ...     (config.root / "truth" / "world.json").unlink()
    ...     third = ensure_sample_world(config)[1]
    >>> first, second, third
    (True, False, True)
    """
    with file_lock(lock_path(config.root)):
        if not force:
            stamp = verify_world(config.root, stamp_config(config))
            if stamp is not None:
                return SampleWorldSummary.from_dict(stamp["summary"]), False
        return _generate_locked(config), True


def _generate_locked(config: SampleWorldConfig) -> SampleWorldSummary:
    """Build the world into a private folder and swap it into place (the caller holds the lock)."""
    started = time.perf_counter()
    root = config.root
    _check_replaceable(root)
    remove_leftovers(root)
    staging = new_staging_folder(root)
    try:
        summary = _write_world(config, staging, started)
        _check_replaceable(root)
        swap_into_place(staging, root)
    finally:
        if staging.exists():  # a failed build, or the world it replaced
            shutil.rmtree(staging)
    logger.info(
        "Sample world written to %s: %d views, %d OmniSpatial and %d SpatiaLab questions, %.1f MB in %.1f s",
        root,
        summary.num_views,
        summary.num_omnispatial_questions,
        summary.num_spatialab_questions,
        summary.bytes_on_disk / 1e6,
        summary.seconds,
    )
    return summary


def _write_world(config: SampleWorldConfig, staging: Path, started: float) -> SampleWorldSummary:
    """Write every file of the world and its completion stamp into `staging`."""
    writers = _Writers(staging, config)
    logger.info(
        "Generating the sample world: %d scenes (+%d ARKitScenes videos, %d ScanNet++ scenes) x %d views at "
        "%dx%d (seed %d)",
        config.num_scenes,
        config.arkitscenes_videos,
        config.scannetpp_scenes,
        config.views_per_scene,
        config.width,
        config.height,
        config.seed,
    )
    for scene_index in tqdm(
        range(config.total_scenes), desc="sample world", unit="scene", disable=not config.show_progress
    ):
        if scene_index < config.num_scenes:
            _write_scene(config, scene_index, writers)
        else:
            _write_layout_scan(config, scene_index, writers)
    write_index_files(
        writers.paths["arkitscenes_3dod"],
        [scan.index_row for scan in writers.arkitscenes],
        writers.paths["scannetpp"],
        [scan.index_row for scan in writers.scannetpp],
    )
    writers.omnispatial.finish()
    writers.spatialab.finish()
    writers.visual_genome.finish()
    writers.coco.finish()
    write_json(
        writers.paths["truth"],
        {
            "generator_version": GENERATOR_VERSION,
            "config": config_record(config),
            "conventions": CONVENTIONS,
            "catalogue": {
                name: {
                    "synset": template.synset,
                    "coco_category_id": template.coco_id,
                    "has_front": template.has_front,
                }
                for name, template in CATALOGUE.items()
            },
            "scenes": writers.scene_records,
            "layout_scans": [scan.truth for scan in writers.arkitscenes + writers.scannetpp],
            "questions": writers.question_records,
        },
    )
    files = file_manifest(staging)
    summary = SampleWorldSummary(
        root=config.root,
        generator_version=GENERATOR_VERSION,
        num_scenes=config.num_scenes,
        num_views=config.num_scenes * config.views_per_scene,
        num_objects=sum(len(record["objects"]) for record in writers.scene_records),
        num_omnispatial_images=writers.omnispatial.num_images,
        num_omnispatial_questions=len(writers.omnispatial.records),
        num_spatialab_images=writers.spatialab.num_images,
        num_spatialab_questions=len(writers.spatialab.records),
        num_vg_images=len(writers.visual_genome.image_data),
        num_vg_objects=writers.visual_genome.num_objects,
        num_vg_relationships=writers.visual_genome.num_relationships,
        num_coco_images=len(writers.coco.images),
        num_coco_annotations=len(writers.coco.annotations),
        num_arkitscenes_videos=len(writers.arkitscenes),
        num_scannetpp_scenes=len(writers.scannetpp),
        bytes_on_disk=sum(entry["size"] for entry in files.values()),
        seconds=round(time.perf_counter() - started, 3),
        paths=world_paths(config.root),
    )
    write_stamp(staging, stamp_config(config), summary.as_dict(), files)
    return summary
