#pragma once
// What the feed applier (feed_applier.hpp) needs from the rest of gost, as small interfaces:
// the bookkeeping of loads, the offers, and where answers go. The node implements them
// (runtime/kafka/feed_exchange.cpp: PostgreSQL, the offers' owners through the call hub, the
// responses topic); unit tests implement them with fakes. Each call may block its caller (the
// exchange's consumer thread); none is called from an actor.

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "gost/core/backoff.hpp"
#include "gost/persistence/feeds/feeds.hpp"
#include "gost/v1/feed_exchange.pb.h"

namespace gost::feeds {

/// The offer store's bookkeeping of loads (gost/persistence/feeds/feeds.hpp, which says what
/// each call reads and writes). Errors are the database's (db_errc): the applier retries them.
class feed_store {
public:
  using count_fn =
    std::function<persistence::feed_counts(const std::vector<persistence::feed_item>&)>;

  virtual ~feed_store() = default;

  virtual caf::expected<persistence::feed_task>
  begin_task(const std::string& task_id, const std::string& seller_id, const std::string& ns) = 0;

  /// The seller's stored offers under these external ids.
  virtual caf::expected<std::vector<persistence::keyed_offer>>
  find(const std::string& seller_id, const std::string& ns,
       const std::vector<std::string>& external_ids) = 0;

  /// Records a batch's external ids; on its first recording adds `count(items)` to the task's
  /// counts in the same transaction. The calls naming a task name its seller too: a task's rows
  /// live in the seller's home group's database (ADR 0023).
  virtual caf::expected<persistence::recorded_batch>
  record_batch(const std::string& seller_id, const std::string& task_id,
               const std::string& batch_id, const std::vector<std::string>& external_ids,
               const count_fn& count) = 0;

  virtual caf::error add_counts(const std::string& seller_id, const std::string& task_id,
                                const persistence::feed_counts& delta) = 0;

  /// The seller's offers with an external id the task did not carry.
  virtual caf::expected<std::vector<persistence::keyed_offer>>
  missing(const std::string& task_id, const std::string& seller_id, const std::string& ns) = 0;

  /// The task's counts so far and its distinct batches.
  virtual caf::expected<std::pair<persistence::feed_counts, int32_t>>
  progress(const std::string& seller_id, const std::string& task_id) = 0;

  /// Marks the task finished with its summary (serialized gost.v1.FeedSummary).
  virtual caf::error finish_task(const std::string& seller_id, const std::string& task_id,
                                 const std::string& summary) = 0;

  /// The id of the offer holding the seller's key in its home database: the offer stored
  /// under it, or the one a claim names (an offer a split left in another group's database,
  /// ADR 0023); none when the key is free.
  virtual caf::expected<std::optional<std::string>>
  holder(const std::string& seller_id, const std::string& ns, const std::string& external_id) = 0;

  /// Removes the claim of the seller's key held for `offer_id`, once that offer's owner said it
  /// is gone (a stray deleted where it lives leaves its claim behind); true when removed.
  virtual caf::expected<bool> release_claim(const std::string& seller_id, const std::string& ns,
                                            const std::string& external_id,
                                            const std::string& offer_id) = 0;
};

/// The offer domain as the applier sees it: its rules (feeds reaches offers only through
/// their protocol, so the node passes the rules in) and operations on one offer, carried out
/// by the offer's owner. Operations answer through futures, so a batch keeps many in flight.
/// Errors are gost::errc (already_exists, conflict, not_found, moved, ...) or CAF's.
class offer_port {
public:
  template <class T>
  using reply = std::future<caf::expected<T>>;

  virtual ~offer_port() = default;

  /// A fresh id for an offer of `seller_id`: with several shard groups, one whose shard lies
  /// in the seller's home group (ADR 0023), where its feed's other offers and their keys are.
  virtual std::string new_id(const std::string& seller_id) = 0;

  /// Why the content cannot be stored (a message naming the field), or empty.
  virtual std::string check(const v1::Offer& content) = 0;

  /// Whether storing `wanted` over `stored` changes the offer (false: nothing to write).
  virtual bool changes(const v1::Offer& stored, const v1::Offer& wanted) = 0;

  /// Creates offer `content.id()`. The stored offer, or errc::already_exists.
  virtual reply<v1::Offer> create(const v1::Offer& content) = 0;

  /// Replaces offer `content.id()`: the fields in `mask` (comma-separated; empty: all of
  /// them), when its version is `expected_version` (nullopt: whatever it is). The stored
  /// offer, or errc::conflict / errc::not_found.
  virtual reply<v1::Offer> update(const v1::Offer& content, std::optional<int64_t> expected_version,
                                  const std::string& mask) = 0;

  /// Deletes the offer whatever its version; the version of the deletion, or errc::not_found.
  virtual reply<int64_t> remove(const std::string& offer_id) = 0;

  /// The stored offer, asked at its owner, or errc::not_found.
  virtual reply<v1::Offer> get(const std::string& offer_id) = 0;
};

/// Where one side's messages go: the offer store's answers (the responses topic) and the feed
/// processor's requests (the requests topic), both keyed by seller, so in order per seller.
template <class M>
class message_sink {
public:
  virtual ~message_sink() = default;
  /// Queues a message (seller_id, namespace and task_id are set). A message that cannot be
  /// queued makes the next `flushed` say false.
  virtual void send(const M& msg, const stop_signal& stop) = 0;
  /// Waits until every message sent so far is acknowledged. False when stopped, or when one
  /// was not delivered (then the sender does its step again: messages are at least once).
  virtual bool flushed(const stop_signal& stop) = 0;
};

/// The offer store's answers (the applier's).
using response_sink = message_sink<v1::FeedResponse>;
/// The feed processor's batches and end messages.
using request_sink = message_sink<v1::FeedRequest>;

} // namespace gost::feeds
