#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>

#include "node/stop_stack.hpp"

using gost::runtime::stop_stack;

namespace {

/// A logger writing into a string, to read what the stack logged.
struct captured {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> log = [this] {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    sink->set_pattern("%l %v");
    auto l = std::make_shared<spdlog::logger>("stop_stack.test", sink);
    l->set_level(spdlog::level::debug);
    return l;
  }();
};

} // namespace

TEST_CASE("stops run in reverse order of their pushes, each logged, once") {
  captured c;
  std::vector<std::string> ran;
  {
    stop_stack stops{c.log};
    for (auto name : {"pool", "actor system", "gRPC API"})
      stops.push(name, [&ran, name] { ran.emplace_back(name); });
    CHECK(stops.names() == std::vector<std::string>{"pool", "actor system", "gRPC API"});
    stops.unwind();
    CHECK(stops.empty());
    CHECK(ran == std::vector<std::string>{"gRPC API", "actor system", "pool"});
    stops.unwind(); // nothing left: nothing runs twice
    CHECK(ran.size() == 3);
  }
  CHECK(ran.size() == 3); // nor at destruction
  auto text = c.out.str();
  auto api = text.find("info stopped gRPC API ms=");
  auto sys = text.find("info stopped actor system ms=");
  auto pool = text.find("info stopped pool ms=");
  REQUIRE(api != std::string::npos);
  REQUIRE(sys != std::string::npos);
  REQUIRE(pool != std::string::npos);
  CHECK(api < sys);
  CHECK(sys < pool);
  CHECK(text.find("debug stopping gRPC API") < api);
}

TEST_CASE("what was pushed before a failed start is stopped, in reverse, by the destructor") {
  captured c;
  std::vector<int> ran;
  {
    stop_stack stops{c.log};
    stops.push("first", [&] { ran.push_back(1); });
    stops.push("second", [&] { ran.push_back(2); });
    // The third part failed to start: it pushed nothing.
  }
  CHECK(ran == std::vector<int>{2, 1});
}

TEST_CASE("a stop that throws is logged and the ones below it still run") {
  captured c;
  std::vector<int> ran;
  stop_stack stops{c.log};
  stops.push("first", [&] { ran.push_back(1); });
  stops.push("broken", [] { throw std::runtime_error("socket gone"); });
  stops.push("third", [&] { ran.push_back(3); });
  stops.unwind();
  CHECK(ran == std::vector<int>{3, 1});
  CHECK(c.out.str().find("error stop of broken failed error=socket gone") != std::string::npos);
}
