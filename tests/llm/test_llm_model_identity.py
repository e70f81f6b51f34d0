"""A model file written over while it is loaded: IT updates a model on the shared folder with
``cp new.gguf model.gguf`` (docs/deployment.md). llama.cpp maps the file into memory, so the
loaded model then answers with the new file's bytes; a suggestion or draft stored from then on
must not record the old file's SHA-256. The engines notice (one ``os.stat`` per use of the hash)
and refuse; a run stops with the reason and keeps what it stored before."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from llm_testkit import PARAMS, SMALL_LIMITS, drafts_end_at_the_limit, tiny_model_file

from portalreview.llm import suggest as sg
from portalreview.llm.engine import GenerationParams
from portalreview.llm.engines import load_engine
from portalreview.llm.errors import ModelFileChanged
from portalreview.llm.model_file import model_sha256
from portalreview.llm.templates import PromptLibrary, default_template
from portalreview.llm.testing_model import TINY, prompt_corpus, write_model
from portalreview.store.models import Suggestion
from portalreview.store.templates import response_by_external_id

OPTIONS = {"gpu": False, "hash_cache": False, "n_threads": 1}
CHANGED = "changed on disk since it was loaded"


@pytest.fixture
def files(tmp_path_factory, tmp_path) -> tuple[Path, Path]:
    """``model.gguf`` (the tiny model) and ``other.gguf``: other weights, the same size."""
    model = tmp_path / "model.gguf"
    shutil.copyfile(tiny_model_file(tmp_path_factory), model)
    other = write_model(tmp_path / "other.gguf", TINY, seed=7, corpus=prompt_corpus())
    assert other.stat().st_size == model.stat().st_size
    return model, other


def write_over(model: Path, other: Path) -> None:
    """What ``cp other.gguf model.gguf`` does: the same file (inode), new bytes."""
    shutil.copyfile(other, model)


def stored_hashes(study) -> list[str]:
    with study.service.project.read() as s:
        return [row.model_sha256 for row in s.query(Suggestion).all()]


@pytest.mark.parametrize("isolated", [True, False], ids=["process", "in-process"])
def test_a_suggestion_made_after_the_file_was_written_over_is_not_stored(
    files, study, isolated
) -> None:
    model, other = files
    unit = study.service.read_unit(study.units["empathy"])
    with load_engine(model, isolated=isolated, **OPTIONS) as engine:
        old = engine.sha256
        ctx = sg.SuggestContext(
            engine,
            study.service.catalogs,
            sg.resolve_templates(PromptLibrary(study.service), "empathy"),
            PARAMS,
            SMALL_LIMITS,
        )
        write_over(model, other)
        answer = sg.gated(sg.suggest(ctx, unit), unit, ctx.catalogs)
        with pytest.raises(ModelFileChanged, match=CHANGED) as caught:
            sg.store(study.service, engine, answer)
    assert str(caught.value).startswith("load the model again: its file model.gguf")
    assert old != model_sha256(model)
    assert stored_hashes(study) == []


def test_a_batch_stops_at_the_unit_after_the_file_was_written_over(files, study) -> None:
    """What ``portalreview suggest`` runs: the unit stored before keeps its (right) hash; the
    next one is not stored, and the run ends with the reason."""
    model, other = files
    service = study.service
    second = service.add_unit(
        service.create_unit_set("more empathy", "empathy"),
        study.case1,
        response_id=study.original,
        response_b_id=study.edited,
    )
    units = [study.units["empathy"], second]
    with load_engine(model, isolated=True, **OPTIONS) as engine:
        old = engine.sha256
        with pytest.raises(ModelFileChanged, match=CHANGED):
            sg.run_batch(
                service,
                engine,
                "empathy",
                units,
                params=PARAMS,
                limits=SMALL_LIMITS,
                progress=lambda _report, _unit: write_over(model, other),
            )
    assert stored_hashes(study) == [old]


def test_drafts_stop_when_the_file_was_written_over(files, study, monkeypatch) -> None:
    drafts_end_at_the_limit(monkeypatch)
    model, other = files
    service = study.service
    cases = service.read_unit(study.units["urgency"]).cases  # two cases
    template = default_template("draft_zero_shot")
    with load_engine(model, isolated=True, **OPTIONS) as engine:
        old = engine.sha256
        report = sg.run_drafts(
            service,
            engine,
            cases,
            template,
            params=GenerationParams(max_tokens=8),
            progress=lambda _report, _case: write_over(model, other),
        )
        assert report.stored == [cases[0].id]
        assert report.stopped is not None and CHANGED in report.stopped
        again = sg.run_drafts(service, engine, cases[1:], template)
        assert again.stored == [] and CHANGED in (again.stopped or "")
    draft = response_by_external_id(
        service, f"llm:{old[:12]}:{template.key}:{cases[0].external_id}"
    )
    provenance = sg.draft_provenance(service, draft)
    assert provenance is not None and provenance["model_sha256"] == old


def test_a_file_replaced_under_its_name_is_noticed(files) -> None:
    """A copy moved into place (a new inode): the model still runs the old weights, but the
    path now names other bytes, and a hash taken from it would be theirs."""
    model, other = files
    with load_engine(model, isolated=False, **OPTIONS) as engine:
        os.replace(other, model)
        with pytest.raises(ModelFileChanged, match=CHANGED):
            _ = engine.sha256


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
def test_a_copy_that_keeps_the_size_and_modification_time_is_noticed(files) -> None:
    """``cp -p`` of a file of the same size: only the change time tells."""
    model, other = files
    before = model.stat()
    with load_engine(model, isolated=False, **OPTIONS) as engine:
        write_over(model, other)
        os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert model.stat().st_size == before.st_size
        with pytest.raises(ModelFileChanged, match=CHANGED):
            _ = engine.sha256


def test_an_untouched_file_keeps_its_hash(files) -> None:
    model, _other = files
    with load_engine(model, isolated=True, **OPTIONS) as engine:
        assert engine.sha256 == engine.sha256 == model_sha256(model)
