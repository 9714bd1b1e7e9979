"""The process's AWS clients (S3, SES, Lambda): one per service and endpoint, built once
under a lock (boto3 builds clients slowly and not thread-safely; the S3 store is reached
from worker threads), each with explicit timeouts and retries rather than botocore's
60-second defaults, which would hold a submit with files for a minute."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long a call may wait to connect and to read, and how many tries it gets."""

    connect: float
    read: float
    attempts: int


# Attachments are written before the submit's transaction and read for downloads.
S3 = Bounds(connect=3, read=20, attempts=3)
SES = Bounds(connect=5, read=10, attempts=1)

# What boto3 reads from the environment when it builds a client: a client is kept for as
# long as these stay as they were (a test that sets them gets a client of its own).
_ENVIRONMENT = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL")
# Not on Services: its users (the S3 store in worker threads, the SES send) hold settings,
# not the services, and a client is keyed by the environment boto3 reads.
_clients: dict[tuple[object, ...], Any] = {}
_lock = threading.Lock()


def aws_client(
    service: str,
    bounds: Bounds,
    *,
    endpoint_url: str | None = None,
    account: tuple[str, str, str] | None = None,
) -> Any:
    """The process's boto3 client for `service` (credentials, region and endpoint from the
    environment unless `endpoint_url`, or `account`: region, access key id and secret key,
    an organization's own SES), built on first use."""
    key = (
        service,
        endpoint_url,
        bounds,
        account,
        *(os.environ.get(name) for name in _ENVIRONMENT),
    )
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                import boto3  # lazily: most processes never call AWS
                from botocore.config import Config

                build: Any = boto3.client  # typed per literal service name
                own: dict[str, str] = {}
                if account is not None:
                    own = dict(
                        zip(
                            ("region_name", "aws_access_key_id", "aws_secret_access_key"),
                            account,
                            strict=True,
                        )
                    )
                client = build(
                    service,
                    endpoint_url=endpoint_url,
                    **own,
                    config=Config(
                        connect_timeout=bounds.connect,
                        read_timeout=bounds.read,
                        retries={"total_max_attempts": bounds.attempts, "mode": "standard"},
                    ),
                )
                _clients[key] = client
    return client
