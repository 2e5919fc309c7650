#pragma once
// The entity kit's load batching: activations arrive in bursts (a shard dispatching a page of
// due work, a feed touching thousands of offers), and one query for many entities costs little
// more than one for a single entity. A loader actor collects the ids asked within a short delay
// (or up to `max` of them) and answers them all from one load.
//
//   load_batch<offer_snapshot> loads{512};
//   if (loads.add(id, rp)) loads.flush(load_many);   // full: load now
//   else if (first) delayed_send(self, 1ms, flush);  // else after a millisecond

#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/typed_response_promise.hpp>

namespace gost::kit {

template <class Row>
class load_batch {
public:
  explicit load_batch(size_t max) : max_(max < 1 ? 1 : max) {}

  /// Queues a load; true when the batch is full and should be flushed now.
  bool add(std::string id, caf::typed_response_promise<Row> rp) {
    ids_.push_back(std::move(id));
    waiting_.push_back(std::move(rp));
    return ids_.size() >= max_;
  }

  bool empty() const noexcept { return ids_.empty(); }
  size_t size() const noexcept { return ids_.size(); }

  /// Loads every queued id with `load_many(ids)` -> expected<vector<expected<Row>>> (in the
  /// order of `ids`) and answers each requester: its row, its row's error, or the load's error.
  template <class LoadMany>
  void flush(LoadMany&& load_many) {
    if (ids_.empty())
      return;
    auto rows = load_many(ids_);
    for (size_t i = 0; i < waiting_.size(); ++i) {
      if (!rows)
        waiting_[i].deliver(rows.error());
      else if (auto& r = (*rows)[i]; r)
        waiting_[i].deliver(std::move(*r));
      else
        waiting_[i].deliver(r.error());
    }
    ids_.clear();
    waiting_.clear();
  }

private:
  size_t max_;
  std::vector<std::string> ids_;
  std::vector<caf::typed_response_promise<Row>> waiting_;
};

} // namespace gost::kit
