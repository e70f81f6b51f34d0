"""How long the adjudication window (PI) takes to read one kind of a large study: the old
way (a copy of the code before 2026-11-27, kept below) and the new one, measured in the same
run, per kind, with their ratio.

The read is what the window runs in the background when the PI picks a kind
(``portalreview.ui.adjudication.read_kind``): the units of the kind in everyone's queues, their
answers (payloads, status, whose, gold), whether each unit's answers differ, and the list labels
of the units that differ. The old way read the units one queue per annotator, every answer and
unit as an ORM object, the payloads through the ORM's result machinery, compared answers by
dumping each to JSON, read the project's seed once per urgency pair, and ran with the garbage
collector on. Both ways' results are compared (printed "same: yes" or "NO").

The study is ``bench_report.py``'s synthetic one (4 annotators answer a unit of every kind for
every case; EPPC units carry a gold answer); it is opened read-only.

Usage::

    .venv/bin/python benchmarks/bench_adjudication.py                      # 10,000 cases
    .venv/bin/python benchmarks/bench_adjudication.py --cases 1000 --keep /tmp/bench

``--keep FOLDER`` keeps the study there (``synthetic-<cases>.prproj``) and reuses it; building
the 10,000-case one takes about 40 s. Each way is timed ``--repeats`` times per kind, the two
ways alternating; the fastest of each is printed. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import kept_study

from portalreview.store.models import (
    KINDS,
    Answer,
    Assignment,
    Case,
    EmpathyAnswer,
    EppcLabel,
    EppcSpan,
    Fact,
    FactCheck,
    MatchDecision,
    MatchSpan,
    RankCriterion,
    RankEntry,
    RespondAnswer,
    RespondPart,
    Sentence,
    SentenceTheme,
    Unit,
    UnitSet,
    UrgencyAnswer,
    UrgencyCaseLevel,
)
from portalreview.store.project import Project
from portalreview.store.service import _BULK, AnswerView, StudyService, UnitBrief
from portalreview.ui import adjudication
from portalreview.ui.adjudication import Loaded, UnitAnswers, canonical

# --- the old way: a copy of the code before 2026-11-27 --------------------------------------
# (each kind's read_many as it was, through Session.execute)


def _old_respond(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    parts: dict[int, dict[str, str]] = {}
    for a, theme, text in session.execute(
        select(RespondPart.answer_id, RespondPart.theme_id, RespondPart.text)
        .where(RespondPart.answer_id.in_(answer_ids))
        .order_by(RespondPart.answer_id, RespondPart.theme_id)
    ):
        parts.setdefault(a, {})[theme] = text
    out: dict[int, dict] = {a: {} for a in answer_ids}
    for a, mode, base, final_text, notes in session.execute(
        select(
            RespondAnswer.answer_id,
            RespondAnswer.mode,
            RespondAnswer.base_response_id,
            RespondAnswer.final_text,
            RespondAnswer.notes,
        ).where(RespondAnswer.answer_id.in_(answer_ids))
    ):
        if mode == "edit_draft":
            out[a] = {
                "mode": mode,
                "base_response_id": base,
                "final_text": final_text,
                "notes": notes,
            }
        else:
            out[a] = {"mode": mode, "parts": parts.get(a, {}), "notes": notes}
    return out


def _old_rank(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    reasons: dict[tuple[int, int], list[str]] = {}
    for a, response_id, criterion in session.execute(
        select(RankCriterion.answer_id, RankCriterion.response_id, RankCriterion.criterion_id)
        .where(RankCriterion.answer_id.in_(answer_ids))
        .order_by(RankCriterion.answer_id, RankCriterion.criterion_id)
    ):
        reasons.setdefault((a, response_id), []).append(criterion)
    out: dict[int, dict] = {a: {"entries": []} for a in answer_ids}
    for a, response_id, rank, correct in session.execute(
        select(RankEntry.answer_id, RankEntry.response_id, RankEntry.rank, RankEntry.correct)
        .where(RankEntry.answer_id.in_(answer_ids))
        .order_by(RankEntry.answer_id, RankEntry.response_id)
    ):
        out[a]["entries"].append(
            {
                "response_id": response_id,
                "rank": rank,
                "correct": correct,
                "criteria": reasons.get((a, response_id), []),
            }
        )
    return out


def _old_match(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in three queries (answer id -> payload)."""
    found: dict[int, dict[int, list[list[int]]]] = {a: {} for a in answer_ids}
    for a, sid in session.execute(
        select(MatchDecision.answer_id, MatchDecision.sentence_id)
        .where(MatchDecision.answer_id.in_(answer_ids))
        .order_by(MatchDecision.answer_id, MatchDecision.sentence_id)
    ):
        found[a][sid] = []
    for a, sid, start, end in session.execute(
        select(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start, MatchSpan.end)
        .where(MatchSpan.answer_id.in_(answer_ids))
        .order_by(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start)
    ):
        found[a][sid].append([start, end])
    themes: dict[int, list[dict]] = {a: [] for a in answer_ids}
    for a, sid, theme in session.execute(
        select(SentenceTheme.answer_id, SentenceTheme.sentence_id, SentenceTheme.theme_id)
        .where(SentenceTheme.answer_id.in_(answer_ids))
        .order_by(SentenceTheme.answer_id, SentenceTheme.sentence_id)
    ):
        themes[a].append({"sentence_id": sid, "theme": theme})
    return {
        a: {
            "decisions": [{"sentence_id": s, "spans": v} for s, v in found[a].items()],
            "themes": themes[a],
        }
        for a in answer_ids
    }


