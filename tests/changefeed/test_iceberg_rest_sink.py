"""``iceberg://`` into a REST catalog: a changefeed reaches it with ``catalog_uri=`` and
OAuth2 client credentials (kept out of ``SHOW CHANGEFEED JOBS``), or by the catalog's
name in pyiceberg's configuration; an outage of the catalog is retried without a
duplicate; a catalog that cannot be reached or refuses the credentials is refused at
CREATE. The catalog is :mod:`feedkv.testing.iceberg_rest` on loopback; the tables are
read back with pyiceberg's ``RestCatalog`` and DuckDB. (Every test of
``test_lake_sink.py`` runs against a REST catalog too.)"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import RestCatalog

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import SinkError, parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks.iceberg import IcebergPlace
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY
from feedkv.errors import SQLError
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

SECRET = "s3cret-of-the-feed"
CREDENTIAL = f"feedkv:{SECRET}"
FAST = "min_checkpoint_frequency='0s'"
T0 = Timestamp(1_700_000_000_000_000_000, 0)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[IcebergRestServer]:
    with IcebergRestServer(str(tmp_path / "rest"), credential=CREDENTIAL) as running:
        yield running


def sink_uri(server: IcebergRestServer, credential: str = CREDENTIAL) -> str:
    return f"iceberg://lake/feeds?catalog_uri={server.url}&credential={credential}"


def own_catalog(server: IcebergRestServer) -> RestCatalog:
    """pyiceberg's REST client of the server, opened apart from the sink's."""
    token_uri = f"{server.url}/v1/oauth/tokens"
    return RestCatalog(
        "lake", uri=server.url, credential=CREDENTIAL, **{"oauth2-server-uri": token_uri}
    )


def show(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    return dict(zip(result.columns, result.rows[0], strict=True))


def wait_past(db: DB, uri: str, job_id: int) -> feedkv.lake.Marker:
    end = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]

    def reached() -> feedkv.lake.Marker | None:
        error = show(db, job_id)["error"]
        if error:
            raise AssertionError(f"the changefeed failed: {error}")
        try:
            marker = feedkv.lake.read_consistent(uri)
        except SinkError:  # NB: this reader meets an injected outage too: it asks again
            return None
        return marker if marker is not None and Decimal(str(marker.resolved)) >= end else None

    marker = wait_until(reached, timeout_s=60, what="the lake's marker past the writes")
    assert marker is not None
    return marker


def as_of(db: DB, table: str, at: Any) -> list[dict[str, Any]]:
    result = db.sql(f"SELECT * FROM {table} AS OF SYSTEM TIME {at} ORDER BY k")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def test_a_mirror_in_a_rest_catalog_reads_back_everywhere_and_its_credential_stays_secret(
    db: DB, server: IcebergRestServer
) -> None:
    uri = sink_uri(server)
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 10), (2, 20)")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH {FAST}").rows
    db.sql("UPDATE a SET v = 11 WHERE k = 1")
    db.sql("DELETE FROM a WHERE k = 2")
    marker = wait_past(db, uri, job_id)

    source = as_of(db, "a", marker.resolved)
    assert feedkv.lake.read_tables(uri, marker)["a"].to_pylist() == source
    catalog = own_catalog(server)  # the table, as any REST client of the catalog sees it
    try:
        table = catalog.load_table(("feeds", "a"))
        snapshot = table.snapshot_by_id(marker.versions["a"])
        assert snapshot is not None and snapshot.summary is not None
        assert snapshot.summary[RESOLVED_KEY] <= str(marker.resolved)
        rows = table.scan(snapshot_id=marker.versions["a"]).to_arrow().to_pylist()
        assert sorted(rows, key=lambda r: r["k"]) == source
    finally:
        catalog.close()
    duck = feedkv.lake.duckdb_connect()
    try:
        scan = feedkv.lake.duckdb_scan(uri, "a", marker.versions["a"])
        assert duck.execute(f"SELECT k, v FROM {scan} ORDER BY k").fetchall() == [(1, 11)]
    finally:
        duck.close()

    shown = show(db, job_id)
    assert SECRET not in str(shown)
    assert "credential=redacted" in shown["sink_uri"]
    asked = [r for r in server.requests if r.path.startswith("/v1/namespaces")]
    assert asked and all((r.authorization or "").startswith("Bearer ") for r in asked)


def test_a_catalog_outage_is_retried_and_the_changelog_holds_each_change_once(
    db: DB, server: IcebergRestServer
) -> None:
    uri = sink_uri(server)
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 0)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH lake_mode='changelog', {FAST}"
    ).rows
    wait_past(db, uri, job_id)
    server.fail_next(4)  # the next window's loads and commit meet a catalog that is down
    for v in range(1, 4):
        db.sql(f"UPDATE a SET v = {v} WHERE k = 1")
    wait_past(db, uri, job_id)

    assert any(r.status == 503 for r in server.requests)
    changes = feedkv.lake.read_tables(uri)["a"].to_pylist()
    posts = sorted(r["v"] for r in changes if r["_change_type"] == "update_postimage")
    assert posts == [1, 2, 3]
    assert sorted(r["_change_type"] for r in changes).count("insert") == 1


def test_a_catalog_named_in_pyicebergs_configuration_is_opened_by_name(
    db: DB, server: IcebergRestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NB: pyiceberg's documented variables; the sink reads them when it opens the catalog
    monkeypatch.setenv("PYICEBERG_CATALOG__WAREHOUSE__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__WAREHOUSE__URI", server.url)
    monkeypatch.setenv("PYICEBERG_CATALOG__WAREHOUSE__CREDENTIAL", CREDENTIAL)
    monkeypatch.setenv(
        "PYICEBERG_CATALOG__WAREHOUSE__OAUTH2-SERVER-URI", f"{server.url}/v1/oauth/tokens"
    )
    uri = "iceberg://warehouse/feeds"
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 10)")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH {FAST}").rows
    marker = wait_past(db, uri, job_id)

    assert feedkv.lake.read_tables(uri, marker)["a"].to_pylist() == [{"k": 1, "v": 10}]
    assert any(r.path == "/v1/namespaces/feeds/tables/a" for r in server.requests)


@pytest.mark.parametrize(
    ("where", "code", "message"),
    [
        ("wrong credential", "22023", "cannot be used: cannot open the Iceberg catalog 'lake'"),
        ("no catalog there", "22023", "cannot be used: cannot open the Iceberg catalog 'lake'"),
        ("nothing listening", "08000", "cannot be reached: cannot open the Iceberg catalog"),
        ("credential without a secret", "22023", "credential must be <client_id>:<client_secret>"),
    ],
)
def test_a_rest_catalog_that_cannot_be_used_is_refused_at_create(
    db: DB, server: IcebergRestServer, where: str, code: str, message: str
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    uri = {
        "wrong credential": sink_uri(server, "feedkv:wrong"),
        "no catalog there": f"iceberg://lake/feeds?catalog_uri={server.url}/nothing/here",
        "nothing listening": f"iceberg://lake/feeds?catalog_uri=http://127.0.0.1:{closed}",
        "credential without a secret": sink_uri(server, "feedkv"),
    }[where]
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    with pytest.raises(SQLError, match=message) as caught:
        db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}'")
    assert caught.value.code == code
    assert SECRET not in str(caught.value)


# The URI's catalog, parsed without reaching it.


def place(uri: str) -> IcebergPlace:
    return IcebergPlace.of(parse_sink_uri(uri, sink_defaults(uri, parse_options((), now=T0))))


def test_a_uri_names_a_sql_a_rest_or_a_configured_catalog() -> None:
    sql = place("iceberg://cat/ns?warehouse=/w")
    assert (sql.kind, sql.properties["uri"], sql.staging) == (
        "sql",
        "sqlite:////w/cat.db",
        "/w/_feedkv_staging",
    )
    rest = place("iceberg://cat/ns?catalog_uri=https://c.example/api&credential=id:pw")
    assert rest.kind == "rest"
    assert rest.properties == {
        "uri": "https://c.example/api",
        "credential": "id:pw",
        "oauth2-server-uri": "https://c.example/api/v1/oauth/tokens",
    }
    assert place("iceberg://cat/ns?catalog_uri=http://c&warehouse=/w").staging == (
        "/w/_feedkv_staging"
    )
    configured = place("iceberg://cat/ns")
    assert (configured.kind, configured.properties) == ("configured", {})


@settings(max_examples=200, deadline=None)
@given(
    host=st.text(max_size=12),
    path=st.text(max_size=12),
    params=st.dictionaries(
        st.sampled_from(["warehouse", "catalog_uri", "token", "credential"]),
        st.one_of(st.text(max_size=16), st.sampled_from(["/w", "http://h:1", "a:b"])),
        max_size=4,
    ),
)
def test_any_iceberg_uri_names_a_catalog_or_is_refused_with_22023(
    host: str, path: str, params: dict[str, str]
) -> None:
    query = urlencode(params)
    uri = f"iceberg://{quote(host, safe='')}/{quote(path, safe='/')}" + (
        f"?{query}" if query else ""
    )
    try:
        found = place(uri)
    except SQLError as exc:
        assert exc.code == "22023", exc
        return
    assert found.kind in ("sql", "rest", "configured")
    assert found.catalog and found.namespace and "/" not in found.namespace
    assert os.path.isabs(found.staging)
    for secret in ("token", "credential"):  # secrets go to a REST catalog only
        if found.kind != "rest":
            assert secret not in found.properties
