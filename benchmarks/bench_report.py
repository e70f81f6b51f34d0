"""How long the full JSON report takes on large synthetic studies, and how it grows.

Builds synthetic studies of 1,000 and 10,000 cases (by default) in which 4 annotators answer
a unit of every kind for every case (respond, rank, match, urgency, eppc, empathy, facts; the
EPPC units also carry a gold answer, and every 1,000 cases one inbox of 30 messages gets 120
extra urgency pairs), then times ``read_frames`` (reading the frames) + ``build_report``
(computing every table from them) on each and prints both sizes' times, split into reading and
computing, their ratios and the seconds each analysis took. Then, on a copy of each study, it
times the dashboard's live refresh (``reports/live_report.LiveReport``): the first refresh, one
with nothing saved, and one after one saved answer of each kind (an answer re-saved with its
flag turned over), each with its share of the full report's time in the same run and the
analyses it computed again, then the seconds the dashboard spends afterwards, in the
background, writing what it computed to the project's report cache ("keeping"). Last, a
restart: the report the project keeps shown at once (``stored_report``) and the first refresh
of a new ``LiveReport``, which takes from the project what no answer changed - with nothing
saved, and after one match answer saved. The live reports after the last save and after each
restart are compared with the report computed from scratch (not timed; printed "yes" or
"NO"). ``--no-live`` skips all this.

"Cold" (the first line per size): a new study, nothing kept in the project, the analyses'
in-process caches empty of its answers; only the imports are done beforehand.

The studies are written fast: every row is generated in Python and bulk-inserted through
SQLAlchemy Core (``executemany``) in one transaction, straight into the project's tables,
instead of one service call per answer; the rows respect every constraint and trigger of the
schema (the triggers run on each insert).

Usage::

    .venv/bin/python benchmarks/bench_report.py                  # 1,000 and 10,000 cases
    .venv/bin/python benchmarks/bench_report.py --n-resamples 200
    .venv/bin/python benchmarks/bench_report.py --sizes 500 5000 --keep /tmp/bench

``--n-resamples`` sets the bootstrap resamples per CI (default 1000, the report's default); a
smaller number (e.g. 200) gives a quicker, rougher report - its CIs move slightly, the figures
do not. ``--keep FOLDER`` keeps the studies there and reuses them on the next run (building
the 10,000-case study takes about 40 s). Not part of the test suite (tests/analysis only
smoke-tests the builder).

The analyses import a few libraries only when first used (scikit-learn's TF-IDF for the
similarity table): the benchmark imports them first and prints how long that took, so that the
timings measure the report, as in a long-running program, and not Python's imports (which a
one-off ``portalreview report`` pays once).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from portalreview.domain.catalogs import DEFAULT_CATALOGS
from portalreview.reports.json_report import build_report
from portalreview.reports.live_report import LiveReport, stored_report
from portalreview.store.frames import read_frames
from portalreview.store.models import Answer, Base
from portalreview.store.project import Project
from portalreview.store.service import StudyService

KINDS = ("respond", "rank", "match", "urgency", "eppc", "empathy", "facts")
SOURCES = ("model-a/zero-shot", "model-b/thematic", "model-c/zero-shot")
QUALITY = (0.62, 0.55, 0.42)
INBOX_SIZE = 30
INBOX_PAIRS = 120
THEMES = [t.id for t in DEFAULT_CATALOGS.themes]
CODES = {c.id: [s.id for s in c.subcodes] for c in DEFAULT_CATALOGS.eppc_codes}
CRITERIA = [c.id for c in DEFAULT_CATALOGS.criteria]
ERRORS = [e.id for e in DEFAULT_CATALOGS.error_categories]
# Tables in foreign-key order.
TABLES = (
    "annotators",
    "cases",
    "case_tags",
    "responses",
    "sentences",
    "unit_sets",
    "units",
    "rank_members",
    "assignments",
    "answers",
    "respond_answers",
    "respond_parts",
    "rank_entries",
    "rank_criteria",
    "match_decisions",
    "match_spans",
    "sentence_themes",
    "urgency_answers",
    "eppc_labels",
    "eppc_spans",
    "empathy_answers",
    "facts",
)
_WORDS = [
    "pain",
    "fever",
    "cough",
    "rash",
    "dose",
    "refill",
    "blood",
    "pressure",
    "sugar",
    "sleep",
    "visit",
    "test",
    "result",
    "plan",
    "swelling",
    "dizziness",
    "nausea",
    "inhaler",
    "insulin",
    "knee",
    "back",
    "chest",
    "throat",
    "appointment",
    "pharmacy",
]
_VERBS = ["started", "worsened", "improved", "changed", "stopped", "returned", "continued", "eased"]


# --------------------------------------------------------------------------------------------
# Text with its sentences
# --------------------------------------------------------------------------------------------


def _sentence(rng: random.Random) -> str:
    words = rng.sample(_WORDS, 4)
    return f"The {words[0]} {rng.choice(_VERBS)} after the {words[1]} and {words[2]} {words[3]}."


def _join(sentences: list[str]) -> tuple[str, list[tuple[int, int, str]]]:
    """Text made of sentences joined by a space, and each sentence's (start, end, text)."""
    spans, cursor = [], 0
    for s in sentences:
        spans.append((cursor, cursor + len(s), s))
        cursor += len(s) + 1
    return " ".join(sentences), spans


