#pragma once
// Scheduled actions (seed 001, ADR 0011) as e2e tests check them: the seed's invariant in SQL
// and the occurrence named by an Idempotency-Key the endpoint saw.

#include <cstdint>
#include <string>
#include <utility>

#include "gost/testing/pg.hpp"

namespace gost::testing {

/// The seed's invariant in SQL: actions without exactly one queue row carrying their id and
/// current guid ("" when it holds).
inline std::string scheduled_invariant_broken(const temp_db& db) {
  return db.scalar("SELECT coalesce(string_agg(a.action_id, ','), '') FROM scheduled_actions a"
                   " WHERE (SELECT count(*) FROM scheduled_incoming i WHERE i.action_id ="
                   " a.action_id AND i.action_guid = a.action_guid) + (SELECT count(*) FROM"
                   " scheduled_processing p WHERE p.action_id = a.action_id AND p.action_guid ="
                   " a.action_guid) <> 1");
}

/// The action id of an idempotency key `<id>/<ms>`, and its occurrence.
inline std::pair<std::string, int64_t> split_occurrence_key(const std::string& key) {
  auto slash = key.rfind('/');
  return {key.substr(0, slash), std::stoll(key.substr(slash + 1))};
}

} // namespace gost::testing
