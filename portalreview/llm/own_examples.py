"""A clinician's own earlier replies as examples for the model (issue 19, part 2).

Seed 000 (Section 4.1.2) drafted with 5-shot retrieval-augmented prompts, the examples drawn
from other conversations. Here the examples are the clinician's *own* submitted replies to the
messages most like the one at hand, so that the draft leans toward how this clinician writes:
which themes they cover, how long, in what tone. Similarity is TF-IDF cosine between the
messages (row 0 of ``metrics.tfidf_cosine_matrix``, what the report already uses, computed
alone: ``tfidf_cosine_to_first``; no network, no embedding model), fitted on the message at
hand and the clinician's earlier ones.

It is opt-in per study (:meth:`StudyService.set_own_examples`, PI only, audited): the number of
examples, 0 for off (the default). A suggestion made with examples is the clinician's alone
(``suggestions.for_annotator_id``): its recorded prompt holds their replies, so no one else is
offered it or, on a server, can read it; its parameters name the answers used and their
similarity (``own_examples``). :func:`compare_drafts` measures what the examples change:
content-level Edit-F1 (seed 000, Section 3.1, Algorithm 1) of drafts made with and without them
against the clinician's own reply, the model itself as the content-match judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from sqlalchemy import and_, select

from portalreview.llm.errors import LlmError, ModelProcessDied, ModelServerError
from portalreview.store.kinds.respond import compose
from portalreview.store.models import Answer, Case, RespondAnswer, RespondPart, Unit
from portalreview.store.service import AccessError, StudyService

#: The template's ``{{examples}}`` when there is none (a suggestion then uses respond_boxes).
NONE_YET = "(none yet)"


@dataclass(frozen=True)
class OwnReply:
    """One submitted reply of a clinician: the case's message and what they sent."""

    answer_id: int
    unit_id: int
    case_id: int
    message: str
    reply: str


@dataclass(frozen=True)
class OwnExample:
    reply: OwnReply
    similarity: float

    def provenance(self) -> dict:
        return {
            "answer_id": self.reply.answer_id,
            "case_id": self.reply.case_id,
            "similarity": round(self.similarity, 4),
        }


def own_replies(service: StudyService, annotator_id: int) -> list[OwnReply]:
    """The clinician's submitted respond answers (not gold) with a non-empty reply, oldest
    first. Only they, the PI and the system may read them."""
    viewer = service.viewer
    if not viewer.sees_all and viewer.annotator_id != annotator_id:
        raise AccessError("a clinician's replies are theirs to use")
    theme_order = [t.id for t in service.catalogs.themes]
    with service.project.read() as s:
        rows = s.execute(
            select(
                Answer.id,
                Unit.id,
                Unit.case_id,
                Case.message,
                RespondAnswer.mode,
                RespondAnswer.final_text,
            )
            .join(Unit, Unit.id == Answer.unit_id)
            .join(Case, Case.id == Unit.case_id)
            .join(RespondAnswer, RespondAnswer.answer_id == Answer.id)
            .where(
                and_(
                    Answer.annotator_id == annotator_id,
                    Answer.kind == "respond",
                    Answer.status == "submitted",
                    Answer.is_gold.is_(False),
                )
            )
            .order_by(Answer.id)
        ).all()
        parts: dict[int, dict[str, str]] = {}
        ids = [row[0] for row in rows]
        for answer_id, theme, text in s.execute(
            select(RespondPart.answer_id, RespondPart.theme_id, RespondPart.text).where(
                RespondPart.answer_id.in_(ids)
            )
        ):
            parts.setdefault(answer_id, {})[theme] = text
    out = []
    for answer_id, unit_id, case_id, message, mode, final_text in rows:
        payload = {"mode": mode, "final_text": final_text, "parts": parts.get(answer_id, {})}
        reply = compose(payload, theme_order).strip()
        if reply:
            out.append(OwnReply(answer_id, unit_id, case_id, message, reply))
    return out


