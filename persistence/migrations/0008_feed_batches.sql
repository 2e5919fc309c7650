-- gost schema, version 8: a feed batch is counted once. The batch row is written in the same
-- transaction as the batch's items and the task's counts, so a batch handled again (after a
-- crash, or re-delivered by Kafka) finds it and adds nothing; before, a crash between
-- recording the items and adding the counts lost the batch's counts.
CREATE TABLE feed_batches (
  task_id    text NOT NULL REFERENCES feed_tasks ON DELETE CASCADE,
  batch_id   text NOT NULL,
  counted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, batch_id)
);
