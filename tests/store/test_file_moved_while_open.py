"""The project file renamed, moved away or deleted (or its folder deleted) while a program has
it open for writing, between two saves, with its connections still open: SQLite would go on
writing into the file it opened, which no name leads to any more (a renamed file's saves into
the -wal of its old name), and every such save was reported done and lost. Now the save is
refused in words, and every save made before is in the file wherever it went."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from portalreview.store.errors import SaveFailed
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


def _respond(text: str) -> dict:
    return {"mode": "theme_guided", "parts": {"empathy": text}}


@pytest.fixture
def in_folder(tmp_path: Path) -> tuple[Path, int]:
    """The small study closed in a folder of its own: its path and its respond unit."""
    path = tmp_path / "ward5" / "study.prproj"
    path.parent.mkdir()
    with Project.create(path, name="Ward 5") as made:
        unit = build_small_study(made).units["respond"]
    return path, unit


def _rename(path: Path) -> Path:
    return path.rename(path.with_name("study-final.prproj"))


def _move_away(path: Path) -> Path:
    (elsewhere := path.parent.parent / "elsewhere").mkdir()
    return Path(shutil.move(path, elsewhere / path.name))


def _delete(path: Path) -> None:
    path.unlink()


def _delete_folder(path: Path) -> None:
    shutil.rmtree(path.parent)


def _replace(path: Path) -> None:
    """A sync tool puts its own copy of the file in its place (a new file, one rename)."""
    shutil.copyfile(path, f"{path}.synced")
    os.replace(f"{path}.synced", path)


GONE: dict[str, Callable[[Path], Path | None]] = {
    "file renamed": _rename,
    "file moved away": _move_away,
    "file deleted": _delete,
    "folder deleted": _delete_folder,
    "file replaced": _replace,
}


def _stored(path: Path, unit: int) -> str:
    with Project.open(path, read_only=True) as project:
        return StudyService(project).as_viewer("ava").get_answer(unit).payload["parts"]["empathy"]


@pytest.mark.parametrize("how", GONE)
def test_a_save_into_a_file_gone_from_its_name_is_refused_in_words(in_folder, how):
    path, unit = in_folder
    project = Project.open(path, automatic_backup=False)
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(unit, _respond("Saved before."))
    new_path = GONE[how](path)
    for _ in range(2):  # and every later save too
        with pytest.raises(SaveFailed) as refused:
            ava.save_answer(unit, _respond("Typed after."))
        message = str(refused.value)
        assert "study.prproj was moved, renamed or deleted while it was open" in message
        assert "Nothing was saved" in message and "Typed after" not in message
    assert ava.get_answer(unit).payload["parts"]["empathy"] == "Saved before."
    project.close()
    if new_path is not None:  # the saves made before the rename are in the file, under any name
        assert _stored(new_path, unit) == "Saved before."


def test_a_folder_renamed_with_the_file_in_it_goes_on_saving(in_folder):
    """The file keeps its name and its -wal and lock beside it: nothing is at risk."""
    path, unit = in_folder
    project = Project.open(path, automatic_backup=False)
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(unit, _respond("Saved before."))
    moved = path.parent.rename(path.parent.with_name("ward5-moved")) / path.name
    ava.save_answer(unit, _respond("Saved after."))
    project.close()
    assert _stored(moved, unit) == "Saved after."


def test_another_program_opening_the_renamed_file_has_every_save_and_is_its_only_writer(
    in_folder,
):
    """The lock goes by name, so the renamed file can be opened for writing at once: it must
    hold the first program's saves (merged into the file at each commit, not left in the
    -wal of its old name), and the first program must write no more into it."""
    path, unit = in_folder
    first = Project.open(path, automatic_backup=False)
    ava = StudyService(first).as_viewer("ava")
    ava.save_answer(unit, _respond("Saved before."))
    renamed = _rename(path)
    with Project.open(renamed, automatic_backup=False) as second:
        ben = StudyService(second).as_viewer("ava")
        assert ben.get_answer(unit).payload["parts"]["empathy"] == "Saved before."
        ben.save_answer(unit, _respond("Saved by the second program."))
        with pytest.raises(SaveFailed):
            ava.save_answer(unit, _respond("The first program's next save."))
    first.close()
    assert _stored(renamed, unit) == "Saved by the second program."
    with Project.open(renamed, read_only=True) as check:
        assert check.integrity_check() == "ok"


def test_the_wal_left_under_the_old_name_holds_no_save_to_replay(in_folder):
    """Closing a file renamed while open leaves its -wal under the old name. SQLite replays a
    -wal into whatever file next has that name: renamed back after a second program saved
    into it, the first program's older pages would overwrite the newer ones. So the first
    program empties that -wal when it closes."""
    path, unit = in_folder
    first = Project.open(path, automatic_backup=False)
    StudyService(first).as_viewer("ava").save_answer(unit, _respond("Saved before."))
    renamed = _rename(path)
    with Project.open(renamed, automatic_backup=False) as second:
        StudyService(second).as_viewer("ava").save_answer(unit, _respond("Saved later."))
    first.close()
    old_wal = Path(f"{path}-wal")
    assert not old_wal.exists() or old_wal.stat().st_size == 0
    renamed.rename(path)  # renamed back
    assert _stored(path, unit) == "Saved later."
    with Project.open(path, read_only=True) as check:
        assert check.integrity_check() == "ok"


def test_a_wal_not_merged_into_the_file_is_left_for_the_file_renamed_back(in_folder):
    """When the last save's merge did not finish (a reader held it back), the -wal left
    under the old name still holds saves: copying them into the file at close could write
    over another program's newer ones, so it is left as it is; renaming the file back brings
    them in."""
    path, unit = in_folder
    first = Project.open(path, automatic_backup=False)
    first.merge_each_save = False  # as when a reader held the merge back
    StudyService(first).as_viewer("ava").save_answer(unit, _respond("Only in the -wal."))
    renamed = _rename(path)
    first.close()
    assert Path(f"{path}-wal").stat().st_size > 0
    renamed.rename(path)
    assert _stored(path, unit) == "Only in the -wal."
