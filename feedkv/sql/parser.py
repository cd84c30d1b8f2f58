"""SQL text to :mod:`feedkv.sql.statements`.

sqlglot (PostgreSQL dialect) parses statements and expressions. CockroachDB's own
syntax that PostgreSQL lacks is handled around it, on sqlglot's tokens:

- ``UPSERT INTO`` is parsed as ``INSERT INTO`` and marked as an upsert;
- ``AS OF SYSTEM TIME <expr>`` is cut out of a SELECT and parsed on its own;
- ``FAMILY name (cols)`` table elements, and ``FAMILY f`` / ``CREATE FAMILY f`` column
  qualifiers, are cut out of CREATE TABLE and ALTER TABLE ADD COLUMN;
- ``SHOW ...``, ``ALTER TABLE ... SPLIT AT VALUES`` and ``... RELOCATE [LEASE] VALUES``,
  ``CREATE USER``, ``GRANT role TO``, ``CREATE CHANGEFEED`` (but for its ``AS SELECT`` query),
  ``ALTER CHANGEFEED``, ``PAUSE`` / ``RESUME`` / ``CANCEL JOB``, the named changefeed
  statements (``PAUSE | RESUME | DROP CHANGEFEED``, ``SHOW CREATE CHANGEFEED``) and
  ``SHOW PARTITIONS`` are parsed here entirely;
- a CREATE TABLE's ``PARTITION BY LIST | RANGE (...) (...)`` is cut out and parsed here.

Cut-out text is replaced by spaces, so the positions in sqlglot's syntax errors stay
true to what the user typed. Every error is a :class:`~feedkv.errors.SQLError`: 42601
for a syntax error (with the 1-based ``position``), 0A000 for a feature feedkv does not
support; a clause sqlglot read that feedkv does not run fails the statement rather than
being dropped.

NB: over 800 lines, and one concept: the grammar of CockroachDB's dialect as far as
feedkv speaks it. Its parts (the lexical fixes, the cut-out clauses, the statements
parsed here entirely, the conversion of sqlglot's tree) each lean on the same tokens
and positions, and the grammar's sibling modules are its output (``statements``) and
the expressions it leaves as trees (``expr``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import string
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import TokenizerCore
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from feedkv.errors import SQLError
from feedkv.sql import crdb_internal, cursor_syntax
from feedkv.sql import statements as st
from feedkv.sql.aggregate_nodes import AGGREGATES, SumInt, outer_nodes, refuse_aggregates
from feedkv.sql.scalar_functions import CCL_ONLY_FUNCTIONS, ccl_only
from feedkv.sql.script import runaway
from feedkv.sql.session_vars import canonical_name
from feedkv.sql.types import INT64_MAX, TYPE_NAMES, ColumnType, Kind, parse_type_name

__all__ = [
    "as_written",
    "annotated_constants",
    "column_type",
    "ordered",
    "parse",
    "parse_expression",
    "parameters",
    "placeholder_count",
]

# NB: sqlglot logs a warning whenever it falls back to an opaque Command; feedkv turns
# those into errors of its own, so the warnings would only be noise on the terminal.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


class _PlaceholderTokenizerCore(TokenizerCore):
    """sqlglot's tokenizer, reading ``$`` before a digit as a placeholder (``$1``) always.

    NB: sqlglot takes the text between a ``$`` and the next one for a dollar quote's tag
    unless it is all digits, so ``VALUES ($1,$2)`` (as psycopg's executemany sends it)
    read as an unterminated ``$1,$`` quote; a tag never starts with a digit.
    """

    __slots__ = ()

    def _scan_string(self, start: str) -> bool:
        if start == "$" and self._peek.isdigit():
            self._add(TokenType.PARAMETER)
            return True
        return super()._scan_string(start)


# Functions sqlglot reads into nodes of its own, which feedkv reads as they are written.
_PLAIN_FUNCTIONS = (
    "regexp_replace", "regexp_extract", "sha1", "sha224", "sha256", "sha384", "sha512",
    "encode", "decode", "bit_length", "to_char", "to_timestamp", "array_append",
    "array_prepend", "array_cat", "array_remove", "array_position", "array_to_string",
    "string_to_array",
)  # fmt: skip


def _plain_function(name: str, args: list[exp.Expr]) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=args)


# Set-returning functions read as unnest() of the array a scalar function of that name
# gives (feedkv.sql.jsonb_functions): their rows are that array's elements.
_ARRAY_SRFS = (
    "jsonb_object_keys", "json_object_keys", "jsonb_array_elements", "json_array_elements",
    "jsonb_array_elements_text", "json_array_elements_text",
)  # fmt: skip
# jsonb_each(j) and its kin: an unnest of the object's keys (jsonb_object_keys) beside
# the array of its values in their order (a scalar function of the set-returning one's
# name); a SELECT list's item is read from FROM too, as a record of the row (_each_record)
_EACH_SRFS = ("jsonb_each", "json_each", "jsonb_each_text", "json_each_text")
# The columns such a function gives in FROM when its alias names none: its OUT
# parameters' names where it has them (else the alias's, as a scalar function's)
_SRF_COLUMNS = {
    **dict.fromkeys(
        (
            "jsonb_array_elements", "json_array_elements", "jsonb_array_elements_text",
            "json_array_elements_text",
        ),
        ("value",),
    ),
    **dict.fromkeys(_EACH_SRFS, ("key", "value")),
}  # fmt: skip


def _array_srf(name: str, args: list[exp.Expr]) -> exp.Explode:
    return exp.Explode(this=exp.Anonymous(this=name, expressions=args))


def _each_srf(name: str, args: list[exp.Expr]) -> exp.Explode:
    keys = exp.Anonymous(this="jsonb_object_keys", expressions=args)
    keys.meta["each"] = name  # NB: so that a non-object is refused in jsonb_each's name
    values = exp.Anonymous(this=name, expressions=[a.copy() for a in args])
    node = exp.Explode(this=keys, expressions=[values])
    node.meta["srf"] = name
    return node


class _Cockroach(Postgres):
    """PostgreSQL's dialect with CockroachDB's literals: ``b'...'`` is BYTES (its
    escapes read as bytes, see :func:`_bytes_literal`) and only ``B'...'`` is a bit
    string."""

    # NB: NULLs sort first ascending, as in CockroachDB: an ORDER BY item's nulls_first
    # then differs from its direction's default only when NULLS FIRST/LAST says so
    NULL_ORDERING = "nulls_are_small"
    # NB: a function call keeps its name as written (pow, power, substr, char_length):
    # a result column is named for it, as in CockroachDB
    ORIGINAL_NAME_META_KEY = "spelled"

    class Tokenizer(Postgres.Tokenizer):
        BIT_STRINGS: ClassVar = [("B'", "'")]
        BYTE_STRINGS: ClassVar = [("e'", "'"), ("E'", "'"), ("b'", "'")]
        # NB: CockroachDB's type annotation ``e:::T`` reads as a cast's operator, told
        # apart by its text (Parser._parse_dcolon)
        # NB: ``a // b`` is CockroachDB's floor division, sqlglot's integer division
        KEYWORDS: ClassVar = {
            **Postgres.Tokenizer.KEYWORDS,
            ":::": TokenType.DCOLON,
            "//": TokenType.DIV,
        }

        def _init_core(self) -> TokenizerCore:
            core = super()._init_core()
            core.__class__ = _PlaceholderTokenizerCore
            return core

    class Parser(PostgresParser):
        # NB: a dollar-quoted string ($$it's$$, $tag$...$tag$) is a string constant, as
        # PostgreSQL's and CockroachDB's, not a raw string of its own
        PRIMARY_PARSERS: ClassVar = {
            **PostgresParser.PRIMARY_PARSERS,
            TokenType.HEREDOC_STRING: lambda self, token: self.expression(
                exp.Literal(this=token.text, is_string=True), token
            ),
        }
        FUNCTIONS: ClassVar = {
            **PostgresParser.FUNCTIONS,
            "JSONB_AGG": lambda args: _jsonb_agg(args),
            "JSON_AGG": lambda args: _jsonb_agg(args, "json_agg"),
            "ARRAY_AGG": lambda args: _array_agg(args),
            "EVERY": lambda args: _alias_aggregate(args, "every"),
            "CONCAT_AGG": lambda args: _alias_aggregate(args, "concat_agg"),
            "COUNT_ROWS": lambda args: _alias_aggregate(args, "count_rows"),
            "SUM_INT": lambda args: _sum_int(args),
            "XOR_AGG": lambda args: _xor_agg(args),
            # NB: sqlglot's Hex node is another dialect's HEX(); to_hex is a plain function
            "TO_HEX": lambda args: exp.Anonymous(this="to_hex", expressions=args),
            **{name.upper(): functools.partial(_array_srf, name) for name in _ARRAY_SRFS},
            **{name.upper(): functools.partial(_each_srf, name) for name in _EACH_SRFS},
            # NB: sqlglot's nodes for these are other dialects' functions (its TO_CHAR
            # rewrites the template to strftime's); each is a plain function here
            **{name.upper(): functools.partial(_plain_function, name) for name in _PLAIN_FUNCTIONS},
            "CORR": lambda args: _corr(args),
            "DIV": lambda args: _div(args),
            "ARRAY": lambda args: _array_constructor(args),
            # NB: ROW(a, b) is the row value (a, b), its result column named row
            "ROW": lambda args: exp.Tuple(expressions=args),
        }

        # NB: json_agg is built as jsonb_agg is (FUNCTIONS), named as it is spelled;
        # decode is a plain function (_PLAIN_FUNCTIONS), not Oracle's DECODE
        FUNCTION_PARSERS: ClassVar = {
            k: v
            for k, v in PostgresParser.FUNCTION_PARSERS.items()
            if k not in ("JSON_AGG", "DECODE")
        }

        COLUMN_OPERATORS: ClassVar = {
            **PostgresParser.COLUMN_OPERATORS,
            TokenType.DCOLON: lambda self, this, to: self._cast_or_annotation(this, to),
        }

        _annotating = False

        def _parse_type(
            self, parse_interval: bool = True, fallback_to_identifier: bool = False
        ) -> exp.Expr | None:
            # NB: sqlglot reads ``TIMESTAMPTZ 'x'::TIME`` as a TIMESTAMPTZ of ``'x'::TIME``;
            # in PostgreSQL's grammar the cast applies to the typed constant
            # (``(TIMESTAMPTZ 'x')::TIME``): the casts after it are put back outside
            start = self._index
            node = super()._parse_type(parse_interval, fallback_to_identifier)
            typed = start + 1 < len(self._tokens) and (
                self._tokens[start].token_type in self.TYPE_TOKENS
                and self._tokens[start + 1].token_type is TokenType.STRING
            )
            if not typed or not isinstance(node, exp.Cast) or not isinstance(node.this, exp.Cast):
                return node
            casts = []
            inner: exp.Expr = node.this
            while isinstance(inner, exp.Cast):
                casts.append(inner)
                inner = inner.this
            if not isinstance(inner, exp.Literal):
                return node
            node.set("this", inner)  # NB: the nodes are new: relinked, not copied
            rebuilt: exp.Expr = node
            for cast in reversed(casts):
                cast.set("this", rebuilt)
                rebuilt = cast
            return rebuilt

        def _parse_interval_span(
            self, this: exp.Expr, parse_function_unit: bool = True
        ) -> exp.Interval:
            # NB: sqlglot splits a unit off a string that holds more (``'1 day 02:00'``
            # read as ``'1' DAY``, the rest dropped): such a string is kept whole
            node = super()._parse_interval_span(this, parse_function_unit)
            if (
                this is not None
                and this.is_string
                and node.this is not this
                and not exp.INTERVAL_STRING_RE.fullmatch(this.name)
            ):
                node.set("this", this)
                node.set("unit", None)
            return node

        def _parse_dcolon(self) -> exp.Expr | None:
            # NB: called just after the operator is read, before the type
            self._annotating = self._prev.text == ":::"
            return super()._parse_dcolon()

        def _cast_or_annotation(self, this: exp.Expr, to: exp.Expr) -> exp.Expr:
            """``e::T`` is a cast; ``e:::T`` CockroachDB's type annotation, a cast node
            marked ``annotation`` (the compiler checks that ``e`` is of type ``T``)."""
            node = self.build_cast(strict=self.STRICT_CAST, this=this, to=to)
            if self._annotating:
                node.meta["annotation"] = True
            return node

        def _parse_string_agg(self) -> exp.GroupConcat:
            # NB: sqlglot's reading keeps the first two arguments and drops any more;
            # CockroachDB has string_agg(value, separator) only
            depth, values, at = 0, 1, self._index
            while at < len(self._tokens):
                kind = self._tokens[at].token_type
                if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
                    depth += 1
                elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET):
                    if depth == 0:
                        break
                    depth -= 1
                elif depth == 0 and kind is TokenType.ORDER_BY:
                    break
                elif depth == 0 and kind is TokenType.COMMA:
                    values += 1
                at += 1
            if values > 2:
                raise SQLError(
                    "42883",
                    f"unknown signature: string_agg() takes a value and a separator, not "
                    f"{values} arguments",
                )
            return super()._parse_string_agg()

        # NB: ``AS (e) STORED`` after another qualification (``INT NOT NULL AS ...``),
        # which CockroachDB allows in any order; sqlglot reads it only after the type
        CONSTRAINT_PARSERS: ClassVar = {
            **PostgresParser.CONSTRAINT_PARSERS,
            "AS": lambda self: self._parse_late_computed(),
        }

        def _parse_insert_table(self) -> exp.Expr | None:
            # NB: INSERT's OVERRIDING {SYSTEM | USER} VALUE, after the columns, kept as
            # the target's ``overriding`` arg
            found = super()._parse_insert_table()
            if found is not None and self._match_text_seq("OVERRIDING"):
                which = "SYSTEM" if self._match_text_seq("SYSTEM") else None
                if which is None and self._match_text_seq("USER"):
                    which = "USER"
                if which is None or not self._match_text_seq("VALUE"):
                    self.raise_error("Expected OVERRIDING SYSTEM VALUE or OVERRIDING USER VALUE")
                found.set("overriding", which)
            return found

        def _parse_late_computed(self) -> exp.Expr | None:
            if not self._match(TokenType.L_PAREN, advance=False):
                return None
            found = exp.ComputedColumnConstraint(this=self._parse_disjunction())
            self._match_texts(("STORED", "VIRTUAL"))  # NB: read as storage, see below
            return found

        def _parse_generated_as_identity(self) -> exp.Expr:  # type: ignore[override]
            # NB: an identity's sequence options are CREATE SEQUENCE's, in any order
            # (sqlglot reads a few in one order); kept as the ``options`` arg, with
            # their text as written
            start = self._index
            always = not self._match_text_seq("BY", "DEFAULT")
            if always:
                self._match_text_seq("ALWAYS")
            if self._match(TokenType.ALIAS) and self._match_text_seq("IDENTITY"):
                identity = exp.GeneratedAsIdentityColumnConstraint(this=always)
                if self._match(TokenType.L_PAREN):
                    first = self._index
                    identity.set("options", self._parse_sequence_properties())
                    text = " ".join(t.text.upper() for t in self._tokens[first : self._index])
                    identity.set("options_text", text)
                    self._match_r_paren()
                return identity
            self._retreat(start)
            # NB: PostgreSQL's parser reads GENERATED ALWAYS AS (e) STORED only
            found: exp.Expr = super()._parse_generated_as_identity()
            if (
                isinstance(found, exp.GeneratedAsIdentityColumnConstraint)
                and found.args.get("expression") is not None
                and self._match_text_seq("VIRTUAL")
            ):
                return exp.ComputedColumnConstraint(this=found.args["expression"])
            return found

        def _parse_column_def(
            self, this: exp.Expr | None, computed_column: bool = True
        ) -> exp.Expr | None:
            # NB: sqlglot reads ``AS (e)`` and ``AS (e) VIRTUAL`` alike; CockroachDB
            # requires STORED or VIRTUAL, so the keyword is looked for among the tokens
            # read, outside parentheses, and kept as ``storage``.
            start = self._index
            found = super()._parse_column_def(this, computed_column)
            if not isinstance(found, exp.ColumnDef):
                return found
            for constraint in found.args.get("constraints") or ():
                kind = constraint.args.get("kind")
                if isinstance(kind, exp.ComputedColumnConstraint):
                    kind.set("storage", _storage_keyword(self._tokens[start : self._index]))
            return found


def _sequence_settings(prop: exp.SequenceProperties) -> dict[str, int]:
    """The settings of CREATE SEQUENCE's options (or an identity column's), by name
    (``increment``, ``minvalue``, ``maxvalue``, ``start``, ``cache``); OWNED BY is
    CREATE SEQUENCE's to read (:func:`_sequence_owner`)."""
    settings: dict[str, int] = {}
    for name, value in prop.args.items():
        if value is None or value == [] or name == "owned":
            continue
        if name == "options":
            for option in value:
                if str(option.name).upper() != "NO CYCLE":
                    raise SQLError("0A000", f"sequence option {option.name} is not supported")
            continue
        if name not in ("increment", "minvalue", "maxvalue", "start", "cache"):
            raise SQLError("0A000", f"sequence option {name.upper()} is not supported")
        settings[name] = _integer(value, name.upper())
    if settings.get("increment") == 0:
        raise SQLError("22023", "INCREMENT must not be zero")
    if settings.get("cache", 1) < 1:
        raise SQLError("22023", f"CACHE ({settings['cache']}) must be greater than zero")
    return settings


def _sequence_owner(prop: exp.SequenceProperties) -> tuple[st.TableName, str] | None:
    """OWNED BY ``[db.]table.column`` as ``(table, column)``; ``None`` for none given or
    OWNED BY NONE."""
    owned = prop.args.get("owned")
    if owned is None:
        return None
    if not isinstance(owned, exp.Column) or not owned.table:
        raise SQLError("42601", "expected OWNED BY table.column or NONE")
    parts = [_ident(part) for part in (owned.args.get("db"), owned.args.get("table")) if part]
    return _table_name_of(parts), _ident(owned.this)


def _identity(name: str, node: exp.GeneratedAsIdentityColumnConstraint) -> st.Identity:
    """An identity column's GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(options)]."""
    options = node.args.get("options")
    if options is not None and options.args.get("owned") is not None:
        raise SQLError("0A000", "sequence option OWNED is not supported for an identity column")
    settings = _sequence_settings(options) if options is not None else {}
    return st.Identity(
        bool(node.this),
        node.args.get("options_text") or "",
        st.SequenceSettings(
            settings.get("increment", 1),
            settings.get("minvalue"),
            settings.get("maxvalue"),
            settings.get("start"),
        ),
    )


def _storage_keyword(tokens: list[Token]) -> str | None:
    """The STORED or VIRTUAL that ends a computed column's AS (...) among ``tokens``."""
    depth = 0
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1
        elif (
            depth == 0
            and token.token_type is TokenType.VAR  # NB: not "stored", 'stored'
            and token.text.upper() in ("STORED", "VIRTUAL")
        ):
            return token.text.upper()
    return None


def _array_constructor(args: list[exp.Expr]) -> exp.Array:
    """``ARRAY(query)``: an array of the query's one column, its rows in their order
    (``{}`` for none), read as a subquery of the statement; ``ARRAY(a, ...)`` otherwise,
    which the compiler takes as ``ARRAY[a, ...]``."""
    if len(args) != 1 or not isinstance(args[0], exp.Query):
        return exp.Array(expressions=args)
    query = args[0]
    if isinstance(query, exp.Select) and len(query.expressions) > 1:
        raise SQLError(
            "42601", f"subquery must return only one column, found {len(query.expressions)}"
        )
    node = exp.Array(expressions=[exp.Subquery(this=query)])
    node.meta["query"] = True
    return node


def _div(args: list[exp.Expr]) -> exp.Expr:
    """div(x, y): the integer quotient, truncated, of x's type (an INT's is an INT, as
    CockroachDB's); sqlglot's reading casts it to DECIMAL."""
    if len(args) != 2:
        raise SQLError("42883", "unknown signature: div() takes exactly two arguments")
    return exp.IntDiv(this=args[0], expression=args[1])


def _jsonb_agg(args: list[exp.Expr], spelled: str = "jsonb_agg") -> exp.Expr:
    """jsonb_agg(x) (json_agg is the same in CockroachDB), as sqlglot's JSON array
    aggregate; the column it makes is named as it was spelled, as CockroachDB's."""
    if len(args) != 1:
        raise SQLError("42883", f"unknown signature: {spelled}() takes exactly one argument")
    node = exp.JSONArrayAgg(this=args[0])
    node.meta["spelled"] = spelled
    return node


def _refuse_aggregates_in_from(item: exp.Expr) -> None:
    """A function in FROM is one row of its value: an aggregate or a window function
    there is refused (42803, 42P20), as CockroachDB's, not taken as a group of one row."""
    if any(True for _ in outer_nodes(item, exp.Window)):
        raise SQLError("42P20", "window functions are not allowed in FROM")
    refuse_aggregates(item, "FROM")


def _filtered(node: exp.Filter) -> exp.Expr:
    """``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)``: the same for an
    aggregate that skips NULLs (count(*) counts the rows c keeps: ``count(CASE WHEN c
    THEN 1 END)``). array_agg and jsonb_agg keep NULLs, so theirs is refused."""
    call, where = node.this, node.expression
    condition = where.this if isinstance(where, exp.Where) else where
    if not isinstance(call, AGGREGATES):
        name = call.name if isinstance(call, exp.Anonymous) else call.key
        raise SQLError(
            "42809", f"FILTER specified but {name.lower()}() is not an aggregate function"
        )
    refuse_aggregates(condition, "FILTER")
    if isinstance(call, exp.ArrayAgg | exp.JSONArrayAgg):
        raise SQLError("0A000", "FILTER of array_agg or jsonb_agg is not supported")
    holder: exp.Expr = call
    if isinstance(holder.this, exp.Order):
        holder = holder.this
    if isinstance(holder.this, exp.Distinct):
        holder = holder.this
        value = holder.expressions[0]
    else:
        value = holder.this
    if isinstance(value, exp.Star):
        value = exp.Literal.number(1)
    guarded = exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
    if isinstance(holder, exp.Distinct):
        holder.set("expressions", [guarded])
    else:
        holder.set("this", guarded)
    return call


def _ordered_set(node: exp.WithinGroup) -> exp.Expr:
    """``percentile_cont(f) WITHIN GROUP (ORDER BY v)`` as the aggregate the grouping
    runs: the value with its ordering as its argument (as ``f(v ORDER BY v)``), the
    fraction as its second (see :mod:`feedkv.sql.aggregate_nodes`)."""
    call, order = node.this, node.expression
    name = call.sql_name().lower() if isinstance(call, exp.Func) else call.sql(dialect=_DIALECT)
    if not isinstance(call, exp.PercentileCont | exp.PercentileDisc):
        # NB: else its ORDER BY column reads as ungrouped
        raise SQLError("0A000", f"{name}(...) WITHIN GROUP (ORDER BY ...) is not supported")
    if call.expression is not None or isinstance(call.this, exp.Order):
        raise SQLError("42883", f"unknown signature: {name}() takes exactly one fraction")
    if isinstance(node.parent, exp.Window) and node.parent.this is node:
        raise SQLError("0A000", f"OVER is not supported for ordered-set aggregate {name}")
    if not isinstance(order, exp.Order) or len(order.expressions) != 1:
        raise SQLError(
            "42883", f"unknown signature: {name}() orders by exactly one value in WITHIN GROUP"
        )
    value = order.expressions[0].this
    built = type(call)(
        this=exp.Order(this=value.copy(), expressions=[order.expressions[0].copy()]),
        expression=call.this.copy(),
    )
    built.meta["spelled"] = name
    return built


def _array_agg(args: list[exp.Expr]) -> exp.Expr:
    """array_agg(x): sqlglot's own builder drops a second argument without a word."""
    if len(args) != 1:
        raise SQLError("42883", "unknown signature: array_agg() takes exactly one argument")
    return exp.ArrayAgg(this=args[0])


def _alias_aggregate(args: list[exp.Expr], name: str) -> exp.Expr:
    """CockroachDB's aggregates that are another one under a name of their own (their
    result column keeps it): ``every(b)`` is ``bool_and(b)``, ``concat_agg(s)`` is
    ``string_agg(s, NULL)`` (nothing between the values, STRING or BYTES, its ORDER BY
    kept), ``count_rows()`` is ``count(*)``."""
    arity = 0 if name == "count_rows" else 1
    if len(args) != arity:
        raise SQLError(
            "42883",
            f"unknown signature: {name}() takes {'no' if arity == 0 else 'exactly one'} "
            f"argument{'s' if arity == 0 else ''}",
        )
    node: exp.Expr
    if name == "every":
        node = exp.LogicalAnd(this=args[0])
    elif name == "concat_agg":
        node = exp.GroupConcat(this=args[0], separator=exp.Null())
    else:
        node = exp.Count(this=exp.Star())
    node.meta["spelled"] = name
    return node


def _sum_int(args: list[exp.Expr]) -> exp.Expr:
    if len(args) != 1:
        raise SQLError("42883", "unknown signature: sum_int() takes exactly one argument")
    return SumInt(this=args[0])


def _xor_agg(args: list[exp.Expr]) -> exp.Expr:
    if len(args) != 1:
        raise SQLError("42883", "unknown signature: xor_agg() takes exactly one argument")
    return exp.BitwiseXorAgg(this=args[0])


def _corr(args: list[exp.Expr]) -> exp.Expr:
    """``corr(y, x)``; ``corr(DISTINCT y, x)`` (which sqlglot reads as one DISTINCT
    argument) keeps DISTINCT on ``y``, and the aggregate takes distinct pairs."""
    if len(args) == 1 and isinstance(args[0], exp.Distinct):
        values = args[0].expressions
        if len(values) == 2:
            return exp.Corr(this=exp.Distinct(expressions=[values[0]]), expression=values[1])
    if len(args) != 2:
        raise SQLError("42883", "unknown signature: corr() takes exactly two arguments")
    return exp.Corr(this=args[0], expression=args[1])


_DIALECT = _Cockroach()
_INT4_STAND_IN = "UINT"  # see _Statement._keep_int4
_NAME_TOKENS = {TokenType.VAR, TokenType.IDENTIFIER}


# ``[SHOW ...]`` and ``[INSERT | UPSERT | UPDATE | DELETE ... RETURNING ...]`` as a
# source (``SELECT ... FROM [SHOW CHANGEFEED JOBS]``, CockroachDB's syntax), which sqlglot
# cannot read: it is rewritten to a quoted name in crdb_internal that holds the
# statement, and _Converter._source parses it back.
# NB: string literals, quoted names and comments are matched first, and kept as they are;
# inside the brackets, string literals and quoted names may hold anything but brackets
# may not nest.
_SHOW_SOURCE = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/"
    r"|\[\s*((?:SHOW|INSERT|UPSERT|UPDATE|DELETE)\b"
    r"(?:[^\[\]'\"]|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")*?)\s*\]",
    re.IGNORECASE | re.DOTALL,
)
_VIRTUAL_SCHEMA = "crdb_internal"
# A common table expression over a SHOW statement (``WITH x AS (SHOW JOBS) SELECT ...``,
# CockroachDB's syntax) is the same source: ``AS (SELECT * FROM [SHOW JOBS])``.
_SHOW_CTE = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/"
    r"|\bAS\s*\(\s*(SHOW\b(?:[^()'\"]|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")*?)\s*\)",
    re.IGNORECASE | re.DOTALL,
)
_MAY_SHOW_CTE = re.compile(r"\bAS\s*\(\s*SHOW\b", re.IGNORECASE)


def _show_sources(text: str) -> str:
    def rewrite(match: re.Match[str]) -> str:
        show = match.group(1)
        if show is None:
            return match.group(0)
        return _shown(show)

    def rewrite_cte(match: re.Match[str]) -> str:
        show = match.group(1)
        if show is None:
            return match.group(0)
        return f"AS (SELECT * FROM {_shown(show)})"

    if _MAY_SHOW_CTE.search(text):
        text = _SHOW_CTE.sub(rewrite_cte, text)
    return _SHOW_SOURCE.sub(rewrite, text)


def _shown(show: str) -> str:
    """The quoted name in crdb_internal that holds ``show`` (see _SHOW_SOURCE)."""
    quoted = show.replace('"', '""')
    return f'{_VIRTUAL_SCHEMA}."[{quoted}]"'


# CockroachDB's index hint ``t@{FORCE_INDEX=name}`` (optionally ``,ASC``/``,DESC``), which
# sqlglot cannot read, is the plain ``t@name`` feedkv reads; other hints stay, and fail.
_FORCE_INDEX = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/"
    r"|@\{\s*FORCE_INDEX\s*=\s*(\w+|\"(?:[^\"]|\"\")*\")\s*\}",
    re.IGNORECASE | re.DOTALL,
)


_SHOWN_SOURCE = re.compile(rf'{_VIRTUAL_SCHEMA}\."\[((?:[^"]|"")*)\]"')


def as_written(text: str) -> str:
    """A statement's text with its ``[SHOW ...]`` (``[INSERT ...]``...) sources as they
    were written, not as the parser reads them (``crdb_internal."[SHOW QUERIES]"``)."""
    if '"[' not in text:
        return text
    return _SHOWN_SOURCE.sub(lambda m: "[" + m.group(1).replace('""', '"') + "]", text)


