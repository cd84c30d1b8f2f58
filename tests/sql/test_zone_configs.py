"""``ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '...'``: the table's
ranges close their timestamps that far behind now (so its changefeeds resolve that fast)
and no other table's do; bad settings are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.kv.store import Store, StoreConfig
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
HOUR_NS = 3600 * 1_000_000_000


@pytest.fixture
def slow_db(tmp_path: Path) -> Iterator[DB]:
    """A node whose ranges close their timestamps an hour behind now by default."""
    config = StoreConfig(closed_ts_interval_s=0.01, closed_ts_target_ns=HOUR_NS, sync=False)
    database = feedkv.connect(tmp_path / "store", config=config, changefeed_runner="thread")
    yield database
    database.close()


def store_of(db: DB) -> Store:
    assert db.node is not None
    return db.node.store


def range_of(db: DB, table: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), table)
    span = table_span(desc.id)
    store = store_of(db)

    def split() -> int | None:  # a table gets a range of its own once it is created
        found = [d.range_id for d in store.descriptors() if d.span.start == span.start]
        return found[0] if found else None

    found = wait_until(split, timeout_s=DEADLINE, what=f"the range of table {table}")
    assert found is not None
    return found


def test_a_tables_zone_sets_its_ranges_closed_timestamp_target_only(slow_db: DB) -> None:
    db = slow_db
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    store = store_of(db)
    t, u = range_of(db, "t"), range_of(db, "u")

    assert (
        db.sql("ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '20ms'").tag
        == "CONFIGURE ZONE 1"
    )
    configured = db.now()

    wait_until(lambda: store.closed_target(t) == 20_000_000, timeout_s=DEADLINE, what="t's zone")
    wait_until(
        lambda: store.closed_timestamp(t) > configured, timeout_s=DEADLINE, what="t closed past"
    )
    assert store.closed_target(u) == HOUR_NS
    assert store.closed_timestamp(u) < configured  # an hour behind: still where it opened


def test_a_changefeed_on_a_zoned_table_resolves_at_its_target(slow_db: DB) -> None:
    db = slow_db
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    range_of(db, "t")
    db.sql("ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '20ms'")
    db.sql("INSERT INTO t VALUES (1)")
    written = db.now()
    feed = db.sql(
        "EXPERIMENTAL CHANGEFEED FOR t WITH resolved = '0s', min_checkpoint_frequency = '0s'"
    )
    assert isinstance(feed, FeedResult)
    try:
        while True:  # with the node's default, the first marker would come in an hour
            row = feed.poll(DEADLINE)
            assert row is not None
            if row[0] is None and Timestamp.parse(json.loads(row[2])["resolved"]) >= written:
                break
    finally:
        feed.close()


@pytest.mark.parametrize(
    ("using", "code", "message"),
    [
        ("closed_timestamp_target = 'soon'", "22023", "'soon' is not a duration"),
        ("closed_timestamp_target = '0s'", "22023", "must be above 0 and at most 1h"),
        ("closed_timestamp_target = '2h'", "22023", "must be above 0 and at most 1h"),
        ("num_replica = 3", "22023", "unknown zone setting 'num_replica'"),
        ("num_replicas = 0", "22023", "not between 1 and 7"),
        ("num_replicas = -1", "22023", "-1 is not between 1 and 7"),  # NB: no syntax error
        ("gc.ttlseconds = -5", "22023", "-5 is below the least allowed"),
        ("num_replicas = 'x'", "22023", "not a whole number"),
        ("", "42601", "expected an option name"),
    ],
)
def test_bad_zone_settings_are_refused(slow_db: DB, using: str, code: str, message: str) -> None:
    db = slow_db
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"ALTER TABLE t CONFIGURE ZONE USING {using}")
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message
    snapshot = catalog.Snapshot(db, db.now())
    assert catalog.zone_spans(snapshot) == []


def test_configure_zone_needs_an_existing_table(slow_db: DB) -> None:
    with pytest.raises(SQLError) as raised:
        slow_db.sql("ALTER TABLE missing CONFIGURE ZONE USING closed_timestamp_target = '1s'")
    assert raised.value.code == "42P01"


def test_zone_settings_add_up_and_show_as_cockroachdb_shows_them(slow_db: DB) -> None:
    """Each ALTER keeps the settings it does not name; SHOW ZONE CONFIGURATION shows the
    zone that applies (the default zone for a table without its own)."""
    db = slow_db
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 5")
    db.sql("ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '200ms'")
    db.sql("ALTER TABLE t CONFIGURE ZONE USING num_replicas = 3")

    def show(statement: str) -> list[tuple[str, str]]:
        return [tuple(row) for row in db.sql(statement).rows]  # type: ignore[misc]

    t_zone = (
        "TABLE defaultdb.public.t",
        "ALTER TABLE defaultdb.public.t CONFIGURE ZONE USING\n"
        "\tgc.ttlseconds = 14400,\n\tnum_replicas = 3,\n\tclosed_timestamp_target = '200ms'",
    )
    default = (
        "RANGE default",
        "ALTER RANGE default CONFIGURE ZONE USING\n\tgc.ttlseconds = 14400,\n\tnum_replicas = 5",
    )
    assert show("SHOW ZONE CONFIGURATION FOR TABLE t") == [t_zone]
    assert show("SHOW ZONE CONFIGURATION FOR TABLE u") == [default]
    assert show("SHOW ZONE CONFIGURATION FOR RANGE default") == [default]
    assert show("SHOW ZONE CONFIGURATIONS") == [default, t_zone]
    snapshot = catalog.Snapshot(db, db.now())
    assert catalog.zone_replicas(snapshot)[0] == 5
    assert [n for _, n in catalog.zone_replicas(snapshot)[1]] == [3]

    db.sql("ALTER TABLE t CONFIGURE ZONE DISCARD")
    assert show("SHOW ZONE CONFIGURATION FOR TABLE t") == [default]
    assert catalog.zone_spans(catalog.Snapshot(db, db.now())) == []


@pytest.mark.parametrize(
    ("text", "table", "every"),
    [
        ("SHOW ZONE CONFIGURATION FROM RANGE default", None, False),
        ("SHOW ZONE CONFIGURATION FOR RANGE default", None, False),
        ("SHOW ZONE CONFIGURATION FROM TABLE db.t", "db.t", False),
        ("SHOW ZONE CONFIGURATION FOR TABLE t", "t", False),
        ("SHOW ZONE CONFIGURATIONS", None, True),
        ("SHOW ALL ZONE CONFIGURATIONS", None, True),
    ],
)
def test_show_zone_configuration_parses_as_cockroachdb_writes_it(
    text: str, table: str | None, every: bool
) -> None:
    from feedkv.sql import statements as st
    from feedkv.sql.parser import parse

    (statement,) = parse(text)
    assert isinstance(statement, st.ShowZoneConfiguration)
    named = statement.table
    shown = None if named is None else ".".join(filter(None, (named.database, named.name)))
    assert (shown, statement.every) == (table, every)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SHOW ZONE CONFIGURATION t", "expected SHOW ZONE CONFIGURATION FOR"),
        ("SHOW ZONE CONFIGURATION FOR RANGE meta", "expected FOR RANGE default or FOR TABLE t"),
        ("ALTER RANGE meta CONFIGURE ZONE USING num_replicas = 3", "RANGE default"),
        ("ALTER RANGE default CONFIGURE ZONE DISCARD", "the default zone cannot be discarded"),
    ],
)
def test_zone_statements_feedkv_does_not_have_are_refused_by_name(text: str, message: str) -> None:
    from feedkv.sql.parser import parse

    with pytest.raises(SQLError, match=message):
        parse(text)


def test_the_default_zone_takes_num_replicas_only_and_bad_values_change_nothing(
    slow_db: DB,
) -> None:
    db = slow_db
    db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 3")
    for statement, message in [
        ("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 8", "not between 1 and 7"),
        (
            "ALTER RANGE default CONFIGURE ZONE USING closed_timestamp_target = '1s'",
            "not on the default zone",
        ),
    ]:
        with pytest.raises(SQLError, match=message) as raised:
            db.sql(statement)
        assert raised.value.code == "22023"
    assert catalog.zone_replicas(catalog.Snapshot(db, db.now()))[0] == 3
