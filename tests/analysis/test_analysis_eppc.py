"""EPPCMinerBen tables (seed 003) from eppc answers: scores against gold and between coders,
relaxed spans, kappa per code, pooled and per batch, alpha for three coders."""

from __future__ import annotations

import math

import pytest
from analysis_builders import new_study, span_of

from portalreview import metrics
from portalreview.analysis import eppc
from portalreview.store.models import Unit

MESSAGE = (
    "I have had chest pain since this morning. Can you call me back today? "
    "Thanks so much for your help."
)
IG, IS, PP = "InfoGive", "InfoSeek", "PartnershipPatient"
SYMPTOMS, DRUGS, THANKS = "Symptoms", "Drugs", "Appreciation/Gratitude"


def _labels(sentence: str, *labels):
    return {
        "labels": [
            {"code": c, "subcode": sub, "spans": [span_of(sentence, piece)]}
            for c, sub, piece in labels
        ]
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("eppc"))
    for name in ("a", "b", "c"):
        st.person(name)
    st.person("pi", role="pi")
    st.case("c1", MESSAGE)
    s1, s2, s3 = st.case_sentences("c1")
    for key, sentence in (("u1", s1), ("u2", s2), ("u3", s3)):
        st.unit(key, "eppc", "c1", who=["a", "b", "c"], sentence_id=sentence.id)
    with st.project.write() as session:  # batches as an importer would set them
        for key, batch in (("u1", "b1"), ("u2", "b1"), ("u3", "b2")):
            session.get(Unit, st.units[key]).batch = batch
    t1, t2, t3 = s1.text, s2.text, s3.text
    gold = {
        "u1": _labels(t1, (IG, SYMPTOMS, "chest pain since this morning")),
        "u2": _labels(t2, (IS, SYMPTOMS, "call me back today")),
        "u3": _labels(t3, (PP, THANKS, "Thanks so much")),
    }
    for unit, payload in gold.items():
        st.answer(unit, "pi", payload, gold=True)
    st.answer("u1", "a", _labels(t1, (IG, SYMPTOMS, "chest pain since this morning")))
    st.answer("u2", "a", _labels(t2, (IS, DRUGS, "call me back")))  # wrong subcode
    st.answer("u3", "a", {"labels": []})  # missed the code
    st.answer(
        "u1", "b", _labels(t1, (IG, SYMPTOMS, "chest pain"), (IS, SYMPTOMS, "since this morning"))
    )
    st.answer("u2", "b", _labels(t2, (IS, SYMPTOMS, "Can you call me back today?")))
    st.answer("u3", "b", _labels(t3, (PP, THANKS, "Thanks so much for your help.")))
    st.answer("u1", "c", _labels(t1, (IG, SYMPTOMS, "chest pain")))
    st.answer("u2", "c", {"labels": []})  # c never answered u3
    frames = st.frames()
    yield st, frames, eppc.analyse(frames, n_resamples=0)
    st.project.close()


def _vs_gold(result, name):
    (row,) = [r for r in result["vs_gold"] if r["annotator"] == name]
    return row


def test_codes_and_pairs_against_gold(study):
    _, _, result = study
    a = _vs_gold(result, "a")
    # Codes: u1 TP, u2 TP, u3 FN -> P 1, R 2/3, F1 4/5.
    assert (a["codes"]["tp"], a["codes"]["fp"], a["codes"]["fn"]) == (2, 0, 1)
    assert a["codes"]["f1"]["value"] == pytest.approx(0.8)
    # Pairs: u1 TP; u2 (InfoSeek, Drugs) FP and (InfoSeek, Symptoms) FN; u3 FN:
    # TP 1, FP 1, FN 2 -> F1 = 2 / (2 + 1 + 2) = 0.4.
    pairs = a["code_subcode"]
    assert (pairs["tp"], pairs["fp"], pairs["fn"]) == (1, 1, 2)
    assert pairs["f1"]["value"] == pytest.approx(0.4)
    b = _vs_gold(result, "b")
    # b adds InfoSeek on u1: codes TP 3, FP 1, FN 0 -> P 3/4, F1 6/7.
    assert b["codes"]["precision"]["value"] == 0.75
    assert b["codes"]["f1"]["value"] == pytest.approx(6 / 7)
    expected = metrics.micro_prf([{IG}, {IS}, {PP}], [{IG, IS}, {IS}, {PP}])
    assert b["codes"]["f1"]["value"] == pytest.approx(expected.f1)
    assert a["n_units"] == 3 and _vs_gold(result, "c")["n_units"] == 2


