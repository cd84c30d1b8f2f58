"""Cluster settings: ``spark.master``, set, shown and reset in SQL, kept in the store,
and what a node's Spark jobs run on unless the node was given ``--spark-master``."""

from __future__ import annotations

from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError


def shown(db: DB) -> str:
    result = db.sql("SHOW CLUSTER SETTING spark.master")
    assert result.columns == ("spark.master",)
    [(value,)] = result.rows
    return str(value)


def test_spark_master_is_set_shown_reset_and_kept_across_restarts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with feedkv.connect(store, changefeed_runner="thread") as db:
        assert shown(db) == ""
        assert db.jobs_spark_master() is None
        db.sql("SET CLUSTER SETTING spark.master = 'spark://10.0.0.1:7077'")
        assert shown(db) == "spark://10.0.0.1:7077"
        assert db.jobs_spark_master() == "spark://10.0.0.1:7077"
    with feedkv.connect(store, changefeed_runner="thread") as db:
        assert shown(db) == "spark://10.0.0.1:7077"
        db.sql("SET CLUSTER SETTING spark.master TO DEFAULT")
        assert shown(db) == ""
        db.sql("SET CLUSTER SETTING spark.master TO 'local[2]'")
        db.sql("RESET CLUSTER SETTING spark.master")
        assert shown(db) == ""


def test_a_nodes_own_spark_master_comes_before_the_setting(tmp_path: Path) -> None:
    with feedkv.connect(
        tmp_path / "store", changefeed_runner="thread", spark_master="local[1]"
    ) as db:
        db.sql("SET CLUSTER SETTING spark.master = 'spark://10.0.0.1:7077'")
        assert db.jobs_spark_master() == "local[1]"


@pytest.mark.parametrize(
    ("statement", "code", "says"),
    [
        ("SET CLUSTER SETTING spark.nope = 'x'", "42704", "unknown cluster setting 'spark.nope'"),
        ("SHOW CLUSTER SETTING nope", "42704", "feedkv has cluster.organization, jobs"),
        ("SET CLUSTER SETTING spark.master = 7077", "22023", "not a Spark master URL"),
        ("SET CLUSTER SETTING spark.master = local", "42601", "a string, true, false"),
        ("SET CLUSTER SETTING spark.master", "42601", "expected = '<value>'"),
        ("SET CLUSTER SETTING spark.master 'x'", "42601", "expected = '<value>'"),
        ("RESET CLUSTER SETTING spark.master now", "42601", "unexpected input"),
        ("SHOW CLUSTER SETTING", "42601", "expected a setting name"),
        ("SET CLUSTER SETTING spark.master = 'nonsense'", "22023", "not a Spark master URL"),
    ],
)
def test_bad_setting_statements_are_refused_and_change_nothing(
    db: DB, statement: str, code: str, says: str
) -> None:
    db.sql("SET CLUSTER SETTING spark.master = 'local[2]'")
    with pytest.raises(SQLError, match=says) as caught:
        db.sql(statement)
    assert caught.value.code == code
    assert shown(db) == "local[2]"


def test_a_setting_changes_outside_transactions_only(db: DB) -> None:
    session = db.session()
    session.execute("BEGIN")
    assert session.execute("SHOW CLUSTER SETTING spark.master").rows == [("",)]
    with pytest.raises(SQLError) as caught:
        session.execute("SET CLUSTER SETTING spark.master = 'local[1]'")
    assert caught.value.code == "25001"
    session.execute("ROLLBACK")
    assert shown(db) == ""


def test_only_an_admin_changes_settings(db: DB) -> None:
    db.sql("CREATE USER viewer")
    with pytest.raises(SQLError) as caught:
        db.session(user="viewer").execute("SET CLUSTER SETTING spark.master = 'local[1]'")
    assert caught.value.code == "42501"
    assert caught.value.message == (
        "user viewer does not have the admin role needed to SET CLUSTER SETTING"
    )
    assert shown(db) == ""


def test_time_until_store_dead_is_set_shown_and_refused_when_not_a_duration(
    tmp_path: Path,
) -> None:
    from feedkv.server.zones import read_zone_settings

    with feedkv.connect(tmp_path / "store", changefeed_runner="thread") as db:

        def value() -> str:
            [(shown,)] = db.sql("SHOW CLUSTER SETTING server.time_until_store_dead").rows
            return str(shown)

        assert value() == "5m0s"
        assert read_zone_settings(db).time_until_store_dead_ns is None
        db.sql("SET CLUSTER SETTING server.time_until_store_dead = '15s'")
        assert value() == "15s"
        assert read_zone_settings(db).time_until_store_dead_ns == 15_000_000_000
        for bad in ("'soon'", "'0s'"):
            with pytest.raises(SQLError) as raised:
                db.sql(f"SET CLUSTER SETTING server.time_until_store_dead = {bad}")
            assert raised.value.code == "22023"
        assert value() == "15s"
        db.sql("RESET CLUSTER SETTING server.time_until_store_dead")
        assert value() == "5m0s"


