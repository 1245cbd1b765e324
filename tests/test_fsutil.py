"""`fsutil.file_size`: the one stat helper the image and TTS emitters and the image models'
up-to-date key share (absent or unreadable = None, symlinks followed)."""

from __future__ import annotations

import os

from autogen.emit.dispatch import component_state
from autogen.fsutil import file_size, write_new
from autogen.settings.schema import Encoders, Override, Settings


def sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


class TestFileSize:
    def test_bytes_of_a_file_and_of_an_empty_one(self, tmp_path):
        assert file_size(sparse(tmp_path / "t5.safetensors", 3 << 30)) == 3 << 30
        assert file_size(sparse(tmp_path / "empty", 0)) == 0

    def test_a_symlink_is_followed_to_its_target(self, tmp_path):
        target = sparse(tmp_path / "vae.safetensors", 12345)
        os.symlink(target, tmp_path / "link")
        assert file_size(str(tmp_path / "link")) == 12345

    def test_absent_dangling_or_unreachable_paths_are_none(self, tmp_path):
        os.symlink(tmp_path / "gone", tmp_path / "dangling")
        blocker = sparse(tmp_path / "file", 1)
        for path in (tmp_path / "missing", tmp_path / "dangling", f"{blocker}/below", "", "bad\0path"):
            assert file_size(str(path)) is None, path


class TestComponentState:
    def test_declared_and_override_components_map_to_their_sizes_or_none(self, tmp_path):
        vae = sparse(tmp_path / "ae.safetensors", 4096)
        t5 = str(tmp_path / "t5xxl.safetensors")  # not downloaded yet
        clip = sparse(tmp_path / "clip_l.safetensors", 77)
        s = Settings(roots=(), encoders=Encoders(flux_vae=vae, t5xxl=t5))
        ov = Override(match="*", clip_l=clip)
        assert component_state(s, ov) == {vae: 4096, t5: None, clip: 77}

    def test_a_component_arriving_changes_the_state(self, tmp_path):
        t5 = str(tmp_path / "t5xxl.safetensors")
        s = Settings(roots=(), encoders=Encoders(t5xxl=t5))
        before = component_state(s, None)
        sparse(t5, 9 << 30)
        assert before == {t5: None} and component_state(s, None) == {t5: 9 << 30}


def test_write_new_creates_a_file_whole_and_never_replaces_one(tmp_path):
    target = tmp_path / "swapgen.yaml"
    assert write_new(str(target), b"roots: [a]\n")
    assert not write_new(str(target), b"roots: [b]\n")
    assert target.read_bytes() == b"roots: [a]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["swapgen.yaml"]  # no temp file left
