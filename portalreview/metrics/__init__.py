"""Pure metric functions of the study (no Qt, no SQLAlchemy, no I/O).

Each function names, in its docstring, the paper and section it implements and the conventions
it chooses. Modules: :mod:`.edit_f1` (seed 000 Edit-F1), :mod:`.editing` (measured word-level
edits of a draft, the observed side of seed 000's editing load), :mod:`.agreement` (agreement
coefficients and judge agreement), :mod:`.ranking` (seed 001 MedAlign), :mod:`.urgency`
(seed 002 PMR-Bench), :mod:`.eppc` (seed 003 EPPCMinerBen), :mod:`.facts` (seed 004
MedFactChecking), :mod:`.bootstrap` (confidence intervals).

The package imports its modules lazily (PEP 562): ``import portalreview.metrics.edit_f1``
loads only what that module needs (no scipy, scikit-learn or pandas), and a name taken from
the package (``portalreview.metrics.cohen_kappa``) imports its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from portalreview.metrics.agreement import (
        JudgeAgreement,
        cohen_kappa,
        judge_agreement,
        kappa_per_batch,
        krippendorff_alpha,
        percent_agreement,
        rater_cosine_similarity,
        tfidf_cosine_matrix,
        tfidf_cosine_to_first,
        theme_inclusion_agreement,
    )
    from portalreview.metrics.bootstrap import bootstrap_ci
    from portalreview.metrics.edit_f1 import (
        EditF1Result,
        EditingLoad,
        ThemeF1Result,
        content_edit_f1,
        count_expected_deletions,
        edit_f1_from_counts,
        editing_load,
        locate_span,
        micro_edit_f1,
        per_theme_content_recall,
        per_theme_edit_f1,
        theme_edit_f1,
        theme_proportions,
        unmatched_draft_text,
    )
    from portalreview.metrics.editing import (
        DraftEdits,
        draft_edits,
        lcs_length,
        left_unchanged,
        with_active_seconds,
        word_tokens,
    )
    from portalreview.metrics.eppc import (
        PRF,
        SpanPRF,
        code_subcode_prf,
        micro_prf,
        per_label_prf,
        span_prf,
        span_tokens,
        spans_match,
        token_jaccard,
    )
    from portalreview.metrics.facts import (
        FactFlow,
        FactScores,
        MacroFactScores,
        fact_flow,
        fact_scores,
        fact_scores_from_counts,
        macro_fact_scores,
        micro_fact_scores,
    )
    from portalreview.metrics.ranking import (
        CorrelationSummary,
        average_win_rate,
        correctness_rank_correlation,
        criteria_counts,
        mean_rank,
        metric_kendall_tau,
        percent_correct,
        rater_kendall_tau,
        win_rate_matrix,
    )
    from portalreview.metrics.urgency import (
        DEFAULT_RELEVANCE,
        ExpectedScore,
        difficulty,
        expected_t_ndcg_at_k,
        margin_weighted_scores,
        ndcg_at_k,
        pairwise_accuracy,
        relevance_from_levels,
        sort_by_score,
        t_ndcg_at_k,
        win_rate_scores,
    )

#: public name -> the module of this package that defines it
_SUBMODULE_OF: dict[str, str] = {
    "JudgeAgreement": "agreement",
    "cohen_kappa": "agreement",
    "judge_agreement": "agreement",
    "kappa_per_batch": "agreement",
    "krippendorff_alpha": "agreement",
    "percent_agreement": "agreement",
    "rater_cosine_similarity": "agreement",
    "tfidf_cosine_matrix": "agreement",
    "tfidf_cosine_to_first": "agreement",
    "theme_inclusion_agreement": "agreement",
    "bootstrap_ci": "bootstrap",
    "EditF1Result": "edit_f1",
    "EditingLoad": "edit_f1",
    "ThemeF1Result": "edit_f1",
    "content_edit_f1": "edit_f1",
    "count_expected_deletions": "edit_f1",
    "edit_f1_from_counts": "edit_f1",
    "editing_load": "edit_f1",
    "locate_span": "edit_f1",
    "micro_edit_f1": "edit_f1",
    "per_theme_content_recall": "edit_f1",
    "per_theme_edit_f1": "edit_f1",
    "theme_edit_f1": "edit_f1",
    "theme_proportions": "edit_f1",
    "unmatched_draft_text": "edit_f1",
    "DraftEdits": "editing",
    "draft_edits": "editing",
    "lcs_length": "editing",
    "left_unchanged": "editing",
    "with_active_seconds": "editing",
    "word_tokens": "editing",
    "PRF": "eppc",
    "SpanPRF": "eppc",
    "code_subcode_prf": "eppc",
    "micro_prf": "eppc",
    "per_label_prf": "eppc",
    "span_prf": "eppc",
    "span_tokens": "eppc",
    "spans_match": "eppc",
    "token_jaccard": "eppc",
    "FactFlow": "facts",
    "FactScores": "facts",
    "MacroFactScores": "facts",
    "fact_flow": "facts",
    "fact_scores": "facts",
    "fact_scores_from_counts": "facts",
    "macro_fact_scores": "facts",
    "micro_fact_scores": "facts",
    "CorrelationSummary": "ranking",
    "average_win_rate": "ranking",
    "correctness_rank_correlation": "ranking",
    "criteria_counts": "ranking",
    "mean_rank": "ranking",
    "metric_kendall_tau": "ranking",
    "percent_correct": "ranking",
    "rater_kendall_tau": "ranking",
    "win_rate_matrix": "ranking",
    "DEFAULT_RELEVANCE": "urgency",
    "ExpectedScore": "urgency",
    "difficulty": "urgency",
    "expected_t_ndcg_at_k": "urgency",
    "margin_weighted_scores": "urgency",
    "ndcg_at_k": "urgency",
    "pairwise_accuracy": "urgency",
    "relevance_from_levels": "urgency",
    "sort_by_score": "urgency",
    "t_ndcg_at_k": "urgency",
    "win_rate_scores": "urgency",
}

__all__ = [
    "DEFAULT_RELEVANCE",
    "PRF",
    "CorrelationSummary",
    "DraftEdits",
    "EditF1Result",
    "EditingLoad",
    "ExpectedScore",
    "FactFlow",
    "FactScores",
    "JudgeAgreement",
    "MacroFactScores",
    "SpanPRF",
    "ThemeF1Result",
    "average_win_rate",
    "bootstrap_ci",
    "code_subcode_prf",
    "cohen_kappa",
    "content_edit_f1",
    "correctness_rank_correlation",
    "count_expected_deletions",
    "criteria_counts",
    "difficulty",
    "draft_edits",
    "edit_f1_from_counts",
    "editing_load",
    "expected_t_ndcg_at_k",
    "fact_flow",
    "fact_scores",
    "fact_scores_from_counts",
    "judge_agreement",
    "kappa_per_batch",
    "krippendorff_alpha",
    "lcs_length",
    "left_unchanged",
    "locate_span",
    "macro_fact_scores",
    "margin_weighted_scores",
    "mean_rank",
    "metric_kendall_tau",
    "micro_edit_f1",
    "micro_fact_scores",
    "micro_prf",
    "ndcg_at_k",
    "pairwise_accuracy",
    "per_label_prf",
    "per_theme_content_recall",
    "per_theme_edit_f1",
    "percent_agreement",
    "percent_correct",
    "rater_cosine_similarity",
    "rater_kendall_tau",
    "relevance_from_levels",
    "sort_by_score",
    "span_prf",
    "span_tokens",
    "spans_match",
    "t_ndcg_at_k",
    "tfidf_cosine_matrix",
    "tfidf_cosine_to_first",
    "theme_edit_f1",
    "theme_inclusion_agreement",
    "theme_proportions",
    "token_jaccard",
    "unmatched_draft_text",
    "win_rate_matrix",
    "win_rate_scores",
    "with_active_seconds",
    "word_tokens",
]


def __getattr__(name: str) -> Any:
    module = _SUBMODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
