// The feed processor's tables on a real PostgreSQL: loads through their stages, the
// per-seller locks (one loader and one processor per seller; always released; reaped when
// their node is gone), retries, errors stored once, answers for loads in progress only, and
// old loads queued for cleanup.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "gost/persistence/feeds/feed_loads.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;
using namespace std::chrono_literals;

namespace {

void make_feed(migrated_db& m, const std::string& seller, const std::string& ns,
               const std::string& url = {}, bool due = false) {
  m.db.scalar("INSERT INTO feeds (seller_id, namespace, settings, url, period_ms, next_fetch_at)"
              " VALUES ('"
              + seller + "', '" + ns + "', '\\x0801', " + (url.empty() ? "NULL" : "'" + url + "'")
              + ", 3600000, " + (due ? "now() - interval '1 s'" : "NULL") + ")");
}

new_feed_load upload(const std::string& seller, const std::string& ns, const std::string& sha) {
  new_feed_load n;
  n.seller_id = seller;
  n.ns = ns;
  n.origin = "upload";
  n.sha256 = sha;
  n.bytes = 10;
  return n;
}

std::string status(migrated_db& m, const std::string& seller, int64_t id) {
  return m.db.scalar("SELECT status FROM feed_loads WHERE seller_id = '" + seller
                     + "' AND load_id = " + std::to_string(id));
}

} // namespace

TEST_CASE("a URL load goes fetch -> process -> in progress -> succeeded, the locks released") {
  migrated_db m;
  make_feed(m, "s1", "shop", "https://feeds.example/s1.xml", true);
  make_feed(m, "s2", "shop", "https://feeds.example/s2.xml", false); // not due
  auto due = schedule_due_feeds(m.pool, 10, 5);
  REQUIRE(due);
  REQUIRE(due->size() == 1);
  auto& load = due->front();
  CHECK(load.status == "fetching");
  CHECK(load.origin == "url");
  CHECK(load.source_url == "https://feeds.example/s1.xml");
  CHECK(load.settings == std::string("\x08\x01", 2));
  // Scheduled again at once: its fetch is waiting, and its next fetch moved a period on.
  CHECK(schedule_due_feeds(m.pool, 10, 5)->empty());
  CHECK(m.db.scalar("SELECT next_fetch_at > now() + interval '59 min' FROM feeds"
                    " WHERE seller_id = 's1'")
        == "t");

  auto job = take_feed_work(m.pool, "fetch", "n1");
  REQUIRE(job);
  REQUIRE(job->has_value());
  CHECK((*job)->load.load_id == load.load_id);
  // The seller is locked for loaders: nothing more for anyone.
  CHECK_FALSE(take_feed_work(m.pool, "fetch", "n2")->has_value());
  REQUIRE_FALSE(feed_fetched(m.pool, **job, "abc.xml", 1234, "n1"));
  CHECK(status(m, "s1", load.load_id) == "queued");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_locks") == "0");
  CHECK(m.db.scalar("SELECT last_fetched_at IS NOT NULL FROM feeds WHERE seller_id = 's1'") == "t");

  auto work = take_feed_work(m.pool, "process", "n2");
  REQUIRE(work->has_value());
  CHECK((*work)->load.sha256 == "abc.xml");
  CHECK((*work)->load.bytes == 1234);
  CHECK(m.db.scalar("SELECT context || ':' || node_id FROM feed_locks") == "feedprocessor:n2");
  REQUIRE_FALSE(feed_sent(m.pool, **work, "avito", "stats-1", "n2"));
  CHECK(status(m, "s1", load.load_id) == "in_progress");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_queue") == "0");
  CHECK(m.db.scalar("SELECT count(*) FROM feed_locks") == "0");

  // Answers: batches recorded once, a rejection stored unless the processor erred already.
  REQUIRE_FALSE(
    add_feed_offer_errors(m.pool, "s1", load.load_id,
                          {{"e1", 0, "error", "validation", "Price", "t1", 12, "bad price"},
                           {"e2", 0, "warning", "attribute", "Colour", "t2", 20, "ignored"}}));
  auto ours = record_feed_answers(m.pool, "s1", load.load_id, {"1", "2"},
                                  {{"e1", 1000, "error", "validation", "", "", 0, "bad price"},
                                   {"e3", 1000, "error", "banned", "", "", 0, "banned"}});
  REQUIRE(ours);
  CHECK(*ours);
  REQUIRE(record_feed_answers(m.pool, "s1", load.load_id, {"2"}, {}));
  CHECK(m.db.scalar("SELECT count(*) FROM feed_offer_batches") == "2");
  CHECK(m.db.scalar("SELECT string_agg(external_id || ':' || error_id, ',' ORDER BY external_id)"
                    " FROM feed_offer_errors")
        == "e1:0,e2:0,e3:1000");
  // Errors stored again (a retried step): nothing twice.
  REQUIRE_FALSE(add_feed_offer_errors(
    m.pool, "s1", load.load_id, {{"e1", 0, "error", "validation", "Price", "t1", 12, "again"}}));
  CHECK(m.db.scalar("SELECT error_message FROM feed_offer_errors WHERE external_id = 'e1'")
        == "bad price");

  auto done = feed_answered(m.pool, "s1", load.load_id, "stats-final");
  REQUIRE(done);
  CHECK(*done);
  auto again = feed_answered(m.pool, "s1", load.load_id, "other");
  CHECK_FALSE(*again); // a re-delivered summary changes nothing
  auto got = get_feed_load(m.pool, "s1", load.load_id);
  REQUIRE(got);
  CHECK(got->status == "succeeded");
  CHECK(got->format == "avito");
  CHECK(got->statistics == "stats-final");
  // Answers for a load no longer in progress are not ours.
  CHECK_FALSE(*record_feed_answers(m.pool, "s1", load.load_id, {"3"}, {}));
}

