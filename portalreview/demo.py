"""The built-in demo study: synthetic cases, drafts and responses from ``resources/demo``, and
answers of every kind from three synthetic annotators, with realistic disagreement.

Everything in the demo is invented. The source texts (messages, charts, clinician responses,
drafts, EPPC gold codes, empathy pairs and their facts) were written for PortalReview; the
annotators' *answers* are simulated here from those texts with a seeded random generator, each
annotator with their own noise, so every agreement measure has something to show and the demo
is identical every time it is built.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from portalreview.domain.segmenter import split_sentences
from portalreview.resources import resource
from portalreview.store import building
from portalreview.store.kinds.respond import compose
from portalreview.store.project import Project
from portalreview.store.service import StudyService

CLINICIANS = {
    # name: (display name, a personal noise level used by every simulated judgement)
    "nurse_ava": ("Ava Moreno, RN", 0.10),
    "dr_ben": ("Ben Okafor, MD", 0.16),
    "np_chloe": ("Chloe Lindqvist, NP", 0.22),
}
PI = ("dr_pi", "Priya Iyer, MD")  # the app says "(PI)" beside her name itself
INBOX = "demo-inbox"
SEED = 20261121
# The last share of each queue the third annotator has not reached yet, so the demo shows
# work in progress ("12 of 40 done").
UNFINISHED_SHARE = 0.15
_WORD = re.compile(r"[a-z0-9']+")


def _load(name: str) -> list[dict[str, Any]]:
    with resource("demo", name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class _Builder:
    svc: StudyService
    s: Session
    rng: random.Random
    people: dict[str, int] = field(default_factory=dict)
    cases: dict[str, int] = field(default_factory=dict)
    charts: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    drafts: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    references: dict[tuple[str, str], tuple[int, str, list[str]]] = field(default_factory=dict)
    # which response of an empathy pair is stored first: drawn apart from ``rng``, whose answers
    # stay those of the demo before the sides were drawn
    sides: random.Random = field(default_factory=lambda: random.Random(f"{SEED}:sides"))

    # --- people and material ---------------------------------------------------------------

    def add_people(self) -> None:
        for name, (display, _) in CLINICIANS.items():
            self.people[name] = self.svc.add_annotator(name, display, session=self.s)
        self.people[PI[0]] = self.svc.add_annotator(PI[0], PI[1], role="pi", session=self.s)

    def add_cases(self) -> None:
        for row in _load("cases.jsonl"):
            chart = {k: row[k] for k in ("demographics", "problems", "encounters", "medications")}
            self.charts[row["case_id"]] = chart
            self.cases[row["case_id"]] = self.svc.add_case(
                row["case_id"],
                row["message"],
                chart,
                age_band=row.get("age_band"),
                gender=row.get("gender"),
                source_dataset="portalreview-demo (synthetic)",
                urgency_level=row.get("urgency_level"),
                tags=row.get("tags"),
                session=self.s,
            )

    def add_drafts(self) -> None:
        for row in _load("drafts.jsonl"):
            response = self.svc.add_response(
                self.cases[row["case_id"]],
                row["draft_id"],
                row["text"],
                author_kind="model",
                author=row["source"],
                source=row["source"],
                production=row["production"],
                session=self.s,
            )
            self.drafts.setdefault(row["case_id"], []).append(
                (response, row["source"], row["text"])
            )

    # --- units, assignments, answers -------------------------------------------------------

    def unit_set(self, name: str, kind: str, description: str) -> int:
        return self.svc.create_unit_set(name, kind, description, session=self.s)

    def assign_and_answer(self, unit: int, answers: dict[str, dict | None], last: bool) -> None:
        """Assign a unit to each annotator in ``answers`` and save their answer (None: the
        unit stays to do)."""
        for name, payload in answers.items():
            self.svc.assign(unit, self.people[name], session=self.s)
            if payload is None or (last and name == "np_chloe"):
                continue
            noise = CLINICIANS[name][1]
            self.svc.save_answer(
                unit,
                payload,
                status="submitted",
                annotator_id=self.people[name],
                active_seconds=round(self.rng.uniform(20, 240) * (1 + noise), 1),
                session=self.s,
            )

    def is_last(self, index: int, total: int) -> bool:
        return index >= total * (1 - UNFINISHED_SHARE)


# --- respond -----------------------------------------------------------------------------------


def _sentence_themes(parts: dict[str, str], order: list[str]) -> tuple[str, list[str]]:
    """The composed response and the theme of each of its sentences (from the box it came
    from)."""
    text = compose({"parts": parts}, order)
    spans, cursor = [], 0
    for theme in order:
        part = parts.get(theme, "").strip()
        if part:
            start = text.index(part, cursor)
            spans.append((start, start + len(part), theme))
            cursor = start + len(part)
    themes = []
    for sentence in split_sentences(text):
        owner = next((t for a, b, t in spans if a <= sentence.start < b), "other")
        themes.append(owner)
    return text, themes


def build_respond(b: _Builder) -> None:
    order = [t.id for t in b.svc.catalogs.themes]
    unit_set = b.unit_set(
        "Theme-guided responses", "respond", "Write a response per theme (seed 000, App. G)."
    )
    rows = _load("clinician_responses.jsonl")
    case_ids = list(dict.fromkeys(r["case_id"] for r in rows))
    for index, case_key in enumerate(case_ids):
        unit = b.svc.add_unit(unit_set, b.cases[case_key], session=b.s)
        answers = {}
        for row in (r for r in rows if r["case_id"] == case_key):
            parts = {k: v for k, v in row["parts"].items() if v.strip()}
            answers[row["annotator"]] = {"parts": parts, "notes": row.get("notes", "")}
            text, themes = _sentence_themes(parts, order)
            ref = b.svc.add_response(
                b.cases[case_key],
                f"{case_key}-{row['annotator']}",
                text,
                author_kind="clinician",
                author=row["annotator"],
                source=row["annotator"],
                production="theme_guided",
                session=b.s,
            )
            b.references[(case_key, row["annotator"])] = (ref, text, themes)
        b.assign_and_answer(unit, answers, b.is_last(index, len(case_ids)))


# --- rank --------------------------------------------------------------------------------------

_SOURCE_QUALITY = {
    "local-70b-zero-shot": 0.62,
    "local-8b-thematic": 0.58,
    "local-8b-zero-shot": 0.42,
}


def _rank_payload(rng: random.Random, drafts: list[tuple[int, float]], noise: float) -> dict:
    scored = [(r, q + rng.gauss(0, noise)) for r, q in drafts]
    ordered = sorted(scored, key=lambda x: -x[1])
    entries, rank = [], 0
    for i, (response, score) in enumerate(ordered):
        tied = i > 0 and ordered[i - 1][1] - score < 0.04
        rank = rank if tied else i + 1
        correct = score + rng.gauss(0, 0.05) > 0.45
        criteria = [] if correct else sorted(rng.sample(["C1", "C2", "C3"], rng.choice([1, 1, 2])))
        entries.append(
            {"response_id": response, "rank": rank, "correct": correct, "criteria": criteria}
        )
    return {"entries": entries}


def build_rank(b: _Builder) -> None:
    unit_set = b.unit_set("Rank the drafts", "rank", "Blinded, shuffled, ties allowed (seed 001).")
    case_keys = sorted(b.drafts)
    for index, case_key in enumerate(case_keys):
        drafts = b.drafts[case_key]
        members = [r for r, _, _ in drafts]
        unit = b.svc.add_unit(unit_set, b.cases[case_key], members=members, session=b.s)
        quality = [
            (r, _SOURCE_QUALITY.get(src, 0.5) + b.rng.gauss(0, 0.12)) for r, src, _ in drafts
        ]
        answers = {
            name: _rank_payload(b.rng, quality, noise) for name, (_, noise) in CLINICIANS.items()
        }
        b.assign_and_answer(unit, answers, b.is_last(index, len(case_keys)))


# --- match -------------------------------------------------------------------------------------

_THEME_CUES = [
    (
        "contingency",
        (
            "911",
            "emergency",
            " er ",
            "worse",
            "if you notice",
            "if you develop",
            "if it",
            "if the",
            "right away if",
        ),
    ),
    (
        "medication_questions",
        ("are you taking", "have you taken", "dose?", "medication?", "pills?", "taking it"),
    ),
    (
        "empathy",
        ("sorry", "understand", "glad", "thank you", "must be", "hear that", "worr", "frustrat"),
    ),
    (
        "logistics",
        (
            "schedule",
            "appointment",
            "front desk",
            "billing",
            "insurance",
            "portal",
            "pharmacy",
            "office",
            "visit",
        ),
    ),
    (
        "coordination",
        (
            "i will",
            "i'll",
            "we will",
            "we'll",
            "let you know",
            "reach out",
            "forward",
            "follow up with you",
            "message you",
        ),
    ),
    (
        "planning",
        (
            "recommend",
            "please take",
            "start",
            "stop",
            "increase",
            "continue",
            "blood work",
            "test",
            "try",
        ),
    ),
    (
        "assessment",
        (
            "likely",
            "could be",
            "sounds like",
            "because",
            "can cause",
            "normal",
            "usually",
            "consistent with",
        ),
    ),
]


def _guess_theme(sentence: str) -> str:
    lowered = f" {sentence.lower()} "
    if sentence.rstrip().endswith("?"):
        for theme, cues in _THEME_CUES[:2]:
            if any(c in lowered for c in cues):
                return theme
        return "symptom_questions"
    for theme, cues in _THEME_CUES:
        if any(c in lowered for c in cues):
            return theme
    return "other"


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def _match_payload(
    rng: random.Random, ref_sentences, ref_themes: list[str], draft_text: str, noise: float
) -> dict:
    draft_sentences = split_sentences(draft_text)
    decisions, themes = [], []
    threshold = 0.18 + noise / 2
    for sentence, theme in zip(ref_sentences, ref_themes, strict=True):
        words = _words(sentence.text)
        best, best_score = None, 0.0
        for candidate in draft_sentences:
            other = _words(candidate.text)
            score = len(words & other) / max(1, len(words | other))
            if score > best_score:
                best, best_score = candidate, score
        spans: list[list[int]] = []
        if best is not None and best_score + rng.gauss(0, noise / 3) >= threshold:
            start, end = best.start, best.end
            comma = best.text.find(", ")
            if rng.random() < noise and 0 < comma < len(best.text) - 10:
                start += comma + 2  # a narrower selection: only the second clause
            spans = [[start, end]]
        decisions.append({"sentence": sentence, "spans": spans})
        given = theme if rng.random() > noise / 2 else _guess_theme(sentence.text)
        themes.append({"sentence": sentence, "theme": given})
    for candidate in draft_sentences:
        guess = _guess_theme(candidate.text)
        if rng.random() < noise / 2:
            guess = rng.choice(["assessment", "planning", "other"])
        themes.append({"sentence": candidate, "theme": guess, "draft": True})
    return {"decisions": decisions, "themes": themes}


def _resolve_match(payload: dict, view) -> dict:
    """Replace the segmenter's sentences in a simulated payload by the unit's sentence ids."""
    reference, draft = view.responses
    ref_ids = {(s.start, s.end): s.id for s in reference.sentences}
    draft_ids = {(s.start, s.end): s.id for s in draft.sentences}
    return {
        "decisions": [
            {"sentence_id": ref_ids[(d["sentence"].start, d["sentence"].end)], "spans": d["spans"]}
            for d in payload["decisions"]
        ],
        "themes": [
            {
                "sentence_id": (draft_ids if t.get("draft") else ref_ids)[
                    (t["sentence"].start, t["sentence"].end)
                ],
                "theme": t["theme"],
            }
            for t in payload["themes"]
        ],
    }


def _add_match_units(b: _Builder, unit_set: int, pairs: list, annotators: list[str]) -> None:
    for index, (case_key, ref, ref_text, ref_themes, draft_id, draft_text) in enumerate(pairs):
        unit = b.svc.add_unit(
            unit_set, b.cases[case_key], response_id=ref, response_b_id=draft_id, session=b.s
        )
        view = b.svc.read_unit(unit, session=b.s)
        ref_sentences = split_sentences(ref_text)
        answers = {
            name: _resolve_match(
                _match_payload(b.rng, ref_sentences, ref_themes, draft_text, CLINICIANS[name][1]),
                view,
            )
            for name in annotators
        }
        b.assign_and_answer(unit, answers, b.is_last(index, len(pairs)))


def build_match(b: _Builder) -> None:
    """Reference = the nurse's theme-guided response; drafts = each local model's draft.
    A second set compares clinicians with each other (IAP, seed 000 App. E.2)."""
    drafts_set = b.unit_set(
        "Match drafts to the reference", "match", "Content matching (seed 000, Algorithm 1)."
    )
    pairs = []
    for (case_key, author), (ref, text, themes) in sorted(b.references.items()):
        if author != "nurse_ava":
            continue
        for draft_id, _, draft_text in b.drafts.get(case_key, [])[:2]:
            pairs.append((case_key, ref, text, themes, draft_id, draft_text))
    _add_match_units(b, drafts_set, pairs, list(CLINICIANS))

    iap_set = b.unit_set(
        "Clinician vs clinician (IAP)", "match", "Every ordered pair of clinicians (seed 000 E.2)."
    )
    iap_pairs = []
    for case_key in sorted({c for c, _ in b.references})[:4]:
        for a, c in itertools.permutations(CLINICIANS, 2):
            if (case_key, a) in b.references and (case_key, c) in b.references:
                ref, text, themes = b.references[(case_key, a)]
                other, other_text, _ = b.references[(case_key, c)]
                iap_pairs.append((case_key, ref, text, themes, other, other_text))
    _add_match_units(b, iap_set, iap_pairs, ["nurse_ava", "dr_ben"])


# --- urgency -----------------------------------------------------------------------------------


def build_urgency(b: _Builder) -> None:
    inbox = [
        (row["case_id"], row["urgency_level"])
        for row in _load("cases.jsonl")
        if (row.get("tags") or {}).get("inbox") == INBOX
    ]
    pairs = list(itertools.combinations(inbox, 2))
    b.rng.shuffle(pairs)
    pairs = pairs[:120]  # about 8 comparisons per message
    unit_set = b.unit_set(
        "Demo inbox pairs", "urgency", "Which patient needs care first? (seed 002)"
    )
    for index, ((key_a, level_a), (key_b, level_b)) in enumerate(pairs):
        a, c = b.cases[key_a], b.cases[key_b]
        unit = b.svc.add_unit(
            unit_set, a, case_b_id=c, batch=f"batch-{index // 40 + 1}", session=b.s
        )
        answers = {}
        for name, (_, noise) in CLINICIANS.items():
            seen_a = level_a + b.rng.gauss(0, 0.4 + noise * 2)
            seen_b = level_b + b.rng.gauss(0, 0.4 + noise * 2)
            payload: dict[str, Any] = {
                "more_urgent_case_id": a if seen_a <= seen_b else c,
                "ask_second": abs(seen_a - seen_b) < 0.15,
            }
            if b.rng.random() < 0.3:
                clamp = lambda x: min(6, max(1, round(x)))  # noqa: E731
                payload["levels"] = {str(a): clamp(seen_a), str(c): clamp(seen_b)}
            answers[name] = payload
        b.assign_and_answer(unit, answers, b.is_last(index, len(pairs)))


# --- eppc --------------------------------------------------------------------------------------


def _gold_labels(text: str, gold: list[dict], sentence) -> list[dict]:
    """The gold labels whose evidence lies in this sentence of the segmenter, as payload."""
    labels: dict[str, dict] = {}
    for entry in gold:
        for label in entry["labels"]:
            at = sentence.text.find(label["span"])
            if at < 0 or label["code"] in labels:
                continue
            labels[label["code"]] = {
                "code": label["code"],
                "subcode": label["subcode"],
                "spans": [[at, at + len(label["span"])]],
            }
    return list(labels.values())


def _noisy_eppc(rng: random.Random, gold: list[dict], catalogs, noise: float, length: int):
    out = []
    for label in gold:
        if rng.random() < noise * 0.6:
            continue  # missed
        subcode = label["subcode"]
        if rng.random() < noise * 0.5:
            choices = [s.id for s in catalogs.eppc_code(label["code"]).subcodes]
            subcode = rng.choice(choices)
        ((start, end),) = label["spans"]
        if rng.random() < noise:
            start, end = 0, length  # the whole sentence rather than the minimal span
        out.append({"code": label["code"], "subcode": subcode, "spans": [[start, end]]})
    return {"labels": out}


#: Messages per EPPC batch (003 Sec. 3.2.2 tracks kappa per sample of 50 messages; the demo
#: has 18, so three batches show the trend).
EPPC_BATCH_MESSAGES = 6


def build_eppc(b: _Builder) -> None:
    unit_set = b.unit_set(
        "EPPC coding", "eppc", "Codes, subcodes and evidence per sentence (seed 003)."
    )
    catalogs = b.svc.catalogs
    messages = _load("eppc_messages.jsonl")
    last_patient_case: int | None = None
    units: list[tuple[int, list[dict], int, int, str]] = []
    for number, message in enumerate(messages):
        batch = f"batch-{number // EPPC_BATCH_MESSAGES + 1}"  # a message's sentences in one
        if message["sender"] == "patient":
            chart = b.charts.get(message.get("case_id") or "", {})
            owner = b.svc.add_case(
                message["message_id"],
                message["text"],
                chart,
                source_dataset="portalreview-demo (synthetic)",
                tags={"eppc": "demo"},
                session=b.s,
            )
            last_patient_case = owner
            sentences = b.svc.sentences(case_id=owner, session=b.s)
            case_id = owner
        else:
            case_id = last_patient_case
            owner = b.svc.add_response(
                case_id,
                message["message_id"],
                message["text"],
                author_kind="clinician",
                author="demo provider",
                production="real_time",
                session=b.s,
            )
            sentences = b.svc.sentences(response_id=owner, session=b.s)
        for sentence in sentences:
            gold = _gold_labels(message["text"], message["gold"], sentence)
            units.append((case_id, gold, sentence.id, len(sentence.text), batch))
    for index, (case_id, gold, sentence_id, length, batch) in enumerate(units):
        unit = b.svc.add_unit(unit_set, case_id, sentence_id=sentence_id, batch=batch, session=b.s)
        answers = {
            name: _noisy_eppc(b.rng, gold, catalogs, noise, length)
            for name, (_, noise) in CLINICIANS.items()
        }
        b.assign_and_answer(unit, answers, b.is_last(index, len(units)))
        b.svc.save_answer(
            unit,
            {"labels": gold},
            status="submitted",
            gold=True,
            annotator_id=b.people[PI[0]],
            session=b.s,
        )


# --- empathy and facts -------------------------------------------------------------------------


def build_empathy_and_facts(b: _Builder) -> None:
    empathy_set = b.unit_set(
        "Empathy pairs", "empathy", "Which reply is more empathetic? (seed 004)"
    )
    facts_set = b.unit_set(
        "Fact checks", "facts", "Facts kept, lost and added by the edit (seed 004)"
    )
    facts = {row["pair_id"]: row for row in _load("facts.jsonl")}
    pairs = _load("empathy_pairs.jsonl")
    for index, pair in enumerate(pairs):
        case = b.cases[pair["case_id"]]
        original = b.svc.add_response(
            case,
            f"{pair['pair_id']}-original",
            pair["original"],
            author_kind="clinician",
            author="demo physician",
            source="physician",
            production="real_time",
            session=b.s,
        )
        edited = b.svc.add_response(
            case,
            f"{pair['pair_id']}-edited",
            pair["edited"],
            author_kind="model",
            author="local-8b",
            source="local-8b-edit",
            production="edited_empathy",
            session=b.s,
        )
        last = b.is_last(index, len(pairs))
        # stored original first, every pair would tell a clinician who reads her copy or the
        # server with her own SQL which reply is the edit (the screen's sides are drawn anyway)
        first, second = b.sides.sample((original, edited), 2)
        unit = b.svc.add_unit(
            empathy_set, case, response_id=first, response_b_id=second, session=b.s
        )
        answers = {}
        for name in CLINICIANS:
            roll = b.rng.random()
            answers[name] = (
                {"more_empathetic_response_id": edited}
                if roll < 0.72
                else {"equal": True}
                if roll < 0.9
                else {"more_empathetic_response_id": original}
            )
        b.assign_and_answer(unit, answers, last)
        unit = b.svc.add_unit(
            facts_set, case, response_id=original, response_b_id=edited, session=b.s
        )
        row = facts[pair["pair_id"]]
        answers = {
            name: _facts_payload(b.rng, row, pair, noise) for name, (_, noise) in CLINICIANS.items()
        }
        b.assign_and_answer(unit, answers, last)


def _facts_payload(rng: random.Random, row: dict, pair: dict, noise: float) -> dict:
    errors = {e["fact"]: e["category"] for e in pair.get("edit_errors", [])}
    out = []
    for side, key, flags in (
        ("original", "original_facts", "original_entailed_by_edited"),
        ("edited", "edited_facts", "edited_entailed_by_original"),
    ):
        for fact, entailed in zip(row[key], row[flags], strict=True):
            if rng.random() < noise * 0.4:
                entailed = not entailed
            category = None
            if not entailed:
                category = errors.get(fact) or (
                    next(iter(errors.values())) if errors and side == "edited" else None
                )
            out.append(
                {"side": side, "text": fact, "entailed": entailed, "error_category": category}
            )
    return {"facts": out}


# --- edit a draft ------------------------------------------------------------------------------

_EDIT_ADDITIONS = (
    "Please send us a message tomorrow to let us know how you are doing.",
    "If anything changes before then, call the clinic right away.",
    "I have asked our nurse to call you today.",
    "Bring your medicine bottles to the visit.",
)


def _edited_draft(rng: random.Random, draft: str, noise: float) -> str:
    """A simulated clinician edit: some sentences of the draft dropped, one sentence added."""
    sentences = [x.text for x in split_sentences(draft)]
    kept = [x for x in sentences if rng.random() > 0.15 + noise]
    if not kept:
        kept = sentences[:1]
    kept.insert(rng.randrange(len(kept) + 1), rng.choice(_EDIT_ADDITIONS))
    return " ".join(kept)


def build_edit_drafts(b: _Builder, n_cases: int = 8) -> None:
    """Respond units that ask to edit one draft each (the measured editing load)."""
    unit_set = b.unit_set(
        "Edit a draft",
        "respond",
        "Edit an LLM draft into the reply you would send; the word-level edits and the active "
        "editing time are recorded.",
    )
    case_keys = sorted(b.drafts)[:n_cases]
    for index, case_key in enumerate(case_keys):
        response, _source, text = b.drafts[case_key][index % len(b.drafts[case_key])]
        unit = b.svc.add_unit(unit_set, b.cases[case_key], response_id=response, session=b.s)
        answers = {
            name: {
                "mode": "edit_draft",
                "base_response_id": response,
                "final_text": _edited_draft(b.rng, text, noise),
                "notes": "",
            }
            for name, (_display, noise) in CLINICIANS.items()
        }
        b.assign_and_answer(unit, answers, b.is_last(index, len(case_keys)))


# --- entry point -------------------------------------------------------------------------------


# A demo being built is ".portalreview-demo-build-<pid>-<random>.prproj" beside its final name
# (SQLite's -wal and -shm and the lock file beside it); it gets the final name only once whole,
# so that a build cut short, even by a kill, never leaves a half-built demo to be opened.
BUILD_PREFIX = ".portalreview-demo-build-"
FILE_NAME = "portalreview-demo.prproj"  # the demo's name wherever it is built for opening
DEMO_NAME = "PortalReview demo study (synthetic)"


def build_demo(path: str | Path) -> Path:
    """Create the demo study at ``path`` (which must not exist) and return its path. It is
    built under a hidden temporary name beside ``path`` and renamed once complete; a build
    a kill left there is removed first (:func:`remove_abandoned_builds`; store/building.py).
    A failure (a full disk) is a ProjectError naming ``path``, not the hidden build file."""
    path = Path(path)
    try:
        return building.build_file(path, _fill, BUILD_PREFIX)
    except building.BUILD_ERRORS as exc:
        raise building.not_made(path, exc, BUILD_PREFIX) from exc


def _fill(path: Path) -> None:
    """Make the demo study in the new file ``path``, and leave it complete in that one file."""
    project = Project.create(path, name=DEMO_NAME)
    project.merge_each_save = False  # a file under a temporary name: merged once, below
    try:
        svc = StudyService(project)
        with project.write() as session:
            builder = _Builder(svc, session, random.Random(SEED))
            builder.add_people()
            builder.add_cases()
            builder.add_drafts()
            build_respond(builder)
            build_rank(builder)
            build_match(builder)
            build_urgency(builder)
            build_eppc(builder)
            build_empathy_and_facts(builder)
            build_edit_drafts(builder)
    finally:
        project.close()


def remove_abandoned_builds(folder: Path) -> list[Path]:
    """Remove the demo builds a killed program left in ``folder`` (never one that a running
    program is building). Returns the build files removed."""
    return building.remove_abandoned_builds(folder, BUILD_PREFIX)
