"""Frozen dataclasses <-> the JSON objects of the wire: the one place that turns records into fields.

A record's fields become the object's members in declaration order (the wire's member order). Two
markers, in a field's `metadata`, cover the shapes the protocol has besides plain members:
    FLATTEN        the field is a record whose members sit in the parent object, not under its name
    OMIT_IF_NONE   the member is left out while the field is None (not sent as null)
Decoding is lenient the way a client must be: members it does not know are ignored, and a member the
object lacks takes the field's default.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

FLATTEN: Mapping[str, str] = {"wire": "flatten"}
OMIT_IF_NONE: Mapping[str, str] = {"wire": "omit_if_none"}

R = TypeVar("R")


def to_fields(record: Any) -> dict[str, Any]:
    """The JSON object of a dataclass instance: nested records as objects, FLATTEN and OMIT_IF_NONE
    applied. Values other than records are taken as they are (str, int, float, bool, None, lists)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        how = field.metadata.get("wire")
        if value is None and how in ("omit_if_none", "flatten"):
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = to_fields(value)
        if how == "flatten":
            out.update(value)
        else:
            out[field.name] = value
    return out


def from_fields(cls: type[R], data: Mapping[str, Any]) -> R:  # cls: a dataclass
    """An instance of the dataclass `cls` from a JSON object: members named like its fields are taken
    (nested records decoded, FLATTEN records read from `data` itself), the rest ignored.

    Raises:
        TypeError: `data` lacks a member for a field that has no default.
    """
    record_cls: Any = cls
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(record_cls):
        nested = _record_type(record_cls, field.name)
        if field.metadata.get("wire") == "flatten":
            # an optional group is there when one of its members is
            if nested is not None and (field.default is not None or any(
                    f.name in data for f in dataclasses.fields(nested))):
                kwargs[field.name] = from_fields(nested, data)
            continue
        if field.name not in data:
            continue
        value = data[field.name]
        if nested is not None and isinstance(value, Mapping):
            value = from_fields(nested, value)
        kwargs[field.name] = value
    return cls(**kwargs)


@functools.cache
def _record_type(cls: Any, name: str) -> Any:
    """The dataclass a field of `cls` holds (`X` or `X | None`), or None for any other type."""
    hint = typing.get_type_hints(cls)[name]
    candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None
