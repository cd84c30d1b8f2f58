"""A changefeed's ``WITH`` options: what each one means, its values, and the
combinations that make no sense.

:func:`parse_options` turns the ``(name, value)`` pairs the parser produced into a frozen
:class:`ChangefeedOptions`, or raises :class:`~feedkv.errors.SQLError` 22023 naming the bad
option and what would be right ("unknown option 'envelop'; did you mean 'envelope'?").
Options that depend on the sink (``compression`` on files only, ``kafka_sink_config``
on Kafka only...) are checked by the sink registry (:mod:`feedkv.changefeed.sink`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.sql.types import timestamp_of
from feedkv.util.hlc import Timestamp
from feedkv.util.locality import Locality
from feedkv.util.units import go_duration, parse_duration_ns

__all__ = [
    "DEFAULT_LAGGING_RANGES_POLLING_INTERVAL",
    "DEFAULT_LAGGING_RANGES_THRESHOLD",
    "DEFAULT_MIN_CHECKPOINT_FREQUENCY",
    "OPTION_NAMES",
    "ROW_FORMATS",
    "CURSOR_AGE_WARNING_NS",
    "ChangefeedOptions",
    "check_option_name",
    "cursor_age_notices",
    "frequency_notices",
    "option_error",
    "parse_options",
]

DEFAULT_MIN_CHECKPOINT_FREQUENCY = 30.0  # seconds, as in CockroachDB
DEFAULT_LAGGING_RANGES_THRESHOLD = 180.0  # seconds, as in CockroachDB
DEFAULT_LAGGING_RANGES_POLLING_INTERVAL = 60.0  # seconds, as in CockroachDB


def frequency_notices(options: ChangefeedOptions) -> tuple[str, ...]:
    """CREATE CHANGEFEED's (and ALTER CHANGEFEED's) notice, in CockroachDB's words, when
    ``resolved`` asks for markers more often than ``min_checkpoint_frequency`` lets them
    come. NB: CockroachDB sends none for a sinkless changefeed (it plans one without
    reaching this check), nor does feedkv."""
    given = dict(options.given)
    if "resolved" not in given or options.resolved is None:
        return ()
    asked = given["resolved"]
    resolved = 0.0 if asked is None else options.resolved  # bare: as often as checkpoints
    every = options.min_checkpoint_frequency
    if resolved >= every:
        return ()
    which = "configured" if "min_checkpoint_frequency" in given else "default"
    shown = "0s by default" if asked is None else go_duration(round(resolved * 1e9))
    return (
        f"resolved ({shown}) messages will not be emitted more frequently than the {which} "
        f"min_checkpoint_frequency ({go_duration(round(every * 1e9))}), but may be emitted "
        "less frequently",
    )


CURSOR_AGE_WARNING_NS = 5 * 3600 * 10**9  # CockroachDB's: five hours


def cursor_age_notices(options: ChangefeedOptions, now: Timestamp) -> tuple[str, ...]:
    """CREATE CHANGEFEED's notice, in CockroachDB's words, when its ``cursor`` is more
    than five hours before the statement (``now``) and changes after it are to follow
    (not ``initial_scan='only'``): sinkless changefeeds send it too."""
    cursor = options.cursor
    if cursor is None or options.initial_scan == "only":
        return ()
    age = now.wall - cursor.wall
    if age <= CURSOR_AGE_WARNING_NS:
        return ()
    return (
        f"the provided cursor is {age // (3600 * 10**9)} hours old; "
        "older cursors can result in increased changefeed latency",
    )


def option_error(message: str) -> SQLError:
    """An error in a changefeed's options or sink (SQLSTATE 22023, invalid parameter)."""
    return SQLError("22023", message)


