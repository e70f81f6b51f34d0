"""The preferences export (issue 19; docs/formats.md, "Preferences"): rankings, empathy
verdicts and edited drafts as TRL preference pairs, worked out by hand on the small study:
which pairs exist, which text is chosen, what is left out and counted, and that a clinician's
own export holds nothing of anyone else's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portalreview.cli import main as cli_main
from portalreview.store.exporters import ExportFailed
from portalreview.store.exports import export_external
from portalreview.store.models import Response

ROLES = {"prompt": "user", "chosen": "assistant", "rejected": "assistant"}


def _texts(study) -> dict[int, str]:
    with study.service.project.read() as s:
        return {r.id: r.text for r in s.query(Response).all()}


@pytest.fixture
def answered(study):
    """ava ranks draft1 over draft2 and finds the edited reply more empathetic; ben ties the
    drafts and finds both replies equally empathetic; both edit draft1 (ben changes nothing);
    a model pseudo annotator's ranking and ava's unfinished answer are there too."""
    svc = study.service
    edit_set = svc.create_unit_set("edit set", "respond")
    edit_unit = svc.add_unit(edit_set, study.case1, response_id=study.draft1)
    model = svc.add_annotator("llama", "A model", is_model=True)
    for person in (study.ava, study.ben, model):
        svc.assign(edit_unit, person)
    svc.assign(study.units["rank"], model)
    texts = _texts(study)
    ava, ben, bot = svc.as_viewer("ava"), svc.as_viewer("ben"), svc.as_viewer("llama")
    ranked = {"entries": [
        {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
        {"response_id": study.draft2, "rank": 2, "correct": True, "criteria": []},
    ]}
    tied = {"entries": [
        {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
        {"response_id": study.draft2, "rank": 1, "correct": True, "criteria": []},
    ]}
    ava.save_answer(study.units["rank"], ranked, status="submitted")
    ben.save_answer(study.units["rank"], tied, status="submitted")
    bot.save_answer(study.units["rank"], ranked, status="submitted")
    ava.save_answer(study.units["empathy"], {"more_empathetic_response_id": study.edited},
                    status="submitted")
    ben.save_answer(study.units["empathy"], {"equal": True}, status="submitted")
    ava.save_answer(edit_unit, {"mode": "edit_draft", "base_response_id": study.draft1,
                                "final_text": "Please come in today; we will see you at 3 pm.",
                                "notes": ""}, status="submitted")
    ben.save_answer(edit_unit, {"mode": "edit_draft", "base_response_id": study.draft1,
                                "final_text": texts[study.draft1], "notes": ""},
                    status="submitted")
    ava.save_answer(study.units["facts"], {"facts": []}, status="draft")  # not a source anyway
    return study, texts


def _read(folder: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text().splitlines()]


def test_pairs_worked_out_by_hand(answered, tmp_path) -> None:
    study, texts = answered
    written = export_external(study.service.project, "preferences", tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == ["preferences-ava.jsonl", "preferences-pooled.jsonl",
                     "preferences-summary.json"]  # ben's answers made no pair; the model's none
    pooled = _read(tmp_path / "out", "preferences-pooled.jsonl")
    got = sorted((r["source"], r["annotator"], r["chosen"][0]["content"],
                  r["rejected"][0]["content"]) for r in pooled)
    assert got == sorted([
        ("rank", "ava", texts[study.draft1], texts[study.draft2]),
        ("empathy", "ava", texts[study.edited], texts[study.original]),
        ("edit", "ava", "Please come in today; we will see you at 3 pm.", texts[study.draft1]),
    ])
    summary = json.loads((tmp_path / "out" / "preferences-summary.json").read_text())
    assert summary["pairs"] == 3
    assert summary["pairs_by_source"] == {"rank": 1, "empathy": 1, "edit": 1}
    assert summary["left_out"] == {
        "answers of a model pseudo annotator": 1,
        "edit: the draft was left unchanged": 1,
        "empathy: equally empathetic": 1,
        "rank: a tie": 1,
    }


def test_every_record_has_the_fields_of_trl_s_conversational_preference_format(
    answered, tmp_path
) -> None:
    study, _ = answered
    export_external(study.service.project, "preferences", tmp_path / "out")
    case = study.service.read_unit(study.units["rank"]).cases[0]
    for record in _read(tmp_path / "out", "preferences-pooled.jsonl"):
        for field, role in ROLES.items():
            messages = record[field]
            assert isinstance(messages, list) and len(messages) == 1
            assert set(messages[0]) == {"role", "content"} and messages[0]["role"] == role
            assert isinstance(messages[0]["content"], str) and messages[0]["content"].strip()
        assert record["chosen"] != record["rejected"]
        prompt = record["prompt"][0]["content"]
        assert case.message.strip() in prompt and "The patient's chart:" in prompt


def test_a_final_text_that_differs_from_the_draft_in_line_breaks_alone_makes_no_pair(
    study, tmp_path
) -> None:
    # a draft from a Windows file (CRLF, a lone CR, a leading U+FEFF), submitted untouched by
    # a version that stored it as the text box gave it back: "\n" and no U+FEFF
    svc = study.service
    draft = svc.add_response(study.case1, "windows",
                             "\ufeffSorry you are unwell.\r\nCall us today.\rBye.\r\n",
                             author_kind="model", author="m", source="m")
    unit = svc.add_unit(svc.create_unit_set("windows", "respond"), study.case1,
                        response_id=draft)
    svc.assign(unit, study.ava)
    svc.as_viewer("ava").save_answer(unit, {"mode": "edit_draft", "base_response_id": draft,
                                            "final_text": "Sorry you are unwell.\nCall us "
                                                          "today.\nBye.\n", "notes": ""},
                                     status="submitted")
    export_external(svc.project, "preferences", tmp_path / "out")
    assert _read(tmp_path / "out", "preferences-pooled.jsonl") == []
    summary = json.loads((tmp_path / "out" / "preferences-summary.json").read_text())
    assert summary["left_out"] == {"edit: the draft was left unchanged": 1}


def test_a_clinician_s_own_export_holds_only_their_answers(answered, tmp_path) -> None:
    study, _ = answered
    written = export_external(study.service.project, "preferences", tmp_path / "ben",
                              annotator="ben")
    assert sorted(p.name for p in written) == ["preferences-ben.jsonl",
                                               "preferences-summary.json"]
    assert _read(tmp_path / "ben", "preferences-ben.jsonl") == []
    summary = json.loads((tmp_path / "ben" / "preferences-summary.json").read_text())
    assert summary["left_out"] == {"edit: the draft was left unchanged": 1,
                                   "empathy: equally empathetic": 1, "rank: a tie": 1}
    assert cli_main(["export", str(study.service.project.path), "--format", "preferences",
                     "--as", "ava", "-o", str(tmp_path / "ava")]) == 0
    mine = _read(tmp_path / "ava", "preferences-ava.jsonl")
    assert {r["annotator"] for r in mine} == {"ava"} and len(mine) == 3
    everything = (tmp_path / "ava").joinpath("preferences-summary.json").read_text()
    assert "ben" not in everything and "llama" not in everything


def test_an_unknown_clinician_or_another_format_is_refused_and_nothing_written(
    answered, tmp_path
) -> None:
    study, _ = answered
    with pytest.raises(ExportFailed, match="no annotator named 'zoe'"):
        export_external(study.service.project, "preferences", tmp_path / "x", annotator="zoe")
    with pytest.raises(ExportFailed, match="preferences"):
        export_external(study.service.project, "prodigy", tmp_path / "y", annotator="ava")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_clinician_is_found_however_her_name_is_typed(answered, tmp_path) -> None:
    """--as with the name's accent typed as a separate mark (macOS, some keyboards) and
    outer spaces finds her, as copy --for does."""
    study, _ = answered
    svc = study.service
    ranked = svc.get_answer(study.units["rank"], annotator_id=study.ava).payload
    svc.assign(study.units["rank"], svc.add_annotator("Zoë", "Zoë"))
    svc.as_viewer("Zoë").save_answer(study.units["rank"], ranked, status="submitted")
    typed = " Zoe\u0308 "
    written = export_external(svc.project, "preferences", tmp_path / "api", annotator=typed)
    assert sorted(p.name for p in written) == ["preferences-Zoë.jsonl", "preferences-summary.json"]
    assert {r["annotator"] for r in _read(tmp_path / "api", "preferences-Zoë.jsonl")} == {"Zoë"}
    summary = json.loads((tmp_path / "api" / "preferences-summary.json").read_text())
    assert summary["annotator"] == "Zoë" and summary["pairs_by_annotator"] == {"Zoë": 1}
    assert cli_main(["export", str(svc.project.path), "--format", "preferences",
                     "--as", typed, "-o", str(tmp_path / "cli")]) == 0  # fmt: skip
    assert len(_read(tmp_path / "cli", "preferences-Zoë.jsonl")) == 1


def test_the_pi_s_gold_answers_are_not_preferences(answered, tmp_path) -> None:
    """An adjudicated ranking or verdict copies a clinician's answer: counted as the PI's own
    preference it would enter the training data twice."""
    study, _ = answered
    svc = study.service
    ranked = svc.get_answer(study.units["rank"], annotator_id=study.ava).payload
    svc.save_answer(study.units["rank"], ranked, status="submitted", gold=True,
                    annotator_id=study.pi)
    written = export_external(svc.project, "preferences", tmp_path / "out")
    assert "preferences-pat.jsonl" not in {p.name for p in written}
    pooled = _read(tmp_path / "out", "preferences-pooled.jsonl")
    assert {r["annotator"] for r in pooled} == {"ava"} and len(pooled) == 3
    summary = json.loads((tmp_path / "out" / "preferences-summary.json").read_text())
    assert summary["left_out"]["gold (adjudicated) answers"] == 1


def test_names_that_would_share_a_file_get_a_file_each(answered, tmp_path) -> None:
    """Each clinician's pairs in a file of their own (docs/formats.md): names differing only in
    letters outside ASCII, or only in case (one file on Windows and macOS), once shared one
    file, which held one person's pairs while the summary listed both."""
    study, _ = answered
    svc = study.service
    people = ["Dr Müller", "Dr Möller", "AVA", "看護師_田中", "看護師_鈴木"]
    ranked = {"entries": [
        {"response_id": study.draft1, "rank": 1, "correct": True, "criteria": []},
        {"response_id": study.draft2, "rank": 2, "correct": True, "criteria": []},
    ]}  # fmt: skip
    for name in people:
        svc.assign(study.units["rank"], svc.add_annotator(name, name))
        svc.as_viewer(name).save_answer(study.units["rank"], ranked, status="submitted")
    written = export_external(svc.project, "preferences", tmp_path / "out")
    assert len({p.name.casefold() for p in written}) == 1 + len(people) + 2  # pooled, summary
    summary = json.loads((tmp_path / "out" / "preferences-summary.json").read_text())
    files = summary["file_by_annotator"]
    assert set(files) == {"ava", *people}
    assert len({name.casefold() for name in files.values()}) == len(files)
    assert files["Dr Müller"] == "preferences-Dr_Müller.jsonl"
    assert {files["ava"], files["AVA"]} == {"preferences-AVA.jsonl", "preferences-ava-2.jsonl"}
    for person, name in files.items():
        records = _read(tmp_path / "out", name)
        assert {r["annotator"] for r in records} == {person}
        assert len(records) == summary["pairs_by_annotator"][person]