def most_similar(
    message: str, replies: list[OwnReply], count: int, exclude_case: int | None = None
) -> list[OwnExample]:
    """The ``count`` replies whose messages are most like ``message`` (TF-IDF cosine, highest
    first, earlier answers first on ties), leaving out the case at hand and any of no
    similarity at all."""
    candidates = [r for r in replies if r.case_id != exclude_case]
    if count <= 0 or not candidates:
        return []
    from portalreview.metrics.agreement import tfidf_cosine_to_first

    similarity = tfidf_cosine_to_first([message, *(r.message for r in candidates)])[1:]
    ranked = sorted(
        (
            (float(value), index)
            for index, value in enumerate(similarity)
            if value > 0  # (NaN, a message without a word, is not)
        ),
        key=lambda pair: (-pair[0], pair[1]),
    )
    return [OwnExample(candidates[i], value) for value, i in ranked[:count]]


def examples_text(examples: list[OwnExample]) -> str:
    """The examples as the template's ``{{examples}}`` shows them."""
    if not examples:
        return NONE_YET
    blocks = [
        f"Example {n}\nMessage: {e.reply.message.strip()}\nYour reply: {e.reply.reply}"
        for n, e in enumerate(examples, start=1)
    ]
    return "\n\n".join(blocks)


def examples_for(
    service: StudyService, annotator_id: int, message: str, case_id: int | None
) -> list[OwnExample]:
    """The study's number of examples (none when off) from the clinician's own replies."""
    count = service.own_examples()
    if count == 0:
        return []
    return most_similar(message, own_replies(service, annotator_id), count, case_id)


def describe_count(n: int) -> str:
    """What the suggestion banner adds: how many of the person's replies the model saw."""
    return f"with your {n} most similar earlier repl{'y' if n == 1 else 'ies'} as examples"


# --- what the examples change, measured ------------------------------------------------------


@dataclass(frozen=True)
class DraftScore:
    """One held-out reply: the content-level counts of the draft made without examples and of
    the one made with the clinician's own (seed 000, Algorithm 1: EM, EA, ED)."""

    annotator: str
    answer_id: int
    case_id: int
    n_examples: int
    without: tuple[int, int, int]
    with_examples: tuple[int, int, int]
    refused: tuple[bool, bool]  # whether the quality gates refuse each draft


@dataclass
class DraftComparison:
    scores: list[DraftScore]
    skipped: dict[str, int]  # clinician -> replies with no similar earlier reply to show
    examples: int
    cancelled: bool = False
    failed: dict[int, str] = field(default_factory=dict)  # held-out answer -> why (no draft)

    def figures(self, n_resamples: int = 1000, seed: int = 0) -> dict:
        """Micro content Edit-F1 without and with examples and their difference, each with a
        percentile bootstrap interval over the held-out replies (``metrics.bootstrap_ci``)."""
        from portalreview.metrics.bootstrap import bootstrap_ci
        from portalreview.metrics.edit_f1 import edit_f1_from_counts

        def f1(rows: list[DraftScore], side: str) -> float:
            counts = np.array([getattr(r, side) for r in rows]).sum(axis=0)
            return edit_f1_from_counts(*(int(c) for c in counts)).f1

        out: dict = {
            "n_replies": len(self.scores),
            "examples": self.examples,
            "refused_by_gates": {
                "without": sum(r.refused[0] for r in self.scores),
                "with": sum(r.refused[1] for r in self.scores),
            },
        }
        if not self.scores:
            return out
        statistics = {
            "without": lambda rows: f1(rows, "without"),
            "with": lambda rows: f1(rows, "with_examples"),
            "difference": lambda rows: f1(rows, "with_examples") - f1(rows, "without"),
        }
        for name, statistic in statistics.items():
            value = statistic(self.scores)
            interval = (
                bootstrap_ci(self.scores, statistic, n_resamples, seed)
                if len(self.scores) > 1
                else None
            )
            out[name] = {"f1": value, "ci": interval}
        return out


