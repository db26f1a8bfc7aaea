"""The RGB-D scan data sets in one place: where each scan is, its partition key, what is read of it.

| data set | root (config field) | a scan | partition key |
|---|---|---|---|
| ScanNet | ``scans/`` (``scannet_root``) | ``scans/<scene>/`` | ``<scene>`` (``scene0000_00``) |
| ARKitScenes | ``3dod/`` (``arkitscenes_root``) | ``<Training|Validation>/<video_id>/`` | ``arkitscenes_<video_id>`` |
| ScanNet++ | the folder of ``data/`` and ``splits/`` (``scannetpp_root``) | ``data/<scene_id>/`` | ``scannetpp_<scene_id>`` |

:func:`list_scans` gives a root's scans as :class:`ScanFolder` (key, data set, folder, the paths the reader
reads, and the video's ARKitScenes metadata row); :func:`read_scan` reads one with its data set's reader.

A scan folder that is a symbolic link is listed only when it resolves strictly inside its root, not to the
root or an ancestor of it, and not to (nor into, nor above) another scan's folder
(:func:`readers.common.linked_folder_problem`): ``scans/scene0004_00 -> .`` would otherwise be a partition
holding the other scans' frames again, and a link to another scan's folder would read that scan twice. Such
a folder is refused: a warning names it and why, and the root's other scans are listed as usual. A link to
a scan folder kept elsewhere inside the root, listed nowhere else, is a scan like any other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import ARKITSCENES, DATASET_NAMES, SCAN_DATASETS, SCANNET, SCANNETPP
from readers import arkitscenes, scannetpp
from readers.common import MissingInputError, listed_scan_folders
from readers.scan_tables import ScanTables, scan_tables
from readers.scannet import read_scannet_scene

logger = logging.getLogger(__name__)

CONFIG_FIELDS = {
    SCANNET: "scannet_root",
    ARKITSCENES: arkitscenes.CONFIG_FIELD,
    SCANNETPP: scannetpp.CONFIG_FIELD,
}
"""The ``sources`` field of each data set's root."""
KEY_PREFIXES = {ARKITSCENES: arkitscenes.KEY_PREFIX, SCANNETPP: scannetpp.KEY_PREFIX}
"""The partition keys of these data sets start with their prefix; ScanNet's are its folder names."""


@dataclass(frozen=True)
class ScanFolder:
    """One scan: its partition key, data set and folder, the files and folders its reader reads (what its
    raw-file version fingerprints), and ARKitScenes' ``metadata.csv`` row of it (versioned with the files)."""

    key: str
    dataset: str
    folder: Path
    inputs: tuple[Path, ...]
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def config_field(self) -> str:
        """The ``sources`` field of its data set's root."""
        return CONFIG_FIELDS[self.dataset]


def list_scans(dataset: str, root: Path) -> list[ScanFolder]:
    """The scans of a data set's root, sorted by key (a missing root has none).

    Every ScanNet folder is listed, an empty one included (its partition then fails with the reason), and a
    ScanNet folder named like another data set's key is refused; a linked scan folder that resolves outside
    the root, to the root or to another scan is left out with a warning (see the module docstring).

    Raises:
        ValueError: for an unknown data set, a ScanNet folder named like another data set's key, or an
            ARKitScenes video in two folds.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    if dataset == SCANNET:
        scans = []
        folders = sorted(item for item in root.iterdir() if item.is_dir())
        for path in listed_scan_folders(folders, root, DATASET_NAMES[SCANNET]):
            other = next(
                (name for name, prefix in KEY_PREFIXES.items() if path.name.startswith(prefix)), None
            )
            if other is not None:
                raise ValueError(
                    f"ScanNet scan folder {path} is named like an {DATASET_NAMES[other]} scan's partition key: rename it"
                )
            scans.append(ScanFolder(path.name, SCANNET, path, (path,)))
        return scans
    if dataset == ARKITSCENES:
        return [
            ScanFolder(
                arkitscenes.scene_id_of(video.video_id),
                ARKITSCENES,
                video.folder,
                (video.folder,),
                video.metadata,
            )
            for video in arkitscenes.list_arkitscenes_videos(root)
        ]
    if dataset == SCANNETPP:
        return [
            ScanFolder(
                scannetpp.scene_id_of(folder.name), SCANNETPP, folder, tuple(scannetpp.scene_inputs(folder))
            )
            for folder in scannetpp.list_scannetpp_scenes(root)
        ]
    raise ValueError(f"unknown scan data set {dataset!r}; known: {', '.join(SCAN_DATASETS)}")


def read_scan(scan: ScanFolder) -> tuple[list[dict], dict | None, QuarantineLog]:
    """One scan's frame rows, scene row (None when no frame is usable) and quarantine log.

    Raises:
        MissingInputError: when a file the scan needs is missing or unreadable (ARKitScenes, ScanNet++),
            one sentence naming it.
    """
    if scan.dataset == SCANNET:
        return read_scannet_scene(scan.folder)
    if scan.dataset == ARKITSCENES:
        video = arkitscenes.VideoFolder(scan.folder.name, scan.folder, scan.metadata)
        return arkitscenes.read_arkitscenes_video(video)
    return scannetpp.read_scannetpp_scene(scan.folder)


def read_scans(scans: list[ScanFolder]) -> ScanTables:
    """Read several scans; one that fails is a quarantine record naming the file, and the others are read."""
    frames: list[dict] = []
    scenes: list[dict] = []
    log = QuarantineLog("rgbd_frames")
    for scan in scans:
        try:
            scan_frames, scene, scan_log = read_scan(scan)
        except MissingInputError as error:
            log.add(scan.key, str(error), source_file=error.location)
            continue
        frames.extend(scan_frames)
        if scene is not None:
            scenes.append(scene)
        log.extend(scan_log)
    return scan_tables(frames, scenes, log)
