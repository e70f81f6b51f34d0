"""Tests for the label catalogs (portalreview.domain.catalogs)."""

from __future__ import annotations

import copy
import json

import pytest

from portalreview.domain.catalogs import (
    DEFAULT_CATALOGS,
    CatalogError,
    Catalogs,
    load_catalog_extension,
)

# The EPPC codebook table of FACTS.md, verbatim.
FACTS_EPPC = {
    "InfoGive": [
        "Symptoms",
        "Diagnostics",
        "Drugs",
        "Prognosis",
        "Generalinformation",
        "Instruction",
        "carecoordination",
        "SchedulingAppt",
    ],
    "InfoSeek": [
        "Symptoms",
        "Diagnostics",
        "Drugs",
        "Generalinformation",
        "carecoordination",
        "SchedulingAppt",
    ],
    "InfoGiveSDOH": [
        "EconomicStability",
        "HealthCareAccessAndQuality",
        "NeighborhoodAndBuiltEnvironment",
    ],
    "InfoSeekSDOH": ["EconomicStability", "HealthCareAccessAndQuality"],
    "PartnershipProvider": [
        "salutation",
        "signoff",
        "connection",
        "Appreciation/Gratitude",
        "maintainCommunication",
        "build trust",
        "Alignment",
        "inviteCollaboration",
        "checkingUnderstanding/clarification",
    ],
    "PartnershipPatient": [
        "salutation",
        "signoff",
        "Appreciation/Gratitude",
        "connection",
        "Alignment",
        "build trust",
        "statePreferences",
        "expressOpinions",
        "activeParticipation/involvement",
    ],
    "SharedDecisionProvider": [
        "ShareOptions",
        "Approval/Reinforcement",
        "EncourageQuestions",
        "SummarizeConfirmUnderstanding",
        "MakeDecision",
    ],
    "SharedDecisionPatient": [
        "ApprovalofDecision/Reinforcement",
        "ExploreOptions",
        "SeekingApproval",
    ],
    "Socioemotional/Empathy": [
        "ExpressConcern/unease",
        "Sadness/fear",
        "Reassurance",
        "AcknowledgeSituation",
        "PositiveRemarks",
    ],
}

C = DEFAULT_CATALOGS


# ---------------------------------------------------------------------------- contents


def test_counts():
    assert len(C.themes) == 9
    assert len(C.urgency_levels) == 6
    assert len(C.urgency_filter_labels) == 2
    assert len(C.eppc_codes) == 9
    assert [len(c.subcodes) for c in C.eppc_codes] == [8, 6, 3, 2, 9, 9, 5, 3, 5]
    # 36 distinct subcode names; 50 (code, subcode) labels because some names recur.
    assert len({s.id for c in C.eppc_codes for s in c.subcodes}) == 36
    assert sum(len(c.subcodes) for c in C.eppc_codes) == 50
    assert len(C.criteria) == 3
    assert len(C.empathy_choices) == 3
    assert len(C.error_categories) == 6


def test_themes_in_form_order_other_last():
    assert [t.id for t in C.themes] == [
        "empathy",
        "symptom_questions",
        "medication_questions",
        "assessment",
        "planning",
        "logistics",
        "coordination",
        "contingency",
        "other",
    ]
    assert [t.short for t in C.themes] == [
        "Emp",
        "SymQ",
        "MedQ",
        "Assess",
        "Plan",
        "Logis",
        "Coord",
        "Cont",
        "Other",
    ]
    assert [t.is_other for t in C.themes] == [False] * 8 + [True]
    assert C.theme("empathy").name == "Empathetic communication"
    assert C.notes_box.id == "notes"


def test_fixed_ids():
    assert [lv.level for lv in C.urgency_levels] == [1, 2, 3, 4, 5, 6]
    assert C.urgency_levels[0].name == "Emergency now"
    assert [f.id for f in C.urgency_filter_labels] == ["UNCLEAR", "SUPPORTIVE CARE"]
    assert [c.id for c in C.criteria] == ["C1", "C2", "C3"]
    assert [e.id for e in C.empathy_choices] == ["first_more", "second_more", "equal"]
    assert [e.id for e in C.error_categories] == [
        "follow_up_recommendation",
        "clinical_assumption",
        "clinical_inaccuracy",
        "unnecessary_advice",
        "unnecessary_doubt",
        "false_assurance",
    ]


def test_every_facts_id_present_verbatim():
    assert [c.id for c in C.eppc_codes] == list(FACTS_EPPC)
    for code_id, subs in FACTS_EPPC.items():
        assert [s.id for s in C.eppc_code(code_id).subcodes] == subs


