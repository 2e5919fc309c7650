#pragma once
// The call hub: a few long-lived actors that make requests on behalf of code outside the actor
// system (gRPC callbacks, Kafka threads). A gRPC handler hands the hub a job; the job runs in a
// hub actor, sends its request, and the reply handler finishes the call there. No actor is
// spawned per call (a spawn and an actor's teardown cost more than the request itself), and a
// job that must wait (a shard that is moving) parks in its hub actor, all parked jobs of an
// actor sharing one timer.
//
//   hub.run([=](caf::event_based_actor* self) {
//     self->request(shard, timeout, get_atom_v, id).then(
//       [=](offer_msg& m) { finish(m); }, [=](caf::error& e) { fail(e); });
//   });
//
// Jobs must own what they capture (copies, shared pointers): they run later, on another thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

namespace gost {

class call_hub {
public:
  using job = std::function<void(caf::event_based_actor*)>;

  /// How long `later` parks a job.
  static constexpr auto pause = std::chrono::milliseconds{50};

  /// Spawns `actors` hub actors (at least one) and `blocking_threads` threads (at least one)
  /// for run_blocking.
  call_hub(caf::actor_system& sys, size_t actors, size_t blocking_threads = 4);
  /// Stops the hub actors; jobs still parked are dropped (their calls are being cut anyway).
  /// Blocking jobs already handed over still run (each finishes its call) before it returns.
  ~call_hub();
  call_hub(const call_hub&) = delete;
  call_hub& operator=(const call_hub&) = delete;

  /// Runs `j` in one of the hub's actors (round robin). Thread-safe.
  void run(job j);

  /// Runs `f` (blocking: PostgreSQL reads) on one of the hub's blocking threads, so that
  /// neither a gRPC callback thread nor a scheduler thread waits on it; jobs queue (first in,
  /// first out) while every thread is busy: a flood of calls costs memory for their jobs, not
  /// a thread each. Thread-safe.
  void run_blocking(std::function<void()> f);
  /// Blocking jobs waiting for a thread now.
  size_t blocking_backlog() const;

  /// The same, `f` given the detached worker: it may ask actors from it (a reply handler runs
  /// on that worker) and quits it itself once done. Thread-safe.
  void run_blocking_on_worker(std::function<void(caf::event_based_actor* worker)> f);

  /// From inside a job: runs `j` in the same hub actor after `pause`.
  static void later(caf::event_based_actor* self, job j);

private:
  void blocking_loop();

  std::vector<caf::actor> actors_;
  std::atomic<size_t> next_{0};
  mutable std::mutex blocking_mtx_;
  std::condition_variable blocking_cv_;
  std::deque<std::function<void()>> blocking_jobs_;
  bool stopping_ = false;
  std::vector<std::thread> blocking_threads_;
};

} // namespace gost

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gost::call_hub::job)
