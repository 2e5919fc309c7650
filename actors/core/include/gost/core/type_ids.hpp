#pragma once
// Where each domain's CAF type-ID block starts: a fixed start per domain, 100 IDs apart, so no
// block depends on another to find its first ID (a domain's protocol header includes this
// one, not the protocol of the domain "before" it). Each block header checks that its block
// ends before the next start:
//
//   CAF_BEGIN_TYPE_ID_BLOCK(gost_tasks, gost::type_ids::tasks)
//     ...
//   CAF_END_TYPE_ID_BLOCK(gost_tasks)
//   static_assert(caf::id_block::gost_tasks::end <= gost::type_ids::scheduled, "...");
//
// In CAF 0.17.6 a block only names types for `add_message_types` (a registration by RTTI);
// atoms (`CAF_ADD_ATOM`) take no ID, whatever block they name. Two blocks that overlapped would
// define `caf::type_by_id<N>` twice in a file that includes both: the fixed starts and the
// asserts make that impossible without anyone including everyone.
//
// A domain without message types of its own to name (scheduled actions, images, feeds and the
// runtime send atoms, built-in types, actor handles and process-local structs allowed with
// CAF_ALLOW_UNSAFE_MESSAGE_TYPE) has its start reserved and no block; it opens one there when
// it needs one. An application's own block starts at `applications`.

#include <caf/type_id.hpp>

namespace gost::type_ids {

/// IDs per domain: a block holds at most this many types.
constexpr caf::type_id_t block_size = 100;

/// The first ID of the `k`-th domain.
constexpr caf::type_id_t start(caf::type_id_t k) {
  return static_cast<caf::type_id_t>(caf::first_custom_type_id + block_size * k);
}

constexpr caf::type_id_t core = start(0);      ///< gost_core (gost/core/protocol.hpp)
constexpr caf::type_id_t entities = start(1);  ///< gost_entities (gost/entities/protocol.hpp)
constexpr caf::type_id_t offers = start(2);    ///< gost_offers (gost/offers/protocol.hpp)
constexpr caf::type_id_t tasks = start(3);     ///< gost_tasks (gost/tasks/protocol.hpp)
constexpr caf::type_id_t scheduled = start(4); ///< reserved: gost/scheduled/ has no block
constexpr caf::type_id_t images = start(5);    ///< reserved: gost/images/ has no block
constexpr caf::type_id_t feeds = start(6);     ///< reserved: gost/feeds/ has no block
constexpr caf::type_id_t runtime = start(7);   ///< reserved: runtime/ has atoms only
/// An application's own block (and later ones, 100 apart).
constexpr caf::type_id_t applications = start(8);

} // namespace gost::type_ids
