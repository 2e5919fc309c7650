#include "gost/offers/offer_changes.hpp"

#include "gost/core/errc.hpp"
#include "gost/offers/protocol.hpp"

namespace gost {

namespace {

int64_t now_us(std::chrono::system_clock::time_point t) {
  return to_us(t);
}

std::string source_of(const change_input& in) {
  return in.source.empty() ? std::string{"api"} : in.source;
}

} // namespace

bool writes_nothing(const persistence::write_set& ws) {
  return ws.op == persistence::offer_op::none && !ws.new_body && ws.states.empty()
         && ws.dequeue.empty() && ws.enqueue.empty() && !ws.outbox && ws.dead_letters.empty();
}

caf::expected<prepared_change> prepare_create(const change_input& in, v1::Offer content) {
  auto o = in.entity.prepare_create(std::move(content), in.now, in.limits);
  if (!o)
    return std::move(o.error());
  prepared_change out;
  auto& ws = out.ws;
  ws.offer_id = in.entity.id();
  ws.op = persistence::offer_op::insert;
  ws.key = {o->seller_id(), o->namespace_(), o->external_id()};
  ws.new_body = o->SerializeAsString(); // once: the body and the outbox event share it
  ws.enqueue =
    ask_stages(in.stages, nullptr, *o, in.ctx, {}, now_us(in.now), persistence::priority::normal);
  ws.outbox = saved_event(*ws.new_body, in.ctx, {}, false, source_of(in),
                          v1::OFFER_STATUS_UNSPECIFIED, in.by);
  out.next = std::move(*o);
  return out;
}

caf::expected<prepared_change> prepare_update(const change_input& in, v1::Offer content,
                                              int64_t expected, const std::string& mask) {
  content.set_id(in.entity.id());
  // Re-applied on every redo: a masked update merges into the offer as it is then.
  auto o = in.entity.prepare_update(std::move(content), expected, in.now, in.limits, mask);
  if (!o)
    return std::move(o.error());
  const auto& before = *in.entity.current();
  prepared_change out;
  auto& ws = out.ws;
  ws.offer_id = in.entity.id();
  ws.expected_version = before.version();
  ws.new_body = o->SerializeAsString();
  // A new seller, namespace or external id: the row's key columns (its unique index, the
  // lookups by key and by seller) follow the body.
  if (o->seller_id() != before.seller_id() || o->namespace_() != before.namespace_()
      || o->external_id() != before.external_id()) {
    ws.rekey = true;
    ws.key = {o->seller_id(), o->namespace_(), o->external_id()};
    ws.previous_seller = before.seller_id();
  }
  ws.enqueue =
    ask_stages(in.stages, &before, *o, in.ctx, {}, now_us(in.now), persistence::priority::normal);
  ws.outbox = saved_event(*ws.new_body, in.ctx, {}, false, source_of(in), before.status(), in.by);
  out.next = std::move(*o);
  return out;
}

caf::expected<prepared_change> prepare_delete(const change_input& in, int64_t expected) {
  auto ver = in.entity.prepare_delete(expected);
  if (!ver)
    return std::move(ver.error());
  prepared_change out;
  auto& ws = out.ws;
  ws.offer_id = in.entity.id();
  ws.op = persistence::offer_op::remove;
  ws.expected_version = *ver;
  auto gone = *in.entity.current();
  gone.set_version(*ver + 1);
  ws.outbox =
    saved_event(gone.SerializeAsString(), in.ctx, {}, true, source_of(in), gone.status(), in.by);
  return out;
}

caf::expected<prepared_change> prepare_state_update(const change_input& in,
                                                    const std::string& stage_id,
                                                    const std::string& state, int64_t expected) {
  const auto* cur = in.entity.current();
  if (cur == nullptr)
    return make_error(errc::not_found, "offer " + in.entity.id() + " does not exist");
  if (in.stages.find(stage_id) == nullptr)
    return make_error(errc::invalid_argument,
                      "stage_id: " + stage_id
                        + " is not a stage of this node (gostctl stages lists them)");
  prepared_change out;
  auto& ws = out.ws;
  ws.offer_id = in.entity.id();
  ws.op = persistence::offer_op::none; // stays so when the version is stale: no write
  auto i = in.ctx.states.find(stage_id);
  int64_t current = i == in.ctx.states.end() ? 0 : i->second.version;
  if (current != expected)
    return out;
  // Checked against the offer's version too: the redo after a lost check re-reads the
  // state's version.
  ws.op = persistence::offer_op::change;
  ws.expected_version = cur->version();
  std::vector<std::pair<std::string, std::string>> written{{stage_id, state}};
  ws.outbox = saved_event(cur->SerializeAsString(), in.ctx, written, false, "state-api:" + stage_id,
                          cur->status(), in.by);
  // The stage sees its new state: ask it (alone) whether it wants to run now.
  offer_context after = in.ctx;
  after.states[stage_id].value.ParseFromString(state);
  ws.enqueue = ask_stage(in.stages, stage_id, *cur, after, now_us(in.now));
  ws.states = std::move(written);
  return out;
}

caf::expected<prepared_change> prepare_requeue(const change_input& in,
                                               const std::string& stage_id) {
  if (in.entity.current() == nullptr)
    return make_error(errc::not_found, "offer " + in.entity.id() + " does not exist");
  if (in.stages.find(stage_id) == nullptr)
    return make_error(errc::invalid_argument,
                      "stage_id `" + stage_id
                        + "` is not a stage of this node (gostctl stages lists them)");
  prepared_change out;
  auto& ws = out.ws;
  ws.offer_id = in.entity.id();
  ws.op = persistence::offer_op::none;
  ws.enqueue.push_back({stage_id, in.entity.id(), now_us(in.now), persistence::priority::normal});
  return out;
}

} // namespace gost
