-- streamguard intent ledger on PostgreSQL: schema version 1 (docs/ledger.md,
-- "The PostgreSQL backend").  Applied by sg_ledger_init_schema() and
-- `sg-stream --ledger URI --ledger-init`, never by the first call; safe to
-- apply again, and by several workers at once (the advisory lock serialises
-- them).  The library embeds this file at build time.  The tables live in
-- the connection's current schema (search_path).
BEGIN;
SELECT pg_advisory_xact_lock(7301832901);

CREATE TABLE IF NOT EXISTS streamguard_schema_version (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- A newer library's schema is left alone: this one does not know it.
DO $$
BEGIN
    IF (SELECT max(version) FROM streamguard_schema_version) > 1 THEN
        RAISE EXCEPTION 'streamguard ledger schema is newer than version 1'
            USING ERRCODE = 'feature_not_supported';
    END IF;
END
$$;

-- The order of intents, for listing oldest first.
CREATE SEQUENCE IF NOT EXISTS streamguard_ledger_intent_seq;

-- One row per idempotency key: the primary key is the whole ownership
-- protocol.  An unresolved row (pending, unknown) owns its key; a settled
-- one (done, failed, reconciled) is taken over by the next intent, which
-- bumps its generation.
CREATE TABLE IF NOT EXISTS streamguard_ledger_ops (
    key                  text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 127),
    method               text NOT NULL,
    url                  text NOT NULL CHECK (length(url) BETWEEN 1 AND 8192),
    state                text NOT NULL
        CHECK (state IN ('pending', 'unknown', 'done', 'failed', 'reconciled')),
    generation           bigint NOT NULL DEFAULT 1,
    intent_seq           bigint NOT NULL DEFAULT nextval('streamguard_ledger_intent_seq'),
    host                 text NOT NULL,
    pid                  integer NOT NULL,
    first_seen           timestamptz NOT NULL DEFAULT now(),
    updated              timestamptz NOT NULL DEFAULT now(),
    attempts             integer NOT NULL DEFAULT 0,
    last_outcome         text,
    last_phase           text,
    last_http_status     integer,
    last_sent            boolean,
    last_outcome_unknown boolean,
    final_outcome        text,
    resolved_at          timestamptz,
    note                 text
);
CREATE INDEX IF NOT EXISTS streamguard_ledger_ops_unresolved
    ON streamguard_ledger_ops (intent_seq) WHERE state IN ('pending', 'unknown');

-- Every attempt of every generation of an operation.
CREATE TABLE IF NOT EXISTS streamguard_ledger_attempts (
    key             text NOT NULL REFERENCES streamguard_ledger_ops (key) ON DELETE CASCADE,
    generation      bigint NOT NULL,
    n               integer NOT NULL CHECK (n >= 1),
    outcome         text NOT NULL,
    phase           text NOT NULL,
    sent            boolean NOT NULL,
    http_status     integer,
    outcome_unknown boolean NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS streamguard_ledger_attempts_key
    ON streamguard_ledger_attempts (key, generation);

-- What each attempt consumed (docs/report.md, "Usage and cost"): tokens,
-- NULL when unknown, and where the figures come from; NULL throughout
-- when nothing is known.  Added to version 1 (nullable: a library that
-- does not know them writes attempts as before; one that does checks for
-- them on connecting and records usage once this file was applied again).
ALTER TABLE streamguard_ledger_attempts
    ADD COLUMN IF NOT EXISTS input_tokens        bigint CHECK (input_tokens >= 0),
    ADD COLUMN IF NOT EXISTS output_tokens       bigint CHECK (output_tokens >= 0),
    ADD COLUMN IF NOT EXISTS cached_input_tokens bigint CHECK (cached_input_tokens >= 0),
    ADD COLUMN IF NOT EXISTS reasoning_tokens    bigint CHECK (reasoning_tokens >= 0),
    ADD COLUMN IF NOT EXISTS usage_source        text
        CHECK (usage_source IN ('provider', 'estimate'));

INSERT INTO streamguard_schema_version (version) VALUES (1) ON CONFLICT DO NOTHING;
COMMIT;
