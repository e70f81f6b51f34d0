"""Prompt templates: the bundled defaults are complete, a PI's edit is checked and versioned in
the project (a clinician cannot edit), rendering splits a prompt where prefixes are shared,
and a project of schema version 1 gains the template table when it is opened."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from portalreview.llm import templates as tpl
from portalreview.llm.errors import TemplateError
from portalreview.store import migrations
from portalreview.store.project import Project
from portalreview.store.service import AccessError, StudyService
from portalreview.store.templates import TemplateService


@pytest.mark.parametrize("kind", list(tpl.TEMPLATE_KINDS))
def test_every_kind_has_a_valid_default(kind):
    text = tpl.default_text(kind)
    tpl.validate(kind, text)
    assert set(tpl.placeholders_of(text)) == set(tpl.TEMPLATE_KINDS[kind].allowed)


def test_validation_names_what_is_wrong():
    with pytest.raises(TemplateError, match=r"uses \{\{colour\}\}; it can use"):
        tpl.validate("fact_entail", "{{premise}} {{hypothesis}} {{colour}}")
    with pytest.raises(TemplateError, match=r"must contain \{\{hypothesis\}\}"):
        tpl.validate("fact_entail", "Is {{premise}} true?")
    with pytest.raises(TemplateError, match="is empty"):
        tpl.validate("fact_entail", "   ")
    with pytest.raises(TemplateError, match="unknown template kind"):
        tpl.validate("poetry", "{{x}}")


def test_the_category_template_may_show_the_patient_s_message():
    """Seed 004, Section 3.1: the experts read the patient's message with both replies. A PI's
    text may use {{message}}; one stored before it was offered (without it) still passes."""
    spec = tpl.TEMPLATE_KINDS["fact_error_category"]
    assert "message" in spec.allowed and "message" not in spec.placeholders
    bundled = tpl.default_text("fact_error_category")
    assert "{{message}}" in bundled
    older = bundled.replace("The patient's message:\n{{message}}\n\n", "")
    assert "{{message}}" not in older
    for text in (bundled, older, older + "\nPatient: {{message}}"):
        tpl.validate("fact_error_category", text)
    with pytest.raises(TemplateError, match=r"must contain \{\{fact\}\}.*may also use \{\{message"):
        tpl.validate("fact_error_category", bundled.replace("{{fact}}", ""))


def test_render_cuts_before_each_group_and_keeps_other_braces():
    text = 'Rules {"json": 1}\nA: {{chart_a}} {{message_a}}\nB: {{chart_b}} {{message_b}}\nAnswer: '
    values = {"chart_a": "ca", "message_a": "{{message_b}}", "chart_b": "cb", "message_b": "mb"}
    segments = tpl.render(text, values, tpl.TEMPLATE_KINDS["urgency_pair"].cuts)
    assert segments == ['Rules {"json": 1}\nA: ', "ca {{message_b}}\nB: ", "cb mb\nAnswer:"]
    with pytest.raises(TemplateError, match="no value for chart_b"):
        tpl.render(text, {"chart_a": "", "message_a": ""})


def test_the_urgency_default_puts_each_patient_in_its_own_segment():
    template = tpl.default_template("urgency_pair")
    segs = template.render({"chart_a": "CA", "message_a": "MA", "chart_b": "CB", "message_b": "MB"})
    assert len(segs) == 3
    assert "CA" not in segs[0] and "CA" in segs[1] and "CB" not in segs[1] and "CB" in segs[2]
    assert segs[2].endswith("Answer:")


def test_catalog_text_for_placeholders(project):
    catalogs = StudyService(project).catalogs
    themes = tpl.themes_text(catalogs, with_ids=True)
    assert "- empathy: Empathetic communication." in themes
    assert "- other:" not in themes
    assert "other: Other" in tpl.themes_text(catalogs, with_ids=True, include_other=True)
    codebook = tpl.codebook_text(catalogs)
    assert codebook.count("\n  - ") + 1 >= 36
    assert "C1" in tpl.criteria_text(catalogs)


def test_library_stores_defaults_and_the_pis_edits(study):
    service = study.service
    library = tpl.PromptLibrary(service)
    assert library.template("fact_entail").key == "fact_entail@default"  # nothing stored yet
    # a clinician's run (suggest with their own account) stores none and uses the defaults:
    # a team study's server refused the write with a traceback
    clinicians = tpl.PromptLibrary(service.as_viewer("ava"))
    assert clinicians.install_defaults() == []
    assert clinicians.template("fact_entail").key == "fact_entail@default"
    added = library.install_defaults()
    assert set(added) == set(tpl.TEMPLATE_KINDS)
    assert library.install_defaults() == []  # never twice
    assert library.template("fact_entail").key == "fact_entail@v1"
    edited = "Text: {{premise}}\nClaim: {{hypothesis}}\nSupported? Answer:"
    saved = tpl.PromptLibrary(service.as_viewer("pat")).save("fact_entail", "fact_entail", edited)
    assert saved.key == "fact_entail@v2"
    assert library.template("fact_entail").text == edited
    assert library.install_defaults() == []  # the edit is kept
    with pytest.raises(TemplateError, match="must contain"):
        library.save("fact_entail", "fact_entail", "Text: {{premise}}")
    with pytest.raises(AccessError, match="only the PI"):
        tpl.PromptLibrary(service.as_viewer("ava")).save("fact_entail", "fact_entail", edited)


def test_a_second_template_of_a_kind_is_chosen_by_name(study):
    library = tpl.PromptLibrary(study.service)
    library.install_defaults()
    short = "{{chart}}\n{{message}}\nReply:"
    library.save("draft_zero_shot", "terse", short)
    assert library.template("draft_zero_shot").name == "draft_zero_shot"
    assert library.template("draft_zero_shot", "terse").key == "terse@v1"
    with pytest.raises(TemplateError, match="no draft_zero_shot template called 'nope'"):
        library.template("draft_zero_shot", "nope")
    names = [t.name for t in TemplateService(study.service).list("draft_zero_shot")]
    assert names == ["draft_zero_shot", "terse"]


def test_template_edits_are_audited(study):
    service = study.service
    tpl.PromptLibrary(service).save("fact_entail", "fact_entail", tpl.default_text("fact_entail"))
    with service.project.read() as s:
        actions = [r[0] for r in s.connection().exec_driver_sql("SELECT action FROM audit_log")]
    assert "template" in actions


def test_a_version_1_project_gains_the_template_table(tmp_path):
    # A real version-1 file, written by the version-1 code (tests/store/data).
    Project.create(tmp_path / "fresh.prproj").close()
    fresh = _columns(tmp_path / "fresh.prproj")
    path = tmp_path / "old.prproj"
    shutil.copy(Path(__file__).parents[1] / "store" / "data" / "v1-small.prproj", path)
    with Project.open(path) as project:
        assert tpl.PromptLibrary(StudyService(project)).install_defaults()
    assert _columns(path) == fresh
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.SCHEMA_VERSION
    conn.close()


def _columns(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        info = conn.execute("PRAGMA table_info(prompt_templates)").fetchall()
        checks = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'prompt_templates'"
        ).fetchone()[0]
    finally:
        conn.close()
    normal = " ".join(checks.replace("\n", " ").replace("\t", " ").split()).replace("( ", "(")
    return [*info, normal.count("CHECK"), normal.count("UNIQUE"), normal.count("FOREIGN KEY")]
