"""Random studies built through the service layer survive export -> import -> export.

Every example holds units of every kind and shape (respond units with and without a draft to
edit, EPPC sentences of a patient message and of a provider reply), assignments with their
presentations (also the empty one of an assignment that only holds a gold answer), answers of
every kind (drafts and submitted, flagged, with comments, edit_draft answers, gold answers),
and suggestions with the numbers behind them. The original's internal ids are shifted (rows
removed before the study was built), so a file that carried an internal id instead of a
portable reference would point somewhere else after the import and show up as a difference.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from portalreview.store.exporters import export_project
from portalreview.store.importers import import_files
from portalreview.store.kinds import PayloadError
from portalreview.store.models import KINDS, Case, Response, Sentence, Suggestion
from portalreview.store.project import Project
from portalreview.store.service import StudyService, UnitView

TABLES = (
    "annotators",
    "cases",
    "responses",
    "unit_sets",
    "units",
    "assignments",
    "suggestions",
    "answers",
)
SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SENTENCES = [
    "I have had crushing chest pain since this morning.",
    "Should I come in?",
    "Thanks, Dr. Lee!",
    "My café-au-lait spot is itchy 😟.",
    'She said "take two", twice a day; is that right?',
    "=SUM(A1:A3) is what the form showed.",
    "Please go to the emergency room now.",
    "Call 911 if it gets worse.",
    "We will refill your lisinopril today.\tNo need to come in.",
]
TEXT = st.sampled_from(SENTENCES)
# texts a spreadsheet or a CSV reader might change: padding, line ends, numbers, words
SHORT = st.sampled_from(
    [
        "",
        "n",
        "Ça va, 👍",
        "line 1\nline 2",
        "a\r\nb",
        "  padded  ",
        "007",
        "TRUE",
        "#N/A",
        "x_x000D_y",
    ]
)
SHA = "0123456789abcdef" * 4
EXTENSION = {
    "eppc_codes": [
        {
            "id": "InfoSeek",
            "subcodes": [{"id": "Billing", "name": "Billing", "definition": "Asks about a bill."}],
        }
    ]
}


def _text(data: st.DataObject, low: int = 1, high: int = 3) -> str:
    return " ".join(data.draw(st.lists(TEXT, min_size=low, max_size=high)))


def _spans(data: st.DataObject, length: int, most: int = 2) -> list[list[int]]:
    """Non-overlapping [start, end] pairs inside a text of ``length`` characters."""
    if length < 2:
        return []
    ends = data.draw(st.lists(st.integers(0, length), min_size=0, max_size=2 * most, unique=True))
    ends = sorted(ends)[: len(ends) // 2 * 2]
    return [[ends[i], ends[i + 1]] for i in range(0, len(ends), 2)]


def _subset(data: st.DataObject, items: list) -> list:
    return data.draw(st.lists(st.sampled_from(items), unique=True)) if items else []


# --- answer payloads, one drawer per kind (internal ids, as the service takes them) ------------


def _respond(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    draft = view.responses[0].id if view.responses else None
    others = cases[view.cases[0].id]
    if draft is not None or (others and data.draw(st.booleans())):
        base = draft if draft is not None else data.draw(st.sampled_from(others))
        final = data.draw(st.sampled_from(["", _text(data)]))
        return {
            "mode": "edit_draft",
            "base_response_id": base,
            "final_text": final,
            "notes": data.draw(SHORT),
        }
    themes = [t.id for t in svc.catalogs.themes]
    parts = {
        t: data.draw(st.sampled_from(["", " ", _text(data, 1, 2)])) for t in _subset(data, themes)
    }
    return {"mode": "theme_guided", "parts": parts, "notes": data.draw(SHORT)}


def _rank(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    members = [r.id for r in view.responses]
    criteria = [c.id for c in svc.catalogs.criteria]
    entries = []
    for member in _subset(data, members):
        correct = data.draw(st.sampled_from([None, True, False]))
        entries.append(
            {
                "response_id": member,
                "rank": data.draw(st.one_of(st.none(), st.integers(1, len(members)))),
                "correct": correct,
                "criteria": _subset(data, criteria) if correct is False else [],
            }
        )
    return {"entries": entries}


def _match(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    reference, draft = view.responses
    themes = [t.id for t in svc.catalogs.themes]
    decisions = [
        {"sentence_id": s.id, "spans": _spans(data, len(draft.text))}
        for s in _subset(data, list(reference.sentences))
    ]
    labelled = _subset(data, [*reference.sentences, *draft.sentences])
    labels = [{"sentence_id": s.id, "theme": data.draw(st.sampled_from(themes))} for s in labelled]
    return {"decisions": decisions, "themes": labels}


def _urgency(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    pair = sorted(c.id for c in view.cases)
    levels = [lv.level for lv in svc.catalogs.urgency_levels]
    return {
        "more_urgent_case_id": data.draw(st.sampled_from([None, *pair])),
        "ask_second": data.draw(st.booleans()),
        "levels": {str(c): data.draw(st.sampled_from(levels)) for c in _subset(data, pair)},
    }


def _eppc(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    codes = {c.id: [s.id for s in c.subcodes] for c in svc.catalogs.eppc_codes}
    labels = []
    for code in _subset(data, sorted(codes)):
        subcode = data.draw(st.sampled_from([None, *codes[code]]))
        labels.append(
            {"code": code, "subcode": subcode, "spans": _spans(data, len(view.sentence.text))}
        )
    return {"labels": labels}


def _empathy(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    pair = [r.id for r in view.responses]
    choice = data.draw(st.sampled_from(["none", "equal", *pair]))
    if choice == "none":
        return {}
    return {"equal": True} if choice == "equal" else {"more_empathetic_response_id": choice}


def _facts(data, svc: StudyService, view: UnitView, cases: dict) -> dict:
    categories = [c.id for c in svc.catalogs.error_categories]
    facts = []
    for _ in range(data.draw(st.integers(0, 3))):
        entailed = data.draw(st.sampled_from([None, True, False]))
        fact = {
            "side": data.draw(st.sampled_from(["original", "edited"])),
            "text": data.draw(TEXT),
            "entailed": entailed,
        }
        if entailed is False and data.draw(st.booleans()):
            fact["error_category"] = data.draw(st.sampled_from(categories))
        facts.append(fact)
    return {"facts": facts}


PAYLOADS = {
    "respond": _respond,
    "rank": _rank,
    "match": _match,
    "urgency": _urgency,
    "eppc": _eppc,
    "empathy": _empathy,
    "facts": _facts,
}


def _observed(data, kind: str, view: UnitView) -> dict:
    """The numbers a model suggestion keeps (llm/suggest.py), with the ids they name."""
    if kind in ("rank", "empathy"):
        return {"order": [r.id for r in view.responses]}
    if kind == "urgency":
        a, b = (c.id for c in view.cases)
        levels = {str(c): {"probs": {"1": 0.25, "2": 0.75}, "mass": 0.9} for c in (a, b)}
        return {
            "a": a,
            "b": b,
            "p_yes_ab": 0.625,
            "p_yes_ba": 0.5,
            "levels": levels if data.draw(st.booleans()) else {},
        }
    return {"p_entailed": [0.5]} if kind == "facts" else {}


# --- the study ---------------------------------------------------------------------------------


def _shift_ids(project: Project) -> None:
    """A case and a response added, then removed: every id of the study is shifted."""
    svc = StudyService(project)
    case = svc.add_case("removed", "A message that is gone.")
    response = svc.add_response(case, "removed-r", "A reply that is gone.")
    with project.write() as s:
        s.execute(delete(Sentence).where(Sentence.case_id == case))
        s.execute(delete(Sentence).where(Sentence.response_id == response))
        s.execute(delete(Response).where(Response.id == response))
        s.execute(delete(Case).where(Case.id == case))


def _material(data, svc: StudyService) -> dict[int, list[int]]:
    """Cases and their responses; case id -> response ids."""
    cases: dict[int, list[int]] = {}
    for i in range(data.draw(st.integers(3, 4))):
        chart = data.draw(
            st.sampled_from(
                [None, {"problems": ["Asthma", "Hypertension"], "medications": ["albuterol"]}]
            )
        )
        case = svc.add_case(
            f"case-{i}",
            _text(data, 2, 4),
            chart,
            age_band=data.draw(st.sampled_from([None, "45-64"])),
            **data.draw(
                st.sampled_from(
                    [{}, {"urgency_level": 1}, {"urgency_level": 6}, {"urgency_filter": "UNCLEAR"}]
                )
            ),
            tags=data.draw(st.sampled_from([None, {"inbox": "a"}, {"split": ["x", "y"]}])),
        )
        cases[case] = [
            svc.add_response(
                case,
                f"r-{i}-{j}",
                _text(data, 1, 3),
                author_kind=data.draw(st.sampled_from(["clinician", "model", "imported"])),
                author=data.draw(st.sampled_from(["", "llama-8b"])),
                production=data.draw(st.sampled_from(["other", "zero_shot", "real_time"])),
            )
            for j in range(data.draw(st.integers(2, 3)))
        ]
    return cases


def _unit_specs(data, svc: StudyService, cases: dict[int, list[int]]) -> list[tuple[str, dict]]:
    """(kind, add_unit arguments) for units of every kind and shape."""
    ids = list(cases)
    specs: list[tuple[str, dict]] = []
    for case in ids:
        first, second = cases[case][:2]
        other = ids[(ids.index(case) + 1) % len(ids)]
        message = svc.sentences(case_id=case)
        reply = svc.sentences(response_id=first)
        specs += [
            ("respond", {"case_id": case}),
            ("respond", {"case_id": case, "response_id": data.draw(st.sampled_from(cases[case]))}),
            ("rank", {"case_id": case, "members": _subset(data, cases[case])}),
            ("match", {"case_id": case, "response_id": first, "response_b_id": second}),
            ("urgency", {"case_id": case, "case_b_id": other}),
            ("eppc", {"case_id": case, "sentence_id": data.draw(st.sampled_from(message)).id}),
            ("eppc", {"case_id": case, "sentence_id": data.draw(st.sampled_from(reply)).id}),
            ("empathy", {"case_id": case, "response_id": second, "response_b_id": first}),
            ("facts", {"case_id": case, "response_id": first, "response_b_id": second}),
        ]
    # every shape at least once, then a random selection, added in a random order so that
    # unit ids interleave across sets
    chosen = specs[:9] + [specs[i] for i in _subset(data, list(range(9, len(specs))))]
    return data.draw(st.permutations(chosen))


def _answer(data, svc, unit: int, view, cases, person: int, gold: bool, suggestions) -> None:
    payload = PAYLOADS[view.kind](data, svc, view, cases)
    fields: dict[str, Any] = {
        "active_seconds": data.draw(st.sampled_from([None, 0.0, 12.5, 0.1 + 0.2, 1 / 3, 1e-7])),
        "flagged": data.draw(st.sampled_from([None, True])),
        "flag_note": data.draw(SHORT),
        "comment": data.draw(SHORT),
    }
    if suggestions and data.draw(st.booleans()):
        fields["suggestion_id"] = data.draw(st.sampled_from(suggestions))
        fields["suggestion_use"] = data.draw(st.sampled_from([None, "accepted", "edited"]))
    status = data.draw(st.sampled_from(["draft", "submitted"]))
    try:
        svc.save_answer(unit, payload, status=status, annotator_id=person, gold=gold, **fields)
    except PayloadError:  # not complete: it stays a draft
        svc.save_answer(unit, payload, annotator_id=person, gold=gold, **fields)


def _suggest(data, svc: StudyService, view: UnitView, cases: dict) -> int:
    """A model's suggestion for the unit, with its provenance and observed numbers."""
    return svc.add_suggestion(
        view.unit_id,
        PAYLOADS[view.kind](data, svc, view, cases),
        model_file="tiny.gguf",
        model_sha256=SHA,
        template_id=f"{view.kind}@v1",
        template_text="Answer {x}.",
        params={"temperature": 0.2, "observed": _observed(data, view.kind, view)},
        seed=data.draw(st.sampled_from([None, 7])),
        seconds=data.draw(st.sampled_from([0.0, 1.5, 2 / 3])),
    )


