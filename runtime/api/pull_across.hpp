#pragma once
// Pulling entity outputs (EntityService.PullOutputs, TaskService.PullResults) across shard
// groups (ADR 0023). Each group's database numbers its outputs with a sequence of its own, so a
// consumer's position is a seq per group: the `next_token` it passes back as `after_token`.
// While one group's database holds a lane's outputs, the plain int64 cursor (`after`) works too.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "gost/persistence/entities/entities.hpp"

namespace gost::persistence {
class shard_placement;
}

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

/// Where a pull starts, from a request's fields: `after_token` (a position per group), or the
/// int64 `after` (a position in the one database holding the lane's outputs), not both.
struct pull_start_point {
  pull_position pos;
  bool by_cursor = false; ///< `after` given (or neither: from the start)
  int64_t after = 0;
};

/// Reads a request's `after` and `after_token` into `out`. The message, when not empty, is the
/// INVALID_ARGUMENT to answer (naming the field).
std::string pull_start(int64_t after, const std::string& after_token, pull_start_point& out);

/// A page of outputs and the position after it.
struct pull_page {
  std::vector<persistence::entity_output> rows;
  pull_position pos; ///< next_token
  /// The int64 cursor: the last seq taken in the one database holding the lane's outputs (0:
  /// none anywhere yet); -1 while they are in several groups' databases (passed back as
  /// `after`, it is refused with advice, never answered with a page seen before).
  int64_t cursor = 0;
};

/// Outputs of `kind`'s `lane` after `start` in every group `where` serves, at most `limit`:
/// each group's in seq order, the groups taken in turn (a busy group does not hold back
/// another's outputs). An int64 cursor above 0 is refused (`errc::invalid_argument`) while the
/// lane's outputs are in several groups' databases. Any group's read failing fails the call
/// (nothing is returned twice: the consumer asks again from its old position).
caf::expected<pull_page> pull_outputs(const persistence::shard_placement& where,
                                      const std::string& kind, const std::string& lane,
                                      const pull_start_point& start, size_t limit);

/// A pull response's position after its page: `next_token` and the int64 `cursor`.
template <class Response>
void put_position(const pull_page& page, Response& resp) {
  resp.set_next_token(page.pos.token());
  resp.set_cursor(page.cursor);
}

} // namespace gost::runtime
