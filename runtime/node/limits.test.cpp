#include <doctest/doctest.h>

#include <climits>
#include <regex>
#include <string>
#include <vector>

#include "gost/config/node_config.hpp"
#include "node/limits.hpp"

using namespace gost;
using namespace gost::runtime;

namespace {

config::node_config load(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "gostd");
  std::vector<char*> ptrs;
  for (auto& a : argv)
    ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  auto r = config::load_node_config(static_cast<int>(argv.size()), ptrs.data(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  return *r.config;
}

/// The key a refusal names: "... (limits.title_max_chars)" -> limits.title_max_chars.
std::string key_named(const std::string& problem) {
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(problem, m, std::regex{R"(\((limits\.[a-z_]+)\))"}), problem);
  return m[1];
}

} // namespace

TEST_CASE("the limits' structs hold the schema's defaults") {
  auto c = load({});
  auto o = offer_limits_of(c.limits);
  offer_limits want;
  CHECK(o.title_max_chars == want.title_max_chars);
  CHECK(o.description_max_chars == want.description_max_chars);
  CHECK(o.attributes_max == want.attributes_max);
  CHECK(o.attribute_key_max_chars == want.attribute_key_max_chars);
  CHECK(o.attribute_value_max_chars == want.attribute_value_max_chars);
  CHECK(o.photos_max == want.photos_max);
  CHECK(o.offer_max_bytes == want.offer_max_bytes);
  auto a = api_limits_of(c.limits);
  api_limits want_api;
  CHECK(a.page_size_max == want_api.page_size_max);
  CHECK(a.page_max_bytes == want_api.page_max_bytes);
  CHECK(a.state_max_bytes == want_api.state_max_bytes);
  CHECK(a.event_max_bytes == want_api.event_max_bytes);
  CHECK(c.limits.request_max_bytes == 4 << 20); // gRPC's own default
  CHECK(link_max_bytes(c.limits) == 8 << 20);
}

TEST_CASE("every limits.* key reaches the check it names, and each refusal names a real key") {
  auto c = load({"--limits.title_max_chars=11", "--limits.description_max_chars=12",
                 "--limits.attributes_max=13", "--limits.attribute_key_max_chars=14",
                 "--limits.attribute_value_max_chars=15", "--limits.photos_max=16",
                 "--limits.offer_max_bytes=17k", "--limits.state_max_bytes=18k",
                 "--limits.event_max_bytes=19k", "--limits.page_size_max=20",
                 "--limits.page_max_bytes=210k", "--limits.request_max_bytes=1g"});
  auto o = offer_limits_of(c.limits);
  auto a = api_limits_of(c.limits);
  CHECK(a.offer.title_max_chars == o.title_max_chars);

  struct refusal {
    std::string problem;
    std::string key;
    uint64_t limit;
  };
  std::vector<refusal> all;
  auto offer = [] {
    v1::Offer x;
    x.set_seller_id("s");
    return x;
  };
  auto x = offer();
  x.set_title(std::string(12, 't'));
  all.push_back({check_content(x, o), "limits.title_max_chars", 11});
  x = offer();
  x.set_description(std::string(13, 'd'));
  all.push_back({check_content(x, o), "limits.description_max_chars", 12});
  x = offer();
  for (int i = 0; i < 14; ++i)
    (*x.mutable_attributes())[std::to_string(i)] = "v";
  all.push_back({check_content(x, o), "limits.attributes_max", 13});
  x = offer();
  (*x.mutable_attributes())[std::string(15, 'k')] = "v";
  all.push_back({check_content(x, o), "limits.attribute_key_max_chars", 14});
  x = offer();
  (*x.mutable_attributes())["k"] = std::string(16, 'v');
  all.push_back({check_content(x, o), "limits.attribute_value_max_chars", 15});
  x = offer();
  for (int i = 0; i < 17; ++i)
    x.add_photos();
  all.push_back({check_content(x, o), "limits.photos_max", 16});
  x = offer();
  x.set_category(std::string(17 * 1024, 'c'));
  all.push_back({check_content(x, o), "limits.offer_max_bytes", 17 * 1024});
  uint32_t page = 0;
  all.push_back({check_page_size("page_size", 21, a, page), "limits.page_size_max", 20});
  all.push_back({check_state_size(18 * 1024 + 1, a), "limits.state_max_bytes", 18 * 1024});
  all.push_back({check_event_size("event", 19 * 1024 + 1, a), "limits.event_max_bytes", 19 * 1024});
  for (auto& r : all) {
    CAPTURE(r.problem);
    CHECK(key_named(r.problem) == r.key);
    CHECK(config::node_schema().find(r.key) != nullptr);
    CHECK(r.problem.find("the limit is " + std::to_string(r.limit) + " (") != std::string::npos);
  }
  CHECK(a.page_max_bytes == 210 * 1024);
  CHECK(c.limits.request_max_bytes == 1 << 30);
  CHECK(link_max_bytes(c.limits) == INT_MAX); // twice 1 GiB does not fit gRPC's int
}
