#include <doctest/doctest.h>

#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "gost/core/rate_limited_log.hpp"

using namespace std::chrono_literals;

TEST_CASE("rate_limited: a burst per window, then the suppressed count on the next line") {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%v");
  auto lg = std::make_shared<spdlog::logger>("rate-test", sink);
  gost::log::rate_limited log{lg, 2, 10s};
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;

  CHECK(log.warn("a", t0));
  CHECK(log.warn("b", t0 + 1s));
  CHECK_FALSE(log.warn("c", t0 + 2s));
  CHECK_FALSE(log.warn("d", t0 + 9s));
  CHECK(out.str() == "a\nb\n");
  // A new window: the first line carries the count of those dropped.
  CHECK(log.warn("e", t0 + 10s));
  CHECK(log.warn("f", t0 + 11s));
  CHECK(out.str() == "a\nb\ne suppressed_since_last=2\nf\n");
}
