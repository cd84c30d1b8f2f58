"""The SHOW statements that list a schema, with CockroachDB's columns and order."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import InvariantViolation, SQLError
from feedkv.sql import catalog
from feedkv.sql.schema_listing import home_database


def test_show_create_all_tables_adds_foreign_keys_after_every_table(db: DB) -> None:
    db.sql("CREATE TABLE child (id INT PRIMARY KEY, parent_id INT)")
    db.sql("CREATE TABLE parent (id INT PRIMARY KEY)")
    db.sql(
        "ALTER TABLE child ADD CONSTRAINT child_parent_fk "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE"
    )
    result = db.sql("SHOW CREATE ALL TABLES")
    assert result.columns == ("create_statement",)
    assert [row[0] for row in result.rows] == [
        "CREATE TABLE public.child (\n\tid INT8 NOT NULL,\n\tparent_id INT8 NULL,\n"
        "\tCONSTRAINT child_pkey PRIMARY KEY (id ASC)\n);",
        "CREATE TABLE public.parent (\n\tid INT8 NOT NULL,\n"
        "\tCONSTRAINT parent_pkey PRIMARY KEY (id ASC)\n);",
        "ALTER TABLE public.child ADD CONSTRAINT child_parent_fk FOREIGN KEY (parent_id) "
        "REFERENCES public.parent(id) ON DELETE CASCADE;",
        "-- Validate foreign key constraints. These can fail if there was unvalidated data "
        "during the SHOW CREATE ALL TABLES",
        "ALTER TABLE public.child VALIDATE CONSTRAINT child_parent_fk;",
    ]


def test_show_create_all_tables_puts_a_sequence_before_the_table_calling_it(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("CREATE SEQUENCE s")
    db.sql("ALTER TABLE t ALTER COLUMN id SET DEFAULT nextval('s')")
    db.sql("CREATE VIEW v AS SELECT id FROM t")
    db.sql("COMMENT ON TABLE t IS 'ids'")
    statements = [row[0] for row in db.sql("SHOW CREATE ALL TABLES").rows]
    assert [s.split(" (")[0].split(" MINVALUE")[0] for s in statements] == [
        "CREATE SEQUENCE public.s",
        "CREATE TABLE public.t",
        "CREATE VIEW public.v",
    ]
    assert "DEFAULT nextval('public.s'::REGCLASS)" in statements[1]
    assert statements[1].endswith(");\nCOMMENT ON TABLE public.t IS 'ids';")
    assert statements[2] == "CREATE VIEW public.v (id) AS SELECT id FROM t;"


def test_a_table_without_its_database_is_a_broken_catalog(db: DB) -> None:
    """SHOW CREATE names a table's sequences from its database: a table whose database
    descriptor is gone fails loudly, never as a database named ""."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    before = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(before, catalog.DEFAULT_DATABASE)
    table = catalog.table_by_name(before, database, "t")
    assert home_database(before, table) == database
    db.delete(catalog.descriptor_key(database.id))
    with pytest.raises(InvariantViolation, match=f"table 't' has no database {database.id}"):
        home_database(catalog.Snapshot(db, db.now()), table)


def test_show_create_all_tables_replays_into_a_fresh_database(db: DB) -> None:
    """Each row run in order, the comment row among them, makes the same schema: a
    sequence a DEFAULT calls, tables with a foreign key (added after both tables) and a
    check, a view, a comment."""
    source = db.session()
    for text in (
        "CREATE SEQUENCE ids",
        "CREATE TABLE child (id INT PRIMARY KEY DEFAULT nextval('ids'), parent_id INT, "
        "CHECK (id > 0))",
        "CREATE TABLE parent (id INT PRIMARY KEY, name STRING UNIQUE)",
        "ALTER TABLE child ADD CONSTRAINT child_parent_fk FOREIGN KEY (parent_id) "
        "REFERENCES parent (id) ON DELETE CASCADE",
        "CREATE VIEW named AS SELECT c.id, p.name FROM child AS c JOIN parent AS p "
        "ON c.parent_id = p.id",
        "COMMENT ON TABLE parent IS 'the parents'",
    ):
        source.execute(text)
    dump = [row[0] for row in source.execute("SHOW CREATE ALL TABLES").rows]
    assert any(text.startswith("-- ") for text in dump)
    source.execute("CREATE DATABASE copy")
    replay = db.session()
    replay.execute("USE copy")
    for text in dump:
        replay.execute(text)
    assert [row[0] for row in replay.execute("SHOW CREATE ALL TABLES").rows] == dump
    replay.execute("INSERT INTO parent VALUES (1, 'p')")
    replay.execute("INSERT INTO child (parent_id) VALUES (1)")
    assert replay.execute("SELECT name FROM named").rows == [("p",)]
    with pytest.raises(SQLError) as caught:
        replay.execute("INSERT INTO child (parent_id) VALUES (2)")
    assert caught.value.code == "23503"


def test_show_create_all_tables_of_an_empty_database_has_no_rows(db: DB) -> None:
    assert db.sql("SHOW CREATE ALL TABLES").rows == []


def test_show_schemas_lists_cockroachdbs_schemas(db: DB) -> None:
    result = db.sql("SHOW SCHEMAS")
    assert result.columns == ("schema_name", "owner")
    assert result.rows == [
        ("crdb_internal", None),
        ("information_schema", None),
        ("pg_catalog", None),
        ("pg_extension", None),
        ("public", "admin"),
    ]
    assert db.sql("SHOW SCHEMAS FROM defaultdb").rows == result.rows
    with pytest.raises(SQLError) as caught:
        db.sql("SHOW SCHEMAS FROM nosuchdb")
    assert caught.value.code == "3D000"


def test_show_statistics_has_cockroachdbs_columns_and_no_rows(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    result = db.sql("SHOW STATISTICS FOR TABLE t")
    assert result.columns == (
        "statistics_name",
        "column_names",
        "created",
        "row_count",
        "distinct_count",
        "null_count",
        "avg_size",
        "partial_predicate",
        "histogram_id",
        "full_histogram_id",
    )
    assert result.rows == []
    with pytest.raises(SQLError) as caught:
        db.sql("SHOW STATISTICS FOR TABLE nosuch")
    assert caught.value.code == "42P01"


def test_show_regions_of_a_cluster_without_regions_has_no_rows(db: DB) -> None:
    result = db.sql("SHOW REGIONS")
    assert result.columns == (
        "region",
        "zones",
        "database_names",
        "primary_region_of",
        "secondary_region_of",
    )
    assert result.rows == []
    cluster = db.sql("SHOW REGIONS FROM CLUSTER")
    assert (cluster.columns, cluster.rows) == (("region", "zones"), [])


def test_show_tables_reads_no_rows_so_its_transaction_meets_no_writes_to_them(db: DB) -> None:
    # NB: it has no statistics to estimate from: counting the rows would read every
    # table in the transaction, which a write to any of them would then force to retry
    db.sql("CREATE TABLE busy (k INT PRIMARY KEY)")
    db.sql("CREATE TABLE mine (k INT PRIMARY KEY)")
    db.sql("INSERT INTO busy VALUES (1), (2)")
    session, writer = db.session(), db.session()
    session.execute("BEGIN")
    rows = session.execute("SHOW TABLES").rows
    assert [(row[1], row[4]) for row in rows] == [("busy", 0), ("mine", 0)]
    writer.execute("INSERT INTO busy VALUES (3)")
    session.execute("INSERT INTO mine VALUES (1)")
    session.execute("COMMIT")
    assert db.sql("SELECT k FROM mine").rows == [(1,)]