def _force_index_hints(text: str) -> str:
    def rewrite(match: re.Match[str]) -> str:
        index = match.group(1)
        return match.group(0) if index is None else f"@{index}"

    return _FORCE_INDEX.sub(rewrite, text)


def parse(text: str) -> list[st.Statement]:
    """Every statement in ``text`` (separated by ``;``), parsed."""
    if not isinstance(text, str):
        raise SQLError("42601", f"a statement is a string, not {type(text).__name__}")
    if "[" in text or _MAY_SHOW_CTE.search(text):
        text = _show_sources(text)
    if "@{" in text:
        text = _force_index_hints(text)
    tokens = _tokenize(text, 0)
    out: list[st.Statement] = []
    group: list[Token] = []
    for token in [*tokens, None]:
        if token is None or token.token_type is TokenType.SEMICOLON:
            if group:
                start, end = group[0].start, group[-1].end + 1
                out.append(_parse_one(text[start:end], group, start))
            group = []
        else:
            group.append(token)
    return out


# NB: sqlglot's parser and feedkv's expression compiler recurse once per level of an
# expression (about 21 frames a parenthesis, 10 a NOT): CockroachDB takes hundreds of
# levels, Python's default limit of 1,000 frames about 40. _MAX_NESTING parentheses need
# about 21,000 frames, hence the limit. Python 3.11 runs calls from Python to Python
# without the C stack, so it is safe in any thread (1,300 parentheses, 27,000 frames,
# measured in a thread of the default stack size). It is process-wide: it is only ever
# raised, never lowered, so an embedding program's own higher limit stands.
_RECURSION_LIMIT = 25_000


def _parse_one(text: str, tokens: list[Token], offset: int) -> st.Statement:
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)
    try:
        return _Statement(text, tokens, offset).parse()
    except SQLError:
        raise
    except RecursionError:
        raise SQLError("54001", "statement too complex: it nests too deeply") from None
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        # NB: sqlglot accepts some malformed input and leaves holes in its tree that the
        # conversion trips over; what it could not make sense of is a syntax error, most
        # often in its last words.
        shown = text if len(text) <= 60 else text[:57] + "..."
        last = tokens[-1]
        raise SQLError(
            "42601",
            f"syntax error in {shown!r}: it does not read as a statement up to its end",
            position=last.start + 1,
        ) from None


def annotated_constants(text: str) -> str:
    """The expression ``text`` with each constant that is not cast followed by its type,
    as CockroachDB prints a stored expression (``b < 1:::INT8``, ``s <> '':::STRING``);
    ``text`` itself when it does not tokenize."""
    try:
        tokens = list(_DIALECT.tokenize(text))
    except TokenError:
        return text
    out: list[str] = []
    done = 0
    for i, token in enumerate(tokens):
        if token.token_type is TokenType.NUMBER:
            kind = "INT8" if token.text.isdigit() else "DECIMAL"
        elif token.token_type is TokenType.STRING:
            kind = "STRING"
        else:
            continue
        if i + 1 < len(tokens) and tokens[i + 1].token_type in (TokenType.DCOLON, TokenType.ALIAS):
            continue  # NB: a cast (x::T, CAST(x AS T)) types it already
        out.append(f"{text[done : token.end + 1]}:::{kind}")
        done = token.end + 1
    return "".join(out) + text[done:]


# The kinds whose constant DEFAULT CockroachDB's SHOW CREATE TABLE annotates with the
# column's type (an enum's or an array's is shown as stored)
_ANNOTATED_DEFAULT_KINDS = frozenset(Kind) - {Kind.ENUM, Kind.ARRAY, Kind.BOOL}


def annotated_default(text: str, ctype: ColumnType) -> str:
    """A column's stored DEFAULT ``text`` as CockroachDB's SHOW CREATE TABLE prints it:
    a constant annotated with the column's type (``0:::INT8``, ``'x':::STRING``), a
    boolean in lower case, ``now()`` annotated as CockroachDB annotates a function of
    several result types (``now():::TIMESTAMPTZ``), ``gen_random_uuid()`` and
    ``unique_rowid()`` bare; any other expression as stored. NB: CockroachDB keeps
    ``current_timestamp()`` apart from ``now()``; the stored text no longer does."""
    try:
        node = parse_expression(text)
    except SQLError:
        return text
    annotation = ColumnType(ctype.kind).sql()
    constant = node.this if isinstance(node, exp.Neg) else node
    if isinstance(constant, exp.Literal) and ctype.kind in _ANNOTATED_DEFAULT_KINDS:
        return f"{text}:::{annotation}"
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.CurrentTimestamp):
        return f"now():::{annotation}"
    if isinstance(node, exp.Uuid):
        return "gen_random_uuid()"
    return text


def unannotated_default(node: exp.Expr, ctype: ColumnType) -> exp.Expr:
    """A DEFAULT's tree without a type annotation of its column's type around it, as
    :func:`annotated_default` shows it: ``0:::INT8`` on an INT column is stored ``0``, so
    a replayed SHOW CREATE TABLE stores what the first did (``-3:::INT8``, which reads
    as ``-(3:::INT8)``, is stored ``-3``)."""
    if isinstance(node, exp.Neg):
        inner = unannotated_default(node.this, ctype)
        return node if inner is node.this else exp.Neg(this=inner.copy())
    if (
        node.meta.get("annotation")
        and isinstance(node, exp.Cast)
        and column_type(node.args["to"]).kind is ctype.kind
    ):
        bare: exp.Expr = node.this
        return bare
    return node


def parse_expression(text: str) -> exp.Expr:
    """One scalar expression (a DEFAULT clause, say)."""
    try:
        select = sqlglot.parse_one(f"SELECT {text}", read=_DIALECT)
    except (ParseError, TokenError) as exc:
        raise SQLError("42601", f"invalid expression {text!r}: {_first_line(exc)}") from None
    if not isinstance(select, exp.Select) or len(select.expressions) != 1:
        raise SQLError("42601", f"invalid expression {text!r}")
    expression: exp.Expr = select.expressions[0]
    return expression


def placeholder_count(statement: st.Statement) -> int:
    """The highest ``$n`` the statement uses (0 if none)."""
    highest = 0
    for value in _expressions_of(statement):
        for param in value.find_all(exp.Parameter):
            index = _placeholder_index(param)
            highest = max(highest, index)
    return highest


def parameters(statement: st.Statement) -> list[exp.Parameter]:
    """Every ``$n`` written in the statement, each time it is written."""
    return [
        param for value in _expressions_of(statement) for param in value.find_all(exp.Parameter)
    ]


def _placeholder_index(param: exp.Parameter) -> int:
    inner = param.this
    text = inner.name if isinstance(inner, exp.Expr) else str(inner)
    if not text.isdigit() or int(text) < 1:
        raise SQLError("42601", f"invalid placeholder ${text}; placeholders are $1, $2, ...")
    return int(text)


def _expressions_of(statement: object) -> list[exp.Expr]:
    """Every expression of a statement, also those of the queries and parts (joins,
    CTEs, derived tables, set operations' sides) it holds."""
    out: list[exp.Expr] = []
    for name in getattr(statement, "__slots__", ()):
        value = getattr(statement, name, None)
        out.extend(_collect(value))
    return out


def _collect(value: object) -> list[exp.Expr]:
    if isinstance(value, exp.Expr):
        return [value]
    if isinstance(value, tuple):
        return [e for item in value for e in _collect(item)]
    if isinstance(value, st.ColumnSpec):
        return [value.default] if value.default is not None else []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _expressions_of(value)
    return []


_ROWS_FROM = [TokenType.ROWS, TokenType.FROM]


def _tokenize(text: str, offset: int) -> list[Token]:
    try:
        tokens = list(_DIALECT.tokenize(text))
    except TokenError:
        raise _token_error(text, offset) from None
    for token in tokens:
        if token.token_type is TokenType.BYTE_STRING and text[token.start] == "b":
            token.token_type = TokenType.HEX_STRING  # sqlglot then makes it a HexString
            token.text = _bytes_literal(text[token.start + 2 : token.end], offset + token.start)
        token.start += offset
        token.end += offset
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        following = [t.token_type for t in tokens[i : i + 2]]
        if token.token_type is TokenType.LATERAL and following == _ROWS_FROM:
            continue  # NB: sqlglot reads no LATERAL ROWS FROM; a function is LATERAL anyway
        out.append(token)
        # NB: sqlglot swallows the rest of a SHOW (or RESET) statement into one string
        # token; feedkv parses those itself, so it needs the words as tokens.
        swallows = token.token_type is TokenType.SHOW or (
            token.token_type is TokenType.COMMAND and token.text.upper() == "RESET"
        )
        if swallows and i < len(tokens):
            rest = tokens[i]
            if rest.token_type is TokenType.STRING:
                start = text.index(rest.text, token.end + 1 - offset)
                out.extend(_tokenize(rest.text, offset + start))
                i += 1
    return out


_BYTE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}


def _bytes_literal(body: str, start: int) -> str:
    """The bytes of a ``b'...'`` literal whose text between the quotes is ``body``, in
    hexadecimal: ``\\xHH`` and ``\\NNN`` (octal) are one byte each, ``\\n`` and the
    other C escapes their control byte, ``''`` and ``\\'`` a quote; any other
    character is its UTF-8 bytes. ``start`` places errors in the whole text."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c == "'":  # a doubled quote (the tokenizer ended the literal at a single one)
            out += b"'"
            i += 2
        elif c != "\\":
            out += c.encode()
            i += 1
        elif body[i + 1 : i + 2] == "x" and _is_hex(body[i + 2 : i + 4]):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif _is_octal(body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        elif body[i + 1 : i + 2] in _BYTE_ESCAPES:
            out.append(_BYTE_ESCAPES[body[i + 1]])
            i += 2
        elif body[i + 1 : i + 2] in ("\\", "'"):
            out += body[i + 1].encode()
            i += 2
        else:
            raise SQLError(
                "22P02",
                f"invalid escape in bytes literal: {body[i : i + 2]!r}",
                position=start + i + 3,
            )
    return out.hex()


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in string.hexdigits for c in text)


def _is_octal(text: str) -> bool:
    return len(text) == 3 and all(c in "01234567" for c in text)


_HEX_LITERAL = re.compile(r"(?<![A-Za-z0-9_])[xX]'([^']*)'")


def _token_error(text: str, offset: int) -> SQLError:
    """What the tokenizer could not read: a hex literal with a bad digit, or the quote or
    comment that never ends (with its position)."""
    for match in _HEX_LITERAL.finditer(text):
        digits = match.group(1)
        if any(c not in string.hexdigits for c in digits) or len(digits) % 2:
            return SQLError("22P02", f"invalid hexadecimal bytes literal x'{digits}'")
    start, what = runaway(text)
    return SQLError("42601", f"syntax error: unterminated {what}", position=offset + start + 1)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0]


_USAGE = {"USAGE": ("SELECT", "UPDATE")}  # of a sequence (see Parser._grant)


def _name(token: Token) -> str:
    """An identifier token's name: unquoted names fold to lower case."""
    if token.token_type is TokenType.IDENTIFIER:
        return token.text
    return token.text.lower()


def _fold_identifiers(node: exp.Expr) -> exp.Expr:
    """``node`` with its unquoted names folded to lower case, as CockroachDB and
    PostgreSQL fold them: ``SELECT a AS Total`` names its column ``total`` and
    ``FROM t AS X`` is read as ``x.a``."""
    for identifier in node.find_all(exp.Identifier):
        name = identifier.this
        if not identifier.quoted and isinstance(name, str) and not name.islower():
            identifier.set("this", name.lower())
    return node


def _ident(node: exp.Expr | str | None) -> str:
    if isinstance(node, exp.Identifier):
        text = str(node.this)
        return text if node.quoted else text.lower()
    if isinstance(node, exp.Expr):
        return _ident(node.this) if not isinstance(node.this, str) else node.this.lower()
    return (node or "").lower()


