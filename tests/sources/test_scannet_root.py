"""`scannet_root` may name ScanNet's `scans/` folder or the dataset's folder above it: the scans are the same."""

from pathlib import Path

from assets.raw_files import scan_folders
from assets.resources import SourcesResource, StorageResource


def _scannet_dataset(root: Path) -> Path:
    """A ScanNet download's layout: `scans/` and `scans_test/` with one folder per scan, and a label file."""
    for folder in ("scans/scene0000_00", "scans/scene0001_00", "scans_test/scene0707_00"):
        for part in ("color", "depth", "pose", "intrinsic"):
            (root / folder / part).mkdir(parents=True)
    (root / "scannetv2-labels.combined.tsv").write_text("id\traw_category\n")
    return root


def test_the_dataset_folder_and_its_scans_folder_give_the_same_scans(tmp_path):
    dataset = _scannet_dataset(tmp_path / "ScanNet")
    storage = StorageResource(root=str(tmp_path / "storage"))
    for configured in (dataset, dataset / "scans"):
        sources = SourcesResource(scannet_root=str(configured))
        assert sources.scan_roots(storage)["scannet"] == dataset / "scans"
        assert list(scan_folders(sources, storage)) == ["scene0000_00", "scene0001_00"]


def test_one_scans_folder_is_read_as_it_is(tmp_path):
    """A folder of scans named otherwise, or one scan's own folder, is not taken for the dataset's."""
    dataset = _scannet_dataset(tmp_path / "ScanNet")
    storage = StorageResource(root=str(tmp_path / "storage"))
    scan = dataset / "scans" / "scene0000_00"
    (scan / "scans").mkdir()  # a stray folder named scans inside one scan
    assert SourcesResource(scannet_root=str(scan)).scan_roots(storage)["scannet"] == scan
    assert (
        SourcesResource(scannet_root=str(dataset / "scans_test")).scan_roots(storage)["scannet"]
        == dataset / "scans_test"
    )