# --------------------------------------------------------------------------------------------
# Row generation
# --------------------------------------------------------------------------------------------


@dataclass
class _Rows:
    rng: random.Random
    annotators: list[int]
    pi: int
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    ids: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, table: str, **row: Any) -> int:
        """Append a row; give it the next id of its table when it has no key of its own."""
        if "id" not in row and table in _ID_TABLES:
            self.ids[table] += 1
            row["id"] = self.ids[table]
        self.tables[table].append(row)
        return row.get("id", 0)

    def text_of(self, sentences: list[str], **owner: int) -> list[tuple[int, int, int, str]]:
        """Sentence rows of a text; returns (sentence id, start, end, text) per sentence."""
        out = []
        for i, (start, end, text) in enumerate(_join(sentences)[1]):
            sid = self.add("sentences", position=i, start=start, end=end, text=text, **owner)
            out.append((sid, start, end, text))
        return out

    def answer(self, unit: int, kind: str, who: int, gold: bool = False) -> int:
        return self.add(
            "answers",
            unit_id=unit,
            kind=kind,
            annotator_id=who,
            is_gold=gold,
            status="submitted",
            active_seconds=round(self.rng.uniform(20, 200), 1),
        )

    def assign(self, unit: int, who: int, position: int, presentation: dict) -> None:
        self.add(
            "assignments",
            unit_id=unit,
            annotator_id=who,
            position=position,
            presentation_json=json.dumps(presentation),
        )


_ID_TABLES = {
    "annotators",
    "cases",
    "responses",
    "sentences",
    "unit_sets",
    "units",
    "answers",
    "facts",
}


@dataclass
class _Case:
    id: int
    level: int
    message: list[tuple[int, int, int, str]]
    drafts: list[tuple[int, str, list]]  # (response id, text, sentences)
    reference: tuple[int, str, list]
    original: tuple[int, str, list]
    edited: tuple[int, str, list]


def _response(r: _Rows, case: int, key: str, sentences: list[str], **meta: str) -> tuple:
    text, _ = _join(sentences)
    rid = r.add("responses", case_id=case, external_id=key, text=text, **meta)
    return rid, text, r.text_of(sentences, response_id=rid)