@dataclass
class _Statement:
    """One statement being parsed: its text, its tokens (positions relative to the
    whole script) and where it starts in the script."""

    text: str
    tokens: list[Token]
    offset: int

    def __post_init__(self) -> None:
        self.table_indexes: list[st.IndexSpec] = []  # INDEX elements of CREATE TABLE
        self.descending_keys: set[str] = set()  # PRIMARY KEY (a DESC) columns, so named
        self.not_visible: set[str] = set()  # the columns declared NOT VISIBLE
        self.words = [t.text.upper() for t in self.tokens]
        self.masked = list(self.text)
        self.edited = False  # ``masked`` differs from ``text``: tokenize it anew

    # Positions.

    def _pos(self, token: Token) -> int:
        return token.start - self.offset

    def _mask(self, first: int, last: int) -> None:
        """Blank out tokens ``first..last`` (inclusive) in the text given to sqlglot."""
        start = self._pos(self.tokens[first])
        end = self._pos(self.tokens[last]) + len(self._raw(last))
        for i in range(start, end):
            if self.masked[i] != "\n":
                self.masked[i] = " "
        self.edited = True

    def _raw(self, index: int) -> str:
        token = self.tokens[index]
        return self.text[self._pos(token) : token.end - self.offset + 1]

    def _error_at(self, index: int, message: str) -> SQLError:
        if index >= len(self.tokens):
            return SQLError(
                "42601", f"at or near EOF: syntax error: {message}", position=len(self.text) + 1
            )
        token = self.tokens[index]
        return SQLError(
            "42601",
            f'at or near "{token.text.lower()}": syntax error: {message}',
            position=token.start + 1,
        )

    # Dispatch.

    def parse(self) -> st.Statement:
        words = self.words
        if words[0] == "EXPLAIN":
            return self._explain()
        if words[0] in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
            return self._cursor(words[0])
        if words[0] == "SHOW":
            scope = words[1:]
            if scope[:1] == ["ALL"]:
                scope = scope[1:]
            local = scope[:1] == ["LOCAL"]
            if scope[:1] in (["CLUSTER"], ["LOCAL"]):
                scope = scope[1:]
            if scope in (["SESSIONS"], ["QUERIES"], ["STATEMENTS"]):
                # NB: before SHOW <variable>, which would take the word for a name
                return st.ShowSessions(self.text, queries=scope != ["SESSIONS"], local=local)
        if words[:2] == ["SET", "TRANSACTION"] and words[2:4] != ["ISOLATION", "LEVEL"]:
            return self._set_transaction(2)
        if words[:2] == ["SET", "TRANSACTION"] and "," in words:
            return self._set_transaction(2)
        session = self._session_variable()
        if session is not None:
            return session
        savepoint = self._savepoint()
        if savepoint is not None:
            return savepoint
        if self.words[0] == "IMPORT":
            return self._import_into()
        if self.words[0] == "CREATE" and "INVERTED" in self.words[1:3]:
            raise _no_inverted_index("CREATE INVERTED INDEX")
        if self.words[0] in ("VACUUM", "ANALYZE", "ANALYSE"):
            return self._maintenance()
        if self.words[:2] == ["COMMENT", "ON"]:
            return self._comment_on()
        if self.words[:2] == ["ALTER", "TYPE"]:
            return self._alter_type()
        if self.words[:2] == ["ALTER", "SEQUENCE"]:
            return self._alter_sequence()
        self._check_shape()
        words = self.words
        if words[1:3] == ["CLUSTER", "SETTING"] and words[0] in ("SET", "RESET", "SHOW"):
            return self._cluster_setting()
        if words in (
            ["SHOW", "CLUSTER", "SETTINGS"],
            ["SHOW", "ALL", "CLUSTER", "SETTINGS"],
            ["SHOW", "PUBLIC", "CLUSTER", "SETTINGS"],
        ):
            return st.ClusterSetting(self.text, "list", "")
        if words[0] == "SHOW":
            return self._show()
        if words[:2] == ["DROP", "SEQUENCE"]:
            return self._drop_sequence()
        if words[:2] == ["DROP", "INDEX"]:
            return self._drop_index()
        if words[:2] == ["DROP", "TYPE"]:
            dropped = self._drop_sequence()  # NB: the same shape: DROP X [IF EXISTS] a, b
            return st.DropType(self.text, dropped.sequences, dropped.if_exists)
        if words[:2] == ["CREATE", "CHANGEFEED"] or words[:2] == ["EXPERIMENTAL", "CHANGEFEED"]:
            return self._changefeed()
        if words[:2] in (["CREATE", "USER"], ["CREATE", "ROLE"]):
            return self._create_user()
        if words[:2] in (["ALTER", "USER"], ["ALTER", "ROLE"]):
            return self._alter_user()
        if words[:2] in (["DROP", "USER"], ["DROP", "ROLE"]):
            return self._drop_user()
        if words[0] == "CANCEL" and words[1:2] in (
            ["QUERY"],
            ["QUERIES"],
            ["SESSION"],
            ["SESSIONS"],
        ):
            return self._cancel_activity()
        if words[0] in ("PAUSE", "RESUME", "CANCEL") or words[:2] == ["DROP", "CHANGEFEED"]:
            return self._job_control()
        if words[:2] == ["ALTER", "CHANGEFEED"]:
            return self._alter_changefeed()
        if words[0] in ("GRANT", "REVOKE"):
            return self._grant()
        if words[:2] in (["ALTER", "TABLE"], ["ALTER", "RANGE"]) and "CONFIGURE" in words:
            return self._configure_zone()
        if words[:2] == ["ALTER", "TABLE"] and words[-2:] == ["DROP", "STORED"]:
            return self._drop_stored()
        if words[:2] == ["ALTER", "TABLE"] and "RESET" in words and words[-1] == ")":
            return self._reset_storage_params()
        if words[:2] == ["ALTER", "TABLE"] and words[-3:-1] == ["VALIDATE", "CONSTRAINT"]:
            return self._validate_constraint()
        if words[0] == "ALTER" and "SPLIT" in words:
            return self._split_at()
        if words[0] == "ALTER" and "RELOCATE" in words:
            return self._relocate()
        if words[:2] == ["START", "TRANSACTION"] or words[0] == "BEGIN":
            return self._begin()
        if words[0] == "END" and len(words) <= 2:
            return st.Commit(self.text)
        upsert = words[0] == "UPSERT"
        if upsert:
            self.masked[0:6] = list("INSERT")
            self.edited = True
        self._keep_int4()
        families: list[st.FamilySpec] = []
        column_families: dict[str, tuple[str | None, bool, bool]] = {}
        partitioning = None
        if words[:2] == ["CREATE", "TABLE"]:
            partitioning = self._cut_partitioning()
        if words[:2] == ["CREATE", "TABLE"] or words[:2] == ["ALTER", "TABLE"]:
            families, column_families = self._cut_families()
        as_of = self._cut_as_of()
        returning = self._cut_delete_returning()
        body = self._view_body()
        if words[:2] == ["CREATE", "INDEX"] or words[:3] == ["CREATE", "UNIQUE", "INDEX"]:
            self._storing_as_include()
        node = self._sqlglot()
        converter = _Converter(self.text, upsert, families, column_families, as_of, returning, body)
        converter.indexes = list(self.table_indexes)
        converter.descending_keys = self.descending_keys
        converter.not_visible = self.not_visible
        converter.partitioning = partitioning
        return converter.convert(node)

    def _explain(self) -> st.Explain:
        """``EXPLAIN [ANALYZE | ANALYSE] statement``; CockroachDB's other forms
        (``EXPLAIN (OPT)``, ``(VEC)``, ``(DISTSQL)``, ...) are refused."""
        # NB: sqlglot's tokenizer reads all that follows EXPLAIN (a command) as one token
        first = self.tokens[0]
        at = self._pos(first) + len("EXPLAIN")
        rest = self.text[at:]
        analyze = re.match(r"\s*ANALY[SZ]E\b", rest, re.IGNORECASE)
        if analyze is not None:
            at += analyze.end()
            rest = self.text[at:]
        options = re.match(r"\s*\(([^)]*)\)", rest)
        if options is not None:
            raise SQLError(
                "0A000",
                f"EXPLAIN ({options.group(1).strip()}) is not supported; feedkv has EXPLAIN "
                "and EXPLAIN ANALYZE",
            )
        at += len(rest) - len(rest.lstrip())
        text = self.text[at:]
        if not text:
            raise self._error_at(len(self.tokens), "EXPLAIN needs a statement to explain")
        inner = _parse_one(text, _tokenize(text, self.offset + at), self.offset + at)
        if not isinstance(
            inner, st.Select | st.SetOperation | st.Values | st.Insert | st.Update | st.Delete
        ):
            raise SQLError(
                "0A000",
                f"EXPLAIN of {type(inner).__name__} is not supported; feedkv explains "
                "SELECT, INSERT, UPSERT, UPDATE and DELETE",
            )
        return st.Explain(self.text, inner, analyze is not None)

    def _cursor(self, verb: str) -> st.DeclareCursor | st.FetchCursor | st.CloseCursor:
        """DECLARE, FETCH, MOVE or CLOSE (:mod:`feedkv.sql.cursor_syntax`)."""
        if verb == "CLOSE":
            return cursor_syntax.parse_close(self.text, self.offset)
        if verb != "DECLARE":
            return cursor_syntax.parse_fetch(self.text, self.offset)
        head = cursor_syntax.parse_declare(self.text, self.offset)
        text, at = self.text[head.query_at :], self.offset + head.query_at
        inner = _parse_one(text, _tokenize(text, at), at)
        if not isinstance(inner, st.Select | st.SetOperation | st.Values):
            raise SQLError(
                "42601",
                f'at or near "{text.split(None, 1)[0].lower()}": syntax error: a cursor is '
                "declared FOR a query (SELECT, VALUES, or a set operation of them)",
                position=at + 1,
            )
        return st.DeclareCursor(self.text, head.name, inner, head.binary, head.scroll, head.hold)

    def _storing_as_include(self) -> None:
        """CockroachDB's CREATE INDEX ... STORING (...) is PostgreSQL's INCLUDE (...)."""
        for i, word in enumerate(self.words):
            if word in ("STORING", "COVERING") and self._keyword(i):
                start = self._pos(self.tokens[i])
                self.masked[start : start + len(word)] = list("INCLUDE".ljust(len(word)))
                self.edited = True

    def _view_body(self) -> str | None:
        """The text of a CREATE VIEW's query (after its ``AS``), as written."""
        words = self.words
        if words[0] != "CREATE" or "VIEW" not in words[1:4]:
            return None
        depth = 0
        for i in range(words.index("VIEW") + 1, len(self.tokens)):
            kind = self.tokens[i].token_type
            depth += kind is TokenType.L_PAREN
            depth -= kind is TokenType.R_PAREN
            if depth == 0 and self._keyword(i) == "AS" and i + 1 < len(self.tokens):
                return self.text[self._pos(self.tokens[i + 1]) :].strip()
        raise self._error_at(len(self.tokens), "CREATE VIEW needs AS followed by a query")

    def _sqlglot(self) -> exp.Expr:
        masked = "".join(self.masked)
        try:
            # NB: the tokens are the text's own unless parts were cut out of it
            tokens = _tokenize(masked, 0) if self.edited or self.offset else self.tokens
            nodes = _DIALECT.parser().parse(tokens, masked)
        except ParseError as exc:
            raise self._syntax_error(exc) from None
        except TokenError as exc:
            raise SQLError("42601", f"syntax error: {_first_line(exc)}") from None
        if len(nodes) != 1 or nodes[0] is None:
            raise SQLError("42601", "syntax error: expected exactly one statement")
        node: exp.Expr = nodes[0]
        return _fold_identifiers(node)

    def _syntax_error(self, exc: ParseError) -> SQLError:
        if not exc.errors:
            return SQLError("42601", f"syntax error: {_first_line(exc)}")
        first = exc.errors[0]
        line, col = first.get("line") or 1, first.get("col") or 1
        highlight = first.get("highlight") or ""
        lines = self.text.split("\n")
        line_start = sum(len(x) + 1 for x in lines[: line - 1])
        position = self.offset + line_start + max(col - len(highlight), 0) + 1
        near = highlight.strip().lower() or "EOF"
        description = first.get("description") or "syntax error"
        if "<class" in description or "<Token" in description:  # sqlglot internals
            description = "unexpected input"
        return SQLError(
            "42601", f'at or near "{near}": syntax error: {description}', position=position
        )

    def _keep_int4(self) -> None:
        """sqlglot reads INT4 as INT, which is INT8 here (as in CockroachDB): INT4 is
        handed to it as a type of the same length that nothing else spells."""
        for i, word in enumerate(self.words):
            kind = self.tokens[i].token_type
            if kind is TokenType.UINT:
                raise SQLError("42704", f'type "{word.lower()}" does not exist')
            if word == "INT4" and kind is TokenType.INT:
                start = self._pos(self.tokens[i])
                self.masked[start : start + 4] = list(_INT4_STAND_IN)
                self.edited = True

    # Shape: what sqlglot would accept leniently and turn into something else.

    def _keyword(self, index: int) -> str:
        """The word at ``index`` if it is a bare word (not a literal or quoted name)."""
        if index >= len(self.tokens) or self.tokens[index].token_type in _LITERALS:
            return ""
        return self.words[index]

    def _savepoint(self) -> st.Savepoint | None:
        """``SAVEPOINT n``, ``RELEASE [SAVEPOINT] n``, ``ROLLBACK TO [SAVEPOINT] n``."""
        words = self.words
        action: Literal["savepoint", "release", "rollback"]
        if words[0] == "SAVEPOINT":
            action, rest = "savepoint", 1
        elif words[0] == "RELEASE":
            action, rest = "release", 2 if words[1:2] == ["SAVEPOINT"] else 1
        elif words[:2] == ["ROLLBACK", "TO"]:
            action, rest = "rollback", 3 if words[2:3] == ["SAVEPOINT"] else 2
        else:
            return None
        if len(self.tokens) != rest + 1:
            raise self._error_at(min(rest, len(self.tokens) - 1), f"{words[0]} takes one name")
        token = self.tokens[rest]
        quoted = token.token_type == TokenType.IDENTIFIER
        return st.Savepoint(self.text, action, token.text if quoted else token.text.lower())

    def _check_shape(self) -> None:
        """Refuse statements whose words do not fit together: a dropped comma or row, an
        empty list item, a clause cut short, a bare word that is no statement, an
        unbalanced parenthesis. sqlglot would take many of these for something else (an
        alias, a shorter list) and the statement would run."""
        tokens, words = self.tokens, self.words
        first = self._keyword(0)
        if first == "(":  # a query in parentheses, maybe a set operation's left side
            opening = next(
                (i for i, t in enumerate(tokens) if t.token_type is not TokenType.L_PAREN),
                len(tokens),
            )
            first = "SELECT" if self._keyword(opening) in ("SELECT", "WITH") else ""
        if first not in _STATEMENT_WORDS:
            raise self._error_at(0, f"{tokens[0].text!r} does not start a statement")
        unsupported = _UNSUPPORTED_STATEMENTS.get(" ".join(words[:2])) or (
            _UNSUPPORTED_STATEMENTS.get(first)
        )
        if unsupported:
            raise SQLError("0A000", unsupported)
        changefeed = "CHANGEFEED" in words[:2]  # its own parser names what is missing
        # so does CREATE TABLE's PARTITION BY (_cut_partitioning)
        own_parser = changefeed or (words[:2] == ["CREATE", "TABLE"] and "PARTITION BY" in words)
        opened: list[int] = []
        last_opened = -1  # where the list that closed last opened
        for i, token in enumerate(tokens):
            kind = token.token_type
            if kind is TokenType.IDENTIFIER and not token.text:
                raise self._error_at(i, "zero-length delimited identifier")
            if kind in _NAME_TOKENS and "\x00" in token.text:
                raise SQLError("42602", f"invalid name {token.text!r}: it contains a NUL character")
            if kind is TokenType.L_PAREN:
                # NB: PARTITION BY LIST (a) (PARTITION ...): two lists with no comma
                partitions = last_opened > 1 and self._keyword(last_opened - 2) == "PARTITION BY"
                # NB: INSERT INTO t (a, b) (SELECT ...): a column list, then a query
                query = i + 1 < len(tokens) and self._keyword(i + 1) in ("SELECT", "WITH")
                after_list = i and tokens[i - 1].token_type is TokenType.R_PAREN
                if after_list and not (partitions or query):
                    raise self._error_at(i, "a comma is missing between the lists")
                opened.append(i)
                if len(opened) > _MAX_NESTING:
                    raise SQLError("54001", "statement too complex: it nests too deeply")
            elif kind is TokenType.R_PAREN:
                if not opened:
                    raise self._error_at(i, "unbalanced parenthesis")
                last_opened = opened.pop()
            nxt = i + 1
            if kind is TokenType.COMMA:
                after = tokens[nxt].token_type if nxt < len(tokens) else None
                if after in (None, TokenType.COMMA, TokenType.R_PAREN) or (
                    self._keyword(nxt) in _CLAUSE_STARTS
                ):
                    raise self._error_at(nxt, "a list item is missing")
                opens_list = i == 0 or tokens[i - 1].token_type is TokenType.L_PAREN
                # NB: GRANT SELECT, INSERT ...: there SELECT is a privilege, not a clause
                privileges = self.words[0] in ("GRANT", "REVOKE")
                if opens_list or (self._keyword(i - 1) in _LIST_STARTS and not privileges):
                    raise self._error_at(i, "a list item is missing")
            word = self._keyword(i) if not own_parser else ""
            cut_short = nxt == len(tokens) or self._keyword(nxt) in _CLAUSE_STARTS
            if word == "DISTINCT" and self._is_distinct_from(i):
                continue  # NB: x IS [NOT] DISTINCT FROM y: FROM starts no clause there
            if word in _NEEDS_MORE and cut_short and self.words[i - 1 : i + 1] != _DEFAULT_VALUES:
                raise self._error_at(nxt, f"{word} needs something after it")
        if opened:
            raise self._error_at(opened[-1], "this parenthesis is never closed")
        self._check_statement_shape()

    def _is_distinct_from(self, index: int) -> bool:
        """Whether the DISTINCT at ``index`` is part of the operator ``IS [NOT] DISTINCT
        FROM`` (not SELECT DISTINCT)."""
        before = self.words[max(index - 2, 0) : index]
        return (
            self._keyword(index + 1) == "FROM"
            and (before[-1:] == ["IS"] or before == ["IS", "NOT"])
            and self._keyword(index - 1) != ""
        )

    def _check_statement_shape(self) -> None:
        words = self.words
        end = len(self.tokens)
        self._check_joins()
        if words[0] == "DELETE" and self._keyword(1) != "FROM":
            raise self._error_at(1, "expected FROM after DELETE")
        if words[0] in ("INSERT", "UPSERT") and not {"VALUES", "SELECT", "DEFAULT"} & set(words):
            raise self._error_at(end, f"{words[0]} needs VALUES (...)")
        if words[0] in ("INSERT", "UPSERT"):
            self._check_target_columns()
        if words[0] == "UPDATE" and "SET" not in words:
            raise self._error_at(end, "UPDATE needs SET column = value")
        if words[0] == "ALTER":
            kind = self._keyword(1)
            if kind not in ("TABLE", "VIEW", "CHANGEFEED", "DATABASE", "USER", "ROLE", "RANGE"):
                raise self._error_at(1, "expected TABLE, VIEW, CHANGEFEED or USER after ALTER")
            if kind == "TABLE":
                name = 4 if words[2:4] == ["IF", "EXISTS"] else 2
                if self._keyword(name) in _ALTER_ACTIONS:
                    raise self._error_at(name, "expected a table name")
                if name + 1 >= end:
                    raise self._error_at(
                        end, "expected ADD, DROP, SPLIT AT or RELOCATE after the table"
                    )
        if words[:2] == ["CREATE", "DATABASE"]:
            name = 5 if words[2:5] == ["IF", "NOT", "EXISTS"] else 2
            if name + 1 < end:
                raise self._error_at(name + 1, "expected the end after the database's name")
        if words[:2] == ["CREATE", "TABLE"]:
            self._check_after_columns()

    def _check_target_columns(self) -> None:
        """An INSERT's target column written with a dot (``(t.c)``, ``(c.*)``) names a
        field of a compound-typed column, as in CockroachDB's grammar: 0A000 in its
        words (sqlglot would fail on it as a syntax error)."""
        words, tokens = self.words, self.tokens
        i = 2 if words[1:2] == ["INTO"] else 1
        while i + 1 < len(tokens) and tokens[i + 1].token_type is TokenType.DOT:
            i += 2  # db.public.t
        i += 1
        if words[i : i + 1] == ["AS"]:
            i += 2
        if i >= len(tokens) or tokens[i].token_type is not TokenType.L_PAREN:
            return
        if words[i + 1 : i + 2] in (["SELECT"], ["VALUES"], ["WITH"], ["TABLE"], ["("]):
            return  # INSERT INTO t (SELECT ...): a query, not columns
        first = i + 1
        for j in range(first, len(tokens)):
            kind = tokens[j].token_type
            if kind in (TokenType.COMMA, TokenType.R_PAREN):
                dotted = any(t.token_type is TokenType.DOT for t in tokens[first:j])
                if dotted:
                    shown = self.text[self._pos(tokens[first]) : self._pos(tokens[j])].strip()
                    raise SQLError("0A000", f'compound types not supported yet: "{shown}"')
                if kind is TokenType.R_PAREN:
                    return
                first = j + 1
            elif kind is TokenType.L_PAREN:
                return  # NB: not a list of names

    def _check_joins(self) -> None:
        """A JOIN that is not CROSS or NATURAL needs ON or USING (sqlglot would read a bare
        one as a cross join)."""
        depth = 0
        open_join: int | None = None
        for i, token in enumerate(self.tokens):
            depth += token.token_type is TokenType.L_PAREN
            depth -= token.token_type is TokenType.R_PAREN
            word = self._keyword(i)
            if depth or not word:
                continue
            if word in ("ON", "USING"):
                open_join = None
            elif word == "JOIN" or word in _AFTER_JOIN:
                if open_join is not None:
                    raise self._error_at(i, "JOIN needs ON or USING")
                before = i - 1
                while self._keyword(before) in ("LEFT", "RIGHT", "FULL", "INNER", "OUTER"):
                    before -= 1  # NB: NATURAL LEFT OUTER JOIN needs no ON either
                if word == "JOIN" and self._keyword(before) not in ("CROSS", "NATURAL"):
                    open_join = i
        if open_join is not None:
            raise self._error_at(len(self.tokens), "JOIN needs ON or USING")

    def _check_after_columns(self) -> None:
        """Nothing may follow a CREATE TABLE's column list."""
        tokens = self.tokens
        start = next((i for i, t in enumerate(tokens) if t.token_type is TokenType.L_PAREN), None)
        if start is None or "AS" in self.words[:start]:
            return
        depth = 0
        for i in range(start, len(tokens)):
            kind = tokens[i].token_type
            depth += kind is TokenType.L_PAREN
            depth -= kind is TokenType.R_PAREN
            if depth == 0:
                if i + 1 < len(tokens) and self._keyword(i + 1) == "PARTITION BY":
                    return  # cut out and parsed by _cut_partitioning
                if i + 1 < len(tokens) and self._keyword(i + 1) != "AS":  # AS: CREATE TABLE AS
                    word = self._keyword(i + 1).split(" ")[0]  # sqlglot: "PARTITION BY"
                    if word == "WITH":
                        return  # storage parameters: sqlglot reads them as properties
                    if word in ("PARTITION", "INHERITS", "INTERLEAVE", "LOCALITY"):
                        raise SQLError("0A000", f"CREATE TABLE ... {word} is not supported")
                    raise self._error_at(i + 1, "expected the end after the column list")
                return

    # CockroachDB-only clauses, cut out of the text sqlglot sees.

    def _cut_partitioning(self) -> st.Partitioning | None:
        """Cut out a CREATE TABLE's ``PARTITION BY LIST | RANGE (columns) (PARTITION p
        VALUES IN (...) | VALUES FROM (...) TO (...), ...)``."""
        words, tokens = self.words, self.tokens
        at = next((i for i, word in enumerate(words) if word == "PARTITION BY"), None)
        if at is None:
            return None
        kind = words[at + 1] if at + 1 < len(words) else ""
        if kind not in ("LIST", "RANGE"):
            raise self._error_at(at + 1, "expected PARTITION BY LIST (...) or RANGE (...)")
        columns_end = self._closing(at + 2)
        columns = []
        for i in range(at + 3, columns_end, 2):
            if not _name_like(tokens[i]) or words[i + 1] not in (",", ")"):
                raise self._error_at(i, "expected the partitioning's column names")
            columns.append(_name(tokens[i]))
        if not columns:
            raise self._error_at(at + 3, "expected the partitioning's column names")
        close = self._closing(columns_end + 1)
        if close + 1 != len(tokens):
            raise self._error_at(close + 1, "expected the end after PARTITION BY (...)")
        partitions: list[st.PartitionSpec] = []
        j = columns_end + 2
        while True:
            if words[j] != "PARTITION" or not _name_like(tokens[j + 1]):
                raise self._error_at(j, "expected PARTITION <name> VALUES ...")
            name = _name(tokens[j + 1])
            if kind == "LIST":
                if words[j + 2 : j + 4] != ["VALUES", "IN"]:
                    raise self._error_at(j + 2, "expected VALUES IN (...)")
                end = self._closing(j + 4)
                if words[j + 5 : end] == ["DEFAULT"]:
                    partition = st.PartitionSpec(name, default=True)
                else:
                    values, _ = self._key_tuple(j + 4)
                    partition = st.PartitionSpec(name, tuple(_list_value(v) for v in values))
                j = end + 1
            else:
                if words[j + 2 : j + 4] != ["VALUES", "FROM"]:
                    raise self._error_at(j + 2, "expected VALUES FROM (...) TO (...)")
                start, j = self._range_bound(j + 4, "MINVALUE")
                if words[j : j + 1] != ["TO"]:
                    raise self._error_at(j, "expected TO (...) after VALUES FROM (...)")
                bound_end, j = self._range_bound(j + 1, "MAXVALUE")
                partition = st.PartitionSpec(name, start=start, end=bound_end)
            partitions.append(partition)
            if j == close:
                break
            if words[j] != ",":
                raise self._error_at(j, "expected , or ) after a partition")
            j += 1
        self._mask(at, close)
        return st.Partitioning(
            "list" if kind == "LIST" else "range", tuple(columns), tuple(partitions)
        )

    def _closing(self, i: int) -> int:
        """The index of the parenthesis that closes the one at token ``i``."""
        tokens = self.tokens
        if i >= len(tokens) or tokens[i].token_type is not TokenType.L_PAREN:
            raise self._error_at(i, "expected a parenthesized list")
        depth = 0
        for j in range(i, len(tokens)):
            depth += tokens[j].token_type is TokenType.L_PAREN
            depth -= tokens[j].token_type is TokenType.R_PAREN
            if depth == 0:
                return j
        raise self._error_at(i, "this parenthesis is never closed")

    def _range_bound(self, i: int, unbounded: str) -> tuple[tuple[exp.Expr, ...], int]:
        """``(values)`` or ``(MINVALUE)`` / ``(MAXVALUE)`` (``()``) from token ``i``."""
        end = self._closing(i)
        if self.words[i + 1 : end] == [unbounded]:
            return (), end + 1
        return self._key_tuple(i)

    def _cut_as_of(self) -> exp.Expr | None:
        words = self.words
        level = 0  # parentheses around the clause: only the top-level statement takes it
        for i in range(len(words) - 3):
            level += self.tokens[i].token_type is TokenType.L_PAREN
            level -= self.tokens[i].token_type is TokenType.R_PAREN
            if words[i : i + 4] != ["AS", "OF", "SYSTEM", "TIME"]:
                continue
            if level:
                raise SQLError(
                    "0A000", "AS OF SYSTEM TIME must be provided on a top-level statement"
                )
            depth = 0
            j = i + 4
            while j < len(words):
                kind = self.tokens[j].token_type
                if kind is TokenType.L_PAREN:
                    depth += 1
                elif kind is TokenType.R_PAREN:
                    depth -= 1
                elif depth == 0 and words[j].split(" ", 1)[0] in _CLAUSE_WORDS:
                    break  # NB: the tokenizer reads "GROUP BY" and "ORDER BY" as one token
                j += 1
            if j == i + 4:
                raise self._error_at(j, "AS OF SYSTEM TIME needs a timestamp expression")
            expression = self._as_of_expression(i + 4, j)
            self._mask(i, j - 1)
            return expression
        return None

    def _as_of_expression(self, first: int, end: int) -> exp.Expr:
        """AS OF SYSTEM TIME's expression, tokens ``first`` to ``end`` (excluded): a
        constant, follower_read_timestamp() or a placeholder."""
        start = self._pos(self.tokens[first])
        stop = self._pos(self.tokens[end - 1]) + len(self._raw(end - 1))
        expression = parse_expression(self.text[start:stop])
        if any(isinstance(n, exp.Subquery | exp.Select) for n in expression.walk()):
            raise SQLError("0A000", "subqueries are not allowed in AS OF SYSTEM TIME")
        for node in expression.walk():
            if isinstance(node, exp.Anonymous) and node.name.lower() in CCL_ONLY_FUNCTIONS:
                raise ccl_only(node.name.lower())
        if any(
            isinstance(n, exp.Column | exp.Func)
            and not isinstance(n, exp.Cast)
            and not _is_follower_read_timestamp(n)
            for n in expression.walk()
        ):
            # NB: a placeholder is a constant of its execution here (CockroachDB
            # refuses even those); a function such as now() is not
            raise SQLError(
                "XXUUU",
                "AS OF SYSTEM TIME: only constant expressions, with_min_timestamp, "
                "with_max_staleness, or follower_read_timestamp are allowed",
            )
        return expression

    def _cut_delete_returning(self) -> tuple[exp.Expr, ...] | None:
        """``DELETE ... ORDER BY ... LIMIT n RETURNING ...``, CockroachDB's order of the
        clauses, which sqlglot reads only with RETURNING before ORDER BY: RETURNING's
        list is cut out and parsed on its own."""
        if self.words[0] != "DELETE" or "RETURNING" not in self.words:
            return None
        depth = 0
        ordered = False
        for i, token in enumerate(self.tokens):
            depth += token.token_type is TokenType.L_PAREN
            depth -= token.token_type is TokenType.R_PAREN
            word = self._keyword(i)
            if depth == 0 and word in ("ORDER", "LIMIT"):
                ordered = True
            if depth == 0 and word == "RETURNING" and ordered and i + 1 < len(self.tokens):
                start = self._pos(self.tokens[i + 1])
                try:
                    select = sqlglot.parse_one(f"SELECT {self.text[start:]}", read=_DIALECT)
                except (ParseError, TokenError) as exc:
                    raise SQLError(
                        "42601", f"syntax error in RETURNING: {_first_line(exc)}"
                    ) from None
                _fold_identifiers(select)
                if not isinstance(select, exp.Select) or any(
                    v for k, v in select.args.items() if k != "expressions"
                ):
                    raise self._error_at(i + 1, "expected a list of values after RETURNING")
                self._mask(i, len(self.tokens) - 1)
                return tuple(e.copy() for e in select.expressions)  # NB: roots of their own
        return None

    def _cut_families(
        self,
    ) -> tuple[list[st.FamilySpec], dict[str, tuple[str | None, bool, bool]]]:
        """Cut out FAMILY table elements and column FAMILY qualifiers."""
        families: list[st.FamilySpec] = []
        column_families: dict[str, tuple[str | None, bool, bool]] = {}
        if self.words[:2] == ["ALTER", "TABLE"]:
            for first, last in self._top_level_elements():  # each change of the ALTER
                # NB: from its ADD on: a FAMILY before it is the table's name (ALTER
                # TABLE family ...), and only an added column takes a family
                if "ADD" in self.words[first : last + 1]:
                    added = self.words.index("ADD", first)
                    self._cut_column_family(added, last + 1, column_families)
                self._cut_not_visible(first, last + 1)
            return families, column_families
        try:
            open_index = self.words.index("(")
        except ValueError:
            return families, column_families
        elements = self._elements(open_index)
        for n, (first, last) in enumerate(elements):
            words = self.words[first : first + 2]
            if words[0] == "INDEX" or words == ["UNIQUE", "INDEX"]:
                self.table_indexes.append(self._index_element(first, last))
                if n > 0:
                    self._mask(first - 1, last)
                elif n + 1 < len(elements):
                    self._mask(first, last + 1)
                else:
                    self._mask(first, last)
            elif self.words[first] == "FAMILY":
                families.append(self._family_element(first, last))
                if n > 0:
                    self._mask(first - 1, last)  # with the comma before it
                elif n + 1 < len(elements):
                    self._mask(first, last + 1)  # with the comma after it
                else:
                    self._mask(first, last)
            elif words[0] in ("PRIMARY", "PRIMARY KEY", "CONSTRAINT", "UNIQUE"):
                self._cut_ascending(first, last)
            else:
                self._cut_column_family(first, last + 1, column_families)
                self._cut_not_visible(first, last + 1)
        return families, column_families

    def _top_level_elements(self) -> list[tuple[int, int]]:
        """The statement's token ranges (first and last, inclusive) between commas
        outside parentheses."""
        elements = []
        depth = 0
        start = 0
        for i, token in enumerate(self.tokens):
            kind = token.token_type
            depth += kind is TokenType.L_PAREN
            depth -= kind is TokenType.R_PAREN
            if kind is TokenType.COMMA and depth == 0:
                elements.append((start, i - 1))
                start = i + 1
        elements.append((start, len(self.tokens) - 1))
        return elements

    def _cut_ascending(self, first: int, last: int) -> None:
        """``ASC`` after a key column of a PRIMARY KEY or UNIQUE element (as SHOW CREATE
        TABLE writes them): the order keys have anyway; ``DESC`` after one of a PRIMARY
        KEY's, noted (:attr:`descending_keys`)."""
        primary = bool({"PRIMARY", "PRIMARY KEY"} & set(self.words[first : last + 1]))
        for i in range(first, last + 1):
            if self.words[i] == "ASC":
                self._mask(i, i)
            elif self.words[i] == "DESC" and i > first:
                if not primary:
                    raise SQLError(
                        "0A000",
                        "descending columns of a UNIQUE constraint are not supported; "
                        "use CREATE UNIQUE INDEX ... (column DESC)",
                    )
                self.descending_keys.add(_name(self.tokens[i - 1]))
                self._mask(i, i)

    def _cut_not_visible(self, first: int, stop: int) -> None:
        """``NOT VISIBLE`` inside one column definition: the column is hidden from
        ``SELECT *`` (as the implicit ``rowid``)."""
        for i in range(first, stop - 1):
            if self.words[i : i + 2] == ["NOT", "VISIBLE"]:
                self.not_visible.add(self._column_name_of(first))
                self._mask(i, i + 1)
                return

    def _elements(self, open_index: int) -> list[tuple[int, int]]:
        """The comma-separated elements inside the parentheses at ``open_index``."""
        elements = []
        depth = 0
        start = open_index + 1
        for i in range(open_index, len(self.tokens)):
            kind = self.tokens[i].token_type
            if kind is TokenType.L_PAREN:
                depth += 1
            elif kind is TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    if i > start:
                        elements.append((start, i - 1))
                    break
            elif kind is TokenType.COMMA and depth == 1:
                elements.append((start, i - 1))
                start = i + 1
        return elements

    def _index_element(self, first: int, last: int) -> st.IndexSpec:
        """``[UNIQUE] INDEX [name] (column, ...) [STORING (column, ...)]`` in CREATE
        TABLE (CockroachDB's)."""
        i = first
        unique = self.words[i] == "UNIQUE"
        i += 2 if unique else 1
        name = None
        if i <= last and self.tokens[i].token_type is not TokenType.L_PAREN:
            name = _name(self.tokens[i])
            i += 1
        columns, expressions, i, descending = self._index_keys(i, last)
        storing: list[str] = []
        if i <= last and self.words[i] in ("STORING", "INCLUDE", "COVERING"):
            storing, i, ordered = self._name_list(i + 1, last, "STORING (column, ...)")
            if any(ordered):
                raise self._error_at(i - 1, "STORING columns take no ASC or DESC")
        predicate = None
        if i < last and self.words[i] == "WHERE":
            start = self._pos(self.tokens[i + 1])
            end = self._pos(self.tokens[last]) + len(self._raw(last))
            predicate = parse_expression(self.text[start:end])
            i = last + 1
        if i <= last:
            raise self._error_at(i, "expected the end of the INDEX")
        return st.IndexSpec(
            name,
            tuple(columns),
            unique,
            tuple(storing),
            descending=descending,
            predicate=predicate,
            expressions=expressions,
        )

    def _index_keys(
        self, i: int, last: int
    ) -> tuple[list[str], tuple[exp.Expr | None, ...], int, tuple[bool, ...]]:
        """An INDEX element's keys in the parentheses at ``i``: each a column or an
        expression (an expression index's), maybe followed by ASC or DESC; returns
        their names ("" for an expression), their expressions (empty: none), the index
        after them and which DESC followed."""
        what = "INDEX [name] (column, ...)"
        if i > last or self.tokens[i].token_type is not TokenType.L_PAREN:
            raise self._error_at(i, f"expected {what}")
        elements = self._elements(i)
        if not elements:
            raise self._error_at(i + 1, f"expected {what}")
        names: list[str] = []
        expressions: list[exp.Expr | None] = []
        descending: list[bool] = []
        for first, end in elements:
            descending.append(self.words[end] == "DESC")
            if self.words[end] in ("ASC", "DESC"):
                end -= 1
            token = self.tokens[first]
            if first == end and (token.token_type in _NAME_TOKENS or token.text.isidentifier()):
                names.append(_name(token))
                expressions.append(None)
                continue
            if first > end:
                raise self._error_at(first, f"expected a column name in {what}")
            start = self._pos(token)
            text = self.text[start : self._pos(self.tokens[end]) + len(self._raw(end))]
            names.append("")
            expressions.append(parse_expression(text).unnest())
        after = elements[-1][1] + 2
        keys = tuple(expressions) if any(e is not None for e in expressions) else ()
        return names, keys, after, tuple(descending)

    def _name_list(self, i: int, last: int, what: str) -> tuple[list[str], int, tuple[bool, ...]]:
        """The names in the parentheses at ``i`` (each maybe followed by ASC or DESC),
        the index after them, and which names DESC followed."""
        if i > last or self.tokens[i].token_type is not TokenType.L_PAREN:
            raise self._error_at(i, f"expected {what}")
        names: list[str] = []
        descending: list[bool] = []
        j = i + 1
        while j <= last and self.tokens[j].token_type is not TokenType.R_PAREN:
            token = self.tokens[j]
            if token.token_type is TokenType.COMMA or self.words[j] == "ASC":
                j += 1
                continue
            if self.words[j] == "DESC" and names:
                descending[-1] = True
                j += 1
                continue
            if token.token_type not in _NAME_TOKENS and not token.text.isidentifier():
                raise self._error_at(j, f"expected a column name in {what}")
            names.append(_name(token))
            descending.append(False)
            j += 1
        if j > last or not names:
            raise self._error_at(j, f"expected {what}")
        return names, j + 1, tuple(descending)

    def _family_element(self, first: int, last: int) -> st.FamilySpec:
        i = first + 1
        name = None
        if i <= last and self.tokens[i].token_type is not TokenType.L_PAREN:
            name = _name(self.tokens[i])
            i += 1
        if i > last or self.tokens[i].token_type is not TokenType.L_PAREN:
            raise self._error_at(i, "expected FAMILY [name] (column, ...)")
        columns = []
        for j in range(i + 1, last):
            token = self.tokens[j]
            if token.token_type is TokenType.COMMA:
                continue
            if token.token_type not in _NAME_TOKENS and not token.text.isidentifier():
                raise self._error_at(j, "expected a column name in FAMILY (...)")
            columns.append(_name(token))
        if self.tokens[last].token_type is not TokenType.R_PAREN or not columns:
            raise self._error_at(last, "expected FAMILY [name] (column, ...)")
        return st.FamilySpec(name, tuple(columns))

    def _cut_column_family(
        self, first: int, stop: int, out: dict[str, tuple[str | None, bool, bool]]
    ) -> None:
        """``col type ... [CREATE [IF NOT EXISTS]] FAMILY [name]`` inside one column
        definition (``first`` is its first token; in ALTER TABLE, the statement's)."""
        words = self.words
        for i in range(first, stop):
            if words[i] != "FAMILY":
                continue
            create_at = i
            while create_at > first and words[create_at - 1] in ("CREATE", "IF", "NOT", "EXISTS"):
                create_at -= 1
            create = words[create_at] == "CREATE"
            if_not_exists = words[create_at + 1 : create_at + 4] == ["IF", "NOT", "EXISTS"]
            name = None
            end = i
            if i + 1 < stop and words[i + 1] not in _COLUMN_WORDS:
                name = _name(self.tokens[i + 1])
                end = i + 1
            elif not create:
                raise self._error_at(i + 1, "expected a family name after FAMILY")
            column = self._column_name_of(first)
            out[column] = (name, create, create and if_not_exists)
            self._mask(create_at, end)
            return

    def _column_name_of(self, first: int) -> str:
        words = self.words
        if words[:2] == ["ALTER", "TABLE"]:
            i = words.index("ADD", first) + 1 if "ADD" in words[first:] else first
            if i < len(words) and words[i] == "COLUMN":
                i += 1
            while i < len(words) and words[i] in ("IF", "NOT", "EXISTS"):
                i += 1
            return _name(self.tokens[i])
        return _name(self.tokens[first])

    # Statements parsed entirely here.

    def _show(self) -> st.Statement:
        words = self.words
        if words[1:] == ["TABLES"]:
            return st.ShowTables(self.text)
        if words[1:3] == ["TABLES", "FROM"] and len(words) == 4:
            return st.ShowTables(self.text, _name(self.tokens[3]))
        if words[1:] == ["DATABASES"]:
            return st.ShowDatabases(self.text)
        if words[1:] in (["USERS"], ["ROLES"]):
            return st.ShowUsers(self.text)
        if words[1:3] == ["CREATE", "CHANGEFEED"]:
            job_id, name, end = self._changefeed_ref(3)
            if end < len(words):
                raise self._error_at(end, "unexpected input after the changefeed")
            return st.ShowCreateChangefeed(self.text, job_id, name)
        if words[1:] == ["CREATE", "ALL", "TABLES"]:
            return st.ShowCreateAllTables(self.text)
        if words[1:] == ["SCHEMAS"]:
            return st.ShowSchemas(self.text)
        if words[1:3] == ["SCHEMAS", "FROM"] and len(words) == 4:
            return st.ShowSchemas(self.text, _name(self.tokens[3]))
        if words[1:4] == ["STATISTICS", "FOR", "TABLE"]:
            return st.ShowStatistics(self.text, self._table_name(4, len(words)))
        if words[1:] in (["REGIONS"], ["REGIONS", "FROM", "CLUSTER"]):
            return st.ShowRegions(self.text, cluster=len(words) > 2)
        if words[1:3] == ["CREATE", "TABLE"] or (words[1] == "CREATE" and len(words) > 2):
            start = 3 if words[2] in ("TABLE", "VIEW", "SEQUENCE") else 2
            return st.ShowCreateTable(self.text, self._table_name(start, len(words)))
        if words[1] in ("INDEXES", "INDEX", "KEYS") and words[2:3] == ["FROM"]:
            comment = words[-2:] == ["WITH", "COMMENT"]
            end = len(words) - 2 if comment else len(words)
            return st.ShowIndexes(self.text, self._table_name(3, end), comment)
        if words[1:3] == ["COLUMNS", "FROM"]:
            comment = words[-2:] == ["WITH", "COMMENT"]
            end = len(words) - 2 if comment else len(words)
            return st.ShowColumns(self.text, self._table_name(3, end), comment)
        if words[1:4] == ["RANGES", "FROM", "TABLE"]:
            return st.ShowRanges(self.text, self._table_name(4, len(words)))
        if words[1:] == ["RANGES"]:
            return st.ShowDatabaseRanges(self.text)
        if words[1:4] == ["RANGES", "FROM", "DATABASE"] and len(words) == 5:
            return st.ShowDatabaseRanges(self.text, _name(self.tokens[4]))
        if words[1] == "ZONE" or words[1:3] == ["ALL", "ZONE"]:
            return self._show_zone()
        if words[1:4] == ["PARTITIONS", "FROM", "TABLE"]:
            return st.ShowPartitions(self.text, self._table_name(4, len(words)))
        if words[1] == "GRANTS":
            return self._show_grants()
        if words[1:] == ["CHANGEFEED", "JOBS"]:
            return st.ShowChangefeedJobs(self.text)
        if words[1:] == ["JOBS"]:
            return st.ShowChangefeedJobs(self.text, shape="jobs")
        if words[1:4] == ["JOB", "WHEN", "COMPLETE"] or (
            words[1:2] == ["JOB"] and words[2:3] == ["$"]
        ):
            wait = words[2:3] == ["WHEN"]
            at = 4 if wait else 2
            job_id, param = self._job_ref_or_param(at)
            end = at + (2 if param is not None else 1)
            if len(words) > end:
                raise self._error_at(end, "unexpected input after the job id")
            return st.ShowChangefeedJobs(
                self.text, job_id, shape="jobs", wait=wait, job_param=param
            )
        if words[1:2] == ["JOBS"]:
            wait = words[2:4] == ["WHEN", "COMPLETE"]
            query = self._jobs_query(4 if wait else 2)
            return st.ShowChangefeedJobs(self.text, shape="jobs", query=query, wait=wait)
        if words[1:3] == ["CHANGEFEED", "JOB"] or words[1:2] == ["JOB"]:
            at = 3 if words[1] == "CHANGEFEED" else 2
            job_id, name, end = self._changefeed_ref(at)
            if len(words) > end:
                raise self._error_at(end, "unexpected input after the job id")
            shape: Literal["changefeed", "jobs"] = "changefeed" if at == 3 else "jobs"
            return st.ShowChangefeedJobs(self.text, job_id, shape=shape, name=name)
        raise SQLError(
            "0A000",
            f"unsupported statement {' '.join(words[:3])}...; feedkv supports SHOW TABLES, "
            "SHOW DATABASES, SHOW SCHEMAS, SHOW USERS, SHOW ROLES, SHOW CREATE TABLE, "
            "SHOW CREATE ALL TABLES, SHOW COLUMNS, SHOW INDEXES, SHOW STATISTICS, "
            "SHOW REGIONS, SHOW RANGES [FROM TABLE | FROM DATABASE], SHOW GRANTS, "
            "SHOW JOBS, SHOW CHANGEFEED JOBS, SHOW CREATE CHANGEFEED, SHOW SESSIONS, "
            "SHOW QUERIES, SHOW CLUSTER SETTING[S], SHOW ZONE CONFIGURATIONS and SHOW "
            "<session variable>",
        )

    def _show_grants(self) -> st.ShowGrants:
        words = self.words
        end = words.index("FOR") if "FOR" in words else len(words)
        user = None
        if end < len(words):
            if end + 2 != len(words):
                raise self._error_at(end + 1, "expected one user name after FOR")
            user = _name(self.tokens[end + 1])
        if words[2:4] == ["ON", "ROLE"]:
            return st.ShowGrants(self.text, None, user, on_role=True, roles=self._names(4, end))
        expected = (
            "expected SHOW GRANTS [ON [TABLE] t | ON DATABASE d | ON ROLE [r, ...]] [FOR user]"
        )
        if words[2:4] == ["ON", "DATABASE"]:
            if end != 5 or not _name_like(self.tokens[4]):
                raise self._error_at(4, expected)
            return st.ShowGrants(self.text, None, user, database=_name(self.tokens[4]))
        table = None
        if end > 2:
            if words[2] != "ON":
                raise self._error_at(2, expected)
            start = 4 if words[3:4] == ["TABLE"] else 3
            table = self._table_name(start, end)
        return st.ShowGrants(self.text, table, user)

    def _begin(self) -> st.Begin:
        """``BEGIN [TRANSACTION] | START TRANSACTION`` and its modes
        (:meth:`_transaction_modes`)."""
        words = self.words
        i = 2 if words[0] == "START" or words[1:2] == ["TRANSACTION"] else 1
        return st.Begin(self.text, *self._transaction_modes(i))

    def _set_transaction(self, i: int) -> st.SetTransaction:
        """``SET TRANSACTION mode, ...`` (the modes from token ``i``)."""
        return st.SetTransaction(self.text, *self._transaction_modes(i))

    def _transaction_modes(
        self, i: int
    ) -> tuple[str | None, str | None, bool | None, exp.Expr | None]:
        """The transaction modes from token ``i`` on, separated by commas or not, each
        given at most once (42601 names the one given twice, as CockroachDB's grammar):
        ``PRIORITY LOW | NORMAL | HIGH``, ``ISOLATION LEVEL level``, ``READ ONLY | READ
        WRITE``, ``AS OF SYSTEM TIME expr`` and ``[NOT] DEFERRABLE``; as (priority,
        isolation, read only, AS OF SYSTEM TIME's expression). DEFERRABLE is refused:
        feedkv does not run it."""
        words = self.words
        start = i
        given: dict[str, str] = {}
        as_of: exp.Expr | None = None

        def once(mode: str, what: str, value: str) -> None:
            if mode in given:
                raise SQLError("42601", f"{what} specified multiple times")
            given[mode] = value

        while i < len(words):
            word = words[i]
            if word == "," and i > start:
                i += 1
                continue
            if word == "PRIORITY" and words[i + 1 : i + 2] in (["LOW"], ["NORMAL"], ["HIGH"]):
                once("priority", "user priority", words[i + 1])
                i += 2
            elif words[i : i + 2] == ["ISOLATION", "LEVEL"]:
                level = words[i + 2 : i + 4]
                if level[:1] in (["SERIALIZABLE"], ["SNAPSHOT"]):
                    size = 1
                elif level in (
                    ["READ", "COMMITTED"],
                    ["REPEATABLE", "READ"],
                    ["READ", "UNCOMMITTED"],
                ):
                    size = 2
                else:
                    raise self._error_at(i + 2, "expected an isolation level")
                once("isolation", "isolation level", " ".join(level[:size]).lower())
                i += 2 + size
            elif word == "READ" and words[i + 1 : i + 2] in (["WRITE"], ["ONLY"]):
                once("read", "read mode", words[i + 1])
                i += 2
            elif word == "DEFERRABLE" or words[i : i + 2] == ["NOT", "DEFERRABLE"]:
                once("deferrable", "deferrable mode", word)
                i += 1 if word == "DEFERRABLE" else 2
            elif words[i : i + 4] == ["AS", "OF", "SYSTEM", "TIME"]:
                once("as_of", "AS OF SYSTEM TIME", "")
                end = self._mode_end(i + 4)
                if end == i + 4:
                    raise self._error_at(end, "AS OF SYSTEM TIME needs a timestamp expression")
                as_of = self._as_of_expression(i + 4, end)
                i = end
            else:
                raise self._error_at(i, "expected a transaction mode")
        if given.get("deferrable") == "DEFERRABLE":
            raise SQLError("0A000", "DEFERRABLE transactions are not supported")
        read = given.get("read")
        if as_of is not None and read == "WRITE":
            raise SQLError("0A000", "AS OF SYSTEM TIME specified with READ WRITE mode")
        return (
            given.get("priority"),
            given.get("isolation"),
            None if read is None else read == "ONLY",
            as_of,
        )

    def _mode_end(self, i: int) -> int:
        """Where a transaction mode's expression from token ``i`` ends: at the first
        comma outside parentheses, or the statement's end."""
        depth = 0
        while i < len(self.words):
            kind = self.tokens[i].token_type
            depth += kind is TokenType.L_PAREN
            depth -= kind is TokenType.R_PAREN
            if depth == 0 and kind is TokenType.COMMA:
                return i
            i += 1
        return i

    def _drop_index(self) -> st.DropIndex:
        """``DROP INDEX [IF EXISTS] [db.][t@]name [CASCADE | RESTRICT]``."""
        words, end = self.words, len(self.tokens)
        at = 4 if words[2:4] == ["IF", "EXISTS"] else 2
        cascade = words[-1] == "CASCADE"
        stop = end - 1 if words[-1] in ("RESTRICT", "CASCADE") else end
        if any(t.token_type is TokenType.COMMA for t in self.tokens[at:stop]):
            raise SQLError("0A000", "DROP INDEX drops one index at a time")
        marks = [i for i in range(at, stop) if self.tokens[i].text == "@"]
        if marks:
            table = self._table_name(at, marks[0])
            if marks[0] + 2 != stop:
                raise self._error_at(marks[0] + 1, "expected DROP INDEX table@index")
            name = _name(self.tokens[marks[0] + 1])
            return st.DropIndex(self.text, table, name, at == 4, cascade)
        if at + 1 != stop:
            raise self._error_at(at, "expected an index name (or table@index)")
        return st.DropIndex(self.text, None, _name(self.tokens[at]), at == 4, cascade)

    def _comment_on(self) -> st.CommentOn:
        """``COMMENT ON DATABASE d | TABLE t | COLUMN [db.]t.c | INDEX [t@]i IS 'text' |
        NULL``."""
        words, tokens = self.words, self.tokens
        kind = words[2].lower() if len(words) > 2 else ""
        if kind not in ("database", "table", "column", "index"):
            raise SQLError("0A000", "COMMENT ON takes DATABASE, TABLE, COLUMN or INDEX in feedkv")
        at = len(words) - 2  # NB: IS is the last word but the comment
        if at < 4 or words[at] != "IS":
            raise self._error_at(min(at, len(words)), "expected COMMENT ON ... IS 'text'")
        value = tokens[at + 1]
        if words[at + 1] == "NULL":
            text = None
        elif value.token_type in _STRING_TOKENS:
            text = value.text
        else:
            raise self._error_at(at + 1, "expected a string or NULL after IS")
        if kind == "database":
            if at != 4:
                raise self._error_at(4, "expected a database name")
            return st.CommentOn(self.text, "database", text, database=_name(tokens[3]))
        if kind == "table":
            return st.CommentOn(self.text, "table", text, table=self._table_name(3, at))
        if kind == "column":
            if at - 3 < 3:
                raise self._error_at(at, "expected COMMENT ON COLUMN table.column")
            table = self._table_name(3, at - 2)
            return st.CommentOn(self.text, "column", text, table=table, name=_name(tokens[at - 1]))
        marks = [i for i in range(3, at) if tokens[i].text == "@"]
        if marks:
            if marks[0] + 2 != at:
                raise self._error_at(marks[0] + 1, "expected COMMENT ON INDEX table@index")
            table = self._table_name(3, marks[0])
            return st.CommentOn(self.text, "index", text, table=table, name=_name(tokens[at - 1]))
        if at != 4:
            raise self._error_at(3, "expected an index name (or table@index)")
        return st.CommentOn(self.text, "index", text, name=_name(tokens[3]))

    def _drop_sequence(self) -> st.DropSequence:
        """``DROP SEQUENCE [IF EXISTS] s, ... [RESTRICT]``."""
        words, end = self.words, len(self.tokens)
        at = 4 if words[2:4] == ["IF", "EXISTS"] else 2
        if words[-1] == "CASCADE":
            raise SQLError("0A000", "DROP SEQUENCE ... CASCADE is not supported")
        stop = end - 1 if words[-1] == "RESTRICT" else end
        names = []
        while at < stop:
            comma = next(
                (i for i in range(at, stop) if self.tokens[i].token_type is TokenType.COMMA), stop
            )
            names.append(self._table_name(at, comma))
            at = comma + 1
        if not names:
            raise self._error_at(at, "expected a sequence name")
        return st.DropSequence(self.text, tuple(names), words[2:4] == ["IF", "EXISTS"])

    def _alter_type(self) -> st.AlterTypeAddValue | st.AlterTypeRenameValue:
        """``ALTER TYPE t ADD VALUE [IF NOT EXISTS] 'x' [BEFORE | AFTER 'y']`` and
        ``ALTER TYPE t RENAME VALUE 'a' TO 'b'``; other changes of a type are 0A000."""
        words, end = self.words, len(self.tokens)
        at = next((i for i in range(2, end) if words[i] in _ALTER_TYPE_ACTIONS), end)
        name = self._table_name(2, at)
        if at == end:
            raise self._error_at(at, "expected ADD VALUE or RENAME VALUE")
        if words[at : at + 2] == ["RENAME", "VALUE"]:
            if end != at + 5 or words[at + 3] != "TO":
                raise self._error_at(min(at + 3, end), "expected RENAME VALUE 'old' TO 'new'")
            old, new = self._label(at + 2), self._label(at + 4)
            return st.AlterTypeRenameValue(self.text, name, old, new)
        if words[at : at + 2] != ["ADD", "VALUE"]:
            shown = " ".join(words[at : at + 2])
            raise SQLError("0A000", f"ALTER TYPE ... {shown} is not supported")
        i = at + 2
        if_not_exists = words[i : i + 3] == ["IF", "NOT", "EXISTS"]
        i += 3 if if_not_exists else 0
        label = self._label(i)
        placement: Literal["BEFORE", "AFTER"] | None = None
        existing = None
        if i + 1 < end:
            if words[i + 1] not in ("BEFORE", "AFTER") or end != i + 3:
                raise self._error_at(i + 1, "expected BEFORE 'label' or AFTER 'label'")
            placement = "BEFORE" if words[i + 1] == "BEFORE" else "AFTER"
            existing = self._label(i + 2)
        return st.AlterTypeAddValue(self.text, name, label, placement, existing, if_not_exists)

    def _alter_sequence(self) -> st.AlterSequence:
        """``ALTER SEQUENCE [IF EXISTS] s option ...`` (:class:`st.AlterSequence`);
        ``CACHE n`` and ``NO CYCLE`` are taken and change nothing, as in CREATE
        SEQUENCE; ``CYCLE`` and ``AS`` are 0A000."""
        words, end = self.words, len(self.tokens)
        if_exists = words[2:4] == ["IF", "EXISTS"]
        at = 4 if if_exists else 2
        stop = next((i for i in range(at, end) if words[i] in _ALTER_SEQUENCE_OPTIONS), end)
        name = self._table_name(at, stop)
        if stop == end:
            raise self._error_at(stop, "expected INCREMENT, MINVALUE, MAXVALUE, START or RESTART")
        given: dict[str, int | bool] = {}
        owned_by: tuple[st.TableName, str] | None = None
        i = stop
        while i < end:
            word, option = words[i], words[i]
            value: int | bool = True
            if word == "NO" and words[i + 1 : i + 2] in (["MINVALUE"], ["MAXVALUE"], ["CYCLE"]):
                option = f"NO {words[i + 1]}"
                i += 2
            elif word in ("INCREMENT", "START"):
                noise = "BY" if word == "INCREMENT" else "WITH"
                i += 2 if words[i + 1 : i + 2] == [noise] else 1
                value, i = self._signed_integer(i)
            elif word in ("MINVALUE", "MAXVALUE", "CACHE"):
                value, i = self._signed_integer(i + 1)
            elif word == "RESTART":
                i += 1
                if words[i : i + 1] == ["WITH"] or (
                    i < end and self.tokens[i].token_type in (TokenType.NUMBER, TokenType.DASH)
                ):
                    value, i = self._signed_integer(i + (words[i] == "WITH"))
            elif word == "OWNED" and words[i + 1 : i + 2] == ["BY"]:
                after = next(
                    (j for j in range(i + 2, end) if words[j] in _ALTER_SEQUENCE_OPTIONS), end
                )
                if words[i + 2 : after] != ["NONE"]:
                    # NB: [db.]table.column: the column is the last name
                    if after - (i + 2) < 3 or self.tokens[after - 2].token_type is not (
                        TokenType.DOT
                    ):
                        raise self._error_at(i + 2, "expected OWNED BY table.column or NONE")
                    owned_by = (self._table_name(i + 2, after - 2), _name(self.tokens[after - 1]))
                value, i = owned_by is None, after
            elif word in ("CYCLE", "AS"):
                shown = {"AS": "AS type"}.get(word, word)
                raise SQLError("0A000", f"ALTER SEQUENCE ... {shown} is not supported")
            else:
                raise self._error_at(i, "expected a sequence option")
            if option.removeprefix("NO ") in {o.removeprefix("NO ") for o in given}:
                raise SQLError("42601", "conflicting or redundant options")
            given[option] = value
        if given.get("INCREMENT") == 0:
            raise SQLError("22023", "INCREMENT must not be zero")
        if given.get("CACHE", 1) < 1:
            raise SQLError("22023", f"CACHE ({given['CACHE']}) must be greater than zero")
        restart = given.get("RESTART")
        return st.AlterSequence(
            self.text,
            name,
            if_exists,
            increment=given.get("INCREMENT"),
            min_value=given.get("MINVALUE"),
            no_min_value="NO MINVALUE" in given,
            max_value=given.get("MAXVALUE"),
            no_max_value="NO MAXVALUE" in given,
            start=given.get("START"),
            restart=restart is not None,
            restart_with=None if restart is None or restart is True else restart,
            owned_by=owned_by,
            owned_by_none="OWNED" in given and owned_by is None,
        )

    def _signed_integer(self, i: int) -> tuple[int, int]:
        """The integer constant (maybe negative) at token ``i``, and the token after it."""
        negative = i < len(self.tokens) and self.tokens[i].token_type is TokenType.DASH
        at = i + negative
        token = self.tokens[at] if at < len(self.tokens) else None
        if token is None or token.token_type is not TokenType.NUMBER or not token.text.isdigit():
            raise self._error_at(at, "expected an integer")
        value = -int(token.text) if negative else int(token.text)
        if not -(2**63) <= value < 2**63:
            raise SQLError("22003", f"{value} is out of range for type INT8")
        return value, at + 1

    def _label(self, i: int) -> str:
        """The enum label, a string constant, at token ``i``."""
        if i >= len(self.tokens) or self.tokens[i].token_type is not TokenType.STRING:
            raise self._error_at(i, "an enum's labels are string constants")
        return self.tokens[i].text

    def _table_name(self, start: int, stop: int) -> st.TableName:
        parts: list[str] = []
        for i in range(start, stop):
            token = self.tokens[i]
            if (i - start) % 2:
                if token.token_type is not TokenType.DOT:
                    raise self._error_at(i, "expected a table name (db.table or table)")
            elif token.token_type in _NAME_TOKENS or token.text.isidentifier():
                parts.append(_name(token))
            else:
                raise self._error_at(i, "expected a table name")
        if not parts or len(parts) > 3 or (stop - start) % 2 == 0:
            raise self._error_at(min(start, stop), "expected a table name")
        return _table_name_of(parts)

    def _session_variable(self) -> st.SessionVariable | None:
        """``SET``/``SHOW``/``RESET`` of a session variable, ``SET TRANSACTION ISOLATION
        LEVEL``, ``USE db``; ``None`` for every other statement."""
        words, tokens = self.words, self.tokens
        first = words[0]
        if first not in ("SET", "SHOW", "RESET", "USE") or words[1:3] == ["CLUSTER", "SETTING"]:
            return None
        if first == "SHOW" and words[1] in _SHOW_STATEMENTS:
            return None
        if first == "USE":
            if len(words) != 2:
                raise self._error_at(min(2, len(words)), "expected USE <database>")
            return st.SessionVariable(self.text, "set", "database", _name(tokens[1]))
        i = 2 if len(words) > 2 and words[1] in ("SESSION", "LOCAL") else 1
        if (
            first == "SET"
            and words[i : i + 4]
            == ["TRANSACTION", "ISOLATION", "LEVEL"][:3] + (words[i + 3 : i + 4])
        ):
            level = " ".join(words[i + 3 :])
            return st.SessionVariable(self.text, "transaction", "transaction_isolation", level)
        if first == "SET" and words[i : i + 6] == [
            "CHARACTERISTICS", "AS", "TRANSACTION", "ISOLATION", "LEVEL", *words[i + 5 : i + 6]
        ]:  # fmt: skip
            level = " ".join(words[i + 5 :])
            return st.SessionVariable(self.text, "set", "default_transaction_isolation", level)
        if first == "SET" and words[i : i + 4] == [
            "CHARACTERISTICS",
            "AS",
            "TRANSACTION",
            "PRIORITY",
        ]:
            if len(words) != i + 5:
                raise self._error_at(min(i + 5, len(words)), "expected one user priority")
            priority = words[i + 4].lower()
            return st.SessionVariable(self.text, "set", "default_transaction_priority", priority)
        if first == "SET" and words[i : i + 7] == [
            "CHARACTERISTICS", "AS", "TRANSACTION", "AS", "OF", "SYSTEM", "TIME"
        ]:  # fmt: skip
            # NB: as CockroachDB: the one default it takes turns follower reads on
            # (which session_vars refuses: feedkv reads at the transaction's timestamp)
            if [t.text.lower() for t in tokens[i + 7 :]] != ["follower_read_timestamp", "(", ")"]:
                raise SQLError(
                    "22023",
                    "unsupported default as of system time expression, only "
                    "follower_read_timestamp() allowed",
                )
            return st.SessionVariable(
                self.text, "set", "default_transaction_use_follower_reads", "on"
            )
        if first == "SET" and words[i : i + 5] in (
            ["CHARACTERISTICS", "AS", "TRANSACTION", "READ", "ONLY"],
            ["CHARACTERISTICS", "AS", "TRANSACTION", "READ", "WRITE"],
        ):
            if len(words) != i + 5:
                raise self._error_at(i + 5, "expected one transaction mode")
            mode = "on" if words[i + 4] == "ONLY" else "off"
            return st.SessionVariable(self.text, "set", "default_transaction_read_only", mode)
        if len(words) <= i:
            raise self._error_at(i, f"expected a variable name after {first}")
        if words[i:] == ["ALL"] and first != "SET":
            return st.SessionVariable(self.text, "show" if first == "SHOW" else "reset", None)
        if words[i : i + 2] == ["TIME", "ZONE"]:
            name, at = "timezone", i + 2
        elif words[i : i + 3] == ["TRANSACTION", "ISOLATION", "LEVEL"] and first == "SHOW":
            name, at = "transaction_isolation", i + 3
        elif words[i : i + 2] in (["TRANSACTION", "PRIORITY"], ["TRANSACTION", "STATUS"]):
            name, at = f"transaction_{words[i + 1].lower()}", i + 2
        elif first == "SHOW" and len(words) > i + 1:
            return None  # SHOW COLUMNS FROM t and the like: no variable
        else:
            name, at = canonical_name(_name(tokens[i])), i + 1
        if first != "SET":
            if at < len(words):
                raise self._error_at(at, f"unexpected input after {name}")
            return st.SessionVariable(self.text, "show" if first == "SHOW" else "reset", name)
        if at < len(words) and words[at] in ("=", "TO"):
            at += 1
        if at >= len(words):
            raise self._error_at(at, f"SET {name} needs a value")
        local = words[1] == "LOCAL"
        if words[at:] == ["DEFAULT"]:
            return st.SessionVariable(self.text, "reset", name, local=local)
        return st.SessionVariable(self.text, "set", name, self._setting_value(at), local=local)

    def _setting_value(self, at: int) -> str:
        """The value of a SET from token ``at`` on: strings, names and numbers (a leading
        ``-`` kept), several separated by commas (``search_path``)."""
        parts: list[str] = []
        current = ""
        for i in range(at, len(self.tokens)):
            token = self.tokens[i]
            kind = token.token_type
            if kind is TokenType.COMMA:
                parts.append(current)
                current = ""
            elif kind is TokenType.DASH and not current:
                current = "-"
            elif kind in (TokenType.STRING, TokenType.NUMBER, *_NAME_TOKENS) or self._keyword(i):
                if current not in ("", "-"):
                    raise self._error_at(i, "expected a comma between the values")
                current += token.text
            else:
                raise self._error_at(i, "expected a value (a string, a name or a number)")
        parts.append(current)
        if any(part in ("", "-") for part in parts):
            raise self._error_at(len(self.tokens), "a value is missing")
        return ", ".join(parts)

    def _cluster_setting(self) -> st.ClusterSetting:
        """``SET CLUSTER SETTING a.b = 'v'`` (or ``true``, ``false``, a number; ``TO``;
        ``DEFAULT``), ``RESET CLUSTER
        SETTING a.b``, ``SHOW CLUSTER SETTING a.b``."""
        words, tokens = self.words, self.tokens
        if len(words) < 4:
            raise self._error_at(3, "expected a setting name")
        parts, i = [_name(tokens[3])], 4
        while i + 1 < len(words) and tokens[i].token_type is TokenType.DOT:
            parts.append(_name(tokens[i + 1]))
            i += 2
        name = ".".join(parts)
        if words[0] != "SET":
            if i < len(words):
                raise self._error_at(i, f"unexpected input after {name}")
            return st.ClusterSetting(self.text, "show" if words[0] == "SHOW" else "reset", name)
        if i + 2 != len(words) or words[i] not in ("=", "TO"):
            raise self._error_at(min(i, len(words) - 1), "expected = '<value>' or = DEFAULT")
        value = tokens[i + 1]
        if words[i + 1] == "DEFAULT":
            return st.ClusterSetting(self.text, "reset", name)
        if value.token_type in (TokenType.TRUE, TokenType.FALSE):
            # NB: a bool setting, as CockroachDB's tutorials write kv.rangefeed.enabled = true
            return st.ClusterSetting(self.text, "set", name, value.text.lower())
        if value.token_type not in (TokenType.STRING, TokenType.NUMBER):
            raise self._error_at(
                i + 1, "expected the setting's value: a string, true, false or a number"
            )
        return st.ClusterSetting(self.text, "set", name, value.text)

    def _create_user(self) -> st.CreateUser:
        words = self.words
        i = 2
        if_not_exists = words[2:5] == ["IF", "NOT", "EXISTS"]
        if if_not_exists:
            i = 5
        if i >= len(words):
            raise self._error_at(i, "expected a user name")
        # CREATE USER logs in, CREATE ROLE does not, unless [WITH] LOGIN | NOLOGIN says
        login, j = words[1] == "USER", i + 1 + (words[i + 1 : i + 2] == ["WITH"])
        if words[j : j + 1] in (["LOGIN"], ["NOLOGIN"]):
            login, j = words[j] == "LOGIN", j + 1
        else:
            j = i + 1
        password = self._password(j, f"CREATE {words[1]}")
        return st.CreateUser(self.text, _name(self.tokens[i]), if_not_exists, password, login)

    def _alter_user(self) -> st.AlterUserPassword:
        """``ALTER USER | ROLE name [WITH] option ...``: ``PASSWORD 'p' | NULL``,
        ``LOGIN``, ``NOLOGIN``, each at most once."""
        words, tokens = self.words, self.tokens
        if len(words) < 3:
            raise self._error_at(2, "expected a user name")
        i = 4 if words[3:4] == ["WITH"] else 3
        if i >= len(words):
            raise self._error_at(
                i, "ALTER USER takes [WITH] PASSWORD 'password' | NULL, LOGIN or NOLOGIN"
            )
        password: str | None = None
        set_password = False
        login: bool | None = None
        while i < len(words):
            word = words[i]
            if word in ("LOGIN", "NOLOGIN"):
                if login is not None:
                    raise SQLError("42601", "conflicting role options: LOGIN and NOLOGIN")
                login, i = word == "LOGIN", i + 1
            elif word == "PASSWORD" and i + 1 < len(words) and not set_password:
                value = tokens[i + 1]
                if value.token_type is TokenType.NULL:
                    password = None
                elif value.token_type is TokenType.STRING and value.text:
                    password = value.text
                else:
                    raise self._error_at(i + 1, "expected the password as a non-empty string")
                set_password, i = True, i + 2
            else:
                raise self._error_at(
                    i, "ALTER USER takes [WITH] PASSWORD 'password' | NULL, LOGIN or NOLOGIN"
                )
        return st.AlterUserPassword(self.text, _name(tokens[2]), password, set_password, login)

    def _drop_user(self) -> st.DropUser:
        """``DROP USER [IF EXISTS] name, ...``."""
        words, tokens = self.words, self.tokens
        if_exists = words[2:4] == ["IF", "EXISTS"]
        at = 4 if if_exists else 2
        names = []
        while True:
            if at >= len(words) or tokens[at].token_type is TokenType.COMMA:
                raise self._error_at(at, "expected a user name")
            names.append(_name(tokens[at]))
            if at + 1 == len(words):
                break
            if tokens[at + 1].token_type is not TokenType.COMMA:
                raise self._error_at(at + 1, "expected a comma between the user names")
            at += 2
        return st.DropUser(self.text, tuple(names), if_exists)

    def _password(self, i: int, what: str) -> str | None:
        """``[WITH] PASSWORD 'secret' | NULL`` from word ``i`` (nothing: ``None``)."""
        words = self.words
        if i < len(words) and words[i] == "WITH":
            i += 1
        if i >= len(words):
            return None
        if words[i] != "PASSWORD" or i + 2 != len(words):
            raise self._error_at(i, f"{what} takes a name and [WITH] PASSWORD 'password' only")
        value = self.tokens[i + 1]
        if value.token_type is TokenType.NULL:
            return None
        if value.token_type is not TokenType.STRING or not value.text:
            raise self._error_at(i + 1, "expected the password as a non-empty string")
        return value.text

    def _grant_role(self, revoke: bool, at: int) -> st.GrantRole:
        """``GRANT role, ... TO user, ...`` or ``REVOKE role, ... FROM user, ...``
        (``at``: the word TO or FROM)."""
        if "WITH" in self.words or "OPTION" in self.words:
            raise SQLError(
                "0A000", "feedkv has no ADMIN OPTION on role memberships: grant the role alone"
            )
        roles = self._names(1, at)
        users = self._names(at + 1, len(self.words))
        if not roles or not users:
            verb, to = ("REVOKE", "FROM") if revoke else ("GRANT", "TO")
            raise self._error_at(at, f"expected {verb} role, ... {to} user, ...")
        return st.GrantRole(self.text, roles, users, revoke)

    def _names(self, start: int, end: int) -> tuple[str, ...]:
        """The names of words ``start`` to ``end`` (exclusive), commas between them."""
        return tuple(
            _name(t) for t in self.tokens[start:end] if t.token_type is not TokenType.COMMA
        )

    def _grant(self) -> st.GrantRole | st.GrantPrivileges:
        words = self.words
        revoke = words[0] == "REVOKE"
        to = "FROM" if revoke else "TO"
        if "ON" not in words and to in words:
            return self._grant_role(revoke, words.index(to))
        if "ON" not in words or to not in words or words.index("ON") > words.index(to):
            raise self._error_at(
                len(words), f"expected {words[0]} privilege, ... ON [TABLE] t, ... {to} user, ..."
            )
        on, at = words.index("ON"), words.index(to)
        on_database = words[on + 1 : on + 2] == ["DATABASE"]
        # NB: a sequence's are a table's (nextval needs UPDATE), and USAGE of one, as
        # PostgreSQL grants it to call nextval and currval, is SELECT and UPDATE
        on_sequence = words[on + 1 : on + 2] == ["SEQUENCE"]
        known = (
            st.DATABASE_PRIVILEGES
            if on_database
            else (*st.PRIVILEGES, "USAGE")
            if on_sequence
            else st.PRIVILEGES
        )
        privileges: list[str] = []
        if words[1:on] in (["ALL"], ["ALL", "PRIVILEGES"]):
            privileges = list(known)
        else:
            for i in range(1, on):
                if i % 2 == 0:
                    if self.tokens[i].token_type is not TokenType.COMMA:
                        raise self._error_at(i, "expected a comma between privileges")
                    continue
                privileges.append(words[i])
        unknown = [p for p in privileges if p not in known]
        if unknown or not privileges:
            what = "database" if on_database else "table"
            raise SQLError(
                "42601",
                f"unknown privilege {unknown[0] if unknown else ''!r}: {what} privileges are "
                f"{', '.join(known)} (or ALL)",
            )
        if "USAGE" in privileges:
            privileges = list(dict.fromkeys(p for q in privileges for p in _USAGE.get(q, (q,))))
        users = tuple(
            _name(t) for t in self.tokens[at + 1 :] if t.token_type is not TokenType.COMMA
        )
        if not users:
            raise self._error_at(at + 1, "expected a user name")
        if on_database:
            names = tuple(
                _name(t) for t in self.tokens[on + 2 : at] if t.token_type is not TokenType.COMMA
            )
            if not names:
                raise self._error_at(on + 2, "expected a database name")
            return st.GrantPrivileges(
                self.text, tuple(privileges), (), users, revoke, databases=names
            )
        start = on + 1 + (words[on + 1 : on + 2] in (["TABLE"], ["SEQUENCE"]))
        tables: list[st.TableName] = []
        begin = start
        for i in range(start, at + 1):
            if i == at or self.tokens[i].token_type is TokenType.COMMA:
                tables.append(self._table_name(begin, i))
                begin = i + 1
        return st.GrantPrivileges(self.text, tuple(privileges), tuple(tables), users, revoke)

    def _drop_stored(self) -> st.AlterColumn:
        """``ALTER TABLE t ALTER [COLUMN] c DROP STORED`` (sqlglot cannot read it)."""
        words = self.words
        at = words.index("ALTER", 2) if "ALTER" in words[2:] else -1
        column = at + 1 + (words[at + 1 : at + 2] == ["COLUMN"])
        if at < 0 or column != len(words) - 3 or not _name_like(self.tokens[column]):
            raise self._error_at(
                len(words) - 2, "expected ALTER TABLE t ALTER [COLUMN] c DROP STORED"
            )
        table = self._table_name(2, at)
        return st.AlterColumn(self.text, table, _name(self.tokens[column]), drop_stored=True)

    def _validate_constraint(self) -> st.ValidateConstraint:
        """``ALTER TABLE t VALIDATE CONSTRAINT c`` (sqlglot cannot read it)."""
        at = len(self.words) - 3
        if not _name_like(self.tokens[-1]):
            raise self._error_at(at + 2, "expected a constraint name")
        return st.ValidateConstraint(self.text, self._table_name(2, at), _name(self.tokens[-1]))

    def _reset_storage_params(self) -> st.AlterTableActions:
        """``ALTER TABLE t RESET (schema_locked)`` (sqlglot cannot read it): back to the
        default of a table created as feedkv creates them, unlocked (CockroachDB resets
        to its session's create_table_with_schema_locked, which feedkv's tables are
        created as off); another storage parameter is refused."""
        words = self.words
        at = words.index("RESET")
        names = words[at + 2 : -1]
        if words[at + 1 : at + 2] != ["("] or not names:
            raise self._error_at(at + 1, "expected RESET (storage_parameter, ...)")
        for name in names[::2]:
            if name.lower() != "schema_locked":
                raise SQLError("0A000", f"ALTER TABLE ... RESET ({name.lower()}) is not supported")
        if any(sep != "," for sep in names[1::2]):
            raise self._error_at(at + 3, "expected , between storage parameters")
        return st.AlterTableActions(self.text, self._table_name(2, at), ())

    def _configure_zone(self) -> st.ConfigureZone:
        words = self.words
        at = words.index("CONFIGURE")
        table: st.TableName | None = None
        if words[1] == "RANGE":
            if words[2:at] != ["DEFAULT"]:
                raise SQLError(
                    "0A000",
                    f"feedkv has one named range zone, RANGE default; not {self.text!r}",
                )
        else:
            table = self._table_name(2, at)
        if words[at + 1 :] == ["ZONE", "DISCARD"]:
            if table is None:
                raise self._error_at(at + 1, "the default zone cannot be discarded")
            return st.ConfigureZone(self.text, table, (), discard=True)
        if words[at + 1 : at + 3] != ["ZONE", "USING"]:
            raise self._error_at(
                at + 1, "expected CONFIGURE ZONE USING name = value, ... or CONFIGURE ZONE DISCARD"
            )
        settings, end = self._options(at + 3, values=True)
        if end < len(words):
            raise self._error_at(end, "unexpected input after the zone configuration")
        return st.ConfigureZone(self.text, table, tuple(settings))

    def _show_zone(self) -> st.ShowZoneConfiguration:
        words = self.words
        if words[1:] in (["ZONE", "CONFIGURATIONS"], ["ALL", "ZONE", "CONFIGURATIONS"]):
            return st.ShowZoneConfiguration(self.text, every=True)
        if words[1:3] != ["ZONE", "CONFIGURATION"] or words[3:4] not in (["FOR"], ["FROM"]):
            raise self._error_at(1, "expected SHOW ZONE CONFIGURATION FOR RANGE default | TABLE t")
        if words[4:] == ["RANGE", "DEFAULT"] or words[4:] == ["DEFAULT"]:
            return st.ShowZoneConfiguration(self.text)
        if words[4:5] == ["TABLE"] and len(words) > 5:
            return st.ShowZoneConfiguration(self.text, self._table_name(5, len(words)))
        raise self._error_at(4, "expected FOR RANGE default or FOR TABLE t")

    def _split_at(self) -> st.SplitAt:
        words = self.words
        at = words.index("SPLIT")
        if words[1] != "TABLE" or words[at + 1 : at + 2] != ["AT"]:
            raise self._error_at(at, "expected ALTER TABLE t SPLIT AT VALUES (...)")
        table = self._table_name(2, at)
        if at + 2 >= len(words) or words[at + 2] != "VALUES":
            raise self._error_at(at + 2, "expected VALUES after SPLIT AT")
        values_text = self.text[self._pos(self.tokens[at + 2]) :]
        try:
            node = sqlglot.parse_one(values_text, read=_DIALECT)
        except (ParseError, TokenError) as exc:
            raise SQLError("42601", f"syntax error in SPLIT AT: {_first_line(exc)}") from None
        if not isinstance(node, exp.Values):
            raise self._error_at(at + 2, "expected VALUES (...), (...)")
        rows = tuple(tuple(row.expressions) for row in node.expressions)
        return st.SplitAt(self.text, table, rows)

    def _relocate(self) -> st.Relocate:
        words = self.words
        at = words.index("RELOCATE")
        if words[1] != "TABLE":
            raise self._error_at(at, "expected ALTER TABLE t RELOCATE [LEASE] VALUES (...)")
        table = self._table_name(2, at)
        values = at + 1
        lease = words[values : values + 1] == ["LEASE"]
        values += lease
        if values >= len(words) or words[values] != "VALUES":
            raise self._error_at(values, "expected VALUES after RELOCATE [LEASE]")
        values_text = self.text[self._pos(self.tokens[values]) :]
        try:
            node = sqlglot.parse_one(values_text, read=_DIALECT)
        except (ParseError, TokenError) as exc:
            raise SQLError("42601", f"syntax error in RELOCATE: {_first_line(exc)}") from None
        if not isinstance(node, exp.Values):
            raise self._error_at(values, "expected VALUES (...), (...)")
        rows = tuple(tuple(row.expressions) for row in node.expressions)
        return st.Relocate(self.text, table, rows, lease)

    def _changefeed(self) -> st.CreateChangefeed:
        words = self.words
        sinkless = words[0] == "EXPERIMENTAL"
        i = 2
        name = None
        if i < len(words) and words[i] not in ("FOR", "INTO", "WITH", "AS"):
            if sinkless:
                raise self._error_at(
                    i, "a sinkless changefeed has no name; use CREATE CHANGEFEED <name> ... INTO"
                )
            name, i = self._changefeed_name(i)
            if i >= len(words) or words[i] not in ("FOR", "INTO", "WITH", "AS"):
                raise self._error_at(
                    i,
                    "expected FOR TABLE <name>, INTO, WITH or AS SELECT after the name",
                )
        targets: list[st.ChangefeedTarget] = []
        database = None
        if words[i : i + 2] == ["FOR", "DATABASE"]:
            if not self._target_name(i + 2):
                raise self._error_at(i + 2, "expected a database name after FOR DATABASE")
            database = _name(self.tokens[i + 2])
            i += 3
        elif i < len(words) and words[i] == "FOR":
            targets, i = self._targets(i + 1)
        sink = None
        if i < len(words) and words[i] == "INTO":
            if sinkless:
                raise self._error_at(
                    i, "EXPERIMENTAL CHANGEFEED has no sink; use CREATE CHANGEFEED"
                )
            if i + 1 >= len(words) or self.tokens[i + 1].token_type is not TokenType.STRING:
                raise self._error_at(i + 1, "expected the sink URI as a string after INTO")
            sink = self.tokens[i + 1].text
            i += 2
        options: list[tuple[str, str | None]] = []
        if i < len(words) and words[i] == "WITH":
            options, i = self._changefeed_options(i + 1)
        query = None
        if i < len(words) and words[i] == "AS":
            if targets or database is not None:
                raise self._error_at(i, "a changefeed has either FOR targets or AS SELECT")
            query = self._changefeed_query(i + 1)
            targets.append(st.ChangefeedTarget(query.table))  # type: ignore[arg-type]
            i = len(words)
        if i < len(words):
            raise self._error_at(i, "unexpected input after the changefeed's options")
        if not targets and database is None:
            raise self._error_at(2, "expected FOR TABLE <name> or AS SELECT ... FROM <table>")
        return st.CreateChangefeed(
            self.text, tuple(targets), sink, tuple(options), query, name, database
        )

    def _maintenance(self) -> st.Maintenance:
        """``VACUUM [(options)] [FULL] [FREEZE] [VERBOSE] [ANALYZE] [t [(columns)], ...]``
        or ``ANALYZE [VERBOSE] [t [(columns)], ...]``. NB: read from the text, as sqlglot
        takes everything after VACUUM for one string."""
        found = _MAINTENANCE.match(self.text)
        if found is None:
            raise SQLError(
                "42601",
                f"syntax error: expected {self.words[0]} [options] [table [(columns)], ...]",
            )
        action: Literal["VACUUM", "ANALYZE"] = (
            "VACUUM" if found["action"].upper() == "VACUUM" else "ANALYZE"
        )
        tables = tuple(
            _table_name_of([_unquote(part) for part in _NAME_PART.findall(table["name"])])
            for table in _MAINTAINED_TABLE.finditer(found["tables"] or "")
        )
        return st.Maintenance(self.text, action, tables)

    def _import_into(self) -> st.ImportInto:
        """``IMPORT INTO t [(c, ...)] CSV DATA ('uri', ...) [WITH name [= value], ...]``."""
        words, tokens = self.words, self.tokens
        if words[1:2] != ["INTO"]:
            raise SQLError(
                "0A000",
                "only IMPORT INTO t [(columns)] CSV DATA ('file:///...') is supported; "
                "create the table first",
            )
        i = 2
        stop = i
        while stop < len(words) and words[stop] not in _IMPORT_TABLE_END:
            stop += 1
        table = self._table_name(i, stop)
        i = stop
        columns: tuple[str, ...] | None = None
        if i < len(words) and words[i] == "(":
            names: list[str] = []
            i += 1
            while True:
                token = tokens[i] if i < len(words) else None
                if token is None or not (
                    token.token_type in _NAME_TOKENS or token.text.isidentifier()
                ):
                    raise self._error_at(i, "expected a column name")
                names.append(_name(token))
                i += 1
                if i < len(words) and words[i] == ",":
                    i += 1
                    continue
                if i < len(words) and words[i] == ")":
                    i += 1
                    break
                raise self._error_at(i, "expected , or ) after a column name")
            columns = tuple(names)
        if words[i : i + 2] != ["CSV", "DATA"]:
            if i < len(words) and words[i] in ("AVRO", "DELIMITED", "PGDUMP", "MYSQLDUMP"):
                raise SQLError("0A000", f"IMPORT INTO reads CSV DATA only, not {words[i]}")
            raise self._error_at(i, "expected CSV DATA ('uri', ...)")
        i += 2
        if i >= len(words) or words[i] != "(":
            raise self._error_at(i, "expected ( and the file URIs after CSV DATA")
        i += 1
        uris: list[str] = []
        while True:
            token = tokens[i] if i < len(words) else None
            if token is None or token.token_type is not TokenType.STRING:
                raise self._error_at(i, "expected a file URI as a string")
            uris.append(token.text)
            i += 1
            if i < len(words) and words[i] == ",":
                i += 1
                continue
            if i < len(words) and words[i] == ")":
                i += 1
                break
            raise self._error_at(i, "expected , or ) after a file URI")
        options: list[tuple[str, str | None]] = []
        if i < len(words) and words[i] == "WITH":
            options, i = self._options(i + 1, values=True)
        if i < len(words):
            raise self._error_at(i, "unexpected input after IMPORT INTO's options")
        return st.ImportInto(self.text, table, columns, tuple(uris), tuple(options))

    def _targets(self, i: int) -> tuple[list[st.ChangefeedTarget], int]:
        """``[TABLE] t [FAMILY f], ...`` from token ``i``; returns the targets and the
        index after them."""
        words = self.words
        targets = []
        while True:
            if i < len(words) and words[i] == "TABLE":
                i += 1
            stop = i
            while stop < len(words) and words[stop] not in _TARGET_END:
                stop += 1
            table = self._table_name(i, stop)
            family = None
            i = stop
            if i < len(words) and words[i] == "FAMILY":
                if i + 1 >= len(words) or words[i + 1] in _TARGET_END:
                    raise self._error_at(i + 1, "expected a family name after FAMILY")
                family = _name(self.tokens[i + 1])
                i += 2
            partition = None
            if i < len(words) and words[i] == "PARTITION":
                if not self._target_name(i + 1):
                    raise self._error_at(i + 1, "expected a partition name after PARTITION")
                partition = _name(self.tokens[i + 1])
                i += 2
            start = end = None
            if i < len(words) and words[i] == "VALUES":
                if words[i + 1 : i + 2] != ["FROM"]:
                    raise self._error_at(i + 1, "expected VALUES FROM (...) TO (...)")
                start, i = self._key_tuple(i + 2)
                if words[i : i + 1] != ["TO"]:
                    raise self._error_at(i, "expected TO (...) after VALUES FROM (...)")
                end, i = self._key_tuple(i + 1)
            if partition is not None and start is not None:
                raise self._error_at(i, "a target takes PARTITION or VALUES FROM, not both")
            targets.append(st.ChangefeedTarget(table, family, start, end, partition))
            if i < len(words) and words[i] == ",":
                i += 1
                continue
            return targets, i

    def _key_tuple(self, i: int) -> tuple[tuple[exp.Expr, ...], int]:
        """``(value, ...)`` from token ``i``: its expressions and the index after it."""
        tokens = self.tokens
        if i >= len(tokens) or tokens[i].token_type is not TokenType.L_PAREN:
            raise self._error_at(i, "expected a parenthesized list of primary key values")
        depth, j = 0, i
        while j < len(tokens):
            depth += tokens[j].token_type is TokenType.L_PAREN
            depth -= tokens[j].token_type is TokenType.R_PAREN
            if depth == 0:
                break
            j += 1
        text = self.text[self._pos(tokens[i]) : self._pos(tokens[j]) + 1]
        try:
            node = sqlglot.parse_one("VALUES " + text, read=_DIALECT)
        except (ParseError, TokenError) as exc:
            raise SQLError("42601", f"syntax error in VALUES FROM/TO: {_first_line(exc)}") from None
        if not isinstance(node, exp.Values) or len(node.expressions) != 1:
            raise self._error_at(i, "expected one parenthesized list of primary key values")
        return tuple(node.expressions[0].expressions), j + 1

    def _changefeed_options(self, i: int) -> tuple[list[tuple[str, str | None]], int]:
        """A changefeed's options from token ``i``, after WITH: ``name [= value], ...``
        or, as CockroachDB writes them in a job's description, ``OPTIONS (...)``."""
        words = self.words
        if not (i + 1 < len(words) and words[i] == "OPTIONS" and words[i + 1] == "("):
            return self._options(i, values=True)
        options, i = self._options(i + 2, values=True)
        if i >= len(words) or words[i] != ")":
            raise self._error_at(i, "expected ) after the changefeed's options")
        return options, i + 1

    def _options(self, i: int, *, values: bool) -> tuple[list[tuple[str, str | None]], int]:
        """``name [= value], ...`` from token ``i`` (names alone unless ``values``);
        returns the options and the index after them."""
        words = self.words
        options: list[tuple[str, str | None]] = []
        while True:
            token = self.tokens[i] if i < len(words) else None
            if token is None or not token.text.isidentifier() or words[i] in _TARGET_END:
                raise self._error_at(i, "expected an option name")
            name = token.text.lower()
            i += 1
            # NB: a dotted name, as zone settings have (gc.ttlseconds)
            while i + 1 < len(words) and words[i] == "." and self.tokens[i + 1].text.isidentifier():
                name = f"{name}.{self.tokens[i + 1].text.lower()}"
                i += 2
            value = None
            if values and i < len(words) and words[i] == "=":
                # NB: a negative number is read as one, for the option to refuse by name
                sign = "-" if words[i + 1 : i + 2] == ["-"] else ""
                at = i + 1 + len(sign)
                value_token = self.tokens[at] if at < len(words) else None
                if (
                    value_token is None
                    or not (
                        value_token.token_type in _OPTION_VALUES or value_token.text.isidentifier()
                    )
                    or (sign and value_token.token_type is not TokenType.NUMBER)
                ):
                    raise self._error_at(i + 1, f"option {name} takes a string, a number or a word")
                value = sign + value_token.text
                i = at + 1
            options.append((name, value))
            if i < len(words) and words[i] == ",":
                i += 1
                continue
            return options, i

    def _job_ref_or_param(self, i: int) -> tuple[int | None, exp.Parameter | None]:
        """A job id at token ``i``, or a placeholder (``$n``, two tokens) standing for
        one: ``(job id, None)`` or ``(None, placeholder)``."""
        token = self.tokens[i] if i < len(self.words) else None
        if token is not None and token.token_type is TokenType.PARAMETER:
            number = self.tokens[i + 1] if i + 1 < len(self.words) else None
            if number is None or not number.text.isdigit():
                raise self._error_at(i, "expected a job id or a placeholder ($1)")
            return None, exp.Parameter(this=exp.Literal.number(int(number.text)))
        return self._job_id(i), None

    def _job_id(self, i: int) -> int:
        token = self.tokens[i] if i < len(self.words) else None
        if token is None or token.token_type is not TokenType.NUMBER or not token.text.isdigit():
            raise self._error_at(i, "expected a job id (an integer)")
        job_id = int(token.text)
        if job_id > INT64_MAX:
            raise SQLError("22003", f"job id {token.text} is out of range for type INT8")
        return job_id

    def _target_name(self, i: int) -> bool:
        """Whether token ``i`` is a name in a changefeed statement: not a string, nor a
        word that ends a target unless quoted."""
        if i >= len(self.words) or not _name_like(self.tokens[i]):
            return False
        quoted = self.tokens[i].token_type is TokenType.IDENTIFIER
        return quoted or self.words[i] not in _TARGET_END

    def _changefeed_name(self, i: int) -> tuple[st.TableName, int]:
        """A changefeed's name (``name`` or ``db.name``) from token ``i``; returns it and
        the index after it."""
        words = self.words
        parts: list[str] = []
        while True:
            if not self._target_name(i):
                raise self._error_at(i, "expected a changefeed name (name or database.name)")
            parts.append(_name(self.tokens[i]))
            i += 1
            if len(parts) < 2 and i < len(words) and words[i] == ".":
                i += 1
                continue
            return st.TableName(parts[-1], parts[0] if len(parts) == 2 else None), i

    def _changefeed_ref(self, i: int) -> tuple[int | None, st.TableName | None, int]:
        """A job id or a changefeed's name from token ``i``: ``(job_id, name, index
        after it)``, one of the two set."""
        token = self.tokens[i] if i < len(self.words) else None
        if token is None or token.token_type is TokenType.NUMBER or self.words[i] == "-":
            return self._job_id(i), None, i + 1
        if not _name_like(token):
            raise self._error_at(i, "expected a job id or a changefeed name")
        name, end = self._changefeed_name(i)
        return None, name, end

    def _job_control(self) -> st.ControlJob:
        words = self.words
        action = words[0].lower()
        if words[1:] == ["ALL", "CHANGEFEED", "JOBS"] and action != "drop":
            return st.ControlJob(self.text, action, None, every=True)
        if words[1:2] == ["JOBS"] and action != "drop":
            return st.ControlJob(self.text, action, None, query=self._jobs_query(2))
        if words[1:2] == ["CHANGEFEED"]:
            job_id, name, end = self._changefeed_ref(2)
            if len(words) > end:
                raise self._error_at(end, "unexpected input after the changefeed")
            return st.ControlJob(self.text, action, job_id, name)
        if words[1:2] != ["JOB"]:
            raise self._error_at(
                1, f"expected {words[0]} JOB <job id> or {words[0]} CHANGEFEED <name>"
            )
        job_id, param = self._job_ref_or_param(2)
        at = 4 if param is not None else 3  # after the id
        if words[at : at + 3] == ["WITH", "REASON", "="] and action == "pause":
            # CockroachDB keeps the reason where nothing shows it; it is taken and dropped
            if len(words) != at + 4 or self.tokens[at + 3].token_type is not TokenType.STRING:
                raise self._error_at(at + 3, "expected the reason as a string")
        elif len(words) > at:
            raise self._error_at(at, "unexpected input after the job id")
        return st.ControlJob(self.text, action, job_id, job_param=param)

    def _cancel_activity(self) -> st.CancelActivity:
        """``CANCEL QUERY | SESSION [IF EXISTS] <id>`` or ``CANCEL QUERIES | SESSIONS [IF
        EXISTS] <query>``."""
        words = self.words
        sessions = words[1].startswith("SESSION")
        at = 2
        if_exists = words[2:4] == ["IF", "EXISTS"]
        at += 2 * if_exists
        if at >= len(words):
            raise self._error_at(at, f"expected the {words[1].lower()} to cancel")
        if words[1] in ("QUERIES", "SESSIONS"):
            return st.CancelActivity(
                self.text, sessions, None, self._jobs_query(at), if_exists=if_exists
            )
        start = self._pos(self.tokens[at])
        return st.CancelActivity(
            self.text, sessions, parse_expression(self.text[start:]), if_exists=if_exists
        )

    def _jobs_query(self, first: int) -> str:
        """The SELECT from token ``first`` to the end, bare or in parentheses, that picks
        the jobs of ``PAUSE | RESUME | CANCEL JOBS`` and ``SHOW JOBS``: its text, checked
        to parse as a query."""
        words = self.words
        last = len(words)
        if first < last and words[first] == "(":
            if words[-1] != ")":
                raise self._error_at(last, "expected ) after the query")
            first, last = first + 1, last - 1
        if first >= last or words[first] not in ("SELECT", "WITH", "VALUES", "("):
            raise self._error_at(first, "expected a query (SELECT ...) that gives job ids")
        start = self._pos(self.tokens[first])
        end = self._pos(self.tokens[last - 1]) + len(self._raw(last - 1))
        text = self.text[start:end]
        query = _Statement(text, self.tokens[first:last], self.offset + start).parse()
        if not isinstance(query, st.Query):
            raise self._error_at(first, "expected a query (SELECT ...) that gives job ids")
        return text

    def _alter_changefeed(self) -> st.AlterChangefeed:
        words = self.words
        job_id, name, i = self._changefeed_ref(2)
        add: list[st.ChangefeedTarget] = []
        drop: list[st.ChangefeedTarget] = []
        set_options: list[tuple[str, str | None]] = []
        unset: list[str] = []
        scanned: list[st.ChangefeedTarget] = []
        sink = None
        if i >= len(words):
            raise self._error_at(i, "expected ADD, DROP, SET or UNSET (or INTO '<sink>')")
        while i < len(words):
            command = words[i]
            if command == "INTO":
                if sink is not None:
                    raise self._error_at(i, "ALTER CHANGEFEED takes one INTO '<sink>'")
                if i + 1 >= len(words) or self.tokens[i + 1].token_type is not TokenType.STRING:
                    raise self._error_at(i + 1, "expected the sink URI as a string after INTO")
                sink = self.tokens[i + 1].text
                i += 2
            elif command == "ADD" or command == "DROP":
                targets, i = self._targets(i + 1)
                (add if command == "ADD" else drop).extend(targets)
                if i < len(words) and words[i] == "WITH":
                    if command == "DROP":
                        raise self._error_at(i, "ALTER CHANGEFEED ... DROP takes no options")
                    options, i = self._options(i + 1, values=True)
                    if _scans_added(options):
                        scanned.extend(targets)
            elif command == "SET":
                options, i = self._options(i + 1, values=True)
                set_options.extend(options)
            elif command == "UNSET":
                names, i = self._options(i + 1, values=False)
                unset.extend(name for name, _ in names)
            else:
                raise self._error_at(i, "expected ADD, DROP, SET or UNSET (or INTO '<sink>')")
        return st.AlterChangefeed(
            self.text,
            job_id,
            tuple(add),
            tuple(drop),
            tuple(set_options),
            tuple(unset),
            name,
            sink,
            tuple(scanned),
        )

    def _changefeed_query(self, first: int) -> st.Select:
        if first >= len(self.words) or self.words[first] != "SELECT":
            raise self._error_at(first, "expected SELECT after AS")
        start = self._pos(self.tokens[first])
        text = self.text[start:]
        select = _Statement(text, self.tokens[first:], self.offset + start).parse()
        if not isinstance(select, st.Select) or not isinstance(select.table, st.TableName):
            raise self._error_at(first, "a changefeed query selects from one table")
        if select.joins or select.ctes or select.subqueries:
            raise SQLError(
                "0A000", "a changefeed query reads one table, without joins or subqueries"
            )
        if select.order_by or select.limit is not None or select.offset is not None:
            raise SQLError(
                "0A000", "a changefeed query takes no ORDER BY, LIMIT or OFFSET: it never ends"
            )
        if select.distinct or select.distinct_on or select.group_by or select.having is not None:
            raise SQLError(
                "0A000",
                "a changefeed query takes no DISTINCT, GROUP BY or HAVING: it sees one "
                "change at a time",
            )
        if select.as_of is not None:
            raise SQLError("0A000", "a changefeed query takes no AS OF SYSTEM TIME; use cursor")
        return select


