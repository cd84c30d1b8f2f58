"""Changefeeds: row-level change streams from SQL tables into sinks.

The parts, in the order a row change flows through them: :mod:`.options` (the ``WITH``
options), :mod:`.schema_history` and :mod:`.rows` (KV changes to row changes, decoded
with the schema of their moment), :mod:`.encoder` (envelopes and formats),
:mod:`.sink` (the sink registry and batcher; clients in :mod:`.sinks`) and
:mod:`.changefeed` (the loop that runs one changefeed from start to end).

Around them, the SQL statements and the jobs: :mod:`.create` plans ``CREATE
CHANGEFEED``; :mod:`.service` runs it and the job statements (:mod:`.control` for
``PAUSE`` / ``RESUME`` / ``CANCEL JOB``, :mod:`.alter`, :mod:`.cluster_settings`);
:mod:`.jobs` holds the job records, which a node's :mod:`.registry` runs, each as a
:class:`~feedkv.changefeed.job.Job` (:mod:`.thread_job`, or a Spark query).
"""
