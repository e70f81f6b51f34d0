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

from portalreview.store.exporters import ExportFailed
from portalreview.store.exports.snapshot import Snapshot, read_snapshot
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
) -> list[Path]:
    """Write the project in an external tool's format into the folder ``out`` and return the
    paths written; ``unit_sets`` limits the export to the units of those sets; ``annotator``
    (preferences only) to that person's own answers."""
    from portalreview.store.exports import labelstudio, preferences, prodigy, redcap

    writers: dict[str, Callable[[Snapshot], dict[str, bytes]]] = {
        "labelstudio": labelstudio.build,
        "prodigy": prodigy.build,
        "redcap": redcap.build,
        "preferences": lambda snap: preferences.build(snap, annotator),
    }
    if annotator is not None and fmt != "preferences":
        raise ExportFailed("an export of one annotator's own answers exists for preferences")
    if fmt not in writers:
        raise ExportFailed(f"unknown export format {fmt!r}; choose {', '.join(writers)}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportFailed(f"{out} is a file; a {fmt} export is written into a folder")
    snapshot = read_snapshot(project)
    if unit_sets is not None:
        snapshot = _only_sets(snapshot, list(unit_sets))
    files = writers[fmt](snapshot)  # everything is built before anything is written
    return write_files_together(out, files)


def _only_sets(snapshot: Snapshot, names: list[str]) -> Snapshot:
    known = {key[0] for key in snapshot.units}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ExportFailed(
            f"no unit set named {', '.join(map(repr, unknown))}; "
            f"the sets with units are {', '.join(sorted(known)) or 'none'}"
        )
    snapshot.units = {k: u for k, u in snapshot.units.items() if k[0] in names}
    snapshot.answers = [a for a in snapshot.answers if a["unit"]["set"] in names]
    return snapshot
