"""Changefeeds: row-level change streams from SQL tables into sinks.

The parts, in the order a row change flows through them: :mod:`.options` (the ``WITH``
options), :mod:`.schema_history` and :mod:`.rows` (KV changes to row changes, decoded
with the schema of their moment), :mod:`.encoder` (envelopes and formats),
:mod:`.sink` (the sink registry and batcher; clients in :mod:`.sinks`) and
:mod:`.changefeed` (the loop that runs one changefeed from start to end).
"""
