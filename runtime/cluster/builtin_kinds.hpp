#pragma once
// gost's two built-in kinds as the runtime routes to them: offers (slot 0) and durable
// entities (slot 1), registered first and in this order by the node's start
// (node/kinds.cpp), both forwarded between nodes (cluster/link_table.hpp). Their callers (the
// API services, Kafka's feed exchange, the node's parts) use these shorthands; the router,
// ask_owner, the node link and the cluster manager know no kind (cluster/kinds.hpp).

#include <string>

#include "cluster/ask_owner.hpp"
#include "cluster/kinds.hpp"
#include "cluster/router.hpp"
#include "gost/entities/protocol.hpp"
#include "gost/offers/spawn.hpp"

namespace gost {

/// An offer write forwarded to another node gets a request id (ask_owner.hpp).
inline void give_request_id(request_id& rid) {
  if (rid.empty())
    rid.value = "fwd-" + make_offer_id();
}

/// So does an entity's ask.
inline void give_request_id(ask_id& id) {
  if (id.empty())
    id.value = "fwd-" + make_offer_id();
}

} // namespace gost

namespace gost::runtime::kinds {

/// Offers: their shard supervisors (`shard_actor`), routed as `offer_owner_ops`.
constexpr kind_slot<offer_owner_ops, shard_actor> offers{0, true};
constexpr const char* offers_name = "offers"; ///< its name in the kind table and wake notices
/// Durable entities of every registered type: one supervisor per shard.
constexpr kind_slot<entity_owner_ops, entity_shard_actor> entities{1, true};
constexpr const char* entities_name = "entities";

/// Whether `id` names an offer (offer ids never hold a '/') or an entity (`kind/id`).
inline bool is_entity_key(const std::string& id) {
  return id.find('/') != std::string::npos;
}

} // namespace gost::runtime::kinds

namespace gost::runtime {

/// ask_kind for an offer operation: to the owner of the offer's shard.
template <class Ok, class... Ts>
void ask_owner(caf::event_based_actor* self, router& r, clock_type::time_point deadline, Ok ok,
               fail_fn fail, Ts... xs) {
  ask_kind(self, r, kinds::offers, deadline, std::move(ok), std::move(fail), std::move(xs)...);
}

/// ask_kind for a durable entity operation: to the owner of the entity's shard.
template <class Ok, class... Ts>
void ask_entity_owner(caf::event_based_actor* self, router& r, clock_type::time_point deadline,
                      Ok ok, fail_fn fail, Ts... xs) {
  ask_kind(self, r, kinds::entities, deadline, std::move(ok), std::move(fail), std::move(xs)...);
}

/// An offer store for lookups not tied to one offer (round robin over the node's stores).
inline store_actor any_offer_store(router& r) {
  return r.any_store<store_actor>();
}

/// An offer store of the seller's home group (ADR 0023): where its offers and their keys are.
inline store_actor seller_offer_store(router& r, const std::string& seller_id) {
  return r.store_of_shard<store_actor>(r.shard_of(seller_id));
}

} // namespace gost::runtime
