"""`fingerprint_of`: a canonical 32-byte digest of a payload, and the canonical JSON it
uses (what the decorator and the HTTP middleware fingerprint requests with).

- bytes (bytearray, memoryview): SHA-256 of the bytes;
- str: SHA-256 of its UTF-8;
- anything else JSON can write (dict, list, numbers, bool, None): SHA-256 of its
  canonical JSON — object keys sorted by code point, no insignificant whitespace, UTF-8,
  strings as `json.dumps(ensure_ascii=False)` writes them, and a float with an integral
  value written as the integer (`5.0` as `5`, as JSON.stringify does).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["canonical_json", "fingerprint_of"]


def _integral_floats(value: Any) -> Any:
    """`value` with every integral float (5.0) as an int (5), like JSON.stringify."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("NaN and infinities are not JSON")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: _integral_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_integral_floats(v) for v in value]
    return value


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of `value` (sorted keys, no whitespace, UTF-8); TypeError for
    what JSON cannot write, ValueError for NaN or an infinity."""
    try:
        text = json.dumps(
            _integral_floats(value),
            ensure_ascii=False,
            separators=(",", ":"),
            sort_keys=True,
            allow_nan=False,
        )
    except TypeError as error:
        raise TypeError(
            f"fingerprint_of takes bytes, str or a JSON value, not {type(value).__name__} "
            f"({error}); pass a `serializer`-made bytes or a dict of its fields instead"
        ) from None
    return text.encode("utf-8")


def fingerprint_of(value: Any) -> bytes:
    """A 32-byte SHA-256 digest of `value`: its bytes, a str's UTF-8, or the canonical JSON
    of anything else JSON can write. Equal JSON values (`{"a": 1, "b": 2}` and
    `{"b": 2, "a": 1}`) have equal fingerprints."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        data = canonical_json(value)
    return hashlib.sha256(data).digest()
