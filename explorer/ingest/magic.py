"""What a file that is not a trace is, from its first bytes (never its name), and what to do with it.

A table of magic numbers with the message a user sees; Neuron's NEFF is read from its 1,024-byte header (a
little-endian packaging version 1 or 2, then the header size 1024, as `KLR.NEFF.Header` in aws-neuron's NKI
compiler writes it), which also carries the compiler version that wrote the file.
"""

from __future__ import annotations

from dataclasses import dataclass

NEFF_HEADER_BYTES = 1024
NEFF_BUILD_VERSION = slice(40, 168)  # kelp_version_build: 128 bytes of text, NUL-padded
NEURON_CONVERT = ("`neuron-explorer view -n FILE.neff -s FILE.ntff --output-format parquet` (SDKs with "
                  "neuron-explorer; with only neuron-profile: `neuron-profile view -n FILE.neff -s FILE.ntff "
                  "--output-format json`) and open the output")


@dataclass(frozen=True)
class Magic:
    """One kind of file by its leading bytes: what it is, and what the user can do instead."""

    prefix: bytes
    what: str
    hint: str


NOT_A_TRACE = "not a trace"
MAGICS: tuple[Magic, ...] = (
    Magic(b"\x89PNG\r\n\x1a\n", "a PNG image", NOT_A_TRACE),
    Magic(b"\xff\xd8\xff", "a JPEG image", NOT_A_TRACE),
    Magic(b"GIF87a", "a GIF image", NOT_A_TRACE),
    Magic(b"GIF89a", "a GIF image", NOT_A_TRACE),
    Magic(b"%PDF-", "a PDF document", NOT_A_TRACE),
    Magic(b"\x7fELF", "an ELF executable or library", NOT_A_TRACE),
    Magic(b"SQLite format 3\x00", "an SQLite database",
          "Nsight Systems' SQLite export is not read; export a Chrome trace (`torch.profiler` "
          "`export_chrome_trace`) instead"),
    Magic(b"\x93NUMPY", "a NumPy array file", NOT_A_TRACE),
    Magic(b"\x89HDF\r\n\x1a\n", "an HDF5 file", NOT_A_TRACE),
    Magic(b"\xfd7zXZ\x00", "an xz archive", "decompress it first (gzip, .zip and .tar.gz are read as they are)"),
    Magic(b"\x28\xb5\x2f\xfd", "a zstd archive", "decompress it first (gzip, .zip and .tar.gz are read as they are)"),
    Magic(b"BZh", "a bzip2 archive", "decompress it first (gzip, .zip and .tar.gz are read as they are)"),
    Magic(b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "unpack it first (.zip and .tar.gz are read as they are)"),
    Magic(b"\x80\x02", "a Python pickle", "pickles are never loaded (they can run code)"),
    Magic(b"\x80\x03", "a Python pickle", "pickles are never loaded (they can run code)"),
    Magic(b"\x80\x04\x95", "a Python pickle", "pickles are never loaded (they can run code)"),
    Magic(b"\x80\x05\x95", "a Python pickle", "pickles are never loaded (they can run code)"),
)


def neff_version(head: bytes) -> str | None:
    """The compiler version in a NEFF header ("" when the field is blank); None when `head` is no NEFF."""
    if len(head) < NEFF_HEADER_BYTES:
        return None
    packaging = int.from_bytes(head[0:8], "little")
    header_size = int.from_bytes(head[8:16], "little")
    if packaging not in (1, 2) or header_size != NEFF_HEADER_BYTES:
        return None
    raw = head[NEFF_BUILD_VERSION].split(b"\x00", 1)[0]
    return raw.decode("ascii", "replace").strip() if raw.isascii() else ""


def describe_binary(head: bytes, name: str = "") -> str:
    """The message for a file that no parser reads: what its bytes say it is, and what to do."""
    version = neff_version(head)
    if version is not None:
        wrote = f", written by neuronx-cc {version}" if version else ""
        return f"a Neuron compiled model (NEFF{wrote}), not a profile; kept as an artifact. Convert it with its " \
               f"profile: {NEURON_CONVERT}"
    for magic in MAGICS:
        if head.startswith(magic.prefix):
            return f"{magic.what}, {magic.hint}"
    if name.lower().endswith((".ntff", ".pb")):  # no published header: the name is the only clue, and says so
        return f"a binary file named like a Neuron profile (.ntff / .pb: undocumented binaries); " \
               f"convert it: {NEURON_CONVERT}"
    return "a binary file of no known trace format"
