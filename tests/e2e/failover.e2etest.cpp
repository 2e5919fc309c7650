// A PostgreSQL primary fails over under load (issue 28 §4, ADR 0023 §6): pg_auto_failover's
// monitor, a primary and its synchronous standby (scripts/pg-ha.sh, a set of the test's own);
// a gostd whose pg.dsn is the multi-host DSN (`target_session_attrs=read-write`); clients
// updating offers with compare-and-set and reading them, every call recorded. The primary's
// node is killed (kill -9 of its keeper and postmaster); the monitor promotes the standby; the
// node finds the new primary through the DSN, its PostgreSQL tracker logs the outage and its
// end, and it is ready again. checker/history_check.py judges the history (no acknowledged
// write lost, no stale read, no version acknowledged twice), and the fence holds: the lease
// epochs on the new primary are the old ones or higher, and a second node can take no lease
// the first holds, until the first stops. Figures: the time with no primary, the calls
// answered UNAVAILABLE vs DEADLINE_EXCEEDED meanwhile, the time to the first acknowledged
// write after the promotion (docs/operations.md "A primary fails over").
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg_ha.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

using clock_type = std::chrono::steady_clock;

constexpr int key_count = 8;
constexpr int client_count = 3;
constexpr auto lease_timeout = 2s;

/// Microseconds since the test began: the clock of the history.
int64_t micros(clock_type::time_point zero) {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - zero).count();
}

/// One call, as a line of the checker's JSON-lines history (tests/checker/history_check.py).
struct call {
  int process = 0;
  std::string op; ///< write, read, final_read
  std::string key;
  int64_t start = 0;
  int64_t end = 0;
  int64_t expected = -1; ///< a compare-and-set's expected version
  grpc::Status status;
  int64_t version = 0;
  int phase = 0; ///< 0 before the failover, 1 from the kill until the node is ready again

  /// Refused for sure (nothing applied): a version mismatch, and UNAVAILABLE saying "safe to
  /// retry"; anything else but OK may have applied. A refused read says nothing.
  std::string answer() const {
    if (status.ok())
      return "ok";
    bool refused = status.error_code() == grpc::StatusCode::FAILED_PRECONDITION
                   || (status.error_code() == grpc::StatusCode::UNAVAILABLE
                       && status.error_message().find("safe to retry") != std::string::npos);
    return refused && op == "write" ? "fail" : "unknown";
  }

  std::string json() const {
    std::ostringstream out;
    auto a = answer();
    out << "{\"process\": " << process << ", \"op\": \"" << op << "\", \"key\": \"" << key
        << "\", \"start\": " << start << ", \"end\": ";
    if (a == "unknown")
      out << "null";
    else
      out << end;
    out << ", \"args\": {";
    if (expected >= 0)
      out << "\"expected_version\": " << expected;
    out << "}, \"answer\": \"" << a << "\"";
    if (a == "ok")
      out << ", \"version\": " << version;
    out << ", \"code\": " << static_cast<int>(status.error_code()) << ", \"phase\": " << phase
        << "}";
    return out.str();
  }
};

/// The calls of every client.
class call_log {
public:
  void add(call c) {
    std::lock_guard<std::mutex> guard{mtx_};
    calls_.push_back(std::move(c));
  }
  std::vector<call> calls() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return calls_;
  }
  /// Writes acknowledged that started at or after `from`.
  size_t acked_writes_since(int64_t from) const {
    std::lock_guard<std::mutex> guard{mtx_};
    size_t n = 0;
    for (auto& c : calls_)
      n += c.op == "write" && c.status.ok() && c.start >= from ? 1 : 0;
    return n;
  }
  /// The end of the first write acknowledged that started at or after `from`; -1: none.
  int64_t first_acked_write_since(int64_t from) const {
    std::lock_guard<std::mutex> guard{mtx_};
    int64_t first = -1;
    for (auto& c : calls_)
      if (c.op == "write" && c.status.ok() && c.start >= from && (first < 0 || c.end < first))
        first = c.end;
    return first;
  }

  std::atomic<int> phase{0};

private:
  mutable std::mutex mtx_;
  std::vector<call> calls_;
};

