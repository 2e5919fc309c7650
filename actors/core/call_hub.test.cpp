// The call hub's blocking threads: at most that many jobs run at once (the rest queue, first in
// first out), and every job handed over runs before the hub is gone; a job on a detached worker
// of its own (run with the dev preset: UBSan checks the worker's spawn).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gost/core/call_hub.hpp"
#include "gost/testing/caf_fixture.hpp"

using namespace gost;
using namespace std::chrono_literals;

TEST_CASE_FIXTURE(testing::caf_fixture,
                  "run_blocking runs at most its threads' count of jobs at once, and all of them") {
  std::atomic<int> running{0}, most{0}, done{0};
  std::vector<int> order;
  std::mutex mtx;
  {
    call_hub hub{sys, 1, 3};
    for (int i = 0; i < 12; ++i)
      hub.run_blocking([&, i] {
        auto now = ++running;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(20ms);
        {
          std::lock_guard<std::mutex> g{mtx};
          order.push_back(i);
        }
        --running;
        ++done;
      });
    CHECK(hub.blocking_backlog() <= 12);
  } // the destructor waits for the jobs handed over
  CHECK(done == 12);
  CHECK(most <= 3); // never more than its threads
  CHECK(most >= 2); // and they do run side by side
  // First in, first out: the first three started before any later one.
  REQUIRE(order.size() == 12);
  for (size_t i = 0; i < 3; ++i)
    CHECK(order[i] < 6);
}

// The admin verbs that ask actors from a blocking job (pause, resume) run on such a worker. CAF
// 0.17.6 dereferences a null argument tuple when a spawned function takes no argument: under
// UBSan (preset dev, halt_on_error) this test stopped there before the worker got its job as
// an argument.
TEST_CASE_FIXTURE(testing::caf_fixture,
                  "run_blocking_on_worker gives the job a detached worker of its own") {
  call_hub hub{sys, 1, 1};
  std::promise<caf::actor_id> ran;
  auto done = ran.get_future();
  hub.run_blocking_on_worker([&](caf::event_based_actor* worker) {
    ran.set_value(worker->id());
    worker->quit();
  });
  run(); // the hub actor, on the test scheduler, spawns the worker; the worker has its thread
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK(done.get() != caf::invalid_actor_id);
}