@dataclass(frozen=True, slots=True)
class ChangefeedOptions:
    """Every option with its value (defaults filled in). Durations are in seconds.

    ``resolved`` is ``None`` when no resolved markers are wanted, else the least time
    between two markers. ``given`` keeps the options as written, for descriptions."""

    cursor: Timestamp | None = None
    end_time: Timestamp | None = None
    initial_scan: str = "yes"  # yes | no | only
    envelope: str = "wrapped"  # wrapped | bare | key_only | row | enriched
    format: str = "json"  # json | avro | csv | parquet | protobuf
    updated: bool = False
    mvcc_timestamp: bool = False
    diff: bool = False
    resolved: float | None = None
    min_checkpoint_frequency: float = DEFAULT_MIN_CHECKPOINT_FREQUENCY
    key_in_value: bool = False
    topic_in_value: bool = False
    full_table_name: bool = False
    lake_mode: str = "mirror"  # mirror | changelog (lake sinks only)
    split_column_families: bool = False
    schema_change_events: str = "default"  # default | column_changes
    schema_change_policy: str = "backfill"  # backfill | nobackfill | stop
    on_error: str = "fail"  # fail | pause
    compression: str | None = None  # gzip | zstd
    confluent_schema_registry: str | None = None
    kafka_sink_config: dict[str, Any] | None = None
    webhook_sink_config: dict[str, Any] | None = None
    pubsub_sink_config: dict[str, Any] | None = None
    webhook_auth_header: str | None = None
    webhook_client_timeout: float | None = None
    metrics_label: str | None = None
    # a range of the feed lags when its resolved timestamp is this far behind; the count
    # (changefeed_lagging_ranges) is taken again at most this often
    lagging_ranges_threshold: float = DEFAULT_LAGGING_RANGES_THRESHOLD
    lagging_ranges_polling_interval: float = DEFAULT_LAGGING_RANGES_POLLING_INTERVAL
    avro_schema_prefix: str | None = None
    headers_json_column_name: str | None = None
    enriched_properties: tuple[str, ...] = ()  # source | schema, with envelope=enriched
    csv_header: bool = False  # format=csv: a first line of column names in each file
    # the message key is this column's value instead of the primary key (with unordered)
    key_column: str | None = None
    unordered: bool = False
    extra_headers: dict[str, str] | None = None  # on every Kafka message / webhook request
    virtual_columns: str = "omitted"  # omitted | null
    # format=json: a JSONB value that is JSON null as {"__crdb_json_null__": true}, so it
    # is told apart from SQL NULL (null)
    encode_json_value_null_as_object: bool = False
    # a paused job's protection of its history lapses this long after it was paused,
    # and the job is canceled (None: never)
    gc_protect_expires_after: float | None = None
    # the locality tiers a node must have to run the job: ((key, value), ...)
    execution_locality: tuple[tuple[str, str], ...] | None = None
    given: tuple[tuple[str, str | None], ...] = field(default=())

    @property
    def scans(self) -> bool:
        """Whether the changefeed starts with an initial scan."""
        return self.initial_scan in ("yes", "only")


# Value parsers: each takes the option's name and its text (None when bare) and returns
# the field's value, or raises with a message that names the option.

_Parser = Callable[[str, "str | None", Timestamp], Any]


def _flag(name: str, value: str | None, now: Timestamp) -> bool:
    if value is not None:
        raise option_error(f"option {name} takes no value (write WITH {name})")
    return True


def _choice(*choices: str, bare: str | None = None) -> _Parser:
    def parse(name: str, value: str | None, now: Timestamp) -> str:
        if value is None and bare is not None:
            return bare
        if value is None:
            raise option_error(f"option {name} needs a value: one of {', '.join(choices)}")
        if value.lower() not in choices:
            raise option_error(
                f"unknown {name} {value!r}{_suggest(value.lower(), choices)}; "
                f"expected one of {', '.join(choices)}"
            )
        return value.lower()

    return parse


