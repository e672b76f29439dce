"""The `flink.s3` settings and the object store's S3 client (jobs/streaming/object_store.py): what a
configuration may say, that the credentials stay out of the job's configuration and its printed
forms, and the request signature (AWS Signature Version 4, checked against AWS's own worked example).
The client against a real server: tests/deploy/test_s3_server_script.py."""

from __future__ import annotations

import re
import time
from unittest import mock

import pytest

from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.flink_config import flink_configuration
from pwevent.jobs.streaming.object_store import S3Settings, _list_request, is_object_store
from pwevent.jobs.streaming.settings import stream_settings

BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}
STORE = {"endpoint": "http://127.0.0.1:9000", "path_style_access": True, "access_key": "AK", "secret_key": "sk-1"}


def test_a_checkpoint_dir_on_an_object_store_with_its_credentials() -> None:
    s = stream_settings(parse_config({**BASE, "flink": {"checkpoint_dir": "s3://state/ck", "s3": STORE}}), "/tmp")
    assert s.flink.checkpoint_dir == "s3://state/ck"
    assert s.flink.s3 is not None and s.flink.s3.flink_keys() == {
        "s3.endpoint": "http://127.0.0.1:9000", "s3.path.style.access": "true", "s3.access-key": "AK",
        "s3.secret-key": "sk-1"}
    conf = flink_configuration(s, None)
    assert conf["execution.checkpointing.dir"] == "s3://state/ck"
    assert not any(key.startswith("s3.") for key in conf) and "sk-1" not in repr(s)
    assert S3Settings().flink_keys() == {"s3.path.style.access": "false"}  # AWS, default credential chain


@pytest.mark.parametrize(("s3", "message"), [
    ({"access_key": "AK"}, "give both access_key and secret_key"),
    ({"endpoint": "127.0.0.1:9000"}, "flink.s3.endpoint must be http(s)://host[:port]"),
    ({"path_style_access": "yes"}, "flink.s3.path_style_access"),
    ({"bucket": "x"}, "flink.s3.bucket"),
])
def test_invalid_s3_settings_name_the_key(s3: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        stream_settings(parse_config({**BASE, "flink": {"s3": s3}}), "/tmp")


def test_object_store_uris() -> None:
    assert is_object_store("s3://b/ck") and is_object_store("S3P://b/ck")
    assert not any(map(is_object_store, ("/var/ck", "file:///var/ck", "hdfs://nn/ck", "s3a://b/ck")))


def test_listing_requests_are_signed_as_aws_documents() -> None:
    """AWS's worked example of a signed GET Bucket (List Objects), Signature Version 4 in the
    Authorization header: the same request gives the documented signature."""
    s3 = S3Settings.model_validate({"endpoint": "https://s3.amazonaws.com", "access_key": "AKIAIOSFODNN7EXAMPLE",
                                    "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
    moment = time.strptime("20130524T000000Z", "%Y%m%dT%H%M%SZ")
    with mock.patch("time.gmtime", return_value=moment):
        request = _list_request(s3, "examplebucket", {"max-keys": "2", "prefix": "J"})
    assert request.full_url == "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J"
    assert request.get_header("Authorization") == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
        "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    path_style = S3Settings.model_validate({"endpoint": "http://127.0.0.1:9000", "path_style_access": True})
    unsigned = _list_request(path_style, "state", {"list-type": "2", "prefix": "ck/"})
    assert unsigned.full_url == "http://127.0.0.1:9000/state?list-type=2&prefix=ck%2F"
    assert unsigned.get_header("Authorization") is None