def build_study(data, project: Project) -> None:
    _shift_ids(project)
    svc = StudyService(project)
    if data.draw(st.booleans()):
        svc.extend_catalogs(EXTENSION)
    people = [svc.add_annotator("ava", "Ava (RN)"), svc.add_annotator("zoë 2")]
    if data.draw(st.booleans()):
        people.append(svc.add_annotator("llama", "Model", is_model=True))
    pi = svc.add_annotator("pat", "Pat (PI)", role="pi")
    cases = _material(data, svc)
    sets = {k: svc.create_unit_set(f"{k} set №1", k, f"the {k} units\n") for k in KINDS}
    for kind, refs in _unit_specs(data, svc, cases):
        unit = svc.add_unit(sets[kind], **refs, batch=data.draw(st.sampled_from(["", "b1"])))
        view = svc.read_unit(unit)
        suggestions = [
            _suggest(data, svc, view, cases) for _ in range(data.draw(st.integers(0, 2)))
        ]
        for person in _subset(data, [*people, pi]):
            svc.assign(unit, person, data.draw(st.sampled_from([None, 0, 5])))
            if data.draw(st.booleans()):
                _answer(data, svc, unit, view, cases, person, False, suggestions)
        if data.draw(st.booleans()):
            _answer(data, svc, unit, view, cases, pi, True, suggestions)


