// The call hub's blocking threads: at most that many jobs run at once (the rest queue, first in
// first out), and every job handed over runs before the hub is gone; a job on a detached worker
// of its own (run with the dev preset: UBSan checks the worker's spawn).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <vector>

#include "gost/core/call_hub.hpp"
#include "gost/testing/caf_fixture.hpp"

using namespace gost;
using namespace std::chrono_literals;

TEST_CASE_FIXTURE(testing::caf_fixture,
                  "run_blocking runs at most its threads' count of jobs at once, and all of them") {
  std::atomic<int> done{0};
  int running = 0, most = 0; // guarded by mtx
  bool full = false;         // three jobs ran at once
  std::vector<int> order;
  std::mutex mtx;
  std::condition_variable cv;
  {
    call_hub hub{sys, 1, 3};
    for (int i = 0; i < 12; ++i)
      hub.run_blocking([&, i] {
        std::unique_lock<std::mutex> g{mtx};
        most = std::max(most, ++running);
        if (running == 3) {
          full = true;
          cv.notify_all();
        }
        // Until three run at once, a job holds its thread: the hub's three threads side by
        // side, and a fourth would start meanwhile if the hub had one (bounded: a hub of
        // fewer threads fails the checks below instead of hanging).
        cv.wait_for(g, 10s, [&] { return full; });
        order.push_back(i);
        --running;
        ++done;
      });
    CHECK(hub.blocking_backlog() <= 12);
  } // the destructor waits for the jobs handed over
  CHECK(done == 12);
  CHECK(most == 3); // never more than its threads, and they do run side by side
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