def _make_case(r: _Rows, i: int, inbox: str | None) -> _Case:
    rng = r.rng
    level = rng.randint(1, 6)
    message_sentences = [_sentence(rng) for _ in range(rng.randint(3, 4))]
    message, _ = _join(message_sentences)
    cid = r.add(
        "cases", external_id=f"case-{i}", message=message, chart_json="{}", urgency_level=level
    )
    if inbox:
        r.add("case_tags", case_id=cid, key="inbox", value=inbox)
    sentences = r.text_of(message_sentences, case_id=cid)
    drafts = []
    for k, source in enumerate(SOURCES):
        body = [_sentence(rng) for _ in range(rng.randint(4, 6))]
        drafts.append(
            _response(
                r,
                cid,
                f"d{i}-{k}",
                body,
                author_kind="model",
                author=source,
                source=source,
                production="zero_shot",
            )
        )
    copied = [s for _, _, _, s in drafts[i % 3][2]]
    ref_sentences = [rng.choice(copied) if rng.random() < 0.6 else _sentence(rng) for _ in range(4)]
    reference = _response(
        r,
        cid,
        f"r{i}",
        ref_sentences,
        author_kind="clinician",
        author="ann_0",
        source="ann_0",
        production="theme_guided",
    )
    body = [_sentence(rng) for _ in range(rng.randint(3, 5))]
    original = _response(
        r,
        cid,
        f"o{i}",
        body,
        author_kind="clinician",
        author="physician",
        source="physician",
        production="real_time",
    )
    kind_words = ["I am sorry this has been so hard for you."] * rng.randint(1, 2)
    edited = _response(
        r,
        cid,
        f"e{i}",
        kind_words + body,
        author_kind="model",
        author="model-edit",
        source="model-edit",
        production="edited_empathy",
    )
    return _Case(cid, level, sentences, drafts, reference, original, edited)


# --------------------------------------------------------------------------------------------
# Answers of each kind
# --------------------------------------------------------------------------------------------


def _respond(r: _Rows, unit: int, case: _Case, who: int, truth: set[str]) -> None:
    answer = r.answer(unit, "respond", who)
    if r.rng.random() < 0.1:
        base_id, _base_text, base_sentences = case.drafts[0]
        final = " ".join(s for _, _, _, s in base_sentences[:-1]) + " " + _sentence(r.rng)
        r.add(
            "respond_answers",
            answer_id=answer,
            kind="respond",
            mode="edit_draft",
            notes="",
            base_response_id=base_id,
            final_text=final,
        )
        return
    r.add("respond_answers", answer_id=answer, kind="respond", mode="theme_guided", notes="")
    chosen = {t for t in THEMES if (t in truth) != (r.rng.random() < 0.15)} or {THEMES[0]}
    for theme in sorted(chosen):
        r.add("respond_parts", answer_id=answer, theme_id=theme, text=_sentence(r.rng))


def _rank(r: _Rows, unit: int, case_quality: list[float], members: list[int], who: int) -> None:
    answer = r.answer(unit, "rank", who)
    scored = sorted(
        ((q + r.rng.gauss(0, 0.1), m) for q, m in zip(case_quality, members, strict=True)),
        reverse=True,
    )
    rank = 0
    for pos, (score, member) in enumerate(scored):
        tied = pos > 0 and scored[pos - 1][0] - score < 0.03
        rank = rank if tied else pos + 1
        correct = score > 0.45
        r.add(
            "rank_entries",
            answer_id=answer,
            kind="rank",
            response_id=member,
            rank=rank,
            correct=correct,
        )
        if not correct:
            for c in r.rng.sample(CRITERIA, r.rng.randint(1, 2)):
                r.add("rank_criteria", answer_id=answer, response_id=member, criterion_id=c)


def _match(r: _Rows, unit: int, case: _Case, draft: tuple, who: int, truth: dict) -> None:
    answer = r.answer(unit, "match", who)
    _, _, draft_sentences = draft
    by_text = {s: (a, b) for _, a, b, s in draft_sentences}
    for sid, _, _, text in case.reference[2]:
        span = by_text.get(text)
        if r.rng.random() < 0.12:
            span = None if span else draft_sentences[0][1:3]
        r.add("match_decisions", answer_id=answer, kind="match", sentence_id=sid)
        if span:
            start, end = span
            if r.rng.random() < 0.1:
                start += len("The ")  # a narrower selection: the sentence without its first word
            r.add("match_spans", answer_id=answer, sentence_id=sid, start=start, end=end)
    for sid, *_ in case.reference[2] + draft_sentences:
        theme = truth[sid] if r.rng.random() < 0.9 else r.rng.choice(THEMES)
        r.add("sentence_themes", answer_id=answer, kind="match", sentence_id=sid, theme_id=theme)


