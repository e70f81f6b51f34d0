"""Model files: read and check a GGUF file's header in pure Python before llama.cpp sees it,
estimate the memory a model needs, hash it once, and scan a models folder.

llama.cpp refuses most bad files politely, but not all of them, and its refusals read like
"failed to load model". Here every problem gets a sentence a clinician can act on: the file is
missing, is not GGUF, is of an unknown GGUF version, is truncated (the copy did not finish), or
does not fit in memory.

The GGUF layout read here (little-endian): magic ``GGUF``, version (uint32), tensor count and
key/value count (uint64), the key/value pairs, the tensor descriptions (name, dimensions, type,
offset), then the tensor data, aligned to ``general.alignment`` (default 32) bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from portalreview.llm.errors import ModelFileChanged, ModelFileError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
GIB = 1024**3

# ggml tensor types: id -> (name, elements per block, bytes per block).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}

# GGUF metadata value types: id -> struct format of a scalar (None: string / array).
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_KEY = 65_536
_MAX_STRING = 64 * 1024 * 1024
_MAX_DIMS = 4
_MAX_COUNT = 10_000_000
_KEEP_ARRAY = 64  # arrays up to this length are kept in the metadata; longer: only the length


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: the first dimension is the contiguous one
    type_id: int
    offset: int  # relative to the start of the data section
    nbytes: int | None  # None for a tensor type this reader does not know

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.type_id, (f"type {self.type_id}", 0, 0))[0]


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file says about itself, read without loading any weights."""

    path: Path
    version: int
    file_size: int
    metadata: dict[str, Any]
    array_lengths: dict[str, int]
    tensors: tuple[TensorInfo, ...]
    data_offset: int

    def _arch_key(self, key: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}")

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name") or self.path.stem)

    @property
    def context_length(self) -> int | None:
        return _int_or_none(self._arch_key("context_length"))

    @property
    def block_count(self) -> int | None:
        return _int_or_none(self._arch_key("block_count"))

    @property
    def embedding_length(self) -> int | None:
        return _int_or_none(self._arch_key("embedding_length"))

    @property
    def head_count(self) -> int | None:
        return _first_int(self._arch_key("attention.head_count"))

    @property
    def head_count_kv(self) -> int | None:
        value = _first_int(self._arch_key("attention.head_count_kv"))
        return value if value is not None else self.head_count

    @property
    def vocab_size(self) -> int | None:
        return self.array_lengths.get("tokenizer.ggml.tokens")

    @property
    def weights_bytes(self) -> int:
        """Bytes of tensor data (what a forward pass reads, near enough)."""
        return sum(t.nbytes or 0 for t in self.tensors)

    @property
    def n_params(self) -> int:
        total = 0
        for t in self.tensors:
            count = 1
            for d in t.shape:
                count *= d
            total += count
        return total

    @property
    def weight_types(self) -> dict[str, int]:
        """Tensor type name -> number of tensors of that type (e.g. {"Q8_0": 169, "F32": 49})."""
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.type_name] = out.get(t.type_name, 0) + 1
        return out

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int | None:
        """Memory of the key/value cache for one token of context (F16 cache by default)."""
        layers, heads, embd = self.block_count, self.head_count, self.embedding_length
        if not (layers and heads and embd):
            return None
        head_dim = embd // heads
        key = _int_or_none(self._arch_key("attention.key_length")) or head_dim
        value = _int_or_none(self._arch_key("attention.value_length")) or head_dim
        kv_heads = self.head_count_kv or heads
        return layers * kv_heads * (key + value) * bytes_per_value


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _first_int(value: Any) -> int | None:
    if isinstance(value, list):  # per-layer arrays (some architectures)
        value = max(value) if value else None
    return _int_or_none(value)


