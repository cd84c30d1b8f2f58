"""A Spark changefeed job's executors learn the identity of the node that runs the job
through the data source's ``node`` option, so the enriched envelope's ``source`` names
the cluster and node on the Spark runner too (no Spark session needed here)."""

from __future__ import annotations

import pytest

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.enriched_source import FeedSource
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.errors import InvalidArgumentError
from feedkv.spark.changefeed_job import JobOptions, encode_node, encode_spec
from feedkv.util.hlc import Timestamp

SPEC = encode_spec(ChangefeedSpec((), {}, ChangefeedOptions(), Timestamp(1, 0)))


def test_the_node_option_round_trips() -> None:
    node = FeedSource(cluster_id="c-1", node_id="3", node_name="10.0.0.3")
    options = JobOptions.from_options(
        {"url": "feedkv://x", "spec": SPEC, "job_id": "9", "node": encode_node(node)}
    )
    assert options.node == node and options.job_id == 9


def test_without_the_option_the_node_is_unknown() -> None:
    options = JobOptions.from_options({"url": "feedkv://x", "spec": SPEC})
    assert options.node == FeedSource()


@pytest.mark.parametrize("text", ["not json", '{"planet": "mars"}', "[1]"])
def test_a_bad_node_option_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="option 'node' is not a node's identity"):
        JobOptions.from_options({"url": "feedkv://x", "spec": SPEC, "node": text})
