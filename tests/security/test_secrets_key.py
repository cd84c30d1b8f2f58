"""The key that seals changefeed jobs' secrets lives in the certs directory, not in the
store: the store holds neither the secrets nor the key, and a node without the key its
jobs were sealed with refuses to start, naming the key, instead of losing them."""

from __future__ import annotations

import base64
import shutil
import stat
from pathlib import Path

import pytest

import feedkv
from feedkv.cli.main import main
from feedkv.errors import InvalidArgumentError
from feedkv.kv.store import StoreConfig
from feedkv.security.certs import create_ca
from feedkv.security.secrets import KEY_FILE, key_id, load_key, write_key
from feedkv.sql import catalog
from feedkv.testing.certs import make_certs_dir

CONFIG = StoreConfig(closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, sync=False)
PLANTED = ("PLANTED-KEYTEST-PW-1", "PLANTED-KEYTEST-HEADER-2")
SINK = f"webhook-https://u:{PLANTED[0]}@127.0.0.1:1/hook"


def _open(store: Path, certs: Path | None, listen: str | None = None) -> feedkv.DB:
    return feedkv.connect(
        store,
        config=CONFIG,
        changefeed_runner="thread",
        certs_dir=certs,
        external_io_dir=store / "extern",
        listen=listen,
    )


def _create_job(db: feedkv.DB) -> int:
    db.sql("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)")
    job = db.sql(
        f"CREATE CHANGEFEED FOR t INTO '{SINK}' WITH webhook_auth_header='Bearer {PLANTED[1]}'"
    ).rows[0][0]
    db.sql(f"PAUSE JOB {job}")
    assert isinstance(job, int)
    return job


def _assert_secrets_intact(db: feedkv.DB, job: int) -> None:
    record = db.changefeeds.record(job)
    assert record is not None
    assert record.spec.sink_uri == SINK
    assert dict(record.spec.options.given)["webhook_auth_header"] == f"Bearer {PLANTED[1]}"


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return make_certs_dir(tmp_path / "pki")


def test_create_ca_writes_the_secrets_key_beside_ca_crt_and_keeps_it(tmp_path: Path) -> None:
    certs, ca_key = tmp_path / "certs", tmp_path / "ca.key"
    create_ca(certs, ca_key)
    key_file = certs / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    first = load_key(key_file)
    create_ca(certs, ca_key, overwrite=True)  # a new CA; secrets it sealed must still open
    assert load_key(key_file) == first


def test_cert_create_secrets_key_writes_one_and_never_replaces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    certs = tmp_path / "certs"
    assert main(["cert", "create-secrets-key", "--certs-dir", str(certs)]) == 0
    key = load_key(certs / KEY_FILE)
    assert main(["cert", "create-secrets-key", "--certs-dir", str(certs)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert load_key(certs / KEY_FILE) == key


def test_a_malformed_key_file_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / KEY_FILE
    bad.write_text("not a key\n")
    with pytest.raises(InvalidArgumentError, match="is not a feedkv secrets key"):
        load_key(bad)


def test_the_store_holds_neither_the_secrets_nor_the_key(tmp_path: Path, certs: Path) -> None:
    store = tmp_path / "store"
    with _open(store, certs) as db:
        job = _create_job(db)
        assert db.get(catalog.SEALING_KEY) is None  # no key in the store
        _assert_secrets_intact(db, job)
    key = load_key(certs / KEY_FILE)
    needles = [*(s.encode() for s in PLANTED), key, base64.b64encode(key)]
    for path in _files(store):
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"{needle!r} found in {path}"


def test_a_node_without_its_key_refuses_to_start_and_loses_nothing(
    tmp_path: Path, certs: Path
) -> None:
    store = tmp_path / "store"
    with _open(store, certs) as db:
        job = _create_job(db)
    sealed_with = key_id(load_key(certs / KEY_FILE))

    keyless = tmp_path / "keyless"
    shutil.copytree(certs, keyless)
    (keyless / KEY_FILE).unlink()
    with pytest.raises(InvalidArgumentError, match=r"cannot read the secrets key .*create-ca"):
        _open(store, keyless)

    other = tmp_path / "other-key"
    shutil.copytree(certs, other)
    (other / KEY_FILE).unlink()
    write_key(other / KEY_FILE)
    with pytest.raises(InvalidArgumentError, match=f"sealed with the secrets key {sealed_with}"):
        _open(store, other)

    with pytest.raises(InvalidArgumentError, match="this node is insecure"):
        _open(store, None)

    with _open(store, certs) as db:  # the right key: nothing was lost
        _assert_secrets_intact(db, job)


def test_secrets_an_insecure_node_sealed_open_on_a_secure_one_and_move_to_its_key(
    tmp_path: Path, certs: Path
) -> None:
    store = tmp_path / "store"
    with _open(store, None) as db:
        job = _create_job(db)
        assert db.get(catalog.SEALING_KEY) is not None  # insecure: the store's own key
    with _open(store, certs) as db:
        _assert_secrets_intact(db, job)
        db.sql(f"RESUME JOB {job}")  # a write of the record seals it with the certs key
        db.sql(f"PAUSE JOB {job}")
        raw = db.get(catalog.job_key(job))
        assert raw is not None
        assert f"sealed:v2:{key_id(load_key(certs / KEY_FILE))}:".encode() in raw


def test_a_remote_client_without_the_key_gets_a_clear_error(tmp_path: Path, certs: Path) -> None:
    with _open(tmp_path / "store", certs, listen="127.0.0.1:0") as node_db:
        job = _create_job(node_db)
        assert node_db.node is not None
        url = node_db.node.url
        with feedkv.connect(url, certs_dir=certs) as client:  # the full certs dir
            _assert_secrets_intact(client, job)
        keyless = tmp_path / "client-certs"
        shutil.copytree(certs, keyless)
        (keyless / KEY_FILE).unlink()
        with (
            feedkv.connect(url, certs_dir=keyless) as client,
            pytest.raises(InvalidArgumentError, match="there is no secrets key at"),
        ):
            client.changefeeds.record(job)
