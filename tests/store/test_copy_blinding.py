"""A copy for one clinician keeps the drafts blinded even to someone who reads it with sqlite3:
no response id (nor a sentence id, nor a row's place in a table, nor a time) follows the order
the master imported the drafts in, model by model; replies none of the clinician's units names
are not in it. The master keeps the key to the copy's ids, and a merge brings every kind of
answer back to the master's responses and sentences. The copy is made on this machine, not on
the destination drive: a crash while it is made leaves nothing there."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import select

from portalreview.store import merge
from portalreview.store.merge import ID_MAP_PREFIX, make_copy, merge_copy
from portalreview.store.models import ProjectMeta, Response, Sentence
from portalreview.store.project import Project
from portalreview.store.service import StoreError, StudyService

MODELS = ("model-a", "model-b", "model-c")
N_CASES = 8
BEN_ONLY = "A reply by Dr. Ben that only his own unit shows."


def _study(path: Path) -> dict:
    """Drafts imported model by model (as the demo does), clinicians' replies and their
    models' empathy edits; ava has rank, empathy, facts, match and respond (edit) units, ben
    also a pair of his own reply that ava has no unit of."""
    with Project.create(path, name="Blinding") as project:
        svc = StudyService(project)
        ava, ben = svc.add_annotator("ava"), svc.add_annotator("ben")
        svc.add_annotator("pat", role="pi")
        cases = [
            svc.add_case(f"c{i}", f"Message {i}: my knee hurts. What should I do?")
            for i in range(N_CASES)
        ]
        drafts = {
            model: [
                svc.add_response(
                    case,
                    f"{model}-{i}",
                    f"Draft by {model} for case {i}. Rest the knee. Call us if it swells.",
                    author_kind="model",
                    author=model,
                    source=f"{model}/zero-shot",
                    production="zero_shot",
                )
                for i, case in enumerate(cases)
            ]
            for model in MODELS
        }
        replies = [
            svc.add_response(
                case, f"reply-{i}", f"Reply {i} by ava. Ice it. Come in.", author_kind="clinician"
            )
            for i, case in enumerate(cases)
        ]
        edits = [
            svc.add_response(
                case,
                f"edit-{i}",
                f"Edit {i}: I am sorry about your knee. Ice it. Come in.",
                author_kind="model",
                author="model-a",
                production="edited_empathy",
            )
            for i, case in enumerate(cases)
        ]
        ben_reply = svc.add_response(cases[0], "ben-0", BEN_ONLY, author_kind="clinician")
        units: dict[str, list[int]] = {}
        sets = {k: svc.create_unit_set(f"{k} set", k) for k in ("rank", "empathy", "facts")}
        sets |= {k: svc.create_unit_set(f"{k} set", k) for k in ("match", "respond")}
        for i, case in enumerate(cases):
            members = [drafts[m][i] for m in MODELS]
            units.setdefault("rank", []).append(svc.add_unit(sets["rank"], case, members=members))
            units.setdefault("empathy", []).append(
                svc.add_unit(sets["empathy"], case, response_id=replies[i], response_b_id=edits[i])
            )
        units["facts"] = [
            svc.add_unit(sets["facts"], cases[1], response_id=replies[1], response_b_id=edits[1])
        ]
        units["match"] = [
            svc.add_unit(
                sets["match"], cases[2], response_id=replies[2], response_b_id=drafts["model-b"][2]
            )
        ]
        units["respond"] = [
            svc.add_unit(sets["respond"], cases[3], response_id=drafts["model-c"][3])
        ]
        for unit in [u for us in units.values() for u in us]:
            svc.assign(unit, ava)
            svc.assign(unit, ben)
        ben_unit = svc.add_unit(
            sets["empathy"], cases[0], response_id=ben_reply, response_b_id=edits[0]
        )
        svc.assign(ben_unit, ben)
        return {"units": units, "ben_reply": ben_reply, "ava": ava}


@pytest.fixture
def study(tmp_path):
    path = tmp_path / "master.prproj"
    return path, _study(path)


def _key(master: Path, copy: Path) -> dict[int, int]:
    """The copy's response id -> the master's, as the master keeps it."""
    conn = sqlite3.connect(copy)
    copy_id = dict(conn.execute("SELECT key, value FROM project_meta"))["copy_id"]
    conn.close()
    with Project.open(master, read_only=True) as project, project.read() as s:
        row = s.get(ProjectMeta, ID_MAP_PREFIX + copy_id)
        assert row is not None, "the master keeps no key to the copy's ids"
        return {int(c): int(m) for c, m in json.loads(row.value)["responses"]}


def _rows(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_the_copys_ids_do_not_follow_the_import_order(study, tmp_path):
    master, _ = study
    with Project.open(master) as project:
        make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    copy = tmp_path / "ava.prproj"
    key = _key(master, copy)
    in_copy = dict(_rows(copy, "SELECT id, text FROM responses"))
    in_master = dict(_rows(master, "SELECT id, text FROM responses"))
    assert set(key) == set(in_copy)
    assert all(in_copy[c] == in_master[m] for c, m in key.items())  # the same drafts
    # A random order: the master's ids, listed in the copy's order, are not sorted (a
    # shuffle of 3 * 8 + 2 * 8 = 40 responses keeps them sorted once in 40! copies).
    in_order = [key[c] for c in sorted(key)]
    assert in_order != sorted(in_order)
    # The sentences follow the copy's order of the responses, not the master's.
    owners = [r for (r,) in _rows(copy, "SELECT response_id FROM sentences "
                                        "WHERE response_id IS NOT NULL ORDER BY id")]  # fmt: skip
    assert owners == sorted(owners)
    # Nor does the rows' hidden order in a rank set tell the import order.
    for unit in {u for (u,) in _rows(copy, "SELECT unit_id FROM rank_members")}:
        by_rowid = [r for (r,) in _rows(copy, "SELECT response_id FROM rank_members "
                                        f"WHERE unit_id = {unit} ORDER BY rowid")]  # fmt: skip
        assert by_rowid == sorted(by_rowid)
    # One time for every response; neutral external ids, no author.
    assert len({t for (t,) in _rows(copy, "SELECT created_at FROM responses")}) == 1
    assert _rows(copy, "SELECT DISTINCT author, source, production FROM responses") == [
        ("", "", "other")
    ]
    external = _rows(copy, "SELECT id, external_id FROM responses")
    assert all(e == f"response-{i}" for i, e in external)


def test_replies_none_of_her_units_names_are_not_in_her_copy(study, tmp_path):
    master, _ = study
    with Project.open(master) as project:
        make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    copy = tmp_path / "ava.prproj"
    texts = {t for (t,) in _rows(copy, "SELECT text FROM responses")}
    assert BEN_ONLY not in texts and BEN_ONLY.encode() not in copy.read_bytes()
    named = _rows(
        copy,
        "SELECT count(*) FROM responses WHERE id NOT IN (SELECT response_id FROM rank_members "
        "UNION SELECT response_id FROM units WHERE response_id IS NOT NULL "
        "UNION SELECT response_b_id FROM units WHERE response_b_id IS NOT NULL)",
    )
    assert named == [(0,)]
    # ben's copy has his reply; the key of ava's copy is not in it
    with Project.open(master) as project:
        make_copy(project, tmp_path / "ben.prproj", annotator="ben", only_assigned=True)
    ben_copy = tmp_path / "ben.prproj"
    assert BEN_ONLY in {t for (t,) in _rows(ben_copy, "SELECT text FROM responses")}
    assert _rows(ben_copy, f"SELECT key FROM project_meta WHERE key LIKE '{ID_MAP_PREFIX}%'") == []


def test_every_kind_of_answer_merges_back_to_the_masters_drafts(study, tmp_path):
    master, made = study
    units = made["units"]
    path = tmp_path / "ava.prproj"
    with Project.open(master) as project:
        make_copy(project, path, annotator="ava", only_assigned=True)
        theme = StudyService(project).catalogs.themes[0].id
    chosen: dict[str, object] = {}  # what ava chose, by text
    with Project.open(path) as copy:
        ava = StudyService(copy).as_viewer("ava")
        for n, unit in enumerate(units["rank"]):
            shown = ava.read_unit(unit).responses
            entries = [
                {"response_id": r.id, "rank": i + 1, "correct": i != 1,
                 "criteria": ["C1"] if i == 1 else []}
                for i, r in enumerate(shown)
            ]  # fmt: skip
            ava.save_answer(unit, {"entries": entries}, status="submitted")
            chosen[f"rank{n}"] = [r.text for r in shown]
        for n, unit in enumerate(units["empathy"]):
            pick = ava.read_unit(unit).responses[n % 2]
            ava.save_answer(unit, {"more_empathetic_response_id": pick.id}, status="submitted")
            chosen[f"empathy{n}"] = pick.text
        fact = {"side": "original", "text": "Ice the knee.", "entailed": True}
        ava.save_answer(units["facts"][0], {"facts": [fact]}, status="submitted")
        (match_unit,) = units["match"]
        with copy.read() as s:
            unit = StudyService(copy).read_unit(match_unit)
            reference, draft = (r.id for r in unit.responses)
            ref_sentences = s.scalars(
                select(Sentence).where(Sentence.response_id == reference).order_by(Sentence.id)
            ).all()
            draft_sentences = s.scalars(
                select(Sentence).where(Sentence.response_id == draft).order_by(Sentence.id)
            ).all()
            decisions = [{"sentence_id": x.id, "spans": [[0, 5]]} for x in ref_sentences]
            both = ref_sentences + draft_sentences
            themes = [{"sentence_id": x.id, "theme": theme} for x in both]
            chosen["match"] = sorted(x.text for x in both)
        ava.save_answer(match_unit, {"decisions": decisions, "themes": themes}, status="submitted")
        (respond_unit,) = units["respond"]
        base = ava.read_unit(respond_unit).responses[0]
        edited = {"mode": "edit_draft", "base_response_id": base.id, "final_text": "Rest it.",
                  "notes": ""}  # fmt: skip
        ava.save_answer(respond_unit, edited, status="submitted")
        chosen["respond"] = base.text

    with Project.open(master) as project:
        report = merge_copy(project, path)
        assert not report.skipped and not report.conflicts
        assert len(report.added) == 2 * len(units["rank"]) + 3
        svc = StudyService(project)
        ava = svc.as_viewer("ava")
        with project.read() as s:
            text = dict(s.execute(select(Response.id, Response.text)).all())
            sentence = dict(s.execute(select(Sentence.id, Sentence.text)).all())
        for n, unit in enumerate(units["rank"]):
            entries = ava.get_answer(unit).payload["entries"]
            ranked = sorted(entries, key=lambda e: e["rank"])
            assert [text[e["response_id"]] for e in ranked] == chosen[f"rank{n}"]
            assert [e["criteria"] for e in ranked] == [[], ["C1"], []]
        for n, unit in enumerate(units["empathy"]):
            picked = ava.get_answer(unit).payload["more_empathetic_response_id"]
            assert text[picked] == chosen[f"empathy{n}"]
        assert ava.get_answer(units["facts"][0]).payload["facts"][0]["text"] == "Ice the knee."
        match = ava.get_answer(match_unit).payload
        assert sorted(sentence[t["sentence_id"]] for t in match["themes"]) == chosen["match"]
        assert all(sentence[d["sentence_id"]] for d in match["decisions"])
        base_id = ava.get_answer(respond_unit).payload["base_response_id"]
        assert base_id == svc.read_unit(respond_unit).responses[0].id
        assert text[base_id] == chosen["respond"]
        again = merge_copy(project, path)
        assert not again.changed and not again.recorded


def test_a_copy_whose_key_the_master_lacks_is_refused(study, tmp_path):
    master, _ = study
    with Project.open(master) as project:
        info = make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    conn = sqlite3.connect(master)
    with conn:
        conn.execute("DELETE FROM project_meta WHERE key = ?", (ID_MAP_PREFIX + info.copy_id,))
    conn.close()
    with Project.open(master) as project, pytest.raises(merge.MergeRefused, match="key"):
        merge_copy(project, info.path)


def test_the_master_holds_the_key_before_the_copy_reaches_its_drive(study, tmp_path, monkeypatch):
    """A copy that reached the clinician is one the master can merge back, even if the
    program stopped right after delivering it."""
    master, _ = study
    deliver, keys_then = merge._deliver, []

    def watched(temporary, out):
        with sqlite3.connect(master) as conn:
            keys_then.extend(
                conn.execute(
                    "SELECT key FROM project_meta WHERE key LIKE ?", (ID_MAP_PREFIX + "%",)
                )
            )
        deliver(temporary, out)

    monkeypatch.setattr(merge, "_deliver", watched)
    with Project.open(master) as project:
        info = make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    assert keys_then == [(ID_MAP_PREFIX + info.copy_id,)]


def test_a_blinded_copy_needs_the_master_open_for_writing(study, tmp_path):
    master, _ = study
    with Project.open(master, read_only=True) as project, pytest.raises(StoreError):
        make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    assert not (tmp_path / "ava.prproj").exists()


CRASH = r"""
import os, signal, sys
import portalreview.store.merge as M
from portalreview.store.project import Project

