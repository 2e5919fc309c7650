#pragma once
// Stages that ship with gost (seed 000 "Примеры решаемых задач").

#include <chrono>
#include <memory>

#include "gost/actors/stage.hpp"

namespace gost {

/// Seed task 1: an active offer is taken off exposure (status INACTIVE) `after` its creation
/// (180 days by default). It sets a timer for that moment and reacts only to changes of
/// `status` and `created_at`.
std::shared_ptr<const stage> make_expire_stage(std::chrono::milliseconds after);

} // namespace gost
