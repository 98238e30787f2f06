-- streamguard endpoint health shared by processes (docs/health.md, "The
-- table"): what still holds back an endpoint, so that a process that
-- starts (or reconnects) later learns it; what changes is also notified
-- on the channel streamguard_health.  Applied by the first connection of
-- sg_health_pg_new that finds the table missing (the advisory lock
-- serialises processes starting together); safe to apply again.  The
-- library embeds this file at build time.  The table lives in the
-- connection's current schema (search_path).
BEGIN;
SELECT pg_advisory_xact_lock(7301832902);

-- One row per endpoint key and kind: the latest instant an endpoint
-- cooling, or its breaker open, frees - wall clock, microseconds since the
-- Unix epoch.  key is the keyed hash of the endpoint and the credential
-- (HMAC-SHA-256 under the processes' shared credential key, 16 bytes in
-- hex): neither the credential nor the key is ever here.  origin names
-- the process (the share) that wrote it.  Rows whose instant has passed
-- say nothing and are deleted by any share, a minute later.
CREATE TABLE IF NOT EXISTS streamguard_health (
    key        text NOT NULL CHECK (key ~ '^[0-9a-f]{32}$'),
    kind       text NOT NULL CHECK (kind IN ('cooling', 'open')),
    endpoint   text NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 255),
    free_at_us bigint NOT NULL,
    origin     bigint NOT NULL,
    updated    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key, kind)
);

COMMIT;