def test_kv_rangefeed_enabled_is_always_on_as_the_changefeed_tutorials_ask(db: DB) -> None:
    """CockroachDB's changefeed tutorials start with ``SET CLUSTER SETTING
    kv.rangefeed.enabled = true``, which feedkv refused as a syntax error (a bool, not
    a string) and then as an unknown setting. Rangefeeds are always on here: setting it
    true does nothing, false is refused, and it shows true."""
    db.sql("SET CLUSTER SETTING kv.rangefeed.enabled = true")
    db.sql("SET CLUSTER SETTING kv.rangefeed.enabled = 'true'")
    db.sql("RESET CLUSTER SETTING kv.rangefeed.enabled")
    assert db.sql("SHOW CLUSTER SETTING kv.rangefeed.enabled").rows == [(True,)]
    with pytest.raises(SQLError) as refused:
        db.sql("SET CLUSTER SETTING kv.rangefeed.enabled = false")
    assert refused.value.code == "0A000"
    assert "cannot be turned off" in refused.value.message


def test_version_shows_the_cockroachdb_version_feedkv_answers_as(db: DB) -> None:
    result = db.sql("SHOW CLUSTER SETTING version")
    assert (result.columns, result.rows) == (("version",), [("23.1",)])
    [(version,)] = db.sql("SELECT version()").rows
    assert " v23.1." in version  # the two agree
    assert db.sql("SET CLUSTER SETTING version = '23.1'").tag == "SET CLUSTER SETTING"
    with pytest.raises(SQLError) as caught:
        db.sql("SET CLUSTER SETTING version = '24.1'")
    assert caught.value.code == "22023"
    assert db.sql("SHOW CLUSTER SETTING version").rows == [("23.1",)]


def test_cluster_organization_is_kept_shown_and_reset(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with feedkv.connect(store, changefeed_runner="thread") as db:
        assert db.sql("SHOW CLUSTER SETTING cluster.organization").rows == [("",)]
        db.sql("SET CLUSTER SETTING cluster.organization = 'Acme Co'")
    with feedkv.connect(store, changefeed_runner="thread") as db:
        result = db.sql("SHOW CLUSTER SETTING cluster.organization")
        assert (result.columns, result.rows) == (("cluster.organization",), [("Acme Co",)])
        db.sql("RESET CLUSTER SETTING cluster.organization")
        assert db.sql("SHOW CLUSTER SETTING cluster.organization").rows == [("",)]


@pytest.mark.parametrize("setting", ["server.time_until_store_dead", "jobs.retention_time"])
@pytest.mark.parametrize(("value", "words"), [("soon", "bad duration"), ("0s", "must be above 0")])
def test_a_duration_setting_refuses_a_bad_value_naming_itself(
    db: DB, setting: str, value: str, words: str
) -> None:
    with pytest.raises(SQLError) as raised:
        db.sql(f"SET CLUSTER SETTING {setting} = '{value}'")
    assert raised.value.code == "22023"
    assert setting in str(raised.value) and words in str(raised.value)


@pytest.mark.parametrize("form", ["SHOW CLUSTER SETTINGS", "SHOW ALL CLUSTER SETTINGS"])
def test_show_cluster_settings_lists_every_setting_with_its_value(db: DB, form: str) -> None:
    """CockroachDB's SHOW [ALL] CLUSTER SETTINGS: each setting, its value (set or the
    default), type and description, in name order."""
    db.sql("SET CLUSTER SETTING cluster.organization = 'acme'")
    result = db.sql(form)
    assert result.columns == ("variable", "value", "setting_type", "description")
    shown = {name: (value, kind) for name, value, kind, _description in result.rows}
    assert [row[0] for row in result.rows] == sorted(shown)
    assert shown["cluster.organization"] == ("acme", "s")
    assert shown["server.time_until_store_dead"] == ("5m0s", "d")
    assert shown["kv.rangefeed.enabled"] == ("true", "b")
    assert shown["version"] == ("23.1", "m")
    assert all(description for *_rest, description in result.rows)
