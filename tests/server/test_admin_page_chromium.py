"""The admin page in a real browser: headless Chromium (Debian's ``chromium``) driven
over the DevTools protocol (:mod:`feedkv.testing.chromium`) loads ``/`` from a node,
with no console error, watches a changefeed's lag grow while its sink refuses and fall
as it catches up, and pauses it with the page's button. Screenshots go to the test's
temporary directory (their paths are printed: ``pytest -s`` shows them)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.testing.chromium import Chromium, ChromiumError, chromium_binary
from feedkv.testing.webhook_endpoint import WebhookEndpoint

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="needs Debian's chromium (make installs it; it could not be installed here)",
)

DEADLINE = 60.0
CONFIG = StoreConfig(
    closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
)
BEHIND_S = 3.0  # the lag the page must show while the sink refuses


@pytest.fixture
def endpoint() -> Iterator[WebhookEndpoint]:
    """A webhook endpoint that answers 503 until it recovers."""
    with WebhookEndpoint.refusing(503) as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = feedkv.connect(
        tmp_path / "store",
        config=CONFIG,
        changefeed_runner="thread",
        http_addr="127.0.0.1:0",
        admin_sample_s=0.2,
    )
    yield database
    database.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    with Chromium(tmp_path / "chromium-profile") as chromium:
        yield chromium


def test_the_page_shows_a_feed_catching_up_and_pauses_it(
    db: DB, endpoint: WebhookEndpoint, browser: Chromium, tmp_path: Path
) -> None:
    assert db.node is not None
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, item STRING)")
    values = ", ".join(f"({i}, 'item-{i}')" for i in range(200))
    db.sql(f"INSERT INTO orders VALUES {values}")
    config = json.dumps({"Retry": {"Max": 1, "Backoff": "50ms"}})
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR orders INTO '{endpoint.uri()}' "
        f"WITH resolved='200ms', min_checkpoint_frequency='200ms', webhook_sink_config='{config}', "
        "webhook_auth_header='Bearer s3cret'"
    ).rows[0][0]
    feed = f'section.feed[data-job-id="{job_id}"]'
    lag = f"(() => {{ const e = document.querySelector('{feed} .lag');"
    lag += " return e && e.dataset.lagS !== '' ? Number(e.dataset.lagS) : null; })()"

    browser.navigate(db.node.http_url + "/?refresh=200")
    browser.wait_for(f"document.querySelector('{feed}') !== null", what="the feed on the page")
    shown = browser.evaluate(f"document.querySelector('{feed}').textContent")
    # the node's changefeed buffers against its limits (512 MiB, 4 GiB by default)
    buffers = browser.evaluate("document.getElementById('buffers').textContent")
    assert buffers.startswith("changefeed buffers: ") and "of 512.0 MiB in memory" in buffers
    assert "of 4.0 GiB on disk" in buffers
    assert "127.0.0.1" in shown and "s3cret" not in shown and "redacted" in shown

    # the sink refuses every batch: the feed cannot move, its lag grows
    behind = browser.poll(
        lambda: (value := browser.evaluate(lag)) is not None and value >= BEHIND_S and value,
        timeout_s=DEADLINE,
        what=f"the page to show a lag of {BEHIND_S} s or more",
    )
    shot = browser.screenshot(tmp_path / "1-behind.png")
    print(f"admin page, feed behind (lag {behind:.1f} s): {shot}")

    # the sink takes the batches: the feed catches up, the page shows the lag falling
    endpoint.recover()
    caught_up = browser.poll(
        lambda: (value := browser.evaluate(lag)) is not None and value < 1.0 and str(value),
        timeout_s=DEADLINE,
        what="the page to show the lag under a second",
    )
    assert float(caught_up) < behind
    drawn = browser.evaluate(
        f"document.querySelector('{feed} .lag-line').getAttribute('points').split(' ').length"
    )
    assert drawn >= 2  # the chart has a line through the samples
    shot = browser.screenshot(tmp_path / "2-caught-up.png")
    print(f"admin page, feed caught up (lag {float(caught_up):.2f} s): {shot}")

    # the page's pause button pauses the job. NB: once the status no longer names the
    # sink's error (a line or two shorter): the button must not move between the look
    # at where it is and the click
    browser.wait_for(
        f"(document.querySelector('{feed} .running-status') || {{}}).textContent"
        " === undefined || document.querySelector('"
        f"{feed} .running-status').textContent.startsWith('running: resolved=')",
        timeout_s=DEADLINE,
        what="the feed's status to say it is running again",
    )
    browser.click(f'{feed} button[data-action="pause"]')
    browser.wait_for(
        f"document.querySelector('{feed}').dataset.status === 'paused'",
        timeout_s=DEADLINE,
        what="the page to show the feed paused",
    )
    record = db.changefeeds.record(job_id)
    assert record is not None and record.status == "paused"
    assert (
        browser.evaluate(
            f"document.querySelector('{feed} button[data-action=\"resume\"]').disabled"
        )
        is False
    )
    shot = browser.screenshot(tmp_path / "3-paused.png")
    print(f"admin page, feed paused: {shot}")

    assert browser.errors == []


def test_a_page_that_cannot_load_is_an_error_naming_it(browser: Chromium) -> None:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    with pytest.raises(ChromiumError, match=f"cannot load {url}"):
        browser.navigate(url)