def observed_names(project: Project) -> list[dict]:
    """What each suggestion's observed numbers name, read from the database (not through
    the exporter): response and case ids as external ids."""
    with project.read() as s:
        names = {
            "case": dict(s.execute(select(Case.id, Case.external_id)).all()),
            "response": dict(s.execute(select(Response.id, Response.external_id)).all()),
        }
        rows = s.execute(select(Suggestion.params_json).order_by(Suggestion.id)).scalars()
        observed = [json.loads(row).get("observed", {}) for row in rows]
    name = lambda ref, value: names[ref].get(value, f"not an id: {value!r}")  # noqa: E731
    return [
        {
            "order": [name("response", r) for r in seen.get("order", [])],
            "pair": [name("case", seen[k]) for k in ("a", "b") if k in seen],
            "levels": sorted(name("case", int(k)) for k in seen.get("levels", {})),
        }
        for seen in observed
    ]


def _tables(folder: Path) -> dict[str, str]:
    tables = {t: (folder / f"{t}.jsonl").read_text(encoding="utf-8") for t in TABLES}
    tables["catalogs"] = json.dumps(json.loads((folder / "project.json").read_text())["catalogs"])
    return tables


@SETTINGS
@given(st.data(), st.sampled_from(["jsonl", "csv", "xlsx"]))
def test_a_random_study_survives_export_and_import(data, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Project.create(root / "study.prproj", name="Random study") as project:
            build_study(data, project)
            names = observed_names(project)
            export_project(project, "jsonl", root / "first")
            carried = root / ("study.xlsx" if fmt == "xlsx" else "carried")
            export_project(project, fmt, carried)
        with Project.create(root / "copy.prproj", name="Copy") as copy:
            import_files(copy, [carried])
            export_project(copy, "jsonl", root / "again")
            assert observed_names(copy) == names
        first, again = _tables(root / "first"), _tables(root / "again")
        for table in first:
            assert again[table] == first[table], table
