"""The network, once a model server is configured: exactly the configured host and port are
reached, nothing else; without a setting, nothing at all. A real llama.cpp server runs on
127.0.0.1 with SmolLM2 (packaging/build_llama_server.py, packaging/fetch_small_model.py).

The guard (tests/security/network_guard.py) records every attempt from Python, also those the
code under test catches; the list must hold nothing but what the test expects."""

from __future__ import annotations

import json

import network_guard
import pytest

from portalreview.cli import main as cli_main
from portalreview.llm import testing_server
from portalreview.llm.model_file import model_sha256
from portalreview.llm.model_server import (
    ServerSetting,
    ServerSettingError,
    check_allowed,
    configured_setting,
    parse_address,
)
from portalreview.store.audit_verify import verify_project
from portalreview.store.models import AuditEntry, Suggestion
from portalreview.store.project import Project
from portalreview.store.service import AccessError

pytestmark = [pytest.mark.real_model, pytest.mark.model_server]


@pytest.fixture(scope="module")
def served(llama_server_binary, real_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with testing_server.running(llama_server_binary, real_model_path, slots=1, log=log) as srv:
        yield srv


@pytest.fixture
def guard_for(served):
    """Install the guard allowing only the server's address; yields the attempts list."""
    holder: dict[str, list[str]] = {}

    def install(allow: frozenset[tuple[str, int]]) -> list[str]:
        holder["attempts"] = network_guard.install(allow)
        return holder["attempts"]

    yield install
    network_guard.uninstall()


def test_suggestions_reach_the_configured_server_and_nothing_else(
    study_file, served, real_model_path, guard_for, capsys
) -> None:
    path = str(study_file[0])
    sha = model_sha256(real_model_path, None)
    assert cli_main(["model-server", path, "--set", served.url, "--sha256", sha]) == 0
    attempts = guard_for(frozenset({("127.0.0.1", served.port)}))
    code = cli_main(["suggest", path, "--model", served.url, "--kind", "empathy",
                     "--max-tokens", "64"])
    assert code in (0, 1), capsys.readouterr().err  # 1: the gates refused SmolLM2's answer
    assert attempts == []
    with Project.open(study_file[0], read_only=True) as project, project.read() as s:
        row = s.query(Suggestion).one()
        assert json.loads(row.params_json)["model_origin"]["server"] == served.url
        assert row.model_sha256 == sha

    other = f"http://127.0.0.1:{served.port + 1}"
    code = cli_main(["suggest", path, "--model", other, "--kind", "urgency"])
    err = capsys.readouterr().err
    assert code == 2 and "is not the configured model server" in err
    assert attempts == []  # refused before any socket was made


def test_with_no_server_configured_no_address_is_reached(
    study_file, served, guard_for, capsys, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("PORTALREVIEW_MACHINE_SETTINGS", str(tmp_path / "none.json"))
    attempts = guard_for(frozenset())
    code = cli_main(["suggest", str(study_file[0]), "--model", served.url,
                     "--kind", "urgency"])
    assert code == 2 and "no model server is configured" in capsys.readouterr().err
    assert attempts == []


def test_the_machine_setting_is_used_when_the_project_names_none(
    study, served, real_model_path, monkeypatch, tmp_path
) -> None:
    machine = tmp_path / "model-server.json"
    sha = model_sha256(real_model_path, None)
    machine.write_text(json.dumps({"url": served.url + "/", "sha256": sha}))
    monkeypatch.setenv("PORTALREVIEW_MACHINE_SETTINGS", str(machine))
    setting = configured_setting(study.service.project)
    assert setting is not None and setting.origin == str(machine)
    assert setting.url == served.url  # normalised
    project_setting = ServerSetting(url="http://127.0.0.1:9", sha256=sha)
    study.service.set_model_server(project_setting.to_json())
    assert configured_setting(study.service.project).url == "http://127.0.0.1:9"  # project wins


def test_model_server_command_sets_checks_and_clears(
    study_file, served, real_model_path, capsys, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("PORTALREVIEW_MACHINE_SETTINGS", str(tmp_path / "none.json"))
    path = str(study_file[0])
    sha = model_sha256(real_model_path, None)
    assert cli_main(["model-server", path, "--set", served.url, "--sha256", sha]) == 0
    out = capsys.readouterr().out
    assert "It answers" in out and "SmolLM2" in out and "chat" in out
    assert cli_main(["model-server", path, "--set", served.url]) == 2
    assert "needs 'sha256'" in capsys.readouterr().err
    assert cli_main(["model-server", path, "--set", "ftp://x", "--sha256", sha]) == 2
    assert "not a server address" in capsys.readouterr().err
    assert cli_main(["model-server", path, "--clear"]) == 0
    assert "opens no network connection" in capsys.readouterr().out
    with Project.open(study_file[0], read_only=True) as project:
        with project.read() as s:
            entries = s.query(AuditEntry).filter(AuditEntry.action == "model_server").all()
            assert [e.new_json is None for e in entries] == [False, True]  # set, then cleared
        assert verify_project(project).ok


def test_only_the_pi_names_the_model_server(study) -> None:
    clinician = study.service.as_viewer("ava")
    with pytest.raises(AccessError, match="model server"):
        clinician.set_model_server(ServerSetting(url="http://h:1", sha256="a" * 64).to_json())


def test_addresses_are_checked_exactly() -> None:
    setting = ServerSetting(url="https://gpu.hospital.local:8443", sha256="a" * 64, origin="x")
    check_allowed("https://gpu.hospital.local:8443/", setting)
    check_allowed("https://GPU.hospital.local:8443", setting)
    for other in ("http://gpu.hospital.local:8443", "https://gpu.hospital.local:8080",
                  "https://gpu.hospital.local", "https://evil.example:8443"):
        with pytest.raises(ServerSettingError, match="not the configured model server"):
            check_allowed(other, setting)
    for bad in ("gpu:8080", "https://gpu:8443/v1", "https://user@gpu:8443", "file:///etc"):
        with pytest.raises(ServerSettingError):
            parse_address(bad)
    assert parse_address("http://[::1]:8080").url == "http://[::1]:8080"


def test_a_certificate_file_tls_cannot_read_is_refused_naming_it(study_file, tmp_path) -> None:
    """It was saved, and every later connection failed with OpenSSL's words alone
    ("[X509: NO_CERTIFICATE_OR_CRL_FOUND] ...")."""
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    data = {"url": "https://gpu.hospital.local:8443", "sha256": "a" * 64, "ca_file": str(junk)}
    with pytest.raises(ServerSettingError, match=r"junk\.pem as the certificate file, which holds"):
        ServerSetting.from_dict(data, "the command line")
    path = str(study_file[0])
    assert cli_main(["model-server", path, "--set", data["url"], "--sha256", data["sha256"],
                     "--ca-file", str(junk)]) == 2  # fmt: skip
    with Project.open(study_file[0], read_only=True) as project, project.read() as s:
        assert not s.query(AuditEntry).filter(AuditEntry.action == "model_server").all()