def _old_urgency(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    rows = {
        a: (chosen, ask)
        for a, chosen, ask in session.execute(
            select(
                UrgencyAnswer.answer_id,
                UrgencyAnswer.more_urgent_case_id,
                UrgencyAnswer.ask_second,
            ).where(UrgencyAnswer.answer_id.in_(answer_ids))
        )
    }
    levels: dict[int, dict[str, int]] = {a: {} for a in answer_ids}
    for a, case_id, level in session.execute(
        select(UrgencyCaseLevel.answer_id, UrgencyCaseLevel.case_id, UrgencyCaseLevel.level)
        .where(UrgencyCaseLevel.answer_id.in_(answer_ids))
        .order_by(UrgencyCaseLevel.answer_id, UrgencyCaseLevel.case_id)
    ):
        levels[a][str(case_id)] = level
    out = {}
    for a in answer_ids:
        chosen, ask = rows.get(a, (None, False))
        out[a] = {"more_urgent_case_id": chosen, "ask_second": bool(ask), "levels": levels[a]}
    return out


def _old_eppc(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    evidence: dict[tuple[int, str], list[list[int]]] = {}
    for a, code, start, end in session.execute(
        select(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start, EppcSpan.end)
        .where(EppcSpan.answer_id.in_(answer_ids))
        .order_by(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start)
    ):
        evidence.setdefault((a, code), []).append([start, end])
    out: dict[int, dict] = {a: {"labels": []} for a in answer_ids}
    for a, code, subcode in session.execute(
        select(EppcLabel.answer_id, EppcLabel.code_id, EppcLabel.subcode_id)
        .where(EppcLabel.answer_id.in_(answer_ids))
        .order_by(EppcLabel.answer_id, EppcLabel.code_id)
    ):
        out[a]["labels"].append(
            {"code": code, "subcode": subcode, "spans": evidence.get((a, code), [])}
        )
    return out


def _old_empathy(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in one query (answer id -> payload)."""
    out: dict[int, dict] = {a: {} for a in answer_ids}
    for a, chosen in session.execute(
        select(EmpathyAnswer.answer_id, EmpathyAnswer.more_empathetic_response_id).where(
            EmpathyAnswer.answer_id.in_(answer_ids)
        )
    ):
        out[a] = {"equal": True} if chosen is None else {"more_empathetic_response_id": chosen}
    return out


def _old_facts(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    out: dict[int, dict] = {a: {"facts": []} for a in answer_ids}
    for a, side, text, entailed, category in session.execute(
        select(Fact.answer_id, Fact.side, Fact.text, Fact.entailed, Fact.error_category_id)
        .where(Fact.answer_id.in_(answer_ids))
        .order_by(Fact.answer_id, Fact.side.desc(), Fact.position)
    ):
        out[a]["facts"].append(
            {"side": side, "text": text, "entailed": entailed, "error_category": category}
        )
    for a, no_facts in session.execute(
        select(FactCheck.answer_id, FactCheck.no_facts).where(FactCheck.answer_id.in_(answer_ids))
    ):
        if no_facts:
            out[a]["no_facts"] = True
    return out


OLD_READ_MANY = {
    "respond": _old_respond,
    "rank": _old_rank,
    "match": _old_match,
    "urgency": _old_urgency,
    "eppc": _old_eppc,
    "empathy": _old_empathy,
    "facts": _old_facts,
}


def old_units_of_kind(service: StudyService, kind: str) -> list[int]:
    seen: dict[int, None] = {}
    for person in service.annotators():
        for item in service.queue(kind, annotator_id=person.id):
            seen.setdefault(item.unit_id, None)
    return list(seen)


def old_answer_views(s, answers: Sequence[Answer]) -> list[AnswerView]:
    payloads: dict[int, dict] = {}
    by_kind: dict[str, list[int]] = {}
    for answer in answers:
        by_kind.setdefault(answer.kind, []).append(answer.id)
    for kind, ids in by_kind.items():
        for start in range(0, len(ids), _BULK):
            payloads.update(OLD_READ_MANY[kind](s, ids[start : start + _BULK]))
    return [
        AnswerView(
            answer_id=answer.id,
            unit_id=answer.unit_id,
            kind=answer.kind,
            annotator_id=answer.annotator_id,
            is_gold=answer.is_gold,
            status=answer.status,
            payload=payloads[answer.id],
            active_seconds=answer.active_seconds,
            flagged=answer.flagged,
            flag_note=answer.flag_note,
            comment=answer.comment,
            suggestion_id=answer.suggestion_id,
            suggestion_use=answer.suggestion_use,
            updated_at=answer.updated_at,
        )
        for answer in answers
    ]


def old_answers_for_units(
    service: StudyService, unit_ids: Sequence[int]
) -> dict[int, list[AnswerView]]:
    out: dict[int, list[AnswerView]] = {unit_id: [] for unit_id in unit_ids}
    ids = list(out)
    with service.project.read() as s:
        for start in range(0, len(ids), _BULK):
            chunk = ids[start : start + _BULK]
            rows = s.scalars(
                select(Answer).where(Answer.unit_id.in_(chunk)).order_by(Answer.id)
            ).all()
            for view in old_answer_views(s, rows):
                out[view.unit_id].append(view)
    return out


def old_unit_briefs_chunk(service: StudyService, s, ids: list[int]) -> dict[int, UnitBrief]:
    units = s.scalars(select(Unit).where(Unit.id.in_(ids))).all()
    mine = select(Assignment).where(
        Assignment.annotator_id == service.viewer.annotator_id, Assignment.unit_id.in_(ids)
    )
    assignments = {a.unit_id: a for a in s.scalars(mine)}
    case_ids = {c for u in units for c in (u.case_id, u.case_b_id) if c is not None}
    sentence_ids = {u.sentence_id for u in units if u.sentence_id is not None}
    set_ids = {u.unit_set_id for u in units}

    def pairs(key, value, ids) -> dict:
        return {k: v for k, v in s.execute(select(key, value).where(key.in_(ids)))}

    cases = pairs(Case.id, Case.external_id, case_ids)
    texts = pairs(Sentence.id, Sentence.text, sentence_ids)
    sets = pairs(UnitSet.id, UnitSet.name, set_ids)
    out = {}
    for unit in units:
        pair = [c for c in (unit.case_id, unit.case_b_id) if c is not None]
        if unit.kind == "urgency":
            presentation = service._presentation_of(s, unit, assignments.get(unit.id))
            if presentation.get("swap", False):
                pair.reverse()
        out[unit.id] = UnitBrief(
            unit_id=unit.id,
            kind=unit.kind,
            unit_set=sets[unit.unit_set_id],
            position=unit.position,
            case_external_ids=tuple(cases[c] for c in pair),
            sentence_text=texts.get(unit.sentence_id),
        )
    return out


def old_unit_briefs(service: StudyService, unit_ids: Sequence[int]) -> dict[int, UnitBrief]:
    ids = list(dict.fromkeys(unit_ids))
    out: dict[int, UnitBrief] = {}
    with service.project.read() as s:
        for start in range(0, len(ids), _BULK):
            out.update(old_unit_briefs_chunk(service, s, ids[start : start + _BULK]))
    return out


def old_differs(report: UnitAnswers) -> bool:
    answers = report.answers
    return len(answers) >= 2 and len({canonical(a.payload) for a in answers}) > 1


def old_collect(service: StudyService, kind: str, include_drafts: bool) -> list[UnitAnswers]:
    models = {a.id for a in service.annotators() if a.is_model}
    out = []
    by_unit = old_answers_for_units(service, old_units_of_kind(service, kind))
    for unit_id, every in by_unit.items():
        answers = [
            a
            for a in every
            if not a.is_gold
            and a.annotator_id not in models
            and (include_drafts or a.status == "submitted")
        ]
        gold = next((a for a in every if a.is_gold), None)
        report = UnitAnswers(unit_id, answers, gold)
        report.__dict__["differs"] = old_differs(report)  # the cached property, the old way
        out.append(report)
    return out


def old_kinds_to_adjudicate(service: StudyService) -> list[str]:
    assigned = service.assigned_kinds()
    return [
        kind
        for kind in KINDS
        if kind in assigned and (kind != "urgency" or old_units_of_kind(service, kind))
    ]


def old_read_kind(service: StudyService, kind: str, include_drafts: bool) -> Loaded:
    reports = old_collect(service, kind, include_drafts)
    briefs = old_unit_briefs(service, [r.unit_id for r in reports if r.differs])
    return Loaded(None, kind, reports, briefs)


def new_read_kind(service: StudyService, kind: str, include_drafts: bool) -> Loaded:
    return adjudication.read_kind(service, kind, include_drafts, with_kinds=False)


# --- timing ---------------------------------------------------------------------------------


def fastest(repeats: int, ways: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Each way's fastest of ``repeats`` runs (the ways alternating) and its last result."""
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, run in ways.items():
            gc.collect()  # neither way pays for the other's garbage
            started = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - started
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, result)
            else:
                best[name] = (best[name][0], result)
            del result
    return best


def shown(loaded: Loaded) -> str:
    """Everything the window shows of a read, as text that tells True from 1."""
    reports = [(r.unit_id, r.answers, r.gold, r.differs) for r in loaded.reports]
    return repr((reports, loaded.briefs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--drafts", action="store_true", help="read drafts too")
    parser.add_argument("--keep", type=Path, help="folder to keep the study in (and reuse)")
    args = parser.parse_args(argv)
    path = kept_study(args.keep, args.cases)
    project = Project.open(path, automatic_backup=False, read_only=True)
    try:
        pi = StudyService(project)
        print(f"{path.name}, {args.repeats} runs each, the fastest; drafts: {args.drafts}")
        print(f"{'':24} {'old s':>7} {'new s':>7} {'old/new':>8}  same")
        kinds = fastest(
            args.repeats,
            {
                "old": lambda: old_kinds_to_adjudicate(pi),
                "new": lambda: adjudication.kinds_to_adjudicate(pi),
            },
        )
        _line("kinds (on opening)", kinds, kinds["old"][1] == kinds["new"][1])
        for kind in kinds["new"][1]:
            both = fastest(
                args.repeats,
                {
                    "old": lambda kind=kind: old_read_kind(pi, kind, args.drafts),
                    "new": lambda kind=kind: new_read_kind(pi, kind, args.drafts),
                },
            )
            _line(f"read {kind}", both, shown(both["old"][1]) == shown(both["new"][1]))
    finally:
        project.close()


def _line(label: str, both: dict[str, tuple[float, Any]], same: bool) -> None:
    old, new = both["old"][0], both["new"][0]
    print(f"{label:24} {old:7.2f} {new:7.2f} {old / new:7.1f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