def test_display_names_and_text_non_empty():
    assert C.eppc_code("InfoGive").name == "Information giving"
    assert C.eppc_code("PartnershipPatient").name == "Patient partnership"
    names = {s.id: s.name for s in C.eppc_code("PartnershipProvider").subcodes}
    assert names["Appreciation/Gratitude"] == "Appreciation / gratitude"
    entries = [
        *C.themes,
        *C.urgency_levels,
        *C.urgency_filter_labels,
        *C.eppc_codes,
        *(s for c in C.eppc_codes for s in c.subcodes),
        *C.criteria,
        *C.error_categories,
    ]
    for entry in entries:
        assert entry.name.strip() and entry.definition.strip()
    for theme in C.themes:
        assert theme.question.strip()


def test_lookup_errors_are_clear():
    with pytest.raises(KeyError, match=r"nope.*empathy"):
        C.theme("nope")
    with pytest.raises(KeyError, match="InfoGive"):
        C.eppc_code("infogive")


# ---------------------------------------------------------------------------- round trip


def test_round_trip_and_json():
    data = C.to_dict()
    text = json.dumps(data)
    again = Catalogs.from_dict(json.loads(text))
    assert again == C
    assert again.to_dict() == data
    assert hash(again) == hash(C)


def test_from_dict_reports_path_of_problem():
    data = C.to_dict()
    data["eppc_codes"][3]["subcodes"][1]["id"] = "EconomicStability"
    with pytest.raises(CatalogError, match=r"^eppc_codes\[3\]\.subcodes\[1\]\.id: duplicate"):
        Catalogs.from_dict(data)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d["themes"][2].update(name=""), r"themes\[2\]\.name"),
        (lambda d: d["themes"][0].update(is_other=True), r"is_other"),
        (lambda d: d["themes"].reverse(), r"Other theme must come last"),
        (lambda d: d["urgency_levels"].pop(), r"urgency_levels"),
        (lambda d: d["urgency_levels"][0].update(level=2), r"urgency_levels\[0\]\.level"),
        (lambda d: d["criteria"].append(dict(d["criteria"][0])), r"criteria\[3\]\.id"),
        (lambda d: d.update(extra=1), r'unknown key "extra"'),
        (lambda d: d.pop("criteria"), r'missing key "criteria"'),
        (
            lambda d: d["eppc_legacy_spellings"].update(Nope={"x": "y"}),
            r"eppc_legacy_spellings\[\"Nope\"\]",
        ),
        (
            lambda d: d["eppc_legacy_spellings"].update(InfoGive={"Sym": "Prognosiss"}),
            r"not a canonical subcode",
        ),
    ],
)
def test_from_dict_refuses_invalid(mutate, pattern):
    data = copy.deepcopy(C.to_dict())
    mutate(data)
    with pytest.raises(CatalogError, match=pattern):
        Catalogs.from_dict(data)


def test_same_subcode_id_under_two_codes_is_fine():
    assert "salutation" in {s.id for s in C.eppc_code("PartnershipProvider").subcodes}
    assert "salutation" in {s.id for s in C.eppc_code("PartnershipPatient").subcodes}


# ---------------------------------------------------------------------------- canonical_eppc


@pytest.mark.parametrize(
    ("code", "sub", "expected"),
    [
        ("SharedDecisionPatient", "ApprovalofDecision", "ApprovalofDecision/Reinforcement"),
        ("SharedDecisionProvider", "Approval", "Approval/Reinforcement"),
        ("PartnershipProvider", "checkingUnderstanding", "checkingUnderstanding/clarification"),
        ("PartnershipProvider", "checkingunderstanding", "checkingUnderstanding/clarification"),
    ],
)
def test_canonical_eppc_legacy_spellings(code, sub, expected):
    code_id, sub_id, applied = C.canonical_eppc(code, sub)
    assert (code_id, sub_id) == (code, expected)
    assert len(applied) == 1 and "legacy" in applied[0] and sub in applied[0]


def test_canonical_eppc_exact_has_no_mappings():
    assert C.canonical_eppc("InfoGive", "Symptoms") == ("InfoGive", "Symptoms", [])
    assert C.canonical_eppc("PartnershipPatient", "build trust")[2] == []
    assert C.canonical_eppc("InfoSeek", None) == ("InfoSeek", None, [])


