#pragma once
// The tables of the kit's durable entities (migration 0009): application-defined actor types
// keep their state, pending events, outputs and dead letters here. One write-set per handled
// event (or per accepted send) commits all of its effects in one transaction with the writes of
// other entities, each fenced by its shard's lease epoch (persistence/writes.hpp).
//
// Keys: an entity is (kind, id); the kit names it `kind/id` in its queues and routing
// (`entity_key`), which is why kind names hold no '/'.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gost/persistence/errors.hpp"
#include "gost/persistence/queue.hpp"
#include "gost/persistence/writes.hpp"

namespace gost::persistence {

class pg_pool;

/// `kind/id`.
inline std::string entity_key(const std::string& kind, const std::string& id) {
  return kind + "/" + id;
}

/// Splits `kind/id`; false when there is no '/'.
inline bool split_entity_key(const std::string& key, std::string& kind, std::string& id) {
  auto slash = key.find('/');
  if (slash == std::string::npos)
    return false;
  kind = key.substr(0, slash);
  id = key.substr(slash + 1);
  return true;
}

/// An event to store for an entity (the sender's own, or another's).
struct entity_event_out {
  std::string kind;
  std::string entity_id;
  uint32_t shard = 0; ///< the target's shard (its entities row is created when missing)
  std::string lane;   ///< the target's lane, when its row is created
  int64_t due_at_us = 0;
  std::string payload; ///< serialized google.protobuf.Any
  /// Non-empty: stored at most once per (kind, entity_id, request_id) (a client's retry).
  std::string request_id;
  /// Non-empty: a named timer of the target (an entity's own): it replaces the pending timer of
  /// that name, if any (due time, payload, attempts).
  std::string timer;
  /// The target lives in another shard group's database (ADR 0023): the event is kept in this
  /// database's `entity_forwards`, in the same transaction, for the sending shard's owner to
  /// relay (read_entity_forwards); `shard` and `lane` are not used then.
  bool forward = false;
};

/// An ask's answer (EntityService.Ask): a reply or a refusal, kept by request id so that a
/// retry of the ask gets it again.
struct entity_answer {
  std::string request_id;           ///< empty: nothing kept (the caller gave none)
  std::optional<std::string> reply; ///< serialized Any (none: an empty reply)
  int32_t refusal_code = 0;         ///< a gost::errc; 0: not refused
  std::string refusal;              ///< the refusal's message
  int64_t version = 0;              ///< the entity's version after the ask
};

/// Everything one event (or one accepted send) of one entity changes, all or nothing.
struct entity_write {
  std::string kind;
  std::string entity_id;
  std::string lane; ///< the entity's lane (kept in its row)
  /// The entity's state version the write was computed on; the write is a conflict unless
  /// the entity is still at it. -1: no check (a send that only adds events).
  int64_t expected_version = -1;
  std::optional<std::string> new_state; ///< stored at expected_version + 1
  std::optional<std::string> tag;       ///< with new_state: the entity's new tag (listings)
  int64_t consumed_seq = 0;             ///< the handled event (deleted); 0: none
  /// A failed event: attempts + 1 and due again at retry_at_us. 0: none.
  int64_t retry_seq = 0;
  int64_t retry_at_us = 0;
  /// A given-up event: moved to entity_dead_letters with its reason. 0: none.
  int64_t dead_seq = 0;
  std::string dead_reason;
  int32_t dead_attempts = 0;
  std::vector<entity_event_out> events;                     ///< to itself and to others
  std::vector<std::pair<std::string, std::string>> outputs; ///< (lane, serialized Any)
  std::vector<std::string> cancelled_timers;                ///< named timers deleted
  /// An ask's answer; with a request id, kept with it, and the whole write is a `duplicate`
  /// (nothing of it committed) when an answer is kept for that id already.
  std::optional<entity_answer> answer;
};

/// Commits `writes` (in order; any mix of shards) in one transaction, each fenced by its own
/// shard's lease (owned by `owner`, the writing node, at the write's epoch; as
/// commit_write_sets); says what happened to each. An error: nothing committed.
caf::expected<std::vector<write_outcome>>
commit_entity_writes(pg_pool& pool, const std::vector<fenced_write<entity_write>>& writes,
                     const std::string& owner);

/// A pending event as loaded.
struct stored_event {
  int64_t seq = 0;
  int64_t due_at_us = 0;
  int32_t attempts = 0;
  std::string payload; ///< serialized google.protobuf.Any
  std::string timer;   ///< the name of a named timer; empty: an unnamed event
};

/// A named timer pending.
struct entity_timer {
  std::string name;
  int64_t due_at_us = 0;
};

/// What an entity actor loads: its state, and its events due now.
struct entity_row {
  bool found = false; ///< a row exists (it was sent an event once)
  int64_t version = 0;
  std::optional<std::string> state; ///< serialized Any; none before the first handled event
  std::string lane;
  std::vector<stored_event> due;    ///< due at or before `now_us`, by (due, seq), at most `max`
  int64_t next_due_us = 0;          ///< the earliest pending event (0: none)
  int64_t pending = 0;              ///< events pending in all
  std::vector<entity_timer> timers; ///< named timers pending, by name
};

/// Loads many entities at once; rows in the order of `keys` (`kind/id`).
caf::expected<std::vector<entity_row>>
load_entities(pg_pool& pool, const std::vector<std::string>& keys, int64_t now_us, size_t max_due);

/// The kit's queue of one shard: entities with a pending event due at or before `until_us`,
/// as queue entries (lane `kind/lane`, entity `kind/id`), in (due, entity) order, at most
/// `limit`, after the cursor entry `after` when given.
caf::expected<queue_entries> due_entities(pg_pool& pool, uint32_t shard, int64_t until_us,
                                          size_t limit, const queue_entry* after = nullptr);

/// An output as pulled.
struct entity_output {
  int64_t seq = 0;
  std::string entity_id;
  std::string payload; ///< serialized Any
};

/// Outputs of a kind's lane after `after_seq`, in seq order, at most `limit`.
caf::expected<std::vector<entity_output>> read_entity_outputs(pg_pool& pool,
                                                              const std::string& kind,
                                                              const std::string& lane,
                                                              int64_t after_seq, size_t limit);

/// The answer kept for an ask's request id; none when that ask was not answered (yet).
caf::expected<std::optional<entity_answer>> find_entity_answer(pg_pool& pool,
                                                               const std::string& kind,
                                                               const std::string& id,
                                                               const std::string& request_id);

/// An event kept for an entity of another shard group (entity_event_out::forward).
struct entity_forward {
  /// The relay's request id (`gost.forward/<uuid>`): drawn at the insert, kept when the row's
  /// group moves, so the target stores the event once however often it is relayed.
  std::string request_id;
  uint32_t shard = 0; ///< the sender's shard
  std::string kind;   ///< the target
  std::string entity_id;
  int64_t due_at_us = 0;
  std::string payload;  ///< serialized Any
  int32_t attempts = 0; ///< relays tried and failed before
};

/// The events kept for other groups' entities sent from `shards`: the first of each target (by
/// id: a sender's order), when it is due for a relay (a failed one waits: 1 s, doubling, at
/// most 5 min; the target's later ones wait behind it), oldest first, at most `limit`.
caf::expected<std::vector<entity_forward>>
read_entity_forwards(pg_pool& pool, const std::vector<uint32_t>& shards, size_t limit);

/// After a relay round: the rows of `delivered` (request ids) go; those of `failed` (request
/// id, error) count an
/// attempt, keep the error (for an operator: the table and the relay's log line show it) and
/// wait before the next; those of `given_up` (request id, reason) move to `entity_dead_letters`
/// (the target's kind and id, the sender's shard). One transaction.
caf::error
settle_entity_forwards(pg_pool& pool, const std::vector<std::string>& delivered,
                       const std::vector<std::pair<std::string, std::string>>& failed,
                       const std::vector<std::pair<std::string, std::string>>& given_up = {});

/// Forgets accepted request ids older than `max_age_s` seconds; how many went.
caf::expected<int64_t> reap_entity_requests(pg_pool& pool, int64_t max_age_s);

} // namespace gost::persistence