class _Reader:
    """Bounded little-endian reads that turn an early end of file into a clear message."""

    def __init__(self, fh: BinaryIO, path: Path, size: int) -> None:
        self.fh, self.path, self.size = fh, path, size

    def read(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise ModelFileError(
                f"{self.path.name} is truncated: it ends inside its header, at {self.size:,} "
                "bytes. The download or copy did not finish; copy the file again."
            )
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def count(self, what: str, limit: int = _MAX_COUNT) -> int:
        n = self.scalar("<Q")
        if n > limit:
            raise ModelFileError(
                f"{self.path.name} is damaged: its header claims {n:,} {what}, which no model "
                "has. Copy the file again."
            )
        return n

    def string(self, limit: int = _MAX_STRING) -> str:
        n = self.count("bytes in one text", limit)
        return self.read(n).decode("utf-8", errors="replace")

    def skip(self, n: int) -> None:
        if self.fh.tell() + n > self.size:
            self.read(self.size - self.fh.tell() + 1)  # raises "truncated"
        self.fh.seek(n, os.SEEK_CUR)


def _read_value(r: _Reader, type_id: int, key: str, lengths: dict[str, int]) -> Any:
    if type_id in _SCALARS:
        return r.scalar(_SCALARS[type_id])
    if type_id == _STRING:
        return r.string()
    if type_id != _ARRAY:
        raise ModelFileError(
            f"{r.path.name} is damaged: metadata {key!r} has unknown value type {type_id}."
        )
    elem = r.scalar("<I")
    n = r.count(f"entries in {key!r}")
    lengths[key] = n
    if elem in _SCALARS and n > _KEEP_ARRAY:
        r.skip(n * struct.calcsize(_SCALARS[elem]))
        return None
    if elem == _STRING and n > _KEEP_ARRAY:
        for _ in range(n):
            r.skip(r.count("bytes in one text", _MAX_STRING))
        return None
    return [_read_value(r, elem, key, {}) for _ in range(n)]


def _read_tensor(r: _Reader) -> TensorInfo:
    name = r.string(_MAX_KEY)
    n_dims = r.scalar("<I")
    if not 1 <= n_dims <= _MAX_DIMS:
        raise ModelFileError(
            f"{r.path.name} is damaged: tensor {name!r} has {n_dims} dimensions (1 to 4 allowed)."
        )
    shape = tuple(r.scalar("<Q") for _ in range(n_dims))
    type_id = r.scalar("<I")
    offset = r.scalar("<Q")
    return TensorInfo(name, shape, type_id, offset, _tensor_bytes(r.path, name, shape, type_id))


def _tensor_bytes(path: Path, name: str, shape: tuple[int, ...], type_id: int) -> int | None:
    if type_id not in GGML_TYPES:
        return None
    _, block, size = GGML_TYPES[type_id]
    if any(d < 0 for d in shape) or shape[0] % block:
        raise ModelFileError(
            f"{path.name} is damaged: tensor {name!r} has a shape {list(shape)} that does not "
            f"fit its type {GGML_TYPES[type_id][0]}."
        )
    count = 1
    for d in shape:
        count *= d
    return count // block * size


def read_header(path: str | os.PathLike) -> GgufHeader:
    """Read and check a GGUF file's header and tensor table; raise :class:`ModelFileError` with
    a readable reason for a missing, non-GGUF, unsupported, damaged or truncated file."""
    path = Path(path)
    size = _existing_file_size(path)
    with path.open("rb") as fh:
        r = _Reader(fh, path, size)
        magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise ModelFileError(_not_gguf_message(path, magic + fh.read(12)))
        version = r.scalar("<I")
        if version not in SUPPORTED_VERSIONS:
            raise ModelFileError(_version_message(path, version))
        n_tensors = r.count("tensors", 1_000_000)
        n_kv = r.count("metadata entries", 1_000_000)
        metadata: dict[str, Any] = {}
        lengths: dict[str, int] = {}
        for _ in range(n_kv):
            key = r.string(_MAX_KEY)
            metadata[key] = _read_value(r, r.scalar("<I"), key, lengths)
        tensors = tuple(_read_tensor(r) for _ in range(n_tensors))
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise ModelFileError(f"{path.name} is damaged: its alignment {alignment!r} is invalid.")
        data_offset = -(-fh.tell() // alignment) * alignment
    header = GgufHeader(path, version, size, metadata, lengths, tensors, data_offset)
    _check_tensors(header, alignment)
    _check_tokenizer(header)
    return header


def _existing_file_size(path: Path) -> int:
    if not path.exists():
        raise ModelFileError(f"There is no model file {path}.")
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder, not a model file: choose a .gguf file.")
    try:
        size = path.stat().st_size
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ModelFileError(f"{path} cannot be read: {exc.strerror}.") from exc
    if size == 0:
        raise ModelFileError(f"{path.name} is empty (0 bytes): it is not a model.")
    return size


def _not_gguf_message(path: Path, head: bytes) -> str:
    base = f"{path.name} is not a GGUF model file"
    if head.startswith(b"PK\x03\x04"):
        return base + " (it is a zip archive, perhaps a PyTorch checkpoint): convert it to GGUF."
    if len(head) >= 10 and head[8:10] == b'{"':
        return base + " (it looks like a safetensors file): convert it to GGUF."
    if head[:4] in (b"ggjt", b"ggml", b"ggmf", b"tjgg", b"lmgg"):
        return base + " (it is in the old GGML format, which llama.cpp no longer reads)."
    return base + ". PortalReview runs quantized models in llama.cpp's GGUF format (*.gguf)."


def _version_message(path: Path, version: int) -> str:
    if version > 0xFFFF and struct.unpack(">I", struct.pack("<I", version))[0] in (2, 3):
        return f"{path.name} is a big-endian GGUF file, which this computer cannot run."
    supported = " and ".join(str(v) for v in SUPPORTED_VERSIONS)
    return f"{path.name} is GGUF version {version}; PortalReview reads versions {supported}."


def _check_tensors(header: GgufHeader, alignment: int) -> None:
    name = header.path.name
    if not header.tensors:
        raise ModelFileError(f"{name} holds no tensors: it is not a usable model.")
    needed = header.data_offset
    for t in header.tensors:
        if t.offset % alignment:
            raise ModelFileError(f"{name} is damaged: tensor {t.name!r} is misaligned.")
        needed = max(needed, header.data_offset + t.offset + (t.nbytes or 0))
    if needed > header.file_size:
        missing = needed - header.file_size
        raise ModelFileError(
            f"{name} is truncated: it has {header.file_size:,} bytes but its tensors need "
            f"{needed:,} ({missing:,} missing). The download or copy did not finish; copy the "
            "file again."
        )


def _check_tokenizer(header: GgufHeader) -> None:
    lengths = {
        k: header.array_lengths.get(f"tokenizer.ggml.{k}")
        for k in ("tokens", "scores", "token_type")
    }
    present = {k: v for k, v in lengths.items() if v is not None}
    if len(set(present.values())) > 1:
        detail = ", ".join(f"{k}: {v}" for k, v in present.items())
        raise ModelFileError(
            f"{header.path.name} is damaged: its tokenizer lists disagree ({detail})."
        )


# --- memory -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPlan:
    """How much memory a model needs and how large a context fits the budget."""

    weights_bytes: int
    kv_bytes_per_token: int
    n_ctx: int
    available_bytes: int | None

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes_per_token * self.n_ctx


def available_memory() -> int | None:
    """Bytes of memory the system can give a new program now (None if unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if sys.platform == "win32":
        return _windows_available_memory()
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _windows_available_memory() -> int | None:
    import ctypes

    class MemoryStatus(ctypes.Structure):
        _fields_ = [
            ("length", ctypes.c_ulong),
            ("load", ctypes.c_ulong),
            ("total_phys", ctypes.c_ulonglong),
            ("avail_phys", ctypes.c_ulonglong),
            ("total_page", ctypes.c_ulonglong),
            ("avail_page", ctypes.c_ulonglong),
            ("total_virtual", ctypes.c_ulonglong),
            ("avail_virtual", ctypes.c_ulonglong),
            ("avail_ext", ctypes.c_ulonglong),
        ]

    status = MemoryStatus()
    status.length = ctypes.sizeof(MemoryStatus)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):  # type: ignore[attr-defined]
        return None
    return int(status.avail_phys)


def plan_memory(
    header: GgufHeader,
    *,
    n_ctx: int | None = None,
    max_ctx: int = 8192,
    kv_budget_bytes: int | None = None,
    available_bytes: int | None = None,
    weights_in_ram: bool = True,
) -> MemoryPlan:
    """Choose the context size and check that the model fits in memory.

    The context is the model's trained length, capped by ``max_ctx`` and by what the key/value
    cache may use (``kv_budget_bytes``; by default half the memory left after the weights, at
    most 4 GiB), rounded down to a multiple of 256 and never below 512 (or the trained length
    if shorter). ``n_ctx`` forces a size (still capped by the trained length). With
    ``weights_in_ram`` (CPU), a model whose weights and minimal context exceed the available
    memory is refused with :class:`ModelFileError`.
    """
    per_token = header.kv_bytes_per_token() or 0
    trained = header.context_length or 2048
    weights = header.weights_bytes
    floor = min(512, trained)
    if n_ctx is not None:
        chosen = max(16, min(n_ctx, trained))
    else:
        room = (
            None
            if available_bytes is None
            else available_bytes - (weights if weights_in_ram else 0)
        )
        budget = kv_budget_bytes
        if budget is None:
            budget = 4 * GIB if room is None else max(0, min(4 * GIB, room // 2))
        by_budget = budget // per_token if per_token else trained
        chosen = min(trained, max_ctx, by_budget)
        chosen = max(floor, chosen // 256 * 256 if chosen >= 256 else chosen)
    plan = MemoryPlan(weights, per_token, chosen, available_bytes)
    if weights_in_ram and available_bytes is not None and plan.total_bytes > available_bytes:
        raise ModelFileError(
            f"{header.path.name} needs about {plan.total_bytes / GIB:.1f} GB of memory "
            f"(weights {weights / GIB:.1f} GB and working memory for {chosen} tokens) but only "
            f"{available_bytes / GIB:.1f} GB is free. Close other programs, or choose a smaller "
            "or more strongly quantized model (e.g. Q4_K_M instead of F16)."
        )
    return plan


# --- hashing ---------------------------------------------------------------------------------

_hash_lock = threading.Lock()
_hash_memo: dict[tuple[str, int, int], str] = {}


def default_hash_cache() -> Path:
    """Where model hashes are remembered between runs (a small JSON file)."""
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.environ.get("LOCALAPPDATA") if sys.platform == "win32" else None
    )
    root = Path(base) if base else Path.home() / ".cache"
    return root / "portalreview" / "model-hashes.json"


SMALL_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_cache_folder() -> Path:
    """Where ``packaging/fetch_small_model.py`` puts the small real model at install time
    (``PORTALREVIEW_MODEL_CACHE`` overrides)."""
    if os.environ.get("PORTALREVIEW_MODEL_CACHE"):
        return Path(os.environ["PORTALREVIEW_MODEL_CACHE"])
    return default_hash_cache().parent / "models"


def small_model_path() -> Path | None:
    """SmolLM2-135M-Instruct when the install step fetched it, else None. A 135M model is for
    trying the real code path (the demo, the ``real_model`` tests), not for real work."""
    path = model_cache_folder() / SMALL_MODEL_NAME
    return path if path.is_file() else None


def _file_key(path: Path) -> tuple[str | int, ...]:
    """What the cached hash of a file is kept under: its path and identity. The change time
    and inode are in it because ``cp -p``, ``rsync -t`` or ``touch -r`` set a file written over
    back to the old modification time (and the size may be the same), but not its change
    time; a file moved into place has a new inode. (Windows keeps no change time: there a
    file written over in place with its size and modification time kept is not told apart.)"""
    who = FileIdentity.of(path)
    return (str(path.resolve()), who.mtime_ns, who.size, who.inode, who.ctime_ns)


def model_sha256(path: str | os.PathLike, cache_file: Path | None = None) -> str:
    """The file's SHA-256 (hex), computed once per path and identity (modification and change
    times, size, inode: :func:`_file_key`): kept in memory and, when ``cache_file`` is given,
    in that JSON file across runs."""
    path = Path(path)
    key = _file_key(path)
    digest = _remembered(key, cache_file)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(8 * 1024 * 1024), b""):
                h.update(chunk)
        digest = h.hexdigest()
        _store_hash(cache_file, key, digest)
    with _hash_lock:
        _hash_memo[key] = digest
    return digest


def remembered_sha256(path: str | os.PathLike, cache_file: Path | None = None) -> str | None:
    """The file's SHA-256 when :func:`model_sha256` has it without reading the file (hashed
    before, in this run or, with ``cache_file``, in an earlier one); None: it would hash it."""
    return _remembered(_file_key(Path(path)), cache_file)


def _remembered(key: tuple[str | int, ...], cache_file: Path | None) -> str | None:
    with _hash_lock:
        if key in _hash_memo:
            return _hash_memo[key]
        return _load_hash_cache(cache_file).get(_cache_key(key))


@dataclass(frozen=True)
class FileIdentity:
    """Which file a path names and which bytes it holds, as far as one ``os.stat`` tells: a
    file written over in place gets a new modification time (and size, and change time, which
    ``cp -p`` cannot set back); a file replaced by another (a rename, a move) a new inode."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int  # 0 on Windows, where st_ctime is the creation time

    @classmethod
    def of(cls, path: str | os.PathLike) -> FileIdentity:
        st = os.stat(path)
        ctime = 0 if sys.platform == "win32" else st.st_ctime_ns
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, ctime)


