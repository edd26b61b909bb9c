"""TensorBoard scalars from the bytes of an event file, with no TensorBoard or protobuf library: the daemon reads a
trial's event files (``run/tensorboard``) as reports beside ``pai_jupyter.report``'s (docs/sweeps.md).

An event file is TFRecords (``u64 length, u32 crc, data, u32 crc``) of ``Event`` protos: ``wall_time`` (1,
double), ``step`` (2, varint), ``summary`` (5) of ``Value``s with ``tag`` (1) and ``simple_value`` (2, float) or,
from TF2's writers, ``tensor`` (8) holding one float or double. A truncated tail (a file being written) ends the
read; anything else that does not parse is skipped."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from typing import Any

Fields = dict[int, list[Any]]


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> Fields:
    """A protobuf message's fields by number: ints (varint), bytes (length-delimited), floats and doubles as raw."""
    out: Fields = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(data):
            raise ValueError("truncated field")
        out.setdefault(number, []).append(value)
    return out


def _tensor_value(data: bytes) -> float | None:
    t = _fields(data)
    dtype = t.get(1, [1])[0]
    if 5 in t:  # float_val: packed (bytes of 4s) or one fixed32
        raw = t[5][0]
        return float(struct.unpack_from("<f", raw)[0]) if len(raw) >= 4 else None
    if 6 in t:
        raw = t[6][0]
        return float(struct.unpack_from("<d", raw)[0]) if len(raw) >= 8 else None
    if 4 in t:  # tensor_content
        raw, fmt = t[4][0], {1: "<f", 2: "<d"}.get(dtype)
        if fmt and len(raw) >= struct.calcsize(fmt):
            return float(struct.unpack_from(fmt, raw)[0])
    return None


def records(data: bytes) -> Iterator[bytes]:
    i = 0
    while i + 12 <= len(data):
        (size,) = struct.unpack_from("<Q", data, i)
        if i + 12 + size + 4 > len(data):
            return  # still being written
        yield data[i + 12 : i + 12 + size]
        i += 12 + size + 4


def scalars(data: bytes) -> list[dict[str, Any]]:
    """One report per event with scalars: ``{"time": ms, "step": n, "metrics": {tag: value}}``."""
    out = []
    for record in records(data):
        try:
            event = _fields(record)
            metrics: dict[str, float] = {}
            for summary in event.get(5, []):
                for raw in _fields(summary).get(1, []):
                    v = _fields(raw)
                    tag = v.get(1, [b""])[0].decode("utf-8", "replace")
                    if 2 in v:
                        value: float | None = float(struct.unpack("<f", v[2][0])[0])
                    elif 8 in v:
                        value = _tensor_value(v[8][0])
                    else:
                        continue
                    if tag and value is not None and math.isfinite(value) and len(tag) <= 128:
                        metrics[tag] = value
            if metrics:
                wall = struct.unpack("<d", event[1][0])[0] if 1 in event else 0.0
                out.append({"time": int(wall * 1000), "step": int(event.get(2, [0])[0]), "metrics": metrics})
        except (ValueError, struct.error, IndexError, UnicodeDecodeError):
            continue
    return out
