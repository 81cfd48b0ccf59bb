"""Reading a flow definition given as a dict, a JSON string or a path: the
document, before any check of what it says."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from parkway.errors import FlowDefinitionError, describe, shown


def read(source: Any) -> Any:
    """A definition given as a dict, a JSON string or a path (str or ``Path``) -> the document.

    Raises:
        FlowDefinitionError: The file is missing or the JSON is malformed.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, bytes):
        source = _decoded(source, "the flow definition")
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return _parse_json(source, "the flow definition")
    if isinstance(source, str | os.PathLike):
        try:
            path = Path(source)
            raw = path.read_bytes()
        except FileNotFoundError:
            raise FlowDefinitionError(f"no flow definition file at {shown(str(source))}") from None
        except (OSError, ValueError) as exc:  # (ValueError: a NUL or a lone surrogate in it)
            raise FlowDefinitionError(
                f"cannot read flow definition {shown(str(source))}: {describe(exc)}"
            ) from None
        return _parse_json(_decoded(raw, str(path)), str(path))
    raise FlowDefinitionError(
        f"a flow definition is a dict, a JSON string or a path, got {type(source).__name__}"
    )


def _decoded(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FlowDefinitionError(
            f"{shown(where)} is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x}); "
            "save it as UTF-8 JSON"
        ) from None


def _parse_json(text: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FlowDefinitionError(f"{where} is not valid JSON: {exc}") from None
