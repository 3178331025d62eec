"""EventBridge / Lambda event filtering patterns.

The same language filters EventBridge rules and Lambda event source mappings (`FilterCriteria`): a pattern is a
JSON object whose leaves are lists of accepted values; a list matches when any of its entries matches. Entries are
literal values (strings, numbers, booleans, null) or one of the content filters below. A key of the pattern that is
missing from the event fails the match unless the filter is `{"exists": false}`; an array in the event matches
when any of its elements matches.

Supported content filters: `prefix`, `suffix` (both also with `{"equals-ignore-case": ...}`), `equals-ignore-case`,
`anything-but` (a value, a list, or `{"prefix"|"suffix"|"equals-ignore-case": ...}`), `exists`, `numeric`
(`["<", 1, ">=", 0]`, `["=", 5]`), `wildcard` (`*`), `cidr`.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import operator
from collections.abc import Mapping, Sequence
from typing import Any

_MISSING = object()
_NUMERIC_OPS = {"<": operator.lt, "<=": operator.le, "=": operator.eq, ">": operator.gt, ">=": operator.ge}


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """Whether `event` (a decoded JSON object) matches `pattern`."""
    if not isinstance(pattern, Mapping):
        raise ValueError("an event pattern is a JSON object")
    for key, expected in pattern.items():
        if key == "$or":
            if not any(matches(alt, event) for alt in expected):
                return False
            continue
        actual = event.get(key, _MISSING) if isinstance(event, Mapping) else _MISSING
        if isinstance(expected, Mapping):
            if actual is _MISSING:
                return False
            candidates = actual if isinstance(actual, list) else [actual]
            if not any(matches(expected, c) for c in candidates if isinstance(c, Mapping)):
                return False
        elif isinstance(expected, list):
            if not _leaf_matches(expected, actual):
                return False
        else:
            raise ValueError(f"pattern value for {key!r} must be a list or an object")
    return True


def matches_any(patterns: Sequence[Mapping[str, Any]], event: Any) -> bool:
    """Lambda's FilterCriteria: no filters keep everything; otherwise any filter that matches keeps the record."""
    return not patterns or any(matches(p, event) for p in patterns)


def _leaf_matches(rules: list[Any], actual: Any) -> bool:
    values = actual if isinstance(actual, list) else [actual]
    for rule in rules:
        if isinstance(rule, Mapping) and "exists" in rule:
            present = actual is not _MISSING
            if bool(rule["exists"]) == present:
                return True
            continue
        if actual is _MISSING:
            continue
        if any(_rule_matches(rule, v) for v in values):
            return True
    return False


def _rule_matches(rule: Any, value: Any) -> bool:
    if not isinstance(rule, Mapping):
        return _equal(rule, value)
    if "prefix" in rule:
        return _string_test(rule["prefix"], value, str.startswith)
    if "suffix" in rule:
        return _string_test(rule["suffix"], value, str.endswith)
    if "equals-ignore-case" in rule:
        return isinstance(value, str) and value.casefold() == str(rule["equals-ignore-case"]).casefold()
    if "anything-but" in rule:
        return _anything_but(rule["anything-but"], value)
    if "numeric" in rule:
        return _numeric(rule["numeric"], value)
    if "wildcard" in rule:
        return isinstance(value, str) and fnmatch.fnmatchcase(value, str(rule["wildcard"]).replace("[", "[[]"))
    if "cidr" in rule:
        try:
            return ipaddress.ip_address(str(value)) in ipaddress.ip_network(str(rule["cidr"]), strict=False)
        except ValueError:
            return False
    raise ValueError(f"unsupported filter {dict(rule)!r}")


def _equal(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, int | float) and isinstance(value, int | float):
        return float(expected) == float(value)
    return bool(expected == value)


def _string_test(arg: Any, value: Any, test: Any) -> bool:
    if not isinstance(value, str):
        return False
    if isinstance(arg, Mapping) and "equals-ignore-case" in arg:
        return bool(test(value.casefold(), str(arg["equals-ignore-case"]).casefold()))
    return bool(test(value, str(arg)))


def _anything_but(arg: Any, value: Any) -> bool:
    if isinstance(arg, Mapping):
        return not _rule_matches(arg, value)
    excluded = arg if isinstance(arg, list) else [arg]
    return not any(_equal(e, value) for e in excluded)


def _numeric(spec: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return all(_NUMERIC_OPS[op](value, bound) for op, bound in zip(spec[::2], spec[1::2], strict=True))