def test_canonical_eppc_case_and_space_insensitive():
    code_id, sub_id, applied = C.canonical_eppc("infogive", "symptoms")
    assert (code_id, sub_id) == ("InfoGive", "Symptoms")
    assert len(applied) == 2
    assert C.canonical_eppc(" Info Give ", "SCHEDULING APPT")[:2] == ("InfoGive", "SchedulingAppt")
    assert C.canonical_eppc("partnershippatient", "buildtrust")[:2] == (
        "PartnershipPatient",
        "build trust",
    )
    assert C.canonical_eppc("socioemotional/empathy", "sadness / fear")[:2] == (
        "Socioemotional/Empathy",
        "Sadness/fear",
    )


def test_canonical_eppc_display_names():
    code_id, sub_id, applied = C.canonical_eppc("Information Giving", "Diagnostics")
    assert (code_id, sub_id) == ("InfoGive", "Diagnostics")
    assert "display name" in applied[0]


def test_canonical_eppc_refuses_wrong_code_and_unknown_code():
    with pytest.raises(CatalogError) as info:
        C.canonical_eppc("InfoGiveSDOH", "Symptoms")
    message = str(info.value)
    assert "InfoGiveSDOH" in message and "Symptoms" in message
    assert "EconomicStability" in message  # the valid choices are listed
    with pytest.raises(CatalogError, match=r"unknown code.*InfoGive"):
        C.canonical_eppc("InfoGivve", "Symptoms")
    with pytest.raises(CatalogError):
        C.canonical_eppc("", None)


def test_canonical_eppc_blank_subcode_is_none():
    code_id, sub_id, applied = C.canonical_eppc("InfoGive", "  ")
    assert (code_id, sub_id) == ("InfoGive", None)
    assert applied


# ---------------------------------------------------------------------------- extensions


NEW_THEME = {
    "id": "education",
    "name": "Patient education",
    "short": "Edu",
    "definition": "General teaching about the condition.",
    "question": "What would you teach the patient about their condition?",
}


def test_extension_adds_theme_before_other():
    ext = C.extended({"version": "study-7", "themes": [NEW_THEME]})
    assert ext.version == "study-7"
    assert [t.id for t in ext.themes][-2:] == ["education", "other"]
    assert ext.themes[-1].is_other
    assert len(C.themes) == 9  # the original is untouched
    assert Catalogs.from_dict(ext.to_dict()) == ext


def test_extension_without_version_gets_a_derived_one():
    ext = C.extended({"themes": [NEW_THEME]})
    assert ext.version.startswith(C.version + "+ext-")
    assert ext.version != C.version


def test_extension_adds_subcode_to_existing_code():
    ext = C.extended(
        {
            "version": "v2",
            "eppc_codes": [
                {
                    "id": "InfoGive",
                    "subcodes": [
                        {"id": "Costs", "name": "Costs", "definition": "Shares prices of care."}
                    ],
                }
            ],
        }
    )
    subs = [s.id for s in ext.eppc_code("InfoGive").subcodes]
    assert subs == [*FACTS_EPPC["InfoGive"], "Costs"]
    assert ext.canonical_eppc("infogive", "costs")[:2] == ("InfoGive", "Costs")
    # the same subcode is still unknown elsewhere
    with pytest.raises(CatalogError):
        ext.canonical_eppc("InfoSeek", "Costs")


def test_extension_adds_new_code_and_legacy_spelling():
    ext = C.extended(
        {
            "version": "v2",
            "eppc_codes": [
                {
                    "id": "Humor",
                    "name": "Humor",
                    "definition": "Light-hearted remarks.",
                    "subcodes": [{"id": "Joke", "name": "Joke", "definition": "A joke."}],
                }
            ],
            "eppc_legacy_spellings": {"Humor": {"Jest": "Joke"}, "": {"Humour": "Humor"}},
        }
    )
    assert len(ext.eppc_codes) == 10
    code_id, sub_id, applied = ext.canonical_eppc("Humour", "jest")
    assert (code_id, sub_id) == ("Humor", "Joke")
    assert len(applied) == 2


def test_extension_identical_entries_are_ignored():
    existing = C.to_dict()["themes"][0]
    same = C.extended({"themes": [existing], "criteria": [C.to_dict()["criteria"][0]]})
    assert same == C
    assert same.version == C.version


def test_extension_adds_criteria_errors_and_filter_labels():
    ext = C.extended(
        {
            "version": "v3",
            "criteria": [{"id": "C4", "name": "Unsafe", "definition": "Could cause harm."}],
            "error_categories": [
                {"id": "tone_shift", "name": "Tone shift", "definition": "Changes the tone."}
            ],
            "urgency_filter_labels": [
                {"id": "ADMIN", "name": "Administrative", "definition": "Paperwork only."}
            ],
        }
    )
    assert [c.id for c in ext.criteria][-1] == "C4"
    assert ext.error_categories[-1].id == "tone_shift"
    assert ext.urgency_filter_labels[-1].id == "ADMIN"


