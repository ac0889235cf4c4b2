"""A real S3 API for tests: moto's standalone server in a subprocess on a free loopback port.

`moto_server()` yields the endpoint URL; `new_bucket(endpoint)` makes a bucket with a fresh name, so tests
sharing one server (a session fixture) never see each other's objects. Any key and secret are accepted.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.support import free_port

CREDENTIALS = {"key": "testing", "secret": "testing"}  # what moto accepts; s3fs options
REGION = "us-east-1"


@contextmanager
def moto_server(log_dir: Path) -> Iterator[str]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with (log_dir / "moto.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait_answering(endpoint, proc)
            yield endpoint
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_answering(endpoint: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with {proc.returncode} (see moto.log)")
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"moto server at {endpoint} did not answer in {timeout_s} s")


def s3_options() -> dict[str, Any]:
    return dict(CREDENTIALS)


def new_bucket(endpoint: str) -> str:
    import boto3

    name = "b-" + secrets.token_hex(6)
    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=CREDENTIALS["key"],
                          aws_secret_access_key=CREDENTIALS["secret"])
    client.create_bucket(Bucket=name)
    client.close()
    return name
