// Feeds end to end (issue 23): gostd with the feed processor (`feed.enabled`) and the offer
// store's exchange on a real Kafka broker (GOST_TEST_KAFKA), feeds served by a local HTTP
// server. Each of the three formats reaches the store unified; a second load removes the
// offers it no longer carries and keeps a rejected one; two feeds of one seller live in two
// namespaces; kill -9 mid-load, and after the restart the store ends as after one clean load.
#include <doctest/doctest.h>

#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "gost/core/shard_hash.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/feed_service.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;
using testing::eventually;
using testing::http_server;

namespace {

std::string sample(const std::string& name) {
  auto text =
    testing::read_file(std::string(GOST_SOURCE_DIR) + "/actors/feeds/data/samples/" + name);
  REQUIRE_FALSE(text.empty());
  return text;
}

/// Files the test serves, by path; changed between loads. A download of a path `hold` names
/// waits (the loader holding its seller's lock) until `release`.
struct feed_files {
  std::mutex m;
  std::condition_variable released;
  std::string held;
  std::map<std::string, std::string> by_path;
  void set(const std::string& path, std::string body) {
    std::lock_guard<std::mutex> g{m};
    by_path[path] = std::move(body);
  }
  void hold(const std::string& path) {
    std::lock_guard<std::mutex> g{m};
    held = path;
  }
  void release() {
    {
      std::lock_guard<std::mutex> g{m};
      held.clear();
    }
    released.notify_all();
  }
  http_server::reply serve(const http_server::call& c) {
    std::unique_lock<std::mutex> g{m};
    released.wait(g, [&] { return held != c.path; });
    auto it = by_path.find(c.path);
    if (it == by_path.end())
      return {404, "no such feed"};
    return {200, it->second};
  }
};

struct node_run {
  testing::temp_db& db;
  std::string tag;
  std::string blobs;
  std::string port_file;
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::OfferService::Stub> offers;
  std::unique_ptr<v1::FeedService::Stub> feeds;
  std::vector<std::string> extra; ///< more flags
  std::string addr;               ///< its gRPC address, once started

  node_run(testing::temp_db& d, std::string t) : db(d), tag(std::move(t)) {
    blobs = "/tmp/gost-feed-e2e-blobs-" + tag;
    port_file = "/tmp/gostd-feed-e2e-" + tag;
  }
  ~node_run() {
    proc.reset();
    std::remove(port_file.c_str());
    std::system(("rm -rf " + blobs).c_str());
  }

  void start() {
    std::remove(port_file.c_str());
    std::vector<std::string> args{"--pg.dsn=" + db.dsn(),
                                  "--grpc.listen=127.0.0.1:0",
                                  "--grpc.port_file=" + port_file,
                                  "--shard.count=4",
                                  "--kafka.brokers=" + testing::kafka_brokers(),
                                  "--kafka.topic=gost.saved-" + tag,
                                  "--feed.requests_topic=gost.fp-req-" + tag,
                                  "--feed.responses_topic=gost.fp-resp-" + tag,
                                  "--feed.group=gost.fp-" + tag,
                                  "--feed.responses_group=gost.fp-answers-" + tag,
                                  "--feed.enabled=true",
                                  "--feed.allow_private_sources=true",
                                  "--feed.poll=100ms",
                                  "--feed.batch_size=50",
                                  "--feed.retry_delay=200ms",
                                  "--images.blob_dir=" + blobs,
                                  "--stages.expire.enabled=false",
                                  "--node.id=feed-node-" + tag};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<child_process>(GOSTD_PATH, args);
    int port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    addr = "127.0.0.1:" + std::to_string(port);
    auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
    offers = v1::OfferService::NewStub(channel);
    feeds = v1::FeedService::NewStub(channel);
  }

  /// A URL feed, due now.
  void feed(const std::string& seller, const std::string& ns, const std::string& url,
            const std::string& default_address = {}) {
    v1::FeedSettings s;
    s.set_kind(v1::FeedSettings::URL);
    s.set_url(url);
    s.set_default_address(default_address);
    db.scalar("INSERT INTO feeds (seller_id, namespace, settings, url, period_ms, next_fetch_at)"
              " VALUES ('"
              + seller + "', '" + ns + "', " + testing::bytea_literal(s.SerializeAsString()) + ", '"
              + url + "', 86400000, now())");
  }

  /// The feed's newest load's column.
  std::string last_load(const std::string& seller, const std::string& ns, const std::string& col) {
    return db.scalar("SELECT " + col + " FROM feed_loads WHERE seller_id = '" + seller
                     + "' AND namespace = '" + ns + "' ORDER BY load_id DESC LIMIT 1");
  }

