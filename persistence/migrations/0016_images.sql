-- gost schema, version 16: image functions (seed 003, actors/images/README.md).
-- The queue of the seed: a task is a function applied to canonical arguments; identical
-- requests are one row (the primary key). Taken oldest first per function and partition;
-- deleted in the transaction that stores its result.
CREATE TABLE image_tasks (
  function    text NOT NULL,                 -- rotate | preview | ratio | main_color
  partition   integer NOT NULL,              -- from the result key, mod images.partitions
  args        text NOT NULL,                 -- canonical (actors/images request.hpp)
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  due_at      timestamptz NOT NULL DEFAULT clock_timestamp(),  -- a retry's back-off, a taker's visibility timeout
  attempts    integer NOT NULL DEFAULT 0,    -- recoverable failures so far
  last_error  text,
  ttl_ms      bigint NOT NULL,               -- the result's time to live, asked with the task
  PRIMARY KEY (function, partition, args)
);
CREATE INDEX image_tasks_next ON image_tasks (function, partition, created_at);

-- The results by key = hash(function, args): a value, an error status (cached like a value:
-- the same bytes give the same error), or `pending` while a task computes it. Reaped after
-- expires_at.
CREATE TABLE image_results (
  result_key  text PRIMARY KEY,
  function    text NOT NULL,
  args        text NOT NULL,
  status      text NOT NULL CHECK (status IN ('pending', 'done', 'error')),
  value       bytea,                         -- done: the function's result (protobuf)
  error_kind  text,                          -- error: not_an_image, download_failed, ...
  error       text,
  attempts    integer NOT NULL DEFAULT 0,
  expires_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX image_results_expiry ON image_results (expires_at);
