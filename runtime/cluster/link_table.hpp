#pragma once
// The one table that maps every operation a node forwards to another — the offer operations
// with the kit's inspection and passivation (`offer_owner_ops`, gost/offers/protocol.hpp) and
// the durable entities' (`entity_ops`, gost/entities/protocol.hpp) — to the node link's
// protobuf (gost.internal.v1.ForwardRequest / ForwardResponse) and back.
// The peer link encodes with `encode`, the serving node decodes with `decode` and calls its
// local shard with the very same typed arguments; replies travel through `encode_reply` and
// `deliver`. A new operation adds one line to each (the compiler finds a missing one: the
// peer link's behavior calls `encode` for every signature of the interface).

#include <string>

#include <caf/typed_response_promise.hpp>

#include "gost/entities/protocol.hpp"
#include "gost/internal/v1/node_service.pb.h"
#include "gost/offers/protocol.hpp"
#include "rpc/trace_view.hpp"

namespace gost::runtime {

/// What a link to another node forwards: every operation of the kinds this table carries —
/// offers (with inspection) and durable entities (node_link.hpp). A kind not in it is served
/// only by the node owning its shard (cluster/kinds.hpp).
using peer_link_ops = offer_owner_ops::extend_with<entity_ops>;

} // namespace gost::runtime

