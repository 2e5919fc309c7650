#include "common.hpp"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <caf/actor_system_config.hpp>
#include <pqxx/pqxx>

#include "gost/offers/protocol.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/tasks/protocol.hpp"

namespace gost::bench {

/// Empties the database (every table of every migration, present and future) and migrates it
/// for `shards` shards; exits on failure.
void fresh_schema(pqxx::connection& c, const std::string& dsn, uint32_t shards) {
  {
    pqxx::nontransaction tx{c};
    tx.exec("DROP SCHEMA IF EXISTS public CASCADE");
    tx.exec("CREATE SCHEMA public");
    // Starts the server's checkpoint interval afresh, so that no checkpoint (nor the full-page
    // images it forces on the next writes) falls into the run that follows, gost's or the floor's.
    tx.exec("CHECKPOINT");
  }
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = 1;
  persistence::pg_pool pool{po};
  if (!persistence::migrate(pool) || persistence::ensure_installation(pool, shards)) {
    std::fprintf(stderr, "gost_bench: cannot set up the schema\n");
    std::exit(1);
  }
}

/// Samples the CPU time of this process (gost, and the benchmark's own thread that waits for
/// it) and of the PostgreSQL server `dsn` names (proc_cpu.hpp).
cpu_meter process_and_server(const std::string& dsn) {
  pqxx::connection c{dsn};
  pqxx::nontransaction tx{c};
  auto r = tx.exec(kPostmasterChildSql);
  auto postmaster = r.empty() ? 0 : parent_pid(r[0][0].as<pid_t>());
  if (postmaster <= 1) {
    std::fprintf(stderr,
                 "gost_bench: cannot find the server's postmaster; is it on this machine?\n");
    std::exit(1);
  }
  return cpu_meter{{getpid()}, postmaster};
}

/// CAF settings of every benchmark: gostd's default scheduler policy (`stealing` for CAF's
/// own), a worker per core, CAF's log off.
void configure(caf::actor_system_config& cfg, const std::string& policy) {
  register_offer_types(cfg); // every domain's block, as gostd registers them
  tasks::register_task_types(cfg);
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::thread::hardware_concurrency()));
  cfg.set("scheduler.policy", policy == "stealing" ? caf::atom("stealing") : caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
}

} // namespace gost::bench