TEST_CASE("one processor per seller; other sellers go on; a fatal error fails the load") {
  migrated_db m;
  make_feed(m, "s1", "a");
  make_feed(m, "s1", "b");
  make_feed(m, "s2", "a");
  auto l1 = create_feed_load(m.pool, upload("s1", "a", "x1"));
  auto l2 = create_feed_load(m.pool, upload("s1", "b", "x2"));
  auto l3 = create_feed_load(m.pool, upload("s2", "a", "x3"));
  REQUIRE((l1 && l2 && l3));
  CHECK(l1->status == "queued");
  auto a = take_feed_work(m.pool, "process", "n1");
  auto b = take_feed_work(m.pool, "process", "n2");
  auto c = take_feed_work(m.pool, "process", "n3");
  REQUIRE((a->has_value() && b->has_value()));
  CHECK((*a)->load.load_id == l1->load_id); // oldest first
  CHECK((*b)->load.seller_id == "s2");      // s1 is locked: the other seller
  CHECK_FALSE(c->has_value());              // s1's second feed waits for its lock
  REQUIRE_FALSE(feed_failed(m.pool, **a, "process", "malformed", "line 3: bad", "n1"));
  CHECK(status(m, "s1", l1->load_id) == "failed");
  auto failed = get_feed_load(m.pool, "s1", l1->load_id);
  CHECK(failed->error_kind == "malformed");
  CHECK(failed->error_message == "line 3: bad");
  auto next = take_feed_work(m.pool, "process", "n3");
  REQUIRE(next->has_value());
  CHECK((*next)->load.load_id == l2->load_id);
}

