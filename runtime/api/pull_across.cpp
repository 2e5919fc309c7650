#include "api/pull_across.hpp"

#include <charconv>

#include "gost/core/errc.hpp"
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
    auto whole = [](auto r, const char* stop) { return r.ec == std::errc{} && r.ptr == stop; };
    if (colon == std::string::npos || colon == 0 || colon + 1 == part.size()
        || !whole(std::from_chars(p, p + colon, group), p + colon)
        || !whole(std::from_chars(p + colon + 1, p + part.size(), seq), p + part.size()))
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

std::string pull_start(int64_t after, const std::string& after_token, pull_start_point& out) {
  out = pull_start_point{};
  if (after == -1)
    return "after -1 is the cursor answered while this lane's outputs are in several shard "
           "groups' databases: pass the page's next_token as after_token instead";
  if (after < 0)
    return "after (a cursor) must not be negative";
  if (!after_token.empty()) {
    if (after != 0)
      return "give after or after_token, not both (after_token: the next_token of the page "
             "before)";
    return parse_pull_token(after_token, out.pos);
  }
  out.by_cursor = true;
  out.after = after;
  return {};
}

caf::expected<pull_page> pull_outputs(const persistence::shard_placement& where,
                                      const std::string& kind, const std::string& lane,
                                      const pull_start_point& start, size_t limit) {
  std::vector<std::pair<uint32_t, persistence::pg_pool*>> dbs;
  for (auto g : where.groups())
    if (auto* db = where.database(g))
      dbs.emplace_back(g, db);
  // The groups whose databases hold outputs of the lane: with one, the int64 cursor is a
  // position there; with more, it names none.
  std::vector<uint32_t> holding;
  if (dbs.size() == 1) {
    holding.push_back(dbs.front().first);
  } else {
    for (auto& [g, db] : dbs) {
      auto any = persistence::read_entity_outputs(*db, kind, lane, 0, 1);
      if (!any)
        return std::move(any.error());
      if (!any->empty())
        holding.push_back(g);
    }
  }
  pull_page page;
  page.pos = start.pos;
  if (start.by_cursor && start.after > 0) {
    if (holding.size() > 1)
      return make_error(errc::invalid_argument,
                        "after is a position in one database, and this lane's outputs are in "
                          + std::to_string(holding.size())
                          + " shard groups' databases: pass the next_token of your last page "
                            "as after_token instead (every page answers one)");
    if (holding.empty()) { // a position in no database that holds any: nothing after it
      page.cursor = start.after;
      return page;
    }
    page.pos.after[holding.front()] = start.after;
  }
  // Each group's next `limit` (at most), then taken in turn until `limit`.
  std::vector<std::pair<uint32_t, std::vector<persistence::entity_output>>> pages;
  for (auto& [g, db] : dbs) {
    auto at = page.pos.after.find(g);
    auto rows = persistence::read_entity_outputs(
      *db, kind, lane, at == page.pos.after.end() ? 0 : at->second, limit);
    if (!rows)
      return std::move(rows.error());
    if (!rows->empty())
      pages.emplace_back(g, std::move(*rows));
  }
  for (size_t i = 0; page.rows.size() < limit; ++i) {
    bool any = false;
    for (auto& [g, rows] : pages) {
      if (i >= rows.size() || page.rows.size() == limit)
        continue;
      any = true;
      page.pos.after[g] = rows[i].seq;
      page.rows.push_back(std::move(rows[i]));
    }
    if (!any)
      break;
  }
  if (holding.size() > 1) {
    page.cursor = -1;
  } else if (!holding.empty()) {
    auto at = page.pos.after.find(holding.front());
    page.cursor = at == page.pos.after.end() ? 0 : at->second;
  } else {
    page.cursor = start.by_cursor ? start.after : 0;
  }
  return page;
}

} // namespace gost::runtime
