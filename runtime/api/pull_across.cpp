#include "api/pull_across.hpp"

#include <charconv>

#include "gost/persistence/cluster/placement.hpp"

namespace gost::runtime {

std::string pull_position::token() const {
  std::string out;
  for (auto& [group, seq] : after)
    out += (out.empty() ? "" : ",") + std::to_string(group) + ":" + std::to_string(seq);
  return out;
}

std::string parse_pull_token(const std::string& token, pull_position& out) {
  out.after.clear();
  auto bad = [&](const std::string& why) {
    return "after_token `" + token + "` " + why
           + ": pass the next_token of the page before, unchanged (empty: from the start)";
  };
  size_t at = 0;
  while (at < token.size()) {
    auto end = token.find(',', at);
    if (end == std::string::npos)
      end = token.size();
    auto part = token.substr(at, end - at);
    auto colon = part.find(':');
    uint32_t group = 0;
    int64_t seq = 0;
    auto* p = part.data();
    if (colon == std::string::npos || std::from_chars(p, p + colon, group).ptr != p + colon
        || colon == 0 || std::from_chars(p + colon + 1, p + part.size(), seq).ptr != p + part.size()
        || colon + 1 == part.size())
      return bad("is not a token of this API (`<group>:<seq>` by ',')");
    if (seq < 0)
      return bad("has a negative position");
    if (!out.after.emplace(group, seq).second)
      return bad("names group " + std::to_string(group) + " twice");
    at = end + 1;
    if (end + 1 == token.size())
      return bad("ends with ','");
  }
  return {};
}

std::string pull_start(const persistence::shard_placement& where, int64_t after,
                       const std::string& after_token, pull_position& out) {
  out.after.clear();
  if (after < 0)
    return "after (a cursor) must not be negative";
  if (!after_token.empty()) {
    if (after != 0)
      return "give after or after_token, not both (after_token: the next_token of the page "
             "before)";
    return parse_pull_token(after_token, out);
  }
  if (after == 0)
    return {};
  auto groups = where.groups();
  if (groups.size() > 1)
    return "after is a position in one database, and this installation keeps outputs in "
           + std::to_string(groups.size())
           + " shard groups' databases: pass the page's next_token as after_token instead";
  out.after[groups.empty() ? 0 : groups.front()] = after;
  return {};
}

caf::expected<std::vector<persistence::entity_output>>
pull_outputs(const persistence::shard_placement& where, const std::string& kind,
             const std::string& lane, pull_position& pos, size_t limit) {
  // Each group's next `limit` (at most), then taken in turn until `limit`.
  std::vector<std::pair<uint32_t, std::vector<persistence::entity_output>>> pages;
  for (auto g : where.groups()) {
    auto* db = where.database(g);
    if (db == nullptr)
      continue;
    auto at = pos.after.find(g);
    auto rows = persistence::read_entity_outputs(*db, kind, lane,
                                                 at == pos.after.end() ? 0 : at->second, limit);
    if (!rows)
      return std::move(rows.error());
    if (!rows->empty())
      pages.emplace_back(g, std::move(*rows));
  }
  std::vector<persistence::entity_output> out;
  for (size_t i = 0; out.size() < limit; ++i) {
    bool any = false;
    for (auto& [g, rows] : pages) {
      if (i >= rows.size() || out.size() == limit)
        continue;
      any = true;
      pos.after[g] = rows[i].seq;
      out.push_back(std::move(rows[i]));
    }
    if (!any)
      break;
  }
  return out;
}

} // namespace gost::runtime
