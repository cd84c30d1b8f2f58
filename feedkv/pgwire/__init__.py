"""The PostgreSQL v3 wire protocol, so that psql, psycopg and other PostgreSQL clients
talk to feedkv unchanged (issue 39).

Written by hand: the maintained Python PostgreSQL libraries (psycopg 3, asyncpg,
pg8000, psycopg2) are clients only, and the server-side projects found (for example
``pgwire``-style toy servers and ``postgresql-wire-protocol`` samples) are unmaintained
and cover the simple query protocol alone. The protocol is small enough to own:

- :mod:`feedkv.pgwire.messages`: framing, frontend message parsing and backend message
  encoding (pure; a decoder fed bytes gives messages);
- :mod:`feedkv.pgwire.types`: PostgreSQL type OIDs for feedkv's SQL types and their text
  and binary formats;
- :mod:`feedkv.pgwire.auth`: the authentication step of the handshake;
- :mod:`feedkv.pgwire.copy`: COPY FROM STDIN and TO STDOUT (statements, text and CSV
  rows; pure);
- :mod:`feedkv.pgwire.catalog`: the ``pg_catalog`` and ``information_schema`` queries
  tools send, answered over an in-memory SQLite copy of the catalog;
- :mod:`feedkv.pgwire.connection`: one connection's state machine (bytes in, bytes out,
  SQL run through a :class:`~feedkv.sql.session.Session`);
- :mod:`feedkv.pgwire.server`: the TCP listener, one thread per connection.
"""