def _scans_added(options: list[tuple[str, str | None]]) -> bool:
    """Whether ``ADD ... WITH <options>`` scans the added tables: CockroachDB takes
    ``initial_scan`` (``= 'yes'`` or ``'no'``) and ``no_initial_scan`` there; an added
    table is not scanned unless asked."""
    scan = False
    for name, value in options:
        if name == "initial_scan" and (value is None or value.lower() in ("yes", "no")):
            scan = value is None or value.lower() == "yes"
        elif name == "no_initial_scan" and value is None:
            scan = False
        else:
            raise SQLError(
                "22023",
                f"ALTER CHANGEFEED ... ADD takes initial_scan ('yes' or 'no') or "
                f"no_initial_scan, not {name}" + (f" = {value!r}" if value is not None else ""),
            )
    return scan


_IMPORT_TABLE_END = {"(", "CSV", "AVRO", "DELIMITED", "PGDUMP", "MYSQLDUMP", "DATA"}
_TARGET_END = {
    ",",
    "FAMILY",
    "PARTITION",
    "VALUES",
    "INTO",
    "WITH",
    "AS",
    "ADD",
    "DROP",
    "SET",
    "UNSET",
}
_OPTION_VALUES = {TokenType.STRING, TokenType.NUMBER, TokenType.VAR, TokenType.IDENTIFIER}
_CLAUSE_WORDS = {"WHERE", "ORDER", "LIMIT", "OFFSET", "GROUP", "HAVING", "FOR"}
# String constants ('...', E'...' (sqlglot's byte string), $$...$$), whose token's text
# is the string's value.
_STRING_TOKENS = {
    TokenType.STRING,
    TokenType.BYTE_STRING,
    TokenType.HEREDOC_STRING,
    TokenType.NATIONAL_STRING,
}
_LITERALS = {
    TokenType.STRING,
    TokenType.IDENTIFIER,
    TokenType.NUMBER,
    TokenType.BIT_STRING,
    TokenType.BYTE_STRING,
    TokenType.HEX_STRING,
    TokenType.HEREDOC_STRING,
    TokenType.NATIONAL_STRING,
    TokenType.RAW_STRING,
    TokenType.UNICODE_STRING,
}
# The first words of statements feedkv runs, refuses by name (0A000) or leaves to
# sqlglot to name; any other first word is a syntax error.
_STATEMENT_WORDS = {
    "ABORT", "ALTER", "ANALYZE", "BACKUP", "BEGIN", "CALL", "CANCEL", "CLOSE", "COMMENT",
    "COMMIT", "COPY", "CREATE", "DEALLOCATE", "DECLARE", "DELETE", "DISCARD", "DO", "DROP",
    "END", "EXECUTE", "EXPERIMENTAL", "EXPLAIN", "EXPORT", "FETCH", "GRANT", "IMPORT",
    "INSERT", "LISTEN", "LOCK", "MERGE", "MOVE", "NOTIFY", "PAUSE", "PREPARE", "REFRESH", "REINDEX",
    "RELEASE", "RESET", "RESTORE", "RESUME", "REVOKE", "ROLLBACK", "SAVEPOINT", "SELECT",
    "SET", "SHOW", "START", "TABLE", "TRUNCATE", "UPDATE", "UPSERT", "USE", "VACUUM",
    "VALUES", "WITH",
}  # fmt: skip
# SHOW statements that are no session variable.
_SHOW_STATEMENTS = {
    "COLUMNS",
    "INDEXES",
    "INDEX",
    "KEYS",
    "TABLES",
    "DATABASES",
    "CREATE",
    "RANGES",
    "PARTITIONS",
    "CHANGEFEED",
    "JOBS",
    "JOB",
    "GRANTS",
    "USERS",
    "ROLES",
    # CockroachDB's, not there yet: 0A000 (not "unrecognized configuration parameter")
    "REGIONS",
    "SUPER",
    "SCHEMAS",
    "SEQUENCES",
    "TYPES",
    "FUNCTIONS",
    "CONSTRAINTS",
    "STATISTICS",
    "SCHEDULES",
    "SCHEDULE",
    "BACKUP",
    "BACKUPS",
    "TRACE",
    "TRANSACTIONS",
    "SYSTEM",
    "DEFAULT",
}
_UNSUPPORTED_STATEMENTS = {
    "ALTER DATABASE": "ALTER DATABASE is not supported",
    "CREATE TEMP": "temporary tables are not supported (CREATE TEMP TABLE)",
    "CREATE TEMPORARY": "temporary tables are not supported (CREATE TEMPORARY TABLE)",
}
# Words a statement cannot end on, nor follow with the start of another clause.
_NEEDS_MORE = {
    "SELECT", "FROM", "WHERE", "SET", "VALUES", "INTO", "BY", "GROUP", "ORDER", "LIMIT",
    "OFFSET", "HAVING", "AS", "ON", "CONFLICT", "AND", "OR", "IN", "IS", "LIKE", "BETWEEN",
    "JOIN", "TABLE", "COLUMN", "ADD", "DROP", "ALTER", "CREATE", "DATABASE", "RETURNING",
    "SHOW", "TRUNCATE", "WITH", "DISTINCT", "TO",
}  # fmt: skip
_LIST_STARTS = {"SELECT", "SET", "VALUES"}
# What ends a JOIN's table and conditions (besides another JOIN).
_AFTER_JOIN = {
    "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "UNION", "INTERSECT",
    "EXCEPT", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "RETURNING",
}  # fmt: skip
_CLAUSE_STARTS = {"FROM", "WHERE", "GROUP", "ORDER", "LIMIT", "OFFSET", "HAVING", "RETURNING"}
_DEFAULT_VALUES = ["DEFAULT", "VALUES"]
_MAX_NESTING = 1000  # parentheses; each level costs sqlglot's parser about 21 frames
_SERIAL_TYPES = {"SERIAL", "SERIAL2", "SERIAL4", "SERIAL8", "SMALLSERIAL", "BIGSERIAL"}
_ALTER_ACTIONS = {"ADD", "DROP", "ALTER", "RENAME", "SPLIT", "SET", "RELOCATE"}
_ALTER_TYPE_ACTIONS = {"ADD", "DROP", "RENAME", "SET", "OWNER"}
_ALTER_SEQUENCE_OPTIONS = {
    "INCREMENT", "MINVALUE", "MAXVALUE", "START", "RESTART", "CACHE", "NO", "CYCLE", "OWNED",
    "AS",
}  # fmt: skip
_COLUMN_WORDS = {
    "NOT",
    "NULL",
    "DEFAULT",
    "PRIMARY",
    "CONSTRAINT",
    "UNIQUE",
    "CHECK",
    "REFERENCES",
    ",",
    ")",
}


