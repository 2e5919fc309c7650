#pragma once
// Entry points to spawn the actors of gost's core. Everything else in actors/ is internal.

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include <caf/fwd.hpp>

#include <map>
#include <memory>
#include <vector>

#include "gost/core/actor_pool.hpp"
#include "gost/core/kit/shard.hpp"
#include "gost/core/stats.hpp"
#include "gost/offers/content_rules.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/stage.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::kit {
class trace_hub;
}

namespace gost {

class dependency_tracker;

/// Pools by stage id: one per blocking stage, shared by every shard of a node.
using stage_pools = std::map<std::string, pool_actor>;

/// A store actor on its own thread (it blocks on PostgreSQL). `pool` must outlive it. Its group
/// loads are counted in `stats->offer_loads` (null: not counted).
store_actor spawn_store(caf::actor_system& sys, persistence::pg_pool& pool,
                        std::shared_ptr<node_stats> stats = nullptr);

/// One actor pool per blocking stage of `reg` (stage_options::blocking), named
/// "stage.<id>". Stop them with anon_send_exit after the shards.
std::shared_ptr<const stage_pools> spawn_stage_pools(caf::actor_system& sys,
                                                     const stage_registry& reg);

/// `n` write-behind writers for offers (kit/writer.hpp: detached, group commit, each batch
/// fenced per shard), to be shared by the node's shards (writer_for(writers, shard)). Match
/// `n` to the database connections the writers may use at once. `pool` must outlive them.
/// `owner`: this node's id; a batch commits a shard's sets only while the shard's lease names
/// it, at the sets' epoch (persistence::commit_write_sets).
/// `db`: the node's PostgreSQL tracker (failed batches of an outage it reported are not
/// logged again); may be null. `history`: keep every committed change in the offers' history
/// (history.retention is not 0). `shard_count`: the installation's; a new offer's insert then
/// holds its seller's home shard's lease row and is refused while that shard has moved to
/// another group's database (persistence::commit_options::home_shard, ADR 0023 "Splits"); 0:
/// not checked (one database that no split touches: tests, benchmarks).
std::vector<writer_actor>
spawn_offer_writers(caf::actor_system& sys, persistence::pg_pool& pool, const std::string& owner,
                    size_t n, size_t batch_max, std::chrono::milliseconds flush_delay,
                    std::shared_ptr<node_stats> stats,
                    std::shared_ptr<const dependency_tracker> db = nullptr, bool history = false,
                    uint32_t shard_count = 0);

/// A one-off background rescan for one stage (a sweep): when a shard starts, it walks its
/// offers once, asks only `stage_id` about each and enqueues those that want it at background
/// priority, recording its progress under `token` (persistence/offers/sweeps.hpp) so that a
/// sweep resumes after a stop and never runs twice. A new token is a new sweep (the catalog's
/// `catalog.evolve@<version>`, docs/catalog-evolution.md).
struct sweep {
  std::string token;
  std::string stage_id;
};

struct shard_options {
  /// The kit's part, whole (kit::shard_config): shard, lease epoch, queues, retries,
  /// passivation, clock, traces. The offers' kind sets its lanes (one per stage), store,
  /// figures and trail itself; `kit.stats` is taken from `stats` below.
  kit::shard_config kit = [] {
    kit::shard_config c;
    c.recent_events = 16; // events each offer actor keeps for `gostctl offer ID`
    return c;
  }();
  store_actor store;
  /// The writer of this shard's offers (one of spawn_offer_writers'); must outlive the shard.
  writer_actor writer;
  /// This node's id (for stages' run_context).
  std::string node_id;
  /// The stages run on this shard's offers. Never null.
  std::shared_ptr<const stage_registry> stages = std::make_shared<stage_registry>();
  /// The pools of the blocking stages (spawn_stage_pools); null: none.
  std::shared_ptr<const stage_pools> pools;
  /// A stage re-triggered more often than this in one chain is cut (change storm).
  int max_chain = 10;
  /// Background rescan (seed: "Фоновый переобход"): every this often the shard walks all its
  /// offers, asks every stage and enqueues at background priority. 0: off.
  std::chrono::milliseconds rescan_every{0};
  uint32_t rescan_page = 500;
  /// Sweeps this shard runs at its start unless done (in order, one page at a time, each page
  /// of `rescan_page` offers).
  std::vector<sweep> sweeps;
  /// What clients' content may hold: checked again by the offer actor on the offer as it
  /// will be stored (a masked update merged with the stored fields).
  offer_limits limits;
  /// Where the shard counts its offer actors; shared by the shards of a node. Never null.
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
};

/// The supervisor of one shard.
shard_actor spawn_shard(caf::actor_system& sys, shard_options opts);

/// A new random offer id: 32 lower-case hex digits (128 random bits).
std::string make_offer_id();

/// The id of the offer a create with a request id makes: the same for every retry of the call
/// (32 hex digits from the seller and the request id), so a retry reaches the same offer's
/// actor, which answers it with the first answer.
std::string offer_id_for_request(const std::string& seller_id, const std::string& request_id);

} // namespace gost