def _duration(name: str, value: str | None, now: Timestamp) -> float:
    if value is None:
        raise option_error(f"option {name} needs a duration, such as '10s'")
    if value.strip().startswith("-"):
        raise option_error(f"option {name}: the duration {value!r} is negative")
    try:
        ns = parse_duration_ns(value)
    except InvalidArgumentError:
        raise option_error(
            f"option {name}: {value!r} is not a duration; write one such as '10s' or '500ms'"
        ) from None
    if ns < 0:
        raise option_error(f"option {name}: the duration {value!r} is negative")
    return ns / 1e9


_LONGEST_RESOLVED = 7 * 24 * 3600.0  # a week: a feed quieter than that checkpoints nothing


def _resolved(name: str, value: str | None, now: Timestamp) -> float | None:
    """``resolved='<interval>'``: the least time between markers; ``'0s'`` is every
    marker, as a bare ``resolved`` (CockroachDB's reading of it too)."""
    if value is None:
        return None  # see parse_options
    seconds = _duration(name, value, now)
    if seconds > _LONGEST_RESOLVED:
        raise option_error(f"option {name}: {value!r} is longer than the longest interval, 168h")
    return seconds


def _timestamp(name: str, value: str | None, now: Timestamp) -> Timestamp:
    if value is None:
        raise option_error(f"option {name} needs a timestamp")
    if value.lower() == "now":
        return now
    try:
        return timestamp_of(value, now)
    except SQLError:
        raise option_error(
            f"option {name}: {value!r} is not a timestamp; use a logical timestamp "
            "(cluster_logical_timestamp()), a negative interval such as '-10s', or a date/time"
        ) from None


def _text(name: str, value: str | None, now: Timestamp) -> str:
    if not value:
        raise option_error(f"option {name} needs a value")
    return value


def _json_object(name: str, value: str | None, now: Timestamp) -> dict[str, Any]:
    text = _text(name, value, now)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise option_error(f"option {name} is not valid JSON: {exc.msg} at {exc.pos}") from None
    if not isinstance(parsed, dict):
        raise option_error(f"option {name} must be a JSON object, such as '{{\"Flush\": ...}}'")
    return parsed


# The CDC design's envelope names, and the shipped envelope (with diff or not) each is.
_DESIGN_ENVELOPES = {"none": ("row", False), "diff": ("wrapped", True)}


def _avro_prefix(name: str, value: str | None, now: Timestamp) -> str:
    """An Avro namespace (dotted names of letters, digits and ``_``, none starting with
    a digit): the prefix is the namespace of every record, as in CockroachDB."""
    text = _text(name, value, now)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", text):
        raise option_error(
            f"option {name}: {text!r} is not an Avro namespace; use letters, digits and _ "
            "(not starting with a digit), in parts separated by '.'"
        )
    return text


_ENRICHED_PROPERTIES = ("source", "schema")


def _enriched_properties(name: str, value: str | None, now: Timestamp) -> tuple[str, ...]:
    """A comma-separated list of ``source`` and ``schema``."""
    properties = tuple(p.strip().lower() for p in _text(name, value, now).split(","))
    for prop in properties:
        if prop not in _ENRICHED_PROPERTIES:
            raise option_error(
                f"unknown {name} {prop!r}{_suggest(prop, _ENRICHED_PROPERTIES)}; "
                f"expected a list of {', '.join(_ENRICHED_PROPERTIES)}"
            )
    if len(set(properties)) != len(properties):
        raise option_error(f"option {name} names a property more than once: {value!r}")
    return properties


# Where the enriched envelope carries what these options ask for.
_IN_SOURCE = {"updated": "ts_hlc and source.ts_ns", "mvcc_timestamp": "mvcc_timestamp"}


