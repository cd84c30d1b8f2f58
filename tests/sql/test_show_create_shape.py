"""SHOW CREATE TABLE in CockroachDB's shape: the table as the statement names it, then
``CREATE TABLE public.t (`` with each column's NULL or NOT NULL, the implicit ``rowid``
key shown, ``CONSTRAINT t_pkey PRIMARY KEY (a ASC)``, foreign keys, indexes with
``ASC``, the families (unless the only one is ``primary``) and CHECKs, ending with ``;``
(as CockroachDB's since 25.3); and feedkv reads its own output back into the same table."""

from __future__ import annotations

from feedkv import DB


def _show(db: DB, name: str) -> tuple[str, str]:
    ((table, text),) = db.sql(f"SHOW CREATE TABLE {name}").rows
    return table, text


def test_families_and_a_primary_key(db: DB) -> None:
    db.sql(
        "CREATE TABLE abcd (a INT PRIMARY KEY, b INT, c INT, d INT, "
        "FAMILY f1 (a, b), FAMILY (c, d))"
    )
    db.sql("CREATE INDEX d_idx ON abcd (d)")
    assert _show(db, "abcd") == (
        "abcd",
        "CREATE TABLE public.abcd (\n"
        "\ta INT8 NOT NULL,\n"
        "\tb INT8 NULL,\n"
        "\tc INT8 NULL,\n"
        "\td INT8 NULL,\n"
        "\tCONSTRAINT abcd_pkey PRIMARY KEY (a ASC),\n"
        "\tINDEX d_idx (d ASC),\n"
        "\tFAMILY f1 (a, b),\n"
        "\tFAMILY fam_1_c_d (c, d)\n"
        ");",
    )


def test_a_lone_primary_family_is_not_shown_and_a_qualified_name_is_kept(db: DB) -> None:
    db.sql("CREATE TABLE f1 (a INT PRIMARY KEY, b STRING, c STRING DEFAULT 'x' NOT NULL)")
    assert _show(db, "defaultdb.f1") == (
        "defaultdb.public.f1",
        "CREATE TABLE public.f1 (\n"
        "\ta INT8 NOT NULL,\n"
        "\tb STRING NULL,\n"
        "\tc STRING NOT NULL DEFAULT 'x':::STRING,\n"
        "\tCONSTRAINT f1_pkey PRIMARY KEY (a ASC)\n"
        ");",
    )


def test_the_implicit_rowid_key_is_shown(db: DB) -> None:
    db.sql("CREATE TABLE t (x INT)")
    assert _show(db, "t")[1] == (
        "CREATE TABLE public.t (\n"
        "\tx INT8 NULL,\n"
        "\trowid INT8 NOT VISIBLE NOT NULL DEFAULT unique_rowid(),\n"
        "\tCONSTRAINT t_pkey PRIMARY KEY (rowid ASC)\n"
        ");"
    )


def test_constraints_indexes_and_computed_columns(db: DB) -> None:
    db.sql("CREATE TABLE p (id INT PRIMARY KEY)")
    db.sql(
        "CREATE TABLE c (id INT PRIMARY KEY, p_id INT REFERENCES p ON DELETE CASCADE, "
        "u INT UNIQUE, x INT AS (id + 1) STORED, y INT, INDEX (p_id) STORING (y), "
        "CONSTRAINT positive CHECK (u > 0))"
    )
    assert _show(db, "c")[1] == (
        "CREATE TABLE public.c (\n"
        "\tid INT8 NOT NULL,\n"
        "\tp_id INT8 NULL,\n"
        "\tu INT8 NULL,\n"
        "\tx INT8 NULL AS (id + 1) STORED,\n"
        "\ty INT8 NULL,\n"
        "\tCONSTRAINT c_pkey PRIMARY KEY (id ASC),\n"
        "\tCONSTRAINT c_p_id_fkey FOREIGN KEY (p_id) REFERENCES public.p(id) ON DELETE CASCADE,\n"
        "\tINDEX c_p_id_idx (p_id ASC) STORING (y),\n"
        "\tUNIQUE INDEX c_u_key (u ASC),\n"
        "\tCONSTRAINT positive CHECK (u > 0)\n"
        ");"
    )


def test_the_output_makes_the_same_table_again(db: DB) -> None:
    db.sql("CREATE TABLE p (id INT PRIMARY KEY)")
    db.sql(
        "CREATE TABLE c (id INT PRIMARY KEY, p_id INT REFERENCES p, u INT UNIQUE, "
        "h INT NOT VISIBLE, INDEX (p_id), FAMILY a (id, p_id), FAMILY b (u, h))"
    )
    db.sql("CREATE TABLE nokey (v STRING)")
    for name in ("c", "nokey"):
        before = _show(db, name)
        db.sql(f"DROP TABLE {name}")
        db.sql(before[1])
        assert _show(db, name) == before
    db.sql("INSERT INTO c (id, u, h) VALUES (1, 2, 3)")
    assert db.sql("SELECT * FROM c").rows == [(1, None, 2)]
    assert db.sql("SELECT h FROM c").rows == [(3,)]


def test_defaults_are_shown_with_cockroachdbs_type_annotations_and_read_back(db: DB) -> None:
    """A constant DEFAULT is annotated with its column's type, ``now()`` (a function of
    several result types) too; a boolean is lower case; unique_rowid() and
    gen_random_uuid() are bare. The output makes the same table again, whose SHOW
    CREATE TABLE is the same text, and whose defaults give the same values."""
    db.sql(
        "CREATE TABLE d (k INT PRIMARY KEY, v INT DEFAULT 0, n INT DEFAULT -3, "
        "s STRING DEFAULT 'x', f FLOAT DEFAULT 1.5, m DECIMAL DEFAULT 1.50, "
        "b BOOL DEFAULT true, at TIMESTAMPTZ DEFAULT now(), "
        "r INT DEFAULT unique_rowid(), u UUID DEFAULT gen_random_uuid(), e INT DEFAULT 1 + 2)"
    )
    shown = _show(db, "d")
    assert shown[1].splitlines()[1:12] == [
        "\tk INT8 NOT NULL,",
        "\tv INT8 NULL DEFAULT 0:::INT8,",
        "\tn INT8 NULL DEFAULT -3:::INT8,",
        "\ts STRING NULL DEFAULT 'x':::STRING,",
        "\tf FLOAT8 NULL DEFAULT 1.5:::FLOAT8,",
        "\tm DECIMAL NULL DEFAULT 1.50:::DECIMAL,",
        "\tb BOOL NULL DEFAULT true,",
        "\tat TIMESTAMPTZ NULL DEFAULT now():::TIMESTAMPTZ,",
        "\tr INT8 NULL DEFAULT unique_rowid(),",
        "\tu UUID NULL DEFAULT gen_random_uuid(),",
        "\te INT8 NULL DEFAULT 1 + 2,",
    ]
    db.sql("DROP TABLE d")
    db.sql(shown[1])
    assert _show(db, "d") == shown
    db.sql("INSERT INTO d (k) VALUES (1)")
    assert db.sql("SELECT v, n, s, f, m::STRING, b, at IS NOT NULL, e FROM d").rows == [
        (0, -3, "x", 1.5, "1.50", True, True, 3)
    ]
