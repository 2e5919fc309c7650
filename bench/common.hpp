#pragma once
// What the benchmarks of gost_bench share (stage_bench.cpp, actions_bench.cpp,
// evolve_bench.cpp): a fresh schema, the
// CPU meter of this process and the server, and the actor system's settings.

#include <cstdint>
#include <map>
#include <string>

#include <caf/fwd.hpp>
#include <pqxx/connection>

#include "proc_cpu.hpp"

namespace gost::bench {

/// Empties the database (every table of every migration, present and future) and migrates it
/// for `shards` shards; exits on failure.
void fresh_schema(pqxx::connection& c, const std::string& dsn, uint32_t shards);

/// Samples the CPU time of this process (gost, and the benchmark's own thread that waits for
/// it) and of the PostgreSQL server `dsn` names (proc_cpu.hpp).
cpu_meter process_and_server(const std::string& dsn);

/// CAF settings of every benchmark: gostd's default scheduler policy (`stealing` for CAF's
/// own), a worker per core, CAF's log off.
void configure(caf::actor_system_config& cfg, const std::string& policy);

/// `gost_bench actions` (actions_bench.cpp).
int actions_bench(std::map<std::string, std::string>& opt);

/// `gost_bench evolve` (evolve_bench.cpp).
int evolve_bench(std::map<std::string, std::string>& opt);

} // namespace gost::bench