def _headers(name: str, value: str | None, now: Timestamp) -> dict[str, str]:
    """A JSON object of header names to values: strings, or numbers and booleans (sent
    as their JSON text)."""
    parsed = _json_object(name, value, now)
    headers: dict[str, str] = {}
    for header, item in parsed.items():
        if not header.strip():
            raise option_error(f"option {name}: a header name is empty")
        if isinstance(item, str):
            headers[header] = item
        elif isinstance(item, bool | int | float):
            headers[header] = json.dumps(item)
        else:
            raise option_error(
                f"option {name}: header {header!r} has a {type(item).__name__} value; "
                "a header's value is a string"
            )
    return headers


def _locality(name: str, value: str | None, now: Timestamp) -> tuple[tuple[str, str], ...]:
    """``key=value`` tiers separated by commas, as a node's ``--locality``."""
    text = _text(name, value, now)
    try:
        return Locality.parse(text, what=f"option {name}").tiers
    except InvalidArgumentError as exc:
        raise option_error(str(exc)) from None


def _positive_duration(name: str, value: str | None, now: Timestamp) -> float:
    seconds = _duration(name, value, now)
    if seconds <= 0:
        raise option_error(f"option {name} must be more than 0s, such as '24h'")
    return seconds


# Formats the file sink writes from the rows themselves, not from encoded messages.
ROW_FORMATS = frozenset({"csv", "parquet"})

_OPTIONS: dict[str, _Parser] = {
    "cursor": _timestamp,
    "end_time": _timestamp,
    "initial_scan": _choice("yes", "no", "only", bare="yes"),
    "envelope": _choice("wrapped", "bare", "key_only", "row", "enriched", *_DESIGN_ENVELOPES),
    "format": _choice("json", "avro", "csv", "parquet", "protobuf"),
    "updated": _flag,
    "mvcc_timestamp": _flag,
    "diff": _flag,
    "resolved": _resolved,
    "min_checkpoint_frequency": _duration,
    "key_in_value": _flag,
    "topic_in_value": _flag,
    "full_table_name": _flag,
    "split_column_families": _flag,
    "schema_change_events": _choice("default", "column_changes"),
    "schema_change_policy": _choice("backfill", "nobackfill", "stop"),
    "on_error": _choice("fail", "pause"),
    "compression": _choice("gzip", "zstd"),
    "confluent_schema_registry": _text,
    "kafka_sink_config": _json_object,
    "webhook_sink_config": _json_object,
    "pubsub_sink_config": _json_object,
    "webhook_auth_header": _text,
    "webhook_client_timeout": _duration,
    "metrics_label": _text,
    "lagging_ranges_threshold": _duration,
    "lagging_ranges_polling_interval": _duration,
    "lake_mode": _choice("mirror", "changelog"),
    "avro_schema_prefix": _avro_prefix,
    "headers_json_column_name": _text,
    "enriched_properties": _enriched_properties,
    "csv_header": _flag,
    "key_column": _text,
    "unordered": _flag,
    "extra_headers": _headers,
    "virtual_columns": _choice("omitted", "null"),
    "gc_protect_expires_after": _positive_duration,
    "execution_locality": _locality,
    "encode_json_value_null_as_object": _flag,
}

OPTION_NAMES = frozenset(_OPTIONS)

# Older spellings CockroachDB users still write, and what they mean now.
_ALIASES = {
    "no_initial_scan": ("initial_scan", "no"),
    "initial_scan_only": ("initial_scan", "only"),
}


def _both_spellings(first: str, second: str) -> str:
    """CockroachDB's refusal of two spellings of one option (``initial_scan`` and
    ``no_initial_scan``), in its order whichever was written first."""
    a, b = sorted((first, second))  # initial_scan < initial_scan_only < no_initial_scan
    if (a, b) == ("initial_scan_only", "no_initial_scan"):
        a = "initial_scan='only'"  # NB: CockroachDB's wording for this pair
    return f"cannot specify both {a} and {b}"


