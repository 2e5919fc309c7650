#pragma once
// Stages that ship with gost (seed 000 "Примеры решаемых задач").

#include <chrono>
#include <memory>

#include "gost/offers/stage.hpp"

namespace gost {

/// Seed task 1: an active offer is taken off exposure (status INACTIVE) `after` its creation
/// (180 days by default). It sets a timer for that moment and reacts only to changes of
/// `status` and `created_at`.
std::shared_ptr<const stage> make_expire_stage(std::chrono::milliseconds after);

/// A diagnostic stage: every `every` it appends where it ran (node, shard, lease epoch, time)
/// to its state, a gost.v1.AuditTrail. Off by default (`stages.audit.enabled`); the cluster
/// tests use it to check that an offer is never processed under two leases.
std::shared_ptr<const stage> make_audit_stage(std::chrono::milliseconds every);

} // namespace gost