def dying_restrict(path, annotator_id):
    os.kill(os.getpid(), signal.SIGKILL)  # a crash, a power cut

M._restrict = dying_restrict
with Project.open(sys.argv[1]) as p:
    M.make_copy(p, sys.argv[2], annotator="ava", only_assigned=True)
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_crash_while_copying_leaves_nothing_on_the_drive(study, tmp_path, monkeypatch):
    master, _ = study
    stick, local = tmp_path / "usb", tmp_path / "local-tmp"
    stick.mkdir()
    local.mkdir()
    env = dict(os.environ, TMPDIR=str(local), PYTHONPATH=str(Path(merge.__file__).parents[2]))
    done = subprocess.run(
        [sys.executable, "-c", CRASH, str(master), str(stick / "ava.prproj")], env=env
    )
    assert done.returncode != 0
    assert list(stick.iterdir()) == []  # nothing of the study on the stick
    (left,) = list(local.iterdir())  # the full study, on this machine, owner-only
    assert left.name.startswith(merge.WORK_PREFIX) and (left.stat().st_mode & 0o777) == 0o700
    monkeypatch.setattr(tempfile, "tempdir", str(local))
    with Project.open(master) as project:
        make_copy(project, stick / "ava.prproj", annotator="ava", only_assigned=True)
    assert list(local.iterdir()) == []  # the next copy removed the crashed one's folder
    assert [p.name for p in stick.iterdir()] == ["ava.prproj"]


