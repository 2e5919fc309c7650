-- gost schema, version 30: the shard of a key in SQL (issue 28, ADR 0023 "Splits"), in every
-- group's database.
--
-- A move of a part of a group selects the rows of tables without a shard column by their key's
-- home shard (a seller's feeds, a scheduled action by its id, an entity's pending events), and
-- a fence refuses the writes of the moving part's sellers only. These functions compute what
-- `offer_hash` (actors/core/src/shard_hash.cpp) computes, bit for bit (FNV-1a 64 over the UTF-8
-- bytes, then the fmix64 finalizer), with bigint arithmetic on 32-bit halves: PostgreSQL has
-- no unsigned 64-bit type and checks bigint overflow. They are for moves and for operators
-- (`SELECT gost_shard_of('offer-1', 64)`), never on a hot path: a writer knows its shard.
-- actors/core/shard_hash.pgtest.cpp compares them with the C++ on docs/sharding.md's
-- test vectors and on random keys.

-- (a * b) mod 2^32 for a, b in [0, 2^32): b is split in 16-bit halves, so no product passes
-- 2^48.
CREATE FUNCTION gost_mul32(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT (a * (b & 65535) + (((a * (b >> 16)) & 65535) << 16)) & 4294967295
$$;

-- The 64-bit value hi * 2^32 + lo (both in [0, 2^32)) times c_hi * 2^32 + c_lo, mod 2^64, as
-- its two halves.
CREATE FUNCTION gost_mul64(hi bigint, lo bigint, c_hi bigint, c_lo bigint,
                           OUT r_hi bigint, OUT r_lo bigint)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  p0 bigint := (lo & 65535) * c_lo;  -- < 2^48
  p1 bigint := (lo >> 16) * c_lo;    -- < 2^48
  low bigint := p0 + ((p1 & 65535) << 16);
BEGIN
  r_lo := low & 4294967295;
  r_hi := ((low >> 32) + (p1 >> 16) + gost_mul32(hi, c_lo) + gost_mul32(lo, c_hi)) & 4294967295;
END
$$;

-- hi * 2^32 + lo (an unsigned 64-bit value as two halves) mod n, for n in [1, 2^31).
CREATE FUNCTION gost_u64_mod(hi bigint, lo bigint, n integer) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT (((hi % n) * (4294967296 % n) + lo) % n)::integer
$$;

-- offer_hash as its two 32-bit halves.
CREATE FUNCTION gost_offer_hash_halves(key text, OUT hi bigint, OUT lo bigint)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  b bytea := convert_to(key, 'UTF8');
  t bigint;
  m record;
BEGIN
  hi := 3421674724;  -- 0xcbf29ce4: the FNV-1a 64 offset basis
  lo := 2216829733;  -- 0x84222325
  FOR i IN 0 .. length(b) - 1 LOOP
    lo := lo # get_byte(b, i);
    -- times the FNV-1a 64 prime, 2^40 + 435
    t := lo * 435;
    hi := (hi * 435 + (t >> 32) + (lo << 8)) & 4294967295;
    lo := t & 4294967295;
  END LOOP;
  -- fmix64: h ^= h >> 33 (the high half shifted by one); h *= C; twice, then h ^= h >> 33.
  lo := lo # (hi >> 1);
  m := gost_mul64(hi, lo, 4283543511, 3981806797);  -- 0xff51afd7ed558ccd
  hi := m.r_hi; lo := m.r_lo;
  lo := lo # (hi >> 1);
  m := gost_mul64(hi, lo, 3301882366, 444984403);   -- 0xc4ceb9fe1a85ec53
  hi := m.r_hi; lo := m.r_lo;
  lo := lo # (hi >> 1);
END
$$;

-- offer_hash(key), the unsigned 64-bit value.
CREATE FUNCTION gost_offer_hash(key text) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT h.hi::numeric * 4294967296 + h.lo FROM gost_offer_hash_halves(key) h
$$;

-- The shard of a key: offer_hash(key) mod shard_count (`shard_of`, gost/core/shard_hash.hpp).
CREATE FUNCTION gost_shard_of(key text, shard_count integer) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT gost_u64_mod(h.hi, h.lo, shard_count) FROM gost_offer_hash_halves(key) h
$$;

-- The partition of an image result (`task_key::partition`, actors/images): the first 16 hex
-- digits of its key as an unsigned 64-bit value, mod the partitions (the shard count).
CREATE FUNCTION gost_result_partition(result_key text, partitions integer) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT gost_u64_mod(('x' || lpad(substr(result_key, 1, 8), 16, '0'))::bit(64)::bigint,
                      ('x' || lpad(substr(result_key, 9, 8), 16, '0'))::bit(64)::bigint,
                      partitions)
$$;

-- The fence of a part of a group moving away (a split), on the feeds' tables at the source
-- (their writers hold no lease): a statement writing a row whose seller's home shard is fenced
-- here (its lease row owned by `moved:<target>`) is refused, SQLSTATE GM001 (UNAVAILABLE:
-- retry), from the fence on and after the move (a writer with the old map is refused, not
-- lost). The lease rows of the statement's sellers are held FOR SHARE to the end of the
-- writer's transaction, so the fence waits for the writes in flight. A statement-level AFTER
-- trigger per event, its rows in the transition table `changed` (NEW TABLE for inserts and
-- updates, OLD TABLE for deletes): one hash per distinct seller of a statement, not per row (a
-- row-level trigger made a feed item's insert 9 times dearer here; this one added 7 % to an
-- insert of 50,000 items of 10 sellers). Arguments: the shard count, and the column that finds the seller:
-- `seller_id`, or `task_id` (a feed_tasks row's). The move's own statements run with
-- `gost.moving` set.
CREATE FUNCTION gost_move_fence_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  homes integer[];
  s integer;
  o text;
BEGIN
  IF current_setting('gost.moving', true) = 'on' THEN
    RETURN NULL;
  END IF;
  IF TG_ARGV[1] = 'task_id' THEN
    SELECT array_agg(DISTINCT gost_shard_of(t.seller_id, TG_ARGV[0]::int)) INTO homes
      FROM (SELECT DISTINCT task_id FROM changed) c JOIN feed_tasks t USING (task_id);
  ELSE
    SELECT array_agg(gost_shard_of(c.seller_id, TG_ARGV[0]::int)) INTO homes
      FROM (SELECT DISTINCT seller_id FROM changed) c;
  END IF;
  FOR s, o IN
    SELECT l.shard, l.owner FROM shard_leases l WHERE l.shard = ANY(homes)
     ORDER BY l.shard FOR SHARE OF l
  LOOP
    IF o LIKE 'moved:%' THEN
      RAISE EXCEPTION 'the feeds of shard % moved to group `%` (gostctl move-shards): retry in a moment',
        s, substr(o, 7) USING ERRCODE = 'GM001';
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;