def _urgency(r: _Rows, unit: int, a: _Case, b: _Case, who: int) -> None:
    answer = r.answer(unit, "urgency", who)
    seen_a = a.level + r.rng.gauss(0, 0.8)
    seen_b = b.level + r.rng.gauss(0, 0.8)
    chosen = a.id if seen_a <= seen_b else b.id
    r.add(
        "urgency_answers",
        answer_id=answer,
        kind="urgency",
        more_urgent_case_id=chosen,
        ask_second=abs(seen_a - seen_b) < 0.1,
    )


def _eppc_gold(rng: random.Random, length: int) -> list[tuple[str, str, int, int]]:
    labels = []
    for code in rng.sample(sorted(CODES), rng.randint(1, 2)):
        start = rng.randint(0, max(0, length - 12))
        labels.append(
            (code, rng.choice(CODES[code]), start, min(length, start + rng.randint(8, 20)))
        )
    return labels


def _eppc(r: _Rows, unit: int, labels: list, length: int, who: int, gold: bool) -> None:
    answer = r.answer(unit, "eppc", who, gold)
    for code, subcode, start, end in labels:
        if not gold and r.rng.random() < 0.12:
            continue
        if not gold and r.rng.random() < 0.1:
            subcode = r.rng.choice(CODES[code])
        if not gold and r.rng.random() < 0.15:
            start, end = 0, length
        r.add("eppc_labels", answer_id=answer, kind="eppc", code_id=code, subcode_id=subcode)
        r.add("eppc_spans", answer_id=answer, code_id=code, start=start, end=end)


def _empathy(r: _Rows, unit: int, case: _Case, who: int) -> None:
    answer = r.answer(unit, "empathy", who)
    roll = r.rng.random()
    chosen = case.edited[0] if roll < 0.7 else None if roll < 0.85 else case.original[0]
    r.add("empathy_answers", answer_id=answer, kind="empathy", more_empathetic_response_id=chosen)


def _facts(r: _Rows, unit: int, truth: list[tuple[str, bool]], who: int) -> None:
    answer = r.answer(unit, "facts", who)
    positions = {"original": 0, "edited": 0}
    for side, entailed in truth:
        if r.rng.random() < 0.08:
            entailed = not entailed
        category = r.rng.choice(ERRORS) if not entailed and r.rng.random() < 0.5 else None
        r.add(
            "facts",
            answer_id=answer,
            kind="facts",
            side=side,
            position=positions[side],
            text=f"Fact {positions[side]} of the {side} response.",
            entailed=entailed,
            error_category_id=category,
        )
        positions[side] += 1


# --------------------------------------------------------------------------------------------
# Units, assignments and answers for every case
# --------------------------------------------------------------------------------------------


def _unit(r: _Rows, sets: dict[str, int], kind: str, case: int, **refs: Any) -> int:
    position = r.ids[f"position:{kind}"]
    r.ids[f"position:{kind}"] += 1
    return r.add(
        "units",
        unit_set_id=sets[kind],
        kind=kind,
        position=position,
        case_id=case,
        batch="",
        **refs,
    )


def _assign_all(r: _Rows, unit: int, kind: str, position: int, extra: dict | None = None):
    for who in r.annotators:
        presentation = dict(extra or {})
        if kind in ("urgency", "empathy"):
            presentation = {"swap": r.rng.random() < 0.5}
        r.assign(unit, who, position, presentation)


