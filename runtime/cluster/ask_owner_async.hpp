#pragma once
// ask_owner (cluster/builtin_kinds.hpp) from a plain thread: a Kafka consumer's, a scheduled
// worker's, a blocking job's. The ask goes through the call hub and is not waited for, so one
// thread may have many asks in flight (a dead-letter retry pipelines its requeues).

#include <future>
#include <memory>

#include "cluster/builtin_kinds.hpp"
#include "gost/core/call_hub.hpp"

namespace gost::runtime {

/// Sends the offer operation `xs...` to the owner of its offer's shard (ask_owner, until
/// `deadline`); the reply, passed through `map` (in the hub actor), or the error arrives
/// through the future. A hub stopping with the ask parked breaks the promise
/// (std::future_errc::broken_promise). `r` outlives the hub's jobs (the node's router does).
template <class T, class Map, class... Ts>
std::future<caf::expected<T>> ask_owner_async(call_hub& hub, router& r,
                                              clock_type::time_point deadline, Map map, Ts... xs) {
  using reply = reply_of<offer_owner_ops, Ts...>;
  auto p = std::make_shared<std::promise<caf::expected<T>>>();
  auto f = p->get_future();
  hub.run([=, &r](caf::event_based_actor* self) {
    ask_owner(
      self, r, deadline, [p, map](reply& x) { p->set_value(map(x)); },
      [p](const caf::error& e) { p->set_value(e); }, xs...);
  });
  return f;
}

} // namespace gost::runtime
