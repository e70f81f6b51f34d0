"""A model server that hangs or answers in another shape than llama.cpp's: a stand-in server
here (127.0.0.1, standard library) answers like llama-server, except where a test makes one
endpoint hang or reply otherwise. Cancel ends every kind of request within half a second, and
an unexpected reply is a :class:`ModelServerError` naming the server and the endpoint, never a
Python error."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable

import pytest

from portalreview.llm import suggest as sg
from portalreview.llm.engine import GenerationParams
from portalreview.llm.engines.server import ServerEngine
from portalreview.llm.errors import Cancelled, ModelServerError
from portalreview.llm.model_server import ServerSetting
from portalreview.llm.templates import PromptLibrary
from portalreview.store.models import Suggestion

Reply = Callable[[dict], object]
CANCEL_AT = 0.3
PROMPT = "Is this urgent? Answer:"


def _events(*events: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


DONE = {"content": "", "tokens": [], "stop": True, "stop_type": "eos", "timings": {"prompt_n": 1}}


class Stub:
    """llama-server's replies for a tiny character tokenizer; ``replies[path]`` overrides one
    endpoint: a function of the request's JSON body giving the reply (an object to send as
    JSON, bytes to send as they are, or :data:`HANG`)."""

    HANG = object()
    HANG_SECONDS = 30.0

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.released = threading.Event()
        self.hung = threading.Event()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else {}
                reply = stub.replies.get(self.path, stub.default(self.path))(body)
                if reply is Stub.HANG:
                    stub.hung.set()
                    stub.released.wait(Stub.HANG_SECONDS)
                    self.close_connection = True
                    return
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def setting(self) -> ServerSetting:
        return ServerSetting(url=f"http://127.0.0.1:{self.httpd.server_port}", sha256="0" * 64)

    def default(self, path: str) -> Reply:
        return {
            "/health": lambda b: {"status": "ok"},
            "/props": lambda b: {
                "default_generation_settings": {"n_ctx": 8192},
                "model_path": "/models/stub.gguf",
                "total_slots": 1,
            },
            "/v1/models": lambda b: {"data": [{"id": "stub.gguf", "meta": {"n_vocab": 128}}]},
            "/tokenize": lambda b: {
                "tokens": [1] * bool(b.get("add_special")) + [ord(c) % 128 for c in b["content"]]
            },
            "/detokenize": lambda b: {"content": "".join(chr(t) for t in b["tokens"])},
            "/completion": self._completion,
        }[path]

    @staticmethod
    def _completion(body: dict) -> object:
        if body.get("stream"):
            return _events({"content": "Hi", "tokens": [72, 105], "stop": False}, DONE)
        if body.get("n_predict") == 0:
            return {"content": "", "timings": {"prompt_n": len(body["prompt"])}}
        top = [{"id": 89, "logprob": -0.2}, {"id": 78, "logprob": -1.8}]
        return {
            "completion_probabilities": [{"id": 89, "logprob": -0.2, "top_logprobs": top}],
            "timings": {"prompt_n": 1},
        }

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub():
    server = Stub()
    yield server
    server.close()


def _cancelled_soon(call: Callable[[threading.Event], object]) -> tuple[float, object]:
    """Run ``call(cancel)`` with cancel set after CANCEL_AT seconds: (seconds, its outcome)."""
    cancel = threading.Event()
    timer = threading.Timer(CANCEL_AT, cancel.set)
    timer.start()
    started = time.perf_counter()
    try:
        outcome: object = call(cancel)
    except Cancelled as exc:
        outcome = exc
    finally:
        timer.cancel()
    return time.perf_counter() - started, outcome


def test_the_stand_in_answers_like_llama_server(stub) -> None:
    engine = ServerEngine.connect(stub.setting)
    assert engine.info.n_ctx == 8192 and engine.info.file_name == "stub.gguf"
    assert engine.complete(PROMPT, GenerationParams(max_tokens=5)).text == "Hi"
    probs = engine.choice_probabilities([PROMPT], ["YES", "NO"])
    assert probs.probs["YES"] > probs.probs["NO"]


@pytest.mark.parametrize("path", ["/completion", "/tokenize"])
def test_cancel_ends_a_choice_while_the_server_does_not_answer(stub, path) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies[path] = lambda body: Stub.HANG
    seconds, outcome = _cancelled_soon(
        lambda cancel: engine.choice_probabilities([PROMPT], ["YES", "NO"], cancel=cancel)
    )
    assert stub.hung.is_set()
    assert isinstance(outcome, Cancelled)
    assert seconds < CANCEL_AT + 0.5


@pytest.mark.parametrize("path", ["/completion", "/tokenize"])
def test_cancel_ends_a_stream_while_the_server_does_not_answer(stub, path) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies[path] = lambda body: Stub.HANG

    def draft(cancel):
        return engine.stream(PROMPT, GenerationParams(max_tokens=20), cancel=cancel).wait()

    seconds, gen = _cancelled_soon(draft)
    assert stub.hung.is_set()
    assert gen.finish_reason == "cancelled" and gen.text == ""  # as the local engine's
    assert seconds < CANCEL_AT + 0.5


def test_cancel_ends_a_stream_whose_next_token_does_not_come(stub) -> None:
    engine = ServerEngine.connect(stub.setting)

    def slow(body: dict) -> object:
        if not body.get("stream"):
            return Stub._completion(body)
        return Stub.HANG

    stub.replies["/completion"] = slow
    seconds, gen = _cancelled_soon(
        lambda cancel: engine.complete(PROMPT, GenerationParams(max_tokens=20), cancel=cancel)
    )
    assert gen.finish_reason == "cancelled" and seconds < CANCEL_AT + 0.5


def test_a_cancelled_batch_on_a_hung_server_stores_nothing(stub, study) -> None:
    engine = ServerEngine.connect(stub.setting)
    library = PromptLibrary(study.service)
    library.install_defaults()
    stub.replies["/completion"] = lambda body: Stub.HANG

    def batch(cancel):
        return sg.run_batch(
            study.service,
            engine,
            "respond",
            [study.units["respond"]],
            library=library,
            cancel=cancel,
        )

    seconds, report = _cancelled_soon(batch)
    assert report.cancelled and report.stored == [] and report.failed == {}
    assert seconds < CANCEL_AT + 0.5
    with study.service.project.read() as s:
        assert s.query(Suggestion).count() == 0


def test_cancel_ends_a_connect_the_server_does_not_answer(monkeypatch) -> None:
    """A server whose queue of connections is full never answers the handshake: cancel ends
    the connect, which otherwise waits CONNECT_SECONDS (shortened here)."""
    import socket

    from portalreview.llm.engines import server

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = [socket.socket() for _ in range(3)]
    for client in queued:
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
    setting = ServerSetting(url=f"http://127.0.0.1:{port}", sha256="0" * 64)
    try:
        seconds, outcome = _cancelled_soon(
            lambda cancel: server._Http(setting, 600.0, cancel).get_json("/health")
        )
        assert isinstance(outcome, Cancelled) and seconds < CANCEL_AT + 0.5
        monkeypatch.setattr(server, "CONNECT_SECONDS", 1.0)
        with pytest.raises(ModelServerError, match="did not answer in time"):
            server._Http(setting, 600.0).get_json("/health")  # the connect, not the answer
    finally:
        for client in queued:
            client.close()
        listener.close()


def test_without_cancel_a_slow_server_is_waited_for(stub) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies["/completion"] = lambda body: (time.sleep(0.2), Stub._completion(body))[1]
    assert engine.complete(PROMPT, GenerationParams(max_tokens=5)).text == "Hi"


# --- replies of another shape ------------------------------------------------------------------

CONNECT_FAULTS = {
    "health is a list": ("/health", lambda b: []),
    "health is text": ("/health", lambda b: "ok"),
    "health is null": ("/health", lambda b: None),
    "props is a list": ("/props", lambda b: ["model"]),
    "props settings are a list": ("/props", lambda b: {"default_generation_settings": [1]}),
    "context size is text": ("/props", lambda b: {"default_generation_settings": {"n_ctx": "big"}}),
    "models are names": ("/v1/models", lambda b: {"data": ["model-a"]}),
    "models are text": ("/v1/models", lambda b: {"data": "model-a"}),
    "model meta is a list": ("/v1/models", lambda b: {"data": [{"id": "m", "meta": [1]}]}),
    "tokenize without tokens": ("/tokenize", lambda b: {"error": "busy"}),
    "tokens are text": ("/tokenize", lambda b: {"tokens": ["a", "b"]}),
    "tokens are pieces": ("/tokenize", lambda b: {"tokens": [{"id": 1, "piece": "a"}]}),
}


@pytest.mark.parametrize("fault", sorted(CONNECT_FAULTS))
def test_connecting_to_a_server_of_another_shape_names_the_endpoint(stub, fault) -> None:
    path, reply = CONNECT_FAULTS[fault]
    stub.replies[path] = reply
    with pytest.raises(ModelServerError) as raised:
        ServerEngine.connect(stub.setting)
    message = str(raised.value)
    assert stub.setting.url in message and path.split(" ")[0] in message
    assert "llama.cpp server" in message


def _probabilities(entry: object, timings: object = None) -> Reply:
    def reply(body: dict) -> object:
        if body.get("n_predict") == 0:
            return Stub._completion(body)
        return {"completion_probabilities": [entry], "timings": timings or {"prompt_n": 1}}

    return reply


OLD_SHAPE = {"content": "Y", "probs": [{"tok_str": "Y", "prob": 0.9}]}
CHOICE_FAULTS = {
    "probabilities without logprob": _probabilities({"id": 89, "top_logprobs": [{"id": 89}]}),
    "top entries that are numbers": _probabilities(
        {"id": 89, "logprob": -1, "top_logprobs": [1, 2]}
    ),
    "a token id that is text": _probabilities({"id": "Y", "logprob": -1, "top_logprobs": []}),
    "a logprob that is text": _probabilities(
        {"id": 89, "logprob": "-1", "top_logprobs": [{"id": 89, "logprob": "x"}]}
    ),
    "probabilities are a number": _probabilities(7),
    "timings are a list": _probabilities({"id": 89, "logprob": -1, "top_logprobs": []}, [1]),
    "priming answers a list": lambda b: [],
}


@pytest.mark.parametrize("fault", sorted(CHOICE_FAULTS))
def test_probabilities_of_another_shape_are_a_server_error(stub, fault) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies["/completion"] = CHOICE_FAULTS[fault]
    with pytest.raises(ModelServerError, match=f"{stub.setting.url}.*/completion"):
        engine.choice_probabilities([PROMPT], ["YES", "NO"])


@pytest.mark.parametrize("entry", [OLD_SHAPE, {"id": 89, **OLD_SHAPE}])
def test_probabilities_of_older_llama_cpp_servers_name_the_version_needed(stub, entry) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies["/completion"] = _probabilities(entry)
    with pytest.raises(ModelServerError, match=r"older than December 2024.*December 2024 or later"):
        engine.choice_probabilities([PROMPT], ["YES", "NO"])


def _stream(data: bytes) -> Reply:
    return lambda body: data if body.get("stream") else Stub._completion(body)


def test_a_garbled_stream_is_said_to_be_unreadable_not_a_restart(stub) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies["/completion"] = _stream(b'data: {"content": "x", "sto\n\n' + _events(DONE))
    with pytest.raises(ModelServerError, match="sent something unreadable") as raised:
        engine.complete(PROMPT, GenerationParams(max_tokens=5))
    assert "restarted" not in str(raised.value)


def test_an_error_event_shows_the_server_s_message(stub) -> None:
    engine = ServerEngine.connect(stub.setting)
    error = {"error": {"code": 500, "message": "slot crashed", "type": "server_error"}}
    stub.replies["/completion"] = _stream(_events({"content": "a", "tokens": [97]}, error))
    with pytest.raises(ModelServerError, match="error: slot crashed") as raised:
        engine.complete(PROMPT, GenerationParams(max_tokens=5))
    assert "{" not in str(raised.value)


@pytest.mark.parametrize(
    "event",
    [
        [1, 2],
        "text",
        {"content": ["a"], "tokens": [1]},
        {"content": "a", "tokens": "1"},
        {"content": "", "tokens": [], "stop": True, "timings": {"prompt_n": "many"}},
    ],
)
def test_stream_events_of_another_shape_are_a_server_error(stub, event) -> None:
    engine = ServerEngine.connect(stub.setting)
    stub.replies["/completion"] = _stream(_events(event, DONE))
    with pytest.raises(ModelServerError, match=f"{stub.setting.url}.*/completion"):
        engine.complete(PROMPT, GenerationParams(max_tokens=5))


@pytest.mark.parametrize(
    "stop, reason",
    [
        (
            {"truncated": True, "timings": {"prompt_n": 1, "predicted_n": 3}},
            "context (8192 tokens)",
        ),
        ({"timings": {"prompt_n": 1, "predicted_n": 8190}}, "context (8192 tokens) is full"),
        ({"timings": {"prompt_n": 1, "predicted_n": 20}}, "at 20 tokens (raise the token limit)"),
    ],
)
def test_a_cut_off_answer_says_whether_the_context_was_full(stub, stop, reason) -> None:
    """The server's own count of tokens decides (its events leave out the tokens of a
    character cut in two), and its word that the context filled up."""
    engine = ServerEngine.connect(stub.setting)
    end = {"content": "", "tokens": [], "stop": True, "stop_type": "limit", **stop}
    stub.replies["/completion"] = _stream(_events({"content": "a", "tokens": [97]}, end))
    params = GenerationParams(max_tokens=20 if "limit" in reason else 10000)
    gen = engine.complete(PROMPT, params)
    assert gen.finish_reason == "length" and reason in gen.cut_off()
