#include "api/readiness.hpp"

#include <spdlog/fmt/fmt.h>

#include "cluster/router.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("node");

} // namespace

readiness::readiness(std::shared_ptr<const dependency_tracker> db) : db_(std::move(db)) {}

readiness::~readiness() {
  stop();
}

std::string readiness::reason() const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_)
    return "stopping";
  if (!started_)
    return "starting";
  if (db_ && !db_->up()) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(db_->down_for()).count();
    return fmt::format("{} unreachable for {:.1f}s", db_->name(), static_cast<double>(ms) / 1000.0);
  }
  if (!gate_passed_ && gate_) {
    if (auto why = gate_(); !why.empty())
      return why;
    gate_passed_ = true;
  }
  return {};
}

std::string readiness::check() {
  // One check at a time: what is published is what was read last, so a stop (which checks
  // after it marked the node stopping) always publishes last.
  std::lock_guard<std::mutex> guard{publish_mtx_};
  auto why = reason();
  bool ready = why.empty();
  if (!publish_ || published_ == static_cast<int>(ready))
    return why;
  published_ = static_cast<int>(ready);
  if (ready)
    lg->info("node ready");
  else
    lg->info("node not ready reason={}", why);
  publish_(ready, why);
  return why;
}

void readiness::start(gate_fn gate, publish_fn publish, std::chrono::milliseconds every) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (started_ || stopping_)
      return;
    started_ = true;
    gate_ = std::move(gate);
  }
  {
    std::lock_guard<std::mutex> guard{publish_mtx_};
    publish_ = std::move(publish);
  }
  check();
  watcher_ = std::thread{[this, every] { watch(every); }};
}

void readiness::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return;
    stopping_ = true;
  }
  check();
  stop_.request();
  if (watcher_.joinable())
    watcher_.join();
}

void readiness::watch(std::chrono::milliseconds every) {
  while (!stop_.wait_for(every))
    check();
}

readiness::gate_fn routes_gate(std::weak_ptr<const router> routes) {
  return [routes = std::move(routes)]() -> std::string {
    auto r = routes.lock();
    if (!r)
      return "stopping";
    if (auto n = r->unrouted(); n > 0)
      return fmt::format("{} of {} shards have no owner yet", n, r->shard_count());
    // Its own shards are served once a heartbeat confirmed their leases (lease_confirmation),
    // in each shard group on its own (ADR 0023).
    auto now = lease_confirmation::clock::now();
    for (uint32_t g = 0; g < r->group_count(); ++g)
      if (!r->confirmation(g).confirmed(now) && !r->local_shards(g).empty())
        return r->group_count() == 1
                 ? std::string{"the shard leases are not confirmed by a heartbeat yet"}
                 : fmt::format("the shard leases of group {} are not confirmed by a heartbeat "
                               "yet",
                               g);
    return {};
  };
}

} // namespace gost::runtime