def check_unchanged(path: str | os.PathLike, loaded: FileIdentity) -> None:
    """Raise :class:`ModelFileChanged` when ``path`` is no longer the file ``loaded`` describes
    (written over, replaced, or gone)."""
    try:
        same = FileIdentity.of(path) == loaded
    except OSError:
        same = False
    if not same:
        raise ModelFileChanged(
            f"load the model again: its file {Path(path).name} changed on disk since it was "
            "loaded (written over, replaced, moved or deleted), so the loaded model may now "
            "answer with other weights than the ones whose SHA-256 was recorded; nothing was "
            "stored from it (Tools > Models… in the program; on the command line, run the "
            "command again)."
        )


def loaded_model_sha256(
    path: str | os.PathLike,
    loaded: FileIdentity,
    known: str | None,
    cache_file: Path | None = None,
) -> str:
    """The SHA-256 of the model file an engine loaded (``known`` once hashed), after checking
    that the file is still the one loaded (``loaded``: its identity taken before llama.cpp
    opened it). The check runs on every call, so each stored suggestion and draft names the
    weights that produced it; it is one ``os.stat``."""
    check_unchanged(path, loaded)
    if known is not None:
        return known
    digest = model_sha256(path, cache_file)
    check_unchanged(path, loaded)  # written over while it was being hashed
    return digest