def check_option_name(name: str) -> None:
    """SQLError 22023 unless ``name`` is an option (or an older spelling of one), with
    a suggestion for a misspelt one; for names given without a value to parse
    (``ALTER CHANGEFEED ... UNSET``)."""
    if name not in _OPTIONS and name not in _ALIASES:
        raise option_error(f"unknown option {name!r}{_suggest(name, _OPTIONS)}")


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_options(
    given: Iterable[tuple[str, str | None]], *, now: Timestamp, query: bool = False
) -> ChangefeedOptions:
    """Validate the options of a ``WITH`` clause; ``now`` anchors relative timestamps
    (``cursor='-10s'``). ``query``: the changefeed is a CDC query, whose envelope is
    ``bare`` unless given (as in CockroachDB); pass it wherever a query changefeed's
    options are parsed again (a job read back, an ALTER). Raises SQLError 22023 on the
    first problem."""
    given = tuple(given)
    values: dict[str, Any] = {}
    spelt: dict[str, str] = {}  # each option set, by the spelling that set it
    for written, value in given:
        name = written
        if written in _ALIASES:
            if value is not None:
                raise option_error(f"option {written} takes no value (write WITH {written})")
            name, value = _ALIASES[written]
        parser = _OPTIONS.get(name)
        if parser is None:
            raise option_error(f"unknown option {name!r}{_suggest(name, _OPTIONS)}")
        if name in values:
            if spelt[name] != written:
                raise option_error(_both_spellings(spelt[name], written))
            raise option_error(f"option {written} is given more than once")
        spelt[name] = written
        values[name] = parser(name, value, now)
    if values.get("envelope") in _DESIGN_ENVELOPES:
        design = values["envelope"]
        values["envelope"], diff = _DESIGN_ENVELOPES[design]
        if diff:
            values["diff"] = True
        elif "diff" in values:  # NB: envelope=row takes diff, but 'none' says there is none
            raise option_error(
                f"option diff is only usable with envelope=wrapped or enriched, not {design}"
            )
    if "cursor" in values:
        values.setdefault("initial_scan", "no")  # a cursor resumes: nothing to scan
    if "resolved" in values and values["resolved"] is None:  # bare: as often as checkpoints
        values["resolved"] = values.get(
            "min_checkpoint_frequency", DEFAULT_MIN_CHECKPOINT_FREQUENCY
        )
    options = ChangefeedOptions(**values, given=given)
    _check_combinations(options, set(values), now)
    if query and "envelope" not in values:
        # NB: after the checks, which CockroachDB makes against the options as given
        options = replace(options, envelope="bare")
    return options


# What a changefeed that ends after its scan cannot do: no resolved markers or end time
# (there is no stream), no diff and no updated or MVCC timestamps (as CockroachDB refuses)
_INITIAL_SCAN_ONLY_UNSUPPORTED = ("end_time", "resolved", "diff", "mvcc_timestamp", "updated")


