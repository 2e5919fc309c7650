#include "cluster/wakes.hpp"

#include <caf/send.hpp>

#include "cluster/router.hpp"
#include "gost/core/kit/protocol.hpp"
#include "gost/core/kit/trail.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/queue.hpp"

namespace gost::runtime {

namespace {
const auto lg = gost::log::get("cluster");
}

wake_hub::wake_hub(persistence::pg_pool& pool, std::weak_ptr<const router> routes)
  : pool_(pool), routes_(std::move(routes)) {
  thread_ = std::thread{[this] { run(); }};
}

wake_hub::~wake_hub() {
  stop();
}

void wake_hub::add_part(const std::string& part, std::function<void(uint32_t)> on_wake) {
  std::lock_guard<std::mutex> guard{mtx_};
  parts_[part] = std::move(on_wake);
}

bool wake_hub::deliver(const std::string& part, uint32_t shard) {
  std::function<void(uint32_t)> f;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto i = parts_.find(part); i != parts_.end())
      f = i->second;
  }
  auto routes = routes_.lock();
  if (!routes || shard >= routes->shard_count() || !routes->here(shard))
    return false;
  if (f) {
    f(shard);
    return true;
  }
  auto& kinds = routes->kinds();
  for (size_t k = 0; k < kinds.size(); ++k)
    if (kinds[k].name == part) {
      if (auto a = routes->local_actor(k, shard))
        caf::anon_send(a, enqueued_atom_v, persistence::queue_entries{},
                       static_cast<uint8_t>(kit::event_source::api));
      return true;
    }
  return true; // this node's shard, and no such part here: nothing to tell
}

void wake_hub::wake(const std::string& part, uint32_t shard) {
  if (deliver(part, shard))
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_)
    return;
  queued_.push_back(persistence::wake_payload(part, shard));
  cv_.notify_one();
}

void wake_hub::wake(const std::string& part, const std::vector<uint32_t>& shards) {
  bool is_part = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    is_part = parts_.count(part) != 0;
  }
  bool told = false;
  std::vector<std::string> remote;
  for (auto shard : shards) {
    auto routes = routes_.lock();
    bool here = routes && shard < routes->shard_count() && routes->here(shard);
    if (here && is_part && told)
      continue; // a part is told once
    if (here && deliver(part, shard)) {
      told = true;
      continue;
    }
    remote.push_back(persistence::wake_payload(part, shard));
  }
  if (remote.empty())
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_)
    return;
  queued_.insert(queued_.end(), remote.begin(), remote.end());
  cv_.notify_one();
}

void wake_hub::heard(const std::string& payload) {
  std::string part;
  uint32_t shard = 0;
  if (!persistence::parse_wake_payload(payload, part, shard)) {
    lg->warn("wake notice ignored payload={}: not <part>:<shard>", payload);
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ++heard_;
  }
  deliver(part, shard);
}

void wake_hub::run() {
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (queued_.empty())
      return; // stopping, all sent
    auto batch = std::move(queued_);
    queued_.clear();
    lock.unlock();
    auto err = persistence::notify_wakes(pool_, batch);
    if (err)
      // Not retried: the owner's safety poll (queue.poll_idle) finds the work.
      lg->warn("wake notices not sent count={} error={}; the owners find the work by their "
               "next poll",
               batch.size(), persistence::error_message(err));
    lock.lock();
    if (!err)
      sent_ += batch.size();
  }
}

void wake_hub::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable())
    thread_.join();
}

uint64_t wake_hub::sent() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return sent_;
}

uint64_t wake_hub::heard_count() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return heard_;
}

} // namespace gost::runtime
