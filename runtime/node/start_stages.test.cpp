// The application's stages' `stages.<id>.enabled` honoured by the node: the key read by
// load_node_config (as node_builder does) decides whether start_stages registers the stage.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "gost/config/node_config.hpp"
#include "node/start.hpp"

using namespace gost;
using namespace gost::runtime;

namespace {

/// A stage that never asks for anything: only its registration is under test.
struct idle_stage : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::skip();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any*) const override { return {}; }
};

/// The stages a node of application `app` (one stage, `counting`) registers with `argv`.
std::shared_ptr<stage_registry> registered(std::vector<std::string> argv) {
  config::application app;
  app.name = "test_app";
  app.stages = {"counting"};
  argv.insert(argv.begin(), "test_app");
  std::vector<char*> ptrs;
  for (auto& a : argv)
    ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  auto r = config::load_node_config(static_cast<int>(argv.size()), ptrs.data(), nullptr, app);
  REQUIRE_MESSAGE(r.config, r.error);
  extensions ext;
  ext.stages.push_back(
    {"counting", std::make_shared<const idle_stage>(), std::make_shared<const stage_options>()});
  node_context n{std::move(*r.config), std::move(ext)};
  auto err = start_stages(n);
  REQUIRE_MESSAGE(!err, to_string(err));
  return n.stages;
}

} // namespace

TEST_CASE("an application's stage runs unless its stages.<id>.enabled is false") {
  SUBCASE("default: registered") {
    auto stages = registered({});
    CHECK(stages->find("counting") != nullptr);
    CHECK(stages->find("expire") != nullptr);
  }
  SUBCASE("false: not registered, the built-in ones still are") {
    auto stages = registered({"--stages.counting.enabled=false"});
    CHECK(stages->find("counting") == nullptr);
    CHECK(stages->find("expire") != nullptr);
  }
  SUBCASE("true said explicitly") {
    CHECK(registered({"--stages.counting.enabled=true"})->find("counting") != nullptr);
  }
}
