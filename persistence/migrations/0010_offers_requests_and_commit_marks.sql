-- gost schema, version 10: one true answer per write (issue 12).

-- Writes that carried a request id (a client's idempotency key, or the id a node gives a call
-- it forwards): a retry of a write that committed gets the first answer and changes nothing.
-- Kept for `api.request_ttl`; written in the same transaction as the write.
CREATE TABLE offer_requests (
  offer_id    text NOT NULL,
  request_id  text NOT NULL,
  shard       integer NOT NULL,
  answer      bytea NOT NULL,          -- the answer as the caller got it (serialized)
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (offer_id, request_id)
);
CREATE INDEX offer_requests_age ON offer_requests (shard, created_at);

-- One row per committed write-behind batch: when the connection is lost during COMMIT, the
-- writer looks its batch up on a new connection to know whether it committed before it
-- answers anyone. Rows older than a few minutes are reaped by the writers.
CREATE TABLE commit_marks (
  id          text PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX commit_marks_age ON commit_marks (at);
