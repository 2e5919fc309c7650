#pragma once
// The built-in `catalog.evolve` stage (issue 25 item 1, docs/catalog-evolution.md): moves an
// offer's category and attributes along the catalog's versions (migration.hpp's rules) and
// records the version it is at in its state (gost.v1.CatalogPosition,
// proto/gost/v1/catalog.proto); an ambiguous move is not guessed: the state records the
// reason, and the offer is tried again when its category or attributes change (interests).
// Idempotent: an offer at the current version, or stuck for the same reason, is skipped, so a
// sweep or a repeated run never touches an offer twice.

#include <memory>

#include "gost/catalog/migration.hpp"
#include "gost/offers/stage.hpp"

namespace gost::catalog {

/// The id the stage is registered under (stored in queues and states: never rename).
inline constexpr const char* evolve_stage_id = "catalog.evolve";

/// Where the stage reads the chain of versions. The node registers the stage before
/// PostgreSQL is reachable and sets the chain once the stored versions are read, before any
/// shard starts; until then (null) the stage moves nothing.
class evolution_source {
public:
  std::shared_ptr<const evolution> get() const { return std::atomic_load(&current_); }
  void set(std::shared_ptr<const evolution> e) { std::atomic_store(&current_, std::move(e)); }

private:
  std::shared_ptr<const evolution> current_;
};

std::shared_ptr<const stage> make_evolve_stage(std::shared_ptr<const evolution_source> source);

/// The token of the sweep that enqueues the offers for catalog version `version` (one per
/// version: shard_options::sweeps).
std::string sweep_token(int version);

} // namespace gost::catalog
