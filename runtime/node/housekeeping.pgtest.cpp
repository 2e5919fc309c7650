#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "gost/core/blob_store.hpp"
#include "gost/core/protocol.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/two_groups.hpp"
#include "node/housekeeping.hpp"

using namespace std::chrono_literals;

TEST_CASE("housekeeping forgets the request ids older than the ttl, of the shards it owns") {
  gost::testing::temp_db db;
  gost::persistence::pg_pool::options po;
  po.dsn = db.dsn();
  po.size = 1;
  gost::persistence::pg_pool pool{po};
  REQUIRE(gost::persistence::migrate(pool));
  db.scalar("INSERT INTO offer_requests (offer_id, request_id, shard, answer, created_at) VALUES"
            " ('a', 'old-owned', 1, '', now() - interval '2 hours'),"
            " ('b', 'new-owned', 1, '', now()),"
            " ('c', 'old-elsewhere', 2, '', now() - interval '2 hours')");
  db.scalar("INSERT INTO entity_requests (kind, entity_id, request_id, seq, created_at) VALUES"
            " ('account', 'x', 'old', 1, now() - interval '2 hours'),"
            " ('account', 'x', 'new', 2, now())");

  caf::actor_system_config cfg;
  gost::register_core_types(cfg);
  caf::actor_system sys{cfg};
  gost::runtime::housekeeping_options ho;
  ho.request_ttl = 1h;
  ho.every = 20ms;
  ho.entities = true;
  ho.pool = &pool;
  ho.local_shards = [] { return std::vector<uint32_t>{1}; };
  auto hk = gost::runtime::spawn_housekeeping(sys, ho);

  auto gone = [&] {
    return db.scalar("SELECT count(*) FROM offer_requests WHERE request_id = 'old-owned'") == "0"
           && db.scalar("SELECT count(*) FROM entity_requests WHERE request_id = 'old'") == "0";
  };
  CHECK(gost::testing::eventually(std::chrono::seconds{10}, gone));
  caf::anon_send_exit(hk, caf::exit_reason::user_shutdown);
  hk = caf::actor{};

  CHECK(gone());
  // Young ids stay; another node's shard is that node's to sweep.
  CHECK(db.scalar("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM offer_requests")
        == "new-owned,old-elsewhere");
  CHECK(db.scalar("SELECT string_agg(request_id, ',') FROM entity_requests") == "new");
}

TEST_CASE("housekeeping cleans old feed loads: rows in order, then the files no load uses, in "
          "this shard group's database or another's") {
  using namespace gost::persistence;
  gost::testing::migrated_db m;
  auto dir = gost::testing::temp_path("gost-feed-blobs");
  gost::blob_store blobs{dir, ""};
  auto store = [&](const std::string& bytes) {
    std::string error;
    auto url = blobs.put(bytes, "xml", error);
    REQUIRE_MESSAGE(!url.empty(), error);
    return url.substr(url.rfind('/') + 1);
  };
  auto kept = store("<feed>kept</feed>");
  auto shared = store("<feed>shared</feed>");
  auto own = store("<feed>own</feed>");
  auto theirs = store("<feed>theirs</feed>"); // also a load's in group 1's database
  feed_spec spec{"s1", "shop", "", "", 0};
  REQUIRE(create_feed(m.pool, spec));
  auto load = [&](const std::string& file) {
    new_feed_load n;
    n.seller_id = "s1";
    n.ns = "shop";
    n.origin = "upload";
    n.sha256 = file;
    n.keep_loads = 100;
    auto l = create_feed_load(m.pool, n);
    REQUIRE(l);
    m.db.scalar("UPDATE feed_loads SET status = 'succeeded' WHERE load_id = "
                + std::to_string(l->load_id));
    return l->load_id;
  };
  auto old_shared = load(shared);
  auto old_own = load(own);
  auto old_theirs = load(theirs);
  load(shared); // the newer load keeps the shared file
  load(kept);
  REQUIRE_FALSE(add_feed_offer_errors(m.pool, "s1", old_own,
                                      {{"x", 0, "error", "validation", "", "", 1, "bad"}}));
  m.db.scalar("INSERT INTO feed_old_loads VALUES ('s1', " + std::to_string(old_shared)
              + "), ('s1', " + std::to_string(old_own) + "), ('s1', " + std::to_string(old_theirs)
              + ")");
  gost::testing::migrated_db other; // group 1: another seller uploaded the same bytes
  REQUIRE(create_feed(other.pool, {"s2", "shop", "", "", 0}));
  new_feed_load n2;
  n2.seller_id = "s2";
  n2.ns = "shop";
  n2.origin = "upload";
  n2.sha256 = theirs;
  REQUIRE(create_feed_load(other.pool, n2));

  caf::actor_system_config cfg;
  gost::register_core_types(cfg);
  caf::actor_system sys{cfg};
  gost::feeds::feed_stats stats;
  gost::runtime::housekeeping_options ho;
  ho.every = 20ms;
  ho.pool = &m.pool;
  ho.local_shards = [] { return std::vector<uint32_t>{}; };
  ho.feeds = true;
  ho.feed_cleanup_batch = 1; // two transactions in one round
  ho.blobs = &blobs;
  ho.feed_stats = &stats;
  ho.feed_file_elsewhere = gost::runtime::feed_files_of_other_groups(
    std::make_shared<gost::testing::two_groups>(m.pool, other.pool, 8, 4), 0);
  auto hk = gost::runtime::spawn_housekeeping(sys, ho);
  bool cleaned = gost::testing::eventually(10s, [&] { return stats.files_removed.load() == 1; });
  caf::anon_send_exit(hk, caf::exit_reason::user_shutdown);
  hk = caf::actor{};
  REQUIRE(cleaned);

  CHECK(stats.loads_cleaned.load() == 3);
  CHECK(m.db.scalar("SELECT count(*) FROM feed_old_loads") == "0");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_loads") == "2");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_offer_errors") == "0");
  namespace fs = std::filesystem;
  CHECK_FALSE(fs::exists(blobs.path_of(own)));
  CHECK(fs::exists(blobs.path_of(shared)));
  CHECK(fs::exists(blobs.path_of(kept)));
  CHECK(fs::exists(blobs.path_of(theirs))); // group 1's load still reads it
  fs::remove_all(dir);
}
