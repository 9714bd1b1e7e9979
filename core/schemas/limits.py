"""What a schema must meet to be saved (docs/api.md, "Schema limits").

A saved schema is one the checker can always run within its budget: at most
MAX_SCHEMA_BYTES of JSON; only local references (`#…`), each resolving in the document; no
reference cycle that comes back to a subschema without moving into the value (a cycle
through `properties` or `items` is a recursive shape, and allowed); composition
(`allOf`/`anyOf`/`oneOf`/`not`/`if`) at most MAX_COMPOSITION_DEPTH deep at one place in the
value and MAX_COMPOSITION_WIDTH subschemas wide; at most MAX_EXPANDED_SUBSCHEMAS
subschemas once every reference is replaced by what it points at; and patterns the
linear-time engine runs (no backreferences, no lookaround). Each refusal names where. (How
deep the JSON nests is bounded before: a `/v1` body nests at most 32 levels.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import jsonschema_rs

from core.platform.errors import InvalidSchema
from core.schemas.engine import compile_schema

MAX_SCHEMA_BYTES = 64 * 1024
MAX_COMPOSITION_DEPTH = 10
MAX_COMPOSITION_WIDTH = 64
MAX_EXPANDED_SUBSCHEMAS = 5_000

Path = tuple[str, ...]

# Keywords whose subschemas apply to the same place in the value (composition).
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MAPS = ("dependentSchemas",)
# Keywords whose subschemas apply to a part of the value (progress).
_DESCENDING_ONE = (
    "additionalProperties",
    "propertyNames",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_DESCENDING_MAPS = ("properties", "patternProperties")
_DESCENDING_LISTS = ("prefixItems",)
# Keywords that only hold subschemas for references to reach.
_CONTAINERS = ("$defs", "definitions")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


def _where(path: Path) -> str:
    return ".".join(["schema", *path])


def _refuse(message: str, path: Path, detail: str) -> InvalidSchema:
    return InvalidSchema(message, [{"field": _where(path), "message": detail}])


@dataclass(slots=True)
class _Child:
    path: Path
    node: Any
    in_place: bool


def _children(node: Mapping[str, Any], path: Path) -> Iterator[_Child]:
    for key in _IN_PLACE_LISTS:
        items = node.get(key)
        if isinstance(items, list):
            if len(items) > MAX_COMPOSITION_WIDTH:
                raise _refuse(
                    "the schema's composition is too wide",
                    (*path, key),
                    f"at most {MAX_COMPOSITION_WIDTH} subschemas",
                )
            for i, item in enumerate(items):
                yield _Child((*path, key, str(i)), item, True)
    for key in _IN_PLACE_ONE:
        if key in node:
            yield _Child((*path, key), node[key], True)
    for key in (*_IN_PLACE_MAPS, *_DESCENDING_MAPS):
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, item in sub.items():
                yield _Child((*path, key, name), item, key in _IN_PLACE_MAPS)
    for key in _DESCENDING_ONE:
        if key in node:
            yield _Child((*path, key), node[key], False)
    items = node.get("items")
    if isinstance(items, list):  # draft 2019-09 and older: a list of schemas
        for i, item in enumerate(items):
            yield _Child((*path, "items", str(i)), item, False)
    elif items is not None:
        yield _Child((*path, "items"), items, False)
    for key in _DESCENDING_LISTS:
        sub = node.get(key)
        if isinstance(sub, list):
            for i, item in enumerate(sub):
                yield _Child((*path, key, str(i)), item, False)
    dependencies = node.get("dependencies")  # draft 7: a schema or a list of names
    if isinstance(dependencies, dict):
        for name, item in dependencies.items():
            if isinstance(item, dict):
                yield _Child((*path, "dependencies", name), item, True)


@dataclass(slots=True)
class _Walk:
    root: Any
    anchors: dict[str, Path] = field(default_factory=dict)
    # path -> (expanded subschemas, composition depth)
    done: dict[Path, tuple[int, int]] = field(default_factory=dict)
    # The subschemas being walked, and whether the value was descended into since each.
    stack: dict[Path, int] = field(default_factory=dict)
    descents: list[int] = field(default_factory=list)

    def node_at(self, path: Path) -> Any:
        node = self.root
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def resolve(self, ref: Any, at: Path) -> Path:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _refuse(
                "the schema has a remote reference",
                at,
                "only references within the schema (starting with #) are allowed",
            )
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            if fragment in self.anchors:
                return self.anchors[fragment]
            raise _refuse("the schema has an unresolvable reference", at, f"no anchor {ref}")
        parts = tuple(p.replace("~1", "/").replace("~0", "~") for p in fragment.split("/")[1:])
        if self.node_at(parts) is None:
            raise _refuse("the schema has an unresolvable reference", at, f"{ref} points nowhere")
        return parts

    def collect_anchors(self, node: Any, path: Path) -> None:
        if isinstance(node, dict):
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.anchors[anchor] = path
            for key, value in node.items():
                self.collect_anchors(value, (*path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                self.collect_anchors(value, (*path, str(i)))

    def measure(self, path: Path, node: Any) -> tuple[int, int]:
        """(subschemas once references are expanded, composition depth) of one subschema."""
        if path in self.done:
            return self.done[path]
        if not isinstance(node, dict):
            return (1, 0)
        self.stack[path] = len(self.stack)
        size, depth = 1, 0
        for key in _REFERENCES:
            if key in node:
                target = self.resolve(node[key], (*path, key))
                size, depth = self._follow(target, (*path, key), size, depth)
        for child in _children(node, path):
            if not child.in_place:
                self.descents.append(len(self.stack))
            try:
                child_size, child_depth = self.measure(child.path, child.node)
            finally:
                if not child.in_place:
                    self.descents.pop()
            size += child_size
            if child.in_place:
                depth = max(depth, child_depth + 1)
            self._check_size(size)
        del self.stack[path]
        if depth > MAX_COMPOSITION_DEPTH:
            raise _refuse(
                "the schema's composition is too deep",
                path,
                f"allOf/anyOf/oneOf/not/if nest at most {MAX_COMPOSITION_DEPTH} deep",
            )
        self.done[path] = (size, depth)
        return size, depth

    def _follow(self, target: Path, at: Path, size: int, depth: int) -> tuple[int, int]:
        if target in self.stack:
            since = self.stack[target]
            if not any(d > since for d in self.descents):
                raise _refuse(
                    "the schema has a reference cycle",
                    at,
                    "a reference comes back to where it started without descending into "
                    "the value (through properties, items…)",
                )
            return size + 1, depth
        target_size, target_depth = self.measure(target, self.node_at(target))
        size += target_size
        self._check_size(size)
        return size, max(depth, target_depth)

    @staticmethod
    def _check_size(size: int) -> None:
        if size > MAX_EXPANDED_SUBSCHEMAS:
            raise _refuse(
                "the schema expands too far",
                (),
                f"at most {MAX_EXPANDED_SUBSCHEMAS} subschemas once references are expanded",
            )


def check_schema(schema: Mapping[str, Any]) -> None:
    """Refuse, with InvalidSchema naming where, a schema past any limit of the module's doc,
    or one that is not a valid JSON Schema."""
    if len(json.dumps(schema).encode()) > MAX_SCHEMA_BYTES:
        raise _refuse("the schema is too large", (), f"at most {MAX_SCHEMA_BYTES} bytes of JSON")
    walk = _Walk(schema)
    walk.collect_anchors(schema, ())
    walk.measure((), schema)
    for key in _CONTAINERS:
        defs = schema.get(key)
        if isinstance(defs, dict):
            for name, sub in defs.items():
                walk.measure((key, name), sub)
    try:
        compile_schema(schema)
    except jsonschema_rs.ValidationError as exc:
        detail = exc.message
        if detail.endswith('is not a "regex"'):
            detail += ": patterns run on a linear-time engine (no backreferences, no lookaround)"
        raise _refuse(
            "the schema is not a valid JSON Schema",
            tuple(str(p) for p in exc.instance_path),
            detail,
        ) from None
