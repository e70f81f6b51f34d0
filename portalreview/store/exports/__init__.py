"""Exports for the tools researchers already use (docs/formats.md, "Exports for other tools"):

* ``labelstudio``: Label Studio task JSON with annotations, and the labeling config XML that
  matches their result regions, one pair of files per annotation kind;
* ``prodigy``: Prodigy JSONL tasks (text, tokens, spans, answer) for the span kinds;
* ``redcap``: a REDCap data import CSV of the theme-guided responses and the data dictionary
  CSV that creates the matching instrument;
* ``preferences``: rankings, empathy verdicts and edited drafts as prompt / chosen / rejected
  pairs for preference tuning (TRL's DPO format), pooled and per clinician, or one
  clinician's own (:mod:`portalreview.store.exports.preferences`).

Each writes a folder. Nothing is written when the export is refused (:class:`ExportFailed`),
and the files of one export replace an earlier export's in the folder together
(:func:`portalreview.store.output_files.write_files_together`): a failure or a kill part-way
leaves the earlier export whole, not a mixture of the two or a half file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from portalreview.store.exporters import ExportFailed, Progress
from portalreview.store.exports.snapshot import Snapshot, read_snapshot, streamed_snapshot
from portalreview.store.output_files import write_files_together
from portalreview.store.project import Project

EXTERNAL_FORMATS = ("labelstudio", "prodigy", "redcap", "preferences")

__all__ = ["EXTERNAL_FORMATS", "ExportFailed", "export_external"]


def export_external(
    project: Project,
    fmt: str,
    out: Path,
    *,
    unit_sets: Iterable[str] | None = None,
    annotator: str | None = None,
    progress: Progress | None = None,
) -> list[Path]:
    """Write the project in an external tool's format into the folder ``out`` and return the
    paths written; ``unit_sets`` limits the export to the units of those sets; ``annotator``
    (preferences only) to that person's own answers; ``progress`` is told as the tables are
    read (:func:`~portalreview.store.exporters.stream_tables`)."""
    from portalreview.store.exports import labelstudio, preferences, prodigy, redcap

    writers: dict[str, Callable[[Snapshot], dict[str, bytes]]] = {
        "labelstudio": labelstudio.build,
        "prodigy": prodigy.build,
        "redcap": redcap.build,
    }
    if annotator is not None and fmt != "preferences":
        raise ExportFailed("an export of one annotator's own answers exists for preferences")
    if fmt not in (*writers, "preferences"):
        raise ExportFailed(f"unknown export format {fmt!r}; choose {', '.join(EXTERNAL_FORMATS)}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportFailed(f"{out} is a file; a {fmt} export is written into a folder")
    if fmt == "preferences":  # the answers that make pairs alone, each pair written as made
        kinds = tuple(preferences.PAIRS)
        with streamed_snapshot(project, kinds, sentences=False, progress=progress) as snapshot:
            return preferences.write(_only_sets(snapshot, unit_sets), out, annotator)
    snapshot = _only_sets(read_snapshot(project, progress=progress), unit_sets)
    files = writers[fmt](snapshot)  # everything is built before anything is written
    return write_files_together(out, files)


def _only_sets(snapshot: Snapshot, unit_sets: Iterable[str] | None) -> Snapshot:
    """The snapshot of the units of ``unit_sets`` alone (all when None); a streamed
    snapshot's answers stay streamed."""
    if unit_sets is None:
        return snapshot
    names = list(unit_sets)
    known = {key[0] for key in snapshot.units}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ExportFailed(
            f"no unit set named {', '.join(map(repr, unknown))}; "
            f"the sets with units are {', '.join(sorted(known)) or 'none'}"
        )
    snapshot.units = {k: u for k, u in snapshot.units.items() if k[0] in names}
    in_sets = (a for a in snapshot.answers if a["unit"]["set"] in names)
    snapshot.answers = list(in_sets) if isinstance(snapshot.answers, list) else in_sets
    return snapshot