def test_relaxed_spans_against_gold(study):
    _, _, result = study
    a = _vs_gold(result, "a")["spans"]
    # u1 identical; u2 "call me back" lies inside "call me back today"; u3's gold unmatched.
    assert (a["n_predicted"], a["n_gold"], a["tp"], a["fp"], a["fn"]) == (2, 3, 2, 0, 1)
    assert a["recall"]["value"] == pytest.approx(2 / 3)
    b = _vs_gold(result, "b")["spans"]
    # u1: "chest pain" and "since this morning" both lie inside the gold span (2 TP, one gold
    # span matched); u2 and u3 contain their gold spans. TP 4, FN 0 -> recall 4 / 4.
    assert (b["tp"], b["matched_gold"], b["fn"], b["recall"]["value"]) == (4, 3, 0, 1.0)
    expected = metrics.span_prf(
        [["chest pain since this morning"], ["call me back today"], ["Thanks so much"]],
        [
            ["chest pain", "since this morning"],
            ["Can you call me back today?"],
            ["Thanks so much for your help."],
        ],
    )
    assert b["f1"]["value"] == pytest.approx(expected.f1)


def test_per_code_breakdown(study):
    _, _, result = study
    per = {row["code"]: row for row in _vs_gold(result, "b")["per_code"]}
    assert (per[IS]["tp"], per[IS]["fp"], per[IS]["precision"]) == (1, 1, 0.5)
    assert per[PP]["f1"] == 1.0 and per["InfoGiveSDOH"]["support"] == 0
    table = metrics.per_label_prf([{IG}, {IS}, {PP}], [{IG, IS}, {IS}, {PP}])
    assert per[IS]["f1"] == pytest.approx(table.loc[IS, "f1"])


def test_between_annotators(study):
    _, _, result = study
    rows = {(r["annotator_a"], r["annotator_b"]): r for r in result["between_annotators"]}
    ab = rows[("a", "b")]
    # a as reference: a {IG}, {IS}, {} vs b {IG, IS}, {IS}, {PP}: TP 2, FP 2, FN 0.
    assert (ab["codes"]["tp"], ab["codes"]["fp"], ab["codes"]["fn"]) == (2, 2, 0)
    assert rows[("a", "c")]["n_units"] == 2


def test_kappa_per_code_pooled_and_per_batch(study):
    _, _, result = study
    (ab,) = [k for k in result["kappa"] if (k["annotator_a"], k["annotator_b"]) == ("a", "b")]
    # Items: 3 sentences x 9 codes = 27. Both yes: u1 IG, u2 IS (2); only b: u1 IS, u3 PP (2);
    # only a: 0; neither: 23. p_o = 25/27, p_e = (2/27)(4/27) + (25/27)(23/27) = 583/729:
    # kappa = (675 - 583) / (729 - 583) = 92/146.
    assert ab["pooled"]["value"] == pytest.approx(92 / 146)
    per = {row["code"]: row for row in ab["per_code"]}
    assert per[IG]["kappa"]["value"] == 1.0
    # InfoSeek: a (0,1,0) vs b (1,1,0): p_o 2/3, p_e 2/9 + 2/9 -> (6 - 4) / (9 - 4) = 0.4.
    assert per[IS]["kappa"]["value"] == pytest.approx(0.4)
    assert per[PP]["kappa"]["value"] == pytest.approx(0.0)
    assert per["InfoGiveSDOH"]["kappa"]["value"] is None  # nobody used it: undefined
    assert per[IS]["kappa"]["value"] == pytest.approx(metrics.cohen_kappa([0, 1, 0], [1, 1, 0]))
    batches = {row["batch"]: row for row in ab["per_batch"]}
    # b1 (u1, u2; 18 items): both 2, only b 1, neither 15: p_o 17/18,
    # p_e = (2/18)(3/18) + (16/18)(15/18) = 246/324 -> (306 - 246) / (324 - 246) = 60/78.
    assert batches["b1"]["kappa"] == pytest.approx(60 / 78)
    assert batches["b2"]["kappa"] == pytest.approx(0.0)
    assert [b["n_units"] for b in ab["per_batch"]] == [2, 1]


