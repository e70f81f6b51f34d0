"""Small studies for the analysis tests, built through the service layer (as the app does)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from portalreview.store.frames import StudyFrames, read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService


@dataclass
class Study:
    """A project, its service and the ids the test made, by the test's own names."""

    project: Project
    svc: StudyService
    people: dict[str, int] = field(default_factory=dict)
    cases: dict[str, int] = field(default_factory=dict)
    responses: dict[str, int] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)
    sets: dict[str, int] = field(default_factory=dict)

    def person(self, name: str, *, model: bool = False, role: str = "clinician") -> int:
        self.people[name] = self.svc.add_annotator(name, name, role=role, is_model=model)
        return self.people[name]

    def case(self, key: str, message: str, level: int | None = None, **tags: str) -> int:
        self.cases[key] = self.svc.add_case(key, message, urgency_level=level, tags=tags or None)
        return self.cases[key]

    def response(self, key: str, case: str, text: str, kind: str, source: str = "") -> int:
        self.responses[key] = self.svc.add_response(
            self.cases[case], key, text, author_kind=kind, author=source, source=source
        )
        return self.responses[key]

    def unit(self, key: str, kind: str, case: str, *, who: list[str], **refs) -> int:
        if kind not in self.sets:
            self.sets[kind] = self.svc.create_unit_set(f"{kind} units", kind)
        self.units[key] = self.svc.add_unit(self.sets[kind], self.cases[case], **refs)
        for name in who:
            self.svc.assign(self.units[key], self.people[name])
        return self.units[key]

    def answer(self, unit: str, name: str, payload: dict, *, gold: bool = False, **kw) -> None:
        self.svc.save_answer(
            self.units[unit],
            payload,
            status="submitted",
            annotator_id=self.people[name],
            gold=gold,
            **kw,
        )

    def sentences(self, response: str) -> list:
        return self.svc.sentences(response_id=self.responses[response])

    def case_sentences(self, case: str) -> list:
        return self.svc.sentences(case_id=self.cases[case])

    def presentation(self, unit: str, name: str) -> dict:
        viewer = self.svc.as_viewer(name)
        return viewer.read_unit(self.units[unit]).presentation

    def frames(self) -> StudyFrames:
        return read_frames(self.project)


def new_study(folder: Path) -> Study:
    project = Project.create(folder / "study.prproj", name="analysis test")
    return Study(project, StudyService(project))


def span_of(text: str, piece: str) -> list[int]:
    """[start, end] of the first occurrence of ``piece`` in ``text``."""
    start = text.index(piece)
    return [start, start + len(piece)]
