"""Importing studies: cases and responses, PMR-Bench files, REDCap exports, EPPC annotations,
and the portable files of an export (annotators, units, assignments, answers...).

Public API::

    report = import_files(project, [Path("cases.csv"), Path("responses.xlsx")])
    mapping = propose_redcap_mapping(project, records_csv, dictionary_csv)
    import_files(project, [records_csv, dictionary_csv], redcap_mapping=mapping.fields)

Every call is one transaction: on any error nothing changes and :class:`ImportFailed` says
which file, row (or line) and field, and what was expected. docs/formats.md documents every
format.
"""

from portalreview.store.importers.cases import parse_chart_text
from portalreview.store.importers.core import import_files
from portalreview.store.importers.errors import ImportFailed
from portalreview.store.importers.formats import FORMATS
from portalreview.store.importers.pmr import message_id
from portalreview.store.importers.redcap import RedcapMapping, propose_redcap_mapping
from portalreview.store.importers.report import ImportReport

__all__ = [
    "FORMATS",
    "ImportFailed",
    "ImportReport",
    "RedcapMapping",
    "import_files",
    "message_id",
    "parse_chart_text",
    "propose_redcap_mapping",
]