def _list_value(node: exp.Expr) -> tuple[exp.Expr, ...]:
    """One value of ``VALUES IN (...)``: ``v``, ``(v)`` or a tuple ``(a, b)``."""
    if isinstance(node, exp.Tuple):
        return tuple(node.expressions)
    if isinstance(node, exp.Paren):
        return (node.this,)
    return (node,)


def _name_like(token: Token) -> bool:
    """Whether ``token`` may be a name (an identifier, or a word that is not a string)."""
    return token.token_type in _NAME_TOKENS or (
        token.token_type is not TokenType.STRING and token.text.isidentifier()
    )


def _table_name_of(parts: list[str]) -> st.TableName:
    if len(parts) == 1:
        return st.TableName(parts[0])
    if len(parts) == 2:
        database = None if parts[0] == "public" else parts[0]
        return st.TableName(parts[1], database)
    if parts[1] != "public":
        raise SQLError("3F000", f"schema {parts[1]!r} does not exist; only 'public' is supported")
    return st.TableName(parts[2], parts[0])


def _virtual_source(
    name: str, alias: str | None
) -> st.ShowSource | st.StatementSource | st.TableName:
    """``crdb_internal.<name>``, or ``[SHOW ...]`` (see :func:`_show_sources`); the
    tables of the cluster's nodes stay names (:mod:`feedkv.sql.crdb_internal` reads
    them)."""
    if name in crdb_internal.TABLES:
        return st.TableName(name, _VIRTUAL_SCHEMA)
    if name == "jobs":
        return st.ShowSource(
            st.ShowChangefeedJobs("crdb_internal.jobs", shape="crdb_internal"), alias or "jobs"
        )
    if name.startswith("[") and name.endswith("]"):
        statements = parse(name[1:-1])
        if len(statements) == 1 and isinstance(statements[0], st.ShowChangefeedJobs):
            return st.ShowSource(statements[0], alias or "")
        if len(statements) == 1 and isinstance(statements[0], st.Insert | st.Update | st.Delete):
            if statements[0].returning is None:
                raise SQLError(
                    "0A000",
                    f'statement source "{name[1:-1]}" does not return any columns; '
                    "add RETURNING to read its rows",
                )
            return st.StatementSource(statements[0], alias or "")
        if len(statements) == 1 and isinstance(statements[0], st.SourceShow):
            return st.StatementSource(statements[0], alias or "")
        raise SQLError(
            "0A000",
            f"{name} cannot be read as a table: feedkv reads writes with RETURNING, "
            "[SHOW JOBS], [SHOW CHANGEFEED JOBS], [SHOW JOB <id>], and SHOW TABLES, "
            "DATABASES, USERS, CREATE, COLUMNS, INDEXES, GRANTS, RANGES and PARTITIONS so",
        )
    raise SQLError(
        "42P01",
        f'relation "{_VIRTUAL_SCHEMA}.{name}" does not exist; feedkv has '
        + ", ".join(f"{_VIRTUAL_SCHEMA}.{t}" for t in sorted({"jobs", *crdb_internal.TABLES})),
    )


