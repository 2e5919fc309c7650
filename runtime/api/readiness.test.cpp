#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "api/readiness.hpp"
#include "cluster/router.hpp"
#include "gost/core/dependency.hpp"

using namespace gost;
using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

/// What readiness published, with a bounded wait for more. Declared before the readiness that
/// publishes to it: readiness publishes "stopping" when it is destroyed.
struct published {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::pair<bool, std::string>> changes;

  readiness::publish_fn fn() {
    return [this](bool ready, const std::string& why) {
      {
        std::lock_guard<std::mutex> guard{mtx};
        changes.emplace_back(ready, why);
      }
      cv.notify_all();
    };
  }

  size_t size() {
    std::lock_guard<std::mutex> guard{mtx};
    return changes.size();
  }

  std::pair<bool, std::string> at(size_t i) {
    std::lock_guard<std::mutex> guard{mtx};
    return changes.at(i);
  }

  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, 10s, [&] { return changes.size() >= n; });
  }
};

std::shared_ptr<dependency_tracker> quiet_tracker() {
  dependency_tracker::options o;
  o.name = "postgresql";
  o.write = [](dependency_tracker::line, const std::string&) {};
  return std::make_shared<dependency_tracker>(std::move(o));
}

} // namespace

TEST_CASE("readiness: starting, the routes' start gate, the database, stopping; each change "
          "published before it is answered") {
  auto db = quiet_tracker();
  published seen;
  readiness r{db};
  CHECK(r.check() == "starting");

  std::atomic<int> unrouted{3};
  // The watcher would look only in an hour: every change below is made by `check`.
  r.start(
    [&]() -> std::string {
      return unrouted > 0 ? std::to_string(unrouted.load()) + " of 8 shards have no owner yet" : "";
    },
    seen.fn(), 1h);
  REQUIRE(seen.size() == 1);
  CHECK(seen.at(0) == std::make_pair(false, std::string{"3 of 8 shards have no owner yet"}));
  CHECK(r.check() == "3 of 8 shards have no owner yet");
  CHECK(seen.size() == 1); // no change, nothing published

  unrouted = 0;
  CHECK(r.check().empty());
  REQUIRE(seen.size() == 2); // published before `check` answered
  CHECK(seen.at(1).first);

  // The gate is a start gate: a shard moving later does not make the node unready.
  unrouted = 1;
  CHECK(r.ready());
  CHECK(seen.size() == 2);

  // The database away: unready with how long, until a call reaches it again.
  db->failed("connection refused");
  CHECK(r.check().rfind("postgresql unreachable for ", 0) == 0);
  REQUIRE(seen.size() == 3);
  CHECK_FALSE(seen.at(2).first);
  db->succeeded();
  CHECK(r.ready());
  REQUIRE(seen.size() == 4);
  CHECK(seen.at(3).first);

  // The stop: unready, published before stop() returns, and for good.
  r.stop();
  REQUIRE(seen.size() == 5);
  CHECK(seen.at(4) == std::make_pair(false, std::string{"stopping"}));
  CHECK(r.check() == "stopping");
  db->failed("gone");
  db->succeeded();
  CHECK(r.check() == "stopping");
  CHECK(seen.size() == 5);
}

TEST_CASE("readiness: the watcher publishes a change nobody asked about") {
  auto db = quiet_tracker();
  published seen;
  readiness r{db};
  r.start([] { return std::string{}; }, seen.fn(), 5ms);
  REQUIRE(seen.size() == 1);
  CHECK(seen.at(0).first);
  db->failed("connection refused");
  REQUIRE(seen.wait_for(2));
  CHECK(seen.at(1).second.rfind("postgresql unreachable for ", 0) == 0);
  db->succeeded();
  REQUIRE(seen.wait_for(3));
  CHECK(seen.at(2).first);
}

TEST_CASE("readiness without a start stays unready; a stop before a start publishes nothing") {
  readiness r{nullptr};
  CHECK(r.check() == "starting");
  r.stop();
  CHECK(r.check() == "stopping");
  published seen;
  r.start([] { return std::string{}; }, seen.fn(), 5ms); // too late: ignored
  CHECK(seen.size() == 0);
  CHECK(r.check() == "stopping");
}

TEST_CASE("readiness: the routes' start gate waits for an owner of every shard, then for a "
          "heartbeat confirming the leases of those owned here") {
  auto routes = std::make_shared<router>(2, std::vector<caf::actor>{});
  auto gate = routes_gate(routes);
  CHECK(gate() == "2 of 2 shards have no owner yet");
  routes->set_local(0, {});
  routes->set_local(1, {});
  CHECK(gate().empty()); // no cluster manager joined: nothing to confirm
  auto& c = routes->confirmation();
  auto now = lease_confirmation::clock::now();
  c.enable("n1", 1h, 1s, now);
  CHECK(gate() == "the shard leases are not confirmed by a heartbeat yet");
  c.confirm(now, c.generation(), now);
  CHECK(gate().empty());
  routes.reset();
  CHECK(gate() == "stopping");
}
