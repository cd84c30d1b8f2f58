"""The node process, the composition root: :mod:`.node` wires a store, its rangefeeds
and the gRPC port; :mod:`.jobs` wires the node's changefeed jobs (which runner runs
them, and the history they keep from garbage collection).

Everything below is written against narrow protocols (a
:class:`~feedkv.rangefeed.feed_client.FeedClient`, a
:class:`~feedkv.changefeed.job.Job`); this is where the concrete pieces meet.
:func:`feedkv.connect` opens a node through it.
"""