def _check_combinations(o: ChangefeedOptions, named: set[str], now: Timestamp) -> None:
    for name in ("lagging_ranges_threshold", "lagging_ranges_polling_interval"):
        if getattr(o, name) <= 0:
            raise option_error(f"option {name} must be more than 0s, such as '1m'")
    if o.initial_scan == "only":
        # NB: CockroachDB's wording; it names the option's old spelling whichever was written
        for name in _INITIAL_SCAN_ONLY_UNSUPPORTED:
            if name in named:
                raise option_error(f"cannot specify both initial_scan_only and {name}")
    if o.encode_json_value_null_as_object and o.format != "json":
        raise option_error(
            "option encode_json_value_null_as_object is only usable with format=json"
        )
    if o.csv_header and o.format != "csv":
        raise option_error("option csv_header is only usable with format=csv")
    if o.key_column is not None and not o.unordered:
        raise option_error(
            "option key_column needs the unordered option: a key other than the primary "
            "key does not keep the changefeed's ordering (WITH key_column='c', unordered)"
        )
    if o.unordered and "resolved" in named:
        raise option_error(
            "option resolved is not usable with unordered: resolved timestamps may not be "
            "correct in unordered mode"
        )
    if o.key_column is not None and o.format not in ("json", "avro", "protobuf"):
        raise option_error(f"option key_column is not supported with format={o.format}")
    if o.format == "csv" and o.initial_scan != "only":
        raise option_error("format=csv is only supported with initial_scan='only'")
    if o.format == "csv" and o.envelope not in ("wrapped", "row"):
        raise option_error(f"format=csv does not support envelope={o.envelope}")
    if o.format == "avro":
        if o.confluent_schema_registry is None:
            raise option_error(
                "format=avro needs a schema registry: add "
                "confluent_schema_registry='http://host:port'"
            )
        for name in ("key_in_value", "topic_in_value"):
            if name in named:
                raise option_error(f"option {name} is only usable with format=json")
        if o.envelope == "row":
            raise option_error("envelope=row is not supported with format=avro")
    elif o.confluent_schema_registry is not None:
        raise option_error("option confluent_schema_registry is only usable with format=avro")
    elif o.avro_schema_prefix is not None:
        raise option_error("option avro_schema_prefix is only usable with format=avro")
    if o.format == "protobuf" and o.envelope == "row":
        raise option_error(
            "envelope=row is not supported with format=protobuf; use envelope=bare for the "
            "row's columns alone"
        )
    if o.format in ROW_FORMATS and ("key_in_value" in named or "topic_in_value" in named):
        raise option_error(f"key_in_value and topic_in_value are not usable with format={o.format}")
    if o.envelope == "key_only":
        for name in ("diff", "updated", "mvcc_timestamp", "key_in_value"):
            if name in named:
                raise option_error(
                    f"option {name} is not usable with envelope=key_only: there is no value "
                    "to carry it"
                )
    if o.headers_json_column_name is not None and o.format not in ("json", "avro"):
        raise option_error(
            f"headers_json_column_name is only usable with format=json/avro, not {o.format}"
        )
    # NB: CockroachDB takes diff with envelope=row in JSON and writes no "before": the
    # row envelope has no place for it (its JSON encoder's tests pin this)
    row_json = o.envelope == "row" and o.format == "json"
    if o.diff and o.envelope not in ("wrapped", "enriched") and not row_json:
        raise option_error(
            f"option diff is only usable with envelope=wrapped or enriched, not {o.envelope}"
        )
    if "enriched_properties" in named and o.envelope != "enriched":
        raise option_error("option enriched_properties is only usable with envelope=enriched")
    if o.envelope == "enriched":
        if o.format not in ("json", "avro", "protobuf"):
            raise option_error(f"envelope=enriched is not usable with format={o.format}")
        if o.format != "json" and "schema" in o.enriched_properties:
            raise option_error(
                f"enriched_properties=schema is for format=json, not {o.format}: the "
                "schema of Avro and protobuf messages is theirs already"
            )
        for name in ("updated", "mvcc_timestamp"):
            if name in named and "source" not in o.enriched_properties:
                raise option_error(
                    f"option {name} with envelope=enriched needs enriched_properties=source, "
                    f"where CockroachDB carries it (source.{_IN_SOURCE[name]})"
                )
    if "topic_in_value" in named and o.envelope not in ("wrapped", "bare"):
        raise option_error("option topic_in_value is only usable with envelope=wrapped or bare")
    if "key_in_value" in named and o.envelope not in ("wrapped", "bare", "enriched"):
        raise option_error(
            "option key_in_value is only usable with envelope=wrapped, bare or enriched"
        )
    if o.end_time is not None:
        start = o.cursor or now
        if o.end_time <= start:
            raise option_error(f"end_time {o.end_time} is not after the changefeed's start {start}")
    if o.cursor is not None and o.cursor > now:
        raise option_error(f"cursor {o.cursor} is in the future (now is {now})")