def test_a_suggestion_used_in_the_copy_is_the_masters_after_the_merge(study, tmp_path):
    master, made = study
    unit = made["units"]["rank"][0]
    with Project.open(master) as project:
        svc = StudyService(project)
        members = [r.id for r in svc.read_unit(unit).responses]
        entries = [
            {"response_id": r, "rank": i + 1, "correct": True, "criteria": []}
            for i, r in enumerate(sorted(members, reverse=True))  # (not in id order)
        ]
        made_id = svc.add_suggestion(
            unit,
            {"entries": entries},
            model_file="m.gguf",
            model_sha256="0" * 64,
            template_id="rank",
            params={"observed": {"order": sorted(members, reverse=True)}},
        )
        texts = {r.id: r.text for r in svc.read_unit(unit).responses}
        make_copy(project, tmp_path / "ava.prproj", annotator="ava", only_assigned=True)
    path = tmp_path / "ava.prproj"
    with Project.open(path) as copy:
        ava = StudyService(copy).as_viewer("ava")
        shown = {r.id: r.text for r in ava.read_unit(unit).responses}
        ((sid, payload, params),) = _rows(
            path, "SELECT id, payload_json, params_json FROM suggestions"
        )
        in_copy = json.loads(payload)["entries"]
        assert [shown[e["response_id"]] for e in in_copy] == [
            texts[e["response_id"]] for e in entries
        ]
        assert [shown[r] for r in json.loads(params)["observed"]["order"]] == [
            texts[e["response_id"]] for e in entries
        ]
        ava.save_answer(
            unit,
            {"entries": in_copy},
            status="submitted",
            suggestion_id=sid,
            suggestion_use="accepted",
        )
    with Project.open(master) as project:
        report = merge_copy(project, path)
        assert len(report.added) == 1 and not report.skipped
        answer = StudyService(project).as_viewer("ava").get_answer(unit)
        assert answer.suggestion_id == made_id  # the master's own, not a new one
        assert _rows(master, "SELECT count(*) FROM suggestions") == [(1,)]
        assert sorted(e["response_id"] for e in answer.payload["entries"]) == sorted(members)
