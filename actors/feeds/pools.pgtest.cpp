// The loader's and the processor's steps on a real PostgreSQL, with feeds served by a local
// HTTP server and a fake requests topic: a URL feed downloaded into the blob store and
// processed; hostile and broken files failing their load with the lock released; a server
// that fails now and then retried; a removed feed's closing load; two processors racing for
// one seller.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gost/core/shard_hash.hpp"
#include "gost/feeds/catalog.hpp"
#include "gost/feeds/gazetteer.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/two_groups.hpp"
#include "gost/v1/feed_service.pb.h"

using namespace gost;
using namespace gost::feeds;
using namespace std::chrono_literals;
using gost::testing::http_server;

namespace {

std::string sample(const std::string& name) {
  auto text = testing::read_file(std::string(GOST_FEEDS_SAMPLES_DIR) + "/" + name);
  REQUIRE_FALSE(text.empty());
  return text;
}

/// The requests topic: what each load sent, thread-safe (two processors share it).
struct topic_log {
  std::mutex m;
  std::vector<v1::FeedRequest> sent;
  int refuse_flushes = 0;
  std::vector<v1::FeedRequest> of(const std::string& task) {
    std::lock_guard<std::mutex> g{m};
    std::vector<v1::FeedRequest> out;
    for (auto& r : sent)
      if (r.task_id() == task)
        out.push_back(r);
    return out;
  }
};

struct fake_sink final : request_sink {
  explicit fake_sink(topic_log& l) : log(l) {}
  void send(const v1::FeedRequest& r, const stop_signal&) override {
    std::lock_guard<std::mutex> g{log.m};
    log.sent.push_back(r);
  }
  bool flushed(const stop_signal&) override {
    std::lock_guard<std::mutex> g{log.m};
    if (log.refuse_flushes > 0) {
      --log.refuse_flushes;
      return false;
    }
    return true;
  }
  topic_log& log;
};

struct fixture {
  gost::testing::migrated_db m;
  std::string dir = "/tmp/gost-feed-blobs-" + std::to_string(::getpid());
  blob_store blobs{dir, ""};
  topic_log topic;
  feed_stats stats;
  feed_pools_options o;
  stop_signal stop;

  fixture() {
    o.where = persistence::one_database(m.pool, 8);
    o.node_id = "n1";
    o.allow_private = true;
    o.batch_size = 2;
    o.retry_delay = 1ms;
    o.max_attempts = 3;
    o.unify = std::make_shared<unification_data>();
    o.blobs = &blobs;
    o.make_sink = [this] { return std::make_unique<fake_sink>(topic); };
    o.stats = &stats;
  }
  ~fixture() { std::filesystem::remove_all(dir); }

  /// Stores a feed in `in` (default: group 0's database).
  void feed(const std::string& seller, const std::string& ns, v1::FeedSettings s, bool due = false,
            gost::testing::temp_db* in = nullptr) {
    (in != nullptr ? *in : m.db)
      .scalar("INSERT INTO feeds (seller_id, namespace, settings, url, period_ms, next_fetch_at)"
              " VALUES ('"
              + seller + "', '" + ns + "', " + testing::bytea_literal(s.SerializeAsString()) + ", "
              + (s.url().empty() ? "NULL" : "'" + s.url() + "'") + ", 3600000, "
              + (due ? "now()" : "NULL") + ")");
  }
  std::string load_field(const std::string& seller, const std::string& col,
                         gost::testing::temp_db* in = nullptr) {
    return (in != nullptr ? *in : m.db)
      .scalar("SELECT " + col + " FROM feed_loads WHERE seller_id = '" + seller
              + "' ORDER BY load_id DESC LIMIT 1");
  }
  /// Runs loader and processor steps until neither finds work.
  void drain() {
    while (run_loader_step(o, stop) || run_processor_step(o, stop)) {
    }
  }
};

v1::FeedSettings url_feed(const std::string& url) {
  v1::FeedSettings s;
  s.set_kind(v1::FeedSettings::URL);
  s.set_url(url);
  return s;
}

} // namespace

