"""The admin page's JSON and buttons on a node's HTTP port (a real node, real HTTP):
what the page shows of nodes, ranges and changefeeds, and what its buttons do, with
privileges checked on a secure node."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.security.scram import unknown_user_verifier
from feedkv.server.admin import span_text
from feedkv.server.http import ADMIN_HEADER, OVERVIEW_PATH
from feedkv.sql.row_codec import table_prefix
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
CONFIG = StoreConfig(
    closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = feedkv.connect(
        tmp_path / "store",
        config=CONFIG,
        changefeed_runner="thread",
        http_addr="127.0.0.1:0",
        admin_sample_s=0.05,
    )
    database.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    database.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    yield database
    database.close()


def overview(url: str, **kwargs: Any) -> dict[str, Any]:
    response = httpx.get(url + OVERVIEW_PATH, **kwargs)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def feed_of(url: str, job_id: int, **kwargs: Any) -> dict[str, Any]:
    [feed] = [f for f in overview(url, **kwargs)["changefeeds"] if f["job_id"] == str(job_id)]
    return feed


def act(url: str, job_id: int | str, action: str, **kwargs: Any) -> httpx.Response:
    headers = {ADMIN_HEADER: "1", **kwargs.pop("headers", {})}
    return httpx.post(f"{url}/_admin/v1/jobs/{job_id}/{action}", headers=headers, **kwargs)


def create_feed(
    db: DB, tmp_path: Path, options: str = "resolved='100ms', min_checkpoint_frequency='100ms'"
) -> int:
    sink = f"file://{tmp_path}/out?AWS_SECRET_ACCESS_KEY=hunter2"
    job_id: int = db.sql(f"CREATE CHANGEFEED FOR t INTO '{sink}' WITH {options}").rows[0][0]
    return job_id


def test_the_page_and_its_assets_are_served_with_no_outside_source(db: DB) -> None:
    assert db.node is not None
    url = db.node.http_url
    page = httpx.get(url + "/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http://" not in page.text and "https://" not in page.text
    for asset, kind in (("/admin.js", "text/javascript"), ("/admin.css", "text/css")):
        response = httpx.get(url + asset)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(kind)
    missing = httpx.get(url + "/nope")
    assert missing.status_code == 404
    assert "/nope" in missing.json()["error"]


def test_overview_shows_nodes_ranges_and_a_running_feed(db: DB, tmp_path: Path) -> None:
    assert db.node is not None
    url = db.node.http_url
    job_id = create_feed(db, tmp_path)

    def ready() -> dict[str, Any] | None:
        feed = feed_of(url, job_id)
        return feed if feed["ranges"] and len(feed["history"]["t"]) >= 3 else None

    feed = wait_until(ready, timeout_s=DEADLINE, what="the feed's rangefeed and samples")
    data = overview(url)
    assert data["user"] == "root" and not data["secure"]
    assert [n["node_id"] for n in data["nodes"]] == [db.node.node_id]
    assert {r["range_id"] for r in data["ranges"]} == {
        d.range_id for d in db.node.store.descriptors()
    }
    assert feed["status"] == "running"
    assert "hunter2" not in feed["sink"] and "AWS_SECRET_ACCESS_KEY=redacted" in feed["sink"]
    assert "hunter2" not in feed["description"]
    assert feed["lag_s"] is not None and feed["lag_s"] >= 0
    assert feed["runner"] == db.node.node_id
    assert feed["scan_fraction"] is None  # its scan is over: it follows its rangefeed
    [piece] = feed["ranges"]
    assert piece["resolved"] and piece["range_id"] is not None
    # spans read as CockroachDB's pages show them, not as Python's bytes
    assert piece["span"].startswith("/Table/") and "b'" not in piece["span"]
    assert all("b'" not in r["span"] for r in data["ranges"])
    assert min(r["span"] for r in data["ranges"]).startswith("/Min - ")
    history = feed["history"]
    assert len(history["t"]) == len(history["lag_s"]) == len(history["rows_per_s"])
    assert history["t"] == sorted(history["t"])


def test_the_buttons_pause_resume_and_cancel_a_job(db: DB, tmp_path: Path) -> None:
    assert db.node is not None
    url = db.node.http_url
    job_id = create_feed(db, tmp_path)
    assert act(url, job_id, "pause").status_code == 200
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    assert feed_of(url, job_id)["status"] == "paused"
    assert act(url, job_id, "resume").status_code == 200
    wait_until(lambda: feed_of(url, job_id)["status"] == "running", timeout_s=DEADLINE)
    assert act(url, job_id, "cancel").status_code == 200
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    assert feed_of(url, job_id)["status"] == "canceled"
    assert feed_of(url, job_id)["lag_s"] is None
    again = act(url, job_id, "pause")
    assert again.status_code == 409
    assert "canceled" in again.json()["error"]


def test_bad_actions_are_refused_saying_why(db: DB, tmp_path: Path) -> None:
    assert db.node is not None
    url = db.node.http_url
    job_id = create_feed(db, tmp_path)
    unknown = act(url, job_id, "fly")
    assert unknown.status_code == 400 and "'fly'" in unknown.json()["error"]
    not_a_number = act(url, "12x", "pause")
    assert not_a_number.status_code == 400 and "'12x'" in not_a_number.json()["error"]
    missing = act(url, 12345, "pause")
    assert missing.status_code == 404 and "12345" in missing.json()["error"]
    # a cross-site form cannot add the header: without it nothing happens
    forged = httpx.post(f"{url}/_admin/v1/jobs/{job_id}/pause")
    assert forged.status_code == 400 and ADMIN_HEADER in forged.json()["error"]
    assert feed_of(url, job_id)["status"] == "running"


def test_a_failed_feed_shows_its_error(db: DB, tmp_path: Path) -> None:
    assert db.node is not None
    url = db.node.http_url
    job_id = create_feed(db, tmp_path, "schema_change_policy='stop'")
    wait_until(lambda: feed_of(url, job_id)["ranges"], timeout_s=DEADLINE, what="the feed")
    db.sql("ALTER TABLE t ADD COLUMN w INT DEFAULT 1")
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    feed = feed_of(url, job_id)
    assert feed["status"] == "failed"
    assert "schema change" in feed["error"]


@pytest.fixture
def secure_db(tmp_path: Path) -> Iterator[tuple[DB, Path]]:
    certs = make_certs_dir(tmp_path / "pki", users=("root",))
    database = feedkv.connect(
        tmp_path / "store",
        config=CONFIG,
        changefeed_runner="thread",
        http_addr="127.0.0.1:0",
        certs_dir=certs,
    )
    database.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    database.sql("CREATE USER alice WITH PASSWORD 'alice-pw'")
    database.sql("CREATE USER carol WITH PASSWORD 'carol-pw'")
    database.sql("GRANT admin TO carol")
    yield database, certs
    database.close()


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_an_unknown_user_is_refused_as_a_wrong_password_is_after_the_same_work(
    secure_db: tuple[DB, Path],
) -> None:
    db, certs = secure_db
    assert db.node is not None
    tls = {"verify": ssl.create_default_context(cafile=certs / "ca.crt")}
    answers = []
    for user in ("alice", "nobody"):
        before = unknown_user_verifier.cache_info()
        refused = httpx.get(db.node.http_url + OVERVIEW_PATH, headers=basic(user, "nope"), **tls)
        after = unknown_user_verifier.cache_info()
        # the unknown user's password is checked too: against the unknown-user verifier
        checked_against_it = (after.hits + after.misses) - (before.hits + before.misses)
        assert checked_against_it == (1 if user == "nobody" else 0)
        error = refused.json()["error"].replace(repr(user), "USER")
        answers.append((refused.status_code, dict(refused.headers).get("www-authenticate"), error))
    assert answers[0] == answers[1]
    assert answers[0][0] == 401
    assert answers[0][2] == "wrong user name or password for USER"


def test_a_secure_node_asks_who_you_are_and_checks_privileges(
    secure_db: tuple[DB, Path], tmp_path: Path
) -> None:
    db, certs = secure_db
    assert db.node is not None
    url = db.node.http_url
    assert url.startswith("https://")
    tls = {"verify": ssl.create_default_context(cafile=certs / "ca.crt")}
    job_id = create_feed(db, tmp_path)
    for path in ("/", OVERVIEW_PATH):
        anonymous = httpx.get(url + path, **tls)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Basic")
    wrong = httpx.get(url + OVERVIEW_PATH, headers=basic("alice", "nope"), **tls)
    assert wrong.status_code == 401 and "alice" in wrong.json()["error"]
    assert httpx.get(url + "/_status/vars", **tls).status_code == 200  # scrapers need none
    alice = {"headers": basic("alice", "alice-pw"), **tls}
    assert overview(url, **alice)["changefeeds"] == []  # not hers
    refused = act(url, job_id, "pause", **alice)
    assert refused.status_code == 403 and "admin" in refused.json()["error"]
    carol = {"headers": basic("carol", "carol-pw"), **tls}
    assert feed_of(url, job_id, **carol)["user"] == "root"
    assert act(url, job_id, "pause", **carol).status_code == 200
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    assert feed_of(url, job_id, **carol)["status"] == "paused"

    # guessing: after five failures even the right password is refused for a while
    for _ in range(5):
        assert (
            httpx.get(url + OVERVIEW_PATH, headers=basic("alice", "guess"), **tls).status_code
            == 401
        )
    throttled = httpx.get(url + OVERVIEW_PATH, **alice)
    assert throttled.status_code == 401 and "too many failed logins" in throttled.json()["error"]
    assert overview(url, **carol)["user"] == "carol"  # another user is not held back


def test_spans_read_as_cockroachdbs_pretty_keys() -> None:
    assert span_text(b"", table_prefix(101)) == "/Min - /Table/101"