/// Updates (compare-and-set with the version last seen) and reads random offers through the
/// node until stopped, each call with a deadline of 3 s and a request id.
class client {
public:
  client(int process, const std::vector<std::string>& ids, std::shared_ptr<grpc::Channel> channel,
         call_log& log, clock_type::time_point zero)
    : process_(process), ids_(ids), stub_(v1::OfferService::NewStub(channel)), log_(log),
      zero_(zero), seen_(ids.size(), 1), thread_([this] { run(); }) {}
  ~client() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    std::mt19937 rng{static_cast<unsigned>(process_ * 104729 + 7)};
    for (int n = 0; !stop_; ++n) {
      auto k = rng() % ids_.size();
      call c;
      c.process = process_;
      c.key = ids_[k];
      c.phase = log_.phase;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 3s);
      c.start = micros(zero_);
      if (rng() % 3 == 0) {
        c.op = "read";
        v1::GetOfferRequest req;
        req.mutable_ref()->set_id(c.key);
        v1::GetOfferResponse resp;
        c.status = stub_->GetOffer(&ctx, req, &resp);
        c.version = resp.offer().version();
      } else {
        c.op = "write";
        c.expected = seen_[k];
        v1::UpdateOfferRequest req;
        req.mutable_offer()->set_id(c.key);
        req.mutable_offer()->set_title("c" + std::to_string(process_) + "-" + std::to_string(n));
        req.mutable_update_mask()->add_paths("title");
        req.set_expected_version(c.expected);
        req.set_request_id("failover-" + std::to_string(process_) + "-" + std::to_string(n));
        v1::UpdateOfferResponse resp;
        c.status = stub_->UpdateOffer(&ctx, req, &resp);
        c.version = resp.offer().version();
      }
      c.end = micros(zero_);
      if (c.status.ok())
        seen_[k] = std::max(seen_[k], c.version);
      else if (c.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
        seen_[k] = version_named(c.status.error_message(), seen_[k]);
      bool failed =
        !c.status.ok() && c.status.error_code() != grpc::StatusCode::FAILED_PRECONDITION;
      log_.add(std::move(c));
      if (failed)
        std::this_thread::sleep_for(20ms); // the client's back-off after a failure
    }
  }

  /// "offer X is at version N, not the expected M": N (the next compare-and-set expects it).
  static int64_t version_named(const std::string& msg, int64_t fallback) {
    auto at = msg.find("is at version ");
    if (at == std::string::npos)
      return fallback;
    try {
      return std::max<int64_t>(fallback, std::stoll(msg.substr(at + 14)));
    } catch (const std::exception&) {
      return fallback;
    }
  }

  const int process_;
  const std::vector<std::string>& ids_;
  std::unique_ptr<v1::OfferService::Stub> stub_;
  call_log& log_;
  const clock_type::time_point zero_;
  std::vector<int64_t> seen_;
  std::atomic<bool> stop_{false};
  std::thread thread_; // last: runs on everything above
};

/// shard -> (owner, epoch) of the leases with a live owner, read through `pool`.
std::map<uint32_t, std::pair<std::string, int64_t>> leases(persistence::pg_pool& pool) {
  std::map<uint32_t, std::pair<std::string, int64_t>> out;
  auto rows = persistence::list_leases(pool, lease_timeout);
  if (!rows)
    return out;
  for (auto& r : *rows)
    if (!r.free)
      out[r.shard] = {r.owner, r.epoch};
  return out;
}

size_t count_with(const std::string& log, const std::string& what) {
  size_t n = 0;
  for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1))
    ++n;
  return n;
}

bool ready(uint16_t http_port) {
  return testing::http_get(http_port, "/readyz").rfind("HTTP/1.1 200", 0) == 0;
}

} // namespace

