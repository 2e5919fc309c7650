#pragma once
// What the handler files of gost.v1.AdminService (api/admin/*.cpp, one per concern) share:
// who asked, the stage checks and PostgreSQL's stage table. The service
// class itself is api/admin_service.hpp; each file defines its own members.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <caf/expected.hpp>
#include <grpcpp/grpcpp.h>

#include "api/call.hpp"
#include "gost/offers/stage.hpp"
#include "gost/persistence/cluster/pauses.hpp"
#include "gost/persistence/offers/write_behind.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime::admin {

/// Finishes the call: the RPCs hand it to their in-process twins as `done`.
inline std::function<void(grpc::Status)> finish(const unary_call& call) {
  return [call](grpc::Status st) { call.finish(std::move(st)); };
}

/// What PostgreSQL tells of the stages: queue and dead-letter counts, and the pauses.
struct stage_table {
  std::map<std::string, persistence::stage_counts> counts;
  std::map<std::string, persistence::stage_pause> pauses;
};

/// The counts summed over the databases `groups` (each shard group's, ADR 0023; empty: the
/// catalog's alone), the oldest due entry the oldest of them; the pauses from the catalog.
caf::expected<stage_table> read_stage_table(persistence::pg_pool& catalog,
                                            const std::vector<persistence::pg_pool*>& groups,
                                            int64_t now_us);

/// Milliseconds from `since_us` to `now_us` (0 when `since_us` is 0: nothing waits).
int64_t age_ms(int64_t since_us, int64_t now_us);

/// Every stage id worth a row: registered here, or with queue entries, dead letters or a pause
/// in PostgreSQL (a stage another node or an older version ran).
std::set<std::string> stage_ids(const stage_registry& reg, const stage_table& t);

/// INVALID_ARGUMENT naming `stage_id` unless it is a stage registered on this node.
grpc::Status registered_stage(const stage_registry& reg, const std::string& id);

/// Who asked, for the log: the caller's own words (gostctl --who) and its address.
std::string who_asked(grpc::CallbackServerContext* ctx, const std::string& who);

} // namespace gost::runtime::admin
