"""Conversions between Python values and the protobuf well-known types (internal)."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

Seconds = Union[int, float, _dt.timedelta]

# Numbers travel as doubles (JSON semantics): integers are exact up to 2^53.
_MAX_SAFE_INT = 2**53


def to_value(value: Any, where: str = "value") -> struct_pb2.Value:
    out = struct_pb2.Value()
    _fill_value(out, value, where)
    return out


def _fill_value(out: struct_pb2.Value, value: Any, where: str) -> None:
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        if abs(value) > _MAX_SAFE_INT:
            raise ValueError(f"{where}: integer {value} is beyond 2^53 and would lose precision; pass it as a string")
        out.number_value = float(value)
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{where}: {value} is not a JSON number")
        out.number_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, Mapping):
        _fill_struct(out.struct_value, value, where)
    elif isinstance(value, (list, tuple)):
        _fill_list(out.list_value, value, where)
    else:
        raise TypeError(f"{where}: {type(value).__name__} is not JSON-compatible (use None, bool, numbers, str, lists and dicts)")


def _fill_struct(out: struct_pb2.Struct, value: Mapping[str, Any], where: str) -> None:
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: keys must be strings, got {key!r}")
        _fill_value(out.fields[key], item, f"{where}.{key}")


def _fill_list(out: struct_pb2.ListValue, value: Sequence[Any], where: str) -> None:
    for i, item in enumerate(value):
        _fill_value(out.values.add(), item, f"{where}[{i}]")


def to_struct(value: Mapping[str, Any], where: str) -> struct_pb2.Struct:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: must be a dict, got {type(value).__name__}")
    out = struct_pb2.Struct()
    _fill_struct(out, value, where)
    return out


def to_list(value: Sequence[Any], where: str) -> struct_pb2.ListValue:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{where}: must be a list or tuple, got {type(value).__name__}")
    out = struct_pb2.ListValue()
    _fill_list(out, value, where)
    return out


def from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        # JSON has one number type: give integral values back as int (21, not 21.0).
        if number.is_integer() and abs(number) <= _MAX_SAFE_INT:
            return int(number)
        return number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return from_list(value.list_value)
    return None


def from_struct(value: struct_pb2.Struct) -> Dict[str, Any]:
    return {key: from_value(item) for key, item in value.fields.items()}


def from_list(value: struct_pb2.ListValue) -> List[Any]:
    return [from_value(item) for item in value.values]


def seconds_of(value: Seconds, where: str) -> float:
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: must be seconds (int or float) or a timedelta, got {type(value).__name__}")
    return float(value)


def to_duration(value: Seconds, where: str) -> duration_pb2.Duration:
    seconds = seconds_of(value, where)
    if seconds < 0:
        raise ValueError(f"{where}: must be >= 0, got {seconds:g}s")
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out


def from_duration(value: duration_pb2.Duration) -> _dt.timedelta:
    return _dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def to_timestamp(value: _dt.datetime, where: str) -> timestamp_pb2.Timestamp:
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"{where}: must be a datetime, got {type(value).__name__}")
    out = timestamp_pb2.Timestamp()
    # A naive datetime is local time, as everywhere in Python (datetime.timestamp()).
    out.FromNanoseconds(round(value.timestamp() * 1e9))
    return out


def from_timestamp(value: timestamp_pb2.Timestamp) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(value.seconds + value.nanos / 1e9, tz=_dt.timezone.utc)


def optional_timestamp(message: Message, field: str) -> Optional[_dt.datetime]:
    return from_timestamp(getattr(message, field)) if message.HasField(field) else None
