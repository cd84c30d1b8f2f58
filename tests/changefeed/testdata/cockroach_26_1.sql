-- A CockroachDB 26.1 user's changefeed script, run unchanged against feedkv by
-- tests/changefeed/test_cockroach_26_1_script.py. Sink URIs are placeholders the test
-- fills in: {kafka} (a Kafka broker), {kafka_oauth} (a Kafka broker taking SASL
-- OAUTHBEARER), {token_url} (an OAuth 2.0 token endpoint, percent-encoded), {registry}
-- (a Confluent schema registry), {files} (a directory, as file://), {webhook} (an
-- HTTPS endpoint, webhook-https://...?ca_cert=...).
--
-- Statements and options follow CockroachDB 26.1's docs:
--   https://www.cockroachlabs.com/docs/v26.1/create-changefeed
--   https://www.cockroachlabs.com/docs/v26.1/changefeed-message-envelopes
--   https://www.cockroachlabs.com/docs/v26.1/changefeed-messages
--   https://www.cockroachlabs.com/docs/v26.1/changefeed-sinks
--   https://www.cockroachlabs.com/docs/v26.1/cdc-queries

CREATE TYPE status AS ENUM ('open', 'shipped');

CREATE TABLE orders (
    id INT PRIMARY KEY,
    customer STRING NOT NULL,
    qty INT,
    price DECIMAL(10,2),
    total DECIMAL(10,2) AS (qty * price) STORED,
    label STRING AS (upper(customer)) VIRTUAL,
    state status,
    tags STRING[],
    wait INTERVAL,
    opens TIME,
    ip INET,
    doc JSONB,
    hdrs JSONB
);

CREATE TABLE customers (name STRING PRIMARY KEY, city STRING);

CREATE TABLE scratch (k INT PRIMARY KEY);

INSERT INTO orders (id, customer, qty, price, state, tags, wait, opens, ip, doc, hdrs) VALUES
    (1, 'alice', 2, 9.50, 'open', ARRAY['gift', 'rush'], '1 day 02:00:00', '09:30:00',
     '10.0.0.1', '{"b": [1, null], "a": "x"}', '{"X-Team": "red"}'),
    (2, 'bob', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'null', NULL);

INSERT INTO customers VALUES ('alice', 'Paris');

-- Envelopes, each into a Kafka topic of its own.
CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=wrapped'
    WITH updated, diff, mvcc_timestamp, resolved = '1s', min_checkpoint_frequency = '1s',
         key_in_value, topic_in_value;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=bare'
    WITH envelope = bare, topic_in_value;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=key%20only'
    WITH envelope = key_only;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=row'
    WITH envelope = row;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=enriched'
    WITH envelope = enriched, enriched_properties = 'source,schema', diff;

-- Formats.
CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=avro'
    WITH format = avro, confluent_schema_registry = '{registry}',
         avro_schema_prefix = 'crdb_', diff;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=protobuf'
    WITH format = protobuf;

CREATE CHANGEFEED FOR TABLE orders INTO '{files}/csv'
    WITH format = csv, initial_scan = 'only', csv_header;

CREATE CHANGEFEED FOR TABLE orders INTO '{files}/parquet'
    WITH format = parquet, updated, diff, min_checkpoint_frequency = '1s';

CREATE CHANGEFEED FOR TABLE orders INTO '{files}/json'
    WITH encode_json_value_null_as_object, virtual_columns = 'null', initial_scan = 'only';

-- Kafka topics, keys and headers.
CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_prefix=crdb_'
    WITH kafka_sink_config = '{"Flush": {"MaxMessages": 1, "Frequency": "100ms"}, "RequiredAcks": "ONE"}',
         full_table_name, initial_scan = 'no';

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=by_customer'
    WITH key_column = 'customer', unordered, key_in_value;

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_name=headers'
    WITH headers_json_column_name = 'hdrs', extra_headers = '{"X-Source": "crdb"}',
         initial_scan = 'only';

-- SASL OAUTHBEARER with client credentials (the secret base64-encoded).
CREATE CHANGEFEED FOR TABLE customers
    INTO '{kafka_oauth}?topic_name=oauth&sasl_enabled=true&sasl_mechanism=OAUTHBEARER&sasl_client_id=feedkv-app&sasl_client_secret=czNjcjN0&sasl_token_url={token_url}&sasl_scopes=feeds';

-- Operations: protection, lag, checkpoints, schema changes and errors, to a webhook.
CREATE CHANGEFEED FOR TABLE orders INTO '{webhook}'
    WITH gc_protect_expires_after = '24h', lagging_ranges_threshold = '3m',
         lagging_ranges_polling_interval = '30s', min_checkpoint_frequency = '1s',
         schema_change_policy = 'backfill', on_error = 'pause',
         webhook_sink_config = '{"Flush": {"Messages": 1, "Frequency": "100ms"}}';

-- CDC queries: the bare envelope by default, wrapped with diff on request.
CREATE CHANGEFEED INTO '{kafka}?topic_name=query'
    AS SELECT id, qty, (cdc_prev).qty AS prev_qty, doc->>'a' AS a,
              jsonb_build_object('customer', customer, 'state', state) AS meta,
              event_op() AS op
       FROM orders WHERE customer = 'alice';

CREATE CHANGEFEED INTO '{kafka}?topic_name=query_wrapped'
    WITH envelope = wrapped, diff
    AS SELECT id, qty, cdc_prev, crdb_internal_mvcc_timestamp AS mvcc,
              changefeed_creation_timestamp() AS created,
              event_schema_timestamp() AS schema_ts
       FROM orders WHERE id = 1 AND crdb_internal_mvcc_timestamp > changefeed_creation_timestamp() - 3600000000000;

-- Job control: a changefeed to pause, alter and resume below, and one to pause by query.
CREATE CHANGEFEED FOR TABLE customers INTO '{kafka}?topic_name=paused'
    WITH initial_scan = 'no';

CREATE CHANGEFEED FOR TABLE scratch INTO '{kafka}?topic_name=scratch';

CREATE CHANGEFEED FOR TABLE orders INTO '{kafka}?topic_prefix=jobs_'
    WITH initial_scan = 'no', min_checkpoint_frequency = '1s';

-- The changes every changefeed above sees after its initial scan.
UPDATE orders SET qty = 3, state = 'shipped' WHERE id = 1;
DELETE FROM orders WHERE id = 2;

-- The initial_scan = 'only' changefeeds end by themselves.
SHOW JOBS WHEN COMPLETE (
    SELECT job_id FROM [SHOW CHANGEFEED JOBS] WHERE sink_uri LIKE '%/csv%'
        OR sink_uri LIKE '%/json%' OR sink_uri LIKE '%topic_name=headers%'
);

-- {job} is the id the changefeed into the jobs_ topics was created with, once it runs
-- (its high-water timestamp is set).
PAUSE JOB {job};
ALTER CHANGEFEED {job} ADD customers WITH initial_scan = 'yes';
ALTER CHANGEFEED {job} SET resolved = '10s';
RESUME JOB {job};
INSERT INTO customers VALUES ('bob', 'Oslo');

PAUSE JOBS (SELECT job_id FROM [SHOW CHANGEFEED JOBS] WHERE sink_uri LIKE '%topic_name=paused%');

-- A watched table truncated: its changefeed fails (the table is replaced).
TRUNCATE scratch;
SHOW JOBS WHEN COMPLETE (
    SELECT job_id FROM [SHOW CHANGEFEED JOBS] WHERE sink_uri LIKE '%topic_name=scratch%'
);

SELECT job_id, status FROM [SHOW CHANGEFEED JOBS] WHERE job_id = {job};
SHOW CHANGEFEED JOB {job};
