"""The DGE on scans read from ARKitScenes' and ScanNet++'s layouts, checked against the independent oracle.

The realistic sample world writes rooms as ARKitScenes videos (frames stored rotated: sky directions Left and Up,
a world-to-camera trajectory not 1:1 with the frames, loose annotated boxes, a world whose origin is not the floor)
and as ScanNet++ scenes (a resized iPhone stream with gaps, the aligned mesh and its segment annotation, object ids
from 1). Objects come from the annotated boxes (ARKitScenes: the mesh's points inside each box) and from the
segmented mesh (ScanNet++). Truth is the generator's scene description (``truth/world.json``, ``layout_scans``).
"""

import io
import json
import logging

import numpy as np
import pytest
from PIL import Image

from assets.dge.tasks import GenerationReport
from assets.sources.assets import with_origin
from readers.scans import list_scans, read_scans
from tests.dge.conftest import generated_world, scene_tasks
from tests.dge.oracle import COVERED, AccuracyTable, SceneTruth

logger = logging.getLogger(__name__)

LAYOUTS = {"arkitscenes": ("arkitscenes/3dod", "annotated_boxes"), "scannetpp": ("scannetpp", "mesh")}
"""Per data set: its root in the sample world and the object source its scans use (``auto`` picks the same)."""
CENTRE_TOLERANCE_M = 0.03
EXTENT_TOLERANCE = (0.05, 0.03)
"""An object's measured extent is within 5% or 3 cm of the generator's (whichever is larger)."""
UPRIGHT = {
    "Up": None,
    "Left": Image.Transpose.ROTATE_270,
    "Down": Image.Transpose.ROTATE_180,
    "Right": Image.Transpose.ROTATE_90,
}
"""PIL's transpose that turns a stored frame upright, by sky direction (Left: 90 degrees clockwise)."""


@pytest.fixture(scope="module")
def layout_world(tmp_path_factory):
    """Two ARKitScenes videos and two ScanNet++ scenes, 12 frames each, realistic, rooms on the mixed paths."""
    return generated_world(
        tmp_path_factory,
        "dge_layouts",
        seed=0,
        num_scenes=0,
        views_per_scene=12,
        arkitscenes_videos=2,
        scannetpp_scenes=2,
        camera_path="mixed",
    )


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout_run(request, layout_world):
    """Per data set: its scan tables, each scan's geometry, visibility and tasks, the generation report and the truth."""
    dataset = request.param
    folder, source = LAYOUTS[dataset]
    tables = read_scans(list_scans(dataset, layout_world / folder))
    frames = with_origin(tables.frames, "sample_world")
    report = GenerationReport()
    scans = {
        scene["scene_id"]: scene_tasks(frames, scene, source, report)
        for scene in tables.scenes.iter_rows(named=True)
    }
    truth = json.loads((layout_world / "truth" / "world.json").read_text())
    return dataset, tables, scans, report, {scan["scene_id"]: scan for scan in truth["layout_scans"]}


def test_objects_centres_and_sizes_match_the_truth(layout_run):
    """Every annotated object is measured, its centre (mapped back to the room) within 3 cm and each extent within 5%
    or 3 cm of the generator's; the floor is the data set's up axis."""
    dataset, _, scans, _, truth = layout_run
    lines, worst = [], {"centre_m": 0.0, "extent": 0.0}
    for scene_id, (geometry, _, _) in scans.items():
        record = truth[scene_id]
        room_from_gravity = np.linalg.inv(np.asarray(record["world_from_room"])) @ np.linalg.inv(
            geometry.world_to_gravity
        )
        np.testing.assert_allclose(geometry.floor.normal, [0.0, 0.0, 1.0], atol=1e-12)
        measured = {obj.object_id: obj for obj in geometry.objects}
        assert {item["object_id"] for item in record["objects"]} <= set(measured), geometry.dropped_objects
        for item in record["objects"]:
            obj = measured[item["object_id"]]
            centre = room_from_gravity[:3, :3] @ obj.centroid + room_from_gravity[:3, 3]
            error = float(np.linalg.norm(centre - np.asarray(item["centroid"])))
            true = np.asarray(item["extents"])
            true = np.array([max(true[:2]), min(true[:2]), true[2]])
            got = np.array([max(obj.obb_extents[:2]), min(obj.obb_extents[:2]), obj.obb_extents[2]])
            allowed = np.maximum(EXTENT_TOLERANCE[0] * true, EXTENT_TOLERANCE[1])
            lines.append(
                f"{scene_id} {item['object_id']} {item['category']}: centre {100 * error:.1f} cm, extents "
                f"{np.round(100 * got, 1).tolist()} cm vs {np.round(100 * true, 1).tolist()} cm"
            )
            worst["centre_m"] = max(worst["centre_m"], error)
            worst["extent"] = max(worst["extent"], float(np.max(np.abs(got - true) / allowed)))
            assert error <= CENTRE_TOLERANCE_M, lines[-1]
            assert np.all(np.abs(got - true) <= allowed), lines[-1]
    logger.info("%s objects against the truth (worst %s):\n%s", dataset, worst, "\n".join(lines))


def test_every_answer_agrees_with_the_oracle(layout_run):
    """0 wrong answers of every task type; every type has questions or is named missing with the reason; the rows say
    the scan's data set."""
    dataset, _, scans, report, truth = layout_run
    table = AccuracyTable()
    for scene_id, (_, _, tasks) in scans.items():
        assert set(tasks["dataset"].to_list()) == {dataset}
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene_id]))
    table.add_withheld(report.withheld)
    logger.info("%s\n%s", dataset, table.markdown())
    assert not any(table.wrong.values()), (dataset, table.wrong, table.examples)
    missing = report.missing(list(COVERED))
    assert set(COVERED) - set(table.rows) == set(missing), (dataset, missing)
    assert len(table.rows) >= 13, (dataset, missing)


def test_question_images_are_upright(layout_run):
    """A video stored rotated is shown upright: each question image is the stored frame turned as its sky direction
    says (Left: 90 degrees clockwise, by PIL here)."""
    dataset, tables, scans, _, truth = layout_run
    checked = 0
    for scene_id, (_, _, tasks) in scans.items():
        turns = UPRIGHT[truth[scene_id].get("sky_direction", "Up")]
        paths = dict(
            tables.frames.filter(tables.frames["scene_id"] == scene_id)
            .select("frame_index", "color_path")
            .iter_rows()
        )
        for row in tasks.head(3).iter_rows(named=True):
            for frame, cell in zip(row["frame_indices"], row["images"], strict=True):
                with Image.open(paths[frame]) as stored:
                    expected = np.asarray((stored.transpose(turns) if turns else stored).convert("RGB"))
                shown = np.asarray(Image.open(io.BytesIO(cell["bytes"])).convert("RGB"))
                assert shown.shape == expected.shape and np.array_equal(shown, expected)
                checked += 1
    assert checked >= 3
