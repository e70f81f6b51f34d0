"""Where a shared model server is, and the only address the program may reach.

The program opens no network connection unless the PI or hospital IT has named a model server:
in the project (``portalreview model-server PROJECT --set URL --sha256 HEX``, stored in the
project's metadata, so every copy of the study uses the same server) or in the machine's
settings file (``model-server.json`` in the machine-wide folder, or the file named by
``PORTALREVIEW_MACHINE_SETTINGS``). The project's setting wins over the machine's.

A setting holds the server's address (``http://`` or ``https://``, host and port, nothing
else), the SHA-256 of the model file the server runs (llama.cpp's server does not report a
file's hash, so IT writes down the one it installed; suggestions record it), and for TLS an
optional certificate authority file. :func:`check_allowed` is what every connection passes:
exactly that scheme, host and port, or a refusal that says what was asked and what is allowed.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from portalreview.llm.errors import LlmError

PROJECT_KEY = "model_server"
MACHINE_FILE = "model-server.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ServerSettingError(LlmError):
    """A model-server setting is malformed, or an address is not the one allowed."""


@dataclass(frozen=True)
class ServerAddress:
    scheme: str  # "http" or "https"
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class ServerSetting:
    """A configured model server (see the module's docstring)."""

    url: str
    sha256: str
    ca_file: str | None = None
    origin: str = ""  # "project" or the machine file's path; not stored

    @property
    def address(self) -> ServerAddress:
        return parse_address(self.url)

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k != "origin" and v is not None}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any, origin: str) -> ServerSetting:
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise ServerSettingError(f"the model-server setting in {origin} has no 'url'")
        setting = cls(
            url=parse_address(data["url"]).url,
            sha256=str(data.get("sha256", "")).lower(),
            ca_file=data.get("ca_file") or None,
            origin=origin,
        )
        if not _SHA256.match(setting.sha256):
            raise ServerSettingError(
                f"the model-server setting in {origin} needs 'sha256': the SHA-256 of the model "
                "file the server runs, 64 hexadecimal digits (IT: sha256sum MODEL.gguf)"
            )
        if setting.ca_file and not Path(setting.ca_file).is_file():
            raise ServerSettingError(
                f"the model-server setting in {origin} names a certificate file that does not "
                f"exist: {setting.ca_file}"
            )
        if setting.ca_file:
            _check_certificates(setting.ca_file, origin)
        return setting


def _check_certificates(ca_file: str, origin: str) -> None:
    """Refuse a CA file TLS cannot read (not PEM, not a certificate): saved, it made every
    later connection fail with OpenSSL's words alone, naming neither file nor server."""
    try:
        ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise ServerSettingError(
            f"the model-server setting in {origin} names {ca_file} as the certificate file, "
            f"which holds no certificate TLS can read (a PEM file, '-----BEGIN "
            f"CERTIFICATE-----'): {getattr(exc, 'reason', None) or exc}"
        ) from None


def parse_address(url: str) -> ServerAddress:
    """``http(s)://host:port`` (a trailing slash allowed; no path, user, query or fragment)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ServerSettingError(f"not a server address: {url!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerSettingError(
            f"not a server address: {url!r}; write it as http://HOST:PORT or https://HOST:PORT"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ServerSettingError(
            f"a server address is only the scheme, host and port: {url!r} has more"
        )
    default = 443 if parts.scheme == "https" else 80
    return ServerAddress(parts.scheme, parts.hostname.lower(), port or default)


def looks_like_address(text: str) -> bool:
    """Whether a model argument names a server rather than a file."""
    return text.strip().lower().startswith(("http://", "https://"))


def check_allowed(requested: str | ServerAddress, setting: ServerSetting | None) -> None:
    """Raise :class:`ServerSettingError` unless ``requested`` is exactly the configured
    server (scheme, host and port)."""
    wanted = parse_address(requested) if isinstance(requested, str) else requested
    if setting is None:
        raise ServerSettingError(
            f"no model server is configured, so {wanted} may not be reached: the PI sets one "
            "with 'portalreview model-server PROJECT --set URL --sha256 HEX', or IT in the "
            f"machine's {MACHINE_FILE}"
        )
    if wanted != setting.address:
        raise ServerSettingError(
            f"{wanted} is not the configured model server ({setting.address}, from "
            f"{setting.origin or 'the settings'}); the program connects to no other address"
        )


# --- where settings live ---------------------------------------------------------------------


def machine_settings_path() -> Path:
    """The machine-wide settings file (IT's, not the user's)."""
    if os.environ.get("PORTALREVIEW_MACHINE_SETTINGS"):
        return Path(os.environ["PORTALREVIEW_MACHINE_SETTINGS"])
    if sys.platform == "win32":
        base = Path(os.environ.get("PROGRAMDATA", r"C:\ProgramData")) / "PortalReview"
    elif sys.platform == "darwin":
        base = Path("/Library/Application Support/PortalReview")
    else:
        base = Path("/etc/portalreview")
    return base / MACHINE_FILE


def machine_setting() -> ServerSetting | None:
    path = machine_settings_path()
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServerSettingError(f"the machine's model-server settings {path} cannot be read: "
                                 f"{exc}") from None
    return ServerSetting.from_dict(data, str(path))


def project_setting(project: Any) -> ServerSetting | None:
    """The setting stored in a project (:class:`~portalreview.store.project.Project`)."""
    raw = project.meta(PROJECT_KEY)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        raise ServerSettingError("the project's model-server setting is not valid JSON") from None
    return ServerSetting.from_dict(data, "project")


def configured_setting(project: Any | None = None) -> ServerSetting | None:
    """The project's setting when it has one, else the machine's, else None (no network)."""
    if project is not None:
        setting = project_setting(project)
        if setting is not None:
            return setting
    return machine_setting()
