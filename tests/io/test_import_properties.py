"""Random rows thrown at every importer: each import ends cleanly or in ImportFailed, never in
another exception, and a failed import leaves the project exactly as it was."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_support import fingerprint

from portalreview.store.exporters import cell_text
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.importers.redcap import DICTIONARY_COLUMNS
from portalreview.store.models import KINDS
from portalreview.store.project import Project
from tests.conftest import build_small_study

pytestmark = pytest.mark.both_backends

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WORDS = ["c1", "c2", "d1", "d2", "ref1", "o1", "e1", "ava", "ben", "1", "7", "UNCLEAR", " ",
         "urgency set", "rank set", "respond", "eppc", "InfoGive", "Symptoms",
         "Should I come in?"]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(WORDS),
)
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(WORDS)), inner, max_size=3),
    ),
    max_leaves=6,
)
NAMES = itertools.count()


def maybe(good: st.SearchStrategy) -> st.SearchStrategy:
    """A plausible value most of the time, anything at all otherwise."""
    return st.one_of(good, good, good, JUNK)


def rows(required: dict, optional: dict) -> st.SearchStrategy:
    """Lists of records: each required column usually present, optional ones sometimes."""
    fields = {k: maybe(v) for k, v in required.items()}
    extra = {k: maybe(v) for k, v in optional.items()} | {"extra": JUNK}
    return st.lists(st.fixed_dictionaries(fields, optional=extra), min_size=1, max_size=4)


TEXT = st.text(min_size=1, max_size=40)
IDS = st.uuids().map(str)
LEVELS = st.integers(1, 6)
CASES = st.sampled_from(["c1", "c2"])
RESPONSES = st.sampled_from(["d1", "d2", "ref1", "o1", "e1"])
PEOPLE = st.sampled_from(["ava", "ben", "pat", "newcomer"])
UNITS = st.builds(lambda k, p: {"set": f"{k} set", "position": p}, st.sampled_from(KINDS),
                  st.integers(0, 1))  # fmt: skip
RESULT = st.fixed_dictionaries(
    {"Code": maybe(st.sampled_from(["InfoGive", "InfoSeek", "Socioemotional", "Nope"]))},
    optional={
        "Sub-code": maybe(st.sampled_from(["Symptoms", "ExpressConcern", "Drugs", ""])),
        "Span": maybe(st.sampled_from(["come in", "chest pain", "Hi", "zzz"])),
    },
)
PAYLOADS = st.one_of(
    st.just({"equal": True}),
    st.fixed_dictionaries({"more_urgent_case_id": maybe(CASES)},
                          optional={"levels": st.dictionaries(CASES, maybe(LEVELS))}),
    st.fixed_dictionaries({"entries": st.lists(st.fixed_dictionaries(
        {"response_id": maybe(RESPONSES)}, optional={"rank": maybe(LEVELS),
                                                     "criteria": maybe(st.just(["C1"]))}))}),
    st.fixed_dictionaries({"labels": st.lists(st.fixed_dictionaries(
        {"code": maybe(st.just("InfoSeek"))}, optional={"spans": maybe(st.just([[0, 3]]))}))}),
    st.fixed_dictionaries({"decisions": st.lists(st.fixed_dictionaries(
        {"sentence_id": maybe(st.fixed_dictionaries(
            {"owner": RESPONSES, "position": st.integers(0, 3)}))}))}),
    st.fixed_dictionaries({"facts": st.lists(st.fixed_dictionaries(
        {"side": maybe(st.just("edited")), "text": maybe(TEXT)}))}),
    st.fixed_dictionaries({"mode": maybe(st.just("theme_guided")),
                           "parts": maybe(st.dictionaries(st.just("empathy"), TEXT))}),
)  # fmt: skip

FORMATS: dict[str, tuple[str, st.SearchStrategy]] = {
    "cases_csv": ("csv", rows(
        {"case_id": IDS, "message": TEXT},
        {"urgency_level": st.one_of(LEVELS, st.just("UNCLEAR")), "tags": st.just("a=b;c=d"),
         "demographics": TEXT, "chart": st.just("###Demographics###\nAge: 3"), "tag_x": TEXT})),
    "cases_jsonl": ("jsonl", rows(
        {"case_id": IDS, "message": TEXT},
        {"problems": st.lists(TEXT, max_size=2), "tags": st.dictionaries(TEXT, TEXT),
         "urgency_level": LEVELS, "created_at": st.just("2024-01-01T00:00:00")})),
    "responses_csv": ("csv", rows(
        {"response_id": IDS, "case_id": CASES, "text": TEXT},
        {"author_kind": st.sampled_from(["model", "robot"]), "production": st.just("zero_shot")})),
    "pmr_pairs_csv": ("csv", rows(
        {"chosen": TEXT, "chosen_level": LEVELS, "rejected": TEXT, "rejected_level": LEVELS},
        {"difficulty": st.sampled_from(["easy", "hard"])})),
    "inbox_jsonl": ("jsonl", rows({"text": TEXT, "level": LEVELS}, {"relevancy": LEVELS})),
    "eppc_jsonl": ("jsonl", rows(
        {"case_id": CASES, "sentence": st.sampled_from(["Should I come in?", "Hi Dr. Lee,"]),
         "annotator": PEOPLE, "results": st.lists(RESULT, max_size=3)},
        {"status": st.sampled_from(["draft", "submitted"])})),
    "answers_jsonl": ("jsonl", rows(
        {"kind": st.sampled_from(KINDS), "unit": UNITS, "annotator": PEOPLE,
         "answer": PAYLOADS},
        {"status": st.sampled_from(["draft", "submitted"]), "gold": st.booleans(),
         "active_seconds": st.floats(0, 100)})),
    "units_jsonl": ("jsonl", rows(
        {"set": st.sampled_from(["new set", "rank set"]), "case_id": CASES},
        {"kind": st.sampled_from(KINDS), "position": st.integers(0, 3),
         "case_b_id": CASES, "response_id": RESPONSES, "members": st.lists(RESPONSES),
         "sentence_id": st.fixed_dictionaries({"owner": CASES, "position": st.integers(0, 3)})})),
    "assignments_jsonl": ("jsonl", rows(
        {"unit": UNITS, "annotator": PEOPLE, "position": st.integers(0, 5)},
        {"presentation": st.one_of(st.just({"swap": True}), st.just({"order": ["d1", "d2"]}))})),
    "annotators_jsonl": ("jsonl", rows(
        {"name": TEXT, "role": st.sampled_from(["clinician", "pi", "boss"])},
        {"is_model": st.booleans(), "display_name": TEXT})),
    "redcap_csv": ("redcap", rows(
        {"record_id": IDS, "redcap_survey_identifier": PEOPLE, "case_id": CASES,
         "empathy_box": TEXT, "survey_complete": st.sampled_from([0, 1, 2, 3])},
        {"assumptions": TEXT})),
}  # fmt: skip


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("props")
    with Project.create(folder / "p.prproj", name="Props") as project:
        build_small_study(project)
        yield project, folder


def _write(folder: Path, style: str, records: list[dict]) -> list[Path]:
    stem = f"t{next(NAMES)}"
    if style == "jsonl":
        path = folder / f"{stem}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        return [path]
    path = folder / f"{stem}.csv"
    columns = list(dict.fromkeys(k for r in records for k in r))
    if style == "redcap":  # REDCap puts the record id first
        columns.sort(key=lambda c: c != "record_id")
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows([cell_text(r.get(c)) for c in columns] for r in records)
    return [path, _dictionary(folder)] if style == "redcap" else [path]


def _dictionary(folder: Path) -> Path:
    path = folder / "dictionary.csv"
    fields = [("record_id", "text", "Record ID"), ("case_id", "text", "Case ID"),
              ("empathy_box", "notes", "Empathetic Communication"),
              ("assumptions", "notes", "Assumptions/Notes/Additional Thoughts")]  # fmt: skip
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(DICTIONARY_COLUMNS)
        for name, kind, label in fields:
            writer.writerow([name, "survey", "", kind, label] + [""] * 13)
    return path


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_random_rows_import_cleanly_or_fail_cleanly(shared, name):
    project, folder = shared
    style, strategy = FORMATS[name]

    @SETTINGS
    @given(records=strategy)
    def check(records: list[dict]) -> None:
        paths = _write(folder, style, records)
        before = fingerprint(project)
        try:
            import_files(project, paths)
        except ImportFailed as exc:
            assert str(exc)
            assert fingerprint(project) == before, "a failed import changed the project"

    check()