def _cache_key(key: tuple[str | int, ...]) -> str:
    return "|".join(map(str, key))


def _load_hash_cache(cache_file: Path | None) -> dict[str, str]:
    if cache_file is None or not cache_file.exists():
        return {}
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store_hash(cache_file: Path | None, key: tuple[str | int, ...], digest: str) -> None:
    if cache_file is None:
        return
    with _hash_lock:
        data = _load_hash_cache(cache_file)
        data[_cache_key(key)] = digest
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
            tmp.replace(cache_file)
        except OSError:
            pass  # a cache only: hashing again next time is fine


# --- the models folder ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEntry:
    """One ``.gguf`` file found in a models folder; ``problem`` is None when it looks usable."""

    path: Path
    size_bytes: int
    name: str = ""
    architecture: str = ""
    context_length: int | None = None
    weight_types: dict[str, int] = field(default_factory=dict)
    problem: str | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None


def _walk(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and depth > 0 and not entry.name.startswith("."):
            yield from _walk(entry, depth - 1)
        elif entry.is_file() and entry.suffix.lower() == ".gguf":
            yield entry


_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})$")


def scan_models(folder: str | os.PathLike, max_depth: int = 2) -> list[ModelEntry]:
    """Every ``.gguf`` file under ``folder`` (sub-folders to ``max_depth``), with its header
    checked (no hashing, no loading): fast enough to run when a settings page opens. Multi-part
    files (``-00002-of-00003.gguf``) list only their first part."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFileError(f"The models folder {folder} does not exist.")
    out = []
    for path in _walk(folder, max_depth):
        part = _SPLIT_PART.search(path.stem)
        if part and int(part.group(1)) != 1:
            continue
        try:
            h = read_header(path)
        except ModelFileError as exc:
            out.append(ModelEntry(path, _size(path), path.stem, problem=str(exc)))
            continue
        out.append(
            ModelEntry(path, h.file_size, h.name, h.architecture, h.context_length, h.weight_types)
        )
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
