"""kgen.emit at its edges: it writes regular files only (following a link to one), never
turns a device or FIFO into a regular file, handles names at the system's length limit,
keeps an existing file's mode, and refuses an empty path."""
from __future__ import annotations

import os
import stat

import pytest

import kgen

SPEC = kgen.Reduce(op="sum")


def test_symlink_to_a_regular_file_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "real.cu"
    real.write_text("old\n")
    link = tmp_path / "link.cu"
    link.symlink_to(real)
    assert kgen.emit(SPEC, link) == link
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == kgen.render(SPEC)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.cu", "real.cu"]


def test_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "link.cu"
    link.symlink_to(tmp_path / "missing.cu")
    with pytest.raises(ValueError, match=r"symbolic link to .*missing.cu, which does not exist"):
        kgen.emit(SPEC, link)
    assert link.is_symlink() and not (tmp_path / "missing.cu").exists()


def test_fifo_is_refused_and_left_a_fifo(tmp_path):
    fifo = tmp_path / "pipe.cu"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"pipe.cu is a FIFO; emit replaces only regular files"):
        kgen.emit(SPEC, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    link = tmp_path / "to-pipe.cu"
    link.symlink_to(fifo)
    with pytest.raises(ValueError, match=r"is a FIFO"):
        kgen.emit(SPEC, link)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()


def test_device_file_is_refused_and_left_a_device(tmp_path):
    null_copy = tmp_path / "null"
    try:
        os.mknod(null_copy, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here ({exc}); /dev/null itself is checked below")
    with pytest.raises(ValueError, match=r"is a character device"):
        kgen.emit(SPEC, null_copy)
    assert stat.S_ISCHR(os.lstat(null_copy).st_mode)


def test_dev_null_is_refused():
    with pytest.raises(ValueError, match=r"/dev/null is a character device"):
        kgen.emit(SPEC, "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_names_at_the_length_limit(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    name = "k" * (limit - 3) + ".cu"
    assert len(name.encode()) == limit
    kgen.emit(SPEC, tmp_path / name)
    assert (tmp_path / name).read_text() == kgen.render(SPEC)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left


def test_existing_file_keeps_its_mode_new_file_gets_the_umask(tmp_path):
    old = tmp_path / "old.cu"
    old.write_text("x")
    old.chmod(0o640)
    kgen.emit(SPEC, old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        kgen.emit(SPEC, tmp_path / "new.cu")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.cu").stat().st_mode) == 0o644


def test_folder_target_and_empty_path(tmp_path):
    written = kgen.emit(SPEC, tmp_path)
    assert written.parent == tmp_path and written.name == f"reduce_{SPEC.key}.cu"
    with pytest.raises(ValueError, match="the output path is empty"):
        kgen.emit(SPEC, "")
    with pytest.raises(FileNotFoundError):
        kgen.emit(SPEC, tmp_path / "no" / "such" / "k.cu")
