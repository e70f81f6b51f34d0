"""What an import did (or, in a dry run, would do)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ImportReport:
    """The outcome of :func:`portalreview.store.importers.import_files`.

    * ``files``: each table read ("cases.csv" or "book.xlsx, sheet 'cases'") -> its format;
    * ``added``: rows added per database table (only tables that grew), e.g.
      ``{"cases": 12, "sentences": 80, "case_tags": 3}``;
    * ``updated``: rows changed per table (a reference level filled in on an existing case);
    * ``ignored_columns``: per table read, the columns (JSON keys) it had that the format does
      not use; they were not imported;
    * ``eppc_mappings``: each EPPC spelling mapped onto the codebook's own -> how many times;
    * ``notes``: everything else worth knowing (an encoding fallback, a span found twice, the
      REDCap mapping used, files skipped);
    * ``dry_run``: True when nothing was saved.
    """

    files: dict[str, str] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    ignored_columns: dict[str, list[str]] = field(default_factory=dict)
    eppc_mappings: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def note(self, text: str) -> None:
        """Add a note once."""
        if text not in self.notes:
            self.notes.append(text)

    def map_eppc(self, descriptions: list[str]) -> None:
        """Count the EPPC spelling mappings ``canonical_eppc`` applied."""
        for text in descriptions:
            self.eppc_mappings[text] = self.eppc_mappings.get(text, 0) + 1

    def summary(self) -> str:
        """A few lines for a terminal or a dialog."""
        head = "Dry run: nothing was saved. It would add" if self.dry_run else "Added"
        added = ", ".join(f"{n} {table}" for table, n in self.added.items()) or "nothing"
        lines = [f"{head}: {added}."]
        if self.updated:
            lines.append("Updated: " + ", ".join(f"{n} {t}" for t, n in self.updated.items()))
        lines += [f"  {label}: {fmt}" for label, fmt in self.files.items()]
        for label, columns in self.ignored_columns.items():
            lines.append(f"Ignored columns in {label}: {', '.join(columns)}")
        for text, count in self.eppc_mappings.items():
            lines.append(f"EPPC spelling mapped ({count}x): {text}")
        lines += [f"Note: {text}" for text in self.notes]
        return "\n".join(lines)