TEST_CASE("a PostgreSQL primary fails over under load (pg_auto_failover, synchronous standby): "
          "the node follows the new primary, the history holds, the fence holds") {
  testing::private_ha_set ha{std::string{GOST_SOURCE_DIR} + "/scripts/pg-ha.sh"};
  auto zero = clock_type::now();

  auto port_file = testing::temp_path("gostd-failover");
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + ha.dsn(), "--node.id=n1", "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=16", "--scheduler.threads=2", "--cluster.heartbeat=200ms",
                      "--cluster.lease_timeout=2s", "--api.request_timeout=5s",
                      "--shutdown.timeout=10s"}};
  auto [grpc_port, http] = testing::read_ports(node, port_file);
  auto http_port = static_cast<uint16_t>(http);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                     grpc::InsecureChannelCredentials());
  persistence::pg_pool::options po;
  po.dsn = ha.dsn() + " connect_timeout=2";
  po.size = 1;
  po.acquire_timeout = 5s;
  persistence::pg_pool pool{po};
  REQUIRE_MESSAGE(
    testing::eventually(30s, [&] { return leases(pool).size() == 16 && ready(http_port); }),
    node.output());

  // The registers: offers created before the clients start (version 1 each, in the history).
  call_log log;
  std::vector<std::string> ids;
  auto stub = v1::OfferService::NewStub(channel);
  for (int k = 0; k < key_count; ++k) {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("failover-seller");
    req.mutable_offer()->set_external_id("sku-" + std::to_string(k));
    req.mutable_offer()->set_title("created");
    v1::CreateOfferResponse resp;
    call c;
    c.process = client_count;
    c.op = "write";
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    c.start = micros(zero);
    c.status = stub->CreateOffer(&ctx, req, &resp);
    c.end = micros(zero);
    REQUIRE_MESSAGE(c.status.ok(), c.status.error_message());
    c.key = resp.offer().id();
    c.version = resp.offer().version();
    ids.push_back(c.key);
    log.add(c);
  }
  std::vector<std::unique_ptr<client>> clients;
  for (int p = 0; p < client_count; ++p)
    clients.push_back(std::make_unique<client>(p, ids, channel, log, zero));
  REQUIRE(testing::eventually(20s, [&] { return log.acked_writes_since(0) >= 40; }));

  auto before = leases(pool);
  REQUIRE(before.size() == 16);

  // The failure: the primary's machine, as it were, dies (its keeper too: nothing restarts its
  // postmaster). The monitor sees it unhealthy and promotes the standby.
  auto log_before = node.output().size();
  log.phase = 1;
  int dead_port = ha.kill_primary();
  auto killed_at = micros(zero); // the kill is the script's last step
  MESSAGE("killed the primary on port " << dead_port);
  // A primary again: a read-write session through the multi-host DSN.
  int64_t promoted_at = -1;
  bool promoted = testing::eventually(60s, [&] {
    try {
      if (persistence::pg_pool{po}.ping())
        return false; // an error: no read-write session yet
      promoted_at = micros(zero);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  });
  REQUIRE_MESSAGE(promoted, ha.state());
  // The node: unready for the outage (its tracker's lines), then ready with every shard owned,
  // writes acknowledged again.
  bool back = testing::eventually(60s, [&] {
    return ready(http_port) && leases(pool).size() == 16
           && log.acked_writes_since(promoted_at) >= 20;
  });
  auto during = node.output().substr(log_before);
  CHECK_MESSAGE(back, ha.state() << "\n" << during);
  auto ready_at = micros(zero);
  log.phase = 2;
  CHECK_MESSAGE(count_with(during, "postgresql unreachable since=") == 1, during);
  CHECK_MESSAGE(count_with(during, "postgresql reachable again after=") == 1, during);
  // A component whose calls fail meanwhile writes at most one line of its own for the outage
  // (the tracker's lines say it, docs/operations.md "A dependency lost and back"). The image
  // feeders once wrote `image tasks not taken` at every look of every function (8 lines for
  // the 4 functions in a 4.4 s failover, unbounded in a longer outage); now once each.
  CHECK_MESSAGE(count_with(during, "image tasks not taken") <= 4, during);

  // The fence, on the new primary: no epoch went back, and a second node takes no lease the
  // first holds (its heartbeats and its liveness lock are on the new primary).
  auto after = leases(pool);
  CHECK(after.size() == 16);
  for (auto& [shard, held] : after) {
    CHECK_MESSAGE(held.first == "n1", "shard " << shard << " owned by " << held.first);
    CHECK_MESSAGE(held.second >= before[shard].second,
                  "shard " << shard << ": epoch " << held.second << " after the failover, "
                           << before[shard].second << " before");
  }
  // n1's liveness lock is a session lock, not replicated: its listener takes it again on the
  // new primary (until then another node would count n1's process gone and its leases free).
  CHECK_MESSAGE(testing::eventually(10s,
                                    [&] {
                                      auto nodes = persistence::list_nodes(pool, lease_timeout);
                                      if (!nodes)
                                        return false;
                                      for (auto& n : *nodes)
                                        if (n.node_id == "n1")
                                          return n.alive && !n.gone;
                                      return false;
                                    }),
                node.output().substr(log_before));
  auto intruder = persistence::acquire_free_lease(pool, "n2", lease_timeout);
  REQUIRE_MESSAGE(intruder, to_string(intruder.error()));
  CHECK_MESSAGE(!intruder->lease, "n2 took shard " << intruder->lease->shard << " at epoch "
                                                   << intruder->lease->epoch << " from n1");

  // The history: stop the clients, read every offer once more, judge.
  for (auto& c : clients)
    c->stop();
  for (auto& id : ids) {
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(id);
    v1::GetOfferResponse resp;
    call c;
    c.process = client_count + 1;
    c.op = "final_read";
    c.key = id;
    c.phase = 2;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    c.start = micros(zero);
    c.status = stub->GetOffer(&ctx, req, &resp);
    c.end = micros(zero);
    CHECK_MESSAGE(c.status.ok(), "final read of " << id << ": " << c.status.error_message());
    c.version = resp.offer().version();
    log.add(c);
  }
  // The calls that started with no primary, and those from the promotion until the node was
  // ready again.
  struct answers {
    size_t calls = 0, ok = 0, ok_late = 0, unavailable = 0, deadline = 0, other = 0;
    std::string text() const {
      std::ostringstream out;
      out << calls << " calls: OK " << ok << " (" << ok_late
          << " answered after the promotion), UNAVAILABLE " << unavailable << ", DEADLINE_EXCEEDED "
          << deadline << ", other errors " << other;
      return out.str();
    }
  } no_primary, catching_up;
  for (auto& c : log.calls()) {
    if (c.start < killed_at || c.start >= ready_at)
      continue;
    auto& a = c.start < promoted_at ? no_primary : catching_up;
    ++a.calls;
    auto code = c.status.error_code();
    a.ok += code == grpc::StatusCode::OK ? 1 : 0;
    a.ok_late += code == grpc::StatusCode::OK && c.end >= promoted_at ? 1 : 0;
    a.unavailable += code == grpc::StatusCode::UNAVAILABLE ? 1 : 0;
    a.deadline += code == grpc::StatusCode::DEADLINE_EXCEEDED ? 1 : 0;
    a.other += code != grpc::StatusCode::OK && code != grpc::StatusCode::UNAVAILABLE
                   && code != grpc::StatusCode::DEADLINE_EXCEEDED
                   && code != grpc::StatusCode::FAILED_PRECONDITION
                 ? 1
                 : 0;
  }
  auto first = log.first_acked_write_since(promoted_at);
  MESSAGE("no primary for " << (promoted_at - killed_at) / 1000
                            << " ms (kill -9 until a read-write session through the DSN): "
                            << no_primary.text() << "; then " << (ready_at - promoted_at) / 1000
                            << " ms until ready with every shard owned and 20 writes: "
                            << catching_up.text() << "; first acknowledged write "
                            << (first < 0 ? -1 : (first - promoted_at) / 1000)
                            << " ms after the promotion");
  MESSAGE("n1's log from the kill until ready again (" << count_with(during, "\n") << " lines):\n"
                                                       << during);
  auto path = testing::temp_path("failover-history") + ".jsonl";
  {
    std::ofstream out(path);
    for (auto& c : log.calls())
      out << c.json() << "\n";
  }
  auto verdict_cmd =
    "python3 " + std::string{GOST_SOURCE_DIR} + "/tests/checker/history_check.py " + path + " 2>&1";
  std::string verdict;
  auto* p = ::popen(verdict_cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    verdict.append(buf, n);
  int status = ::pclose(p);
  bool valid = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  CHECK_MESSAGE(valid, "history " << path << ":\n" << verdict);
  MESSAGE(verdict);
  if (valid)
    std::remove(path.c_str());

  // The fence can move: once n1 stops (its leases released), the second node takes one, at
  // an epoch above any before the failover.
  node.signal(SIGTERM);
  CHECK_MESSAGE(node.wait(30s) == 0, node.output());
  std::optional<persistence::held_lease> taken;
  CHECK(testing::eventually(10s, [&] {
    auto a = persistence::acquire_free_lease(pool, "n2", lease_timeout);
    if (a && a->lease)
      taken = a->lease;
    return taken.has_value();
  }));
  if (taken)
    CHECK(taken->epoch > before[taken->shard].second);
  std::remove(port_file.c_str());
}
