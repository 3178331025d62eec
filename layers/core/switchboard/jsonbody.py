"""The JSON reader of every request body (`switchboard.api.jsonbody.parse_body`) and of JSON Lines imports.

It is `json.loads` after a depth check and with three hooks, so the rules below hold for every body of every route,
whatever its model:
- a document nested deeper than `MAX_DEPTH` (64) arrays and objects is malformed JSON (a `json.JSONDecodeError`, 400
  `invalid_json`), found by `too_deep` before the parser could recurse (the C scanner raises `RecursionError` near
  10,000 levels, Python code walking a document near 1,000; no route expects either); provider callbacks, whose
  bodies are read with plain `json`, go through `parse` for the same check (a linked-device engine's, through
  `parse_callback`, which also refuses a key given twice and a NUL character);
- a key given twice in one object is refused (the last would win silently: `"role":"viewer","role":"owner"`);
- a number DynamoDB cannot store (`switchboard.models.unstorable_number`) is refused, wherever it sits (typed
  fields, free-form documents, rule trees);
- integers are read by `int` and fractions by `float`, as `json.loads` reads them.
A refusal is a 400 `validation_failed` naming the body. The hooks run only for objects and numbers; strings and the
rest stay on the C scanner's path.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from switchboard.models import NUMBER_MAX_DIGITS, unstorable_number

MAX_DEPTH = 64
# Strings (escapes included) are removed before the brackets are counted (`"[[["` nests nothing); linear.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` levels deep (outside strings): a cheap scan
    of the raw text, at C speed for the text and one step per bracket. Malformed text is judged by its brackets."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text)).encode()
    return max(accumulate(map(_BRACKETS.__getitem__, brackets)), default=0) > limit


class TooDeep(json.JSONDecodeError):
    """JSON nested deeper than `MAX_DEPTH`: malformed for every reader here (400 `invalid_json`)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"arrays and objects nest deeper than {MAX_DEPTH} levels", text, 0)


def parse(text: str | bytes) -> Any:
    """Plain `json.loads` (no rule on keys or numbers: a provider's callback body is the provider's) behind the depth
    check: a `json.JSONDecodeError` (a `ValueError`; `TooDeep` when nested too deep) for malformed JSON, never a
    `RecursionError`."""
    if too_deep(text):
        raise TooDeep(text if isinstance(text, str) else "")
    return json.loads(text)


def parse_callback(text: str | bytes) -> Any:
    """A linked-device engine's signed callback body under the API's own rules for bodies: nested no deeper than
    `MAX_DEPTH` (`TooDeep`), no key given twice in one object, and no NUL character (U+0000, which no text we store
    may hold) in any key or string (`BodyRefused` naming the field); numbers are read as `json.loads` reads them (the
    engine's). A `json.JSONDecodeError` for malformed JSON, raw control characters included."""
    if too_deep(text):
        raise TooDeep(text if isinstance(text, str) else "")
    try:
        doc = _KEYS.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
    except BodyRefused as err:
        tolerant = _TOLERANT_KEYS.decode(text if isinstance(text, str) else text.decode("utf-8"))
        raise _locate(tolerant, "body") or err from None
    found = _nul(doc, "body")
    if found is not None:
        raise BodyRefused("holds a NUL character (U+0000)", found)
    return doc


def _nul(value: Any, path: str) -> str | None:
    """Where the first NUL character in a key or string of a parsed document is (the document is at most
    `MAX_DEPTH` deep); None when there is none."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, child in value.items():
            if "\x00" in key:
                return f"{path}.{key.replace(chr(0), '?')}"
            found = _nul(child, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = _nul(child, f"{path}.{index}")
            if found is not None:
                return found
    return None


class BodyRefused(ValueError):
    """A body that is JSON but breaks one of the rules above; `field` is where (`body.a.0.b`) when known."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


def _duplicate(pairs: list[tuple[str, Any]]) -> str | None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise BodyRefused(f"the key {_duplicate(pairs)!r} appears more than once in one object")
    return obj


def _float(text: str) -> float:
    problem = unstorable_number(text)
    if problem:
        raise BodyRefused(f"{text[:60]}: {problem}")
    return float(text)


def _int(text: str) -> int:
    if len(text) > NUMBER_MAX_DIGITS and (problem := unstorable_number(text)):
        raise BodyRefused(f"{text[:60]}: {problem}")
    return int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float, parse_int=_int)


class _Refusal:
    """Where the second, tolerant reading of a refused body met a broken rule (found again by `_locate`)."""

    def __init__(self, message: str, value: Any = None) -> None:
        self.message = message
        self.value = value


def _tolerant_object(pairs: list[tuple[str, Any]]) -> Any:
    key = _duplicate(pairs)
    if key is not None:
        return _Refusal(f"the key {key!r} appears more than once in one object")
    return dict(pairs)


def _tolerant_number(text: str) -> Any:
    problem = unstorable_number(text)
    return _Refusal(f"{text[:60]}: {problem}") if problem else 0


_TOLERANT = json.JSONDecoder(
    object_pairs_hook=_tolerant_object, parse_float=_tolerant_number, parse_int=_tolerant_number
)


_KEYS = json.JSONDecoder(object_pairs_hook=_object)
_TOLERANT_KEYS = json.JSONDecoder(object_pairs_hook=_tolerant_object)


def _locate(value: Any, path: str) -> BodyRefused | None:
    if isinstance(value, _Refusal):
        return BodyRefused(value.message, path)
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, child in children:
        found = _locate(child, f"{path}.{name}")
        if found is not None:
            return found
    return None


def loads(text: str) -> Any:
    """`json.loads(text)` under the rules above; a `BodyRefused` naming the field for a body that breaks them (the
    body is read a second time, tolerantly, only to find where); a `json.JSONDecodeError` for malformed JSON and for
    JSON nested deeper than `MAX_DEPTH`."""
    if too_deep(text):
        raise TooDeep(text)
    try:
        return _DECODER.decode(text)
    except BodyRefused as err:
        raise _locate(_TOLERANT.decode(text), "body") or err from None