def _table_of(node: exp.Expr) -> st.TableName:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        # A table function (generate_series(...)) or a subquery is valid SQL feedkv lacks;
        # a name of too many parts is no name at all.
        code = (
            "42601" if isinstance(node, exp.Table) and isinstance(node.this, exp.Dot) else "0A000"
        )
        raise SQLError(code, f"expected a table name, got {node.sql(dialect=_DIALECT)!r}")
    parts = [
        _ident(part)
        for part in (node.args.get("catalog"), node.args.get("db"), node.this)
        if part is not None and _ident(part)
    ]
    return _table_name_of(parts)


@dataclass
class _Converter:
    """Turns sqlglot's tree into a statement dataclass, refusing what feedkv lacks."""

    text: str
    upsert: bool
    families: list[st.FamilySpec]
    column_families: dict[str, tuple[str | None, bool, bool]]
    as_of: exp.Expr | None
    returning: tuple[exp.Expr, ...] | None  # cut out of the text (a DELETE's)
    view_body: str | None = None  # a CREATE VIEW's query as written
    not_visible: set[str] = field(default_factory=set)  # columns declared NOT VISIBLE
    # A CREATE TABLE's indexes, CHECKs and foreign keys, as its elements are converted.
    indexes: list[st.IndexSpec] = field(default_factory=list)
    checks: list[st.CheckSpec] = field(default_factory=list)
    foreign_keys: list[st.ForeignKeySpec] = field(default_factory=list)
    partitioning: st.Partitioning | None = None  # cut out of a CREATE TABLE
    descending_keys: set[str] = field(default_factory=set)  # PRIMARY KEY (a DESC)

    def convert(self, node: exp.Expr) -> st.Statement:
        if self.as_of is not None and not isinstance(node, exp.Select):
            raise SQLError("0A000", "AS OF SYSTEM TIME is only supported in SELECT")
        handler = getattr(self, f"_{type(node).__name__.lower()}", None)
        if isinstance(node, exp.SetOperation):
            handler = self._set_operation
        elif isinstance(node, exp.Subquery | exp.Values):
            handler = self._query
        if handler is None:
            raise _unsupported(node)
        _check_column_names(node)
        result: st.Statement = handler(node)
        return result

    def _transaction(self, node: exp.Transaction) -> st.Statement:
        return st.Begin(self.text)

    def _commit(self, node: exp.Commit) -> st.Statement:
        return st.Commit(self.text)

    def _rollback(self, node: exp.Rollback) -> st.Statement:
        if node.args.get("savepoint"):
            raise SQLError("0A000", "savepoints are not supported")
        return st.Rollback(self.text)

    def _create(self, node: exp.Create) -> st.Statement:
        kind = str(node.args.get("kind") or "").upper()
        if_not_exists = bool(node.args.get("exists"))
        if kind == "DATABASE":
            return st.CreateDatabase(self.text, _ident(node.this.this), if_not_exists)
        if kind == "VIEW":
            return self._create_view(node)
        if kind == "SEQUENCE":
            return self._create_sequence(node)
        if kind == "INDEX":
            return self._create_index(node)
        if kind == "TYPE":
            return self._create_enum(node)
        if kind != "TABLE" or node.args.get("replace"):
            raise _unsupported(node)
        if node.expression is not None:
            name, named = self._named_columns(node.this)
            _refuse_unhandled(node, {"this", "kind", "expression", "exists"})
            return st.CreateTableAs(
                self.text, name, named, self._query(node.expression), if_not_exists
            )
        schema = node.this
        if not isinstance(schema, exp.Schema):
            raise SQLError("42601", "CREATE TABLE needs a column list: CREATE TABLE t (a INT, ...)")
        table = _table_of(schema.this)
        columns: list[st.ColumnSpec] = []
        primary_key: tuple[str, ...] | None = None
        for element in schema.expressions:
            if isinstance(element, exp.ColumnDef):
                columns.append(self._column(element, in_create=True))
            elif isinstance(element, exp.PrimaryKey):
                if primary_key is not None:
                    raise SQLError("42P16", f"multiple primary keys for table {table.name!r}")
                primary_key = tuple(_ident(e) for e in element.expressions)
            elif isinstance(element, exp.Constraint):
                inner = element.expressions[0] if len(element.expressions) == 1 else None
                if isinstance(inner, exp.PrimaryKey):
                    if primary_key is not None:
                        raise SQLError("42P16", f"multiple primary keys for table {table.name!r}")
                    primary_key = tuple(_ident(e) for e in inner.expressions)
                elif inner is None or not self._table_constraint(inner, _ident(element.this)):
                    raise _unsupported(element, "table constraint")
            elif not self._table_constraint(element, None):
                raise _unsupported(element, "table element")
        descending = tuple(name in self.descending_keys for name in primary_key or ())
        return st.CreateTable(
            self.text,
            table,
            tuple(columns),
            primary_key,
            tuple(self.families),
            if_not_exists,
            tuple(self.indexes),
            tuple(self.checks),
            tuple(self.foreign_keys),
            partitioning=self.partitioning,
            storage_params=_storage_params(node),
            primary_descending=descending,
        )

    def _table_constraint(self, node: exp.Expr, name: str | None) -> bool:
        """A UNIQUE, CHECK or FOREIGN KEY element of CREATE TABLE (``False``: none)."""
        if isinstance(node, exp.UniqueColumnConstraint) and isinstance(node.this, exp.Schema):
            _refuse_unhandled(node, {"this", "nulls", "include"})
            columns = tuple(_ident(c) for c in node.this.expressions)
            self.indexes.append(st.IndexSpec(name, columns, unique=True, constraint=True))
            return True
        if isinstance(node, exp.CheckColumnConstraint):
            _refuse_unhandled(node, {"this", "enforced"})
            self.checks.append(st.CheckSpec(name, node.this))
            return True
        if isinstance(node, exp.ForeignKey):
            _refuse_unhandled(node, {"expressions", "reference"})
            columns = tuple(_ident(c) for c in node.expressions)
            self.foreign_keys.append(self._reference(node.args["reference"], name, columns))
            return True
        return False

    def _reference(
        self, node: exp.Expr, name: str | None, columns: tuple[str, ...]
    ) -> st.ForeignKeySpec:
        """``REFERENCES t [(columns)] [ON DELETE action] [ON UPDATE action]``, each
        action one of :data:`REFERENTIAL_ACTIONS`."""
        if not isinstance(node, exp.Reference):
            raise _unsupported(node, "foreign key")
        _refuse_unhandled(node, {"this", "options"})
        actions: dict[str, str] = {}
        for option in node.args.get("options") or ():
            text = " ".join(str(option).upper().split())
            event, _, action = text.removeprefix("ON ").partition(" ")
            if not text.startswith("ON ") or event not in ("DELETE", "UPDATE"):
                raise SQLError("0A000", f"foreign key option {text} is not supported")
            if action not in st.REFERENTIAL_ACTIONS:
                raise SQLError("42601", f"syntax error: unknown action ON {event} {action}")
            if event in actions:
                raise SQLError("42601", f"syntax error: ON {event} given twice")
            actions[event] = action
        target = node.this
        referenced: tuple[str, ...] = ()
        if isinstance(target, exp.Schema):
            referenced = tuple(_ident(c) for c in target.expressions)
            target = target.this
        return st.ForeignKeySpec(
            name,
            columns,
            _table_of(target),
            referenced,
            actions.get("DELETE", "NO ACTION"),
            actions.get("UPDATE", "NO ACTION"),
        )

    def _create_enum(self, node: exp.Create) -> st.CreateEnum:
        _refuse_unhandled(node, {"this", "kind", "exists", "expression"})
        body = node.expression
        if not isinstance(body, exp.DataType) or body.this != exp.DataType.Type.ENUM:
            raise SQLError("0A000", "CREATE TYPE supports AS ENUM ('label', ...) only")
        labels = []
        for label in body.expressions:
            if not isinstance(label, exp.Literal) or not label.is_string:
                raise SQLError("42601", "syntax error: an enum's labels are string constants")
            labels.append(label.name)
        if len(set(labels)) != len(labels):
            raise SQLError("42710", "enum label is listed more than once")
        return st.CreateEnum(
            self.text, _table_of(node.this), tuple(labels), bool(node.args.get("exists"))
        )

    def _create_index(self, node: exp.Create) -> st.CreateIndex:
        _refuse_unhandled(node, {"this", "kind", "exists", "unique"})
        index = node.this
        if not isinstance(index, exp.Index):
            raise _unsupported(node)
        _refuse_unhandled(index, {"this", "table", "params"})
        params = index.args.get("params")
        if params is None:
            raise SQLError("42601", "syntax error: CREATE INDEX needs ON table (columns)")
        using = params.args.get("using")
        method = using.name.lower() if isinstance(using, exp.Expr) else None
        if method in ("gin", "gist"):
            raise _no_inverted_index(f"CREATE INDEX ... USING {method.upper()}")
        if method == "btree":  # NB: the one kind of index feedkv builds, as written
            params.set("using", None)
        _refuse_unhandled(params, {"columns", "include", "with_storage", "where"})
        where = params.args.get("where")
        columns = []
        descending = []
        expressions: list[exp.Expr | None] = []
        for column in params.args.get("columns") or ():
            inner = column.this if isinstance(column, exp.Ordered) else column
            descending.append(isinstance(column, exp.Ordered) and bool(column.args.get("desc")))
            if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Identifier):
                columns.append(_ident(inner))
                expressions.append(None)
            else:
                columns.append("")
                expressions.append(inner.unnest() if isinstance(inner, exp.Paren) else inner)
        storing = tuple(_ident(c) for c in params.args.get("include") or ())
        name = _ident(index.this) if index.this is not None else None
        spec = st.IndexSpec(
            name,
            tuple(columns),
            bool(node.args.get("unique")),
            storing,
            descending=tuple(descending),
            predicate=where.this if where is not None else None,
            expressions=tuple(expressions) if any(e is not None for e in expressions) else (),
        )
        return st.CreateIndex(
            self.text, _table_of(index.args["table"]), spec, bool(node.args.get("exists"))
        )

    def _create_view(self, node: exp.Create) -> st.CreateView:
        _refuse_unhandled(node, {"this", "kind", "expression", "exists", "replace"})
        if self.view_body is None or node.expression is None:
            raise SQLError("42601", "syntax error: CREATE VIEW needs AS followed by a query")
        name, columns = self._named_columns(node.this)
        return st.CreateView(
            self.text,
            name,
            columns,
            self._query(node.expression),
            self.view_body,
            bool(node.args.get("exists")),
            bool(node.args.get("replace")),
        )

    def _create_sequence(self, node: exp.Create) -> st.CreateSequence:
        _refuse_unhandled(node, {"this", "kind", "exists", "properties"})
        settings: dict[str, int] = {}
        owned_by = None
        properties = node.args.get("properties")
        for prop in properties.expressions if properties is not None else ():
            if not isinstance(prop, exp.SequenceProperties):
                raise _unsupported(prop, "sequence option")
            settings.update(_sequence_settings(prop))
            owned_by = _sequence_owner(prop) or owned_by
        return st.CreateSequence(
            self.text,
            _table_of(node.this),
            settings.get("increment", 1),
            settings.get("minvalue"),
            settings.get("maxvalue"),
            settings.get("start"),
            bool(node.args.get("exists")),
            owned_by,
        )

    def _named_columns(self, node: exp.Expr) -> tuple[st.TableName, tuple[str, ...]]:
        """``name`` or ``name (a, b)`` before a CREATE VIEW's or CREATE TABLE's AS."""
        if not isinstance(node, exp.Schema):
            return _table_of(node), ()
        columns = []
        for column in node.expressions:
            if not isinstance(column, exp.Identifier):
                raise SQLError(
                    "42601", "syntax error: before AS, only column names may be listed (no types)"
                )
            columns.append(_ident(column))
        if len(set(columns)) != len(columns):
            raise SQLError("42701", "a column name is listed more than once")
        return _table_of(node.this), tuple(columns)

    def _column(self, node: exp.ColumnDef, *, in_create: bool = False) -> st.ColumnSpec:
        name = _ident(node.this)
        kind = node.args.get("kind")
        if not isinstance(kind, exp.DataType):
            raise SQLError("42601", f"column {name!r} needs a type")
        nullable = True
        default = None
        primary_key = False
        computed, virtual = None, False
        identity = None
        declared: set[bool] = set()  # NULL (True) and NOT NULL (False) as written
        for constraint in node.args.get("constraints") or []:
            inner = constraint.args.get("kind")
            if isinstance(inner, exp.NotNullColumnConstraint):
                nullable = bool(inner.args.get("allow_null"))
                declared.add(nullable)
            elif isinstance(inner, exp.DefaultColumnConstraint):
                default = inner.this
            elif isinstance(inner, exp.PrimaryKeyColumnConstraint):
                primary_key = True
                nullable = False
            elif isinstance(inner, exp.ComputedColumnConstraint):
                computed, virtual = _computed_constraint(name, inner)
            elif (
                isinstance(inner, exp.GeneratedAsIdentityColumnConstraint)
                and inner.args.get("expression") is None
            ):
                identity = _identity(name, inner)
            elif in_create and self._column_constraint(name, constraint):
                pass
            else:
                raise _unsupported(constraint, "column constraint")
        ctype_name = kind.sql(dialect=_DIALECT).upper()
        if ctype_name in _SERIAL_TYPES:
            # NB: as CockroachDB's default serial_normalization (rowid): an INT8 whose
            # default is unique_rowid(), not a sequence
            if default is not None:
                raise SQLError("42601", f'column "{name}" of type {ctype_name} takes no DEFAULT')
            default = parse_expression("unique_rowid()")
            nullable = False
            kind = exp.DataType.build("BIGINT")
        if len(declared) == 2 or (primary_key and True in declared):
            raise SQLError("42601", f'conflicting NULL/NOT NULL declarations for column "{name}"')
        family, create, if_not_exists = self.column_families.get(name, (None, False, False))
        return st.ColumnSpec(
            name,
            column_type(kind),
            nullable,
            default,
            primary_key,
            family,
            create,
            computed,
            virtual,
            name in self.not_visible,
            if_not_exists,
            identity,
        )

    def _column_constraint(self, column: str, node: exp.Expr) -> bool:
        """A column's UNIQUE, CHECK or REFERENCES in CREATE TABLE."""
        inner = node.args.get("kind")
        name = _ident(node.this) if node.this is not None else None
        if isinstance(inner, exp.UniqueColumnConstraint):
            _refuse_unhandled(inner, {"nulls", "include"})
            self.indexes.append(st.IndexSpec(name, (column,), unique=True, constraint=True))
            return True
        if isinstance(inner, exp.CheckColumnConstraint):
            _refuse_unhandled(inner, {"this", "enforced"})
            self.checks.append(st.CheckSpec(name, inner.this, column))
            return True
        if isinstance(inner, exp.Reference):
            self.foreign_keys.append(self._reference(inner, name, (column,)))
            return True
        return False

    def _drop(self, node: exp.Drop) -> st.Statement:
        kind = str(node.args.get("kind") or "").upper()
        if_exists = bool(node.args.get("exists"))
        tables = node.args.get("tables") or [node.this]
        if kind == "DATABASE":
            return st.DropDatabase(
                self.text, _ident(tables[0].this), if_exists, bool(node.args.get("cascade"))
            )
        cascade = bool(node.args.get("cascade"))
        if kind == "TABLE":
            return st.DropTable(self.text, tuple(_table_of(t) for t in tables), if_exists, cascade)
        if kind == "SEQUENCE" and not cascade:
            return st.DropSequence(self.text, tuple(_table_of(t) for t in tables), if_exists)
        if kind == "VIEW" and not node.args.get("materialized"):
            return st.DropView(self.text, tuple(_table_of(t) for t in tables), if_exists, cascade)
        raise _unsupported(node)

    def _alter(self, node: exp.Alter) -> st.Statement:
        kind = str(node.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            raise _unsupported(node)
        table = _table_of(node.this)
        actions = node.args.get("actions") or []
        if len(actions) > 1 and kind == "TABLE":
            return self._alter_table_actions(table, actions)
        if len(actions) != 1:
            raise SQLError("0A000", f"ALTER {kind} supports one change at a time")
        action = actions[0]
        if_exists = bool(node.args.get("exists"))
        renamed_to = [
            o for o in node.args.get("options") or [] if isinstance(o, exp.ToTableProperty)
        ]
        if isinstance(action, exp.AlterRename) and renamed_to and kind == "TABLE":
            # NB: RENAME b TO d (COLUMN left out, as CockroachDB and PostgreSQL allow)
            # renames column b; sqlglot reads it as a table rename with a TO option
            return st.RenameColumn(
                self.text,
                table,
                _ident(action.this.this),
                _ident(renamed_to[0].this.this),
                if_exists,
            )
        if isinstance(action, exp.AlterRename):
            if renamed_to:
                raise _unsupported(node)
            return st.RenameTable(
                self.text, table, _table_of(action.this), if_exists, view=kind == "VIEW"
            )
        if kind == "VIEW":
            raise _unsupported(action, "ALTER VIEW action")
        if isinstance(action, exp.AddConstraint):
            primary_key = _primary_key_constraint(action)
            if primary_key is not None:
                return st.AddPrimaryKey(self.text, table, *primary_key)
            for element in action.expressions:
                if isinstance(element, exp.Constraint) and len(element.expressions) == 1:
                    done = self._table_constraint(element.expressions[0], _ident(element.this))
                else:
                    done = self._table_constraint(element, None)
                if not done:
                    raise _unsupported(element, "constraint")
            return st.AddConstraint(
                self.text,
                table,
                tuple(self.indexes),
                tuple(self.checks),
                tuple(self.foreign_keys),
            )
        if isinstance(action, exp.Drop) and str(action.args.get("kind")).upper() == "CONSTRAINT":
            dropped = action.args.get("tables") or [action.this]
            if len(dropped) != 1 or action.args.get("cascade"):
                raise SQLError("0A000", "ALTER TABLE drops one constraint at a time (no CASCADE)")
            return st.DropConstraint(
                self.text, table, _ident(dropped[0].this), bool(action.args.get("exists"))
            )
        if isinstance(action, exp.RenameColumn):
            _refuse_unhandled(action, {"this", "to", "exists"})
            return st.RenameColumn(
                self.text,
                table,
                _ident(action.this),
                _ident(action.args["to"]),
                bool(action.args.get("exists")) or if_exists,
            )
        if isinstance(action, exp.AlterColumn):
            return self._alter_column(table, action)
        if isinstance(action, exp.ColumnDef):
            added = self._added_column(table, action)
            return added[0] if len(added) == 1 else st.AlterTableActions(self.text, table, added)
        if isinstance(action, exp.Drop) and str(action.args.get("kind")).upper() == "COLUMN":
            dropped = action.args.get("tables") or [action.this]
            if len(dropped) != 1:
                raise SQLError("0A000", "ALTER TABLE drops one column at a time")
            return st.DropColumn(
                self.text, table, _ident(dropped[0]), bool(action.args.get("exists"))
            )
        if isinstance(action, exp.AlterSet) and _unlocks_schema(action):
            # NB: feedkv never locks a table's schema: schema_locked is false already
            return st.AlterTableActions(self.text, table, ())
        raise _unsupported(action, "ALTER TABLE action")

    def _alter_table_actions(
        self, table: st.TableName, actions: list[exp.Expr]
    ) -> st.AlterTableActions:
        """Several changes to columns in one ALTER TABLE, as CockroachDB runs them: one
        after the other, in one transaction."""
        out: list[
            st.AddColumn | st.AddConstraint | st.DropColumn | st.AlterColumn | st.RenameColumn
        ] = []
        for action in actions:
            if isinstance(action, exp.ColumnDef):
                out.extend(self._added_column(table, action))
            elif isinstance(action, exp.Drop) and str(action.args.get("kind")).upper() == "COLUMN":
                dropped = action.args.get("tables") or [action.this]
                if_exists = bool(action.args.get("exists"))
                out.extend(st.DropColumn(self.text, table, _ident(d), if_exists) for d in dropped)
            elif isinstance(action, exp.AlterColumn):
                out.append(self._alter_column(table, action))
            elif isinstance(action, exp.RenameColumn):
                _refuse_unhandled(action, {"this", "to", "exists"})
                out.append(
                    st.RenameColumn(
                        self.text,
                        table,
                        _ident(action.this),
                        _ident(action.args["to"]),
                        bool(action.args.get("exists")),
                    )
                )
            else:
                raise SQLError(
                    "0A000",
                    "ALTER TABLE with several changes takes only ADD, DROP, ALTER and RENAME "
                    "COLUMN; run the others as statements of their own",
                )
        return st.AlterTableActions(self.text, table, tuple(out))

    def _added_column(
        self, table: st.TableName, action: exp.ColumnDef
    ) -> tuple[st.AddColumn] | tuple[st.AddColumn, st.AddConstraint]:
        """``ADD COLUMN``, then its UNIQUE, CHECK and REFERENCES as an ``ADD CONSTRAINT``
        (as CockroachDB adds them: in the statement's transaction, the rows there
        checked against them)."""
        before = len(self.indexes), len(self.checks), len(self.foreign_keys)
        column = self._column(action, in_create=True)
        if column.primary_key:
            raise SQLError("0A000", "cannot add a PRIMARY KEY column to an existing table")
        if_not_exists = bool(action.args.get("exists"))
        added = st.AddColumn(self.text, table, column, if_not_exists)
        indexes = tuple(self.indexes[before[0] :])
        checks = tuple(self.checks[before[1] :])
        foreign_keys = tuple(self.foreign_keys[before[2] :])
        if not (indexes or checks or foreign_keys):
            return (added,)
        if if_not_exists:  # NB: the column there may not be this one: which would it bind?
            raise SQLError(
                "0A000",
                "ADD COLUMN IF NOT EXISTS takes no UNIQUE, CHECK or REFERENCES; add the "
                "constraint with ALTER TABLE ... ADD CONSTRAINT",
            )
        return added, st.AddConstraint(self.text, table, indexes, checks, foreign_keys)

    def _alter_column(self, table: st.TableName, action: exp.AlterColumn) -> st.AlterColumn:
        """``ALTER COLUMN c SET DEFAULT e | DROP DEFAULT | SET NOT NULL | DROP NOT NULL |
        [SET DATA] TYPE t [USING e]``."""
        _refuse_unhandled(
            action, {"this", "dtype", "using", "collate", "default", "drop", "allow_null"}
        )
        if action.args.get("collate"):
            raise SQLError("0A000", "ALTER COLUMN ... COLLATE is not supported")
        column = _ident(action.this)
        dtype = action.args.get("dtype")
        if dtype is not None:
            using = action.args.get("using")
            return st.AlterColumn(
                self.text,
                table,
                column,
                new_type=column_type(dtype),
                using=using if isinstance(using, exp.Expr) else None,
            )
        if action.args.get("default") is not None:
            return st.AlterColumn(self.text, table, column, default=action.args["default"])
        allow_null = action.args.get("allow_null")
        if action.args.get("drop"):
            if allow_null:
                return st.AlterColumn(self.text, table, column, not_null=False)
            return st.AlterColumn(self.text, table, column, drop_default=True)
        if allow_null is False:
            return st.AlterColumn(self.text, table, column, not_null=True)
        raise _unsupported(action, "ALTER COLUMN action")

    def _truncatetable(self, node: exp.TruncateTable) -> st.Statement:
        option = str(node.args.get("option") or "").upper()
        if option not in ("", "CASCADE", "RESTRICT"):
            raise _unsupported(node, f"TRUNCATE ... {option}")
        return st.Truncate(
            self.text, tuple(_table_of(t) for t in node.expressions), option == "CASCADE"
        )

    def _insert(self, node: exp.Insert) -> st.Statement:
        target = node.this
        columns: tuple[str, ...] | None = None
        if isinstance(target, exp.Schema):
            columns = tuple(_ident(c) for c in target.expressions)
            target = target.this
        table = _table_of(target)
        _refuse_unhandled(node, {"this", "expression", "conflict", "returning", "with_", "default"})
        overriding = node.this.args.get("overriding")
        source = node.expression
        if node.args.get("default"):
            # DEFAULT VALUES: one row of every column's default (no columns named)
            if columns is not None:
                raise SQLError("42601", "syntax error: DEFAULT VALUES takes no column list")
            source = exp.Values(expressions=[exp.Tuple(expressions=[])])
            columns = ()
        while isinstance(source, exp.Subquery) and not source.alias:
            source = source.this  # INSERT INTO t (SELECT ...): the query in parentheses
        query: st.Query | None = None
        subqueries: tuple[tuple[exp.Expr, st.Query], ...] = ()
        ctes = self._ctes(node)
        if ctes and not isinstance(source, exp.Select | exp.SetOperation):
            raise SQLError("0A000", "WITH is supported before INSERT ... SELECT only")
        if isinstance(source, exp.Select | exp.SetOperation):
            query = self._query(source)
            # NB: WITH before INSERT names rows for its SELECT, which runs them first
            query = dataclasses.replace(query, ctes=ctes + query.ctes)
            rows: tuple[tuple[exp.Expr, ...], ...] = ()
        elif isinstance(source, exp.Values):
            rows = tuple(
                tuple(row.expressions) if isinstance(row, exp.Tuple) else (row,)
                for row in source.expressions
            )
            subqueries = tuple(self._subqueries(source))
        else:
            raise _unsupported(source, "INSERT source (VALUES or one table's SELECT)")
        on_conflict: str | None = None
        sets: tuple[tuple[str, exp.Expr], ...] = ()
        conflict_target: tuple[str, ...] = ()
        conflict_where: exp.Expr | None = None
        conflict_constraint: str | None = None
        conflict = node.args.get("conflict")
        if conflict is not None:
            if self.upsert:
                raise SQLError("42601", "UPSERT does not take an ON CONFLICT clause")
            _refuse_unhandled(
                conflict, {"expressions", "action", "conflict_keys", "where", "constraint"}
            )
            conflict_target = tuple(_ident(k) for k in conflict.args.get("conflict_keys") or ())
            constraint = conflict.args.get("constraint")
            conflict_constraint = _ident(constraint) if constraint is not None else None
            action = str(conflict.args.get("action") or "").upper()
            if "NOTHING" in action:
                on_conflict = "nothing"
            elif "UPDATE" in action:
                on_conflict = "update"
                sets = _assignments(conflict.expressions, table)
                conflict_where = _where(conflict)
                if not conflict.args.get("conflict_keys") and conflict_constraint is None:
                    raise SQLError(
                        "42601",
                        "ON CONFLICT DO UPDATE needs the conflict columns: ON CONFLICT (pk)",
                    )
            else:
                raise _unsupported(conflict, "ON CONFLICT action")
        returning = node.args.get("returning")
        if returning is not None and returning.find(exp.Subquery, exp.Exists, exp.Select):
            raise SQLError("0A000", "subqueries are not supported in INSERT's RETURNING")
        conflict_subqueries = tuple(self._subqueries(conflict)) if conflict is not None else ()
        return st.Insert(
            self.text,
            table,
            columns,
            rows,
            on_conflict,
            sets,
            _returning(node),
            self.upsert,
            conflict_target,
            conflict_where,
            query,
            subqueries,
            conflict_constraint,
            conflict_subqueries,
            overriding,
            _index_and_alias(target)[1] if isinstance(target, exp.Table) else None,
        )

    def _update(self, node: exp.Update) -> st.Statement:
        _refuse_unhandled(
            node, {"this", "expressions", "where", "returning", "order", "limit", "from_", "from"}
        )
        table = _table_of(node.this)
        _expand_row_subqueries(node)
        sets = _assignments(node.expressions, table)
        order, limit = _mutation_order(node, "UPDATE")
        from_ = node.args.get("from_") or node.args.get("from")
        joins = self._mutation_joins([from_.this] if from_ is not None else [], "UPDATE ... FROM")
        if joins and (order or limit is not None):
            raise SQLError("0A000", "UPDATE ... FROM takes no ORDER BY or LIMIT")
        return st.Update(
            self.text,
            table,
            sets,
            _where(node),
            _returning(node),
            order,
            limit,
            _index_and_alias(node.this)[1],
            joins,
            tuple(self._subqueries(node)),
        )

    def _delete(self, node: exp.Delete) -> st.Statement:
        _refuse_unhandled(node, {"this", "where", "returning", "order", "limit", "using"})
        table = _table_of(node.this)
        order, limit = _mutation_order(node, "DELETE")
        returning = self.returning if self.returning is not None else _returning(node)
        joins = self._mutation_joins(node.args.get("using") or [], "DELETE ... USING")
        alias = _index_and_alias(node.this)[1]
        subqueries = [*self._subqueries(node)]
        if self.returning is not None:  # cut out of the text, so not under ``node``
            subqueries += [q for item in self.returning for q in self._subqueries(item)]
        return st.Delete(
            self.text, table, _where(node), returning, order, limit, alias, joins, tuple(subqueries)
        )

    def _mutation_joins(self, sources: list[exp.Expr], what: str) -> tuple[st.Join, ...]:
        """UPDATE ... FROM's or DELETE ... USING's sources as joins after the table:
        each listed source a CROSS JOIN, then the joins written after it. A RIGHT or
        FULL join among them is refused: joined after the table, its unpaired rows
        would pair with no row of the table, where PostgreSQL pairs them with each."""
        joins: list[st.Join] = []
        for source in sources:
            nested = source.args.get("joins") or []
            if nested:
                source = source.copy()
                source.set("joins", None)
            table, index, alias = self._source(source)
            joins.append(st.Join(table, alias, index, "cross"))
            for node in nested:
                join = self._join(node)
                if join.side in ("right", "full"):
                    raise SQLError("0A000", f"{join.side.upper()} JOIN in {what} is not supported")
                joins.append(join)
        return tuple(joins)

    def _query(self, node: exp.Expr) -> st.Query:
        """A query inside a statement (a subquery, a derived table, a CTE's body, a set
        operation's side): a SELECT or a set operation, maybe in parentheses."""
        converter = _Converter(self.text, False, [], {}, None, None)
        if isinstance(node, exp.Subquery) and node.args.get("alias") is None:
            _refuse_unhandled(node, {"this", "order", "limit", "offset"})
            return converter._query(_outer_clauses_moved_in(node))
        if isinstance(node, exp.Select):
            return converter._select(node)
        if isinstance(node, exp.SetOperation):
            return converter._set_operation(node)
        if isinstance(node, exp.Values):
            _refuse_unhandled(node, {"expressions", "alias"})
            rows = tuple(
                tuple(row.expressions) if isinstance(row, exp.Tuple) else (row,)
                for row in node.expressions
            )
            return st.Values(self.text, rows)
        raise _unsupported(node, "query")

    def _set_operation(self, node: exp.SetOperation) -> st.SetOperation:
        _refuse_unhandled(
            node, {"this", "expression", "distinct", "order", "limit", "offset", "with_"}
        )
        op = type(node).__name__.lower()
        if op not in ("union", "intersect", "except"):
            raise _unsupported(node, "set operation")
        for side in (node.this, node.expression):
            inner = side.this if isinstance(side, exp.Subquery) else side
            if isinstance(inner, exp.Select) and (locks := inner.args.get("locks")):
                strength = _row_lock(locks[0]).strength
                raise SQLError("0A000", f"{strength} is not allowed with {op.upper()}")
            if isinstance(side, exp.Select) and any(
                side.args.get(clause) for clause in ("order", "limit", "offset")
            ):
                raise SQLError(
                    "42601",
                    f"syntax error: ORDER BY, LIMIT or OFFSET before {op.upper()} applies to "
                    "its side only in parentheses: (SELECT ... LIMIT n)",
                )
        offset = node.args.get("offset")
        return st.SetOperation(
            self.text,
            op,  # type: ignore[arg-type]
            not node.args.get("distinct"),
            self._query(node.this),
            self._query(node.expression),
            _order_by(node),
            _limit(node),
            offset.expression if offset is not None else None,
            self._ctes(node),
        )

    def _ctes(self, node: exp.Expr) -> tuple[st.Cte, ...]:
        """``WITH name [(columns)] AS (query), ...``, each name once."""
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is None:
            return ()
        _refuse_unhandled(with_, {"expressions", "recursive"})
        ctes: list[st.Cte] = []
        for cte in with_.expressions:
            _refuse_unhandled(cte, {"this", "alias"})
            name = _ident(cte.args["alias"].this)
            if any(c.name == name for c in ctes):
                raise SQLError("42712", f'WITH query name "{name}" specified more than once')
            columns = tuple(_ident(c) for c in cte.args["alias"].columns)
            if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete):
                if node.parent is not None:  # NB: in a subquery, a view, INSERT's SELECT
                    raise SQLError(
                        "0A000",
                        "WITH clause containing a data-modifying statement must be at the "
                        "top level",
                    )
                ctes.append(st.Cte(name, self._modifying_cte(cte.this), columns))
                continue
            query = self._query(cte.this)
            recursive = bool(with_.args.get("recursive")) and _names_table(cte.this, name)
            if recursive:
                _check_recursive(name, cte.this, query)
            ctes.append(st.Cte(name, query, columns, recursive))
        return tuple(ctes)

    def _modifying_cte(
        self, node: exp.Insert | exp.Update | exp.Delete
    ) -> st.Insert | st.Update | st.Delete:
        """A data-modifying CTE's statement (``WITH x AS (UPDATE ... RETURNING ...)``)."""
        if node.args.get("with_") or node.args.get("with"):
            raise SQLError("0A000", "unimplemented: WITH inside a data-modifying WITH query")
        statement = (
            self._insert(node)
            if isinstance(node, exp.Insert)
            else self._update(node)
            if isinstance(node, exp.Update)
            else self._delete(node)
        )
        if not isinstance(statement, st.Insert | st.Update | st.Delete):
            raise _unsupported(node, "WITH query")
        return statement

    def _scalar_source(self, node: exp.Table) -> tuple[st.Source, str | None, str | None]:
        """``FROM f(args) [AS alias [(column)]]`` of a scalar function, as CockroachDB
        reads it (pgjdbc's ``{call f(?)}`` sends ``select * from f($1) as result``): one
        row of its value, in a column named by the alias's column list, else the alias,
        else as the SELECT item ``f(args)`` would be (a derived table of that SELECT)."""
        _refuse_unhandled(node, {"this", "alias"})
        alias = node.args.get("alias")
        name = _ident(alias.this) if alias is not None and alias.this is not None else ""
        columns = tuple(_ident(c) for c in alias.columns) if alias is not None else ()
        item = node.this.copy()
        _refuse_aggregates_in_from(item)
        query = self._query(exp.select(exp.alias_(item, name) if name and not columns else item))
        return st.Derived(query, name, columns), None, name or None

    def _source(self, node: exp.Expr) -> tuple[st.Source, str | None, str | None]:
        """A FROM or JOIN source, its index hint and its alias: a table (or a CTE's
        name) or a subquery in parentheses."""
        if isinstance(node, exp.Subquery | exp.Values):
            alias = node.args.get("alias")
            name = _ident(alias.this) if alias is not None and alias.this is not None else ""
            columns = tuple(_ident(c) for c in alias.columns) if alias is not None else ()
            if isinstance(node, exp.Values):
                query = self._query(node)
            else:
                _refuse_unhandled(node, {"this", "alias"})
                query = self._query(node.this)
            return st.Derived(query, name, columns), None, name or None
        if isinstance(node, exp.Lateral):
            # NB: a function in FROM is LATERAL whether it says so or not (JoinPlan)
            _refuse_unhandled(node, {"this", "alias", "ordinality", "view", "outer"})
            inner, alias = node.this, node.args.get("alias")
            if isinstance(inner, exp.Unnest) and not inner.args.get("alias"):
                unnest = inner.copy()
                unnest.set("alias", alias)
                return self._source(unnest)
            if isinstance(inner, exp.ExplodingGenerateSeries):
                ordinal = node.args.get("ordinality")
                return self._source(exp.Table(this=inner.copy(), alias=alias, ordinality=ordinal))
            if isinstance(inner, exp.Subquery) and not inner.args.get("alias"):
                _refuse_unhandled(inner, {"this"})
                name = _ident(alias.this) if alias is not None and alias.this is not None else ""
                columns = tuple(_ident(c) for c in alias.columns) if alias is not None else ()
                derived = st.Derived(self._query(inner.this), name, columns, lateral=True)
                return derived, None, name or None
            raise SQLError(
                "0A000",
                "LATERAL is supported for a subquery, unnest() and generate_series() only",
            )
        if isinstance(node, exp.Table) and node.args.get("rows_from"):
            return self._rows_from(node)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.ExplodingGenerateSeries):
            series = node.this
            _refuse_unhandled(series, {"start", "end", "step"})
            alias = node.args.get("alias")
            name = _ident(alias.this) if alias is not None and alias.this is not None else ""
            named = [_ident(c) for c in alias.columns] if alias is not None else []
            ordinal = bool(node.args.get("ordinality"))
            if len(named) > 1 + ordinal:
                raise SQLError(
                    "42P10",
                    f'table "{name}" has {1 + ordinal} columns available but {len(named)} '
                    "columns specified",
                )
            column = named[0] if named else name or "generate_series"
            ordinality = (named[1] if len(named) > 1 else "ordinality") if ordinal else None
            args = tuple(
                series.args[k] for k in ("start", "end", "step") if series.args.get(k) is not None
            )
            source = st.Series(args, name or "generate_series", column, ordinality)
            return source, None, name or None
        if isinstance(node, exp.Unnest):
            return _unnest(node), None, None
        if (
            isinstance(node, exp.Table)
            and isinstance(node.this, exp.Explode)
            and (not node.this.expressions or node.this.meta.get("srf"))
        ):  # NB: jsonb_object_keys(j) in FROM, an unnest of its keys (_ARRAY_SRFS, _EACH_SRFS)
            name = _srf_name(node.this)
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
            if name in _SRF_COLUMNS and not alias.columns:
                alias = alias.copy()
                alias.set("columns", [exp.to_identifier(c) for c in _SRF_COLUMNS[name]])
            arrays = [node.this.this.copy(), *(e.copy() for e in node.this.expressions)]
            # NB: Unnest holds the ordinality's column as its offset, out of the list
            ordinality = node.args.get("ordinality") or None
            if ordinality and len(alias.columns) > len(arrays):
                alias = alias.copy()
                ordinality = alias.columns[len(arrays)].pop()
            return self._source(exp.Unnest(expressions=arrays, alias=alias, offset=ordinality))
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Func | exp.Window):
            return self._scalar_source(node)
        if not isinstance(node, exp.Table):
            raise SQLError("0A000", "SELECT reads from tables and subqueries (no functions)")
        index, alias = _index_and_alias(node)
        table = _table_of(node)
        if table.database == _VIRTUAL_SCHEMA:
            return _virtual_source(table.name, alias), index, alias
        return table, index, alias

    def _rows_from(self, node: exp.Table) -> tuple[st.Source, str | None, str | None]:
        """``ROWS FROM (f(...), g(...)) [AS alias [(columns)]]`` of set-returning
        functions (:class:`~feedkv.sql.statements.RowsFrom`)."""
        _refuse_unhandled(node, {"rows_from", "alias"})
        functions = []
        for item in node.args["rows_from"]:
            function, _index, _alias = self._source(item)
            if not isinstance(function, st.Series | st.Unnest):
                raise SQLError(
                    "0A000", "ROWS FROM reads the functions generate_series() and unnest() only"
                )
            functions.append(function)
        alias = node.args.get("alias")
        name = _ident(alias.this) if alias is not None and alias.this is not None else ""
        columns = tuple(_ident(c) for c in alias.columns) if alias is not None else ()
        return st.RowsFrom(tuple(functions), name, columns), None, name or None

    def _join(self, node: exp.Expr) -> st.Join:
        """One JOIN of a SELECT's FROM clause (a comma is a CROSS JOIN)."""
        if not isinstance(node, exp.Join):
            raise _unsupported(node, "FROM clause")
        _refuse_unhandled(node, {"this", "on", "side", "kind", "using", "method"})
        table, index, alias = self._source(node.this)
        side_word = str(node.args.get("side") or "").upper()
        kind = str(node.args.get("kind") or "").upper()
        method = str(node.args.get("method") or "").upper()
        if method not in ("", "NATURAL"):
            raise SQLError("0A000", f"{method} JOIN is not supported")
        natural = method == "NATURAL"
        on = node.args.get("on")
        using = tuple(_ident(c) for c in node.args.get("using") or ())
        if natural and (on is not None or using):
            raise SQLError("42601", "syntax error: NATURAL JOIN takes no ON or USING")
        if on is not None and using:
            raise SQLError("42601", "syntax error: a JOIN takes ON or USING, not both")
        if len(set(using)) != len(using):
            raise SQLError("42701", "a column is named more than once in USING")
        side: str
        if kind == "CROSS" or (
            not side_word and not kind and on is None and not using and not natural
        ):
            if on is not None or using:
                raise SQLError("42601", "syntax error: CROSS JOIN takes no ON or USING")
            side = "cross"
        else:
            if on is None and not using and not natural:
                raise SQLError("42601", f"syntax error: {side_word or kind or 'a'} JOIN needs ON")
            side = _JOIN_SIDES.get(side_word, "inner")
        return st.Join(table, alias, index, side, on, using, natural)  # type: ignore[arg-type]

    def _select(self, node: exp.Select) -> st.Select:
        _name_windows(node)
        _refuse_unhandled(
            node,
            {"expressions", "from_", "from", "where", "order", "limit", "offset", "kind"}
            | {"group", "having", "distinct", "joins", "with_", "with", "locks"},
        )
        if node.args.get("kind"):
            raise _unsupported(node)
        for ordered_set in list(node.find_all(exp.WithinGroup)):
            ordered_set.replace(_ordered_set(ordered_set))
        for found in list(node.find_all(exp.Filter)):
            found.replace(_filtered(found))
        _series_after_aggregation(node)
        subqueries = tuple(self._subqueries(node))
        table: st.Source | None = None
        alias: str | None = None
        index: str | None = None
        joins: tuple[st.Join, ...] = ()
        ctes = self._ctes(node)
        _series_in_lockstep(node)
        _series_as_source(node)
        _series_as_lateral(node)
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is not None:
            table, index, alias = self._source(from_.this)
            joins = tuple(self._join(join) for join in node.args.get("joins") or ())
        elif self.as_of is not None:
            raise SQLError("0A000", "AS OF SYSTEM TIME needs a FROM clause")
        offset = node.args.get("offset")
        group = node.args.get("group")
        if group is not None:
            _refuse_unhandled(group, {"expressions"})  # ROLLUP, CUBE, GROUPING SETS
        having = node.args.get("having")
        distinct = node.args.get("distinct")
        on = distinct.args.get("on") if distinct is not None else None
        if on is not None and not isinstance(on, exp.Tuple):
            on = exp.Tuple(expressions=[on])
        return st.Select(
            self.text,
            table,
            alias,
            tuple(node.expressions),
            _where(node),
            _order_by(node),
            _limit(node),
            offset.expression if offset is not None else None,
            self.as_of,
            index,
            tuple(_grouping_keys(group.expressions)) if group is not None else (),
            having.this if having is not None else None,
            distinct is not None and on is None,
            tuple(on.expressions) if on is not None else (),
            joins,
            subqueries,
            ctes,
            tuple(_row_lock(lock) for lock in node.args.get("locks") or ()),
        )

    def _subqueries(self, node: exp.Expr) -> Iterator[tuple[exp.Expr, st.Query]]:
        """The subqueries of ``node``'s own expressions (a subquery's own are its), each
        converted: a scalar or IN subquery, or EXISTS. ``node`` is a SELECT, an UPDATE,
        a DELETE, or (for a DELETE's RETURNING, cut out of the text) an expression."""
        for found in node.find_all(exp.Subquery, exp.Exists, exp.Any, exp.All):
            parent = found.parent
            while parent is not None and not isinstance(parent, _QUERY_NODES):
                parent = parent.parent
            if (parent is not None and parent is not node) or _is_from_source(found):
                continue  # a subquery's own, or a FROM source (a derived table)
            if isinstance(found.parent, exp.Any | exp.All):
                continue  # ANY's or ALL's, which runs it
            inner = found.this
            if isinstance(found, exp.Any | exp.All) and not isinstance(
                inner, exp.Subquery | exp.Select
            ):
                continue  # ANY (ARRAY[...]): refused when compiled
            yield found, self._query(inner)