def compare_drafts(
    service: StudyService,
    engine,
    library,
    *,
    examples: int = 3,
    limit: int | None = None,
    params=None,
    limits=None,
    cancel=None,
    progress=None,
) -> DraftComparison:
    """Leave one reply out at a time: for each clinician's submitted reply (at most ``limit``
    per clinician), draft the reply form for its message without examples and with the
    clinician's ``examples`` most similar *other* replies, and count each draft's content
    matches against the held-out reply with the model as the content-level judge (seed 000,
    Section 3.1 and Algorithm 1; the ``content_match`` template, as match suggestions do).
    ``progress(done, total)`` after each reply. Nothing is stored."""
    from portalreview.llm import suggest as sg

    people = [a for a in service.annotators() if not a.is_model]
    plan = []
    skipped: dict[str, int] = {}
    for person in people:
        replies = own_replies(service, person.id)
        for held_out in replies[: limit if limit else None]:
            chosen = most_similar(held_out.message, replies, examples, held_out.case_id)
            if chosen:
                plan.append((person.name, held_out, chosen))
            else:
                skipped[person.name] = skipped.get(person.name, 0) + 1
    comparison = DraftComparison([], skipped, examples)
    base = sg.SuggestContext(
        engine,
        service.catalogs,
        {
            **sg.resolve_templates(library, "respond"),
            **sg.resolve_templates(library, "respond", own_examples=True),
            "content_match": library.template("content_match"),
        },
        **({"params": params} if params is not None else {}),
        **({"limits": limits} if limits is not None else {}),
        cancel=cancel,
    )
    for done, (name, held_out, chosen) in enumerate(plan):
        unit = service.read_unit(held_out.unit_id)
        try:
            plain = _draft_counts(base, service, unit, held_out.reply, ())
            personal = _draft_counts(base, service, unit, held_out.reply, tuple(chosen))
        except sg.Cancelled:
            comparison.cancelled = True
            break
        except (ModelProcessDied, ModelServerError):  # the model is gone: nothing more to do
            raise
        except LlmError as exc:  # an answer that did not fit: this reply is not compared
            comparison.failed[held_out.answer_id] = str(exc)
        else:
            comparison.scores.append(
                DraftScore(
                    name,
                    held_out.answer_id,
                    held_out.case_id,
                    len(chosen),
                    plain[0],
                    personal[0],
                    (plain[1], personal[1]),
                )
            )
        if progress is not None:
            progress(done + 1, len(plan))
    return comparison


def _draft_counts(
    base, service: StudyService, unit, reply: str, chosen: tuple[OwnExample, ...]
) -> tuple[tuple[int, int, int], bool]:
    """(EM, EA, ED) of one draft for ``unit`` against the held-out ``reply``, and whether the
    quality gates refuse the draft."""
    from portalreview.domain.segmenter import split_sentences
    from portalreview.llm import gates
    from portalreview.llm import suggest as sg
    from portalreview.metrics.edit_f1 import content_edit_f1

    keep = "respond_own_examples" if chosen else "respond_boxes"
    templates = {k: v for k, v in base.templates.items() if k in (keep, "content_match")}
    ctx = replace(base, templates=templates, own_examples=chosen)
    payload, _ = sg.suggest_respond(ctx, unit)
    draft = compose(payload, [t.id for t in service.catalogs.themes])
    refused = (
        gates.check(
            "respond", payload, gates.unit_texts(unit), service.catalogs, templates[keep].text
        )
        is not None
    )
    spans = sg.content_matches(ctx, draft, [s.text for s in split_sentences(reply)])
    result = content_edit_f1(draft, [found or None for found in spans])  # None: NO MATCH
    return (result.em, result.ea, result.ed), refused
