"""percentile_disc and percentile_cont over the SQL port: the result columns carry
their types at Describe time (the value's type, FLOAT or INTERVAL, or an array of it
for an array of fractions), so psycopg reads them as those types."""

from __future__ import annotations

import datetime

import psycopg

from feedkv import DB

FLOAT8, INTERVAL, INT8, FLOAT8_ARRAY, INT8_ARRAY = 701, 1186, 20, 1022, 1016


def test_percentiles_go_out_with_their_types(db: DB) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute("CREATE TABLE m (k INT PRIMARY KEY, f FLOAT, i INTERVAL)")
        conn.execute(
            "INSERT INTO m VALUES (1, 1.0, '1 day'), (2, 2.0, '2 days'), (3, 4.0, '4 days')"
        )
        cursor = conn.execute(
            "SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY f),"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY i),"
            " percentile_disc(0.5) WITHIN GROUP (ORDER BY k),"
            " percentile_cont(ARRAY[0, 0.75]) WITHIN GROUP (ORDER BY f),"
            " percentile_disc(ARRAY[0.1, 1]) WITHIN GROUP (ORDER BY k DESC)"
            " FROM m WHERE k > %s",
            (0,),
        )
        assert cursor.description is not None
        assert [d.type_code for d in cursor.description] == [
            FLOAT8,
            INTERVAL,
            INT8,
            FLOAT8_ARRAY,
            INT8_ARRAY,
        ]
        assert cursor.fetchall() == [(1.5, datetime.timedelta(days=2), 2, [1.0, 3.0], [3, 1])]
