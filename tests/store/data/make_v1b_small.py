"""How ``v1b-small.prproj`` was built: with PortalReview at commit 073926e, the last of the first
desktop-app builds (1285cd4..073926e, all "0.1.0"). Their files are in project format 1 but
already let a respond unit name a draft to edit, so the file holds such a unit and its answers.

Run with that version's code and tests on the path::

    git archive 073926e | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old:/tmp/old/tests python tests/store/data/make_v1b_small.py OUT.prproj
"""

import sys
from pathlib import Path

from conftest import build_small_study  # the old version's tests/conftest.py

from portalreview.store.project import Project

EDITED = "I am sorry. Please go to the emergency room now."


def main(out: Path) -> None:
    with Project.create(out, name="Version 1b study") as project:
        st = build_small_study(project)
        svc = st.service
        ava, ben = svc.as_viewer("ava"), svc.as_viewer("ben")
        ava.save_answer(
            st.units["respond"], {"mode": "theme_guided", "parts": {"empathy": "Sorry to hear."}}
        )
        edit_unit = svc.add_unit(
            svc.create_unit_set("edit set", "respond"), st.case1, response_id=st.draft1
        )
        for person in (st.ava, st.ben):
            svc.assign(edit_unit, person)
        draft = {"mode": "edit_draft", "base_response_id": st.draft1}
        ava.save_answer(
            edit_unit, {**draft, "final_text": EDITED, "notes": "short"}, status="submitted"
        )
        ben.save_answer(edit_unit, {**draft, "final_text": "Go to the ER."})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
