"""The loopback Iceberg REST catalog (:mod:`feedkv.testing.iceberg_rest`), driven by
pyiceberg's own ``RestCatalog``: namespaces, tables, commits whose requirements are
checked, the spec's errors, OAuth2 client credentials, and injected outages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg import exceptions as ice
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

from feedkv.testing.iceberg_rest import IcebergRestServer

CREDENTIAL = "client:s3cret"
ROWS = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array(["x", "y"])})


def connect(server: IcebergRestServer, credential: str = CREDENTIAL) -> RestCatalog:
    token_uri = f"{server.url}/v1/oauth/tokens"
    return RestCatalog(
        "rest", uri=server.url, credential=credential, **{"oauth2-server-uri": token_uri}
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[IcebergRestServer]:
    with IcebergRestServer(str(tmp_path / "warehouse"), credential=CREDENTIAL) as running:
        yield running


@pytest.fixture
def catalog(server: IcebergRestServer) -> Iterator[Any]:
    opened = connect(server)
    yield opened
    opened.close()


def test_namespaces_and_their_properties_round_trip(catalog: Any) -> None:
    catalog.create_namespace("feeds", {"owner": "cdc"})
    catalog.create_namespace(("a", "b"))

    assert sorted(catalog.list_namespaces()) == [("a",), ("feeds",)]
    assert catalog.list_namespaces("a") == [("a", "b")]
    assert catalog.load_namespace_properties("feeds")["owner"] == "cdc"
    summary = catalog.update_namespace_properties("feeds", {"owner", "gone"}, {"k": "v"})
    assert (summary.removed, summary.updated, summary.missing) == (["owner"], ["k"], ["gone"])
    assert catalog.namespace_exists(("a", "b")) and not catalog.namespace_exists("nope")
    with pytest.raises(ice.NamespaceAlreadyExistsError):
        catalog.create_namespace("feeds")
    with pytest.raises(ice.NoSuchNamespaceError):
        catalog.load_namespace_properties("nope")


def test_tables_are_created_written_and_read_back(catalog: Any) -> None:
    catalog.create_namespace("feeds")
    table = catalog.create_table(("feeds", "t"), ROWS.schema)
    table.append(ROWS)
    with table.transaction() as txn:  # one commit: a delete, an append and a property
        txn.delete("k == 1")
        txn.append(pa.table({"k": pa.array([3], pa.int64()), "v": pa.array(["z"])}))
        txn.set_properties({"feedkv.resolved": "10"})

    loaded = catalog.load_table(("feeds", "t"))
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 2, "v": "y"},
        {"k": 3, "v": "z"},
    ]
    assert loaded.properties["feedkv.resolved"] == "10"
    assert catalog.list_tables("feeds") == [("feeds", "t")]
    assert catalog.table_exists(("feeds", "t")) and not catalog.table_exists(("feeds", "u"))
    with pytest.raises(ice.TableAlreadyExistsError):
        catalog.create_table(("feeds", "t"), ROWS.schema)
    with pytest.raises(ice.NamespaceNotEmptyError):
        catalog.drop_namespace("feeds")
    catalog.drop_table(("feeds", "t"))
    with pytest.raises(ice.NoSuchTableError):
        catalog.load_table(("feeds", "t"))


def test_a_commit_whose_requirement_fails_is_refused_and_changes_nothing(catalog: Any) -> None:
    catalog.create_namespace("feeds")
    table = catalog.create_table(("feeds", "t"), ROWS.schema)
    table.append(ROWS)
    stale = catalog.load_table(("feeds", "t"))
    first = stale.current_snapshot().snapshot_id
    table.append(ROWS)  # another writer commits first

    requirement = AssertRefSnapshotId(ref="main", snapshot_id=first)
    update = SetPropertiesUpdate(updates={"written": "twice"})
    with pytest.raises(ice.CommitFailedException, match="main"):
        catalog.commit_table(stale, (requirement,), (update,))

    now = catalog.load_table(("feeds", "t"))
    assert "written" not in now.properties
    assert now.scan().to_arrow().num_rows == 4


def test_requests_need_a_token_from_the_servers_credential(server: IcebergRestServer) -> None:
    with pytest.raises(ice.OAuthError):
        connect(server, credential="client:wrong")
    with pytest.raises(ice.UnauthorizedError):  # no token: not even its /v1/config
        RestCatalog("rest", uri=server.url)
    catalog = connect(server)
    catalog.create_namespace("feeds")
    catalog.close()
    served = [r for r in server.requests if r.path == "/v1/namespaces" and r.status == 200]
    assert served and all(r.authorization and r.authorization.startswith("Bearer ") for r in served)


def test_an_injected_outage_answers_503_then_serves_again(
    server: IcebergRestServer, catalog: Any
) -> None:
    server.fail_next(1)
    with pytest.raises(ice.ServiceUnavailableError):
        catalog.create_namespace("feeds")
    catalog.create_namespace("feeds")
    assert catalog.list_namespaces() == [("feeds",)]
    assert [r.status for r in server.requests[-3:]] == [503, 200, 200]


def test_the_catalog_outlives_a_restart_of_its_server(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    with IcebergRestServer(warehouse) as first:
        catalog = RestCatalog("rest", uri=first.url)
        catalog.create_namespace("feeds")
        catalog.create_table(("feeds", "t"), ROWS.schema).append(ROWS)
        catalog.close()
    with IcebergRestServer(warehouse) as second:
        catalog = RestCatalog("rest", uri=second.url)
        assert catalog.load_table(("feeds", "t")).scan().to_arrow().num_rows == 2
        catalog.close()
