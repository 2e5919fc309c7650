// A PostgreSQL outage under writes, on a server of the test's own: stopped in immediate mode
// (connections cut, as in a crash) while creates commit, started again. The node stays alive
// but unready while the database is away, says so once in its log and once when it is back,
// loses no acknowledged write, and answers "safe to retry" only for writes that did not land.
// With two shard groups (ADR 0023), one group's server stopped leaves the other serving.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gost/testing/grpc.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;
using testing::health_status;

namespace {

using clock_type = std::chrono::steady_clock;

bool http_says(uint16_t port, const std::string& path, const std::string& status) {
  return testing::http_get(port, path).rfind("HTTP/1.1 " + status, 0) == 0;
}

/// One create as the client saw it.
struct write_record {
  std::string external_id;
  bool with_request_id = false;
  int attempts = 0;
  grpc::StatusCode last = grpc::StatusCode::OK;
  std::string message;  ///< of the last answer
  std::string offer_id; ///< when answered OK
  clock_type::time_point answered;
};

/// Creates offers one after another until stopped. With request ids, each is retried with its
/// id until it is answered OK (as docs/api.md "Retries" invites); without, each is tried once.
class writer {
public:
  writer(int port, bool request_ids)
    : stub_(v1::OfferService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                          grpc::InsecureChannelCredentials()))),
      request_ids_(request_ids), thread_([this] { run(); }) {}

  ~writer() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

  std::vector<write_record> records() {
    std::lock_guard<std::mutex> guard{mtx_};
    return records_;
  }

  size_t acknowledged() {
    std::lock_guard<std::mutex> guard{mtx_};
    size_t n = 0;
    for (auto& r : records_)
      n += r.last == grpc::StatusCode::OK ? 1 : 0;
    return n;
  }

private:
  void run() {
    for (int i = 0; !stop_; ++i) {
      write_record r;
      r.with_request_id = request_ids_;
      r.external_id = (request_ids_ ? "req-sku-" : "sku-") + std::to_string(i);
      v1::CreateOfferRequest req;
      req.mutable_offer()->set_seller_id("outage-seller");
      req.mutable_offer()->set_external_id(r.external_id);
      req.mutable_offer()->set_title("offer " + std::to_string(i));
      if (r.with_request_id)
        req.set_request_id("req-" + std::to_string(i));
      for (;;) {
        v1::CreateOfferResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 5s);
        auto s = stub_->CreateOffer(&ctx, req, &resp);
        ++r.attempts;
        r.last = s.error_code();
        r.message = s.error_message();
        r.answered = clock_type::now();
        if (s.ok())
          r.offer_id = resp.offer().id();
        bool retry = r.with_request_id && !s.ok()
                     && (s.error_code() == grpc::StatusCode::UNAVAILABLE
                         || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                         || s.error_code() == grpc::StatusCode::UNKNOWN);
        if (!retry || stop_)
          break;
        // The client's own back-off between retries.
        std::this_thread::sleep_for(50ms);
      }
      {
        std::lock_guard<std::mutex> guard{mtx_};
        records_.push_back(r);
      }
      std::this_thread::sleep_for(10ms); // a steady trickle, not a flood
    }
  }

  std::unique_ptr<v1::OfferService::Stub> stub_;
  const bool request_ids_;
  std::atomic<bool> stop_{false};
  std::mutex mtx_;
  std::vector<write_record> records_;
  std::thread thread_; // last: runs on everything above
};

/// The node's log lines from `from` on.
std::vector<std::string> lines_from(const std::string& log, size_t from) {
  std::vector<std::string> out;
  std::istringstream in{log.substr(std::min(from, log.size()))};
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

size_t count_with(const std::vector<std::string>& lines, const std::string& what) {
  size_t n = 0;
  for (auto& l : lines)
    n += l.find(what) != std::string::npos ? 1 : 0;
  return n;
}

} // namespace