  bool wait_succeeded(const std::string& seller, const std::string& ns, int loads = 1) {
    return eventually(90s, [&] {
      return db.scalar("SELECT count(*) FROM feed_loads WHERE seller_id = '" + seller
                       + "' AND namespace = '" + ns + "' AND status = 'succeeded'")
             == std::to_string(loads);
    });
  }

  v1::FeedLoadStatistics statistics(const std::string& seller, const std::string& ns) {
    v1::FeedLoadStatistics s;
    auto h = db.scalar("SELECT encode(s.statistics, 'hex') FROM feed_statistics s JOIN feed_loads l"
                       " USING (seller_id, load_id) WHERE l.seller_id = '"
                       + seller + "' AND l.namespace = '" + ns + "' ORDER BY load_id DESC LIMIT 1");
    REQUIRE(s.ParseFromString(testing::from_hex(h)));
    return s;
  }

  std::optional<v1::Offer> get(const std::string& seller, const std::string& ns,
                               const std::string& ext) {
    v1::GetOfferRequest req;
    auto* k = req.mutable_ref()->mutable_key();
    k->set_seller_id(seller);
    k->set_namespace_(ns);
    k->set_external_id(ext);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    if (!offers->GetOffer(&ctx, req, &resp).ok())
      return std::nullopt;
    return resp.offer();
  }

  std::string count(const std::string& seller, const std::string& ns) {
    return db.scalar("SELECT count(*) FROM offers WHERE seller_id = '" + seller
                     + "' AND namespace = '" + ns + "'");
  }
};

std::string tag_of() {
  return std::to_string(getpid()) + "-"
         + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
}

/// An Avito feed of `n` flats (titles made from the fields) in Moscow, `first` on.
std::string flats(int first, int n, const std::string& extra = {}) {
  std::string doc = "<Ads formatVersion=\"3\" target=\"Avito.ru\">\n";
  for (int i = first; i < first + n; ++i)
    doc += "<Ad><Id>flat-" + std::to_string(i)
           + "</Id><Category>Квартиры</Category><Rooms>2</Rooms><Square>"
           + std::to_string(40 + i % 30) + "</Square><Floor>3</Floor><Floors>9</Floors>" + "<Price>"
           + std::to_string(5000000 + i) + "</Price><Address>Москва, ул. Тверская, "
           + std::to_string(i % 50 + 1) + "</Address></Ad>\n";
  return doc + extra + "</Ads>\n";
}

} // namespace

