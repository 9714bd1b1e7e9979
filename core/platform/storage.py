"""Private attachment storage behind one small interface: S3, or local files.

`POSTBAG_STORAGE_URL` chooses: `s3://bucket/prefix` (objects private, server-side
encryption requested) or `file:///path` (the local runner's default). boto3 is imported
only when an S3 store is first used, so a submit without files never loads it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from core.platform.aws import S3, aws_client
from core.platform.errors import NotFound, StorageError

CHUNK = 64 * 1024


class Storage(Protocol):
    """Where attachment bytes live; keys are relative paths like `org_…/sub_…/att_…`."""

    async def put(self, key: str, path: Path, *, content_type: str) -> None:
        """Write the file at `path` under `key`."""
        ...

    def read(self, key: str) -> AsyncIterator[bytes]:
        """The bytes under `key`, in chunks (NotFound when there are none)."""
        ...

    async def delete(self, key: str) -> None:
        """Remove `key`; removing a missing key is not an error."""
        ...


class FileStorage:
    """Files under a root directory, created private to this user."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise StorageError(f"storage key escapes the root: {key!r}")
        return path

    async def put(self, key: str, path: Path, *, content_type: str) -> None:  # noqa: ARG002
        target = self._path(key)

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = target.with_name(target.name + ".part")
            shutil.copyfile(path, partial)
            os.chmod(partial, 0o600)
            os.replace(partial, target)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            raise StorageError(f"could not write {key}: {exc.strerror}") from exc

    async def read(self, key: str) -> AsyncIterator[bytes]:
        path = self._path(key)
        try:
            handle = await asyncio.to_thread(path.open, "rb")
        except FileNotFoundError:
            raise NotFound("the file is gone") from None
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(path.unlink, True)
        except OSError as exc:
            raise StorageError(f"could not delete {key}: {exc.strerror}") from exc


class S3Storage:
    """A private S3 bucket; every object is written with server-side encryption."""

    def __init__(self, bucket: str, prefix: str, *, endpoint_url: str | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def client(self) -> Any:
        return aws_client("s3", S3, endpoint_url=self.endpoint_url)

    async def put(self, key: str, path: Path, *, content_type: str) -> None:
        def upload() -> None:
            with path.open("rb") as body:
                self.client().put_object(
                    Bucket=self.bucket,
                    Key=self._key(key),
                    Body=body,
                    ContentType=content_type,
                    ServerSideEncryption="AES256",
                )

        try:
            await asyncio.to_thread(upload)
        except Exception as exc:  # botocore's errors are many; all mean "not stored"
            raise StorageError(f"could not write {key}: {type(exc).__name__}") from exc

    async def read(self, key: str) -> AsyncIterator[bytes]:
        def get() -> Any:
            return self.client().get_object(Bucket=self.bucket, Key=self._key(key))["Body"]

        try:
            body = await asyncio.to_thread(get)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise NotFound("the file is gone") from None
            raise StorageError(f"could not read {key}: {type(exc).__name__}") from exc
        try:
            while chunk := await asyncio.to_thread(body.read, CHUNK):
                yield chunk
        finally:
            body.close()

    async def delete(self, key: str) -> None:
        try:
            await asyncio.to_thread(
                self.client().delete_object, Bucket=self.bucket, Key=self._key(key)
            )
        except Exception as exc:
            raise StorageError(f"could not delete {key}: {type(exc).__name__}") from exc


@lru_cache(maxsize=8)
def storage_for(url: str) -> Storage:
    """The store a `POSTBAG_STORAGE_URL` names (one per URL per process)."""
    parts = urlsplit(url)
    if parts.scheme == "s3":
        # boto3 reads credentials, region and AWS_ENDPOINT_URL_S3 from the environment.
        return S3Storage(parts.netloc, parts.path)
    if parts.scheme == "file":
        # file:///abs/path, and the runner's relative file://./.postbag/files
        raw = unquote(parts.netloc + parts.path)
        return FileStorage(Path(raw).expanduser().absolute())
    raise StorageError(f"unsupported storage URL scheme {parts.scheme!r}")