def _row_lock(node: exp.Expr) -> st.RowLock:
    """A SELECT's ``FOR UPDATE | NO KEY UPDATE | SHARE | KEY SHARE [OF t, ...]
    [NOWAIT | SKIP LOCKED]``."""
    if not isinstance(node, exp.Lock):
        raise _unsupported(node, "locking clause")
    _refuse_unhandled(node, {"update", "expressions", "wait", "key"})
    update, key = bool(node.args.get("update")), bool(node.args.get("key"))
    strength = {
        (True, False): "FOR UPDATE",
        (True, True): "FOR NO KEY UPDATE",
        (False, False): "FOR SHARE",
        (False, True): "FOR KEY SHARE",
    }[update, key]
    wait = node.args.get("wait")
    if wait is not None and not isinstance(wait, bool):
        raise SQLError("42601", f"syntax error: {strength} takes NOWAIT or SKIP LOCKED, not WAIT")
    of = []
    for table in node.expressions:
        if not isinstance(table, exp.Table) or table.args.get("db"):
            raise SQLError("42601", f"{strength} must specify unqualified relation names")
        of.append(_ident(table.this))
    return st.RowLock(strength, update, tuple(of), wait is True, wait is False)


def _names_table(node: exp.Expr, name: str) -> bool:
    """Whether ``node`` reads a table called ``name`` (unqualified: a CTE's name)."""
    return any(
        _ident(table.this) == name and not table.args.get("db")
        for table in node.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier)
    )


def _check_recursive(name: str, node: exp.Expr, query: st.Query) -> None:
    """A recursive CTE is ``non-recursive term UNION [ALL] recursive term``, only the
    second naming the CTE (42P19 otherwise, as PostgreSQL); ORDER BY or LIMIT on it
    is not supported (0A000)."""
    if not isinstance(node, exp.Union) or not isinstance(query, st.SetOperation):
        raise SQLError(
            "42P19",
            f'recursive query "{name}" does not have the form non-recursive-term UNION '
            "[ALL] recursive-term",
        )
    if _names_table(node.this, name):
        raise SQLError(
            "42P19",
            f'recursive reference to query "{name}" must not appear within its non-recursive term',
        )
    if query.order_by or query.limit is not None or query.offset is not None:
        raise SQLError("0A000", "ORDER BY, LIMIT or OFFSET in a recursive query is not supported")


def _name_windows(node: exp.Select) -> None:
    """``WINDOW w AS (...)``: each ``OVER w`` (or ``OVER (w ORDER BY ...)``) of the
    SELECT's own takes w's definition, as PostgreSQL copies it (42P20 where it may not
    override it, 42704 for a name no WINDOW defines)."""
    named: dict[str, exp.Expr] = {}
    for window in node.args.get("windows") or []:
        _refuse_unhandled(window, {"this", "partition_by", "order", "spec"})
        name = _ident(window.this)
        if name in named:
            raise SQLError("42P20", f'window "{name}" is already defined')
        named[name] = window
    node.set("windows", None)
    for call in list(node.find_all(exp.Window)):
        parent = call.parent
        while parent is not None and not isinstance(parent, exp.Select | exp.SetOperation):
            parent = parent.parent
        alias = call.args.get("alias")
        if parent is not node or alias is None:
            continue  # another SELECT's, or a window of its own
        name = _ident(alias)
        base = named.get(name)
        if base is None:
            raise SQLError("42704", f'window "{name}" does not exist')
        if call.args.get("partition_by"):
            raise SQLError("42P20", f'cannot override PARTITION BY clause of window "{name}"')
        if call.args.get("order") and base.args.get("order"):
            raise SQLError("42P20", f'cannot override ORDER BY clause of window "{name}"')
        if (call.args.get("order") or call.args.get("spec")) and base.args.get("spec"):
            raise SQLError("42P20", f'cannot copy window "{name}" because it has a frame clause')
        call.set("alias", None)
        for clause in ("partition_by", "order", "spec"):
            given = base.args.get(clause)
            if given and not call.args.get(clause):
                call.set(
                    clause, [g.copy() for g in given] if isinstance(given, list) else given.copy()
                )


def _check_column_names(node: exp.Expr) -> None:
    """42601 for a column reference sqlglot took that names no column (``t.1``)."""
    for column in node.find_all(exp.Column):
        if not isinstance(column.this, exp.Identifier | exp.Star):
            shown = column.sql(dialect=_DIALECT)
            raise SQLError("42601", f'at or near "{shown}": syntax error')


_JOIN_SIDES = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}


_QUERY_NODES = (exp.Select, exp.SetOperation, exp.Update, exp.Delete)


def _is_from_source(node: exp.Expr) -> bool:
    parent = node.parent
    if isinstance(parent, exp.Lateral):  # ``FROM t, LATERAL (SELECT ...) s``
        parent = parent.parent
    return isinstance(parent, exp.From | exp.Join) or node.arg_key == "using"