def _case_units(r: _Rows, sets: dict[str, int], case: _Case, i: int) -> None:
    rng = r.rng
    unit = _unit(r, sets, "respond", case.id)
    _assign_all(r, unit, "respond", i)
    truth = set(rng.sample(THEMES, rng.randint(3, 5)))
    for who in r.annotators:
        _respond(r, unit, case, who, truth)

    members = [d[0] for d in case.drafts]
    unit = _unit(r, sets, "rank", case.id)
    for m in members:
        r.add("rank_members", unit_id=unit, response_id=m)
    quality = [q + rng.gauss(0, 0.1) for q in QUALITY]
    for who in r.annotators:
        r.assign(unit, who, i, {"order": rng.sample(members, len(members))})
        _rank(r, unit, quality, members, who)

    draft = case.drafts[i % 3]
    unit = _unit(r, sets, "match", case.id, response_id=case.reference[0], response_b_id=draft[0])
    _assign_all(r, unit, "match", i)
    themes = {sid: rng.choice(THEMES) for sid, *_ in case.reference[2] + draft[2]}
    for who in r.annotators:
        _match(r, unit, case, draft, who, themes)

    sid, start, end, _text = case.message[0]
    unit = _unit(r, sets, "eppc", case.id, sentence_id=sid)
    _assign_all(r, unit, "eppc", i)
    r.assign(unit, r.pi, i, {})
    gold = _eppc_gold(rng, end - start)
    for who in r.annotators:
        _eppc(r, unit, gold, end - start, who, False)
    _eppc(r, unit, gold, end - start, r.pi, True)

    for kind in ("empathy", "facts"):
        unit = _unit(
            r, sets, kind, case.id, response_id=case.original[0], response_b_id=case.edited[0]
        )
        _assign_all(r, unit, kind, i)
        if kind == "empathy":
            for who in r.annotators:
                _empathy(r, unit, case, who)
        else:
            truth_facts = [("original", rng.random() < 0.85) for _ in range(rng.randint(3, 4))]
            truth_facts += [("edited", rng.random() < 0.8) for _ in range(rng.randint(3, 5))]
            for who in r.annotators:
                _facts(r, unit, truth_facts, who)


def _urgency_units(r: _Rows, sets: dict[str, int], cases: list[_Case], inboxes: list) -> None:
    pairs = [(cases[i], cases[(i + 1) % len(cases)]) for i in range(len(cases))]
    for members in inboxes:
        combos = [(a, b) for x, a in enumerate(members) for b in members[x + 1 :]]
        pairs += r.rng.sample(combos, min(INBOX_PAIRS, len(combos)))
    for position, (a, b) in enumerate(pairs):
        unit = _unit(r, sets, "urgency", a.id, case_b_id=b.id)
        _assign_all(r, unit, "urgency", position)
        for who in r.annotators:
            _urgency(r, unit, a, b, who)


