"""Study set-up for the PI: unit sets made from the project's cases, and units handed out to
annotators with a chosen overlap, balanced and reproducible from a seed.

No Qt here: the dashboard calls these functions from a worker thread and passes
``progress(done, total)`` and ``cancel() -> bool``; a cancelled call raises :class:`Cancelled`
and saves nothing (each call is one transaction).

Making a unit set takes two steps, so that a screen can show what will be made first:

>>> plan = plan_units(project, "urgency", inbox="inbox-1")        # doctest: +SKIP
>>> created = create_unit_set(project, plan)                        # doctest: +SKIP

and handing it out too:

>>> plan = plan_assignment(project, created.name, ["ava", "ben", "cy"], overlap=40, seed=7)
>>> assign_units(project, plan)                                     # doctest: +SKIP

Recipes (``RECIPES``), one per kind of unit the papers use:

* ``respond``: one unit per case (seed 000, theme-guided writing);
* ``rank``: one rank set per case holding its drafts (``first``; default every model
  response), cases with fewer than two left out (seed 001);
* ``match``: every reference (``first``; default clinicians' responses) x draft (``second``;
  default model responses) pair of one case (seed 000, Algorithm 1);
* ``iap``: match units for every ordered pair of two clinicians' responses to one case
  (``first``; default clinicians' theme-guided responses; seed 000 App. E.2);
* ``urgency``: every pair of the cases of an inbox (cases tagged ``inbox=<name>``; seed 002);
* ``adaptive-inbox``: the same pairs, of which each clinician judges only ``judgements``
  (default n log2 n), each next pair chosen from their answers so far (``store/adaptive.py``);
  handed out whole to every clinician named;
* ``eppc``: every sentence of the cases' messages, and of the responses ``first`` selects
  (seed 003);
* ``empathy`` and ``facts``: every (``first``, ``second``) pair of responses to one case
  (default: real-time replies x empathy edits; seed 004).

A hand-out never gives a person a rank set, empathy or facts pair holding a response they
wrote (seed 001 Sec. 5; :mod:`~portalreview.store.own_responses`): the plan says how many units
were kept from whom, and which go to fewer people than asked.

An urgency or empathy pair is saved with its sides (which case or response is stored first)
drawn at random, so that the stored order does not tell the more urgent patient or the edited
reply (:func:`_sides_drawn`).

Every set made and every hand-out is recorded in the audit log (actions ``setup`` and
``assign``).
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import shlex
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session, aliased

from portalreview.store.adaptive import (
    AdaptiveSetting,
    adaptive_settings,
    default_judgements,
    meta_key,
)
from portalreview.store.kinds.base import plain_rows
from portalreview.store.models import (
    AUTHOR_KINDS,
    PRODUCTIONS,
    Annotator,
    Answer,
    Assignment,
    Case,
    CaseTag,
    ProjectMeta,
    RankMember,
    Response,
    Sentence,
    Unit,
    UnitSet,
    UrgencyAnswer,
)
from portalreview.store.own_responses import own_units, response_authors
from portalreview.store.project import Project
from portalreview.store.service import (
    StoreError,
    StudyService,
    find_annotator,
    own_answer,
    person_name,
)

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]

RECIPES = (
    "respond",
    "rank",
    "match",
    "iap",
    "urgency",
    "adaptive-inbox",
    "eppc",
    "empathy",
    "facts",
)
RECIPE_KIND = {
    recipe: {"iap": "match", "adaptive-inbox": "urgency"}.get(recipe, recipe) for recipe in RECIPES
}


class Cancelled(Exception):
    """The person cancelled long work; nothing was saved."""


class SetupError(StoreError):
    """A set-up request the project refuses; the message says what to change."""


class Steps:
    """Progress reporting and cancelling for one long call."""

    def __init__(self, total: int, progress: ProgressFn | None, cancel: CancelFn | None):
        self.total = max(int(total), 0)
        self.done = 0
        self._progress = progress
        self._cancel = cancel
        self._every = max(1, self.total // 200)  # about 200 updates at most

    def check(self) -> None:
        if self._cancel is not None and self._cancel():
            raise Cancelled("cancelled: nothing was saved")

    def step(self, n: int = 1) -> None:
        self.done += n
        if self._progress is not None and (self.done % self._every == 0 or self.done >= self.total):
            self._progress(min(self.done, self.total), self.total)
        if self.done % self._every == 0:
            self.check()

    def start(self) -> None:
        self.check()
        if self._progress is not None:
            self._progress(0, self.total)

    def finish(self) -> None:
        if self._progress is not None and self.done < self.total:
            self._progress(self.total, self.total)


class EventRecorder(StudyService):
    """The system viewer's service, able to write a study-level event to the audit log, naming
    ``by`` (an annotator id: the PI who did it in the app) or, by default, the system.

    (Suggestion for ``service.py``: a public ``record_event(action, details, session)`` would
    let this and the importers' ``record_import`` go.)"""

    def __init__(self, project: Project, by: int | None = None) -> None:
        super().__init__(project)
        self.by = by

    @property
    def _audit_actor_id(self) -> int | None:
        return self.by

    def record(self, session: Session, action: str, details: dict[str, Any]) -> None:
        self._audit(session, action, None, None, None, details)


# --- what to pick ------------------------------------------------------------------------------


def _split_values(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


@dataclass(frozen=True)
class ResponseFilter:
    """Which responses a recipe uses; an empty field does not filter. Values in one field are
    alternatives (``author_kind in {...}``), fields combine with *and*."""

    author_kinds: tuple[str, ...] = ()
    productions: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()

    _KEYS: ClassVar[dict[str, str]] = {
        "author_kind": "author_kinds",
        "production": "productions",
        "source": "sources",
        "author": "authors",
    }

    @classmethod
    def parse(cls, items: Iterable[str]) -> ResponseFilter:
        """From ``["author_kind=model", "production=zero_shot,thematic_prompt"]``."""
        values: dict[str, tuple[str, ...]] = {}
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in cls._KEYS or not value.strip():
                raise SetupError(
                    f"cannot read the response filter {item!r}: write KEY=VALUE[,VALUE...] "
                    f"with KEY one of {', '.join(cls._KEYS)}"
                )
            name = cls._KEYS[key]
            values[name] = values.get(name, ()) + _split_values(value)
        made = cls(**values)
        made.validate()
        return made

    def validate(self) -> None:
        bad = [k for k in self.author_kinds if k not in AUTHOR_KINDS]
        if bad:
            raise SetupError(
                f"unknown author kind {bad[0]!r}; the kinds are {', '.join(AUTHOR_KINDS)}"
            )
        bad = [p for p in self.productions if p not in PRODUCTIONS]
        if bad:
            raise SetupError(
                f"unknown production {bad[0]!r}; the productions are {', '.join(PRODUCTIONS)}"
            )

    def matches(self, row: Response) -> bool:
        return (
            (not self.author_kinds or row.author_kind in self.author_kinds)
            and (not self.productions or row.production in self.productions)
            and (not self.sources or row.source in self.sources)
            and (not self.authors or row.author in self.authors)
        )

    def describe(self) -> str:
        parts = [
            f"{key}={','.join(getattr(self, name))}"
            for key, name in self._KEYS.items()
            if getattr(self, name)
        ]
        return " ".join(parts) or "any response"


@dataclass(frozen=True)
class CaseFilter:
    """Which cases a recipe uses: those with every tag of ``tags`` and, when given, only the
    listed external ids. Empty: every case."""

    tags: tuple[tuple[str, str], ...] = ()
    external_ids: tuple[str, ...] = ()

    @classmethod
    def parse(cls, tags: Iterable[str] = (), external_ids: Iterable[str] = ()) -> CaseFilter:
        pairs = []
        for item in tags:
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise SetupError(f"cannot read the tag {item!r}: write KEY=VALUE, e.g. split=test")
            pairs.append((key.strip(), value.strip()))
        return cls(tuple(pairs), tuple(x.strip() for x in external_ids if x.strip()))

    def describe(self) -> str:
        parts = [f"tag {k}={v}" for k, v in self.tags]
        if self.external_ids:
            parts.append(f"{len(self.external_ids)} listed case(s)")
        return ", ".join(parts) or "every case"


_DEFAULT_FIRST = {
    "rank": ResponseFilter(author_kinds=("model",)),
    "match": ResponseFilter(author_kinds=("clinician",)),
    "iap": ResponseFilter(author_kinds=("clinician",), productions=("theme_guided",)),
    "empathy": ResponseFilter(productions=("real_time",)),
    "facts": ResponseFilter(productions=("real_time",)),
}
_DEFAULT_SECOND = {
    "match": ResponseFilter(author_kinds=("model",)),
    "empathy": ResponseFilter(productions=("edited_empathy",)),
    "facts": ResponseFilter(productions=("edited_empathy",)),
}
# The response filters each recipe reads (``--first`` / ``--second``): the others would be
# ignored, so they are refused (the study set-up window greys them out, ui RECIPE_RESPONSES).
RECIPE_FILTERS: dict[str, tuple[str, ...]] = {
    "respond": (),
    "rank": ("first",),
    "match": ("first", "second"),
    "iap": ("first",),
    "urgency": (),
    "adaptive-inbox": (),
    "eppc": ("first",),
    "empathy": ("first", "second"),
    "facts": ("first", "second"),
}
_DESCRIPTIONS = {
    "respond": "Write a response per theme (seed 000, App. G).",
    "rank": "Rank each case's drafts, blinded and shuffled, ties allowed (seed 001).",
    "match": "Match each draft's content to the reference (seed 000, Algorithm 1).",
    "iap": "Clinician vs clinician: every ordered pair of responses (seed 000, App. E.2).",
    "urgency": "Which patient needs care first? Every pair of the inbox (seed 002).",
    "adaptive-inbox": "Which patient needs care first? Pairs chosen from your answers so far "
    "(seed 002, adaptive).",
    "eppc": "EPPC codes, subcodes and evidence per sentence (seed 003).",
    "empathy": "Which reply is more empathetic? (seed 004)",
    "facts": "Facts kept, lost and added by the edit (seed 004).",
}


# --- plans of unit sets ------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitSpec:
    """One unit to make (the columns of ``units``; ``members`` for a rank set)."""

    case_id: int
    case_b_id: int | None = None
    response_id: int | None = None
    response_b_id: int | None = None
    sentence_id: int | None = None
    members: tuple[int, ...] = ()
    batch: str = ""


@dataclass(frozen=True)
class UnitPlan:
    """The units a recipe would make, before anything is saved."""

    recipe: str
    kind: str
    name: str
    description: str
    units: tuple[UnitSpec, ...]
    options: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.units)

    def summary(self) -> str:
        lines = [f"{self.name!r}: {len(self.units)} {self.kind} unit(s) ({self.recipe})"]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class CreatedSet:
    unit_set_id: int
    name: str
    kind: str
    n_units: int


def import_command(project: Project) -> str:
    """The command line that adds cases to ``project`` from a file (the app imports none)."""
    where = project.location
    if os.name == "nt":  # (cmd.exe knows double quotes only)
        quoted = f'"{where}"' if set(where) & set(' &()^%!,;=') else where
    else:
        quoted = shlex.quote(where)  # a shell's (, &, $ or space taken as such
    return f"portalreview import {quoted} FILE"


def no_cases_yet(project: Project) -> str:
    """Why nothing can be planned in a project without cases (one made by File > New
    project…), and how to add them."""
    return (
        "the project has no cases yet: add them from a CSV, XLSX or JSONL file with "
        f"{import_command(project)} on the command line (the columns each file needs are in "
        "docs/formats.md)"
    )


def has_cases(project: Project) -> bool:
    """Whether the project holds any case."""
    with project.read() as s:
        return s.scalar(select(Case.id).limit(1)) is not None


def _cases(s: Session, cases: CaseFilter) -> list[Case]:
    rows = list(s.scalars(select(Case).order_by(Case.id)))
    if cases.external_ids:
        wanted = set(cases.external_ids)
        missing = sorted(wanted - {c.external_id for c in rows})
        if missing:
            raise SetupError(f"there is no case {missing[0]!r} in the project")
        rows = [c for c in rows if c.external_id in wanted]
    if cases.tags:
        tagged: dict[int, set[tuple[str, str]]] = {}
        for case_id, key, value in s.execute(select(CaseTag.case_id, CaseTag.key, CaseTag.value)):
            tagged.setdefault(case_id, set()).add((key, value))
        rows = [c for c in rows if set(cases.tags) <= tagged.get(c.id, set())]
    return rows


def _responses_by_case(s: Session, case_ids: set[int]) -> dict[int, list[Response]]:
    out: dict[int, list[Response]] = {}
    for row in s.scalars(select(Response).order_by(Response.id)):
        if row.case_id in case_ids:
            out.setdefault(row.case_id, []).append(row)
    return out


def _batches(
    units: list[UnitSpec], batch_size: int, message_of: Mapping[int, Hashable] | None = None
) -> list[UnitSpec]:
    """``units`` labelled ``batch-1``, ``batch-2``... in order, ``batch_size`` units to a
    batch; with ``message_of`` (an EPPC set: each sentence's message), ``batch_size``
    messages to a batch, in order of their first unit, all of a message's sentences in one
    (003 Sec. 3.2.2 tracks kappa per sample of 50 messages)."""
    if batch_size <= 0:
        return units
    keys: list[Hashable] = list(range(len(units)))
    if message_of is not None:
        keys = [message_of[u.sentence_id] for u in units]  # (every eppc unit has one)
    ordinal: dict[Hashable, int] = {}
    for key in keys:
        ordinal.setdefault(key, len(ordinal))
    return [
        replace(u, batch=f"batch-{ordinal[key] // batch_size + 1}")
        for u, key in zip(units, keys, strict=True)
    ]


def _sentence_messages(s: Session) -> dict[int, tuple[str, int]]:
    """Each sentence's message: ("case", id) or ("response", id)."""
    rows = s.execute(select(Sentence.id, Sentence.case_id, Sentence.response_id))
    return {
        sentence: ("case", case_id) if case_id is not None else ("response", response_id)
        for sentence, case_id, response_id in rows
    }


def plan_units(
    project: Project,
    recipe: str,
    *,
    cases: CaseFilter | None = None,
    first: ResponseFilter | None = None,
    second: ResponseFilter | None = None,
    inbox: str | None = None,
    name: str | None = None,
    description: str | None = None,
    batch_size: int = 0,
    seed: int | None = None,
    comparisons_per_message: int = 0,
    judgements: int = 0,
) -> UnitPlan:
    """The units ``recipe`` (one of :data:`RECIPES`) makes from the project's cases.

    For urgency, ``comparisons_per_message`` > 0 makes a sample of the inbox's pairs in which
    every message is compared that many times (see :func:`balanced_pairs`) instead of all
    pairs. For ``adaptive-inbox``, ``judgements`` > 0 sets how many pairs each clinician
    judges (default :func:`~portalreview.store.adaptive.default_judgements`).

    ``cases`` narrows the cases; ``first``/``second`` choose the responses (see the module
    docstring for each recipe's meaning and defaults; one the recipe does not read, as
    ``RECIPE_FILTERS`` says, is refused); ``inbox`` names the inbox of an urgency
    set (cases tagged ``inbox=<inbox>``). ``batch_size`` > 0 labels units ``batch-1``,
    ``batch-2``... in order, ``batch_size`` units to a batch, or for ``eppc`` ``batch_size``
    messages, a message's sentences all in one (kappa per batch, seed 003). ``seed`` shuffles
    the units' order (urgency pairs are shuffled with seed 0 by default, so that one case
    does not fill the start of the queue); the same seed gives the same order.
    """
    if recipe not in RECIPES:
        raise SetupError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if batch_size < 0:
        raise SetupError("the batch size cannot be negative")
    cases = cases or CaseFilter()
    adaptive = recipe == "adaptive-inbox"
    if adaptive and comparisons_per_message:
        raise SetupError("an adaptive inbox chooses its own pairs: no comparisons per message")
    if judgements < 0 or (judgements and not adaptive):
        raise SetupError("a number of judgements is for the adaptive-inbox recipe, and positive")
    _refuse_unread_filters(recipe, first=first, second=second)
    if not has_cases(project):  # said before any filter is found wanting
        raise SetupError(no_cases_yet(project))
    if RECIPE_KIND[recipe] == "urgency":
        if inbox:
            cases = CaseFilter((*cases.tags, ("inbox", inbox)), cases.external_ids)
        elif not cases.tags and not cases.external_ids:
            raise SetupError("name the inbox (cases tagged inbox=<name>) or the cases to pair")
        if seed is None:
            seed = 0
    first = first if first is not None else _DEFAULT_FIRST.get(recipe)
    second = second if second is not None else _DEFAULT_SECOND.get(recipe)
    for f in (first, second):
        if f is not None:
            f.validate()
    notes: list[str] = []
    with project.read() as s:
        chosen = _cases(s, cases)
        if not chosen:
            raise SetupError(f"no case matches ({cases.describe()})")
        responses = _responses_by_case(s, {c.id for c in chosen})
        units = _RECIPE_FUNCTIONS[recipe](s, chosen, responses, first, second, notes)
        message_of = _sentence_messages(s) if recipe == "eppc" and batch_size else None
    if recipe == "urgency" and comparisons_per_message:
        order = balanced_pairs([c.id for c in chosen], comparisons_per_message, seed or 0)
        wanted = {frozenset(pair) for pair in order}
        units = [u for u in units if frozenset((u.case_id, u.case_b_id)) in wanted]
        one_more = comparisons_per_message % 2 and len(chosen) % 2  # (see balanced_pairs)
        notes.append(
            f"a sample of {len(units)} pairs, each message compared "
            f"{comparisons_per_message + one_more} times"
            + (
                f" ({comparisons_per_message} asked for: an odd count needs an even number of "
                "messages, so each is compared once more)"
                if one_more
                else ""
            )
        )
    if adaptive and units:
        judgements = _adaptive_judgements(len(chosen), judgements, notes)
    if seed is not None:
        random.Random(f"portalreview-units:{seed}").shuffle(units)
    units = _batches(units, batch_size, message_of)
    if message_of is not None and units:
        n_batches = len({u.batch for u in units})
        notes.append(
            f"{n_batches} batch(es) of up to {batch_size} messages: all of a message's "
            "sentences in one batch"
        )
    if not units:
        raise SetupError(
            f"the {recipe} recipe makes no unit from {cases.describe()}"
            + (f" with {first.describe()}" if first else "")
            + (f" x {second.describe()}" if second else "")
        )
    options: dict[str, Any] = {"cases": cases.describe()}
    if first is not None:
        options["first"] = first.describe()
    if second is not None:
        options["second"] = second.describe()
    if inbox:
        options["inbox"] = inbox
    if comparisons_per_message:
        options["comparisons_per_message"] = comparisons_per_message
    if adaptive:
        options["judgements"] = judgements
    if batch_size:
        options["batch_size"] = batch_size
    if seed is not None:
        options["seed"] = seed
    default_name = {
        "urgency": f"Urgency pairs: {inbox or cases.describe()}",
        "adaptive-inbox": f"Adaptive urgency pairs: {inbox or cases.describe()}",
    }.get(recipe, f"{recipe} units ({cases.describe()})")
    return UnitPlan(
        recipe=recipe,
        kind=RECIPE_KIND[recipe],
        name=(name or "").strip() or default_name,
        description=description if description is not None else _DESCRIPTIONS[recipe],
        units=tuple(units),
        options=options,
        notes=tuple(notes),
    )


def _refuse_unread_filters(recipe: str, **filters: ResponseFilter | None) -> None:
    """A response filter the recipe does not read would be ignored without a word (the units
    made would not be the ones asked for): refuse it."""
    for option, given in filters.items():
        if given is not None and option not in RECIPE_FILTERS[recipe]:
            read = " and ".join(f"--{o}" for o in RECIPE_FILTERS[recipe])
            takes = f"only {read}" if read else "no responses"
            raise SetupError(
                f"the {recipe} recipe takes {takes}: leave out --{option} ({given.describe()})"
            )


def _adaptive_judgements(n_messages: int, wanted: int, notes: list[str]) -> int:
    """The judgements each clinician makes in an adaptive inbox (checked), with a note."""
    pairs = n_messages * (n_messages - 1) // 2
    if wanted > pairs:
        raise SetupError(f"{wanted} judgements is more than the {pairs} pairs of the inbox")
    value = wanted or default_judgements(n_messages)
    notes.append(
        f"each clinician judges {value} of the {pairs} pairs ({value / pairs:.0%}), each next "
        "pair chosen from their answers so far"
    )
    return value


def balanced_pairs(case_ids: list[int], per_message: int, seed: int = 0) -> list[tuple[int, int]]:
    """A sample of the pairs of ``case_ids`` in which every message is compared
    ``per_message`` times (seed 002's inboxes compare all pairs; a sample keeps the work
    linear in the inbox size).

    A circulant design: the messages are put in a seeded random order and message i is paired
    with messages i+1, i+2 ... i+d around the circle, d = per_message // 2; an odd count adds
    the pairs across the circle (i, i + n/2), which needs an even number of messages - with an
    odd number, each message is then compared once more. Reproducible from ``seed``.
    """
    n = len(case_ids)
    if per_message < 1 or per_message >= n:
        raise SetupError(f"comparisons per message must be between 1 and {n - 1} for {n} messages")
    order = list(case_ids)
    random.Random(f"portalreview-pairs:{seed}").shuffle(order)
    steps = list(range(1, per_message // 2 + 1))
    if per_message % 2:
        steps.append(n // 2 if n % 2 == 0 else per_message // 2 + 1)
    pairs: set[frozenset[int]] = set()
    for d in steps:
        for i in range(n):
            pairs.add(frozenset((order[i], order[(i + d) % n])))
    return sorted(tuple(sorted(p)) for p in pairs)


def _respond(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    return [UnitSpec(case_id=c.id) for c in chosen]


def _rank(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    units, skipped = [], 0
    for c in chosen:
        members = tuple(r.id for r in responses.get(c.id, []) if first.matches(r))
        if len(members) >= 2:
            units.append(UnitSpec(case_id=c.id, members=members))
        else:
            skipped += 1
    if skipped:
        notes.append(f"{skipped} case(s) with fewer than two drafts left out")
    return units


def _pairs(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    units = []
    for c in chosen:
        rows = responses.get(c.id, [])
        for a in (r for r in rows if first.matches(r)):
            for b in (r for r in rows if second.matches(r)):
                if a.id != b.id:
                    units.append(UnitSpec(case_id=c.id, response_id=a.id, response_b_id=b.id))
    return units


def _iap(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    units = []
    for c in chosen:
        rows = [r for r in responses.get(c.id, []) if first.matches(r)]
        for a, b in itertools.permutations(rows, 2):
            if a.author != b.author:
                units.append(UnitSpec(case_id=c.id, response_id=a.id, response_b_id=b.id))
    return units


def _urgency(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    if len(chosen) < 2:
        return []
    missing = sum(c.urgency_level is None for c in chosen)
    if missing:
        notes.append(f"{missing} case(s) have no reference level (not scored by accuracy/NDCG)")
    return [UnitSpec(case_id=a.id, case_b_id=b.id) for a, b in itertools.combinations(chosen, 2)]


def _eppc(s, chosen, responses, first, second, notes) -> list[UnitSpec]:
    ids = {c.id for c in chosen}
    wanted = {
        r.id: r.case_id for rows in responses.values() for r in rows if first and first.matches(r)
    }
    by_case: dict[int, list[Sentence]] = {}
    by_response: dict[int, list[Sentence]] = {}
    for sentence in s.scalars(select(Sentence).order_by(Sentence.position)):
        if sentence.case_id in ids:
            by_case.setdefault(sentence.case_id, []).append(sentence)
        elif sentence.response_id in wanted:
            by_response.setdefault(sentence.response_id, []).append(sentence)
    units = []
    for c in chosen:
        units += [UnitSpec(case_id=c.id, sentence_id=x.id) for x in by_case.get(c.id, [])]
        for r in responses.get(c.id, []):
            units += [UnitSpec(case_id=c.id, sentence_id=x.id) for x in by_response.get(r.id, [])]
    return units


_RECIPE_FUNCTIONS = {
    "respond": _respond,
    "rank": _rank,
    "match": _pairs,
    "iap": _iap,
    "urgency": _urgency,
    "adaptive-inbox": _urgency,
    "eppc": _eppc,
    "empathy": _pairs,
    "facts": _pairs,
}


def create_unit_set(
    project: Project,
    plan: UnitPlan,
    *,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> CreatedSet:
    """Save ``plan`` as a new unit set, in one transaction, recorded in the audit log.
    ``by`` is the id of the person the audit log names (the PI in the app; None: the system)."""
    recorder = EventRecorder(project, by)
    steps = Steps(len(plan.units), progress, cancel)
    steps.start()
    with recorder._write() as s:
        if s.scalar(select(UnitSet.id).where(UnitSet.name == plan.name)) is not None:
            raise SetupError(f"there is already a unit set called {plan.name!r}; choose a name")
        set_id = recorder.create_unit_set(plan.name, plan.kind, plan.description, session=s)
        sides = secrets.SystemRandom()
        for position, planned in enumerate(plan.units):
            spec = _sides_drawn(planned, plan.kind, sides)
            # Direct rows (service.add_unit counts the set per unit: quadratic on big sets);
            # the database checks every reference as it does for add_unit.
            unit = Unit(
                unit_set_id=set_id,
                kind=plan.kind,
                position=position,
                case_id=spec.case_id,
                case_b_id=spec.case_b_id,
                response_id=spec.response_id,
                response_b_id=spec.response_b_id,
                sentence_id=spec.sentence_id,
                batch=spec.batch,
            )
            s.add(unit)
            if spec.members:
                s.flush()
                s.add_all(RankMember(unit_id=unit.id, response_id=r) for r in spec.members)
            steps.step()
        s.flush()
        if plan.recipe == "adaptive-inbox":
            setting = AdaptiveSetting(int(plan.options["judgements"]))
            s.add(ProjectMeta(key=meta_key(set_id), value=setting.to_json()))
        recorder.record(
            s,
            "setup",
            {
                "unit_set": plan.name,
                "kind": plan.kind,
                "recipe": plan.recipe,
                "n_units": len(plan.units),
                "options": plan.options,
            },
        )
        steps.check()
    steps.finish()
    return CreatedSet(set_id, plan.name, plan.kind, len(plan.units))


# The two sides of the pairs whose stored order would give the reference answer away to a
# clinician who reads her offline copy or the server with her own SQL: planned, urgency pairs list
# an inbox's cases in the order they were imported (a file sorted by urgency, say) and empathy
# pairs the original reply before its edit. Match and facts pairs keep theirs: their sides are
# roles the editor names (reference and draft, original and edited).
_BLINDED_SIDES = {"urgency": ("case_id", "case_b_id"), "empathy": ("response_id", "response_b_id")}


def _sides_drawn(spec: UnitSpec, kind: str, rng: random.Random) -> UnitSpec:
    """``spec`` with its sides swapped half of the time, for a kind of :data:`_BLINDED_SIDES`.
    Drawn when the set is saved, from ``rng`` (the operating system's random source): the
    plan's seed is recorded in the study, and could be used to draw the same sides again."""
    columns = _BLINDED_SIDES.get(kind)
    if columns is None or rng.random() < 0.5:
        return spec
    first, second = columns
    return replace(spec, **{first: getattr(spec, second), second: getattr(spec, first)})


# --- assignment --------------------------------------------------------------------------------


def split_with_overlap(
    units: Sequence[int],
    annotators: Sequence[str],
    *,
    overlap: int = 0,
    raters_per_unit: int = 1,
    seed: int = 0,
    kept_from: Mapping[str, Collection[int]] | None = None,
) -> tuple[list[int], dict[str, list[int]]]:
    """Who answers which unit: ``overlap`` units (drawn at random) go to every annotator, each
    other unit to ``raters_per_unit`` of them, spread so that loads differ by one at most.

    ``kept_from`` (name -> units) are units a person may not get: those holding a response they
    wrote (seed 001 Sec. 5, :mod:`~portalreview.store.own_responses`). Such a unit goes to the
    others only, and to fewer people than asked where too few are left; the overlap is drawn
    first from the units everyone may answer. Loads stay as even as those units allow.

    Pure and reproducible: the same arguments give the same split, another seed another one.
    Returns (the overlap units, annotator -> their units in the order given).
    """
    people = list(annotators)
    _check_split(len(units), people, overlap, raters_per_unit)
    kept = {p: set(kept_from.get(p, ())) for p in people} if kept_from else {}
    rng = random.Random(f"portalreview-assign:{seed}")
    drawn = list(units)
    rng.shuffle(drawn)
    # stable sorts: the draw is unchanged where no one is kept from anything
    drawn.sort(key=lambda u: _kept_count(u, kept))  # the freest units make the overlap
    shared, rest = drawn[:overlap], drawn[overlap:]
    rest.sort(key=lambda u: -_kept_count(u, kept))  # the least free first, while loads allow
    order = list(people)
    rng.shuffle(order)  # who takes the extra unit when the split is uneven
    chosen = {p: {u for u in shared if u not in kept.get(p, ())} for p in people}
    cursor = 0
    for unit in rest:
        allowed = [i for i, p in enumerate(order) if unit not in kept.get(p, ())]
        cursor = _hand_out_one(unit, order, allowed, chosen, raters_per_unit, cursor)
    keep = set(shared)
    return (
        [u for u in units if u in keep],
        {p: [u for u in units if u in chosen[p]] for p in people},
    )


def _kept_count(unit: int, kept: Mapping[str, set[int]]) -> int:
    """How many people may not answer ``unit``."""
    return sum(unit in units for units in kept.values())


def _check_split(n_units: int, people: list[str], overlap: int, raters_per_unit: int) -> None:
    if not people:
        raise SetupError("name at least one annotator")
    if len(set(people)) != len(people):
        raise SetupError("an annotator is listed twice")
    if not 0 <= overlap <= n_units:
        raise SetupError(f"the overlap must be between 0 and {n_units} (the units to hand out)")
    if overlap and len(people) < 2:
        raise SetupError("an overlap needs two annotators or more")
    if not 1 <= raters_per_unit <= len(people):
        raise SetupError(f"raters per unit must be between 1 and {len(people)}")


def _hand_out_one(
    unit: int,
    order: list[str],
    allowed: list[int],
    chosen: dict[str, set[int]],
    raters_per_unit: int,
    cursor: int,
) -> int:
    """Give ``unit`` to the ``raters_per_unit`` least loaded of the people ``allowed`` (their
    places in ``order``), the next from ``cursor`` first on equal loads: a plain round robin
    when everyone is allowed. Returns the cursor for the next unit."""
    n = len(order)
    ranked = sorted(allowed, key=lambda i: (len(chosen[order[i]]), (i - cursor) % n))
    picked = ranked[:raters_per_unit]
    for i in picked:
        chosen[order[i]].add(unit)
    if not picked:
        return cursor
    return (cursor + max((i - cursor) % n for i in picked) + 1) % n


@dataclass(frozen=True)
class AssignmentPlan:
    """Who will answer which unit of one set (unit ids), before anything is saved."""

    unit_set: str
    kind: str
    annotators: tuple[str, ...]
    overlap: int
    raters_per_unit: int
    seed: int
    shared_units: tuple[int, ...]
    by_annotator: Mapping[str, tuple[int, ...]]
    n_units: int  # units handed out (those not assigned before)
    n_already_assigned: int
    adaptive_judgements: int = 0  # an adaptive set: the pairs each person judges
    # units not given to a person because they wrote one of its responses (seed 001 Sec. 5)
    kept_from: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # units going to fewer people than asked (all for a shared unit), with how many they get
    short_units: Mapping[int, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {name: len(units) for name, units in self.by_annotator.items()}

    def summary(self) -> str:
        if self.adaptive_judgements:
            return (
                f"{self.unit_set!r} (adaptive): all {self.n_units} pairs to each of "
                f"{', '.join(self.annotators)}, who judge {self.adaptive_judgements} of them, "
                "each next pair chosen from their answers so far"
            )
        lines = [
            f"{self.unit_set!r}: {self.n_units} unit(s) to hand out"
            + (
                f" ({self.n_already_assigned} already assigned, left as they are)"
                if self.n_already_assigned
                else ""
            ),
            f"  {len(self.shared_units)} answered by all of {', '.join(self.annotators)}"
            + (" but their responses' authors" if self._short_shared() else "")
            + f"; the rest by {self.raters_per_unit} annotator(s) each (seed {self.seed})",
        ]
        lines += [f"  {name}: {n} unit(s)" for name, n in self.counts().items()]
        return "\n".join(lines + self._own_response_lines())

    def _short_shared(self) -> int:
        """Shared units going to fewer than all (their responses' authors left out)."""
        return sum(u in self.short_units for u in self.shared_units)

    def kept_in_brief(self) -> str:
        """One sentence on the units kept from their responses' authors ("" when none)."""
        if not self.kept_from:
            return ""
        kept = sum(map(len, self.kept_from.values()))
        nobody = sum(n == 0 for n in self.short_units.values())
        short = (
            f"{len(self.short_units)} with too few annotators"
            + (f" ({nobody} with none)" if nobody else "")
            if self.short_units
            else "every unit still gets the annotators asked"
        )
        return (
            f"{kept} unit(s) kept from the person who wrote one of their responses "
            f"(seed 001 Sec. 5); {short}: see the plan."
        )

    def _own_response_lines(self) -> list[str]:
        """What keeping units from their responses' authors did to the plan, in words."""
        if not self.kept_from:
            return []
        kept = ", ".join(f"{name} {len(units)}" for name, units in self.kept_from.items())
        lines = [
            f"  Kept from their authors (seed 001 Sec. 5: no one judges a response they "
            f"wrote): {kept} unit(s)"
        ]
        nobody = sum(n == 0 for n in self.short_units.values())
        shared = sum(n > 0 and u in self.shared_units for u, n in self.short_units.items())
        fewer = len(self.short_units) - nobody - shared
        if shared:
            lines.append(
                f"  Too few annotators: {shared} shared unit(s) go to everyone but the "
                "person who wrote one of their responses"
            )
        if fewer:
            lines.append(
                f"  Too few annotators: {fewer} unit(s) go to fewer than "
                f"{self.raters_per_unit}: too few of the people named wrote none of their "
                "responses"
            )
        if nobody:
            lines.append(
                f"  Too few annotators: {nobody} unit(s) go to no one (each holds a response "
                "by every person named) and stay unassigned: hand them out to others"
            )
        return lines


def _gold_only(s: Session) -> set[tuple[int, int]]:
    """(unit, annotator) assignments made only to hold the PI's gold answer: no one's work,
    and handed out as any free unit (a holder planned for its PI becomes their work)."""
    return set(
        s.execute(
            select(Assignment.unit_id, Assignment.annotator_id).where(
                Assignment.is_gold_holder.is_(True)
            )
        )
    )


def _unit_set_row(s: Session, unit_set: str | int) -> UnitSet:
    """The set ``unit_set`` names (trimmed, as names are stored); an int is an id, and so
    is a string of digits that is no set's name (a set may be named "1": its name wins)."""
    row = None
    if isinstance(unit_set, str):
        row = s.scalar(select(UnitSet).where(UnitSet.name == unit_set.strip()))
    if row is None and (isinstance(unit_set, int) or unit_set.strip().isdigit()):
        row = s.get(UnitSet, int(unit_set))
    if row is None:
        names = ", ".join(repr(n) for n in s.scalars(select(UnitSet.name).order_by(UnitSet.id)))
        raise SetupError(f"there is no unit set {unit_set!r}; the sets are: {names or 'none'}")
    return row


def plan_assignment(
    project: Project,
    unit_set: str | int,
    annotators: Sequence[str],
    *,
    overlap: int = 0,
    raters_per_unit: int = 1,
    seed: int = 0,
) -> AssignmentPlan:
    """Plan handing out the units of ``unit_set`` (name or id) not yet assigned to anyone:
    see :func:`split_with_overlap`. An adaptive set goes whole to each person named who does
    not have it yet (:func:`_plan_adaptive`)."""
    with project.read() as s:
        row = _unit_set_row(s, unit_set)
        people = {a.name: a for a in s.scalars(select(Annotator))}
        unknown = [n for n in annotators if n not in people]
        if unknown:
            raise SetupError(
                f"there is no annotator called {unknown[0]!r}; add them first "
                f"(the annotators are: {', '.join(sorted(people)) or 'none'})"
            )
        if row.id in adaptive_settings(s):
            return _plan_adaptive(s, row, [people[n].id for n in annotators], annotators, seed)
        units = list(
            s.scalars(select(Unit.id).where(Unit.unit_set_id == row.id).order_by(Unit.position))
        )
        gold = _gold_only(s)
        authors = response_authors(s, Unit.unit_set_id == row.id)
        taken = {
            u
            for u, a in s.execute(
                select(Assignment.unit_id, Assignment.annotator_id)
                .join(Unit, Unit.id == Assignment.unit_id)
                .where(Unit.unit_set_id == row.id)
            )
            if (u, a) not in gold
        }
    free = [u for u in units if u not in taken]
    if not free:
        raise SetupError(
            f"every unit of {row.name!r} is already assigned ({len(units)} unit(s))"
            if units
            else f"the unit set {row.name!r} has no units"
        )
    kept = own_units({u: authors[u] for u in free if u in authors}, annotators)
    shared, split = split_with_overlap(
        free,
        annotators,
        overlap=overlap,
        raters_per_unit=raters_per_unit,
        seed=seed,
        kept_from=kept,
    )
    return AssignmentPlan(
        unit_set=row.name,
        kind=row.kind,
        annotators=tuple(annotators),
        overlap=overlap,
        raters_per_unit=raters_per_unit,
        seed=seed,
        shared_units=tuple(shared),
        by_annotator={name: tuple(units) for name, units in split.items()},
        n_units=len(free),
        n_already_assigned=len(units) - len(free),
        kept_from={name: tuple(sorted(units)) for name, units in kept.items()},
        short_units=_short_units(free, shared, split, raters_per_unit) if kept else {},
    )


def _short_units(
    free: list[int], shared: list[int], split: Mapping[str, list[int]], raters_per_unit: int
) -> dict[int, int]:
    """unit -> the people it goes to, for the units going to fewer than asked (a shared
    unit: to everyone)."""
    given = Counter(u for units in split.values() for u in units)
    everyone = set(shared)
    return {
        u: given[u] for u in free if given[u] < (len(split) if u in everyone else raters_per_unit)
    }


def _plan_adaptive(
    s: Session, row: UnitSet, ids: Sequence[int], annotators: Sequence[str], seed: int
) -> AssignmentPlan:
    """Every unit of an adaptive set to each person named (``ids``: theirs; each judges some
    of the pairs, chosen for them as they go); people who have the set already are refused."""
    units = tuple(
        s.scalars(select(Unit.id).where(Unit.unit_set_id == row.id).order_by(Unit.position))
    )
    having = set(
        s.scalars(
            select(Assignment.annotator_id)
            .join(Unit, Unit.id == Assignment.unit_id)
            .where(Unit.unit_set_id == row.id, Assignment.is_gold_holder.is_(False))
        )
    )
    already = [n for n, id_ in zip(annotators, ids, strict=True) if id_ in having]
    if already:
        raise SetupError(f"{already[0]} already has the adaptive set {row.name!r}")
    if not units:
        raise SetupError(f"the unit set {row.name!r} has no units")
    return AssignmentPlan(
        unit_set=row.name,
        kind=row.kind,
        annotators=tuple(annotators),
        overlap=100,
        raters_per_unit=len(annotators),
        seed=seed,
        shared_units=units,
        by_annotator={name: units for name in annotators},
        n_units=len(units),
        n_already_assigned=0,
        adaptive_judgements=adaptive_settings(s)[row.id].judgements,
    )


def assign_units(
    project: Project,
    plan: AssignmentPlan,
    *,
    shuffle_order: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelFn | None = None,
    by: int | None = None,
) -> AssignmentPlan:
    """Save ``plan`` in one transaction (recorded in the audit log). Each person's queue keeps
    the set's order, or, with ``shuffle_order``, its own seeded order. ``by`` is the id of the
    person the audit log names (the PI in the app; None: the system)."""
    recorder = EventRecorder(project, by)
    total = sum(len(u) for u in plan.by_annotator.values())
    steps = Steps(total, progress, cancel)
    steps.start()
    with recorder._write() as s:
        set_row = _unit_set_row(s, plan.unit_set)
        ids = {a.name: a.id for a in s.scalars(select(Annotator))}
        gold = _gold_only(s)
        planned = {u for units in plan.by_annotator.values() for u in units}
        # an adaptive set is given to several people: only the same person's unit clashes
        whose = {ids[n] for n in plan.by_annotator} if set_row.id in adaptive_settings(s) else None
        clash = [
            u
            for u, a in s.execute(
                select(Assignment.unit_id, Assignment.annotator_id).where(
                    Assignment.unit_id.in_(planned)
                )
            )
            if (u, a) not in gold and (whose is None or a in whose)
        ]
        if clash:
            raise SetupError(
                f"unit {clash[0]} of {set_row.name!r} was assigned since the plan was made; "
                "plan again"
            )
        _refuse_own_responses(s, set_row, plan)
        for name, units in plan.by_annotator.items():
            order = list(units)
            if shuffle_order:
                random.Random(f"portalreview-queue:{plan.seed}:{name}").shuffle(order)
            for position, unit_id in enumerate(order):
                recorder.assign(  # (a gold holder of this person's becomes their work)
                    unit_id, ids[name], position=position if shuffle_order else None, session=s
                )
                steps.step()
        s.flush()
        recorder.record(
            s,
            "assign",
            {
                "unit_set": plan.unit_set,
                "annotators": list(plan.annotators),
                "overlap": plan.overlap,
                "raters_per_unit": plan.raters_per_unit,
                "seed": plan.seed,
                "counts": plan.counts(),
                "shuffle_order": shuffle_order,
                **_own_response_details(plan),
            },
        )
        steps.check()
    steps.finish()
    return plan


def _refuse_own_responses(s: Session, set_row: UnitSet, plan: AssignmentPlan) -> None:
    """Refuse a plan giving someone a unit that holds a response they wrote (seed 001 Sec. 5);
    :func:`plan_assignment` makes none, a plan made by other means may."""
    authors = response_authors(s, Unit.unit_set_id == set_row.id)
    for name, units in plan.by_annotator.items():
        own = sorted(set(units) & own_units(authors, [name]).get(name, set()))
        if own:
            raise SetupError(
                f"unit {own[0]} of {set_row.name!r} holds a response {name} wrote: no one "
                "judges their own response (seed 001 Sec. 5); plan the hand-out again"
            )


def _own_response_details(plan: AssignmentPlan) -> dict[str, Any]:
    """For the audit log: units kept from their authors, and units short of people."""
    if not plan.kept_from:
        return {}
    return {
        "kept_from_authors": {name: len(units) for name, units in plan.kept_from.items()},
        "short_units": len(plan.short_units),
        "unassigned_units": sum(n == 0 for n in plan.short_units.values()),
    }


def add_annotators(
    project: Project, names: Iterable[str], role: str = "clinician", *, by: int | None = None
) -> list[int]:
    """Add people (``role`` clinician or pi) in one transaction; an existing name is refused.
    Each is recorded in the audit log, naming ``by`` (the PI in the app; None: the system)."""
    svc = EventRecorder(project, by)
    names = [person_name(n) for n in names]  # as add_annotator stores them
    with svc._write() as s:
        existing = set(s.scalars(select(Annotator.name)))
        dup = [n for i, n in enumerate(names) if n in existing or n in names[:i]]
        if dup:
            raise SetupError(f"there is already an annotator called {dup[0]!r}")
        return [svc.add_annotator(n, role=role, session=s) for n in names]


# --- a second annotator for hard pairs ---------------------------------------------------------


@dataclass(frozen=True)
class HardPair:
    """An urgency pair whose only annotator so far asked for a second one: seed 002 App. A.5.1,
    "If the annotators found any samples to be challenging, a 2nd annotator could be requested
    for additional review" (the editor's "Hard pair: ask a second annotator")."""

    unit_id: int
    unit_set: str
    cases: tuple[str, str]  # the two cases' external ids
    asked_by: str  # the annotator who answered it and asked

    def describe(self) -> str:
        return (
            f"unit {self.unit_id} of {self.unit_set!r} (cases {self.cases[0]} and "
            f"{self.cases[1]}), asked by {self.asked_by}"
        )


@dataclass(frozen=True)
class SecondAssignment:
    """What :func:`assign_second_annotator` did: units given to ``annotator`` now, and units
    they had already (left as they were)."""

    annotator: str
    assigned: tuple[int, ...]
    already: tuple[int, ...]

    def summary(self) -> str:
        text = f"{len(self.assigned)} hard pair(s) given to {self.annotator}"
        if self.already:
            text += f" ({len(self.already)} they had already, left as they were)"
        return text


def _asking_second(s: Session, unit_ids: Iterable[int] | None = None) -> dict[int, set[str]]:
    """Unit -> the people whose submitted answer to it asks for a second annotator (drafts,
    gold answers and models' answers left out, as the agreement figures leave them out)."""
    query = select(Answer.unit_id, Annotator.name).where(_asks_second())
    if unit_ids is not None:
        query = query.where(Answer.unit_id.in_(list(unit_ids)))
    asking: dict[int, set[str]] = {}
    for unit_id, name in s.execute(query):
        asking.setdefault(unit_id, set()).add(name)
    return asking


def _workers(s: Session, unit_ids: Iterable[int]) -> dict[int, set[int]]:
    """Unit -> the people (not models) it is handed to as work (gold holders left out)."""
    query = (
        select(Assignment.unit_id, Assignment.annotator_id)
        .join(Annotator, Annotator.id == Assignment.annotator_id)
        .where(
            Assignment.unit_id.in_(list(unit_ids)),
            Assignment.is_gold_holder.is_(False),
            Annotator.is_model.is_(False),
        )
    )
    workers: dict[int, set[int]] = {}
    for unit_id, annotator_id in s.execute(query):
        workers.setdefault(unit_id, set()).add(annotator_id)
    return workers


def _asks_second():
    """A submitted answer of a person (no gold answer, no model's) asking for a second
    annotator. Its answers are found through the urgency answers that ask (an index search
    each), not by scanning every answer of the study (20 times slower at 10,000 cases)."""
    asking = select(UrgencyAnswer.answer_id).where(UrgencyAnswer.ask_second.is_(True))
    return and_(
        Answer.id.in_(asking),
        Annotator.id == Answer.annotator_id,
        Answer.is_gold.is_(False),
        Answer.status == "submitted",
        Annotator.is_model.is_(False),
    )


def _hard_pairs(s: Session) -> list[HardPair]:
    """One query for the pairs and their cases' names: the units asked about, of one worker
    (not a model, no gold holder), no adaptive set's; each unit's askers in a second."""
    asking = _asking_second(s)
    workers = (
        select(func.count())
        .select_from(Assignment)
        .join(Annotator, Annotator.id == Assignment.annotator_id)
        .where(
            Assignment.unit_id == Unit.id,
            Assignment.is_gold_holder.is_(False),
            Annotator.is_model.is_(False),
        )
        .scalar_subquery()
    )
    first, second = aliased(Case), aliased(Case)
    query = (
        select(Unit.id, UnitSet.name, first.external_id, second.id, second.external_id)
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .join(first, first.id == Unit.case_id)
        .outerjoin(second, second.id == Unit.case_b_id)
        .where(
            Unit.kind == "urgency",
            Unit.id.in_(select(Answer.unit_id).where(_asks_second())),
            workers == 1,
        )
        .order_by(Unit.unit_set_id, Unit.position, Unit.id)
    )
    adaptive = list(adaptive_settings(s))  # every clinician of such a set holds every pair
    if adaptive:
        query = query.where(Unit.unit_set_id.not_in(adaptive))
    return [
        HardPair(
            unit_id=unit_id,
            unit_set=set_name,
            cases=(case_a, "?" if b_id is None else case_b),
            asked_by=", ".join(sorted(asking[unit_id])),
        )
        for unit_id, set_name, case_a, b_id, case_b in plain_rows(s, query)
    ]


def hard_pairs(project: Project) -> list[HardPair]:
    """The urgency pairs waiting for a second annotator (seed 002 App. A.5.1): a submitted
    answer asks for one, and the pair is handed to one person only so far. Pairs of adaptive
    inboxes are left out: every clinician of such a set holds every pair already. In set and
    queue order."""
    with project.read() as s:
        return _hard_pairs(s)


def _not_waiting(s: Session, unit_id: int, asking: set[str], workers: set[int]) -> str:
    """Why ``unit_id`` is no pair waiting for a second annotator, in words."""
    unit = s.get(Unit, unit_id)
    if unit is None:
        return f"there is no unit {unit_id}"
    if unit.kind != "urgency":
        return f"unit {unit_id} is a {unit.kind} unit, not an urgency pair"
    if unit.unit_set_id in adaptive_settings(s):
        return f"unit {unit_id} is a pair of an adaptive inbox, which its clinicians hold already"
    if not asking:
        return f"no submitted answer to unit {unit_id} asks for a second annotator"
    return f"unit {unit_id} has {len(workers)} annotators already"


def _new_and_kept(
    s: Session, wanted: list[int], person: Annotator, waiting: dict[int, HardPair]
) -> tuple[list[int], list[int]]:
    """The units of ``wanted`` to give ``person`` now, and those they have already; SetupError
    at the first unit they cannot take as its second annotator."""
    asking = _asking_second(s, wanted)
    workers = _workers(s, wanted)
    new, already = [], []
    for unit_id in wanted:
        asked, given = asking.get(unit_id, set()), workers.get(unit_id, set())
        if person.name in asked:
            raise SetupError(
                f"{person.name} answered unit {unit_id} and asked for a second annotator: "
                "choose someone else"
            )
        if asked and person.id in given:
            already.append(unit_id)
        elif unit_id in waiting:
            new.append(unit_id)
        else:
            raise SetupError(_not_waiting(s, unit_id, asked, given))
    return new, already


def _second_plan(
    s: Session, wanted: list[int], annotator: str
) -> tuple[Annotator, dict[int, HardPair], list[int], list[int]]:
    """The person, the pairs waiting, and the units of ``wanted`` to give them now and those
    they have already; SetupError for what :func:`assign_second_annotator` refuses."""
    if not wanted:
        raise SetupError("choose at least one hard pair")
    person = _second_person(s, annotator)
    waiting = {pair.unit_id: pair for pair in _hard_pairs(s)}
    new, already = _new_and_kept(s, wanted, person, waiting)
    return person, waiting, new, already


def _second_person(s: Session, annotator: str) -> Annotator:
    """The person ``annotator`` names, who may be a second annotator; SetupError if none."""
    person = find_annotator(s, annotator)
    if person is None:
        raise SetupError(f"there is no annotator called {annotator!r}")
    if person.is_model:
        raise SetupError(f"{annotator} is a model, not a person: choose a person")
    return person


def check_second_annotator(project: Project, annotator: str) -> None:
    """Refuse, as :func:`assign_second_annotator` does, a name that is no one's or a model's."""
    with project.read() as s:
        _second_person(s, annotator)


def plan_second_annotator(
    project: Project, unit_ids: Iterable[int], annotator: str
) -> SecondAssignment:
    """What :func:`assign_second_annotator` would do, with the same refusals; nothing is
    written (a dry run; the project may be open read-only)."""
    with project.read() as s:
        _, _, new, already = _second_plan(s, list(dict.fromkeys(unit_ids)), annotator)
    return SecondAssignment(annotator, tuple(new), tuple(already))


def assign_second_annotator(
    project: Project, unit_ids: Iterable[int], annotator: str, *, by: int | None = None
) -> SecondAssignment:
    """Give each hard pair of ``unit_ids`` (see :func:`hard_pairs`) to ``annotator`` as the
    same unit, a new assignment of it, so that their answer joins the first one in the
    agreement figures (seed 002 App. A.5.1: "a 2nd annotator could be requested for
    additional review"). The pair joins their queue at its place in the set.

    One transaction, recorded in the audit log (action ``assign``, naming ``by``: the PI in the
    app; None: the system). Refused, with nothing saved, when ``annotator`` is unknown or a
    model, asked for the second annotator on one of the pairs themself, or a unit is no pair
    waiting for one. A pair already given to ``annotator`` is left as it is (so the call may be
    repeated); when nothing is new, nothing is recorded.
    """
    wanted = list(dict.fromkeys(unit_ids))
    recorder = EventRecorder(project, by)
    with recorder._write() as s:
        person, waiting, new, already = _second_plan(s, wanted, annotator)
        for unit_id in new:
            recorder.assign(unit_id, person.id, session=s)  # (a gold holder becomes work)
        if new:
            s.flush()
            recorder.record(
                s,
                "assign",
                {
                    "unit_set": ", ".join(sorted({waiting[u].unit_set for u in new})),
                    "second_annotator": annotator,
                    "units": new,
                    "asked_by": sorted({waiting[u].asked_by for u in new}),
                    "counts": {annotator: len(new)},
                },
            )
    return SecondAssignment(annotator, tuple(new), tuple(already))


# --- progress ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgressRow:
    """One annotator's work on one unit set."""

    unit_set: str
    kind: str
    annotator: str
    assigned: int
    shared: int  # of the assigned, units someone else is assigned too (agreement material)
    drafts: int  # answered but not submitted
    submitted: int

    @property
    def todo(self) -> int:
        return self.assigned - self.submitted


def study_progress(project: Project) -> list[ProgressRow]:
    """Progress per unit set and annotator (assignments made only to hold the PI's gold answer
    left out), in set and name order. In an adaptive set a person is assigned the judgements
    asked of them, and shares the pairs someone else answered too.

    Counted by the database, one row per set and annotator, rather than one per assignment
    and answer read into Python (a second at 10,000 cases); adaptive sets, whose counts
    depend on which pairs were answered, are counted from their rows."""
    with project.read() as s:
        settings = adaptive_settings(s)
        query = select(UnitSet.id, UnitSet.name, UnitSet.kind)
        sets = {set_id: (name, kind) for set_id, name, kind in s.execute(query)}
        adaptive = {i: settings[i].judgements for i in sets if i in settings}
        names = dict(s.execute(select(Annotator.id, Annotator.name)).all())
        table = _plain_tallies(s, list(adaptive))
        table.update(_adaptive_tallies(s, adaptive))
    return [
        ProgressRow(*sets[set_id], names[annotator_id], *counts)
        for (set_id, annotator_id), counts in sorted(
            table.items(), key=lambda item: (item[0][0], names[item[0][1]])
        )
    ]


def _counted(condition) -> Any:
    """SQL: how many rows of a group meet ``condition`` (0 when none: never NULL)."""
    return func.sum(case((condition, 1), else_=0))


def _plain_tallies(s: Session, adaptive: list[int]) -> dict[tuple[int, int], list[int]]:
    """(set, annotator) -> [assigned, shared, drafts, submitted] of the sets not adaptive,
    counted in one grouped query: a unit is shared when it is work for more than one."""
    work = Assignment.is_gold_holder.is_(False)
    raters = (
        select(Assignment.unit_id, func.count().label("n"))
        .where(work)
        .group_by(Assignment.unit_id)
        .subquery()
    )
    query = (
        select(
            Unit.unit_set_id,
            Assignment.annotator_id,
            func.count(),
            _counted(raters.c.n > 1),
            _counted(Answer.status == "draft"),
            _counted(Answer.status == "submitted"),
        )
        .select_from(Assignment)
        .join(Unit, Unit.id == Assignment.unit_id)
        .join(raters, raters.c.unit_id == Assignment.unit_id)
        .outerjoin(Answer, own_answer())
        .where(work)
        .group_by(Unit.unit_set_id, Assignment.annotator_id)
    )
    if adaptive:
        query = query.where(Unit.unit_set_id.not_in(adaptive))
    return {(set_id, a): [int(n) for n in counts] for set_id, a, *counts in plain_rows(s, query)}


def _adaptive_tallies(s: Session, judgements: dict[int, int]) -> dict[tuple[int, int], list[int]]:
    """The same counts for adaptive sets (set id -> judgements asked of each person): a
    person's pairs are those they answered, shared when someone else answered them too, and
    they are assigned at least the judgements asked (``store/adaptive.py``)."""
    if not judgements:
        return {}
    query = (
        select(Assignment.unit_id, Assignment.annotator_id, Unit.unit_set_id, Answer.status)
        .join(Unit, Unit.id == Assignment.unit_id)
        .outerjoin(Answer, own_answer())
        .where(Assignment.is_gold_holder.is_(False), Unit.unit_set_id.in_(list(judgements)))
    )
    rows = plain_rows(s, query)
    raters = Counter(u for u, _a, _set, status in rows if status is not None)
    table: dict[tuple[int, int], list[int]] = {}
    for u, a, set_id, status in rows:
        counts = table.setdefault((set_id, a), [0, 0, 0, 0])
        if status is None:
            continue  # a pair not asked (yet): not this person's work
        counts[0] += 1
        counts[1] += raters[u] > 1
        counts[2] += status == "draft"
        counts[3] += status == "submitted"
    for (set_id, _a), counts in table.items():
        counts[0] = max(counts[0], judgements[set_id])
    return table


def progress_by_kind(rows: Iterable[ProgressRow]) -> list[ProgressRow]:
    """:func:`study_progress` rows summed per (kind, annotator); ``unit_set`` is ``"*"``."""
    table: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        counts = table.setdefault((r.kind, r.annotator), [0, 0, 0, 0])
        for i, v in enumerate((r.assigned, r.shared, r.drafts, r.submitted)):
            counts[i] += v
    return [ProgressRow("*", k, a, *c) for (k, a), c in sorted(table.items())]


__all__ = [
    "RECIPES",
    "AssignmentPlan",
    "CancelFn",
    "Cancelled",
    "CaseFilter",
    "CreatedSet",
    "EventRecorder",
    "HardPair",
    "ProgressFn",
    "ProgressRow",
    "ResponseFilter",
    "SecondAssignment",
    "SetupError",
    "Steps",
    "UnitPlan",
    "UnitSpec",
    "add_annotators",
    "assign_second_annotator",
    "assign_units",
    "create_unit_set",
    "hard_pairs",
    "plan_assignment",
    "plan_units",
    "progress_by_kind",
    "split_with_overlap",
    "study_progress",
]