namespace gost::runtime::link_table {

using internal::v1::ForwardRequest;
using internal::v1::ForwardResponse;

// -- requests ---------------------------------------------------------------------------------

inline void set_origin(internal::v1::Origin& o, const request_id& rid) {
  o.set_source(rid.source);
  o.set_by(rid.by);
}

/// The request id of a forwarded write, with who made it.
template <class Op>
request_id request_id_of(const Op& op) {
  return request_id{op.request_id(), op.origin().source(), op.origin().by()};
}

inline void encode(ForwardRequest& r, get_atom, const std::string& id) {
  r.set_get(id);
}

inline void encode(ForwardRequest& r, create_atom, const std::string& id, const offer_msg& m,
                   const request_id& rid) {
  *r.mutable_create()->mutable_offer() = m.value;
  r.mutable_create()->mutable_offer()->set_id(id);
  r.mutable_create()->set_request_id(rid.value);
  set_origin(*r.mutable_create()->mutable_origin(), rid);
}

inline void encode(ForwardRequest& r, update_atom, const std::string& id, const offer_msg& m,
                   int64_t expected, const std::string& mask, const request_id& rid) {
  auto* u = r.mutable_update();
  *u->mutable_offer() = m.value;
  u->mutable_offer()->set_id(id);
  u->set_expected_version(expected);
  u->set_mask(mask);
  u->set_request_id(rid.value);
  set_origin(*u->mutable_origin(), rid);
}

inline void encode(ForwardRequest& r, delete_atom, const std::string& id, int64_t expected,
                   const request_id& rid) {
  r.mutable_delete_()->set_offer_id(id);
  r.mutable_delete_()->set_expected_version(expected);
  r.mutable_delete_()->set_request_id(rid.value);
  set_origin(*r.mutable_delete_()->mutable_origin(), rid);
}

inline void encode(ForwardRequest& r, get_atom, state_atom, const std::string& id,
                   const std::string& stage) {
  r.mutable_read_state()->set_offer_id(id);
  r.mutable_read_state()->set_stage_id(stage);
}

inline void encode(ForwardRequest& r, update_atom, state_atom, const std::string& id,
                   const std::string& stage, const std::string& state, int64_t expected,
                   const request_id& rid) {
  auto* u = r.mutable_update_state();
  u->set_offer_id(id);
  u->set_stage_id(stage);
  u->set_state(state);
  u->set_expected_version(expected);
  u->set_request_id(rid.value);
  set_origin(*u->mutable_origin(), rid);
}

inline void encode(ForwardRequest& r, resident_atom, const std::string& id) {
  r.set_residency(id);
}

inline void encode(ForwardRequest& r, send_atom, const std::string& key, const any_msg& event,
                   const std::string& request_id, int64_t delay_ms) {
  auto* e = r.mutable_entity_send();
  e->set_key(key);
  *e->mutable_event() = event.value;
  e->set_request_id(request_id);
  e->set_delay_ms(delay_ms);
}

inline void encode(ForwardRequest& r, view_atom, const std::string& key) {
  r.set_entity_get(key);
}

inline void encode(ForwardRequest& r, ask_atom, const std::string& key, const any_msg& event,
                   const ask_id& id) {
  auto* e = r.mutable_entity_ask();
  e->set_key(key);
  *e->mutable_event() = event.value;
  e->set_request_id(id.value);
}

inline void encode(ForwardRequest& r, requeue_atom, const std::string& id, const std::string& stage,
                   const request_id& rid) {
  auto* q = r.mutable_requeue();
  q->set_offer_id(id);
  q->set_stage_id(stage);
  q->set_request_id(rid.value);
  set_origin(*q->mutable_origin(), rid);
}

inline void encode(ForwardRequest& r, passivate_atom, const std::string& id) {
  r.set_passivate(id);
}

/// Calls `f` with the operation's typed arguments; false when the request carries none this
/// node knows.
template <class F>
bool decode(const ForwardRequest& r, F&& f) {
  switch (r.op_case()) {
    case ForwardRequest::kCreate:
      f(create_atom_v, r.create().offer().id(), offer_msg{r.create().offer()},
        request_id_of(r.create()));
      return true;
    case ForwardRequest::kGet: f(get_atom_v, r.get()); return true;
    case ForwardRequest::kUpdate: {
      auto& u = r.update();
      f(update_atom_v, u.offer().id(), offer_msg{u.offer()}, u.expected_version(), u.mask(),
        request_id_of(u));
      return true;
    }
    case ForwardRequest::kDelete:
      f(delete_atom_v, r.delete_().offer_id(), r.delete_().expected_version(),
        request_id_of(r.delete_()));
      return true;
    case ForwardRequest::kReadState:
      f(get_atom_v, state_atom_v, r.read_state().offer_id(), r.read_state().stage_id());
      return true;
    case ForwardRequest::kUpdateState: {
      auto& u = r.update_state();
      f(update_atom_v, state_atom_v, u.offer_id(), u.stage_id(), u.state(), u.expected_version(),
        request_id_of(u));
      return true;
    }
    case ForwardRequest::kResidency: f(resident_atom_v, r.residency()); return true;
    case ForwardRequest::kEntitySend: {
      auto& e = r.entity_send();
      f(send_atom_v, e.key(), any_msg{e.event()}, e.request_id(), e.delay_ms());
      return true;
    }
    case ForwardRequest::kEntityGet: f(view_atom_v, r.entity_get()); return true;
    case ForwardRequest::kEntityAsk: {
      auto& e = r.entity_ask();
      f(ask_atom_v, e.key(), any_msg{e.event()}, ask_id{e.request_id()});
      return true;
    }
    case ForwardRequest::kRequeue: {
      auto& q = r.requeue();
      f(requeue_atom_v, q.offer_id(), q.stage_id(), request_id_of(q));
      return true;
    }
    case ForwardRequest::kPassivate: f(passivate_atom_v, r.passivate()); return true;
    default: return false;
  }
}

// -- replies ----------------------------------------------------------------------------------

inline void encode_reply(ForwardResponse& r, offer_msg& m) {
  *r.mutable_offer() = std::move(m.value);
}
inline void encode_reply(ForwardResponse& r, int64_t version) {
  r.set_version(version);
}
inline void encode_reply(ForwardResponse& r, state_read_msg& m) {
  *r.mutable_state() = std::move(m.value);
}
inline void encode_reply(ForwardResponse& r, state_update_msg& m) {
  *r.mutable_state_update() = std::move(m.value);
}
inline void encode_reply(ForwardResponse& r, kit::activity& a) {
  auto* out = r.mutable_residency();
  out->set_resident(a.resident);
  out->set_mailbox(a.mailbox);
  for (auto& e : a.recent)
    to_proto(e, {}, 0, {}, *out->add_recent());
  if (a.in_event)
    to_proto(a.current, {}, 0, {}, *out->mutable_current());
  out->set_waiting(kit::to_string(a.waiting));
  out->set_waiting_us(a.waiting_us);
  out->set_epoch(a.epoch);
  out->set_write_lag_us(a.write_lag_us);
  out->set_node(a.node);
}

inline void encode_reply(ForwardResponse& r, ok_atom) {
  r.set_ok(true);
}
inline void encode_reply(ForwardResponse& r, bool was_resident) {
  r.set_was_resident(was_resident);
}
inline void encode_reply(ForwardResponse& r, entity_view& v) {
  auto* e = r.mutable_entity();
  e->set_exists(v.exists);
  e->set_version(v.version);
  if (v.state) {
    *e->mutable_state() = std::move(*v.state);
  }
  e->set_lane(v.lane);
  e->set_pending(v.pending);
  e->set_next_due_us(v.next_due_us);
  for (auto& t : v.timers) {
    auto* out = e->add_timers();
    out->set_name(t.name);
    out->set_due_us(t.due_at_us);
  }
}
inline void encode_reply(ForwardResponse& r, entity_reply& a) {
  auto* e = r.mutable_entity_reply();
  if (a.reply)
    *e->mutable_reply() = std::move(*a.reply);
  e->set_version(a.version);
}

/// Delivers the reply in `r` to `rp`; false when `r` holds no reply of that type.
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<offer_msg>& rp) {
  if (!r.has_offer())
    return false;
  rp.deliver(offer_msg{std::move(*r.mutable_offer())});
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<int64_t>& rp) {
  if (r.result_case() != ForwardResponse::kVersion)
    return false;
  rp.deliver(r.version());
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<state_read_msg>& rp) {
  if (!r.has_state())
    return false;
  rp.deliver(state_read_msg{std::move(*r.mutable_state())});
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<state_update_msg>& rp) {
  if (!r.has_state_update())
    return false;
  rp.deliver(state_update_msg{std::move(*r.mutable_state_update())});
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<kit::activity>& rp) {
  if (!r.has_residency())
    return false;
  auto& in = r.residency();
  kit::activity a;
  a.resident = in.resident();
  a.mailbox = in.mailbox();
  for (auto& e : in.recent())
    a.recent.push_back(from_proto(e));
  a.in_event = in.has_current();
  if (a.in_event)
    a.current = from_proto(in.current());
  a.waiting = kit::waiting_of(in.waiting());
  a.waiting_us = in.waiting_us();
  a.epoch = in.epoch();
  a.write_lag_us = in.write_lag_us();
  a.node = in.node();
  rp.deliver(std::move(a));
  return true;
}

