#pragma once
// The stage algorithm of seed 000 as plain functions, without actors or storage: what a due
// stage or an external change turns into (a write-set), given the offer, the states and the
// queues the offer is in. The offer actor calls these and hands the write-set to the writer.

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "gost/core/flat_map.hpp"
#include "gost/offers/stage.hpp"
#include "gost/persistence/offers/write_behind.hpp"

namespace gost {

/// A stage's state as an offer actor holds it.
struct held_state {
  google::protobuf::Any value;
  int64_t version = 0; ///< stage_states.state_version: every committed write adds one
};

/// What an offer actor knows of its offer besides the offer itself (flat containers: an
/// offer has a handful of stages, and every resident actor holds one of these).
struct offer_context {
  flat_map<std::string, held_state> states; ///< by stage id
  /// Stages whose queue holds the offer due now or earlier (not just a future timer).
  flat_set<std::string> queued_now;
  /// Re-triggers per stage in the current chain (reset when the offer's queues drain).
  flat_map<std::string, int> chain;
};

struct runner_limits {
  /// A stage re-triggered more often than this in one chain is cut and dead-lettered.
  int max_chain = 10;
};

/// The result of one event: the write-set, and the offer/states it leaves when committed.
struct runner_output {
  persistence::write_set ws;
  std::optional<v1::Offer> offer; ///< the offer after the event; empty when unchanged
  bool offer_changed = false;
  bool state_changed = false;
  int storms_cut = 0;
  /// Nothing to write at all (seed: "if the offer did not change, do nothing").
  bool empty() const {
    return !ws.new_body && ws.states.empty() && ws.dequeue.empty() && ws.enqueue.empty()
           && ws.dead_letters.empty();
  }
};

/// Top-level Offer fields that differ between two offers (version and timestamps excluded).
std::set<std::string> changed_fields(const v1::Offer& before, const v1::Offer& after);

/// A due stage `stage_id` ran (seed "Работа стейджа" steps 5-10): applies `result`, dequeues
/// the consumed entry, sets the stage's timer, and asks every other stage about the changed
/// offer. `now_us`: the current time in microseconds since the epoch.
runner_output after_process(const stage_registry& reg, const std::string& stage_id,
                            const v1::Offer& offer, const offer_context& ctx,
                            const stage_result& result, int64_t now_us, runner_limits limits);

/// An external change (create or update through the API): asks every stage not queued now
/// (honouring field interests; `before` is null for a new offer) and enqueues those that want
/// it. A stage whose should_process throws is enqueued anyway.
std::vector<persistence::queue_entry> ask_stages(const stage_registry& reg, const v1::Offer* before,
                                                 const v1::Offer& after, const offer_context& ctx,
                                                 const std::string& except_stage, int64_t now_us,
                                                 persistence::priority prio);

/// A stage's state was changed from outside (StateService): asks that stage alone, unless the
/// offer is already in its queue. Empty when it does not want to run.
std::vector<persistence::queue_entry> ask_stage(const stage_registry& reg,
                                                const std::string& stage_id, const v1::Offer& offer,
                                                const offer_context& ctx, int64_t now_us);

/// The outbox event of a committed change: a serialized gost.v1.OfferSaved built from the
/// offer's serialized `body` (not serialized again), its stages' states (`ctx`'s, those in
/// `new_states` — (stage, serialized Any) — replacing theirs), `deleted`, `changed_by`,
/// `previous_status` (the offer's status before the change; UNSPECIFIED for a create) and `by`
/// (who, when known).
std::string saved_event(const std::string& body, const offer_context& ctx,
                        const std::vector<std::pair<std::string, std::string>>& new_states,
                        bool deleted, const std::string& changed_by,
                        v1::OfferStatus previous_status, const std::string& by = {});

inline int64_t to_us(stage_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

} // namespace gost
