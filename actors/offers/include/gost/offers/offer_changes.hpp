#pragma once
// What an API change of an offer writes (plain functions, no actors, unit-tested): given the
// offer as stored (`offer_entity`), its stages' states and queues (`offer_context`) and the
// stages, a create / update / delete / state update becomes one write-set — the new body
// (serialized once, and reused for the outbox event), the entries of the stages that want the
// change, the outbox event — or an error for the client. The offer actor writes the set and
// answers after the commit.

#include <chrono>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "gost/offers/offer_entity.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/offers/write_behind.hpp"

namespace gost {

/// A change ready to be written.
struct prepared_change {
  persistence::write_set ws;
  /// The offer after the change (create, update); empty when unchanged or deleted.
  std::optional<v1::Offer> next;
};

struct change_input {
  const offer_entity& entity;
  const offer_context& ctx;
  const stage_registry& stages;
  std::chrono::system_clock::time_point now;
  const offer_limits& limits; ///< what a client's content may hold (content_rules.hpp)
  /// Who made the change, for its outbox event (OfferSaved.changed_by and by): empty source is
  /// "api"; a state update is always "state-api:<stage>".
  std::string source = {};
  std::string by = {};
};

/// A new offer from the client's content (its id is the entity's; content rules checked).
caf::expected<prepared_change> prepare_create(const change_input& in, v1::Offer content);

/// New content for the stored offer; `expected` is the version the client saw or any_version;
/// a non-empty `mask` takes only those top-level fields. Content rules are checked on the
/// merged offer.
caf::expected<prepared_change> prepare_update(const change_input& in, v1::Offer content,
                                              int64_t expected, const std::string& mask);

/// Deletes the stored offer (checked against `expected` unless any_version).
caf::expected<prepared_change> prepare_delete(const change_input& in, int64_t expected);

/// Compare-and-set of a stage's state from outside (StateService): writes `state` (a
/// serialized Any) when the state's version is `expected`; otherwise writes nothing (op none,
/// no states: the caller answers updated = false).
caf::expected<prepared_change> prepare_state_update(const change_input& in,
                                                    const std::string& stage_id,
                                                    const std::string& state, int64_t expected);

/// An operator's re-queue (gostctl requeue): the offer goes into the queue of `stage_id`, due
/// now (an entry due earlier stays so), and nothing else changes (op none: no version check,
/// no outbox event). Not found when the offer does not exist; invalid when the stage is not
/// registered here.
caf::expected<prepared_change> prepare_requeue(const change_input& in, const std::string& stage_id);

/// Whether a prepared write-set writes nothing at all.
bool writes_nothing(const persistence::write_set& ws);

} // namespace gost
