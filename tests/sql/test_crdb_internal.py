"""The ``crdb_internal`` virtual tables on a node of its own (the cluster's are tested on
three node processes in tests/server/test_local_cluster.py): CockroachDB's columns,
queries over them as over any rows, and the errors for a bad name or a non-admin."""

from __future__ import annotations

import datetime

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.util.build import BUILD_TAG


def test_gossip_nodes_lists_the_node_of_its_own_with_cockroachdbs_columns(any_db: DB) -> None:
    result = any_db.sql("SELECT * FROM crdb_internal.gossip_nodes")
    assert result.columns == (
        "node_id",
        "network",
        "address",
        "advertise_address",
        "sql_network",
        "sql_address",
        "advertise_sql_address",
        "locality",
        "build_tag",
        "started_at",
        "is_live",
        "ranges",
        "leases",
    )
    [row] = result.rows
    node = dict(zip(result.columns, row, strict=True))
    assert (node["node_id"], node["network"], node["locality"]) == (1, "tcp", "")
    assert (node["build_tag"], node["is_live"]) == (BUILD_TAG, True)
    assert node["ranges"] == len(any_db.ranges()) == node["leases"]


def test_gossip_liveness_shows_the_nodes_epoch_and_last_heartbeat(db: DB) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    result = db.sql(
        "SELECT node_id, epoch, draining, decommissioning, membership, updated_at "
        "FROM crdb_internal.gossip_liveness"
    )
    [(node_id, epoch, draining, decommissioning, membership, updated_at)] = result.rows
    assert (node_id, epoch, draining, decommissioning, membership) == (1, 1, False, False, "active")
    assert updated_at >= before - datetime.timedelta(seconds=1)


def test_virtual_tables_join_filter_and_aggregate_as_any_rows(db: DB) -> None:
    joined = db.sql(
        "SELECT n.node_id, l.epoch FROM crdb_internal.gossip_nodes AS n "
        "JOIN crdb_internal.gossip_liveness AS l ON n.node_id = l.node_id WHERE n.is_live"
    )
    assert joined.rows == [(1, 1)]
    assert db.sql("SELECT count(*) FROM crdb_internal.gossip_nodes WHERE NOT is_live").rows == [
        (0,)
    ]


def test_an_unknown_crdb_internal_table_is_named_with_the_known_ones(db: DB) -> None:
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT * FROM crdb_internal.gossip_nodez")
    assert raised.value.code == "42P01"
    assert '"crdb_internal.gossip_nodez" does not exist' in str(raised.value)
    assert "crdb_internal.gossip_nodes" in str(raised.value)


def test_only_the_admin_role_reads_the_nodes(db: DB) -> None:
    db.sql("CREATE USER alice")
    alice = db.session(user="alice")
    with pytest.raises(SQLError) as raised:
        alice.execute("SELECT * FROM crdb_internal.gossip_liveness")
    assert raised.value.code == "42501"
    assert "crdb_internal.gossip_liveness" in str(raised.value)


def test_node_id_is_the_sessions_gateway_node(db: DB) -> None:
    result = db.sql("SELECT crdb_internal.node_id(), crdb_internal.node_id() + 1 AS next")
    assert result.columns == ("crdb_internal.node_id", "next")
    assert result.rows == [(1, 2)]
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT crdb_internal.node_id(7)")
    assert raised.value.code == "42883"


FORCED = (
    "restart transaction: crdb_internal.force_retry(): TransactionRetryWithProtoRefreshError: "
    "forced by crdb_internal.force_retry()"
)


def test_force_retry_fails_a_younger_explicit_transaction_with_a_retryable_error(db: DB) -> None:
    """CockroachDB's crdb_internal.force_retry(interval): a transaction younger than the
    interval gets the 40001 a conflict would give (its message as CockroachDB's), and must
    start over; ROLLBACK TO SAVEPOINT cockroach_restart does that."""
    session = db.session()
    session.execute("BEGIN; SAVEPOINT cockroach_restart")
    with pytest.raises(SQLError) as raised:
        session.execute("SELECT crdb_internal.force_retry('1h':::INTERVAL)")
    assert (raised.value.code, raised.value.message) == ("40001", FORCED)
    assert session.execute("SHOW TRANSACTION STATUS").rows == [("Aborted",)]
    session.execute("ROLLBACK TO SAVEPOINT cockroach_restart")
    assert session.execute("SHOW TRANSACTION STATUS").rows == [("Open",)]
    session.execute("COMMIT")


def test_force_retry_retries_an_implicit_transaction_until_it_is_old_enough(db: DB) -> None:
    """An implicit transaction is retried on force_retry's 40001 as on a conflict's, its
    age counted from its first attempt, so it returns 0 once the interval has passed; a
    sequence (which a retry does not roll back) counts the attempts, as CockroachDB's
    logic tests count them."""
    db.sql("CREATE SEQUENCE s")
    assert db.sql("SELECT crdb_internal.force_retry('20ms')").rows == [(0,)]
    statement = "SELECT IF(nextval('s') < 3, crdb_internal.force_retry('1h':::INTERVAL), 0)"
    assert db.sql(statement).rows == [(0,)]
    assert db.sql("SELECT currval('s')").rows == [(3,)]
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT crdb_internal.force_retry(1)")
    assert raised.value.code == "42883"
