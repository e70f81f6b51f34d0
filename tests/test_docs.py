"""The documentation says what the program does: its examples run, its lists are whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

from portalreview.cli import main
from portalreview.store.models import Base
from portalreview.store.project import Project

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _section(page: str, title: str) -> str:
    """The text of one ``## title`` section of a docs page."""
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_data_model_md_names_every_table():
    """prompt_templates was missing from the list of tables."""
    named = set(re.findall(r"`([a-z_]+)`", _section("data-model.md", "Tables")))
    assert set(Base.metadata.tables) - named == set()


def test_the_codebook_extension_example_runs_as_shown(tmp_path, monkeypatch, capsys):
    """formats.md's example file extends a new study's codebook, with the output shown."""
    section = _section("formats.md", "Codebook extensions")
    example = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    command, shown = re.search(r"\$ portalreview (.*)\n(.*)\n", section).groups()
    monkeypatch.chdir(tmp_path)
    Path("extension.json").write_text(example, encoding="utf-8")
    Project.create(tmp_path / "study.prproj").close()
    assert command == "codebook study.prproj --extend extension.json"
    assert main(command.split()) == 0
    assert capsys.readouterr().out.strip() == shown
    for key in json.loads(example):  # each key is in the section's table
        assert f"| `{key}` |" in section


def test_the_pi_guide_does_not_make_a_study_where_the_demo_is():
    """pi-guide.md made the demo as study.prproj, then `new study.prproj`: refused."""
    text = (DOCS / "pi-guide.md").read_text(encoding="utf-8")
    demos = set(re.findall(r"demo --create (\S+)", text))
    made = set(re.findall(r"portalreview new (\S+)", text))
    assert demos and made and not demos & made
