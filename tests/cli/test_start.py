"""``feedkv start``'s settings from its flags."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.cli.main import main
from feedkv.cli.start import store_config
from feedkv.testing.node_process import NodeProcess


def test_merges_start_below_a_quarter_of_the_maximum_range_size() -> None:
    config = store_config("1s", "5s", "64MiB")
    assert config.range_max_bytes == 64 << 20
    assert config.range_min_bytes == 16 << 20


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--closed-ts-target", "-1s"], "--closed-ts-target '-1s' is negative"),
        (["--closed-ts-target=-200ms"], "--closed-ts-target '-200ms' is negative"),
        (["--txn-liveness=0s"], "--txn-liveness '0s' must be more than zero"),
        (["--txn-liveness", "800ms"], "--txn-liveness '800ms' is below the minimum, 2s"),
        (["--txn-liveness=1s"], "--txn-liveness '1s' is below the minimum, 2s"),
        (["--range-max-bytes", "1"], "--range-max-bytes '1' is below the minimum, 64KiB"),
        (["--closed-ts-target", "soon"], "bad duration 'soon'"),
        (["--lease-transfer-wait", "-1s"], "--lease-transfer-wait '-1s' is negative"),
        (["--rebalance-interval=-1s"], "--rebalance-interval '-1s' is negative"),
        (["--lease-transfer-wait", "later"], "bad duration 'later'"),
        (["--raft-addr", "nowhere"], "cannot listen on 'nowhere': expected HOST:PORT"),
        (["--batch-addr", "nowhere"], "cannot listen on 'nowhere': expected HOST:PORT"),
    ],
)
def test_start_refuses_settings_out_of_range_naming_the_flag(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad value is named, in either form of the flag (``--flag -1s`` too, which
    argparse alone takes for an option), and no store is created."""
    assert main(["start", "--store", str(tmp_path / "store"), *flags]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_start_without_certs_dir_or_insecure_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Secure by default, as CockroachDB: a node never serves plaintext unasked."""
    assert main(["start", "--store", str(tmp_path / "store")]) == 1
    err = capsys.readouterr().err
    assert "secure by default: give --certs-dir DIR" in err and "--insecure" in err
    assert not (tmp_path / "store").exists()


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as other:  # another process's listener
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


@pytest.mark.parametrize(
    "flag", ["--listen", "--sql-addr", "--http-addr", "--raft-addr", "--batch-addr"]
)
def test_start_on_a_port_in_use_says_which_and_makes_no_store(
    flag: str, taken_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = {"--listen": "127.0.0.1:0", "--sql-addr": "127.0.0.1:0", "--http-addr": "127.0.0.1:0"}
    ports[flag] = f"127.0.0.1:{taken_port}"
    args = [arg for pair in ports.items() for arg in pair]
    assert main(["start", "--store", str(tmp_path / "store"), "--insecure", *args]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{taken_port} ({flag}): Address already in use" in err
    assert not (tmp_path / "store").exists()


def test_start_refuses_both_certs_dir_and_insecure(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["start", "--store", str(tmp_path / "s"), "--certs-dir", "c", "--insecure"])


@pytest.mark.slow(20)
def test_an_insecure_node_warns_once_on_stderr_and_in_its_log(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "n", "--insecure", "--changefeed-runner", "thread")
    assert node.terminate() == 0  # NB: after exit, all it wrote is there
    stderr = node.log.read_text()
    assert stderr.count("RUNNING IN INSECURE MODE") == 1, stderr
    assert "feedkv: WARNING feedkv.node: RUNNING IN INSECURE MODE (--insecure)" in stderr
    logged = (tmp_path / "n" / "logs" / "feedkv.log").read_text()
    assert logged.count("RUNNING IN INSECURE MODE") == 1


@pytest.mark.slow(20)
def test_a_node_serving_sql_loads_duckdb_before_it_says_where_it_serves(tmp_path: Path) -> None:
    """``feedkv start`` loads DuckDB and pyarrow's dataset scan before it prints its
    URLs, so neither its first analytic query (it paid 0.1 s of CPU, the client
    waiting) nor a client's first statements pay for it; and the node still stops when
    told."""
    node = NodeProcess(tmp_path / "n", "--insecure", "--changefeed-runner", "thread")
    mapped = Path(f"/proc/{node.process.pid}/maps").read_text()
    assert "/_duckdb." in mapped
    assert "/_dataset." in mapped
    assert node.terminate() == 0
