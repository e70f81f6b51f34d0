"""The dashboard's Models tab: each model pseudo-annotator beside the clinicians
(``analysis.model_eval``), laid out as read-only tables of the workbook model (one per model
and kind), every figure with its 95% interval and n."""

from __future__ import annotations

from portalreview.analysis.model_eval import N_UNITS, NO_DATA, SOURCES, ModelEvaluation, Row
from portalreview.reports.xlsx_report import Cell, Sheet, Table

TAB = "Models"
HEADERS = ["Measure", "Answers of", "Against", "Value", "CI low", "CI high", "n", "Note"]
NUMBER = "0.000"
NO_MODEL = (
    "No model pseudo-annotator has answers among the answers shown. "
    "`portalreview evaluate-model PATH --model FILE.gguf --limit N` runs a local model over "
    "some units of each kind and stores its answers as a pseudo annotator."
)


def _row(row: Row) -> list[Cell]:
    fig = row.figure
    low, high = fig.ci if fig.ci is not None else (None, None)
    who = f"{row.who} (model)" if row.is_model else row.who
    note = fig.note
    if fig.value is None:  # as the command line says it: n, and why there is no figure
        why = f": {fig.note}" if fig.note and fig.note != NO_DATA else ""
        note = f"n={fig.n} — {NO_DATA}{why}"
    return [
        Cell(row.measure),
        Cell(who),
        Cell(row.against or "—"),
        Cell(fig.value, fmt=NUMBER),
        Cell(low, fmt=NUMBER),
        Cell(high, fmt=NUMBER),
        Cell(fig.n),
        Cell(note),
    ]


def model_sheet(evaluation: ModelEvaluation) -> Sheet:
    """The Models tab of ``evaluation``: one table per model and kind."""
    if not evaluation.models:
        return Sheet(TAB, "Models beside the clinicians", NO_MODEL)
    note = (
        "Each model on the units it answered, the clinicians' figures on the same units beside "
        f"it. 95% percentile bootstrap intervals over those units ({evaluation.n_resamples} "
        f"resamples, seed {evaluation.seed}); n = the units a figure rests on. An inbox sorted "
        "by one judge has no interval: its intervals resample judgements."
    )
    for model in evaluation.models:
        ran_on = evaluation.ran_on.get(model, {})
        if ran_on:  # a GPU and a CPU can answer otherwise: say which made what
            places = "; ".join(f"{where} ({n})" for where, n in ran_on.items())
            mixed = " - more than one device or build, pooled" if len(ran_on) > 1 else ""
            note += f"\n{model} ran on: {places}{mixed}."
    sheet = Sheet(TAB, "Models beside the clinicians", note)
    for i, model in enumerate(evaluation.models):
        kinds = dict.fromkeys(r.kind for r in evaluation.rows_of(model))
        for kind in kinds:
            sheet.tables.append(
                Table(
                    f"model_{i}_{kind}",
                    f"{model}: {kind} ({SOURCES[kind]}; n counts {N_UNITS[kind]})",
                    list(HEADERS),
                    [_row(r) for r in evaluation.rows_of(model, kind)],
                )
            )
    return sheet
