#include <doctest/doctest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

#include "gost/core/detail/resident_set.hpp"
#include "gost/core/flat_map.hpp"
#include "gost/core/protocol.hpp"

using namespace gost;
using residents = detail::resident_set<caf::actor>;

namespace {

// (An argument: CAF 0.17's spawn of a function without arguments binds a null tuple, which
// UBSan reports.)
caf::behavior idle(caf::event_based_actor*, int) {
  return {[](ok_atom) {}};
}

} // namespace

TEST_CASE("resident_set keeps least recently used order, finds by id and removes") {
  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  residents rs;
  CHECK(rs.empty());
  CHECK(rs.oldest_id() == nullptr);
  std::vector<caf::actor> actors;
  for (int i = 0; i < 3; ++i)
    actors.push_back(sys.spawn(idle, i));
  rs.add("a", actors[0], t0);
  rs.add("b", actors[1], t0 + std::chrono::seconds{1});
  rs.add("c", actors[2], t0 + std::chrono::seconds{2});
  CHECK(rs.size() == 3);
  REQUIRE(rs.oldest_id() != nullptr);
  CHECK(*rs.oldest_id() == "a");
  // Using "a" makes "b" the oldest, and records the use time.
  REQUIRE(rs.use("a", t0 + std::chrono::seconds{3}) != nullptr);
  CHECK(*rs.oldest_id() == "b");
  CHECK(rs.oldest_last_used() == t0 + std::chrono::seconds{1});
  CHECK(*rs.find("a") == actors[0]);
  CHECK(rs.find("x") == nullptr);
  CHECK(rs.use("x", t0) == nullptr);
  // Removing the middle and the oldest entries keeps the list consistent.
  CHECK(rs.remove("c") == actors[2]);
  CHECK_FALSE(rs.contains("c"));
  CHECK(*rs.oldest_id() == "b");
  CHECK(rs.remove("b") == actors[1]);
  CHECK(*rs.oldest_id() == "a");
  CHECK_FALSE(rs.remove("b"));
  rs.add("d", actors[2], t0 + std::chrono::seconds{4});
  CHECK(*rs.oldest_id() == "a");
  std::vector<std::string> ids;
  rs.for_each([&](const std::string& id, const caf::actor&) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"a", "d"});
  CHECK(rs.remove("a") == actors[0]);
  CHECK(rs.remove("d") == actors[2]);
  CHECK(rs.empty());
  CHECK(rs.oldest_id() == nullptr);
  for (auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("flat_map and flat_set behave like sorted maps and sets") {
  flat_map<std::string, int> m{{"b", 2}, {"a", 1}};
  m["c"] = 3;
  ++m["a"];
  CHECK(m.size() == 3);
  std::vector<std::pair<std::string, int>> seen(m.begin(), m.end());
  CHECK(seen == std::vector<std::pair<std::string, int>>{{"a", 2}, {"b", 2}, {"c", 3}});
  CHECK(m.count("b") == 1);
  CHECK(m.find("z") == m.end());
  CHECK(m.erase("b") == 1);
  CHECK(m.erase("b") == 0);
  CHECK(m.count("b") == 0);
  m.clear();
  CHECK(m.empty());
  flat_map<std::string, int> twice{{"k", 1}, {"k", 2}}; // like std::map: the first one stays
  CHECK(twice.size() == 1);
  CHECK(twice["k"] == 1);

  flat_set<std::string> s{"y", "x"};
  CHECK(s.insert("z"));
  CHECK_FALSE(s.insert("x"));
  CHECK(std::vector<std::string>(s.begin(), s.end()) == std::vector<std::string>{"x", "y", "z"});
  CHECK(s.erase("y") == 1);
  CHECK(s.count("y") == 0);
  CHECK(s.erase("y") == 0);
  CHECK(s.size() == 2);
}
