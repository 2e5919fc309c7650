-- gost schema, version 7: the offer store's side of the feed exchange (docs/feeds.md).
-- A task is one load of a seller's feed; its items are the external ids it carried (for
-- duplicates within the load and for the offers missing from it). Items go when the task
-- finishes; the task row keeps the summary, so a re-delivered end message only repeats it.
CREATE TABLE feed_tasks (
  task_id     text PRIMARY KEY,
  seller_id   text NOT NULL,
  namespace   text NOT NULL,
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  -- Outcomes so far (an item of a re-delivered batch is counted once).
  added       bigint NOT NULL DEFAULT 0,
  updated     bigint NOT NULL DEFAULT 0,
  unchanged   bigint NOT NULL DEFAULT 0,
  rejected    bigint NOT NULL DEFAULT 0,
  duplicates  bigint NOT NULL DEFAULT 0,
  summary     bytea            -- serialized gost.v1.FeedSummary once finished
);

CREATE TABLE feed_items (
  task_id     text NOT NULL REFERENCES feed_tasks ON DELETE CASCADE,
  external_id text NOT NULL,
  batch_id    text NOT NULL,   -- the batch that carried it first
  PRIMARY KEY (task_id, external_id)
);
