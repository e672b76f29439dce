"""Checkpoints and savepoints on an S3-compatible object store (docs/operations.md, "Checkpoints and
savepoints on an object store"): the `flink.s3` settings (endpoint, path-style access, credentials),
the Flink keys a local run configures its S3 file system with (Flink's `flink-s3-fs-presto` plugin,
jobs/streaming/jars.py), and a listing of a bucket through the S3 API (ListObjectsV2, signed with
AWS Signature Version 4), which finds the newest completed checkpoint for `--restore latest`.

```yaml
flink:
  checkpoint_dir: s3://pwevent-state/checkpoints   # s3:// or s3p:// (both the Presto plugin's)
  s3:
    endpoint: http://127.0.0.1:9000   # default: AWS's own, https://s3.<region>.amazonaws.com
    path_style_access: true           # http://host/bucket/key rather than http://bucket.host/key
    region: us-east-1
    access_key: ${S3_ACCESS_KEY}      # secrets: ${ENV_VAR} or {file: PATH}; none: the AWS default
    secret_key: {file: /run/secrets/s3-secret-key}   # credential chain (environment, instance role)
```
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from pydantic import Field, model_validator

from pwevent.jobs.common.config import Name, Section
from pwevent.jobs.common.secrets import SecretValue

#: The URI schemes Flink's Presto S3 file system serves.
S3_SCHEMES = ("s3", "s3p")
_LIST_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class ObjectStoreError(RuntimeError):
    """The object store refused or did not answer a request; the message says which and why."""


def is_object_store(uri: str) -> bool:
    """Whether `uri` names a place on an S3-compatible object store (s3://bucket/..., s3p://...)."""
    return uri.split("://", 1)[0].lower() in S3_SCHEMES if "://" in uri else False


class S3Settings(Section):
    """`flink.s3`: how a local run reaches the object store of `flink.checkpoint_dir` or a savepoint;
    a cluster's own Flink configuration says it for the cluster (docs/kubernetes.md)."""

    endpoint: Name | None = Field(None, description="http(s)://host:port of an S3-compatible store; "
                                  "default: AWS's, https://s3.<region>.amazonaws.com")
    path_style_access: bool = False
    region: Name = "us-east-1"
    access_key: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}")
    secret_key: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}")

    @model_validator(mode="after")
    def _both_keys_or_none(self) -> S3Settings:
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("flink.s3: give both access_key and secret_key, or neither (the AWS default "
                             "credential chain)")
        if self.endpoint is not None and not re.fullmatch(r"https?://[^/\s]+/?", self.endpoint):
            raise ValueError(f"flink.s3.endpoint must be http(s)://host[:port], got {self.endpoint!r}")
        return self

    @property
    def base_url(self) -> str:
        return (self.endpoint or f"https://s3.{self.region}.amazonaws.com").rstrip("/")

    def flink_keys(self) -> dict[str, str]:
        """The Flink configuration of the S3 file system (`s3.*`, secrets revealed: for the file
        system's initialisation only, never in the job's configuration, which the web UI shows)."""
        keys = {"s3.path.style.access": str(self.path_style_access).lower()}
        if self.endpoint is not None:
            keys["s3.endpoint"] = self.base_url
        if self.access_key is not None and self.secret_key is not None:
            keys["s3.access-key"] = self.access_key.reveal()
            keys["s3.secret-key"] = self.secret_key.reveal()
        return keys


@dataclass(frozen=True)
class StoredObject:
    """One object of a listing: its key and when it was last written (ISO-8601, UTC, as S3 says)."""

    key: str
    last_modified: str


def _sign(secret_key: str, stamp: str, region: str, text: str) -> str:
    """The Signature Version 4 of `text` for service s3 on day `stamp` (YYYYMMDD)."""
    key = ("AWS4" + secret_key).encode()
    for part in (stamp, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _list_request(s3: S3Settings, bucket: str, query: dict[str, str]) -> urllib.request.Request:
    """A signed GET of the bucket's listing (path-style or virtual-hosted, as `s3` says)."""
    base = urllib.parse.urlsplit(s3.base_url)
    host, path = (base.netloc, f"/{bucket}") if s3.path_style_access else (f"{bucket}.{base.netloc}", "/")
    canonical_query = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                               for k, v in sorted(query.items()))
    url = f"{base.scheme}://{host}{path}?{canonical_query}"
    if s3.access_key is None or s3.secret_key is None:
        return urllib.request.Request(url)
    now = time.gmtime()
    amz_date, stamp = time.strftime("%Y%m%dT%H%M%SZ", now), time.strftime("%Y%m%d", now)
    empty = hashlib.sha256(b"").hexdigest()
    signed = "host;x-amz-content-sha256;x-amz-date"
    canonical = "\n".join(["GET", path, canonical_query, f"host:{host}", f"x-amz-content-sha256:{empty}",
                           f"x-amz-date:{amz_date}", "", signed, empty])
    scope = f"{stamp}/{s3.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signature = _sign(s3.secret_key.reveal(), stamp, s3.region, to_sign)
    return urllib.request.Request(url, headers={
        "x-amz-date": amz_date, "x-amz-content-sha256": empty,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={s3.access_key.reveal()}/{scope}, "
                         f"SignedHeaders={signed}, Signature={signature}"})


def list_objects(s3: S3Settings, uri: str, timeout_s: float = 30.0) -> list[StoredObject]:
    """Every object under `uri` (s3://bucket/prefix), through the store's ListObjectsV2, page by page."""
    parts = urllib.parse.urlsplit(uri)
    bucket, prefix = parts.netloc, parts.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    found: list[StoredObject] = []
    token = None
    while True:
        query = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
        try:
            with urllib.request.urlopen(_list_request(s3, bucket, query), timeout=timeout_s) as answer:
                root = ElementTree.fromstring(answer.read())
        except urllib.error.HTTPError as err:
            raise ObjectStoreError(f"listing {uri} at {s3.base_url}: HTTP {err.code}: "
                                   f"{err.read()[:300].decode(errors='replace')}") from None
        except (urllib.error.URLError, OSError) as err:
            raise ObjectStoreError(f"listing {uri}: no answer from {s3.base_url}: {err}") from None
        found += [StoredObject(item.findtext(f"{_LIST_NS}Key", ""), item.findtext(f"{_LIST_NS}LastModified", ""))
                  for item in root.iter(f"{_LIST_NS}Contents")]
        token = root.findtext(f"{_LIST_NS}NextContinuationToken")
        if root.findtext(f"{_LIST_NS}IsTruncated") != "true" or not token:
            return found


def latest_stored_checkpoint(s3: S3Settings, checkpoint_dir: str) -> str | None:
    """The newest completed checkpoint (a <job id>/chk-N folder with _metadata, by the time its
    _metadata was written) under a checkpoint dir on the object store, as a URI of the same scheme."""
    scheme, rest = checkpoint_dir.split("://", 1)
    bucket, _, path = rest.partition("/")
    prefix = path.strip("/") + "/" if path.strip("/") else ""
    done = [o for o in list_objects(s3, checkpoint_dir)
            if re.fullmatch(re.escape(prefix) + r"[^/]+/chk-\d+/_metadata", o.key)]
    if not done:
        return None
    newest = max(done, key=lambda o: (o.last_modified, int(o.key.rsplit("/", 2)[1].removeprefix("chk-"))))
    return f"{scheme}://{bucket}/{newest.key.removesuffix('/_metadata')}"
