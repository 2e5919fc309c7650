#pragma once

#include <string>

#include <caf/expected.hpp>

#include "gost/config/node_config.hpp"

namespace gost::runtime {

/// Starts (or finds running) the embedded PostgreSQL server through `pg.embedded_script` and
/// returns its DSN. The server keeps running after the node stops: other nodes and later
/// runs on this machine share it, and `scripts/pg.sh stop` stops it.
caf::expected<std::string> start_embedded_pg(const config::pg_config& pg);

} // namespace gost::runtime
