"""Refuse, and record, every attempt to use the network from Python.

:func:`install` replaces the ways Python code reaches the network: creating an ``AF_INET`` or
``AF_INET6`` socket (``socket.socket.__init__``, which every higher layer goes through:
``http.client``, ``urllib``, ``requests``, ``huggingface_hub``...), ``connect``/``connect_ex``,
``socket.create_connection`` and name lookups (``getaddrinfo``, ``gethostbyname``). Each
attempt raises :class:`NetworkAttempt` *and* is appended to the returned list, so an attempt
that the code under test catches and hides is still seen by the test.

Local (``AF_UNIX``) sockets stay allowed: they never leave the machine. What native code
(Qt, llama.cpp) does below Python is checked separately, with strace, in
tests/security/test_security_network.py.
"""

from __future__ import annotations

import socket
import traceback
from collections.abc import Callable

_NETWORK_FAMILIES = {socket.AF_INET, socket.AF_INET6}


class NetworkAttempt(OSError):
    """Raised instead of touching the network."""


_saved: dict[tuple[object, str], Callable] = {}


def _stack() -> str:
    return "".join(traceback.format_stack(limit=12)[:-2])


def install(allow: frozenset[tuple[str, int]] = frozenset()) -> list[str]:
    """Patch the socket module; returns the list the attempts are recorded in. ``allow``: the
    (host, port) pairs that may be reached (a configured model server); everything else is
    refused. With an allowed pair, creating a socket is allowed (its address is known only at
    ``connect``)."""
    attempts: list[str] = []

    def allowed(address: object) -> bool:
        return isinstance(address, tuple) and (address[0], address[1]) in allow

    def refuse(what: str):
        attempts.append(f"{what}\n{_stack()}")
        raise NetworkAttempt(f"network access refused in this test: {what}")

    original_init = socket.socket.__init__

    def guarded_init(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None and (family == -1 or family in _NETWORK_FAMILIES) and not allow:
            refuse(f"socket.socket(family={family!r})")
        original_init(self, family, type, proto, fileno)

    def guarded_connect(self, address):
        if self.family in _NETWORK_FAMILIES and not allowed(address):
            refuse(f"socket.connect({address!r})")
        return _saved[(socket.socket, "connect")](self, address)

    def guarded_connect_ex(self, address):
        if self.family in _NETWORK_FAMILIES and not allowed(address):
            refuse(f"socket.connect_ex({address!r})")
        return _saved[(socket.socket, "connect_ex")](self, address)

    def guarded_function(name: str):
        def guarded(*args, **kwargs):
            if name in ("create_connection", "getaddrinfo") and args:
                address = args[0] if name == "create_connection" else args[:2]
                if allowed(address):
                    return _saved[(socket, name)](*args, **kwargs)
            refuse(f"socket.{name}{args!r}")

        return guarded

    replacements: dict[tuple[object, str], Callable] = {
        (socket.socket, "__init__"): guarded_init,
        (socket.socket, "connect"): guarded_connect,
        (socket.socket, "connect_ex"): guarded_connect_ex,
    }
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        replacements[(socket, name)] = guarded_function(name)
    for (owner, name), replacement in replacements.items():
        _saved.setdefault((owner, name), getattr(owner, name))
        setattr(owner, name, replacement)
    return attempts


def uninstall() -> None:
    for (owner, name), original in _saved.items():
        setattr(owner, name, original)
    _saved.clear()
