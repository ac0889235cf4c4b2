"""An artifact: one file the user gave us, kept with its run as it came (name, size, sha256).

Ingest makes them while collecting inputs and the store copies them into the run's folder; it lives
in model so that neither of those layers imports the other. Reading the file is not done here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Artifact:
    """A file the user gave us, kept with the run as it came."""

    path: Path
    name: str
    size: int
    sha256: str
