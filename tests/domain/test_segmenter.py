"""Tests for the rule-based clinical sentence segmenter."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from portalreview.domain.segmenter import SentenceSpan, split_sentences

CASES = [
    pytest.param(
        "Hi Dr. Lee,\nI have a question about my metformin. Should I take it with food?\n"
        "Thanks,\nMaria",
        [
            "Hi Dr. Lee,",
            "I have a question about my metformin.",
            "Should I take it with food?",
            "Thanks,",
            "Maria",
        ],
        id="greeting-and-sign-off-lines",
    ),
    pytest.param(
        "Mrs. Garcia called about her refill. Mr. Patel will follow up with Ms. Nguyen today.",
        [
            "Mrs. Garcia called about her refill.",
            "Mr. Patel will follow up with Ms. Nguyen today.",
        ],
        id="titles",
    ),
    pytest.param(
        "Mr. and Mrs. Chen both need flu shots this fall.",
        ["Mr. and Mrs. Chen both need flu shots this fall."],
        id="titles-before-lowercase",
    ),
    pytest.param(
        "I asked the Dr. He said to wait two weeks.",
        ["I asked the Dr.", "He said to wait two weeks."],
        id="title-ending-a-sentence",
    ),
    pytest.param(
        "Please take 2.5 mg of warfarin tonight. Your INR was 3.4, which is high.",
        ["Please take 2.5 mg of warfarin tonight.", "Your INR was 3.4, which is high."],
        id="decimal-doses",
    ),
    pytest.param(
        "The pharmacist said 0.5mg twice a day. Is that right?",
        ["The pharmacist said 0.5mg twice a day.", "Is that right?"],
        id="decimal-without-space",
    ),
    pytest.param(
        "My temp was 98.6 F this morning. Last night it was 101.2 F and I had chills.",
        ["My temp was 98.6 F this morning.", "Last night it was 101.2 F and I had chills."],
        id="temperatures",
    ),
    pytest.param(
        "BP 120/80. Pulse 72. No acute distress.",
        ["BP 120/80.", "Pulse 72.", "No acute distress."],
        id="vitals-note",
    ),
    pytest.param(
        "Your appointment is at 3:30 p.m. tomorrow. Please arrive 15 minutes early.",
        ["Your appointment is at 3:30 p.m. tomorrow.", "Please arrive 15 minutes early."],
        id="pm-before-lowercase",
    ),
    pytest.param(
        "I took my dose at 8 a.m. Should I take another one tonight?",
        ["I took my dose at 8 a.m.", "Should I take another one tonight?"],
        id="am-ending-a-sentence",
    ),
    pytest.param(
        "Avoid NSAIDs, e.g. ibuprofen or naproxen. Use acetaminophen instead, i.e. Tylenol.",
        ["Avoid NSAIDs, e.g. ibuprofen or naproxen.", "Use acetaminophen instead, i.e. Tylenol."],
        id="eg-ie",
    ),
    pytest.param(
        "We discussed surgery vs. physical therapy. You chose PT for now.",
        ["We discussed surgery vs. physical therapy.", "You chose PT for now."],
        id="vs",
    ),
    pytest.param(
        "Bring your pill bottles, inhalers, etc. and your insurance card.",
        ["Bring your pill bottles, inhalers, etc. and your insurance card."],
        id="etc-before-lowercase",
    ),
    pytest.param(
        "Bring your pill bottles, inhalers, etc. The front desk will scan them.",
        ["Bring your pill bottles, inhalers, etc.", "The front desk will scan them."],
        id="etc-ending-a-sentence",
    ),
    pytest.param(
        "The wound is approx. 2 cm wide. It looks clean with no redness.",
        ["The wound is approx. 2 cm wide.", "It looks clean with no redness."],
        id="approx",
    ),
    pytest.param(
        "Take 1 tablet p.o. b.i.d. with meals. Call if you have nausea.",
        ["Take 1 tablet p.o. b.i.d. with meals.", "Call if you have nausea."],
        id="sig-po-bid",
    ),
    pytest.param(
        "Ibuprofen 400 mg t.i.d. p.r.n. for pain. Do not exceed 1200 mg a day.",
        ["Ibuprofen 400 mg t.i.d. p.r.n. for pain.", "Do not exceed 1200 mg a day."],
        id="sig-tid-prn",
    ),
    pytest.param(
        "Use the eye drops q.i.d. for a week, then q.d. until the bottle is empty.",
        ["Use the eye drops q.i.d. for a week, then q.d. until the bottle is empty."],
        id="sig-qid-qd",
    ),
    pytest.param(
        "Take amoxicillin 500 mg t.i.d. Finish the whole course.",
        ["Take amoxicillin 500 mg t.i.d.", "Finish the whole course."],
        id="sig-ending-a-sentence",
    ),
    pytest.param(
        "Did you get my refill request? No. I am still waiting on prescription No. 48213.",
        [
            "Did you get my refill request?",
            "No.",
            "I am still waiting on prescription No. 48213.",
        ],
        id="no-before-number",
    ),
    pytest.param(
        "I was admitted to St. Joseph's Hospital last week. They discharged me Friday.",
        ["I was admitted to St. Joseph's Hospital last week.", "They discharged me Friday."],
        id="saint-before-name",
    ),
    pytest.param(
        "The pharmacy is on Oak St. Please send the script there.",
        ["The pharmacy is on Oak St.", "Please send the script there."],
        id="street-ending-a-sentence",
    ),
    pytest.param(
        "Your referral to J. Smith in cardiology was sent. She will call you this week.",
        ["Your referral to J. Smith in cardiology was sent.", "She will call you this week."],
        id="initials",
    ),
    pytest.param(
        "Your urine culture grew E. coli. We will start an antibiotic today.",
        ["Your urine culture grew E. coli.", "We will start an antibiotic today."],
        id="genus-initial",
    ),
    pytest.param(
        "You can read more at www.heart.org/en/health-topics. Let me know if you have questions.",
        [
            "You can read more at www.heart.org/en/health-topics.",
            "Let me know if you have questions.",
        ],
        id="url",
    ),
    pytest.param(
        "Please email the form to records@stmarys-clinic.org. We will fax it to your insurer.",
        [
            "Please email the form to records@stmarys-clinic.org.",
            "We will fax it to your insurer.",
        ],
        id="email",
    ),
    pytest.param(
        "Here is the plan: 1. Take 40 mg of furosemide daily. 2. Weigh yourself every "
        "morning. 3. Call us if you gain 3 lbs.",
        [
            "Here is the plan:",
            "1. Take 40 mg of furosemide daily.",
            "2. Weigh yourself every morning.",
            "3. Call us if you gain 3 lbs.",
        ],
        id="inline-numbered-list",
    ),
    pytest.param(
        "Before your colonoscopy 1. Stop iron pills 5 days before 2. Drink only clear liquids "
        "the day before",
        [
            "Before your colonoscopy",
            "1. Stop iron pills 5 days before",
            "2. Drink only clear liquids the day before",
        ],
        id="inline-numbered-list-without-periods",
    ),
    pytest.param(
        "Instructions:\n1. Stop aspirin 5 days before the procedure\n"
        "2. Nothing to eat after midnight\n3) Bring a driver",
        [
            "Instructions:",
            "1. Stop aspirin 5 days before the procedure",
            "2. Nothing to eat after midnight",
            "3) Bring a driver",
        ],
        id="numbered-lines",
    ),
    pytest.param(
        "Current meds:\n- lisinopril 10 mg daily\n- metformin 500 mg b.i.d.\n"
        "* atorvastatin 20 mg at bedtime\n• vitamin D 2000 IU",
        [
            "Current meds:",
            "- lisinopril 10 mg daily",
            "- metformin 500 mg b.i.d.",
            "* atorvastatin 20 mg at bedtime",
            "• vitamin D 2000 IU",
        ],
        id="bulleted-lines",
    ),
    pytest.param(
        "- take with food\n  and a full glass of water\n- avoid grapefruit juice",
        ["- take with food\n  and a full glass of water", "- avoid grapefruit juice"],
        id="bullet-continuation-line",
    ),
    pytest.param(
        "thank you for the update\n\nmy sugars have been better",
        ["thank you for the update", "my sugars have been better"],
        id="blank-line",
    ),
    pytest.param(
        "I have been having headaches\nsince I started the new pill",
        ["I have been having headaches\nsince I started the new pill"],
        id="wrapped-line-lowercase",
    ),
    pytest.param(
        "Metformin refill please\n30 day supply is fine",
        ["Metformin refill please", "30 day supply is fine"],
        id="line-starting-with-digit",
    ),
    pytest.param(
        "I stopped the pill.\nthe rash is much better now.",
        ["I stopped the pill.", "the rash is much better now."],
        id="lowercase-after-period-and-newline",
    ),
    pytest.param(
        "My blood sugar was 245 this morning. What should I do",
        ["My blood sugar was 245 this morning.", "What should I do"],
        id="missing-final-punctuation",
    ),
    pytest.param(
        "Is this normal?! I have never felt this dizzy... It started yesterday!!!",
        ["Is this normal?!", "I have never felt this dizzy...", "It started yesterday!!!"],
        id="multiple-terminal-marks",
    ),
    pytest.param(
        "I took the pill and… well, it did not help. Any ideas?",
        ["I took the pill and… well, it did not help.", "Any ideas?"],
        id="ellipsis-before-lowercase",
    ),
    pytest.param(
        "can I take advil with this? my back is killing me",
        ["can I take advil with this?", "my back is killing me"],
        id="question-before-lowercase",
    ),
    pytest.param(
        'He said "stop taking it." Then I felt better.',
        ['He said "stop taking it."', "Then I felt better."],
        id="closing-quote",
    ),
    pytest.param(
        '"Is it contagious?" she asked. I was not sure.',
        ['"Is it contagious?" she asked.', "I was not sure."],
        id="quoted-question-inside-sentence",
    ),
    pytest.param(
        "Your A1c is 7.2% (goal is under 7.) We should adjust your insulin.",
        ["Your A1c is 7.2% (goal is under 7.)", "We should adjust your insulin."],
        id="closing-bracket",
    ),
    pytest.param(
        "Feeling much better today 😊! Thank you so much. 🙏 See you on Monday.",
        ["Feeling much better today 😊!", "Thank you so much. 🙏", "See you on Monday."],
        id="emoji",
    ),
    pytest.param(
        "Mrs. Núñez had a fever of 38.5 °C. Ibuprofen helped. Renée will drive her in.",
        ["Mrs. Núñez had a fever of 38.5 °C.", "Ibuprofen helped.", "Renée will drive her in."],
        id="accented-characters",
    ),
    pytest.param(
        "Hi Dr. Patel,\r\n\r\nMy refill for amlodipine 5 mg is due. Can you send it?\r\n\r\n"
        "Thanks,\r\nJohn",
        [
            "Hi Dr. Patel,",
            "My refill for amlodipine 5 mg is due.",
            "Can you send it?",
            "Thanks,",
            "John",
        ],
        id="crlf",
    ),
    pytest.param(
        "I used my inhaler twice.It did not help.",
        ["I used my inhaler twice.", "It did not help."],
        id="missing-space-after-period",
    ),
    pytest.param(
        "my knee is swollen. i can't walk on it.",
        ["my knee is swollen.", "i can't walk on it."],
        id="all-lowercase-patient",
    ),
    pytest.param(
        "I gained 4 lbs. and my ankles are swollen. Should I take an extra water pill?",
        [
            "I gained 4 lbs. and my ankles are swollen.",
            "Should I take an extra water pill?",
        ],
        id="unit-abbreviation",
    ),
    pytest.param(
        "Hello Ms. Brown,\n\nYour CBC and CMP were normal. Your LDL was 142 mg/dL, which is "
        "above goal.\n\nLet's discuss a statin at your visit.\n\n"
        "Best regards,\nDr. Sarah Kim, M.D.\nInternal Medicine",
        [
            "Hello Ms. Brown,",
            "Your CBC and CMP were normal.",
            "Your LDL was 142 mg/dL, which is above goal.",
            "Let's discuss a statin at your visit.",
            "Best regards,",
            "Dr. Sarah Kim, M.D.",
            "Internal Medicine",
        ],
        id="clinician-reply-with-signature",
    ),
    pytest.param(
        "Your potassium was 5.6 mmol/L (normal 3.5-5.0). Please repeat the BMP at Quest.",
        [
            "Your potassium was 5.6 mmol/L (normal 3.5-5.0).",
            "Please repeat the BMP at Quest.",
        ],
        id="lab-range-in-brackets",
    ),
    pytest.param("Help!!!", ["Help!!!"], id="single-exclamation-run"),
    pytest.param(
        "医生您好。我今天早上开始胸口疼！我应该去急诊吗？",
        ["医生您好。", "我今天早上开始胸口疼！", "我应该去急诊吗？"],
        id="chinese-marks-need-no-space",
    ),
    pytest.param(
        "先生、こんにちは。「大丈夫？」と聞かれました｡救急に行くべきですか？ はい。",
        ["先生、こんにちは。", "「大丈夫？」と聞かれました｡", "救急に行くべきですか？", "はい。"],
        id="japanese-quoted-mark-goes-on",
    ),
    pytest.param(
        "谢谢！😊我明天来。\n好的",
        ["谢谢！😊", "我明天来。", "好的"],
        id="chinese-emoji-stays-with-its-sentence",
    ),
    pytest.param(
        "مرحبا دكتور؟ عندي ألم في الصدر. هل يجب أن آتي؟ شكرا",
        ["مرحبا دكتور؟", "عندي ألم في الصدر.", "هل يجب أن آتي؟", "شكرا"],
        id="arabic-question-mark",
    ),
    pytest.param(
        "ڈاکٹر صاحب سلام۔ مجھے سینے میں درد ہے۔ کیا میں آؤں؟",
        ["ڈاکٹر صاحب سلام۔", "مجھے سینے میں درد ہے۔", "کیا میں آؤں؟"],
        id="urdu-full-stop",
    ),
    pytest.param("قال؟لا ۔نعم", ["قال؟لا ۔نعم"], id="arabic-marks-need-a-space"),
    pytest.param("", [], id="empty"),
    pytest.param("  \r\n\t \n ", [], id="whitespace-only"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_split_sentences(text: str, expected: list[str]) -> None:
    spans = split_sentences(text)
    assert [s.text for s in spans] == expected
    _check_invariants(text, spans)


def test_offsets_are_code_points_with_emoji() -> None:
    text = "Ok 👍🏽. Bye 😊"
    spans = split_sentences(text)
    assert spans == [SentenceSpan(0, 6, "Ok 👍🏽."), SentenceSpan(7, 12, "Bye 😊")]


def test_offsets_with_crlf() -> None:
    text = "Thanks,\r\nMaria\r\n"
    assert split_sentences(text) == [SentenceSpan(0, 7, "Thanks,"), SentenceSpan(9, 14, "Maria")]


def test_span_is_frozen() -> None:
    span = split_sentences("Take it daily.")[0]
    with pytest.raises(AttributeError):
        span.start = 3  # type: ignore[misc]


def _check_invariants(text: str, spans: list[SentenceSpan]) -> None:
    previous_end = 0
    for span in spans:
        assert span.text
        assert text[span.start : span.end] == span.text
        assert span.text == span.text.strip()
        assert previous_end <= span.start < span.end
        previous_end = span.end
    assert "".join(text.split()) == "".join("".join(s.text.split()) for s in spans)


# Pieces that exercise the rules far more often than uniformly random text does.
_FRAGMENTS = st.sampled_from(
    [
        "Dr.", "Mr.", "e.g.", "p.m.", "b.i.d.", "No.", "St.", "J.", "etc.", "2.5", "1.", "2.",
        "3)", "-", "*", "•", ".", "..", "…", "?", "!", "?!", '"', "'", ")", "(", ":", ",",
        " ", "  ", "\n", "\r\n", "\r", "\n\n", "\t", "\u00a0", "\u2028", "The", "take", "I",
        "Maria", "www.x.org", "a@b.com", "😊", "👍🏽", "é", "Élise", "x", "It", "10",
        "。", "！", "？", "｡", "「", "」", "我", "؟", "۔", "شكرا",
    ]
)  # fmt: skip


@settings(max_examples=300)
@given(st.text())
def test_invariants_on_arbitrary_text(text: str) -> None:
    _check_invariants(text, split_sentences(text))


@settings(max_examples=500)
@given(st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_invariants_on_clinical_fragments(text: str) -> None:
    _check_invariants(text, split_sentences(text))