TEST_CASE("a URL feed: downloaded into the blob store, processed, sent, in progress") {
  fixture f;
  auto body = sample("avito.xml");
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, body}; }};
  f.feed("s1", "avito", url_feed("http://127.0.0.1:" + std::to_string(srv.port()) + "/feed.xml"),
         true);
  f.drain();
  CHECK(f.load_field("s1", "status") == "in_progress");
  CHECK(f.load_field("s1", "format") == "avito");
  auto sha = f.load_field("s1", "sha256");
  CHECK(sha == sha256_hex(body) + ".xml");
  CHECK(std::filesystem::file_size(f.blobs.path_of(sha)) == body.size());
  auto id = f.load_field("s1", "load_id");
  auto sent = f.topic.of(id);
  REQUIRE(sent.size() == 3); // 3 offers in batches of 2, then the end
  CHECK(sent[0].batch().batch_id() == "1");
  CHECK(sent[2].has_end());
  CHECK(f.m.db.scalar("SELECT count(*) FROM feed_locks") == "0");
  CHECK(f.m.db.scalar("SELECT count(*) FROM feed_queue") == "0");
  CHECK(f.stats.fetched == 1);
  CHECK(f.stats.loads_sent == 1);
  CHECK(f.stats.offers_sent == 3);
  v1::FeedLoadStatistics st;
  auto stats = persistence::get_feed_load(f.m.pool, "s1", std::stoll(id));
  REQUIRE(stats);
  REQUIRE(st.ParseFromString(stats->statistics));
  CHECK(st.offers() == 3);
  CHECK(st.sent() == 3);
  CHECK(st.batches() == 2);
}

TEST_CASE("hostile and broken files fail their load with the reason; the lock is released; "
          "nothing is sent") {
  fixture f;
  std::string docs[] = {
    "<!DOCTYPE Ads [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><Ads><Ad><Title>&x;</Title></Ad>"
    "</Ads>",
    "<Ads><Ad><Id>1</Id><Title>Tom & Jerry</Title></Ad></Ads>",
    "<feed><offer><id>1</id></offer></feed>", // the schema wants a category
  };
  std::string kinds[] = {"hostile", "malformed", "schema"};
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    http_server srv{[&](const http_server::call&) { return http_server::reply{200, docs[i]}; }};
    auto seller = "s" + std::to_string(i);
    f.feed(seller, "x", url_feed("http://127.0.0.1:" + std::to_string(srv.port()) + "/f"), true);
    f.drain();
    CHECK(f.load_field(seller, "status") == "failed");
    CHECK(f.load_field(seller, "error_kind") == kinds[i]);
    CHECK_FALSE(f.load_field(seller, "error_message").empty());
    CHECK(f.topic.of(f.load_field(seller, "load_id")).empty());
  }
  CHECK(f.m.db.scalar("SELECT count(*) FROM feed_locks") == "0");
  CHECK(f.stats.loads_failed == 3);
}

TEST_CASE("downloads: 503 retried, 404 fails for good, an internal address refused when not "
          "allowed") {
  fixture f;
  auto body = sample("native.xml");
  std::atomic<int> calls{0};
  http_server flaky{[&](const http_server::call&) {
    return ++calls <= 2 ? http_server::reply{503, ""} : http_server::reply{200, body};
  }};
  f.feed("s1", "a", url_feed("http://127.0.0.1:" + std::to_string(flaky.port()) + "/f"), true);
  // Each retry waits its (tiny) delay: step until the load moved on.
  for (int i = 0; i < 20 && f.load_field("s1", "status") != "queued"; ++i) {
    run_loader_step(f.o, f.stop);
    f.m.db.scalar("UPDATE feed_queue SET not_before = now()");
  }
  CHECK(f.load_field("s1", "status") == "queued");
  CHECK(calls == 3);
  CHECK(f.load_field("s1", "attempts") == "2");

  http_server gone{std::vector<int>{404}};
  f.feed("s2", "a", url_feed("http://127.0.0.1:" + std::to_string(gone.port()) + "/f"), true);
  f.drain();
  CHECK(f.load_field("s2", "status") == "failed");
  CHECK(f.load_field("s2", "error_message").find("HTTP 404") != std::string::npos);

  f.o.allow_private = false;
  f.feed("s3", "a", url_feed("http://127.0.0.1:" + std::to_string(gone.port()) + "/f"), true);
  f.drain();
  CHECK(f.load_field("s3", "status") == "failed");
  CHECK(f.load_field("s3", "error_message").find("private") != std::string::npos);
}

