-- gost schema, version 19: the feed cleanup (seed 004 "Чистка старых данных", docs/feeds.md
-- "Feed processor API") removes a stored feed file only when no other load refers to it (files
-- are content-addressed: equal uploads, or a URL serving the same bytes, share one); this index
-- makes that question one lookup instead of a scan of every load.
CREATE INDEX feed_loads_by_file ON feed_loads (sha256) WHERE sha256 IS NOT NULL;
