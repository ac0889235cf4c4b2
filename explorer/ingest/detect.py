"""Content-based format detection: file names are never trusted, only the bytes."""

from __future__ import annotations

from enum import StrEnum

from explorer.ingest.magic import MAGICS, neff_version
from explorer.ingest.neuron.files import looks_like_neuron_ls
from explorer.ingest.neuron.summary_text import looks_like_summary_text


class Format(StrEnum):
    CHROME = "chrome"  # Chrome Trace Event Format, incl. Kineto trace.json
    NEURON_JSON = "neuron_json"  # neuron-explorer view --output-format json ("trace_event")
    NEURON_PROFILE2 = "neuron_profile2"  # Profiler 2.0 system_profile.json ("trace_events")
    NEURON_NRT = "neuron_nrt"  # nrt_sys_trace_fetch_events output ("events" + "data_version")
    PARQUET = "parquet"  # neuron-explorer view --output-format parquet
    CHAKRA_ET = "chakra_et"  # PyTorch execution trace (not a timeline)
    MEMORY_TIMELINE = "memory_timeline"  # export_memory_timeline raw output
    ALLOC_SNAPSHOT = "alloc_snapshot"  # torch.cuda.memory._snapshot(): _dump_snapshot's pickle or its JSON form
    NEURON_SUMMARY_TEXT = "neuron_summary_text"  # neuron-profile view --output-format summary-text
    NEURON_LS = "neuron_ls"  # neuron-ls --output-format json (the instance's devices)
    BINARY = "binary"  # undocumented binaries (.pb, .ntff, .neff): kept, not parsed
    UNKNOWN = "unknown"


def _first_key(head: bytes) -> bytes:
    i = head.find(b'"')
    if i < 0:
        return b""
    j = head.find(b'"', i + 1)
    return head[i + 1 : j] if j > 0 else b""


def detect_format(data: bytes) -> Format:
    head = data[:65536]
    if head.startswith(b"PAR1"):
        return Format.PARQUET
    text = head.lstrip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:].lstrip()
    if not text:
        return Format.UNKNOWN
    if text[:1] == b"\x80" and is_snapshot_head(text):
        return Format.ALLOC_SNAPSHOT
    if neff_version(head) is not None or any(head.startswith(m.prefix) for m in MAGICS):
        return Format.BINARY
    if b"\x00" not in head[:4096] and text[:1] not in (b"{", b"[") and looks_like_summary_text(head):
        return Format.NEURON_SUMMARY_TEXT
    if b"\x00" in head[:4096] or (text[:1] not in (b"{", b"[")):
        return Format.BINARY if _mostly_binary(head) else Format.UNKNOWN
    if looks_like_neuron_ls(head):
        return Format.NEURON_LS
    if text.startswith(b"["):
        second = text[1:].lstrip()[:1]
        return Format.MEMORY_TIMELINE if second == b"[" else Format.CHROME
    if b'"traceEvents"' in head or b'"systemTraceEvents"' in head:
        return Format.CHROME
    if b'"trace_event"' in head:
        return Format.NEURON_JSON
    if b'"trace_events"' in head:
        return Format.NEURON_PROFILE2
    if b'"data_version"' in head and b'"events"' in head:
        return Format.NEURON_NRT
    if b'"nodes"' in head and b'"schema"' in head:
        return Format.CHAKRA_ET
    if b'"events"' in head and b'"tracking_id"' in head:
        return Format.NEURON_NRT
    if is_snapshot_head(text):
        return Format.ALLOC_SNAPSHOT
    # a JSON object whose keys we cannot see in the first 64 KiB: let the Chrome parser decide
    return Format.CHROME if _first_key(text) else Format.UNKNOWN


def _mostly_binary(head: bytes) -> bool:
    sample = head[:4096]
    if not sample:
        return False
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in sample)
    return printable / len(sample) < 0.9


# a pickled snapshot's first keys, as protocol 4/5 (SHORT_BINUNICODE) and protocol 2/3 (BINUNICODE) write them
SNAPSHOT_PICKLE_KEYS = (b"\x8c\x08segments", b"X\x08\x00\x00\x00segments", b"\x8c\rdevice_traces",
                        b"X\r\x00\x00\x00device_traces")


def is_snapshot_head(text: bytes) -> bool:
    """Whether a file's first bytes are a CUDA allocator snapshot: a pickle (protocol 2+) whose first keys are
    the snapshot's, or a JSON object with "segments" or "device_traces" and no Chrome trace key."""
    if text[:1] == b"\x80":
        return any(k in text[:4096] for k in SNAPSHOT_PICKLE_KEYS)
    return text[:1] == b"{" and (b'"segments"' in text or b'"device_traces"' in text) \
        and b'"traceEvents"' not in text