TEST_CASE("three formats end to end; a second load removes what it no longer carries and "
          "keeps what it rejected; two namespaces of one seller stay apart") {
  testing::temp_db db;
  auto tag = tag_of();
  feed_files files;
  http_server srv{[&](const http_server::call& c) { return files.serve(c); }};
  auto url = [&](const std::string& p) {
    return "http://127.0.0.1:" + std::to_string(srv.port()) + p;
  };
  files.set("/native.xml", sample("native.xml"));
  files.set("/avito.xml", sample("avito.xml"));
  files.set("/yml.xml", sample("yml.xml"));
  node_run n{db, tag};
  n.start();
  n.feed("shop-a", "native", url("/native.xml"));
  n.feed("shop-b", "avito", url("/avito.xml"));
  n.feed("shop-b", "yml", url("/yml.xml"), "Екатеринбург");
  REQUIRE_MESSAGE(n.wait_succeeded("shop-a", "native"), n.proc->output());
  REQUIRE_MESSAGE(n.wait_succeeded("shop-b", "avito"), n.proc->output());
  REQUIRE_MESSAGE(n.wait_succeeded("shop-b", "yml"), n.proc->output());

  CHECK(n.count("shop-a", "native") == "3");
  CHECK(n.count("shop-b", "avito") == "3");
  CHECK(n.count("shop-b", "yml") == "2");
  auto car = n.get("shop-a", "native", "car-1001");
  REQUIRE(car);
  CHECK(car->category() == "transport.cars");
  CHECK(car->address().city() == "Москва");
  CHECK(car->address().geo_id() > 0);
  CHECK(car->source() == v1::OFFER_SOURCE_FEED);
  CHECK(car->attributes().count("transmission") == 1);
  auto flat = n.get("shop-b", "avito", "a-2002");
  REQUIRE(flat);
  CHECK(flat->title() == "2-к. квартира, 54 м², 3/9 эт.");
  CHECK(flat->address().city() == "Санкт-Петербург");
  auto phone = n.get("shop-b", "yml", "y-1001");
  REQUIRE(phone);
  CHECK(phone->address().city() == "Екатеринбург"); // the feed's default address
  CHECK(phone->price().amount_minor() == 1999000);
  auto st = n.statistics("shop-b", "avito");
  CHECK(st.offers() == 3);
  CHECK(st.sent() == 3);
  CHECK(st.added() == 3);
  CHECK(n.last_load("shop-b", "avito", "format") == "avito");

  // The Avito feed changes: a-1001 is gone, a-2002 gets a new price, a-3003 comes with a
  // price written "1 500 руб." (rejected, carried: its stored offer stays).
  auto next = sample("avito.xml");
  auto cut = [&](const std::string& from, const std::string& to) {
    auto a = next.find(from);
    auto b = next.find(to, a);
    REQUIRE((a != std::string::npos && b != std::string::npos));
    next.erase(a, b + to.size() - a);
  };
  cut("<Ad>\n    <Id>a-1001</Id>", "</Ad>");
  next.replace(next.find("<Price>7800000</Price>"), 22, "<Price>7700000</Price>");
  next.replace(next.find("<Price>2500</Price>"), 19, "<Price>1 500 руб.</Price>");
  files.set("/avito.xml", next);
  db.scalar("UPDATE feeds SET next_fetch_at = now() WHERE namespace = 'avito'");
  REQUIRE_MESSAGE(n.wait_succeeded("shop-b", "avito", 2), n.proc->output());
  auto st2 = n.statistics("shop-b", "avito");
  CHECK(st2.offers() == 2);
  CHECK(st2.rejected_here() == 1);
  CHECK(st2.updated() == 1);
  CHECK(st2.deleted() == 1);
  CHECK_FALSE(n.get("shop-b", "avito", "a-1001").has_value());
  CHECK(n.get("shop-b", "avito", "a-2002")->price().amount_minor() == 770000000);
  auto dress = n.get("shop-b", "avito", "a-3003");
  REQUIRE(dress); // rejected in this load, kept from the first
  CHECK(dress->price().amount_minor() == 250000);
  auto load_id = n.last_load("shop-b", "avito", "load_id");
  CHECK(db.scalar("SELECT error_type || ':' || field FROM feed_offer_errors WHERE load_id = "
                  + load_id + " AND external_id = 'a-3003' AND error_id = 0")
        == "validation:Price");
  // The other namespace of the same seller was not touched.
  CHECK(n.count("shop-b", "yml") == "2");
  CHECK(n.get("shop-b", "yml", "y-2002")->version() == 1);
}

TEST_CASE("kill -9 mid-load: after the restart the load completes and the store is as after "
          "one clean load") {
  testing::temp_db db;
  auto tag = tag_of();
  feed_files files;
  http_server srv{[&](const http_server::call& c) { return files.serve(c); }};
  const int offers = 6000;
  files.set("/big.xml", flats(0, offers));
  node_run n{db, tag};
  n.start();
  n.feed("big", "flats", "http://127.0.0.1:" + std::to_string(srv.port()) + "/big.xml");
  // Killed once part of the load reached the store.
  REQUIRE_MESSAGE(eventually(90s, [&] { return std::stoi(n.count("big", "flats")) > 0; }),
                  n.proc->output());
  auto status_at_kill = n.last_load("big", "flats", "status");
  n.proc->signal(SIGKILL);
  n.proc->wait(10s);
  MESSAGE("killed with the load " << status_at_kill << " and " << n.count("big", "flats")
                                  << " offers stored");
  n.start();
  REQUIRE_MESSAGE(n.wait_succeeded("big", "flats"), n.proc->output());
  CHECK(n.count("big", "flats") == std::to_string(offers));
  // Each offer applied once: nothing was written twice by the repeated batches.
  CHECK(db.scalar("SELECT max(version) FROM offers WHERE seller_id = 'big'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM feed_loads WHERE seller_id = 'big'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM feed_locks") == "0");
  auto st = n.statistics("big", "flats");
  CHECK(st.offers() == offers);
  CHECK(st.added() + st.unchanged() == offers);
}

namespace {

/// gostd on shard groups (ADR 0023), with a file server whose downloads can be held: the
/// catalog `db` holds shards 0-1 (group 0), `east` shards 2-3 (group 1); `west`, when asked
/// for, is group 2, holding nothing until a move.
struct grouped_feeds {
  testing::temp_db db;
  testing::temp_db east;
  std::optional<testing::temp_db> west;
  feed_files files;
  http_server srv{[this](const http_server::call& c) { return files.serve(c); }};
  struct unhold { // a failed check never leaves the server's workers waiting at its stop
    feed_files& f;
    ~unhold() { f.release(); }
  } unhold_at_exit{files};
  node_run n{db, tag_of()};

