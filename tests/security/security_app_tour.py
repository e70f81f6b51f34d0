"""Run by test_security_network.py in a fresh Python process, with the network guard installed
*before* anything of PortalReview is imported:

1. import every module of the program (the GUI, the editors, the model engine, the reports);
2. build the demo study;
3. open it in the app (offscreen) as a clinician and as the PI, switch through every kind tab
   and show a unit in each editor, step to the next unit, and close;
4. load a generated GGUF model and generate a few tokens;
5. write the report as JSON and as Excel, and export the study (xlsx).

Prints one JSON line: the steps done and every network attempt recorded. Usage:
``python security_app_tour.py WORKDIR``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import network_guard

ATTEMPTS = network_guard.install()
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def import_everything() -> list[str]:
    import importlib
    import pkgutil

    import portalreview

    names = []
    for info in pkgutil.walk_packages(portalreview.__path__, "portalreview."):
        if info.name.endswith(".__main__"):  # runs the program when imported
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


def wait(app, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        app.processEvents()
        time.sleep(0.01)


def tour_the_app(path: Path, workdir: Path) -> dict[str, list[str]]:
    from PySide6.QtCore import QSettings

    from portalreview.ui.app import application
    from portalreview.ui.main_window import MainWindow
    from portalreview.ui.settings import Preferences

    app = application(["portalreview"])
    seen: dict[str, list[str]] = {}
    for person in ("np_chloe", "dr_pi"):
        prefs = Preferences(QSettings(str(workdir / "settings.ini"), QSettings.Format.IniFormat))
        window = MainWindow(prefs)
        window.show()
        window.open_project(path, annotator=person)
        wait(app, lambda w=window: w.session is not None)
        if person == "dr_pi":  # the PI looks at a clinician's work (read-only)
            box = window.work_of_box
            box.setCurrentIndex(next(i for i in range(box.count()) if "Ben" in box.itemText(i)))
            app.processEvents()
        kinds = []
        for index in range(window.kind_tabs.count()):
            window.kind_tabs.setCurrentIndex(index)
            app.processEvents()
            kinds.append(window.kind)
            window.step(1)  # the next unit of this kind
            app.processEvents()
        seen[person] = kinds
        window.close()
        app.processEvents()
    return seen


def load_a_model(workdir: Path) -> str:
    from portalreview.llm.engine import Engine, GenerationParams
    from portalreview.llm.testing_model import TINY, prompt_corpus, write_model

    model = write_model(workdir / "tiny.gguf", TINY, corpus=prompt_corpus())
    with Engine.load(model, gpu=False, hash_cache=False) as engine:
        generation = engine.complete("Hello, how are you?", GenerationParams(max_tokens=8))
        return f"{engine.info.describe()}; {len(generation.token_ids)} tokens"


def write_reports(path: Path, workdir: Path) -> list[str]:
    from portalreview.reports.json_report import write_json_report
    from portalreview.reports.xlsx_report import write_xlsx_report
    from portalreview.store.exporters import export_project
    from portalreview.store.project import Project

    with Project.open(path, read_only=True) as project:
        written = [
            write_json_report(project, workdir / "report.json", seed=0, n_resamples=20),
            write_xlsx_report(project, workdir / "report.xlsx", seed=0, n_resamples=20),
            *export_project(project, "xlsx", workdir / "export.xlsx"),
        ]
    return [Path(p).name for p in written]


def main() -> None:
    workdir = Path(sys.argv[1])
    steps: dict[str, object] = {}
    steps["imported"] = len(import_everything())
    from portalreview.demo import build_demo

    demo = build_demo(workdir / "demo.prproj")
    steps["demo"] = demo.name
    steps["app"] = tour_the_app(demo, workdir)
    steps["model"] = load_a_model(workdir)
    steps["reports"] = write_reports(demo, workdir)
    print(json.dumps({"steps": steps, "attempts": ATTEMPTS}), flush=True)


if __name__ == "__main__":
    main()
