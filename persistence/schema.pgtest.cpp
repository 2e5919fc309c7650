#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/pg.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;

TEST_CASE("migrations apply once and are idempotent") {
  gost::testing::temp_db db;
  pg_pool pool{pool_options(db)};
  auto first = migrate(pool);
  REQUIRE_MESSAGE(first, error_message(first.error()));
  CHECK(*first == static_cast<int>(builtin_migrations().size()));
  auto second = migrate(pool);
  REQUIRE(second);
  CHECK(*second == 0);
  CHECK(db.scalar("SELECT count(*) FROM schema_migrations")
        == std::to_string(builtin_migrations().size()));
  CHECK(db.scalar("SELECT to_regclass('public.offers')::text") == "offers");
}

TEST_CASE("concurrent starts apply each migration exactly once") {
  gost::testing::temp_db db;
  constexpr int nodes = 6;
  std::vector<int> applied(nodes, -1);
  std::vector<std::string> errors(nodes);
  std::vector<std::thread> threads;
  for (int i = 0; i < nodes; ++i)
    threads.emplace_back([&, i] {
      pg_pool pool{pool_options(db, 1)}; // each "node" its own pool and connection
      auto r = migrate(pool);
      if (r)
        applied[static_cast<size_t>(i)] = *r;
      else
        errors[static_cast<size_t>(i)] = error_message(r.error());
    });
  for (auto& t : threads)
    t.join();
  int total = 0;
  for (int i = 0; i < nodes; ++i) {
    CAPTURE(i);
    CHECK(errors[static_cast<size_t>(i)].empty());
    total += applied[static_cast<size_t>(i)];
  }
  CHECK(total == static_cast<int>(builtin_migrations().size()));
}

TEST_CASE("an edited or unknown migration stops the node") {
  gost::testing::temp_db db;
  pg_pool pool{pool_options(db)};
  REQUIRE(migrate(pool));
  SUBCASE("edited") {
    auto ms = builtin_migrations();
    ms[0].sql += "\n-- edited";
    auto r = migrate(pool, ms);
    REQUIRE_FALSE(r);
    CHECK(r.error() == db_errc::schema_mismatch);
    CHECK(error_message(r.error()).find("must never be edited") != std::string::npos);
  }
  SUBCASE("database is newer than the binary") {
    auto ms = builtin_migrations();
    ms.push_back({9999, "future", "SELECT 1"});
    REQUIRE(migrate(pool, ms));
    auto r = migrate(pool); // the older binary
    REQUIRE_FALSE(r);
    CHECK(error_message(r.error()).find("9999") != std::string::npos);
  }
}

TEST_CASE("shard_count is fixed by the first node") {
  gost::testing::temp_db db;
  pg_pool pool{pool_options(db)};
  REQUIRE(migrate(pool));
  CHECK_FALSE(ensure_installation(pool, 16));
  CHECK_FALSE(ensure_installation(pool, 16));
  auto err = ensure_installation(pool, 32);
  REQUIRE(err);
  CHECK(err == db_errc::schema_mismatch);
  auto msg = error_message(err);
  CHECK(msg.find("set `shard.count` to 16") != std::string::npos);
}

TEST_CASE("an unreachable server gives one clear error") {
  pg_pool::options o;
  o.dsn = "host=127.0.0.1 port=1 user=gost dbname=gost connect_timeout=1";
  pg_pool pool{o};
  auto err = pool.wait_ready(std::chrono::milliseconds{300});
  REQUIRE(err);
  CHECK(err == db_errc::unavailable);
  CHECK(error_message(err).find("pg.dsn") != std::string::npos);
}

TEST_CASE("the pool reconnects after the server dropped its connections") {
  gost::testing::temp_db db;
  pg_pool pool{pool_options(db, 1)};
  REQUIRE_FALSE(pool.ping());
  // Kill every backend of this database, as a server restart or a proxy would.
  db.scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '"
            + db.name() + "' AND pid <> pg_backend_pid()");
  CHECK_FALSE(pool.ping());
}

