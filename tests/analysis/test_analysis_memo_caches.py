"""The analyses' process-wide caches (``analysis._memo``) and the faster routes that replace
per-item loops: every analysis gives the same result with its caches cleared and warm, on the
same study and after an answer changed; a cache never answers for other content or settings;
each faster route equals the route it replaces (the bootstrap weights, the TF-IDF matrix, the
composed responses, the source labels, the sentence texts)."""

from __future__ import annotations

import dataclasses
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from portalreview.analysis import ANALYSES, KINDS, _bootstrap, _common, _memo, match, respond
from portalreview.analysis.filters import DETAIL_TABLES
from portalreview.demo import build_demo
from portalreview.domain.catalogs import DEFAULT_CATALOGS
from portalreview.domain.segmenter import sentence_texts, split_sentences
from portalreview.metrics import draft_edits, with_active_seconds
from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.kinds.respond import compose
from portalreview.store.project import Project

SETTINGS = {"seed": 2, "n_resamples": 80}


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> StudyFrames:
    path = build_demo(tmp_path_factory.mktemp("memo") / "demo.prproj")
    with Project.open(path, read_only=True) as project:
        return read_frames(project)


def without_answer(frames: StudyFrames, answer_id: int) -> StudyFrames:
    """The frames without one answer (its rows in every detail frame too): what a refresh
    reads after the answer was taken back."""
    details = {
        name: getattr(frames, name)[getattr(frames, name).answer_id != answer_id].reset_index(
            drop=True
        )
        for name in DETAIL_TABLES
    }
    answers = frames.answers[frames.answers.answer_id != answer_id].reset_index(drop=True)
    return dataclasses.replace(frames, answers=answers, **details)


def cold(kind: str, frames: StudyFrames, **kwargs) -> dict:
    """The analysis with every cache emptied first, on fresh frames (an empty memo)."""
    _memo.clear_caches()
    return ANALYSES[kind](dataclasses.replace(frames), **kwargs)


