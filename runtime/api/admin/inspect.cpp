// gost.v1.AdminService: one offer (InspectOffer) or durable entity (InspectEntity), with what its
// actor on the owner node tells of itself.
#include "api/admin_service.hpp"

#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/entity_service.hpp" // check_entity
#include "api/entity_view.hpp"
#include "api/status.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/offers/content_rules.hpp" // max_id_len
#include "gost/offers/protocol.hpp"
#include "gost/offers/stage_runner.hpp"
#include "rpc/trace_view.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

/// What the owner told of an actor (kit::activity) into an inspection's response (offer's or
/// entity's: the same fields). `node_id`: this node, when the local shard answered.
template <class Response>
void put_activity(const kit::activity& a, const std::string& id, uint32_t shard,
                  const std::string& node_id, Response& resp) {
  resp.set_resident(a.resident);
  resp.set_mailbox(a.mailbox);
  auto node = a.node.empty() ? node_id : a.node;
  for (auto& e : a.recent)
    to_proto(e, id, shard, node, *resp.add_recent());
  if (a.in_event)
    to_proto(a.current, id, shard, node, *resp.mutable_current());
  resp.set_waiting(kit::to_string(a.waiting));
  resp.set_waiting_ms(a.waiting_us / 1000);
  resp.set_epoch(a.epoch);
  resp.set_write_lag_ms(a.write_lag_us / 1000);
  resp.set_owner(node);
}

} // namespace

grpc::ServerUnaryReactor* admin_service::InspectOffer(grpc::CallbackServerContext* ctx,
                                                      const v1::InspectOfferRequest* req,
                                                      v1::InspectOfferResponse* resp) {
  unary_call call{ctx};
  inspect_offer(*req, resp, admin::finish(call));
  return call.reactor();
}

void admin_service::inspect_offer(const v1::InspectOfferRequest& req,
                                  v1::InspectOfferResponse* resp, done_fn done) {
  if (req.offer_id().empty() || req.offer_id().size() > max_id_len) {
    done(invalid("offer_id must be 1.." + std::to_string(max_id_len) + " bytes"));
    return;
  }
  auto id = req.offer_id();
  caf::timespan timeout{timeout_};
  auto& r = router_;
  auto store = any_offer_store(r);
  auto node_id = cluster_.node_id;
  // Residency is the owner's to tell: asked of the local shard, or of the owner node through
  // its link; unknown (mailbox -1, resident false) while the shard has no owner.
  auto owner = r.route(kinds::offers, id);
  auto shard = r.shard_of(id);
  resp->set_shard(shard);
  hub_.run([=](caf::event_based_actor* self) {
    self->request(store, timeout, load_atom_v, id)
      .then(
        [=](offer_snapshot& snap) {
          resp->set_found(snap.found);
          if (snap.found)
            *resp->mutable_offer() = std::move(snap.offer);
          for (auto& st : snap.states) {
            (*resp->mutable_states())[st.stage_id].ParseFromString(st.bytes);
            (*resp->mutable_state_versions())[st.stage_id] = st.version;
          }
          auto now = to_us(stage_clock::now());
          for (auto& e : snap.queued) {
            auto* q = resp->add_queue();
            q->set_stage_id(e.lane);
            *q->mutable_due_at() = TimeUtil::MicrosecondsToTimestamp(e.due_at_us);
            q->set_background(e.prio == persistence::priority::background);
            q->set_timer(e.due_at_us > now);
          }
          resp->set_mailbox(-1);
          auto answer = [=](kit::activity& a) {
            put_activity(a, id, shard, node_id, *resp);
            done(grpc::Status::OK);
          };
          if (owner) {
            // Not fatal when the owner cannot say (moving, unreachable): the stored part stands.
            self->request(owner, timeout, resident_atom_v, id).then(answer, [=](caf::error&) {
              done(grpc::Status::OK);
            });
          } else {
            done(grpc::Status::OK); // the shard is moving: no owner to ask
          }
        },
        [=](caf::error& err) { done(to_status(err)); });
  });
}

grpc::ServerUnaryReactor* admin_service::InspectEntity(grpc::CallbackServerContext* ctx,
                                                       const v1::InspectEntityRequest* req,
                                                       v1::InspectEntityResponse* resp) {
  unary_call call{ctx};
  inspect_entity(*req, resp, admin::finish(call), call_budget(ctx->deadline(), timeout_));
  return call.reactor();
}

void admin_service::inspect_entity(const v1::InspectEntityRequest& req,
                                   v1::InspectEntityResponse* resp, done_fn done,
                                   std::chrono::milliseconds budget) {
  if (!entities_ || entities_->empty()) {
    done({grpc::StatusCode::NOT_FOUND,
          "kind: this node hosts no actor types (InspectOffer inspects offers)"});
    return;
  }
  std::string key;
  grpc::StatusCode code;
  if (auto problem = check_entity(*entities_, req.kind(), req.id(), key, code); !problem.empty()) {
    done({code, problem});
    return;
  }
  auto shard = router_.shard_of(key);
  resp->set_entity_key(key);
  resp->set_shard(shard);
  resp->set_mailbox(-1);
  auto deadline = clock_type::now() + budget;
  caf::timespan timeout{timeout_};
  auto node_id = cluster_.node_id;
  auto& r = router_;
  hub_.run([=, &r](caf::event_based_actor* self) {
    // The stored view through the owner (which loads the entity into an actor there).
    auto view = [=, &r] {
      ask_entity_owner(
        self, r, deadline,
        [=](entity_view& v) {
          put_view(v, *resp);
          done(grpc::Status::OK);
        },
        [=](const caf::error& err) { done(to_status(err)); }, view_atom_v, key);
    };
    // Residency first: the view activates the entity on its owner.
    auto owner = r.route(kinds::entities, key);
    if (!owner) {
      view(); // moving: the view's routing waits for an owner
      return;
    }
    self->request(owner, timeout, resident_atom_v, key)
      .then(
        [=](kit::activity& a) {
          put_activity(a, key, shard, node_id, *resp);
          view();
        },
        [=](caf::error&) { view(); }); // not fatal: the stored part stands
  });
}

} // namespace gost::runtime