  explicit grouped_feeds(bool with_west) {
    if (with_west)
      west.emplace();
    n.extra = {"--tasks.enabled=false"}; // task types serve one database so far
    n.start();                           // the catalog's schema and installation
    n.proc->signal(SIGTERM);
    REQUIRE(n.proc->wait(30s) == 0);
    db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'east', '" + east.dsn() + "')"
              + (west ? ", (2, 'west', '" + west->dsn() + "')" : std::string{}));
    db.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, 1, 0),"
              " (2, 3, 1)");
    n.start();
  }

  /// A URL feed `flats` of `seller` made through FeedService, served at /<seller>.xml.
  v1::FeedRef create_feed(const std::string& seller) {
    v1::CreateFeedRequest req;
    req.mutable_feed()->set_seller_id(seller);
    req.mutable_feed()->set_namespace_("flats");
    req.mutable_settings()->set_kind(v1::FeedSettings::URL);
    req.mutable_settings()->set_url("http://127.0.0.1:" + std::to_string(srv.port()) + "/" + seller
                                    + ".xml");
    req.mutable_settings()->mutable_period()->set_seconds(86400);
    v1::CreateFeedResponse resp;
    grpc::ClientContext ctx;
    auto st = n.feeds->CreateFeed(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return req.feed();
  }

  /// A load of the feed now (FeedService.LoadNow).
  void load_now(const v1::FeedRef& feed) {
    v1::LoadNowRequest req;
    *req.mutable_feed() = feed;
    v1::LoadNowResponse resp;
    grpc::ClientContext ctx;
    auto st = n.feeds->LoadNow(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
};

} // namespace

TEST_CASE("shard groups: a seller's feeds, loads and offers live in its home group's database; "
          "loads run in both groups through the API, and go on after kill -9 (ADR 0023)") {
  grouped_feeds g{false};
  auto& n = g.n;
  // A seller at home in each group.
  std::string west_seller, east_seller;
  for (int i = 0; west_seller.empty() || east_seller.empty(); ++i) {
    auto s = "shop-" + std::to_string(i);
    (shard_of(s, 4) < 2 ? west_seller : east_seller) = s;
  }
  struct home {
    std::string seller;
    testing::temp_db* db;
    testing::temp_db* other;
    v1::FeedRef feed;
  };
  std::vector<home> homes{{west_seller, &g.db, &g.east, {}}, {east_seller, &g.east, &g.db, {}}};
  auto succeeded = [](home& h, int loads) {
    return eventually(90s, [&] {
      return h.db->scalar("SELECT count(*) FROM feed_loads WHERE seller_id = '" + h.seller
                          + "' AND status = 'succeeded'")
             == std::to_string(loads);
    });
  };
  auto offers_of = [](testing::temp_db* d, const std::string& seller) {
    return d->scalar("SELECT count(*) FROM offers WHERE seller_id = '" + seller + "'");
  };
  for (auto& h : homes) {
    g.files.set("/" + h.seller + ".xml", flats(0, 30));
    h.feed = g.create_feed(h.seller);
  }
  for (auto& h : homes) {
    CAPTURE(h.seller);
    REQUIRE_MESSAGE(succeeded(h, 1), n.proc->output());
    CHECK(offers_of(h.db, h.seller) == "30");
    // Nothing of the seller's in the other database: feed, loads, offers, the exchange's task.
    for (auto* table : {"feeds", "feed_loads", "feed_tasks", "offers"})
      CHECK_MESSAGE(h.other->scalar(std::string("SELECT count(*) FROM ") + table
                                    + " WHERE seller_id = '" + h.seller + "'")
                      == "0",
                    table);
    auto flat = n.get(h.seller, "flats", "flat-7");
    REQUIRE(flat);
    CHECK(flat->source() == v1::OFFER_SOURCE_FEED);
  }
  // Group 1's load ids start at its base (2^48): a load id names one load in the installation.
  CHECK(std::stoll(g.east.scalar("SELECT max(load_id) FROM feed_loads")) > (int64_t{1} << 48));

  // The feeds shrink to 20 flats; both loads asked through the API, and the node killed -9
  // while downloading group 1's seller's file (its loader lock held in group 1's database):
  // after the restart the node frees its old lock there, and each load ends in its group,
  // the 10 missing deleted.
  g.files.hold("/" + east_seller + ".xml");
  for (auto& h : homes) {
    g.files.set("/" + h.seller + ".xml", flats(0, 20));
    g.load_now(h.feed);
  }
  REQUIRE_MESSAGE(
    eventually(60s, [&] { return g.east.scalar("SELECT count(*) FROM feed_locks") == "1"; }),
    n.proc->output());
  n.proc->signal(SIGKILL);
  n.proc->wait(10s);
  g.files.release();
  n.start();
  for (auto& h : homes) {
    CAPTURE(h.seller);
    REQUIRE_MESSAGE(succeeded(h, 2), n.proc->output());
    CHECK(offers_of(h.db, h.seller) == "20");
    CHECK(offers_of(h.other, h.seller) == "0");
    CHECK_FALSE(n.get(h.seller, "flats", "flat-25").has_value());
    CHECK(h.db->scalar("SELECT count(*) FROM feed_locks") == "0");
  }
  auto out = n.proc->output();
  CHECK_MESSAGE(out.find("left group=1") != std::string::npos, out);
}

TEST_CASE("shard groups: gostctl move-shards moves a group holding feeds while a download runs: "
          "the step refused at the source is redone at the target, every offer stored once, "
          "the feed goes on there (ADR 0023)") {
  grouped_feeds g{true};
  auto& n = g.n;
  auto& east = g.east;
  auto& west = *g.west;
  std::string seller;
  for (int i = 0; seller.empty(); ++i)
    if (shard_of("shop-" + std::to_string(i), 4) >= 2)
      seller = "shop-" + std::to_string(i);
  auto offers_in = [&](testing::temp_db& d) {
    return d.scalar("SELECT count(*) FROM offers WHERE seller_id = '" + seller + "'");
  };
  auto succeeded_in = [&](testing::temp_db& d, int loads) {
    return eventually(90s, [&] {
      return d.scalar("SELECT count(*) FROM feed_loads WHERE seller_id = '" + seller
                      + "' AND status = 'succeeded'")
             == std::to_string(loads);
    });
  };
  auto path = "/" + seller + ".xml";
  g.files.set(path, flats(0, 400));
  g.files.hold(path); // the download waits, its seller's lock held at `east`
  auto feed = g.create_feed(seller);
  REQUIRE_MESSAGE(
    eventually(60s, [&] { return east.scalar("SELECT count(*) FROM feed_locks") == "1"; }),
    n.proc->output());

  child_process ctl{GOSTCTL_PATH,
                    {"--addr", n.addr, "--who", "e2e", "move-shards", "2-3", "--to", "west"}};
  REQUIRE_MESSAGE(ctl.wait(120s) == 0, ctl.output());
  auto out = ctl.output();
  CHECK_MESSAGE(out.find("feed_loads: 1 rows") != std::string::npos, out);
  CHECK_MESSAGE(out.find("done: shards 2-3 moved from `east` to `west`") != std::string::npos, out);
  // At the target the load waits for its file again, with no lock: the step at the source is
  // refused once its file comes, and the load is downloaded anew at `west`.
  CHECK(west.scalar("SELECT status FROM feed_loads WHERE seller_id = '" + seller + "'")
        == "fetching");
  CHECK(west.scalar("SELECT count(*) FROM feed_locks") == "0");
  for (const char* table : {"feeds", "feed_loads", "feed_queue", "feed_locks"})
    CHECK_MESSAGE(east.scalar(std::string("SELECT count(*) FROM ") + table) == "0", table);
  g.files.release();
  REQUIRE_MESSAGE(succeeded_in(west, 1), n.proc->output());
  CHECK_MESSAGE(n.proc->output().find("are moving to group `west`") != std::string::npos,
                n.proc->output()); // the held step's record, refused at the source
  CHECK(offers_in(west) == "400");
  CHECK(offers_in(east) == "0");
  CHECK(west.scalar("SELECT max(version) FROM offers WHERE seller_id = '" + seller + "'") == "1");
  CHECK(west.scalar("SELECT count(*) FROM feed_tasks") == "1");
  CHECK(east.scalar("SELECT count(*) FROM feed_tasks") == "0");
  CHECK(n.get(seller, "flats", "flat-399").has_value());

  // The feed goes on at its new home: a smaller file, loaded now.
  g.files.set(path, flats(0, 300));
  g.load_now(feed);
  REQUIRE_MESSAGE(succeeded_in(west, 2), n.proc->output());
  CHECK(offers_in(west) == "300");
  CHECK(east.scalar("SELECT count(*) FROM feed_loads") == "0");
}