TEST_CASE("a PostgreSQL outage under writes: unready meanwhile, one lost and one back line, "
          "nothing acknowledged lost, nothing doubled") {
  testing::private_server pg{std::string{GOST_SOURCE_DIR} + "/scripts/pg.sh"};
  auto port_file = "/tmp/gostd-outage-" + std::to_string(getpid());
  std::remove(port_file.c_str());
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + pg.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=16", "--scheduler.threads=2"}};
  int grpc_port = 0;
  uint16_t http_port = 0;
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        std::ifstream in(port_file);
                                        int h = 0;
                                        if (in >> grpc_port >> h)
                                          http_port = static_cast<uint16_t>(h);
                                        return http_port != 0 || !node.running();
                                      }),
                  node.output());
  REQUIRE_MESSAGE(http_port != 0, node.output());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                     grpc::InsecureChannelCredentials());

  // Ready once every shard has its owner.
  CHECK_MESSAGE(
    testing::eventually(
      20s, [&] { return http_says(http_port, "/readyz", "200") && health_status(channel) == 1; }),
    node.output());
  CHECK(testing::http_get(http_port, "/metrics").find("gost_ready 1") != std::string::npos);

  writer retrying{grpc_port, true};
  writer once{grpc_port, false};
  REQUIRE(testing::eventually(
    20s, [&] { return retrying.acknowledged() >= 10 && once.acknowledged() >= 10; }));

  // The outage.
  auto log_before = node.output().size();
  pg.stop(true);
  auto down_at = clock_type::now();
  bool unready = testing::eventually(
    10s, [&] { return health_status(channel) == 2 && http_says(http_port, "/readyz", "503"); });
  CHECK_MESSAGE(unready, node.output().substr(log_before));
  auto readyz = testing::http_get(http_port, "/readyz");
  CHECK_MESSAGE(readyz.find("not ready: postgresql unreachable for") != std::string::npos, readyz);
  CHECK(testing::http_get(http_port, "/metrics").find("gost_ready 0") != std::string::npos);
  CHECK(
    testing::http_get(http_port, "/metrics").find("gost_dependency_up{dependency=\"postgresql\"} 0")
    != std::string::npos);
  // Five seconds of it: alive all along (liveness is not readiness), unready all along.
  bool alive = true;
  bool stayed_unready = true;
  while (clock_type::now() - down_at < 5s) {
    alive = alive && http_says(http_port, "/healthz", "200");
    stayed_unready = stayed_unready && health_status(channel) == 2;
    std::this_thread::sleep_for(200ms); // the probe's period, as a balancer's would be
  }
  CHECK(alive);
  CHECK(stayed_unready);
  CHECK(node.running());
  auto outage_log = node.output().size();

  pg.start();
  auto up_at = clock_type::now();
  bool ready_again = testing::eventually(
    30s, [&] { return health_status(channel) == 1 && http_says(http_port, "/readyz", "200"); });
  CHECK_MESSAGE(ready_again, node.output().substr(log_before));
  auto acked_at_restart = once.acknowledged();
  CHECK(testing::eventually(30s, [&] { return once.acknowledged() >= acked_at_restart + 20; }));
  retrying.stop();
  once.stop();

  // The log: one line when the database went, one when it came back (with how long), a
  // bounded number of others over the whole outage, one record per line.
  auto during = lines_from(node.output(), log_before);
  auto all = lines_from(node.output(), 0);
  CHECK_MESSAGE(count_with(all, "postgresql unreachable since=") == 1,
                node.output().substr(log_before));
  CHECK_MESSAGE(count_with(all, "postgresql reachable again after=") == 1,
                node.output().substr(log_before));
  auto outage_lines = lines_from(node.output().substr(0, outage_log), log_before).size();
  MESSAGE("log lines during the 5 s outage: " << outage_lines
                                              << "; from the stop until ready "
                                                 "again and 20 more writes: "
                                              << during.size());
  CHECK_MESSAGE(outage_lines < 50, node.output().substr(log_before));
  CHECK_MESSAGE(during.size() < 80, node.output().substr(log_before));
  // Every line is a record of the node's loggers (they start with the date). One exception,
  // not written by gost: libpq's default notice processor prints a server notice to stderr
  // when it reaches a connection libpqxx has not set up yet (libpqxx silences notices once
  // a connection is set up) — now and then the shutdown's own notice.
  for (auto& l : during)
    CHECK_MESSAGE((l.rfind("20", 0) == 0
                   || l == "WARNING:  terminating connection due to immediate shutdown command"),
                  "not a log record of its own: " << l);

  // The writes: every acknowledged one is stored once; a create retried with its request id is
  // stored once; nothing answered "safe to retry" was stored.
  auto records = retrying.records();
  for (auto& r : once.records())
    records.push_back(r);
  size_t acked = 0;
  size_t safe_to_retry = 0;
  size_t retried = 0;
  int most_attempts = 0;
  clock_type::time_point first_ok_after_restart{};
  for (auto& r : records) {
    auto stored = pg.scalar("SELECT count(*) FROM offers WHERE seller_id = 'outage-seller' AND "
                            "external_id = '"
                            + r.external_id + "'");
    if (r.last == grpc::StatusCode::OK) {
      ++acked;
      CHECK_MESSAGE(stored == "1", r.external_id << " acknowledged as " << r.offer_id);
      CHECK(pg.scalar("SELECT count(*) FROM offers WHERE offer_id = '" + r.offer_id + "'") == "1");
      if (r.answered > up_at && first_ok_after_restart == clock_type::time_point{})
        first_ok_after_restart = r.answered;
    } else if (r.last == grpc::StatusCode::UNAVAILABLE
               && r.message.find("safe to retry") != std::string::npos) {
      ++safe_to_retry;
      CHECK_MESSAGE(stored == "0", r.external_id << " was answered: " << r.message);
    } else {
      // UNKNOWN (the outcome could not be read back) or a deadline: either way, at most once.
      CHECK_MESSAGE((stored == "0" || stored == "1"), r.external_id << ": " << stored);
    }
    if (r.with_request_id && r.attempts > 1)
      ++retried;
    most_attempts = std::max(most_attempts, r.attempts);
  }
  MESSAGE("writes: " << records.size() << " acknowledged: " << acked << " answered safe to retry: "
                     << safe_to_retry << " creates retried with their request id: " << retried
                     << " (at most " << most_attempts << " attempts)");
  CHECK(retried > 0);       // the outage was seen by creates with a request id
  CHECK(safe_to_retry > 0); // and by creates without one
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first_ok_after_restart - up_at);
  MESSAGE("first create acknowledged " << ms.count()
                                       << " ms after the server accepted "
                                          "connections again");

  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

