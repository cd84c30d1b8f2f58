"""``headers_json_column_name``: a JSONB column sent as Kafka headers, not in the value.

As in CockroachDB, the option names a JSONB column of every target table; each row's
JSON object in it becomes the message's Kafka headers (a key each: a string as it is,
any other JSON value as its JSON text), and the column is left out of the message value.
A NULL (or a JSON value that is not an object) gives no headers. Only the Kafka sink takes
the option, and only with ``format=json`` or ``format=avro``.

Pure: :func:`check_headers_column` judges a table when the changefeed is created,
:func:`split_headers` takes a row's headers out of it.
"""

from __future__ import annotations

import json
from typing import Any

from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.types import Kind

__all__ = ["Headers", "check_headers_column", "split_headers"]

Headers = tuple[tuple[str, bytes], ...]


def check_headers_column(desc: TableDescriptor, options: ChangefeedOptions) -> None:
    """Raise SQLError 22023 unless ``desc`` has the option's column, of type JSONB."""
    name = options.headers_json_column_name
    if name is None:
        return
    column = desc.find_column(name)
    if column is None:
        raise option_error(
            f"headers_json_column_name: required column {name} not present on table {desc.name}"
        )
    if column.type.kind is not Kind.JSONB:
        raise option_error(
            f"headers_json_column_name: column {name} of type {column.type.sql().lower()} "
            "does not match required type jsonb"
        )


def split_headers(row: dict[str, Any] | None, column: str) -> tuple[dict[str, Any] | None, Headers]:
    """``row`` without ``column``, and the headers ``column`` held."""
    if row is None or column not in row:
        return row, ()
    rest = dict(row)
    value = rest.pop(column)
    if not isinstance(value, dict):
        return rest, ()
    headers = tuple(
        (str(key), (item if isinstance(item, str) else json.dumps(item, sort_keys=True)).encode())
        for key, item in value.items()
    )
    return rest, headers