def generate(n_cases: int, n_annotators: int = 4, seed: int = 0) -> dict[str, list[dict]]:
    """Every row of a synthetic study, table by table (ids assigned here)."""
    if n_cases < 2:
        raise ValueError("a synthetic study needs at least 2 cases (urgency pairs)")
    r = _Rows(random.Random(seed), [], 0)
    for k in range(n_annotators):
        r.annotators.append(
            r.add(
                "annotators",
                name=f"ann_{k}",
                display_name=f"Annotator {k}",
                role="clinician",
                is_model=False,
            )
        )
    r.pi = r.add("annotators", name="pi", display_name="PI", role="pi", is_model=False)
    sets = {kind: r.add("unit_sets", name=f"{kind} units", kind=kind) for kind in KINDS}
    n_inboxes = max(1, n_cases // 1000) if n_cases >= INBOX_SIZE else 0
    cases = []
    for i in range(n_cases):
        inbox = f"inbox-{i // INBOX_SIZE + 1}" if i < n_inboxes * INBOX_SIZE else None
        cases.append(_make_case(r, i, inbox))
    for i, case in enumerate(cases):
        _case_units(r, sets, case, i)
    inboxes = [cases[k * INBOX_SIZE : (k + 1) * INBOX_SIZE] for k in range(n_inboxes)]
    _urgency_units(r, sets, cases, inboxes)
    return r.tables


def build_synthetic_study(
    path: str | Path, n_cases: int, *, n_annotators: int = 4, seed: int = 0
) -> dict[str, int]:
    """Create a project at ``path`` holding a synthetic study; returns rows per table."""
    tables = generate(n_cases, n_annotators, seed)
    project = Project.create(path, name=f"Synthetic study ({n_cases} cases)")
    try:
        with project.write() as session:
            for name in TABLES:
                rows = _uniform(tables.get(name, []))
                for chunk in _chunks(rows, 50_000):
                    session.execute(insert(Base.metadata.tables[name]), chunk)
    finally:
        project.close()
    return {name: len(tables.get(name, [])) for name in TABLES}


def kept_study(folder: Path | None, n_cases: int) -> Path:
    """The synthetic study of ``n_cases`` in ``folder`` (a new temporary folder when None),
    built there first unless an earlier run left it (``--keep``)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="portalreview-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"synthetic-{n_cases}.prproj"
    if not path.exists():
        started = time.perf_counter()
        rows = build_synthetic_study(path, n_cases)
        print(f"built {n_cases} cases: {rows['answers']:,} answers", end=" ")
        print(f"in {time.perf_counter() - started:.1f} s")
    return path


def _uniform(rows: list[dict]) -> list[dict]:
    """Rows with the same keys (an executemany needs them): a key some rows lack is None."""
    keys = {k for row in rows for k in row}
    return [row if len(row) == len(keys) else dict.fromkeys(keys) | row for row in rows]


def _chunks(rows: list, size: int) -> Iterable[list]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def import_analyses() -> float:
    """Import every analysis module and what they import lazily; returns the seconds."""
    started = time.perf_counter()
    import sklearn.feature_extraction.text  # noqa: F401  (respond's TF-IDF similarity)

    from portalreview import analysis

    _ = analysis.ANALYSES  # the analysis modules, imported on first use
    return time.perf_counter() - started


def time_report(path: Path, n_resamples: int, seed: int = 0) -> dict[str, Any]:
    """Seconds to read the frames and to build the report, and per analysis."""
    timings: dict[str, float] = {}
    project = Project.open(path, read_only=True)
    try:
        started = time.perf_counter()
        frames = read_frames(project)
        read = time.perf_counter() - started
        report = build_report(
            project, seed=seed, n_resamples=n_resamples, frames=frames, timings=timings
        )
        total = time.perf_counter() - started
    finally:
        project.close()
    json.dumps(report, allow_nan=False)
    return {
        "read_frames": read,
        "build_report": total - read,
        "total": total,
        "per_kind": timings,
        "report": report,
    }


def _flag_an_answer(project: Project, kind: str) -> None:
    """Re-save the first submitted answer of ``kind`` with its flag turned over (a change of
    one answer of that kind, recorded in the audit log, as a clinician's save would be)."""
    service = StudyService(project)
    with project.read() as s:
        unit_id, annotator_id = s.execute(
            select(Answer.unit_id, Answer.annotator_id)
            .where(Answer.kind == kind, Answer.is_gold.is_(False), Answer.status == "submitted")
            .order_by(Answer.id)
            .limit(1)
        ).one()
    view = service.get_answer(unit_id, annotator_id)
    service.save_answer(
        unit_id,
        view.payload,
        status="submitted",
        flagged=not view.flagged,
        annotator_id=annotator_id,
    )


def _copy_a_colleagues_answer(project: Project, kind: str) -> None:
    """Re-save the first submitted answer of ``kind`` with the payload of a colleague's answer
    to the same unit (a change of its content: other labels, spans, choices or texts), so the
    groups it is in are computed again; :func:`_flag_an_answer` changes no figure."""
    service = StudyService(project)
    with project.read() as s:
        rows = s.execute(
            select(Answer.unit_id, Answer.annotator_id)
            .where(Answer.kind == kind, Answer.is_gold.is_(False), Answer.status == "submitted")
            .order_by(Answer.id)
            .limit(200)
        ).all()
    by_unit: dict[int, list[int]] = defaultdict(list)
    for unit_id, annotator_id in rows:
        by_unit[unit_id].append(annotator_id)
    for unit_id, annotators in by_unit.items():
        mine = service.get_answer(unit_id, annotators[0])
        for other in annotators[1:]:
            theirs = service.get_answer(unit_id, other).payload
            if theirs != mine.payload:
                service.save_answer(unit_id, theirs, status="submitted", annotator_id=annotators[0])
                return
    raise RuntimeError(f"no two different {kind} answers to one unit in the first 200")


def time_live(
    path: Path, n_resamples: int, seed: int = 0
) -> tuple[dict[str, tuple[float, Any]], dict[str, bool]]:
    """The dashboard's refresh (``LiveReport``) on a copy of the study: the first refresh (reads
    and computes everything), one with nothing saved, and one after one saved answer of each
    kind, then :func:`time_restart`; (seconds and result of each, whether each checked live
    report equals one computed from scratch)."""
    with tempfile.TemporaryDirectory(prefix="portalreview-live-") as folder:
        copy = Path(folder) / path.name
        shutil.copy(path, copy)
        project = Project.open(copy, automatic_backup=False)
        try:
            live = LiveReport()
            settings = {"seed": seed, "n_resamples": n_resamples}
            out = {"first": _timed_kept(live, project, settings)}
            out["nothing saved"] = _timed_kept(live, project, settings)
            for kind in KINDS:
                _flag_an_answer(project, kind)
                out[f"one {kind} answer saved"] = _timed_kept(live, project, settings)
            for kind in KINDS:
                _copy_a_colleagues_answer(project, kind)
                out[f"one {kind} answer's content saved"] = _timed_kept(live, project, settings)
            checks = {
                "after the saves": _same_as_fresh(
                    project, out[f"one {KINDS[-1]} answer's content saved"][1], settings
                )
            }
        finally:
            project.close()
        restarts, restart_checks = time_restart(copy, settings)
    return {**out, **restarts}, {**checks, **restart_checks}


def _same_as_fresh(project: Project, result: Any, settings: dict[str, int]) -> bool:
    """Whether the live refresh's report is, byte for byte as JSON, the report computed from
    scratch now (not timed)."""
    fresh = build_report(project, **settings)
    return json.dumps(result.report, allow_nan=False) == json.dumps(fresh, allow_nan=False)


def time_restart(
    path: Path, settings: dict[str, int]
) -> tuple[dict[str, tuple[float, Any]], dict[str, bool]]:
    """A restart on a study whose report the project keeps (``reports/report_cache``): the
    kept report shown at once (``stored_report``), then the first refresh of a new
    ``LiveReport`` (reads the study, takes what is kept); then the same after one match
    answer saved (respond and match computed again). Each first refresh's report is compared
    with one computed from scratch (the second dict)."""
    out: dict[str, tuple[float, Any]] = {}
    checks: dict[str, bool] = {}
    for label, change in (("restart", None), ("restart, one match saved", "match")):
        project = Project.open(path, automatic_backup=False)
        try:
            if change is not None:
                _flag_an_answer(project, change)
            out[f"{label}: kept report shown"] = _timed(stored_report, project, **settings)
            out[f"{label}: first refresh"] = _timed_kept(LiveReport(), project, settings)
            checks[label] = _same_as_fresh(project, out[f"{label}: first refresh"][1], settings)
        finally:
            project.close()
    return out, checks


def _timed_kept(live: LiveReport, project: Project, settings: dict) -> tuple[float, Any]:
    """A refresh as the dashboard makes it: the figures first (timed), then what was computed
    written to the project (``keep_pending``, in the background there: its seconds are noted
    apart as ``keeping``)."""
    seconds, result = _timed(live.refresh, project, keep=False, **settings)
    started = time.perf_counter()
    live.keep_pending(project)
    result.timings["cache"] = time.perf_counter() - started
    return seconds, result


def _timed(refresh: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = refresh(*args, **kwargs)
    return time.perf_counter() - started, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--n-resamples", type=int, default=1000)
    parser.add_argument("--annotators", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="folder to keep the studies in (and reuse)")
    parser.add_argument(
        "--no-live", action="store_true", help="skip the dashboard's live refresh timings"
    )
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="portalreview-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"imports (once per process, not in the timings below): {import_analyses():.2f} s")
    results = {}
    for n in args.sizes:
        path = folder / f"synthetic-{n}.prproj"
        if not path.exists():
            started = time.perf_counter()
            rows = build_synthetic_study(path, n, n_annotators=args.annotators)
            print(
                f"built {n:>6} cases: {sum(rows.values()):,} rows, {rows['answers']:,} answers, "
                f"in {time.perf_counter() - started:.1f} s"
            )
        results[n] = time_report(path, args.n_resamples)
        _print_result(n, results[n], args.n_resamples)
        if not args.no_live:
            live, checks = time_live(path, args.n_resamples)
            _print_live(live, results[n]["total"])
            checked = "; ".join(f"{k}: {'yes' if same else 'NO'}" for k, same in checks.items())
            print(f"        live report equals a report computed from scratch: {checked}")
            _print_aims(n, results[n]["total"], live)
    _print_ratios(results)


def _print_result(n: int, result: dict[str, Any], n_resamples: int) -> None:
    per = "  ".join(f"{k} {v:.2f}" for k, v in result["per_kind"].items())
    print(
        f"{n:>6} cases, n_resamples={n_resamples}: reading frames (read_frames)"
        f" {result['read_frames']:.2f} s + computing (build_report)"
        f" {result['build_report']:.2f} s = {result['total']:.2f} s"
    )
    print(f"        computing per kind (s): {per}")


def _print_live(live: dict[str, tuple[float, Any]], full: float) -> None:
    """Each live refresh's seconds, its ratio to the full report of the same run, and what it
    read and computed again."""
    print(f"        live refresh (LiveReport), against the full report's {full:.2f} s:")
    for what, (seconds, result) in live.items():
        if not hasattr(result, "timings"):  # the kept report, shown without reading
            stale = ", ".join(result.stale) if result is not None else "none kept"
            print(
                f"          {what:<42} {seconds:6.2f} s ({seconds / full:5.1%} of full;"
                f" out of date: {stale or 'nothing'})"
            )
            continue
        read = result.timings.get("read", 0.0)
        kept = result.timings.get("cache", 0.0)
        done = ", ".join(result.recomputed) or "nothing"
        taken = f"; taken from the project: {len(result.from_cache)}" if result.from_cache else ""
        print(
            f"          {what:<42} {seconds:6.2f} s ({seconds / full:5.1%} of full;"
            f" reading {read:.2f} s; computed: {done}{taken}; then keeping {kept:.2f} s)"
        )


#: The aims the figures are held against (cold report, live refresh after one saved answer), in
#: seconds, at 10,000 cases on the 2-core reference machine.
AIMS = {"cold": 2.0, "live": 0.5}


def _print_aims(n: int, cold: float, live: dict[str, tuple[float, Any]]) -> None:
    """The cold report and the slowest refresh after one saved answer, against ``AIMS``."""
    saves = {k: v for k, v in live.items() if k.startswith("one ") and k.endswith(" saved")}
    slowest = max(saves, key=lambda k: saves[k][0])
    seconds = saves[slowest][0]

    def verdict(value: float, aim: float) -> str:
        return "reached" if value < aim else "NOT reached"

    print(
        f"        aims at {n} cases: cold report {cold:.2f} s against {AIMS['cold']} s:"
        f" {verdict(cold, AIMS['cold'])}; slowest live refresh after one saved answer"
        f" {seconds:.2f} s ({slowest}) against {AIMS['live']} s: {verdict(seconds, AIMS['live'])}"
    )


def _print_ratios(results: dict[int, dict[str, Any]]) -> None:
    sizes = sorted(results)
    if len(sizes) < 2:
        return
    small, large = sizes[0], sizes[-1]
    for key, label in (
        ("read_frames", "reading frames"),
        ("build_report", "computing"),
        ("total", "total"),
    ):
        ratio = results[large][key] / results[small][key]
        print(f"ratio {large}/{small} cases ({large / small:.0f}x), {label}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