TEST_CASE("a broker that does not acknowledge leaves the load queued for a retry; the retry "
          "sends the same batches and the end") {
  fixture f;
  auto body = sample("yml.xml");
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, body}; }};
  v1::FeedSettings s = url_feed("http://127.0.0.1:" + std::to_string(srv.port()) + "/f");
  s.set_default_address("Москва");
  f.feed("s1", "yml", s, true);
  f.topic.refuse_flushes = 1;
  f.o.retry_delay = 1h; // the retry waits until the test moves it
  f.drain();            // the first attempt's flush fails: retried after its delay
  CHECK(f.load_field("s1", "status") == "queued");
  f.m.db.scalar("UPDATE feed_queue SET not_before = now()");
  f.drain();
  CHECK(f.load_field("s1", "status") == "in_progress");
  auto sent = f.topic.of(f.load_field("s1", "load_id"));
  size_t ends = 0;
  for (auto& r : sent)
    ends += r.has_end();
  CHECK(ends == 1);
  CHECK(sent.back().has_end());
  CHECK(f.stats.loads_retried == 1);
}

TEST_CASE("a removed feed's closing load sends only the end with the feed's choice") {
  fixture f;
  v1::FeedSettings s;
  s.set_kind(v1::FeedSettings::UPLOAD);
  s.set_missing(v1::FeedSettings::MAKE_MANUAL);
  f.feed("s1", "up", s);
  persistence::new_feed_load n;
  n.seller_id = "s1";
  n.ns = "up";
  n.origin = "delete";
  n.sha256 = "-";
  auto l = persistence::create_feed_load(f.m.pool, n);
  REQUIRE(l);
  f.drain();
  auto sent = f.topic.of(std::to_string(l->load_id));
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].has_end());
  CHECK(sent[0].end().missing() == v1::FeedEnd::MAKE_MANUAL);
  CHECK(f.load_field("s1", "status") == "in_progress");
}

TEST_CASE("two processors racing for one seller: one at a time, both loads sent in order") {
  fixture f;
  v1::FeedSettings s;
  s.set_kind(v1::FeedSettings::UPLOAD);
  f.feed("s1", "a", s);
  auto body = sample("native.xml");
  std::string error;
  auto name = f.blobs.put(body, "xml", error);
  REQUIRE(error.empty());
  auto blob = name.substr(name.rfind('/') + 1);
  std::vector<int64_t> ids;
  for (int i = 0; i < 2; ++i) {
    persistence::new_feed_load n;
    n.seller_id = "s1";
    n.ns = "a";
    n.origin = "upload";
    n.sha256 = blob;
    auto l = persistence::create_feed_load(f.m.pool, n);
    REQUIRE(l);
    ids.push_back(l->load_id);
  }
  // Two workers of two nodes take steps at once, again and again.
  auto o2 = f.o;
  o2.node_id = "n2";
  auto both_sent = [&] {
    return f.m.db.scalar("SELECT count(*) FROM feed_loads WHERE status = 'in_progress'") == "2";
  };
  auto worker = [&](const feed_pools_options& o) {
    for (int i = 0; i < 500 && !both_sent(); ++i)
      run_processor_step(o, f.stop);
  };
  std::thread a([&] { worker(f.o); });
  std::thread b([&] { worker(o2); });
  a.join();
  b.join();
  for (auto id : ids)
    CHECK(f.m.db.scalar("SELECT status FROM feed_loads WHERE load_id = " + std::to_string(id))
          == "in_progress");
  // Each load's messages came whole, its end last; the first load was taken first.
  for (auto id : ids) {
    auto sent = f.topic.of(std::to_string(id));
    REQUIRE_FALSE(sent.empty());
    CHECK(sent.back().has_end());
  }
  std::lock_guard<std::mutex> g{f.topic.m};
  auto first_end =
    std::find_if(f.topic.sent.begin(), f.topic.sent.end(), [](auto& r) { return r.has_end(); });
  REQUIRE(first_end != f.topic.sent.end());
  CHECK(first_end->task_id() == std::to_string(ids[0]));
  // Nothing of the second load was sent before the first load's end: one processor at a time.
  for (auto it = f.topic.sent.begin(); it != first_end; ++it)
    CHECK(it->task_id() == std::to_string(ids[0]));
}

