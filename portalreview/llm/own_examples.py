"""A clinician's own earlier replies as examples for the model (issue 19, part 2).

Seed 000 (Section 4.1.2) drafted with 5-shot retrieval-augmented prompts, the examples drawn
from other conversations. Here the examples are the clinician's *own* submitted replies to the
messages most like the one at hand, so that the draft leans toward how this clinician writes:
which themes they cover, how long, in what tone. Similarity is TF-IDF cosine between the
messages (``metrics.tfidf_cosine_matrix``, what the report already uses; no network, no
embedding model), fitted on the message at hand and the clinician's earlier ones.

It is opt-in per study (:meth:`StudyService.set_own_examples`, PI only, audited): the number of
examples, 0 for off (the default). A suggestion made with examples is the clinician's alone
(``suggestions.for_annotator_id``): its recorded prompt holds their replies, so no one else is
offered it or, on a server, can read it; its parameters name the answers used and their
similarity (``own_examples``). :func:`compare_drafts` measures what the examples change:
content-level Edit-F1 (seed 000, Section 3.1, Algorithm 1) of drafts made with and without them
against the clinician's own reply, the model itself as the content-match judge.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, select

from portalreview.store.kinds.respond import compose
from portalreview.store.models import Answer, Case, RespondAnswer, RespondPart, Unit
from portalreview.store.service import AccessError, StudyService

#: The examples' heading inside the prompt (the template's ``{{examples}}``).
NONE_YET = "(none yet)"


@dataclass(frozen=True)
class OwnReply:
    """One submitted reply of a clinician: the case's message and what they sent."""

    answer_id: int
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
                Answer.id, Unit.case_id, Case.message, RespondAnswer.mode, RespondAnswer.final_text
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
    for answer_id, case_id, message, mode, final_text in rows:
        payload = {"mode": mode, "final_text": final_text, "parts": parts.get(answer_id, {})}
        reply = compose(payload, theme_order).strip()
        if reply:
            out.append(OwnReply(answer_id, case_id, message, reply))
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
    from portalreview.metrics.agreement import tfidf_cosine_matrix

    similarity = tfidf_cosine_matrix([message, *(r.message for r in candidates)])[0, 1:]
    ranked = sorted(
        (
            (float(value), index)
            for index, value in enumerate(similarity)
            if value == value and value > 0  # (NaN: a message without a word)
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
