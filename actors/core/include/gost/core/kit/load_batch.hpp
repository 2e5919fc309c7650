#pragma once
// The entity kit's load batching: activations arrive in bursts (a shard dispatching a page of
// due work, a feed touching thousands of offers), and one query for many entities costs little
// more than one for a single entity. A loader actor collects the ids asked within a short delay
// (or up to `max` of them) and answers them all from one load.
//
//   load_batch<offer_snapshot> loads{512};
//   if (loads.add(id, rp)) loads.flush(load_many);   // full: load now
//   else if (first) delayed_send(self, 1ms, flush);  // else after a millisecond

#include <chrono>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/typed_response_promise.hpp>

#include "gost/core/protocol.hpp"

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

/// The loading half of a kit store actor (offers' and durable entities' alike): loads asked
/// within `delay` of each other (or `max` of them) are answered from one `load_many(ids)`.
/// The store calls `load` from its `load_atom` handler and `flush` from its `flush_atom` one.
template <class Row>
class batched_loader {
public:
  explicit batched_loader(size_t max,
                          std::chrono::milliseconds delay = std::chrono::milliseconds{1})
    : batch_(max), delay_(delay) {}

  /// Queues a load of `id`: the promise to return from the handler.
  template <class Self, class LoadMany>
  caf::typed_response_promise<Row> load(Self* self, std::string id, LoadMany&& load_many) {
    auto rp = self->template make_response_promise<Row>();
    if (batch_.add(std::move(id), rp)) {
      batch_.flush(load_many);
    } else if (!scheduled_) {
      scheduled_ = true;
      self->delayed_send(self, delay_, flush_atom_v);
    }
    return rp;
  }

  /// Loads what is queued now (the delay is over).
  template <class LoadMany>
  void flush(LoadMany&& load_many) {
    scheduled_ = false;
    batch_.flush(load_many);
  }

private:
  load_batch<Row> batch_;
  std::chrono::milliseconds delay_;
  bool scheduled_ = false;
};

} // namespace gost::kit