namespace {

/// One update of an offer's title; its new version in `version` when answered OK.
grpc::Status update_title(v1::OfferService::Stub& stub, const std::string& id,
                          const std::string& seller, const std::string& title, int64_t& version) {
  v1::UpdateOfferRequest req;
  req.mutable_offer()->set_id(id);
  req.mutable_offer()->set_seller_id(seller);
  req.mutable_offer()->set_title(title);
  v1::UpdateOfferResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  auto s = stub.UpdateOffer(&ctx, req, &resp);
  version = resp.offer().version();
  return s;
}

/// The offer ids `sql` lists, one per row.
std::vector<std::string> ids_of(const std::string& joined) {
  std::vector<std::string> out;
  std::istringstream in{joined};
  for (std::string id; std::getline(in, id, ',');)
    out.push_back(id);
  return out;
}

} // namespace

TEST_CASE("one shard group's database stopped: its shards answer UNAVAILABLE, the other group's "
          "keep serving, the node stays ready; back, nothing acknowledged is lost (ADR 0023)") {
  testing::temp_db catalog;                                                      // group 0
  testing::private_server east{std::string{GOST_SOURCE_DIR} + "/scripts/pg.sh"}; // group 1
  auto port_file = "/tmp/gostd-group-outage-" + std::to_string(getpid());
  std::vector<std::string> args{"--pg.dsn=" + catalog.dsn(),
                                "--grpc.listen=127.0.0.1:0",
                                "--grpc.port_file=" + port_file,
                                "--caf.listen=127.0.0.1:0",
                                "--shard.count=8",
                                "--scheduler.threads=2",
                                "--cluster.heartbeat=200ms",
                                "--cluster.lease_timeout=2s",
                                "--scheduled.enabled=false",
                                "--images.enabled=false",
                                "--tasks.enabled=false"};
  auto start = [&](std::unique_ptr<child_process>& node, int& grpc_port, uint16_t& http_port) {
    std::remove(port_file.c_str());
    node = std::make_unique<child_process>(GOSTD_PATH, args);
    auto [g, h] = testing::read_ports(*node, port_file);
    grpc_port = g;
    http_port = static_cast<uint16_t>(h);
  };
  std::unique_ptr<child_process> node;
  int grpc_port = 0;
  uint16_t http_port = 0;
  start(node, grpc_port, http_port); // the catalog's schema and installation
  node->signal(SIGTERM);
  REQUIRE(node->wait(30s) == 0);
  catalog.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'east', '" + east.dsn()
                 + "')");
  catalog.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, 3, 0),"
                 " (4, 7, 1)");
  http_port = 0;
  start(node, grpc_port, http_port);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::OfferService::NewStub(channel);
  REQUIRE(testing::eventually(20s, [&] { return http_says(http_port, "/readyz", "200"); }));

  // Offers of six sellers, in both groups (each seller's in its home group), each updated once
  // (acknowledged before the outage).
  std::map<std::string, std::string> seller_of;
  for (int i = 0; i < 24; ++i) {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("outage-seller-" + std::to_string(i % 6));
    req.mutable_offer()->set_title("offer " + std::to_string(i));
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    auto s = stub->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    seller_of[resp.offer().id()] = req.offer().seller_id();
  }
  auto in_catalog =
    ids_of(catalog.scalar("SELECT string_agg(offer_id, ',' ORDER BY offer_id) FROM offers"));
  auto in_east =
    ids_of(east.scalar("SELECT string_agg(offer_id, ',' ORDER BY offer_id) FROM offers"));
  REQUIRE(in_catalog.size() + in_east.size() == 24);
  REQUIRE(!in_catalog.empty());
  REQUIRE(!in_east.empty());
  std::map<std::string, int64_t> acked;
  for (auto* ids : {&in_catalog, &in_east})
    for (auto& id : *ids) {
      int64_t v = 0;
      auto s = update_title(*stub, id, seller_of[id], "before", v);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
      acked[id] = v;
    }

  auto log_before = node->output().size();
  east.stop(true);
  // East's shards are refused once the node cannot confirm their leases...
  grpc::Status refused;
  CHECK_MESSAGE(testing::eventually(20s,
                                    [&] {
                                      int64_t v = 0;
                                      refused =
                                        update_title(*stub, in_east.front(),
                                                     seller_of[in_east.front()], "during", v);
                                      return refused.error_code() == grpc::StatusCode::UNAVAILABLE;
                                    }),
                refused.error_message() << "\n"
                                        << node->output().substr(log_before));
  // ... while the catalog's group serves every call, and the node stays ready.
  int served = 0;
  for (int round = 0; round < 3; ++round)
    for (auto& id : in_catalog) {
      int64_t v = 0;
      auto s = update_title(*stub, id, seller_of[id], "during " + std::to_string(round), v);
      CHECK_MESSAGE(s.ok(), s.error_message());
      if (s.ok()) {
        acked[id] = v;
        ++served;
      }
    }
  CHECK(served == static_cast<int>(3 * in_catalog.size()));
  CHECK(http_says(http_port, "/readyz", "200"));
  // Ready, and saying which group does not serve.
  auto readyz = testing::http_get(http_port, "/readyz");
  CHECK_MESSAGE(readyz.find("degraded: shard group `east`: its database (postgresql/east) is "
                            "unreachable; calls for its shards answer UNAVAILABLE (retry)")
                  != std::string::npos,
                readyz);
  auto metrics = testing::http_get(http_port, "/metrics");
  CHECK_MESSAGE(metrics.find("gost_dependency_up{dependency=\"postgresql/east\"} 0")
                  != std::string::npos,
                metrics);
  CHECK(metrics.find("gost_dependency_up{dependency=\"postgresql\"} 1") != std::string::npos);
  CHECK(metrics.find("gost_leases_confirmed{group=\"0\"} 1") != std::string::npos);
  // The outage is logged once, naming the group's database.
  CHECK_MESSAGE(node->output().find("postgresql/east unreachable since=", log_before)
                  != std::string::npos,
                node->output().substr(log_before));

  // Back: east's shards serve again, and nothing acknowledged before or during was lost.
  east.start();
  for (auto& id : in_east) {
    grpc::Status s;
    int64_t v = 0;
    CHECK_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        s = update_title(*stub, id, seller_of[id], "after", v);
                                        return s.ok();
                                      }),
                  s.error_message());
    if (s.ok())
      acked[id] = v;
  }
  readyz = testing::http_get(http_port, "/readyz");
  CHECK_MESSAGE(readyz.find("degraded") == std::string::npos, readyz);
  node->signal(SIGTERM);
  CHECK(node->wait(30s) == 0);
  for (auto& [id, v] : acked) {
    bool db_of = std::find(in_east.begin(), in_east.end(), id) != in_east.end();
    auto stored = db_of
                    ? east.scalar("SELECT version FROM offers WHERE offer_id = '" + id + "'")
                    : catalog.scalar("SELECT version FROM offers WHERE offer_id = '" + id + "'");
    bool kept = !stored.empty() && std::stoll(stored) >= v;
    CHECK_MESSAGE(kept, id);
  }
  std::remove(port_file.c_str());
}
