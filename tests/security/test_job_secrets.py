"""Changefeed jobs keep their sink credentials sealed; ``file://`` sinks and lakes'
local tables stay in the node's external I/O directory; only admins name sinks that
write with the node's own access."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.sql import catalog
from feedkv.util.keys import KEY_MAX

PLANTED = ("PLANTED-PW-1", "PLANTED-TOKEN-2", "PLANTED-SASL-3")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    config = StoreConfig(closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, sync=False)
    database = feedkv.connect(
        tmp_path / "store",
        config=config,
        changefeed_runner="thread",
        external_io_dir=tmp_path / "store" / "extern",
    )
    database.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    yield database
    database.close()


def _create_secret_jobs(db: DB) -> list[int]:
    jobs = [
        db.sql(
            f"CREATE CHANGEFEED FOR t INTO 'webhook-https://user:{PLANTED[0]}@127.0.0.1:1/hook' "
            f"WITH webhook_auth_header='Bearer {PLANTED[1]}'"
        ).rows[0][0],
    ]
    return jobs


def test_job_records_hold_no_secret_in_clear(db: DB, tmp_path: Path) -> None:
    (job_id,) = _create_secret_jobs(db)
    rows = db.scan(b"\x00", KEY_MAX)
    assert any(kv.key.startswith(catalog.job_key(job_id)) for kv in rows)
    for kv in rows:
        for secret in PLANTED:
            assert secret.encode() not in kv.key + kv.value, kv.key
    shown = db.sql("SHOW CHANGEFEED JOBS").rows
    assert shown and not any(s in repr(shown) for s in PLANTED)
    # the job itself still has them
    record = db.changefeeds.record(job_id)
    assert record is not None and record.spec.sink_uri is not None
    assert PLANTED[0] in record.spec.sink_uri
    assert dict(record.spec.options.given)["webhook_auth_header"] == f"Bearer {PLANTED[1]}"
    db.sql(f"PAUSE JOB {job_id}")
    for path in (tmp_path / "store").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in PLANTED[:2]:
                assert secret.encode() not in data, path


def test_file_sinks_inside_the_external_io_directory_are_accepted(db: DB, tmp_path: Path) -> None:
    inside = tmp_path / "store" / "extern" / "feeds"
    job = db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{inside}'").rows[0][0]
    assert isinstance(job, int)


@pytest.mark.parametrize("where", ["outside", "dotdot", "symlink"])
def test_file_sinks_outside_the_external_io_directory_are_refused(
    db: DB, tmp_path: Path, where: str
) -> None:
    extern = tmp_path / "store" / "extern"
    extern.mkdir(exist_ok=True)
    (extern / "link").symlink_to(tmp_path)
    path = {
        "outside": tmp_path / "elsewhere",
        "dotdot": f"{extern}/../../elsewhere",
        "symlink": extern / "link" / "elsewhere",
    }[where]
    with pytest.raises(SQLError, match="outside the node's external I/O directory") as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{path}'")
    assert raised.value.code == "22023"
    assert not (tmp_path / "elsewhere").exists()


def test_a_user_sees_neither_other_users_jobs_nor_anyones_secrets(db: DB) -> None:
    (root_job,) = _create_secret_jobs(db)
    db.sql("CREATE USER alice")
    db.sql("GRANT CHANGEFEED, SELECT ON TABLE t TO alice")
    alice = db.session(user="alice")
    own = alice.execute(
        f"CREATE CHANGEFEED FOR t INTO 'webhook-https://a:{PLANTED[2]}@127.0.0.1:1/hook'"
    ).rows[0][0]
    seen = ""
    for query in ("SHOW CHANGEFEED JOBS", "SHOW JOBS", "SELECT * FROM crdb_internal.jobs"):
        rows = alice.execute(query).rows
        ids = {row[0] for row in rows}
        assert own in ids and root_job not in ids, query
        seen += repr(rows)
    seen += repr(alice.execute(f"SHOW CREATE CHANGEFEED {own}").rows)
    for statement in (f"SHOW CREATE CHANGEFEED {root_job}", f"SHOW CHANGEFEED JOB {root_job}"):
        try:
            seen += repr(alice.execute(statement).rows)
        except SQLError as exc:
            assert exc.code in ("42501", "42704"), exc
    assert not any(secret in seen for secret in PLANTED), seen


@pytest.mark.parametrize(
    "sink",
    [
        "delta://{outside}",
        "iceberg://cat/ns?warehouse={outside}",
        "iceberg://cat/ns?warehouse={inside}&catalog_uri=sqlite:///{outside}/cat.db",
    ],
    ids=["delta", "iceberg-warehouse", "iceberg-sqlite"],
)
def test_lake_sinks_outside_the_external_io_directory_are_refused(
    db: DB, tmp_path: Path, sink: str
) -> None:
    """A lake's local tables are files the node writes, as a file:// sink's are."""
    inside = tmp_path / "store" / "extern" / "lake"
    outside = tmp_path / "elsewhere"
    uri = sink.format(inside=inside, outside=outside)
    with pytest.raises(SQLError, match="outside the node's external I/O directory") as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO '{uri}'")
    assert raised.value.code == "22023"
    assert f"sink URI '{uri}'" in raised.value.message  # as written: delta:///...
    assert not outside.exists()
    job = db.sql(f"CREATE CHANGEFEED FOR t INTO 'delta://{inside}'").rows[0][0]
    assert isinstance(job, int)


@pytest.mark.parametrize(
    "sink",
    [
        "file://{extern}/alice",
        "nodelocal://self/alice",
        "delta://{extern}/alice-lake",
        "iceberg://cat/ns?warehouse={extern}/alice-ice",
        "iceberg://configured/ns",
        "experimental-sql://alice_made",
        "s3://bucket/alice?AWS_ENDPOINT=http://127.0.0.1:1",
        "gs://bucket/alice?AUTH=implicit",
        "gcpubsub://project?AUTH=implicit&region=us-east1",
        "kafka://127.0.0.1:1?sasl_enabled=true&sasl_mechanism=AWS_MSK_IAM"
        "&sasl_aws_region=us-east-1&sasl_aws_iam_role_arn=arn:aws:iam::123456789012:role/r"
        "&sasl_aws_iam_session_name=s",
    ],
)
def test_a_user_who_is_not_an_admin_cannot_use_the_nodes_own_access(
    db: DB, tmp_path: Path, sink: str
) -> None:
    """As CockroachDB's implicit access (nodelocal://, AUTH=implicit), which needs admin
    or EXTERNALIOIMPLICITACCESS: a sink that writes with the node's disk, cloud identity
    or SQL access could write into other users' files and tables, or anywhere the node
    may. A sink with credentials of its own is the user's to name."""
    extern = tmp_path / "store" / "extern"
    db.sql("CREATE USER alice")
    db.sql("GRANT CHANGEFEED ON TABLE t TO alice")
    alice = db.session(user="alice")
    uri = sink.format(extern=extern)
    with pytest.raises(SQLError, match="admin role needed to create a changefeed into") as raised:
        alice.execute(f"CREATE CHANGEFEED FOR t INTO '{uri}'")
    assert raised.value.code == "42501"
    assert not list(extern.glob("alice*"))
    assert "alice_made" not in repr(db.sql("SHOW TABLES").rows)
    # her own credentials are hers to use, and a job of hers cannot move to such a sink
    own = alice.execute("CREATE CHANGEFEED FOR t INTO 'webhook-https://127.0.0.1:1/hook'")
    job = own.rows[0][0]
    alice.execute(f"PAUSE JOB {job}")
    with pytest.raises(SQLError, match="admin role needed to create a changefeed into") as moved:
        alice.execute(f"ALTER CHANGEFEED {job} INTO '{uri}'")
    assert moved.value.code == "42501"
    # an admin may
    db.sql("GRANT admin TO alice")
    if sink.startswith("file://"):
        assert isinstance(alice.execute(f"CREATE CHANGEFEED FOR t INTO '{uri}'").rows[0][0], int)
