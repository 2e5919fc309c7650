#pragma once
// The stage API (seed 000 "API стейджа"). A stage is a pure function pair over an offer and
// the stage's private state; gost calls it, possibly more than once for the same input, and
// stores what it returns atomically with the offer. Side effects do not belong here.
// docs/adding-a-stage.md walks through writing one.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/any.pb.h>

#include "gost/core/unavailable.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/offer.pb.h"

namespace gost {

using stage_clock = std::chrono::system_clock;

/// `should_process`'s answer (seed: `NewTimer | Boolean`).
struct decision {
  enum class kind : uint8_t { skip, process, timer };
  kind what = kind::skip;
  stage_clock::time_point at{}; ///< for timer

  static decision skip() { return {}; }
  static decision process() { return {kind::process, {}}; }
  static decision timer(stage_clock::time_point t) { return {kind::timer, t}; }
};

/// `process`'s answer (seed: `(OfferUpdate, NewState, NewTimer)`); every part is optional.
struct stage_result {
  std::optional<v1::Offer> offer;               ///< the whole new offer content
  std::optional<google::protobuf::Any> state;   ///< the stage's new private state
  std::optional<stage_clock::time_point> timer; ///< come back at this time
};

/// Where a `process` call runs: the node, the shard and the lease epoch under which its result
/// will be committed (a result is only ever committed at this epoch). For diagnostics and
/// audits; a stage's decisions should depend on the offer and its state only.
struct run_context {
  std::string node_id;
  uint32_t shard = 0;
  int64_t epoch = 0;
};

/// The context of the `process` call running on this thread; null outside one.
const run_context* current_run() noexcept;

namespace detail {
/// Sets current_run() for its lifetime (used by the offer actor and the stage pools).
class run_scope {
public:
  explicit run_scope(const run_context* ctx) noexcept;
  ~run_scope();
  run_scope(const run_scope&) = delete;
  run_scope& operator=(const run_scope&) = delete;

private:
  const run_context* previous_;
};
} // namespace detail

class stage {
public:
  virtual ~stage() = default;

  /// Fast check whether the offer should go into this stage's queue. `state` is null when
  /// the stage never stored one. An exception here means "process" (seed: a failing
  /// shouldProcess enqueues the offer anyway), so `process` must re-check.
  virtual decision should_process(const v1::Offer& offer,
                                  const google::protobuf::Any* state) const = 0;

  /// The stage's work. An exception is a failed attempt: nothing is written, the entry stays
  /// queued and is retried after the stage's back-off; after `stage.max_attempts` failed
  /// attempts the entry is dead-lettered. Throw `unavailable_error` when a service the stage
  /// needs is down: that is retried with a growing back-off and never dead-letters.
  virtual stage_result process(const v1::Offer& offer,
                               const google::protobuf::Any* state) const = 0;

  /// Names of top-level `gost.v1.Offer` fields this stage reacts to; when a change touches
  /// none of them the stage is not asked. Empty: every change.
  virtual std::vector<std::string> interests() const { return {}; }

  /// Side effects after a save (seed 000 "Сайд эффекты в стейджах"): called with every
  /// after-save event (the saved offer with all its stage states, `changed_by`) taken from the
  /// Kafka topic by the node's consumer group, only when `wants_after_save()` says so. At
  /// least once and in version order per offer, but late: the offer may have changed since.
  /// An exception retries the event (with back-off) before the consumer moves on;
  /// `unavailable_error` retries it until it succeeds or the node stops.
  virtual void after_save(const v1::OfferSaved& event) const {}
  virtual bool wants_after_save() const { return false; }

  /// The protobuf message this stage stores as its state. The node publishes it with the file
  /// that defines it (AdminService.DescribeTypes), so that gostctl and the web page show the
  /// state decoded, also when they were built without it. Null: no state, or a type this
  /// node does not know (an external stage's): such states show as type URL and byte count.
  virtual const google::protobuf::Descriptor* state_type() const { return nullptr; }
};

struct stage_options {
  bool enabled = true;
  /// At most this many offers in `process` at once, per shard.
  int max_parallelism = 64;
  /// At most this many `process` calls per second per shard; 0: unlimited.
  double rate_limit = 0;
  /// Wait before retrying an offer whose `process` failed.
  std::chrono::milliseconds retry_backoff{1000};
  /// `process` may block or take long (I/O, a remote call, heavy CPU): it runs in the stage's
  /// own actor pool of `pool_workers` threads, never on a CAF scheduler thread. `should_process`
  /// always runs inline and must stay fast.
  bool blocking = false;
  int pool_workers = 8;
  /// `process` calls started per second by the pool, over all shards of the node; 0: unlimited.
  double pool_rate_limit = 0;
  /// Jobs waiting in the pool beyond the running ones; more are rejected and retried later.
  size_t pool_queue = 4096;
};

/// The stages of a node, each under a stable id (stored in queues and states: never rename).
class stage_registry {
public:
  struct entry {
    std::string id;
    std::shared_ptr<const stage> impl;
    stage_options opts;
    std::vector<std::string> interests;
  };

  stage_registry& add(std::string id, std::shared_ptr<const stage> impl, stage_options opts = {});
  const entry* find(std::string_view id) const;
  const std::vector<entry>& all() const noexcept { return entries_; }

private:
  std::vector<entry> entries_;
};

} // namespace gost
