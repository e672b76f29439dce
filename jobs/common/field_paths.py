"""Field paths: where a field mapping of the configuration (`events.user`, `requirements.time` ...)
finds its value in a JSON record (docs/streaming.md, "Parsing", field paths).

A path is one or more keys separated by `.`; it walks down nested objects from the record's top level
(`payload.user_id` is the member `user_id` of the object in the member `payload`). Inside a key, `\\.`
is a literal dot and `\\\\` a literal backslash; no other character follows a backslash. A path
never indexes an array. A name without `.` or `\\` is one key: top-level names mean what they
always meant. A module of its own: the configuration validates paths with it, the parser
(jobs/common/records.py) and the job's JVM readers (the keys, passed to
jobs/streaming/jvm/pwevent/flink/parsing/EventTime.java) follow them.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=256)
def field_path(text: str) -> tuple[str, ...]:
    """The keys of the path `text`, top level first; ValueError saying what is wrong (an empty key,
    a trailing backslash, an unknown escape)."""
    if "." not in text and "\\" not in text:
        if not text:
            raise ValueError("a field path has at least one key")
        return (text,)
    keys: list[str] = []
    key: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError(f"field path {text!r} ends in a backslash (a literal backslash is written \\\\)")
            if escaped not in ".\\":
                raise ValueError(f"field path {text!r} holds \\{escaped}: only \\. (a dot in a key) and \\\\ "
                                 "(a backslash) are escapes")
            key.append(escaped)
        elif char == ".":
            if not key:
                raise ValueError(f"field path {text!r} has an empty key (keys are separated by one dot)")
            keys.append("".join(key))
            key = []
        else:
            key.append(char)
    if not key:
        raise ValueError(f"field path {text!r} has an empty key (keys are separated by one dot)")
    keys.append("".join(key))
    return tuple(keys)


def path_text(keys: tuple[str, ...]) -> str:
    """The path of `keys` as written in the configuration (the inverse of `field_path`)."""
    return ".".join(key.replace("\\", "\\\\").replace(".", "\\.") for key in keys)


def check_disjoint(paths: dict[str, str]) -> None:
    """ValueError when one configured path lies inside another (`payload` and `payload.user`): no
    record can hold a value and an object at the same place, so every record would be rejected.
    `paths`: configuration key -> path; equal paths are allowed (one value read twice)."""
    keys = {name: field_path(text) for name, text in paths.items()}
    for name, path in keys.items():
        for other, inner in keys.items():
            if len(inner) > len(path) and inner[:len(path)] == path:
                raise ValueError(f"{other} ({paths[other]!r}) lies inside {name} ({paths[name]!r}): "
                                 "a record cannot hold both")