_IDENT_TEXT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_TABLE_TEXT = rf"{_IDENT_TEXT}(?:\s*\.\s*{_IDENT_TEXT}){{0,2}}"
_MAINTENANCE = re.compile(
    rf"""^\s*(?P<action>VACUUM|ANALY[SZ]E)
    (?:\s*\([^)]*\))?
    (?:\s+(?:FULL|FREEZE|VERBOSE|ANALY[SZ]E)\b)*
    (?P<tables>\s+{_TABLE_TEXT}(?:\s*\([^)]*\))?(?:\s*,\s*{_TABLE_TEXT}(?:\s*\([^)]*\))?)*)?
    \s*;?\s*$""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
_MAINTAINED_TABLE = re.compile(rf"(?P<name>{_TABLE_TEXT})(?:\s*\([^)]*\))?")
_NAME_PART = re.compile(_IDENT_TEXT)


def _unquote(name: str) -> str:
    """A name as written: quoted keeps its case, unquoted folds to lower case."""
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name.lower()


def _unlocks_schema(action: exp.AlterSet) -> bool:
    """Whether ``ALTER TABLE ... SET (...)`` sets schema_locked = false and nothing else
    (true, which refuses schema changes in CockroachDB, feedkv cannot honour)."""
    settings = action.expressions
    return bool(settings) and all(
        isinstance(e, exp.EQ)
        and isinstance(e.this, exp.Column)
        and e.this.name.lower() == "schema_locked"
        and isinstance(e.expression, exp.Boolean)
        and e.expression.this is False
        for e in settings
    )


def _storage_params(node: exp.Create) -> tuple[str, ...]:
    """The names of a CREATE TABLE's ``WITH (name = value, ...)`` storage parameters."""
    properties = node.args.get("properties")
    names = []
    for prop in properties.expressions if properties is not None else ():
        if not isinstance(prop, exp.Property) or not isinstance(prop.this, exp.Var | str):
            raise SQLError("0A000", f"CREATE TABLE ... {prop.sql()[:40]} is not supported")
        name = str(prop.this if isinstance(prop.this, str) else prop.this.this).lower()
        if name == "schema_locked":
            # CockroachDB's: true refuses schema changes. feedkv never locks a table's
            # schema, so false is what every table is; true it cannot honour.
            value = prop.args.get("value")
            if not (isinstance(value, exp.Boolean) and value.this is False):
                shown = value.sql() if isinstance(value, exp.Expr) else "?"
                raise SQLError(
                    "0A000",
                    f"schema_locked = {shown} is not supported: feedkv never locks a table's "
                    "schema (only schema_locked = false is accepted)",
                )
            continue
        names.append(name)
    return tuple(names)


def _primary_key_constraint(action: exp.AddConstraint) -> tuple[tuple[str, ...], str | None] | None:
    """``ADD [CONSTRAINT name] PRIMARY KEY (columns)`` as ``(columns, name)``; ``None``
    for other constraints."""
    if len(action.expressions) != 1:
        return None
    element, name = action.expressions[0], None
    if isinstance(element, exp.Constraint) and len(element.expressions) == 1:
        element, name = element.expressions[0], _ident(element.this)
    if not isinstance(element, exp.PrimaryKey):
        return None
    return tuple(_ident(e) for e in element.expressions), name


def _computed_constraint(column: str, node: exp.ComputedColumnConstraint) -> tuple[exp.Expr, bool]:
    """``AS (expression) STORED | VIRTUAL``: the expression and whether it is VIRTUAL.
    As in CockroachDB, one of the two keywords must be written."""
    storage = node.args.get("storage")
    if storage is None:
        raise SQLError(
            "42601",
            f'syntax error at column "{column}": use AS ( <expr> ) STORED or AS ( <expr> ) VIRTUAL',
        )
    if node.args.get("data_type") is not None or node.args.get("not_null"):
        raise _unsupported(node, "computed column clause")
    expression = node.this
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression, storage == "VIRTUAL"


def _outer_clauses_moved_in(node: exp.Subquery) -> exp.Expr:
    """``(SELECT ...) ORDER BY ... LIMIT ...``: the query in parentheses, given the
    ORDER BY, LIMIT and OFFSET written after them; as CockroachDB, 42601 when it has one
    of its own (``((SELECT a FROM t LIMIT 1)) LIMIT 1``)."""
    inner: exp.Expr = node.this
    while isinstance(inner, exp.Subquery) and not any(
        inner.args.get(k) for k in ("alias", "order", "limit", "offset")
    ):
        inner = inner.this
    for clause, shown in (("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET")):
        outer = node.args.get(clause)
        if outer is None:
            continue
        if not isinstance(inner, exp.Select | exp.SetOperation):
            raise SQLError("0A000", f"{shown} after this parenthesized query is not supported")
        if inner.args.get(clause) is not None:
            raise SQLError("42601", f"multiple {shown} clauses not allowed")
        inner.set(clause, outer)
    return inner


def _no_inverted_index(what: str) -> SQLError:
    return SQLError(
        "0A000",
        f"{what}: inverted indexes are not supported; JSONB and ARRAY containment "
        "(@>, <@, ?) is answered by reading the table, so leave the index out",
    )


def _refuse_unhandled(node: exp.Expr, handled: set[str]) -> None:
    """0A000 for any clause of ``node`` the conversion would otherwise drop: a clause
    feedkv does not run must fail the statement, never be ignored."""
    for name, value in node.args.items():
        if name in handled or value is None or value is False or value == []:
            continue
        clause = name.rstrip("_").replace("_", " ").upper()
        raise SQLError("0A000", f"{clause} is not supported in {node.key.upper()}")


def _where(node: exp.Expr) -> exp.Expr | None:
    where = node.args.get("where")
    return where.this if where is not None else None


def _order_by(node: exp.Expr) -> tuple[tuple[exp.Expr, bool], ...]:
    order = node.args.get("order")
    if order is None:
        return ()
    # NB: as CockroachDB, a tuple sorts by its elements in turn, each in the tuple's
    # direction: ORDER BY (a, b) DESC is ORDER BY a DESC, b DESC. An element is an
    # expression, never a column ordinal (CockroachDB reads an ordinal off the whole
    # item): a constant one sorts nothing and is left out.
    items = []
    for item in order.expressions:
        expression, descending = ordered(item)
        if not isinstance(expression, exp.Tuple):
            items.append((expression, descending))
            continue
        constants = exp.Literal | exp.Null | exp.Boolean
        parts = [p for p in expression.expressions if not isinstance(p, constants)]
        items.extend((part, descending) for part in parts)
    return tuple(items)


def ordered(item: exp.Expr) -> tuple[exp.Expr, bool]:
    """An ORDER BY item: its expression, and whether it is DESC. NULLS FIRST or LAST
    is refused (0A000) where it is not CockroachDB's default for the direction, which
    is the only order the sort gives (never ignored)."""
    descending = bool(item.args.get("desc"))
    if isinstance(item, exp.Ordered) and bool(item.args.get("nulls_first")) == descending:
        nulls, direction = ("FIRST", "DESC") if descending else ("LAST", "ASC")
        raise SQLError("0A000", f"NULLS {nulls} is not supported with {direction}")
    return (item.this if isinstance(item, exp.Ordered) else item), descending


def _mutation_order(
    node: exp.Expr, what: str
) -> tuple[tuple[tuple[exp.Expr, bool], ...], exp.Expr | None]:
    """ORDER BY and LIMIT of an UPDATE or DELETE: as CockroachDB, ORDER BY only with
    LIMIT (it says which rows the limit keeps)."""
    order = _order_by(node)
    if order and node.args.get("limit") is None:
        raise SQLError("42601", f"{what} statement requires LIMIT when ORDER BY is used")
    return order, _limit(node)


def _limit(node: exp.Expr) -> exp.Expr | None:
    """The row count of ``LIMIT n`` or of the standard's ``FETCH FIRST | NEXT [n] ROW[S]
    ONLY`` (n is 1 when left out); ``None`` for none, ``LIMIT ALL`` and ``LIMIT NULL``,
    which limit nothing (as in PostgreSQL and CockroachDB)."""
    found = node.args.get("limit")
    if found is None:
        return None
    if isinstance(found, exp.Fetch):
        options = found.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            raise SQLError("0A000", "FETCH ... PERCENT and FETCH ... WITH TIES are not supported")
        count = found.args.get("count")
        return count if count is not None else exp.Literal.number(1)
    count = found.expression
    if isinstance(count, exp.Null) or (isinstance(count, exp.Var) and count.name.upper() == "ALL"):
        return None
    return count  # type: ignore[no-any-return]


def _index_and_alias(source: exp.Table) -> tuple[str | None, str | None]:
    """``t@index`` (sqlglot reads ``@index`` as a parameter alias) and ``t AS a``."""
    alias = source.args.get("alias")
    if alias is None:
        return None, None
    if isinstance(alias.this, exp.Parameter):
        if alias.columns:
            raise SQLError("42601", "an index hint takes no column list")
        return _ident(alias.this.this), None
    if alias.columns:
        raise SQLError("0A000", "column aliases of a table are not supported")
    return None, source.alias


def _unnest(node: exp.Unnest) -> st.Unnest:
    """``unnest(a [, b...]) [WITH ORDINALITY] [AS alias [(columns)]]``: its columns are
    named by the alias's column list, else (one array) by the alias, else ``unnest``,
    and the ordinality's column by the list's name past the arrays', else
    ``ordinality``, as PostgreSQL's (sqlglot holds that name, or True, as ``offset``)."""
    _refuse_unhandled(node, {"expressions", "alias", "offset"})
    offset = node.args.get("offset")
    ordinality = (
        (_ident(offset) if isinstance(offset, exp.Identifier) else "ordinality") if offset else None
    )
    args = tuple(node.expressions)
    alias = node.args.get("alias")
    name = _ident(alias.this) if alias is not None and alias.this is not None else ""
    named = [_ident(c) for c in alias.columns] if alias is not None else []
    if len(named) > len(args):
        available, given = len(args) + bool(offset), len(named) + isinstance(offset, exp.Identifier)
        raise SQLError(
            "42P10",
            f'table "{name}" has {available} columns available but {given} columns specified',
        )
    default = name if name and len(args) == 1 else "unnest"
    columns = tuple(named + [default] * (len(args) - len(named)))
    return st.Unnest(args, name or "unnest", columns, ordinality)


def _series_as_source(node: exp.Select) -> None:
    """``SELECT generate_series(a, b) [AS x]`` or ``SELECT unnest(a) [AS x]`` (the only
    item of a SELECT without FROM) as ``SELECT x FROM generate_series(a, b) AS x``
    (``unnest(a) AS x``): its rows, as PostgreSQL's set-returning function gives them."""
    if node.args.get("from_") or node.args.get("from") or len(node.expressions) != 1:
        return
    item = node.expressions[0]
    call = item.this if isinstance(item, exp.Alias) else item
    source: exp.Expr
    if isinstance(call, exp.Explode) and call.meta.get("srf"):
        name = item.alias if isinstance(item, exp.Alias) else _srf_name(call)
        node.set("expressions", [_each_record(name)])
        source = exp.Table(this=call.copy(), alias=exp.TableAlias(this=_each_alias()))
        node.set("from_" if "from_" in exp.Select.arg_types else "from", exp.From(this=source))
        return
    if isinstance(call, exp.Explode) and not call.expressions:  # unnest(a), to sqlglot
        name = item.alias if isinstance(item, exp.Alias) else _srf_name(call)
        source = exp.Unnest(
            expressions=[call.this.copy()], alias=exp.TableAlias(this=exp.to_identifier(name))
        )
    elif isinstance(call, exp.ExplodingGenerateSeries):
        name = item.alias if isinstance(item, exp.Alias) else "generate_series"
        source = exp.Table(this=call.copy(), alias=exp.TableAlias(this=exp.to_identifier(name)))
    else:
        return
    node.set("expressions", [exp.column(name)])
    node.set("from_" if "from_" in exp.Select.arg_types else "from", exp.From(this=source))


# The source several set-returning functions of a SELECT list are read from, its
# columns named by their places ("1", "2", ...): quoted, so no name written unquoted
# meets it
_LOCKSTEP = "set-returning functions"


# The derived table a SELECT's aggregation is read from when set-returning functions of
# its list run after it (see _series_after_aggregation); quoted, as _LOCKSTEP
_AGGREGATED = "aggregated rows"

# The meta key of a column that stands for an expression moved into a derived table: the
# expression as written, which names the result column (feedkv.sql.expr.expression_name)
_NAMED_FOR = "named_for"


def _series_after_aggregation(node: exp.Select) -> None:
    """``SELECT count(*), generate_series(1, 2) FROM t [GROUP BY ...]``: set-returning
    functions beside aggregates (or GROUP BY, HAVING, window functions) run on the rows
    the aggregation gives, as PostgreSQL and CockroachDB run them: ``SELECT "c1" AS
    count, generate_series("a1", "a2") FROM (SELECT count(*) AS "c1", 1 AS "a1", 2 AS
    "a2" FROM t ...)``, which _series_in_lockstep or _series_as_lateral then reads.
    Left as it is (and refused when compiled) with ORDER BY, DISTINCT, LIMIT or OFFSET,
    which would apply to the function's rows, with a GROUP BY that names a place or an
    output name of the list (the inner query's list is another), or a function within
    an aggregate or another set-returning function, or ``jsonb_each`` (read in FROM
    only)."""
    calls = [
        found
        for item in node.expressions
        for found in item.find_all(exp.Explode, exp.ExplodingGenerateSeries)
        if _query_of(found) is node
    ]
    if not calls:
        return
    if not (node.args.get("group") or node.args.get("having") or _aggregates(node)):
        return
    if any(node.args.get(k) for k in ("order", "distinct", "limit", "offset", "locks")):
        return
    if _groups_by_the_list(node):
        return
    nested = (exp.AggFunc, exp.Window, exp.Explode, exp.ExplodingGenerateSeries)
    for call in calls:
        if isinstance(call, exp.Explode) and call.expressions:
            return
        for ancestor in _ancestors(call):
            if ancestor is node:
                break
            if isinstance(ancestor, nested):
                return
    inner_items: list[exp.Expr] = []

    def moved(expression: exp.Expr, prefix: str) -> exp.Column:
        name = f"{prefix}{len(inner_items) + 1}"
        inner_items.append(exp.alias_(expression.copy(), exp.to_identifier(name, quoted=True)))
        return exp.column(
            exp.to_identifier(name, quoted=True), table=exp.to_identifier(_AGGREGATED, quoted=True)
        )

    # NB: by identity: sqlglot's nodes compare equal by their text
    around_calls = {id(a) for call in calls for a in (call, *_ancestors(call))}

    def lift(part: exp.Expr) -> None:
        """Move what the aggregation gives (a column, an aggregate, a window function,
        a subquery) out of an item with a set-returning function, into the inner
        query; constants and operators stay."""
        query_array = isinstance(part, exp.Array) and part.meta.get("query")
        if id(part) not in around_calls and (isinstance(part, _AGGREGATED_PARTS) or query_array):
            part.replace(moved(part, "a"))
            return
        for child in list(part.iter_expressions()):
            lift(child)

    outer_items: list[exp.Expr] = []
    for item in node.expressions:
        value = _unaliased(item)
        if id(value) not in around_calls:
            column = moved(value, "c")
            if isinstance(item, exp.Alias):
                outer_items.append(exp.alias_(column, item.args["alias"].copy()))
            else:
                column.meta[_NAMED_FOR] = value  # NB: its result column is named for it
                outer_items.append(column)
            continue
        lift(value)
        outer_items.append(item)
    inner = node.copy()
    inner.set("expressions", inner_items)
    from_key = "from_" if "from_" in exp.Select.arg_types else "from"
    for key in ("where", "group", "having", "joins", "with_", "with", "qualify"):
        if key in exp.Select.arg_types:
            node.set(key, None)
    node.set("expressions", outer_items)
    node.set(
        from_key,
        exp.From(
            this=exp.Subquery(
                this=inner,
                alias=exp.TableAlias(this=exp.to_identifier(_AGGREGATED, quoted=True)),
            )
        ),
    )


_AGGREGATED_PARTS = (exp.Column, exp.AggFunc, *AGGREGATES, exp.Window, exp.Subquery, exp.Exists)


def _groups_by_the_list(node: exp.Select) -> bool:
    """Whether ``node``'s GROUP BY names an item of its list by place (``GROUP BY 2``)
    or by its output name (an unqualified name one of its items is aliased to)."""
    group = node.args.get("group")
    if group is None:
        return False
    aliases = {item.alias.lower() for item in node.expressions if isinstance(item, exp.Alias)}
    for key in group.expressions:
        if isinstance(key, exp.Literal) and not key.is_string:
            return True
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            return True
    return False


def _ancestors(node: exp.Expr) -> Iterator[exp.Expr]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _series_in_lockstep(node: exp.Select) -> None:
    """``SELECT f(...) [AS x], g(...) + 1 [FROM t]``, set-returning functions in a
    SELECT list more than one, or one inside an expression, read from ``ROWS FROM (f,
    g)``, as PostgreSQL 10 and CockroachDB run them: in lockstep, the n-th row of each
    together, a function out of rows giving NULL, until all are (none for a row of
    ``t`` for which all give none). Left as they are (and refused when compiled), as
    PostgreSQL refuses them: beside an aggregate or GROUP BY, under CASE or COALESCE,
    or within another set-returning function."""
    calls = [
        found
        for item in node.expressions
        for found in item.find_all(exp.Explode, exp.ExplodingGenerateSeries)
        if _query_of(found) is node
    ]
    if not calls or node.args.get("group") or node.args.get("having") or _aggregates(node):
        return
    whole = calls[0].parent is node or _unaliased(calls[0].parent) is calls[0]
    alone = len(node.expressions) == 1 or node.args.get("from_") or node.args.get("from")
    if len(calls) == 1 and whole and alone:
        return  # NB: _series_as_source or _series_as_lateral reads it
    for call in calls:
        if isinstance(call, exp.Explode) and call.expressions:
            return  # unnest(a, b) is read in FROM only
        ancestor = call.parent
        while ancestor is not None and ancestor is not node:
            if isinstance(ancestor, exp.Case | exp.Coalesce | exp.If | exp.Explode):
                return
            if isinstance(ancestor, exp.ExplodingGenerateSeries):
                return
            ancestor = ancestor.parent
    functions: list[exp.Expr] = []
    for place, call in enumerate(calls, start=1):
        if isinstance(call, exp.Explode):
            name = _srf_name(call)
            functions.append(exp.Unnest(expressions=[call.this.copy()]))
        else:
            name = "generate_series"
            functions.append(exp.Table(this=call.copy()))
        column = exp.column(
            exp.to_identifier(str(place), quoted=True),
            table=exp.to_identifier(_LOCKSTEP, quoted=True),
        )
        if call.parent is node:  # NB: a whole item keeps the function's name
            call.replace(exp.alias_(column, name))
        else:
            call.replace(column)
    alias = exp.TableAlias(
        this=exp.to_identifier(_LOCKSTEP, quoted=True),
        columns=[exp.to_identifier(str(n), quoted=True) for n in range(1, len(calls) + 1)],
    )
    source = exp.Table(rows_from=functions, alias=alias)
    from_key = "from_" if "from_" in exp.Select.arg_types else "from"
    if node.args.get(from_key):
        node.append("joins", exp.Join(this=source))
    else:
        node.set(from_key, exp.From(this=source))


def _aggregates(node: exp.Select) -> bool:
    """Whether ``node`` has an aggregate or window function of its own (not of a
    subquery's)."""
    return any(_query_of(found) is node for found in node.find_all(exp.AggFunc, exp.Window))


def _query_of(node: exp.Expr) -> exp.Expr | None:
    """The query ``node`` is part of (the innermost around it)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, _QUERY_NODES):
        parent = parent.parent
    return parent


def _srf_name(call: exp.Explode) -> str:
    """The column an ``unnest`` node gives, unaliased: ``unnest``, or the name of the
    set-returning function read as an unnest of an array (``jsonb_object_keys``)."""
    if call.meta.get("srf"):
        return str(call.meta["srf"])
    inner = call.this
    if isinstance(inner, exp.Anonymous) and str(inner.this).lower() in _ARRAY_SRFS:
        return str(inner.this).lower()
    return "unnest"


def _series_as_lateral(node: exp.Select) -> None:
    """``SELECT a, unnest(b) [AS x] FROM t`` (one set-returning function among the items
    of a SELECT with FROM) as ``SELECT a, x FROM t, unnest(b) AS x`` (a LATERAL source):
    each row of ``t`` once for each element, none for an empty or NULL array, as
    PostgreSQL gives it. With an aggregate or GROUP BY (which would come first) or two
    such functions (which PostgreSQL runs side by side) nothing is rewritten."""
    if not (node.args.get("from_") or node.args.get("from")):
        return
    found = [
        item
        for item in node.expressions
        if isinstance(_unaliased(item), exp.Explode | exp.ExplodingGenerateSeries)
    ]
    if len(found) != 1 or node.args.get("group") or node.args.get("having") or _aggregates(node):
        return
    item = found[0]
    call = _unaliased(item)
    source: exp.Expr
    if isinstance(call, exp.Explode) and call.meta.get("srf"):
        name = item.alias if isinstance(item, exp.Alias) else _srf_name(call)
        item.replace(_each_record(name))
        source = exp.Table(this=call.copy(), alias=exp.TableAlias(this=_each_alias()))
        node.append("joins", exp.Join(this=source))
        return
    if isinstance(call, exp.Explode):
        if call.expressions:
            return
        name = item.alias if isinstance(item, exp.Alias) else _srf_name(call)
        alias = exp.TableAlias(this=exp.to_identifier(name))
        source = exp.Unnest(expressions=[call.this.copy()], alias=alias)
    else:
        name = item.alias if isinstance(item, exp.Alias) else "generate_series"
        alias = exp.TableAlias(this=exp.to_identifier(name))
        source = exp.Table(this=call.copy(), alias=alias)
    item.replace(exp.alias_(exp.column(name, table=name), name))
    node.append("joins", exp.Join(this=source))


# The source a SELECT list's jsonb_each(j) is read from (quoted, as _LOCKSTEP)
_EACH = "record-returning function"


def _each_alias() -> exp.Identifier:
    return exp.to_identifier(_EACH, quoted=True)


def _each_record(name: str) -> exp.Expr:
    """The item ``jsonb_each(j) [AS name]`` of a SELECT list becomes: the record of the
    row it gives, ``(key, value)``, as PostgreSQL and CockroachDB show it (``(a,1)``)."""
    columns = [exp.column(c, table=_each_alias()) for c in _SRF_COLUMNS["jsonb_each"]]
    return exp.alias_(exp.Tuple(expressions=columns), exp.to_identifier(name))


def _grouping_keys(keys: Iterable[exp.Expr]) -> Iterator[exp.Expr]:
    """GROUP BY's keys with each row value's elements in its place: ``GROUP BY (a, (b,
    c))`` groups by ``a``, ``b`` and ``c``, as PostgreSQL and CockroachDB read it (the
    SELECT list's ``(a, b)`` is then the record of grouped columns)."""
    for key in keys:
        if isinstance(key, exp.Tuple):
            yield from _grouping_keys(key.expressions)
        else:
            yield key


def _unaliased(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Alias) else item


def _expand_row_subqueries(node: exp.Update) -> None:
    """``SET (a, b) = (SELECT x, y ...)`` as ``a = (SELECT c0 FROM (SELECT x, y ...) AS
    s (c0, c1))``, ``b`` likewise with ``c1``: each column a scalar subquery (so no row
    gives NULLs and two rows are an error, as CockroachDB), reading the row's column of
    that place. The derived table's name (st.ROW_ASSIGNMENT) asks for exactly as many
    columns as it names. NB: the subquery runs once for each column, so a volatile
    function in it (random()) may give the columns values of different runs."""
    items: list[exp.Expr] = []
    for item in node.expressions:
        target, source = item.this, item.expression
        if not (
            isinstance(item, exp.EQ)
            and isinstance(target, exp.Tuple | exp.Paren)
            and isinstance(source, exp.Subquery)
        ):
            items.append(item)
            continue
        columns = target.expressions if isinstance(target, exp.Tuple) else [target.this]
        names = [f"c{i}" for i in range(len(columns))]
        for column, name in zip(columns, names, strict=True):
            derived = exp.Subquery(
                this=source.this.copy(),
                alias=exp.TableAlias(
                    this=exp.to_identifier(st.ROW_ASSIGNMENT),
                    columns=[exp.to_identifier(n) for n in names],
                ),
            )
            scalar = exp.Subquery(this=exp.select(name).from_(derived))
            items.append(exp.EQ(this=column.copy(), expression=scalar))
    node.set("expressions", items)


def _assignments(nodes: list[exp.Expr], table: st.TableName) -> tuple[tuple[str, exp.Expr], ...]:
    """``SET a = x, (b, c) = (y, z)``: each column once."""
    sets = tuple(pair for node in nodes for pair in _assignment_list(node, table))
    seen: set[str] = set()
    for name, _value in sets:
        if name in seen:
            raise SQLError("42601", f'multiple assignments to the same column "{name}"')
        seen.add(name)
    return sets


def _assignment_list(node: exp.Expr, table: st.TableName) -> list[tuple[str, exp.Expr]]:
    """One ``SET`` item: ``a = x``, or ``(a, b) = (x, y)`` as ``a = x, b = y``."""
    if not isinstance(node, exp.EQ) or not isinstance(node.this, exp.Tuple | exp.Paren):
        return [_assignment(node, table)]
    targets = node.this.expressions if isinstance(node.this, exp.Tuple) else [node.this.this]
    source = node.expression
    if isinstance(source, exp.Subquery):
        # NB: an UPDATE's are expanded (_expand_row_subqueries); ON CONFLICT's are not
        raise SQLError("0A000", "SET (...) = (SELECT ...) is not supported here")
    if isinstance(source, exp.Tuple):
        values = source.expressions
    elif len(targets) > 1:  # NB: as CockroachDB counts (x): one value
        raise SQLError(
            "42601", f"number of columns ({len(targets)}) does not match number of values (1)"
        )
    else:  # NB: (x) is x in parentheses, not a row (as PostgreSQL reads it)
        raise SQLError(
            "42601",
            "source for a multiple-column UPDATE item must be a sub-SELECT or ROW() expression",
        )
    if len(targets) != len(values):
        raise SQLError(
            "42601",
            f"number of columns ({len(targets)}) does not match number of values ({len(values)})",
        )
    return [
        _assignment(exp.EQ(this=target, expression=value), table)
        for target, value in zip(targets, values, strict=True)
    ]


def _assignment(node: exp.Expr, table: st.TableName) -> tuple[str, exp.Expr]:
    if not isinstance(node, exp.EQ) or not isinstance(node.this, exp.Column):
        raise SQLError("42601", f"expected column = value, got {node.sql(dialect=_DIALECT)!r}")
    target = node.this
    if target.args.get("table") is not None or target.args.get("db") is not None:
        # NB: as CockroachDB's grammar (and PostgreSQL's): a dotted SET target names a
        # field of a compound-typed column, never a table's column
        shown = target.sql(dialect=_DIALECT)
        raise SQLError(
            "0A000",
            f'compound types not supported yet: "{shown}"',  # CockroachDB's words
            detail="a SET target is a column's name, without its table's",
        )
    value = node.expression
    if isinstance(value, exp.Column) and not value.this.quoted and value.sql().upper() == "DEFAULT":
        value = exp.Var(this="DEFAULT")  # NB: SET c = DEFAULT, as VALUES (DEFAULT) reads
    return _ident(target.this), value


def _returning(node: exp.Expr) -> tuple[exp.Expr, ...] | None:
    returning = node.args.get("returning")
    if returning is None:
        return None
    return tuple(returning.expressions)


def column_type(node: exp.DataType) -> ColumnType:
    kind = node.this
    name = kind.name if hasattr(kind, "name") else str(kind)
    if name == _INT4_STAND_IN:
        name = "INT4"
    if name == "USERDEFINED":
        name = _ident(node.args.get("kind"))
        if name.upper() not in TYPE_NAMES:
            # a type of the catalog (an enum), resolved by the statement that uses it
            return ColumnType(Kind.ENUM, type_name=name)
    if name.upper() == "ARRAY" and len(node.expressions) == 1:
        element = node.expressions[0]
        if isinstance(element, exp.DataType):
            inner = column_type(element)
            if inner.kind in (Kind.ARRAY, Kind.JSONB):
                raise SQLError(
                    "0A000",
                    f"type {node.sql(dialect=_DIALECT)} is not supported (arrays of "
                    "arrays or of JSONB)",
                )
            return ColumnType(Kind.ARRAY, element=inner)
    if (node.expressions and name.upper() in ("ARRAY",)) or node.args.get("nested"):
        raise SQLError("0A000", f"type {node.sql(dialect=_DIALECT)} is not supported")
    params: list[int] = []
    for param in node.expressions:
        value = param.this if isinstance(param, exp.DataTypeParam) else param
        if not isinstance(value, exp.Literal) or value.is_string or not value.name.isdigit():
            raise SQLError("42601", f"invalid type parameter in {node.sql(dialect=_DIALECT)}")
        params.append(int(value.name))
    if name.upper() in ("TEXT",) and params:
        name = "STRING"
    if name == "FLOAT":  # NB: the dialect's FLOAT is FLOAT4 (REAL); FLOAT8 is its DOUBLE
        name = "FLOAT4"
    if name == "DOUBLE" and len(params) == 1:
        # as CockroachDB: FLOAT(1) to FLOAT(24) are FLOAT4, FLOAT(25) to FLOAT(53) FLOAT8
        if not 1 <= params[0] <= 53:
            raise SQLError("22023", "precision for type float must be between 1 and 53 bits")
        name, params = ("FLOAT4" if params[0] <= 24 else "FLOAT8"), []
    return parse_type_name(name, params)


def _integer(node: exp.Expr, what: str) -> int:
    """An integer literal (maybe negative) of a statement's option."""
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not isinstance(inner, exp.Literal) or inner.is_string or not inner.name.isdigit():
        raise SQLError("42601", f"syntax error: {what} takes an integer, got {node.sql()!r}")
    value = -int(inner.name) if negative else int(inner.name)
    if not -(2**63) <= value < 2**63:
        raise SQLError("22003", f"{what} {value} is out of range for INT8")
    return value


def _unsupported(node: exp.Expr, what: str = "statement") -> SQLError:
    text = node.sql(dialect=_DIALECT)
    if isinstance(node, exp.Command):
        text = f"{node.this} {node.expression.sql() if node.expression else ''}".strip()
    shown = text if len(text) <= 60 else text[:57] + "..."
    return SQLError("0A000", f"unsupported {what}: {shown}")


def _is_follower_read_timestamp(node: exp.Expr) -> bool:
    """Whether ``node`` is ``follower_read_timestamp()``, which AS OF SYSTEM TIME takes."""
    return (
        isinstance(node, exp.Anonymous)
        and node.name.lower() == "follower_read_timestamp"
        and not node.expressions
    )
