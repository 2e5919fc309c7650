#pragma once
// The generic actor pool (MISSION R8): N workers on threads of their own, a bounded queue, a
// rate limit, max parallelism and counters. Work that may block (a slow stage, a download, an
// image decode) goes here, so CAF's scheduler threads never block.
//
//   auto pool = spawn_pool(sys, {"stage.pricing", 8, 1024});
//   self->request(pool, caf::infinite, run_atom_v, pool_job{[=] { return std::any{f()}; }})
//     .await([](pool_result& r) { use(std::any_cast<T>(r.value)); },
//            [](caf::error& e) { /* queue full (unavailable) or the job threw (internal) */ });
//
// A job is a copyable callable returning std::any; it must own what it reads (copy the inputs
// in), because the requester may be gone by the time it runs. A full queue rejects at once
// with errc::overloaded (back-pressure: the caller retries later); a job that throws
// answers errc::internal with the exception's message (errc::unavailable for
// unavailable_error).

#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/typed_actor.hpp>

#include <caf/allowed_unsafe_message_type.hpp>

#include "gost/core/protocol.hpp"

namespace gost {

struct pool_options {
  std::string name;             ///< in logs, metrics and errors
  int workers = 4;              ///< threads; also the most jobs running at once
  size_t queue_capacity = 1024; ///< jobs waiting beyond the running ones; more are rejected
  double rate_limit = 0;        ///< jobs started per second; 0: unlimited
  int max_parallelism = 0;      ///< jobs running at once, at most `workers`; 0: `workers`
};

struct pool_job {
  std::function<std::any()> fn;
};

struct pool_result {
  std::any value;
};

/// Counters since the pool started, and the current load.
struct pool_stats {
  std::string name;
  uint64_t submitted = 0;
  uint64_t completed = 0; ///< ran and returned
  uint64_t failed = 0;    ///< ran and threw
  uint64_t rejected = 0;  ///< queue full
  uint64_t queued = 0;    ///< waiting now
  uint64_t running = 0;   ///< running now
  double p50_ms = 0;      ///< run time of the last (up to) 1024 jobs
  double p99_ms = 0;
};

using pool_actor = caf::typed_actor<caf::replies_to<run_atom, pool_job>::with<pool_result>,
                                    caf::replies_to<get_atom>::with<pool_stats>>;

/// Spawns a pool and its workers (detached actors, stopped with the pool).
pool_actor spawn_pool(caf::actor_system& sys, pool_options opts);

} // namespace gost

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::pool_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::pool_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::pool_stats)