TEST_CASE("the pool tells its observer whether the server could be reached") {
  struct seen {
    int reached = 0;
    std::vector<std::string> unreachable;
  };
  auto watch = [](pg_pool& pool, seen& s) {
    pool.observe([&s](const caf::error& err, std::chrono::steady_clock::time_point) {
      if (err)
        s.unreachable.push_back(error_message(err));
      else
        ++s.reached;
    });
  };
  SUBCASE("no server: each call is unreachable, on one line") {
    pg_pool::options o;
    o.dsn = "host=127.0.0.1 port=1 user=gost dbname=gost connect_timeout=1";
    pg_pool pool{o};
    seen s;
    watch(pool, s);
    CHECK(pool.ping() == db_errc::unavailable);
    REQUIRE(s.unreachable.size() == 1);
    CHECK(s.reached == 0);
    CHECK(s.unreachable[0].find('\n') == std::string::npos);
  }
  SUBCASE("a server that answers, even with an SQL error, was reached") {
    gost::testing::temp_db db;
    pg_pool pool{pool_options(db, 1)};
    seen s;
    watch(pool, s);
    CHECK_FALSE(pool.ping());
    // Not migrated: the installation table is missing, which the server says.
    auto err = ensure_installation(pool, 8);
    REQUIRE(err);
    CHECK(err != db_errc::unavailable);
    CHECK(s.reached == 2);
    CHECK(s.unreachable.empty());
  }
}

TEST_CASE("migration 3 moves queue entries into state rows and old outbox rows into batches") {
  gost::testing::temp_db db;
  pg_pool pool{pool_options(db)};
  auto all = builtin_migrations();
  REQUIRE(all.size() >= 3);
  std::vector<migration> first_two{all[0], all[1]};
  REQUIRE(migrate(pool, first_two));
  {
    pqxx::connection c{db.dsn()};
    pqxx::work tx{c};
    tx.exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, version, body)"
            " VALUES ('a', 3, 's', '', 1, ''), ('b', 3, 's', '', 1, '')");
    tx.exec("INSERT INTO stage_states (offer_id, stage_id, state) VALUES"
            " ('a', 'x', 'sa'), ('b', 'y', 'sb'), ('gone', 'x', 'orphan')");
    tx.exec("INSERT INTO stage_queue (shard, stage_id, offer_id, due_at_us, priority) VALUES"
            " (3, 'x', 'a', 100, 1), (3, 'z', 'b', 200, 0)");
    // A 200-byte payload: its length needs a two-byte varint (200 = 0xc8 0x01).
    tx.exec("INSERT INTO outbox (shard, offer_id, version, payload) VALUES"
            " (3, 'a', 1, 'p'), (3, 'b', 1, decode(repeat('ab', 200), 'hex'))");
    tx.commit();
  }
  auto r = migrate(pool);
  REQUIRE_MESSAGE(r, error_message(r.error()));
  CHECK(db.scalar("SELECT to_regclass('public.stage_queue') IS NULL") == "t");
  CHECK(db.scalar("SELECT string_agg(offer_id || '/' || stage_id || '/' || shard || '/'"
                  " || coalesce(encode(state, 'escape'), '-') || '/'"
                  " || coalesce(due_at_us::text, '-') || '/' || priority, ' '"
                  " ORDER BY offer_id, stage_id) FROM stage_states")
        == "a/x/3/sa/100/1 b/y/3/sb/-/0 b/z/3/-/200/0");
  CHECK(db.scalar("SELECT string_agg(events || ':' || encode(payload, 'hex'), ' ' ORDER BY id)"
                  " FROM outbox_batches")
        == "1:0a0170 1:0ac801" + [] {
             std::string s;
             for (int i = 0; i < 200; ++i)
               s += "ab";
             return s;
           }());
}