def test_extension_refuses_conflicting_redefinition():
    changed = dict(C.to_dict()["themes"][0], definition="Something else.")
    with pytest.raises(CatalogError, match=r'extension\.themes\[0\].*"empathy".*definition'):
        C.extended({"version": "v2", "themes": [changed]})
    with pytest.raises(CatalogError, match="InfoGive"):
        C.extended({"eppc_codes": [{"id": "InfoGive", "name": "Giving info"}]})
    with pytest.raises(CatalogError, match="Symptoms"):
        C.extended(
            {
                "eppc_codes": [
                    {
                        "id": "InfoGive",
                        "subcodes": [{"id": "Symptoms", "name": "S", "definition": "Other."}],
                    }
                ]
            }
        )
    with pytest.raises(CatalogError, match="Approval"):
        C.extended(
            {"eppc_legacy_spellings": {"SharedDecisionProvider": {"Approval": "MakeDecision"}}}
        )


def test_extension_refuses_unknown_key():
    with pytest.raises(CatalogError, match='unknown key "labels"'):
        C.extended({"labels": []})


def test_extension_refuses_duplicate_id():
    with pytest.raises(CatalogError, match=r"extension\.themes\[1\]\.id: duplicate"):
        C.extended({"version": "v2", "themes": [NEW_THEME, dict(NEW_THEME, short="Ed2")]})
    with pytest.raises(CatalogError, match="duplicate"):
        C.extended({"version": "v2", "themes": [dict(NEW_THEME, short="Emp")]})


def test_extension_refuses_urgency_scale_and_fixed_parts():
    level = {"level": 7, "name": "Later", "definition": "Whenever."}
    with pytest.raises(CatalogError, match=r"urgency_levels.*1-6"):
        C.extended({"urgency_levels": [level]})
    with pytest.raises(CatalogError, match="empathy_choices"):
        C.extended({"empathy_choices": []})


def test_extension_refuses_other_theme_and_bad_shapes():
    with pytest.raises(CatalogError, match="is_other"):
        C.extended({"themes": [dict(NEW_THEME, is_other=True)]})
    with pytest.raises(CatalogError, match=r"extension\.themes\[0\]\.name"):
        C.extended({"themes": [dict(NEW_THEME, name="  ")]})
    with pytest.raises(CatalogError, match="snake_case"):
        C.extended({"themes": [dict(NEW_THEME, id="Patient Education")]})
    with pytest.raises(CatalogError, match="object"):
        C.extended([])  # type: ignore[arg-type]


def test_extension_must_bump_an_explicit_version():
    with pytest.raises(CatalogError, match="version"):
        C.extended({"version": C.version, "themes": [NEW_THEME]})


# ---------------------------------------------------------------------------- extension files


def test_load_catalog_extension_ok(tmp_path):
    path = tmp_path / "ext.json"
    path.write_text(json.dumps({"version": "v2", "themes": [NEW_THEME]}), encoding="utf-8")
    ext = load_catalog_extension(path)
    assert C.extended(ext).theme("education").short == "Edu"


def test_load_catalog_extension_missing_file(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(CatalogError, match=r"absent\.json"):
        load_catalog_extension(path)


def test_load_catalog_extension_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"broken\.json.*JSON"):
        load_catalog_extension(str(path))


def test_load_catalog_extension_nested_too_deeply(tmp_path):
    """It ended in a RecursionError traceback (`codebook --extend`)."""
    path = tmp_path / "deep.json"
    path.write_text('{"themes": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"deep\.json: not valid JSON \(nested too deeply\)"):
        load_catalog_extension(path)


def test_load_catalog_extension_list_instead_of_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"list\.json.*object.*list"):
        load_catalog_extension(path)


def test_load_catalog_extension_bad_shapes(tmp_path):
    path = tmp_path / "shape.json"
    path.write_text('{"themes": {}}', encoding="utf-8")
    with pytest.raises(CatalogError, match=r"shape\.json.*themes"):
        load_catalog_extension(path)
    path.write_text('{"themes": [], "themes": []}', encoding="utf-8")
    with pytest.raises(CatalogError, match=r"shape\.json.*duplicate key"):
        load_catalog_extension(path)
    path.write_text('{"colour": 1}', encoding="utf-8")
    with pytest.raises(CatalogError, match=r'shape\.json.*unknown key "colour"'):
        load_catalog_extension(path)
