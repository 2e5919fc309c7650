-- gost schema, version 18: the feed processor's side of seed 004 (docs/feeds.md "Feed
-- processor", ADR 0019): sellers' feeds, their loads, the queue and the per-seller locks of the
-- loader and the processor, the answers' bookkeeping, per-offer errors and the cleanup queue.
-- The seed's tables, renamed into the feed_ namespace (its `tasks` are `feed_loads`, its
-- `task_queue` is `feed_queue`, its `feed_loader_task` is folded into `feeds`).

-- A seller's feed in a namespace (seed "feed"; several per seller: "Множественные фиды").
-- URL feeds carry their schedule here (seed "feed_loader_task"): due when next_fetch_at comes.
CREATE TABLE feeds (
  seller_id        text NOT NULL,
  namespace        text NOT NULL,
  version          bigint NOT NULL DEFAULT 1,      -- grows with every change
  removed          boolean NOT NULL DEFAULT false,
  settings         bytea NOT NULL,                 -- gost.v1.FeedSettings
  url              text,                           -- URL feeds only
  period_ms        bigint,
  last_fetched_at  timestamptz,                    -- the last successful fetch
  next_fetch_at    timestamptz,                    -- URL feeds: when the loader takes it
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, namespace)
);
CREATE INDEX feeds_due ON feeds (next_fetch_at, last_fetched_at)
  WHERE NOT removed AND next_fetch_at IS NOT NULL;

-- Load ids: one sequence for all sellers, so a load id is also a unique task_id of the feed
-- exchange (the offer store refuses a task id used by another seller).
CREATE SEQUENCE feed_load_ids;

-- One load of a feed (seed "tasks"): status, the stored file, fatal errors, statistics.
CREATE TABLE feed_loads (
  seller_id      text NOT NULL,
  load_id        bigint NOT NULL,
  namespace      text NOT NULL,
  feed_version   bigint NOT NULL,
  origin         text NOT NULL,        -- url | url-once | upload | parsed | delete
  status         text NOT NULL,        -- fetching | queued | in_progress | failed | succeeded | cancelled
  settings       bytea NOT NULL,       -- gost.v1.FeedSettings as the load was made
  source_url     text,
  sha256         text,                 -- the stored file (blob store, content-addressed)
  bytes          bigint,
  format         text,                 -- native | avito | yml
  error_kind     text,
  error_message  text,
  attempts       integer NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, load_id)
);
CREATE INDEX feed_loads_by_feed ON feed_loads (seller_id, namespace, load_id DESC);
CREATE INDEX feed_loads_by_update ON feed_loads (seller_id, updated_at);
-- Loads waiting for work (seed "task_queue", and the loader's part of "feed_loader_task"):
-- stage `fetch` for the loader (a URL to download), `process` for the processor (a stored
-- file). A row stays until its stage is done or the load failed; a transient failure pushes
-- not_before. A load is in one stage at a time.
CREATE TABLE feed_queue (
  seller_id   text NOT NULL,
  load_id     bigint NOT NULL,
  stage       text NOT NULL CHECK (stage IN ('fetch', 'process')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  not_before  timestamptz NOT NULL DEFAULT now(),
  attempts    integer NOT NULL DEFAULT 0,
  PRIMARY KEY (seller_id, load_id)
);
CREATE INDEX feed_queue_due ON feed_queue (stage, not_before, created_at);

-- Per-seller locks (seed "feed_locks"): one loader and one processor per seller at a time. A
-- lock names the node holding it; the reaper frees locks of nodes no longer live and locks
-- older than feeds.lock_max_hold.
CREATE TABLE feed_locks (
  context   text NOT NULL CHECK (context IN ('feedloader', 'feedprocessor')),
  seller_id text NOT NULL,
  acquired  timestamptz NOT NULL DEFAULT now(),
  node_id   text NOT NULL,
  PRIMARY KEY (context, seller_id)
);
CREATE INDEX feed_locks_by_age ON feed_locks (context, acquired);

-- Statistics of a load (seed "feed_statistics"): gost.v1.FeedLoadStatistics, the processor's
-- counts first, completed from the offer store's answers.
CREATE TABLE feed_statistics (
  seller_id   text NOT NULL,
  load_id     bigint NOT NULL,
  statistics  bytea NOT NULL,
  PRIMARY KEY (seller_id, load_id)
);

-- Batches the offer store answered (seed "offer_batches").
CREATE TABLE feed_offer_batches (
  seller_id    text NOT NULL,
  load_id      bigint NOT NULL,
  batch_id     text NOT NULL,
  answered_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, load_id, batch_id)
);

-- Per-offer errors of a load (seed "offer_errors"), stored as they are. error_id numbers an
-- offer's errors: the processor's own from 0, the offer store's answer at 1000.
CREATE TABLE feed_offer_errors (
  seller_id      text NOT NULL,
  load_id        bigint NOT NULL,
  external_id    text NOT NULL,
  error_id       bigint NOT NULL,
  error_level    text NOT NULL CHECK (error_level IN ('error', 'warning')),
  error_type     text NOT NULL,   -- validation | unknown_category | attribute | geocoding | banned | duplicate
  field          text NOT NULL DEFAULT '',
  title          text NOT NULL DEFAULT '',
  line           bigint NOT NULL DEFAULT 0,
  error_message  text NOT NULL,
  PRIMARY KEY (seller_id, load_id, external_id, error_id)
);
CREATE INDEX feed_offer_errors_by_level
  ON feed_offer_errors (seller_id, load_id, error_level, external_id, error_id);

-- Loads whose data is to be removed (seed "old_tasks", cleanup option 2): written by the API
-- and by the processor when a load ends; the housekeeper keeps the last feed.keep_loads of a
-- feed and removes the rest in order (errors, batches, statistics, the blob, the load row).
CREATE TABLE feed_old_loads (
  seller_id  text NOT NULL,
  load_id    bigint NOT NULL,
  PRIMARY KEY (seller_id, load_id)
);
