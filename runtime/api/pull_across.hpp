#pragma once
// Pulling entity outputs (EntityService.PullOutputs, TaskService.PullResults) across shard
// groups (ADR 0023). Each group's database numbers its outputs with a sequence of its own, so a
// consumer's position is a seq per group: the `next_token` it passes back as `after_token`.
// With one group the plain int64 cursor (`after`) still works.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/entities/entities.hpp"

namespace gost::runtime {

/// A consumer's position: the last seq taken in each group (a group not named: none yet).
struct pull_position {
  std::map<uint32_t, int64_t> after;

  /// `<group>:<seq>` for each group, ascending, joined by ',' ("0:120,1:87"); empty: none.
  std::string token() const;
};

/// Reads a token of `pull_position::token` (empty: from the start). The error's message says
/// what is wrong with it; empty: `out` holds it.
std::string parse_pull_token(const std::string& token, pull_position& out);

/// Where a pull starts, from a request's `after` (one database's cursor) and `after_token`:
/// one of them at most; `after` only while the node serves one group. The message, when not
/// empty, is the INVALID_ARGUMENT to answer (naming the field).
std::string pull_start(const persistence::shard_placement& where, int64_t after,
                       const std::string& after_token, pull_position& out);

/// Outputs of `kind`'s `lane` after `pos` in every group `where` serves, at most `limit`: each
/// group's in seq order, the groups taken in turn (a busy group does not hold back another's
/// outputs); `pos` is advanced past what is returned. Any group's read failing fails the call
/// (nothing is returned twice: the consumer asks again from its old token).
caf::expected<std::vector<persistence::entity_output>>
pull_outputs(const persistence::shard_placement& where, const std::string& kind,
             const std::string& lane, pull_position& pos, size_t limit);

/// A pull response's position after its page: `next_token`, and with one group its int64
/// `cursor` too (unchanged when the page is empty).
template <class Response>
void put_position(const pull_position& pos, const persistence::shard_placement& where,
                  Response& resp) {
  resp.set_next_token(pos.token());
  auto groups = where.groups();
  if (groups.size() == 1) {
    auto at = pos.after.find(groups.front());
    resp.set_cursor(at == pos.after.end() ? 0 : at->second);
  }
}

} // namespace gost::runtime
