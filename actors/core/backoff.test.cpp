#include <doctest/doctest.h>

#include <thread>

#include "gost/core/backoff.hpp"

using namespace gost;
using namespace std::chrono_literals;

TEST_CASE("the back-off doubles from its first delay up to its cap, and starts over on reset") {
  backoff b{100ms, 1000ms};
  CHECK(b.next() == 100ms);
  CHECK(b.next() == 200ms);
  CHECK(b.next() == 400ms);
  CHECK(b.next() == 800ms);
  CHECK(b.next() == 1000ms);
  CHECK(b.next() == 1000ms);
  b.reset();
  CHECK(b.next() == 100ms);
}

TEST_CASE("a first delay above the cap is cut to the cap; a zero delay stays zero") {
  backoff over{5s, 1s};
  CHECK(over.next() == 1s);
  CHECK(over.next() == 1s);
  backoff zero{0ms, 0ms};
  CHECK(zero.next() == 0ms);
  CHECK(zero.next() == 0ms);
}

TEST_CASE("a long cap does not overflow while doubling") {
  backoff b{1ms, std::chrono::milliseconds::max()};
  for (int i = 0; i < 200; ++i)
    CHECK(b.next() > 0ms);
  CHECK(b.next() == std::chrono::milliseconds::max());
}

TEST_CASE("a wait after a stop request returns at once and says it was stopped") {
  stop_signal stop;
  stop.request();
  backoff b{1h, 1h}; // a wait that ignored the stop would hang the test
  CHECK_FALSE(b.wait(stop));
  CHECK(stop.requested());
}

TEST_CASE("a stop requested by another thread cuts a wait short") {
  stop_signal stop;
  backoff b{1h, 1h};
  bool waited_out = true;
  // Whether the request comes before or during the wait, the worker must come back stopped.
  std::thread worker{[&] { waited_out = b.wait(stop); }};
  stop.request();
  worker.join();
  CHECK_FALSE(waited_out);
}

TEST_CASE("without a stop the wait runs its delay and says so") {
  stop_signal stop;
  backoff b{1ms, 1ms};
  auto before = std::chrono::steady_clock::now();
  CHECK(b.wait(stop));
  CHECK(std::chrono::steady_clock::now() - before >= 1ms);
  CHECK_FALSE(stop.requested());
}
