#pragma once
// A stage served by another process over gost.v1.StageService (seed 000 "GRPC-api").

#include <memory>
#include <string>

#include "gost/config/node_config.hpp"
#include "gost/offers/stage.hpp"

namespace gost::runtime {

/// The stage, calling the service at `cfg.address`. Its `process` blocks on gRPC and so runs
/// in the stage's pool (see external_stage_options); it asks ShouldProcess first and calls
/// Process when the service wants to. `should_process` answers "process" without a call
/// (it must be fast and runs on the offer actor); field interests filter what reaches it.
/// Unreachable or overloaded services raise unavailable_error after `cfg.attempts` calls.
std::shared_ptr<const stage> make_external_stage(const config::external_stage_config& cfg);

/// Options that run the stage in its own pool with the configured parallelism and rate.
stage_options external_stage_options(const config::external_stage_config& cfg);

/// Checks a declaration against what this build knows (interests are Offer fields, the id is
/// free). Returns the problem, or an empty string.
std::string check_external_stage(const config::external_stage_config& cfg,
                                 const stage_registry& taken);

} // namespace gost::runtime
