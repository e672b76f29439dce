"""Protobuf descriptors from files (docs/formats.md, "Input formats"): what the configuration checks at
load (`protobuf.descriptor_set`, `protobuf.message`) and what the decoder builds its message types from
(jobs/common/protobuf_format.py): a descriptor set file, or the `.proto` text a Schema Registry
serves, compiled with protoc (grpcio-tools); errors say where the descriptors came from."""

from __future__ import annotations

import importlib.resources
import os
import tempfile
import threading

from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor

#: The name of a registry schema's file when it is compiled (imports name other files).
SCHEMA_FILE = "registry-schema.proto"
#: Google's well-known types: their files ship with protoc and the protobuf runtime.
WELL_KNOWN_PREFIX = "google/protobuf/"
#: The well-known files a descriptor set may import without holding them, loaded into protobuf's
#: default pool by their modules.
#: protoc runs one compilation at a time in a process (the job's parse tasks share one in thread mode).
_PROTOC = threading.Lock()
WELL_KNOWN_FILES = tuple(module.DESCRIPTOR.name for module in (any_pb2, descriptor_pb2, duration_pb2, empty_pb2,
                                                               field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2))


def descriptor_pool_of(files: descriptor_pb2.FileDescriptorSet, where: str) -> descriptor_pool.DescriptorPool:
    """A pool of the files of a descriptor set, with the well-known files they import but do not hold
    (from protobuf's own); ValueError saying `where` they came from when they do not build."""
    pool = descriptor_pool.DescriptorPool()
    held = {proto.name for proto in files.file}
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto) -> None:
        for dependency in proto.dependency:
            if dependency in added:
                continue
            if dependency in held:
                add(next(p for p in files.file if p.name == dependency))
            elif dependency in WELL_KNOWN_FILES:
                known = descriptor_pb2.FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(dependency).CopyToProto(known)
                add(known)
            else:
                raise ValueError(f"{where}: {proto.name} imports {dependency}, which it does not hold")
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)

    try:
        for proto in files.file:
            add(proto)
    except (KeyError, TypeError) as err:  # an unknown well-known file, a type that resolves nowhere
        raise ValueError(f"{where}: its files do not build: {err}") from None
    return pool


def load_descriptor_set(path: str) -> descriptor_pool.DescriptorPool:
    """The descriptors of a descriptor set file (`protoc --descriptor_set_out`); ValueError naming
    the file and what is wrong."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror}") from None
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except Exception as err:  # protobuf's DecodeError and the runtime's own errors
        raise ValueError(f"{path} is not a descriptor set (protoc --descriptor_set_out): {err}") from None
    if not files.file:
        raise ValueError(f"{path} is not a descriptor set (protoc --descriptor_set_out): it holds no file")
    return descriptor_pool_of(files, path)


def message_type(pool: descriptor_pool.DescriptorPool, name: str, where: str) -> Descriptor:
    """The message type `name` (its full name, `package.Message`) of a pool; ValueError listing the
    messages of the pool's files otherwise."""
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        raise ValueError(f"no message {name!r} in {where} (write its full name, package.Message)") from None


def compile_schema(text: str, where: str) -> descriptor_pb2.FileDescriptorSet:
    """The descriptors of a `.proto` text (the file SCHEMA_FILE, with the well-known files it imports),
    compiled with protoc (grpcio-tools); ValueError when it does not compile (protoc writes why on
    the standard error)."""
    from grpc_tools import protoc

    includes = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="pwevent-proto-") as folder:
        with open(os.path.join(folder, SCHEMA_FILE), "w", encoding="utf-8") as handle:
            handle.write(text)
        out = os.path.join(folder, "schema.desc")
        with _PROTOC:
            status = protoc.main(["protoc", f"-I{folder}", f"-I{includes}", f"--descriptor_set_out={out}",
                                  "--include_imports", SCHEMA_FILE])
        if status != 0:
            raise ValueError(f"{where} does not compile as a .proto file (protoc exit {status})")
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as handle:
            files.ParseFromString(handle.read())
    return files
