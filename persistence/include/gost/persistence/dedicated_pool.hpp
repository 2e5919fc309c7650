#pragma once
// A pool of connections of its own beside a node's pool, for work that must never queue behind
// that pool's callers (kept out of pg_pool.hpp, which most of the tree includes).

#include <memory>

#include "gost/persistence/pg_pool.hpp"

namespace gost::persistence {

/// A pool of `size` connections (at least 1) of its own, opened with `pool`'s options (the DSN
/// with its TCP timeouts, the session settings) and telling `pool`'s observer: the cluster
/// manager's heartbeat and leases (docs/cluster.md, "The manager's connection"). Its
/// connections add to `pool`'s on the server. Call it after `pool.observe`.
std::unique_ptr<pg_pool> dedicated_pool(pg_pool& pool, int size);

} // namespace gost::persistence
