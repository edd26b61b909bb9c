"""Text to a plain document: JSON or YAML, with line and column on syntax errors, and bounded size."""

from __future__ import annotations

import json
from typing import Any

import yaml

from .errors import JobValidationError, Problem

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000  # after YAML aliases are expanded: stops "billion laughs" documents early
# No mapping or list of a job needs more entries (a job has at most 1,000 tasks); a document with 100,000 keys
# is refused while it is being counted, before it is built.
MAX_ENTRIES = 10_000
TOO_MANY = f"a mapping or list in the document has more than {MAX_ENTRIES} entries"
# A job nests about 6 levels deep; far deeper values would overflow the stack of deepcopy / YAML dumping later.
MAX_DEPTH = 100
TOO_DEEP = f"the document is nested too deeply (more than {MAX_DEPTH} levels)"
# libyaml when present: the pure-Python scanner takes seconds on a few kB of nested "[[[[", libyaml refuses
# nesting past 1000 levels in microseconds.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _decode(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JobValidationError([Problem("", f"the document is not valid UTF-8 (byte {exc.start})")]) from None


def _count_nodes(node: yaml.Node) -> int:
    """Count nodes with aliases expanded, stopping as soon as the bound is passed."""
    count, stack = 0, [node]
    while stack:
        current = stack.pop()
        count += 1
        if count > MAX_NODES:
            break
        if isinstance(current, (yaml.MappingNode, yaml.SequenceNode)) and len(current.value) > MAX_ENTRIES:
            raise JobValidationError([Problem("", TOO_MANY)])
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.append(key)
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    return count


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep lists and mappings nest (a flat mapping is 1); counting stops just past ``limit``."""
    deepest, stack = 0, [(value, 0)]
    while stack and deepest <= limit:
        current, depth = stack.pop()
        if isinstance(current, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (current.values() if isinstance(current, dict) else current))
    return deepest


def widest(value: Any) -> int:
    """The most entries any one mapping or list holds (counting stops past MAX_ENTRIES)."""
    most, stack = 0, [value]
    while stack and most <= MAX_ENTRIES:
        current = stack.pop()
        if isinstance(current, (dict, list)):
            most = max(most, len(current))
            stack.extend(current.values() if isinstance(current, dict) else current)
    return most


def _check_width(text: str) -> None:
    """Refuse a mapping or list of more than MAX_ENTRIES entries while reading the event stream: a 100,000-key
    document stops after 10,000 keys, before any node of it is built."""
    if len(text) <= 2 * MAX_ENTRIES:  # each entry takes at least two characters: a short text cannot have that many
        return
    loader = _LOADER(text)
    try:
        open_counts: list[int] = []
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                open_counts.pop()
                continue
            if open_counts:
                open_counts[-1] += 1
                if open_counts[-1] > 2 * MAX_ENTRIES:  # a mapping's entry is two events (key, value)
                    raise JobValidationError([Problem("", TOO_MANY)])
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                open_counts.append(0)
    finally:
        loader.dispose()


def _load_yaml(text: str) -> Any:
    _check_width(text)
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _count_nodes(node) > MAX_NODES:
            raise JobValidationError([Problem("", f"the document expands to more than {MAX_NODES} values")])
        return loader.construct_document(node)
    finally:
        loader.dispose()


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """PyYAML writes NEL / LS / PS raw in plain and single-quoted scalars, where a loader folds them into spaces;
    strings holding them are written double-quoted (escaped) so that dumping and loading gives the same text."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(c in value for c in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(doc: Any) -> str:
    """A document as YAML, keys in their order, that loads back to the same document."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def load_document(data: str | bytes, *, source: str | None = None) -> dict[str, Any]:
    """Parse JSON (text starting with ``{``) or YAML into a mapping; every failure is a JobValidationError."""
    raw_len = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if raw_len > MAX_DOCUMENT_BYTES:
        raise JobValidationError(
            [Problem("", f"the document is {raw_len} bytes; the limit is {MAX_DOCUMENT_BYTES}")], source
        )
    try:
        text = _decode(data)
        if "\x00" in text:
            raise JobValidationError([Problem("", "the document contains a NUL character")])
        stripped = text.strip()
        if not stripped:
            raise JobValidationError([Problem("", "the document is empty")])
        if stripped.startswith("{"):
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise JobValidationError(
                    [Problem("", f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}")]
                ) from None
        else:
            try:
                doc = _load_yaml(text)
            except yaml.MarkedYAMLError as exc:
                mark = exc.problem_mark or exc.context_mark
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
                what = exc.problem or exc.context or "invalid YAML"
                raise JobValidationError([Problem("", f"YAML syntax error{where}: {what}")]) from None
            except yaml.reader.ReaderError as exc:  # libyaml gives the character as an int, PyYAML as a str
                code = exc.character if isinstance(exc.character, int) else ord(exc.character)
                raise JobValidationError(
                    [
                        Problem(
                            "",
                            f"YAML error at character {exc.position + 1}: unacceptable "
                            f"character #x{code:04x} ({exc.reason})",
                        )
                    ]
                ) from None
            except yaml.YAMLError as exc:
                raise JobValidationError([Problem("", f"YAML error: {exc}")]) from None
    except RecursionError:
        raise JobValidationError([Problem("", TOO_DEEP)], source) from None
    except JobValidationError as exc:
        raise JobValidationError(exc.problems, source) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. huge integers, odd YAML tags
        raise JobValidationError([Problem("", f"the document cannot be read: {exc}")], source) from None
    if nesting_depth(doc) > MAX_DEPTH:
        raise JobValidationError([Problem("", TOO_DEEP)], source)
    if widest(doc) > MAX_ENTRIES:
        raise JobValidationError([Problem("", TOO_MANY)], source)
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else f"a {type(doc).__name__}"
        raise JobValidationError(
            [Problem("", f"a job must be a mapping of fields, but the document is {kind}")], source
        )
    bad_keys = [k for k in doc if not isinstance(k, str)]
    if bad_keys:
        raise JobValidationError([Problem("", f"field names must be strings, got {bad_keys[0]!r}")], source)
    return doc
