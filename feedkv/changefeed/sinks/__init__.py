"""The sinks' thin clients; :mod:`feedkv.changefeed.sink` holds the shared machinery."""