def test_alpha_over_three_coders(study):
    _, _, result = study
    alpha = result["alpha"]
    assert (alpha["n_coders"], alpha["n_units"]) == (3, 3)
    per = {row["code"]: row["alpha"]["value"] for row in alpha["per_code"]}
    # InfoGive presence: u1 (1, 1, 1), u2 (0, 0, 0), u3 (0, 0, missing).
    table = [[1, 1, 1], [0, 0, 0], [0, 0, None]]
    assert per[IG] == pytest.approx(metrics.krippendorff_alpha(table))
    # InfoSeek: u1 (0, 1, 0), u2 (1, 1, 0), u3 (0, 0, missing).
    table = [[0, 1, 0], [1, 1, 0], [0, 0, None]]
    assert per[IS] == pytest.approx(metrics.krippendorff_alpha(table))
    # Pooled over (sentence, code) items: one row per item.
    codes = result["codes"]
    coded = {"a": [{IG}, {IS}, set()], "b": [{IG, IS}, {IS}, {PP}], "c": [{IG}, set(), None]}
    rows = [
        [None if coded[w][u] is None else int(code in coded[w][u]) for w in "abc"]
        for u in range(3)
        for code in codes
    ]
    assert alpha["pooled"]["value"] == pytest.approx(metrics.krippendorff_alpha(rows))
    assert not math.isnan(alpha["pooled"]["value"])


def test_kappa_per_code_within_each_batch(study):
    _, _, result = study
    (ab,) = [k for k in result["kappa"] if (k["annotator_a"], k["annotator_b"]) == ("a", "b")]
    batches = {row["batch"]: row for row in ab["per_batch"]}
    b1 = {row["code"]: row for row in batches["b1"]["per_code"]}
    b2 = {row["code"]: row for row in batches["b2"]["per_code"]}
    # b1 = u1, u2. InfoGive: a (1, 0), b (1, 0): p_o = 1, p_e = 1/4 + 1/4 -> kappa 1.
    assert b1[IG]["kappa"] == 1.0 and (b1[IG]["n_yes_a"], b1[IG]["n_yes_b"]) == (1, 1)
    # InfoSeek: a (0, 1), b (1, 1): p_o = 1/2, p_e = (1/2)(1) + (1/2)(0) = 1/2 -> 0.
    assert b1[IS]["kappa"] == pytest.approx(0.0)
    assert (b1[IS]["n_yes_a"], b1[IS]["n_yes_b"]) == (1, 2)
    # PartnershipPatient: nobody on u1, u2 -> one category only: undefined.
    assert b1[PP]["kappa"] is None
    # b2 = u3: PartnershipPatient a (0), b (1): p_o = 0, p_e = 0 -> kappa 0.
    assert b2[PP]["kappa"] == pytest.approx(0.0)
    # The same values from metrics.cohen_kappa on each batch's presence vectors.
    vectors = {IG: ([1, 0], [1, 0]), IS: ([0, 1], [1, 1])}
    for code, (a, b) in vectors.items():
        assert b1[code]["kappa"] == pytest.approx(metrics.cohen_kappa(a, b))
    assert [row["code"] for row in batches["b1"]["per_code"]] == result["codes"]


def test_unlabelled_batches_are_50_messages_each_never_part_of_one(tmp_path):
    """Without a batch label, a unit set's batches are samples of 50 messages (003 Sec. 3.2.2),
    a message being the case or response a sentence is of: 51 cases and one reply of two
    sentences each make 52 messages, 104 sentences, so #1 holds 50 messages (100 sentences)."""
    st = new_study(tmp_path)
    st.person("a")
    st.person("b")
    text = "Hello doctor. My knee hurts."
    for i in range(51):
        st.case(f"m{i}", text)
    st.response("reply", "m0", "Sorry to hear it. Rest the knee.", "clinician")
    sentences = [(f"m{i}", x) for i in range(51) for x in st.case_sentences(f"m{i}")]
    sentences[2:2] = [("m0", x) for x in st.sentences("reply")]  # the reply after its case
    for n, (case, sentence) in enumerate(sentences):
        st.unit(f"u{n}", "eppc", case, who=["a", "b"], sentence_id=sentence.id)
        labels = _labels(sentence.text, (IG, SYMPTOMS, sentence.text))
        st.answer(f"u{n}", "a", labels)
        st.answer(f"u{n}", "b", labels if n % 3 else {"labels": []})
    (ab,) = eppc.analyse(st.frames(), n_resamples=0)["kappa"]
    assert [(row["batch"], row["n_units"]) for row in ab["per_batch"]] == [("#1", 100), ("#2", 4)]
    st.project.close()