TEST_CASE("shard groups: a seller's feed, loads, queue rows and locks live in its home group's "
          "database; the pools take work from each, with load ids apart (ADR 0023)") {
  fixture f;
  gost::testing::migrated_db other;
  REQUIRE_FALSE(persistence::reserve_group_ids(other.pool, 1));
  f.o.where = std::make_shared<gost::testing::two_groups>(f.m.pool, other.pool, 8, 4);
  // A seller at home in each group (shards 0-3: group 0, 4-7: group 1).
  std::string west, east;
  for (int i = 0; west.empty() || east.empty(); ++i) {
    auto s = "seller-" + std::to_string(i);
    (shard_of(s, 8) < 4 ? west : east) = s;
  }
  auto body = sample("avito.xml");
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, body}; }};
  auto url = "http://127.0.0.1:" + std::to_string(srv.port()) + "/feed.xml";
  f.feed(west, "avito", url_feed(url), true);
  f.feed(east, "avito", url_feed(url), true, &other.db);
  f.drain();

  for (auto [seller, db, foreign] :
       {std::tuple{west, &f.m.db, &other.db}, std::tuple{east, &other.db, &f.m.db}}) {
    CAPTURE(seller);
    CHECK(f.load_field(seller, "status", db) == "in_progress");
    auto id = f.load_field(seller, "load_id", db);
    CHECK(f.topic.of(id).size() == 3); // each load sent whole: 3 offers in 2 batches, the end
    // Nothing of this seller's in the other database.
    CHECK(foreign->scalar("SELECT count(*) FROM feed_loads WHERE seller_id = '" + seller + "'")
          == "0");
    CHECK(db->scalar("SELECT count(*) FROM feed_locks") == "0");
    CHECK(db->scalar("SELECT count(*) FROM feed_queue") == "0");
  }
  // Group 1's load ids start at its base: a load id names one load in the installation.
  CHECK(std::stoll(f.load_field(west, "load_id", &f.m.db)) < persistence::group_id_base(1));
  CHECK(std::stoll(f.load_field(east, "load_id", &other.db)) > persistence::group_id_base(1));
  CHECK(f.stats.loads_sent == 2);

  // A dead node's lock in group 1's database is reaped there; work of that seller goes on.
  other.db.scalar("INSERT INTO feed_locks (context, seller_id, node_id, acquired)"
                  " VALUES ('feedprocessor', '"
                  + east + "', 'gone', now() - interval '1 day')");
  f.o.lock_max_hold = 1h;
  v1::FeedSettings up;
  up.set_kind(v1::FeedSettings::UPLOAD);
  f.feed(east, "up", up, false, &other.db);
  std::string error;
  auto name = f.blobs.put(body, "xml", error);
  REQUIRE(error.empty());
  persistence::new_feed_load n;
  n.seller_id = east;
  n.ns = "up";
  n.origin = "upload";
  n.sha256 = name.substr(name.rfind('/') + 1);
  auto l = persistence::create_feed_load(other.pool, n);
  REQUIRE(l);
  // Held by the dead node's lock until the reaper frees it: it runs with a loader step, at
  // most every 10 s (a process-wide pace), so the steps go on until the load is taken.
  auto status = [&] {
    return other.db.scalar("SELECT status FROM feed_loads WHERE load_id = "
                           + std::to_string(l->load_id));
  };
  CHECK(gost::testing::eventually(60s, [&] {
    f.drain();
    return status() == "in_progress";
  }));
  CHECK(f.stats.locks_reaped == 1);
  CHECK(other.db.scalar("SELECT count(*) FROM feed_locks") == "0");
}