# --------------------------------------------------------------------------------------------
# Warm caches give the cold results
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_warm_caches_give_the_cold_result_and_after_a_change(frames, kind):
    first = cold(kind, frames, **SETTINGS)
    before = _memo.cache_stats()
    again = ANALYSES[kind](dataclasses.replace(frames), **SETTINGS)
    assert again == first
    # A second run finds what the first kept (every kind resamples: the weights at least, or,
    # for match and respond, whose groups' figures are kept whole, those figures).
    hits = {k: v["hits"] - before[k]["hits"] for k, v in _memo.cache_stats().items()}
    if kind in ("respond", "match"):
        assert hits["figures.kept_groups"] > 0
        assert hits["match.expected_deletions"] > 0
    else:
        assert hits["bootstrap.drawn_counts"] > 0
    if kind == "respond":
        assert hits["respond.tfidf_term_counts"] > 0 and hits["editing.draft_edits"] > 0
    if kind == "eppc":
        assert hits["eppc.span_tokens"] > 0
    if kind == "urgency":
        assert hits["urgency.inbox_scorer"] > 0
    # One answer of the kind taken back: the warm result is the cold one on the new frames,
    # and it changed (the caches did not hand back the old answer's figures).
    mine = frames.answers[frames.answers.kind == kind]
    changed = without_answer(frames, int(mine.answer_id.iloc[len(mine) // 2]))
    warm = ANALYSES[kind](changed, **SETTINGS)
    assert warm != first
    assert warm == cold(kind, changed, **SETTINGS)


def test_the_whole_report_is_the_same_with_caches_cleared_and_warm(frames):
    settings = {"seed": 7, "n_resamples": 40}
    _memo.clear_caches()
    cold_results = {kind: ANALYSES[kind](dataclasses.replace(frames), **settings) for kind in KINDS}
    warm_results = {kind: ANALYSES[kind](dataclasses.replace(frames), **settings) for kind in KINDS}
    assert warm_results == cold_results


# --------------------------------------------------------------------------------------------
# Never a stale value: other catalogs, other settings, other content under the same ids
# --------------------------------------------------------------------------------------------


def test_same_texts_under_another_catalog_are_composed_and_weighed_again(frames):
    themes = DEFAULT_CATALOGS.themes
    reordered = dataclasses.replace(DEFAULT_CATALOGS, themes=(*themes[-2::-1], themes[-1]))
    _memo.clear_caches()
    default = ANALYSES["respond"](dataclasses.replace(frames), **SETTINGS)
    warm = ANALYSES["respond"](dataclasses.replace(frames), **SETTINGS, catalogs=reordered)
    # The theme order changes the composed responses, hence the TF-IDF similarity.
    assert warm["similarity"] != default["similarity"]
    assert warm == cold("respond", frames, **SETTINGS, catalogs=reordered)


@pytest.mark.parametrize(("seed", "n_resamples"), [(2, 30), (3, 80), (3, 0)])
def test_other_bootstrap_settings_are_drawn_again(frames, seed, n_resamples):
    for kind in KINDS:  # warm every cache with the module's settings
        ANALYSES[kind](dataclasses.replace(frames), **SETTINGS)
    for kind in ("urgency", "match"):
        warm = ANALYSES[kind](dataclasses.replace(frames), seed=seed, n_resamples=n_resamples)
        assert warm == cold(kind, frames, seed=seed, n_resamples=n_resamples)


def test_the_same_draft_ids_with_other_texts_or_spans_are_segmented_again():
    # ED's key is the draft's text and the spans, never the draft's id: the same ids with
    # another text, or the same text with other spans, count their own leftovers.
    pairs = pd.DataFrame({"answer_id": [1, 2], "response_b_id": [7, 7]})
    text = "Rest today. Drink water. Call us tomorrow."
    spans = {1: ((0, 11),), 2: ((0, 11), (12, 24))}
    # Leftovers: " Drink water. Call us tomorrow." (2 sentences) and "  Call us tomorrow." (1).
    _memo.clear_caches()
    assert match._expected_deletions(pairs, spans, {7: text}).tolist() == [2, 1]
    other = "Rest today. Drink water. Call us tomorrow. Take your pills."
    assert match._expected_deletions(pairs, spans, {7: other}).tolist() == [3, 2]
    assert match._expected_deletions(pairs, {}, {7: text}).tolist() == [3, 3]
    assert match._expected_deletions(pairs, spans, {7: text}).tolist() == [2, 1]


def test_clear_caches_empties_every_cache(frames):
    ANALYSES["respond"](dataclasses.replace(frames), **SETTINGS)
    assert any(v["entries"] for v in _memo.cache_stats().values())
    _memo.clear_caches()
    assert all(v["entries"] == v["hits"] == v["misses"] == 0 for v in _memo.cache_stats().values())


# --------------------------------------------------------------------------------------------
# The cache itself
# --------------------------------------------------------------------------------------------


def test_memo_keeps_the_most_recently_used_within_its_bound():
    memo = _memo.Memo("test.lru", max_entries=3)
    memo.put_many([("a", 1), ("b", 2), ("c", 3)])
    assert memo.get("a") == 1  # now the most recently used
    memo.put("d", 4)  # drops b, the least recently used
    assert memo.get_many(["a", "b", "c", "d"], default=-1) == [1, -1, 3, 4]
    assert len(memo) == 3 and memo.hits == 4 and memo.misses == 1
    assert memo.get_or_make("e", lambda: 5) == 5 and memo.get("e") == 5
    memo.clear()
    assert len(memo) == 0 and memo.get("a") is None


def test_memo_of_arrays_keeps_within_its_bytes():
    memo = _memo.Memo("test.bytes", max_entries=10, max_bytes=100, size_of=lambda v: v.nbytes)
    memo.put("a", np.zeros(5))  # 40 bytes
    memo.put("b", np.zeros(5))  # 80
    memo.put("c", np.zeros(5))  # 120 > 100: a goes
    assert memo.get("a") is None and memo.nbytes == 80
    big = memo.put("d", np.zeros(20))  # 160 bytes: larger than the cache, returned, not kept
    assert big.shape == (20,) and memo.get("d") is None and memo.nbytes == 80
    memo.put("b", np.zeros(1))  # a new value for a key replaces the old one's bytes
    assert memo.nbytes == 48
    with pytest.raises(ValueError, match="at least one entry"):
        _memo.Memo("test.none", max_entries=0)
    with pytest.raises(ValueError, match="together"):
        _memo.Memo("test.half", max_entries=1, max_bytes=10)


# --------------------------------------------------------------------------------------------
# The faster routes equal the routes they replace
# --------------------------------------------------------------------------------------------


def _loop_weights(n_units: int, seed: int, n_resamples: int) -> np.ndarray:
    """The draws counted one resample at a time (the former implementation)."""
    drawn = np.random.default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))
    return np.stack([np.bincount(row, minlength=n_units) for row in drawn]).astype(np.float32)


@pytest.mark.parametrize(("n", "seed", "r"), [(1, 0, 5), (2, 3, 7), (263, 9, 333), (7000, 1, 9)])
def test_vectorised_weights_equal_one_bincount_per_resample(n, seed, r):
    _memo.clear_caches()
    expected = _loop_weights(n, seed, r)
    assert np.array_equal(_bootstrap.unit_weights(n, seed, r), expected)
    assert np.array_equal(_bootstrap.unit_major_weights(n, seed, r), expected.T)
    counts = _bootstrap.drawn_counts(n, seed, r)
    assert counts.dtype == np.uint8 and not counts.flags.writeable
    assert _bootstrap.drawn_counts(n, seed, r) is counts  # kept


def test_counts_too_large_for_a_byte_are_kept_as_float32():
    draws = np.zeros((2, 300), dtype=np.int32)  # every draw picks unit 0: a count of 300
    assert _bootstrap._count_draws(draws, np.uint8) is None
    wide = _bootstrap._count_draws(draws, np.float32)
    assert wide[:, 0].tolist() == [300.0, 300.0] and wide[:, 1:].sum() == 0


def test_small_and_large_groups_sum_the_same_weights():
    # A small group gathers its units' rows of the by-unit counts; a large one multiplies the
    # whole matrix: the same sums as bootstrap weights counted one resample at a time.
    resampler = _bootstrap.Resampler(range(400), seed=5, n_resamples=50)
    weights = _loop_weights(400, 5, 50).astype(float)
    values = np.arange(40, dtype=float).reshape(20, 2)
    small, large = np.arange(0, 400, 20), np.arange(200, 400)
    assert np.array_equal(resampler.resampled_sums(values, small), weights[:, small] @ values)
    big = np.ones((200, 1))
    assert np.array_equal(resampler.resampled_sums(big, large), weights[:, large] @ big)
    assert np.array_equal(resampler.drawn(small), weights[:, small].sum(axis=1))
    assert np.array_equal(resampler.drawn(large), weights[:, large].sum(axis=1))


TEXTS = [
    "Hello world hello",
    "Ünïcode ÀB ab ab Ab",
    "a b c",
    "",
    "   ",
    "x1 x1 y2 _z_ 3 44",
    "Café cafe CAFE",
    "Ο ΔΟΣ ΟΔΟΣ οδος",
    "world Hello",
    "tab\tsep\nnew line word word",
    "Cafe\u0301 nai\u0308ve cafe",  # decomposed accents: read as "Café naïve"
]


def _composed(texts: list[str]) -> list[str]:
    return [unicodedata.normalize("NFC", t) for t in texts]


def _same_matrix(texts: list[str]) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    expected = TfidfVectorizer().fit_transform(_composed(texts))
    got = respond.tfidf_matrix(texts)
    assert type(got) is type(expected) and got.shape == expected.shape
    for name in ("data", "indices", "indptr"):
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_cached_term_counts_give_scikit_learns_tfidf_matrix_bit_for_bit(monkeypatch):
    _memo.clear_caches()
    _same_matrix(TEXTS)  # cold
    _same_matrix(TEXTS[::-1])  # warm, another first-met order of the terms
    _same_matrix(TEXTS[2:] * 3)  # warm, repeated texts, another vocabulary and idf
    # Past the cap on terms the numbering restarts: the results stay the same.
    monkeypatch.setattr(respond, "_MAX_TERMS", 3)
    _same_matrix(TEXTS)
    _same_matrix(["fresh words only", "only fresh"])
    assert len(respond._TERMS) <= 3 + len({"fresh", "words", "only"})
    for blank in (["", " ", "a"], []):
        with pytest.raises(ValueError):
            respond.tfidf_matrix(blank)


def _term_counts_one_by_one(tokens: list[str]) -> bytes:
    """The reference for ``respond._term_counts_many``: one list counted in a plain loop."""
    seen: dict[int, int] = {}  # term id -> count, in the order the terms first occur
    for token in tokens:
        found = respond._TERM_IDS.get(token)
        if found is None:
            found = respond._TERM_IDS[token] = len(respond._TERMS)
            respond._TERMS.append(token)
        seen[found] = seen.get(found, 0) + 1
    return np.array([*seen, *seen.values()], dtype=np.int32).tobytes()


# Letters whose lower case leaves or enters ASCII (the Kelvin sign's is "k"; dotted I's is
# not ASCII), accents (a combining one too), Greek final sigma, CJK, Arabic, underscores, digits.
TOKEN_TEXT = st.text(
    alphabet=st.sampled_from(
        [*"aZ9_ -.,'!?\n\t", "é", "É", "ß", "İ", "\u212a", "Σ", "日", "ٹ", "\u0301"]
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(text=TOKEN_TEXT)
def test_the_ascii_token_pattern_gives_scikit_learns_tokens(text):
    from sklearn.feature_extraction.text import TfidfVectorizer

    analyze = TfidfVectorizer().build_analyzer()
    assert respond._default_tokens(text, analyze) == analyze(unicodedata.normalize("NFC", text))


@settings(max_examples=100, deadline=None)
@given(first=st.lists(TOKEN_TEXT, max_size=12), then=st.lists(TOKEN_TEXT, max_size=12))
@example(first=["aa bb aa", "bb Aa cc", "", "x"], then=["cc dd bb", "É_9 dd"])
def test_term_counts_counted_together_equal_counting_each_text_alone(first, then):
    """Two batches, the second meeting terms the first numbered: the same bytes and the same
    numbering as counting text by text."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    analyze = TfidfVectorizer().build_analyzer()
    results = []
    for together in (False, True):
        _memo.clear_caches()
        with respond._TERMS_LOCK:
            if together:
                got = [respond._term_counts_of(analyze, batch) for batch in (first, then)]
            else:
                # (text by text, each read in composed form as _term_counts_of reads it)
                got = [
                    [_term_counts_one_by_one(analyze(t)) for t in _composed(b)]
                    for b in (first, then)
                ]
            results.append((got, list(respond._TERMS)))
    assert results[0] == results[1]


def test_term_counts_kept_per_answer_give_the_same_matrix_and_not_after_a_restart():
    """respond.people_term_counts' rows (each text's term counts, made once per answer) give
    scikit-learn's matrix; after the term numbering restarts (the cache emptied) the kept
    counts name other terms and are made again instead."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    _memo.clear_caches()
    rows = respond._term_count_rows(pd.Series(TEXTS, index=range(len(TEXTS))))
    assert rows.blank.tolist() == [not t.strip() for t in TEXTS]
    present = [t for t in TEXTS if t.strip()]
    known = (rows.counts[~rows.blank].tolist(), rows.generation[~rows.blank].to_numpy())
    for restart in (False, True):
        if restart:
            _memo.clear_caches()
            respond.tfidf_matrix(["zebra quokka", "numbat"])  # new terms take the old ids
        got = respond.tfidf_matrix(present, known)
        expected = TfidfVectorizer().fit_transform(_composed(present))
        for name in ("data", "indices", "indptr"):
            assert np.array_equal(getattr(got, name), getattr(expected, name)), (restart, name)


def test_composed_texts_equal_compose_on_each_answer(frames):
    themes = [t.id for t in DEFAULT_CATALOGS.themes]
    answers = respond.respond_answers(frames)
    expected = respond._composed_one_by_one(answers, frames, themes)
    assert respond.composed_texts(answers, frames, themes).equals(expected)
    # Blank and padded boxes, a box saved twice (the last counts), a theme not in the catalog,
    # an answer without boxes, an edited draft: as compose() on the answer's dict of boxes.
    parts = pd.DataFrame(
        {
            "answer_id": [1, 1, 1, 1, 2, 2, 2, 4],
            "theme": [themes[1], themes[0], "retired", themes[1], themes[2], themes[0], themes[2],
                      themes[0]],
            "text": ["  late ", "first ", "gone", " later  ", "x", "   ", "", "kept"],
        }
    )  # fmt: skip
    answers = pd.DataFrame(
        {
            "answer_id": [1, 2, 3, 4],
            "mode": ["theme_guided", "theme_guided", "theme_guided", "edit_draft"],
            "final_text": [None, None, None, "  The edited reply. "],
        }
    )
    small = dataclasses.replace(frames, respond_parts=parts)
    got = respond.composed_texts(answers, small, themes).tolist()
    assert got == respond._composed_one_by_one(answers, small, themes).tolist()
    assert got == ["first later", "", "", "  The edited reply. "]
    boxes = {themes[1]: " later  ", themes[0]: "first "}
    assert got[0] == compose({"mode": "theme_guided", "parts": boxes}, themes)
    no_boxes = dataclasses.replace(frames, respond_parts=parts.iloc[:0])
    assert respond.composed_texts(answers, no_boxes, themes).tolist() == [
        "",
        "",
        "",
        "  The edited reply. ",
    ]


def test_source_labels_label_each_distinct_triple_by_the_rule():
    responses = pd.DataFrame(
        {
            "response_id": [1, 2, 3, 4, 5, 6],
            "source": [None, " x ", "", np.nan, " ", " x "],
            "author": ["a ", None, "", "b", np.nan, "z"],
            "author_kind": ["model", "clinician", "model", "model", "clinician", "model"],
        }
    )
    labels = _common.source_labels(responses)
    # source, else author, else the author kind (each stripped)
    assert labels.tolist() == ["a", "x", "model", "b", "clinician", "x"]
    assert labels.index.tolist() == [1, 2, 3, 4, 5, 6]
    mixed = responses.assign(author_kind=["model", None, np.nan, "x", "y", "z"])
    assert _common.source_labels(mixed).tolist() == ["a", "x", "nan", "b", "y", "x"]
    assert _common.source_labels(responses.iloc[:0]).tolist() == []


def test_theme_recall_counts_equal_the_merge_and_groupby(frames):
    def plain(decisions: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
        rows = decisions.merge(labels, on=["answer_id", "sentence_id"])
        rows = rows.assign(matched=rows.spans.map(len) > 0)
        return rows.groupby(["answer_id", "theme"]).matched.agg(["size", "sum"]).reset_index()

    decisions, labels = frames.match_decisions, frames.sentence_themes
    assert len(decisions) and len(labels)
    for d, t in ((decisions, labels), (decisions.iloc[::2], labels), (decisions.iloc[:0], labels)):
        pd.testing.assert_frame_equal(match._recall_counts(d, t), plain(d, t))
    # Ids too large for the one-integer key take the merge itself.
    big = decisions.assign(sentence_id=decisions.sentence_id + 2**31)
    big_labels = labels.assign(sentence_id=labels.sentence_id + 2**31)
    pd.testing.assert_frame_equal(match._recall_counts(big, big_labels), plain(big, big_labels))
    twice = pd.concat([decisions, decisions.iloc[:5]])  # a decision listed twice: the merge
    pd.testing.assert_frame_equal(match._recall_counts(twice, labels), plain(twice, labels))


def test_theme_presence_equals_the_merge_and_groupby(frames):
    def plain(answers: pd.DataFrame) -> pd.DataFrame:
        labels = frames.sentence_themes[frames.sentence_themes.answer_id.isin(answers.answer_id)]
        owner = frames.sentences.set_index("sentence_id").response_id
        labels = labels.assign(owner=labels.sentence_id.map(owner))
        sides = answers.set_index("answer_id")[["response_id", "response_b_id"]]
        labels = labels.join(sides, on="answer_id")
        labels = labels.assign(
            in_ref=labels.owner == labels.response_id,
            in_draft=labels.owner == labels.response_b_id,
        )
        flags = labels.groupby(["answer_id", "theme"])[["in_ref", "in_draft"]].any()
        return flags.reset_index()

    answers = _common.humans(_common.people(frames, "match"))
    for some in (answers, answers.iloc[::3], answers.iloc[:0]):
        got = match.theme_presence(some, frames)
        pd.testing.assert_frame_equal(got, plain(some))
    assert got.empty and match.theme_presence(answers, frames).in_ref.any()


def test_eppc_batch_sums_and_pair_ids_equal_the_plain_routes(frames):
    from portalreview.analysis import eppc

    rng = np.random.default_rng(3)
    units = pd.Index([10, 11, 12, 13, 14], name="unit_id")
    info = pd.DataFrame(
        {"unit_set": ["s", "s", "t", "s", "t"], "label": ["#1", "#2", "#1", "#1", "#1"]},
        index=pd.Index([13, 10, 12, 11, 14], name="unit_id"),
    )
    blocks = {"n11": rng.integers(0, 2, (5, 3)).astype(float), "n00": np.ones((5, 3))}
    layout = eppc.BatchLayout.of(info, units)
    keys, sizes, sums = layout.keys, layout.sizes, layout.sums(blocks)
    assert keys == [("s", "#1"), ("s", "#2"), ("t", "#1")] and sizes.tolist() == [2, 1, 2]
    rows = units.get_indexer(info.index)
    for name, block in blocks.items():  # np.add.at, one unit at a time
        expected = np.zeros((3, 3))
        np.add.at(expected, [0, 1, 2, 0, 2], block[rows])
        assert np.array_equal(sums[name], expected)
    answers = _common.people(frames, "eppc")
    codes = [c.id for c in DEFAULT_CATALOGS.eppc_codes]
    labels = eppc.label_rows(answers, frames, codes)
    plain, _ = pd.factorize(labels.code.astype(str) + "\x1f" + labels.subcode)
    assert len(labels) and np.array_equal(labels.pair_id.to_numpy(), plain)


def test_eppc_label_sets_compared_as_masks_or_as_sorted_keys_agree(frames, monkeypatch):
    from portalreview.analysis import eppc

    as_masks = ANALYSES["eppc"](dataclasses.replace(frames), **SETTINGS)
    monkeypatch.setattr(eppc, "_MAX_MASK", 0)  # every comparison on sorted keys
    assert ANALYSES["eppc"](dataclasses.replace(frames), **SETTINGS) == as_masks
    assert as_masks["vs_gold"] and as_masks["between_annotators"]


def test_jsonable_numpy_scalars():
    values = [np.float64(1.5), np.float64("nan"), np.float64("-inf"), np.int64(3), np.float32(2.5)]
    out = _common.jsonable(values)
    assert out == [1.5, None, None, 3, 2.5]
    assert [type(v) for v in out] == [float, type(None), type(None), int, float]


def test_judge_agreement_merges_a_side_with_several_spans():
    # Reference vs judged spans per sentence; exact = the same merged spans, overlap = a
    # character in common (touching or overlapping spans merge: (0,5)+(5,9) is (0,9)).
    cases = [
        (((0, 5), (5, 9)), ((0, 9),), True, True),  # several merging into one = one
        (((0, 9),), ((0, 4), (3, 9)), True, True),
        (((0, 5), (7, 9)), ((0, 5), (7, 9)), True, True),
        (((0, 5), (7, 9)), ((0, 5),), False, True),
        (((0, 3),), ((3, 6),), False, False),  # touching is no common character
        (((0, 3),), ((2, 6),), False, True),
        ((), ((2, 6),), False, False),
        (((1, 2), (4, 5)), ((2, 4),), False, False),
    ]

    def side(k: int) -> pd.DataFrame:
        decided = pd.DataFrame(
            {
                "unit_id": 1,
                "sentence_id": range(len(cases)),
                "spans": pd.Series([c[k] for c in cases], dtype=object),
            }
        )
        return decided.assign(**match._span_arrays(decided.spans.tolist()))

    rows, other_way = match._agreement_pair(side(0), side(1))
    assert rows.exact.tolist() == [c[2] for c in cases]
    assert rows.overlap.tolist() == [c[3] for c in cases]
    assert rows.ref_match.tolist() == [bool(c[0]) for c in cases]
    # The other direction: the same exact / overlap, the other side as the reference.
    assert other_way.exact.tolist() == [c[2] for c in cases]
    assert other_way.overlap.tolist() == [c[3] for c in cases]
    assert other_way.ref_match.tolist() == [bool(c[1]) for c in cases]


def test_answers_of_kind_are_the_rows_of_the_kind(frames):
    fresh = dataclasses.replace(frames)
    for kind in (*KINDS, "no such kind"):
        expected = frames.answers[frames.answers.kind == kind]
        got = _common.answers_of_kind(fresh, kind)
        pd.testing.assert_frame_equal(got, expected)
        assert _common.answers_of_kind(fresh, kind) is got  # once per frames


def test_records_are_jsonable_rows():
    frame = pd.DataFrame(
        {
            "n": [1, 2, 3],
            "x": [1.5, np.nan, np.inf],
            "name": pd.array(["a", None, "c"], dtype="str"),
            "nullable": pd.array([1.0, None, 2.0], dtype="Float64"),
            "mixed": [np.float32(1.5), None, "q"],
            "flag": [True, False, True],
        }
    )
    rows = _common.records(frame)
    expected = [
        {k: _common.jsonable(v) for k, v in zip(frame.columns, row, strict=True)}
        for row in frame.itertuples(index=False)
    ]
    assert rows == expected
    assert rows[1] == {"n": 2, "x": None, "name": None, "nullable": None, "mixed": None,
                       "flag": False}  # fmt: skip
    assert isinstance(rows, _common.JsonRows) and type(rows[0]["mixed"]) is float


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n1)-\"'Dr")), max_size=60))
def test_sentence_texts_are_the_texts_of_split_sentences(text):
    assert sentence_texts(text) == [span.text for span in split_sentences(text)]


def test_with_active_seconds_attaches_a_checked_time():
    edits = draft_edits("Take it twice a day.", "Take it once a day.")
    assert with_active_seconds(edits, 12) == draft_edits(
        "Take it twice a day.", "Take it once a day.", 12
    )
    for bad in (-1.0, float("nan"), True, "3"):
        with pytest.raises(ValueError, match="active_seconds"):
            with_active_seconds(edits, bad)