TEST_CASE("a seller's loads are taken in order even when another node has just picked the "
          "oldest and not yet locked the seller") {
  migrated_db m;
  make_feed(m, "s1", "a");
  auto l1 = create_feed_load(m.pool, upload("s1", "a", "x1"));
  auto l2 = create_feed_load(m.pool, upload("s1", "a", "x2"));
  REQUIRE((l1 && l2));
  // Another node's take, stopped between its pick (the oldest row, locked FOR UPDATE) and
  // its insert of the seller's lock: SKIP LOCKED passes over that row here.
  pqxx::connection other{m.db.dsn()};
  pqxx::work picked{other};
  auto row = picked.exec_params("SELECT load_id FROM feed_queue WHERE seller_id = 's1'"
                                " ORDER BY created_at, load_id LIMIT 1 FOR UPDATE");
  REQUIRE(row.size() == 1);
  REQUIRE(row[0][0].as<int64_t>() == l1->load_id);
  // This node must not take the seller's second load: it would win the lock and send the
  // loads out of order.
  auto early = take_feed_work(m.pool, "process", "n2");
  REQUIRE(early);
  CHECK_FALSE(early->has_value());
  CHECK(m.db.scalar("SELECT count(*) FROM feed_locks") == "0");
  picked.abort();
  auto first = take_feed_work(m.pool, "process", "n2");
  REQUIRE(first->has_value());
  CHECK((*first)->load.load_id == l1->load_id);
}

TEST_CASE("a transient failure retries later; a dead node's lock is reaped") {
  migrated_db m;
  make_feed(m, "s1", "a");
  auto l = create_feed_load(m.pool, upload("s1", "a", "x"));
  REQUIRE(l);
  auto job = take_feed_work(m.pool, "process", "n1");
  REQUIRE(job->has_value());
  REQUIRE_FALSE(feed_retry_later(m.pool, **job, "process", 1h, "broker away", "n1"));
  CHECK(m.db.scalar("SELECT attempts FROM feed_queue") == "1");
  CHECK_FALSE(take_feed_work(m.pool, "process", "n1")->has_value()); // not before an hour
  m.db.scalar("UPDATE feed_queue SET not_before = now()");
  auto again = take_feed_work(m.pool, "process", "dead-node");
  REQUIRE(again->has_value());
  CHECK((*again)->attempts == 1);
  // The node holding the lock dies (it left the cluster): the reaper frees the seller.
  m.db.scalar("INSERT INTO nodes (node_id, caf_host, caf_port, grpc_addr, http_addr, leaving)"
              " VALUES ('dead-node', '', 0, '', '', true)");
  m.db.scalar("INSERT INTO nodes (node_id, caf_host, caf_port, grpc_addr, http_addr)"
              " VALUES ('live-node', '', 0, '', '')");
  auto reaped = reap_feed_locks(m.pool, 60s, 6h);
  REQUIRE(reaped);
  CHECK(*reaped == 1);
  auto taken = take_feed_work(m.pool, "process", "live-node");
  REQUIRE(taken->has_value());
  // A live node's fresh lock stays; an old one goes (seed: hung tasks older than N hours).
  CHECK(*reap_feed_locks(m.pool, 60s, 6h) == 0);
  m.db.scalar("UPDATE feed_locks SET acquired = now() - interval '7 hours'");
  CHECK(*reap_feed_locks(m.pool, 60s, 6h) == 1);
}

TEST_CASE("loads of a removed or unknown feed are refused; old loads are queued for cleanup") {
  migrated_db m;
  CHECK_FALSE(create_feed_load(m.pool, upload("s1", "none", "x")));
  make_feed(m, "s1", "a");
  m.db.scalar("UPDATE feeds SET removed = true");
  CHECK_FALSE(create_feed_load(m.pool, upload("s1", "a", "x")));
  m.db.scalar("UPDATE feeds SET removed = false");
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto n = upload("s1", "a", "x" + std::to_string(i));
    n.keep_loads = 3;
    auto l = create_feed_load(m.pool, n);
    REQUIRE(l);
    ids.push_back(l->load_id);
    auto job = take_feed_work(m.pool, "process", "n1");
    REQUIRE(job->has_value());
    REQUIRE_FALSE(feed_failed(m.pool, **job, "process", "schema", "bad", "n1"));
  }
  // After the fifth: the newest three stay (this one counted), the first two are queued.
  CHECK(m.db.scalar("SELECT string_agg(load_id::text, ',' ORDER BY load_id) FROM feed_old_loads")
        == std::to_string(ids[0]) + "," + std::to_string(ids[1]));
}
