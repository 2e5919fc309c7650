#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "gost/core/protocol.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
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
  for (int i = 0; i < 500 && !gone(); ++i)
    std::this_thread::sleep_for(10ms);
  caf::anon_send_exit(hk, caf::exit_reason::user_shutdown);
  hk = caf::actor{};

  CHECK(gone());
  // Young ids stay; another node's shard is that node's to sweep.
  CHECK(db.scalar("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM offer_requests")
        == "new-owned,old-elsewhere");
  CHECK(db.scalar("SELECT string_agg(request_id, ',') FROM entity_requests") == "new");
}