inline bool deliver(ForwardResponse& r, caf::typed_response_promise<ok_atom>& rp) {
  if (r.result_case() != ForwardResponse::kOk)
    return false;
  rp.deliver(ok_atom_v);
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<bool>& rp) {
  if (r.result_case() != ForwardResponse::kWasResident)
    return false;
  rp.deliver(r.was_resident());
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<entity_view>& rp) {
  if (!r.has_entity())
    return false;
  auto& e = *r.mutable_entity();
  entity_view v;
  v.exists = e.exists();
  v.version = e.version();
  if (e.has_state())
    v.state = std::move(*e.mutable_state());
  v.lane = e.lane();
  v.pending = e.pending();
  v.next_due_us = e.next_due_us();
  for (auto& t : e.timers())
    v.timers.push_back({t.name(), t.due_us()});
  rp.deliver(std::move(v));
  return true;
}
inline bool deliver(ForwardResponse& r, caf::typed_response_promise<entity_reply>& rp) {
  if (!r.has_entity_reply())
    return false;
  auto& e = *r.mutable_entity_reply();
  entity_reply a;
  if (e.has_reply())
    a.reply = std::move(*e.mutable_reply());
  a.version = e.version();
  rp.deliver(std::move(a));
  return true;
}

} // namespace gost::runtime::link_table
