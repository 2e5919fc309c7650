-- gost schema, version 21: catalog versions and one-off sweeps (issue 25 item 1,
-- docs/catalog-evolution.md).
--
-- A catalog version is the migration that leads to it (its rules as the operator wrote them,
-- stored verbatim): the `catalog.evolve` stage moves offers along the chain of stored
-- versions. Versions are never changed once stored; a node offered a different text for a
-- stored version refuses to start.
CREATE TABLE catalog_versions (
  version      integer PRIMARY KEY CHECK (version > 1),
  from_version integer NOT NULL CHECK (from_version = version - 1),
  source       text NOT NULL,  -- the file's name, for the operator
  rules        text NOT NULL,  -- the migration file, verbatim
  loaded_at    timestamptz NOT NULL DEFAULT now()
);

-- A sweep is a one-off background rescan of every shard for one stage (a shard's rescan
-- extended: actors/offers spawn.hpp `shard_options::sweeps`), named by a token such as
-- `catalog.evolve@3`. Each shard records how far it came, so a sweep interrupted by a stop or a
-- lease moving on resumes where it was, and a finished one is never run again.
CREATE TABLE rescan_sweeps (
  token      text NOT NULL,
  shard      integer NOT NULL,
  after_id   text NOT NULL DEFAULT '',  -- the last offer id enqueued or passed
  enqueued   bigint NOT NULL DEFAULT 0, -- offers enqueued so far
  done       boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (token, shard)
);
