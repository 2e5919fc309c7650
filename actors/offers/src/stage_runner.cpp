#include "gost/offers/stage_runner.hpp"

#include "gost/core/proto_wire.hpp"

#include <algorithm>

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>

#include "gost/v1/events.pb.h"

namespace gost {

namespace {

using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;
using persistence::priority;
using persistence::queue_entry;

/// Collects the top-level field names of every difference.
class top_level_fields final : public MessageDifferencer::Reporter {
public:
  explicit top_level_fields(std::set<std::string>& out) : out_(out) {}
  void ReportAdded(const Message&, const Message&,
                   const std::vector<MessageDifferencer::SpecificField>& path) override {
    note(path);
  }
  void ReportDeleted(const Message&, const Message&,
                     const std::vector<MessageDifferencer::SpecificField>& path) override {
    note(path);
  }
  void ReportModified(const Message&, const Message&,
                      const std::vector<MessageDifferencer::SpecificField>& path) override {
    note(path);
  }

private:
  void note(const std::vector<MessageDifferencer::SpecificField>& path) {
    if (!path.empty() && path.front().field != nullptr)
      out_.insert(path.front().field->name());
  }
  std::set<std::string>& out_;
};

const google::protobuf::Any* state_of(const offer_context& ctx, const std::string& stage_id) {
  auto i = ctx.states.find(stage_id);
  return i == ctx.states.end() ? nullptr : &i->second.value;
}

bool interested(const stage_registry::entry& e, const std::set<std::string>* changed) {
  if (changed == nullptr || e.interests.empty())
    return true;
  return std::any_of(e.interests.begin(), e.interests.end(),
                     [&](const std::string& f) { return changed->count(f) != 0; });
}

} // namespace

namespace {
thread_local const run_context* running = nullptr;
} // namespace

const run_context* current_run() noexcept {
  return running;
}

detail::run_scope::run_scope(const run_context* ctx) noexcept : previous_(running) {
  running = ctx;
}

detail::run_scope::~run_scope() {
  running = previous_;
}

stage_registry& stage_registry::add(std::string id, std::shared_ptr<const stage> impl,
                                    stage_options opts) {
  auto interests = impl->interests();
  entries_.push_back({std::move(id), std::move(impl), opts, std::move(interests)});
  return *this;
}

const stage_registry::entry* stage_registry::find(std::string_view id) const {
  for (auto& e : entries_)
    if (e.id == id)
      return &e;
  return nullptr;
}

std::set<std::string> changed_fields(const v1::Offer& before, const v1::Offer& after) {
  std::set<std::string> out;
  MessageDifferencer differ;
  top_level_fields reporter{out};
  differ.ReportDifferencesTo(&reporter);
  auto* d = v1::Offer::descriptor();
  for (auto name : {"version", "created_at", "updated_at"})
    differ.IgnoreField(d->FindFieldByName(name));
  differ.Compare(before, after);
  return out;
}

namespace {

/// Asks one stage; appends its queue entry to `out` when it wants the offer.
void ask_entry(const stage_registry::entry& e, const v1::Offer& after, const offer_context& ctx,
               int64_t now_us, priority prio, std::vector<queue_entry>& out) {
  decision d;
  try {
    d = e.impl->should_process(after, state_of(ctx, e.id));
  } catch (...) {
    d = decision::process(); // seed: a failing shouldProcess enqueues the offer anyway
  }
  switch (d.what) {
    case decision::kind::skip: break;
    case decision::kind::process: out.push_back({e.id, after.id(), now_us, prio}); break;
    case decision::kind::timer:
      out.push_back({e.id, after.id(), to_us(d.at), priority::normal});
      break;
  }
}

std::vector<queue_entry> ask(const stage_registry& reg, const std::set<std::string>* changed,
                             const v1::Offer& after, const offer_context& ctx,
                             const std::string& except_stage, int64_t now_us, priority prio) {
  std::vector<queue_entry> out;
  for (auto& e : reg.all()) {
    if (e.id == except_stage || !e.opts.enabled || ctx.queued_now.count(e.id) != 0
        || !interested(e, changed))
      continue;
    ask_entry(e, after, ctx, now_us, prio, out);
  }
  return out;
}

} // namespace

std::vector<queue_entry> ask_stages(const stage_registry& reg, const v1::Offer* before,
                                    const v1::Offer& after, const offer_context& ctx,
                                    const std::string& except_stage, int64_t now_us,
                                    priority prio) {
  if (before == nullptr)
    return ask(reg, nullptr, after, ctx, except_stage, now_us, prio);
  auto changed = changed_fields(*before, after);
  if (changed.empty())
    return {};
  return ask(reg, &changed, after, ctx, except_stage, now_us, prio);
}

std::vector<queue_entry> ask_stage(const stage_registry& reg, const std::string& stage_id,
                                   const v1::Offer& offer, const offer_context& ctx,
                                   int64_t now_us) {
  std::vector<queue_entry> out;
  auto* e = reg.find(stage_id);
  if (e != nullptr && e->opts.enabled && ctx.queued_now.count(stage_id) == 0)
    ask_entry(*e, offer, ctx, now_us, priority::normal, out);
  return out;
}

runner_output after_process(const stage_registry& reg, const std::string& stage_id,
                            const v1::Offer& offer, const offer_context& ctx,
                            const stage_result& result, int64_t now_us, runner_limits limits) {
  runner_output out;
  auto& ws = out.ws;
  ws.offer_id = offer.id();
  ws.expected_version = offer.version();
  ws.dequeue.push_back(stage_id);
  std::set<std::string> changed;
  if (result.offer) {
    v1::Offer next = *result.offer;
    next.set_id(offer.id());
    next.set_version(offer.version() + 1);
    *next.mutable_created_at() = offer.created_at();
    *next.mutable_updated_at() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(now_us);
    // The seller key is the seller's (UpdateOffer changes it, checked against the other
    // offers' keys): a stage's result keeps the offer's.
    next.set_seller_id(offer.seller_id());
    next.set_namespace_(offer.namespace_());
    next.set_external_id(offer.external_id());
    changed = changed_fields(offer, next);
    if (!changed.empty()) {
      out.offer_changed = true;
      ws.new_body = next.SerializeAsString();
      out.offer = std::move(next);
    }
  }
  if (result.state) {
    auto* old = state_of(ctx, stage_id);
    auto bytes = result.state->SerializeAsString();
    if (old == nullptr || old->SerializeAsString() != bytes) {
      out.state_changed = true;
      ws.states.emplace_back(stage_id, std::move(bytes));
    }
  }
  if (result.timer)
    ws.enqueue.push_back({stage_id, offer.id(), to_us(*result.timer), priority::normal});
  if (out.offer_changed) {
    for (auto& e : ask(reg, &changed, *out.offer, ctx, stage_id, now_us, priority::normal)) {
      auto seen = ctx.chain.find(e.lane);
      int n = (seen == ctx.chain.end() ? 0 : seen->second) + 1;
      if (e.due_at_us <= now_us && n > limits.max_chain) {
        ws.dead_letters.push_back({e.lane,
                                   "change storm: re-triggered more than "
                                     + std::to_string(limits.max_chain)
                                     + " times in one chain (last by " + stage_id + ")",
                                   n});
        ++out.storms_cut;
        continue;
      }
      ws.enqueue.push_back(std::move(e));
    }
  }
  if (out.offer_changed || out.state_changed)
    ws.outbox = saved_event(ws.new_body ? *ws.new_body : offer.SerializeAsString(), ctx, ws.states,
                            false, stage_id, offer.status());
  return out;
}

std::string saved_event(const std::string& body, const offer_context& ctx,
                        const std::vector<std::pair<std::string, std::string>>& new_states,
                        bool deleted, const std::string& changed_by,
                        v1::OfferStatus previous_status, const std::string& by) {
  // OfferSaved: offer = 1 (the body as it is), states = 2 (map entries: key = 1, value = 2),
  // deleted = 3, changed_by = 4, by = 5, previous_status = 6.
  std::string out;
  out.reserve(body.size() + 64);
  wire::append_bytes(out, 1, body);
  auto entry = [&out](const std::string& stage, const std::string& any_bytes) {
    std::string e;
    wire::append_bytes(e, 1, stage);
    wire::append_bytes(e, 2, any_bytes);
    wire::append_bytes(out, 2, e);
  };
  for (auto& [id, held] : ctx.states) {
    bool replaced = false;
    for (auto& [nid, _] : new_states)
      replaced = replaced || nid == id;
    if (!replaced)
      entry(id, held.value.SerializeAsString());
  }
  for (auto& [id, bytes] : new_states)
    entry(id, bytes);
  v1::OfferSaved tail;
  tail.set_deleted(deleted);
  tail.set_changed_by(changed_by);
  tail.set_by(by);
  tail.set_previous_status(previous_status);
  out += tail.SerializeAsString();
  return out;
}

} // namespace gost
