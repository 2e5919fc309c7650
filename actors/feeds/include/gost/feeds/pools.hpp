#pragma once
// The feed loader and the feed processor (seed 004 "Скачивание фидов", "Обработка заданий";
// MISSION F3, F4): two actor pools on the generic pool (`gost/core/actor_pool.hpp`), each fed
// by a feeder that keeps the pool's workers busy. A worker's job is one step of the seed's
// numbered algorithm, whole:
//
//   loader    (context feedloader):   URL feeds due become loads; take the oldest load waiting
//             for its file whose seller is not locked, with the seller's lock; download it
//             through the one outbound HTTP client (internal addresses refused, size and time
//             limits, the proxy when configured) into the blob store under its SHA-256; the
//             load becomes queued for the processor; the lock is released whatever happened.
//   processor (context feedprocessor): take the oldest queued load whose seller is not
//             locked, with the lock; check the file, unify and send it (feed_processor); store
//             per-offer problems; the load is in progress (the offer store's answers follow)
//             or failed (fatal: seed 6.1) or left queued for a retry (transient: 6.2); the
//             lock is released whatever happened (7).
//
// Locks of a node that died are freed by the loader's reaper (`reap_feed_locks`), so a crash
// never strands a seller. A step interrupted by a crash runs again: downloads land under the
// same content address, and a load sent again carries the same batches (idempotent in the
// offer store).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include "gost/core/blob_store.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/stats.hpp"
#include "gost/core/stats_registry.hpp"
#include "gost/feeds/feed_processor.hpp"

namespace gost::persistence {
class shard_placement;
}

// clang-format off
#define GOST_FEED_STATS(X)                                                                          \
  X(counter, fetched, "fetched_total", "Feed files downloaded and stored.")                       \
  X(counter, fetch_failures, "fetch_failures_total", "Downloads that failed (retried or final).") \
  X(counter, fetched_bytes, "fetched_bytes_total", "Bytes of feed files downloaded.")             \
  X(counter, loads_sent, "loads_sent_total", "Loads checked, unified and sent to the store.")     \
  X(counter, loads_failed, "loads_failed_total", "Loads failed for good (fatal errors).")         \
  X(counter, loads_retried, "loads_retried_total", "Load steps failed transiently and retried.")  \
  X(counter, loads_succeeded, "loads_succeeded_total", "Loads the offer store answered whole.")  \
  X(counter, offers_read, "offers_read_total", "Offers read from feed files.")                    \
  X(counter, offers_sent, "offers_sent_total", "Offers sent to the offer store to be applied.")   \
  X(counter, offers_rejected, "offers_rejected_total", "Offers with an error of their own.")      \
  X(counter, processed_bytes, "processed_bytes_total", "Bytes of feed files processed.")          \
  X(counter, locks_reaped, "locks_reaped_total", "Seller locks freed by the reaper.")             \
  X(counter, loads_cleaned, "loads_cleaned_total", "Old loads whose rows the cleanup removed.")   \
  X(counter, files_removed, "files_removed_total", "Stored feed files the cleanup removed.")       \
  X(gauge, loader_busy, "loader_busy", "Loader workers busy now.")                                \
  X(gauge, processor_busy, "processor_busy", "Processor workers busy now.")
// clang-format on

namespace gost::feeds {

/// The feed pools' figures, rendered on /metrics as gost_feed_*; per-offer problems by type
/// are counted apart (`problems`).
struct feed_stats {
  GOST_FEED_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_FEED_STATS)
  /// Indexed by problem_type.
  std::atomic<uint64_t> problems[6] = {};
};

/// Registers the feed processor's figures: GOST_FEED_STATS as gost_feed_*, and
/// gost_feed_offer_problems_total (label `type`).
void add_feed_metrics(stats_registry& reg, std::shared_ptr<const feed_stats> stats);

struct feed_pools_options {
  /// The shard groups' databases (ADR 0023): a seller's feeds, loads, queue rows and locks
  /// live in its home group's (`home_database`); the steps take work from each in turn.
  std::shared_ptr<const persistence::shard_placement> where;
  std::string node_id;
  int loader_workers = 2;
  int processor_workers = 2;
  std::chrono::milliseconds poll{1000};
  reader_limits limits;
  std::chrono::milliseconds fetch_timeout{300'000};
  bool allow_private = false;
  std::string proxy;
  size_t batch_size = 500;
  int keep_loads = 10;
  std::chrono::milliseconds retry_delay{10'000};
  int max_attempts = 8;
  std::chrono::milliseconds lock_max_hold{6 * 3600'000};
  std::chrono::milliseconds node_timeout{10'000};
  /// The catalog and gazetteer the loads are unified with (reloaded when their files change).
  std::shared_ptr<unification_data> unify;
  const blob_store* blobs = nullptr;
  /// A sink onto the requests topic for one load (the node's Kafka producer); may fail (null).
  std::function<std::unique_ptr<request_sink>()> make_sink;
  feed_stats* stats = nullptr;
};

/// A feeder: ticks make it fill its pool's free workers; `drain_atom` stops it taking work
/// (steps in flight finish; a stop signal makes a processor step end early, its load left
/// queued). Stop it with an exit message.
using feed_feeder_actor =
  caf::typed_actor<caf::reacts_to<tick_atom>, caf::replies_to<drain_atom>::with<bool>>;

struct feed_pools {
  feed_feeder_actor loader;
  feed_feeder_actor processor;
};

/// Spawns both pools and their feeders.
feed_pools spawn_feed_pools(caf::actor_system& sys, feed_pools_options opts);

/// One loader step (what a loader worker runs): false when there was nothing to do.
bool run_loader_step(const feed_pools_options& opts, const stop_signal& stop);
/// One processor step: false when there was nothing to do.
bool run_processor_step(const feed_pools_options& opts, const stop_signal& stop);

} // namespace gost::feeds
