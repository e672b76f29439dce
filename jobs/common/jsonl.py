"""The one JSON writer of the project: every record it writes (releases, rejects, spend log, truth,
generated input files) goes through `dumps`, so every line is valid JSON and valid UTF-8."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as the Python values JSON knows; anything else is an error."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(record: Any) -> str:
    """`record` as one compact line of JSON (no newline).

    Raises ValueError on NaN or an infinity (JSON has neither; a reader would choke or, worse, read
    `null`) and on a string that is not valid Unicode (a lone surrogate)."""
    text = json.dumps(record, allow_nan=False, ensure_ascii=False, separators=(",", ":"), default=_plain)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"a string of the record is not valid Unicode: {err.reason}") from None
    return text
