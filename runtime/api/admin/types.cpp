// gost.v1.AdminService: the published types (DescribeTypes), an offer's history with its diffs
// (OfferHistory) and live traces (Trace).
#include "api/admin_service.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include <google/protobuf/util/time_util.h>

#include "gost/v1/events.pb.h"

#include "api/admin/common.hpp"
#include "api/entity_service.hpp" // check_entity
#include "api/status.hpp"
#include "cluster/trace_stream.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/offers/history.hpp"
#include "rpc/proto_types.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

const auto lg = gost::log::get("console");

/// A diff as the API sends it.
void add_changes(const std::vector<rpc::field_change>& in,
                 google::protobuf::RepeatedPtrField<v1::FieldChange>& out) {
  for (auto& c : in) {
    auto* f = out.Add();
    f->set_path(c.path);
    f->set_kind(c.what == rpc::field_change::kind::added     ? v1::FieldChange::ADDED
                : c.what == rpc::field_change::kind::removed ? v1::FieldChange::REMOVED
                                                             : v1::FieldChange::CHANGED);
    f->set_before(c.before);
    f->set_after(c.after);
  }
}

/// An empty message of the Any's type (the other side of a state that appeared or went).
google::protobuf::Any empty_of(const google::protobuf::Any& any) {
  google::protobuf::Any out;
  out.set_type_url(any.type_url());
  return out;
}

/// One history entry: `ev` against `base` (the change before it; null: none kept).
void describe_change(const persistence::history_row& row, const v1::OfferSaved& ev,
                     const v1::OfferSaved* base, const rpc::type_pool& pool, v1::OfferChange& out) {
  out.set_id(row.id);
  out.set_version(row.version);
  *out.mutable_at() = TimeUtil::MicrosecondsToTimestamp(row.at_us);
  out.set_source(ev.changed_by());
  out.set_by(ev.by());
  out.set_deleted(ev.deleted());
  out.set_first_kept(base == nullptr);
  static const v1::Offer none;
  add_changes(
    rpc::diff_messages(base ? base->offer() : none, ev.offer(), {"version", "updated_at"}),
    *out.mutable_offer());
  std::set<std::string> stages;
  for (auto& [id, _] : ev.states())
    stages.insert(id);
  if (base)
    for (auto& [id, _] : base->states())
      stages.insert(id);
  for (auto& id : stages) {
    const google::protobuf::Any* before = nullptr;
    const google::protobuf::Any* after = nullptr;
    if (base)
      if (auto i = base->states().find(id); i != base->states().end())
        before = &i->second;
    if (auto i = ev.states().find(id); i != ev.states().end())
      after = &i->second;
    if (before && after && before->type_url() == after->type_url()
        && before->value() == after->value())
      continue;
    auto& st = *out.add_states();
    st.set_stage_id(id);
    st.set_type_url(after ? after->type_url() : before->type_url());
    st.set_before_bytes(before ? static_cast<int64_t>(before->value().size()) : -1);
    st.set_after_bytes(after ? static_cast<int64_t>(after->value().size()) : -1);
    auto b = pool.decode(before ? *before : empty_of(*after));
    auto a = pool.decode(after ? *after : empty_of(*before));
    if (!a || !b)
      continue; // not published here: the sizes tell it changed
    st.set_decoded(true);
    add_changes(rpc::diff_messages(*b, *a), *st.mutable_changes());
  }
}

} // namespace

void admin_service::publish_types(const entity_registry* entities) {
  auto out = std::make_shared<v1::DescribeTypesResponse>();
  std::vector<const google::protobuf::Descriptor*> descs;
  for (auto& e : stages_->all()) {
    auto* t = out->add_types();
    t->set_kind(v1::PublishedType::STAGE);
    t->set_id(e.id);
    if (const auto* d = e.impl ? e.impl->state_type() : nullptr) {
      t->set_state_type(d->full_name());
      descs.push_back(d);
    } else {
      t->set_note("the stage declares no state type (an external stage, or one without a "
                  "typed state): its states show as type URL and size");
    }
  }
  if (entities != nullptr)
    for (auto& type : entities->all()) {
      auto* t = out->add_types();
      t->set_kind(v1::PublishedType::ENTITY);
      t->set_id(type->kind());
      t->set_state_type(type->state_descriptor()->full_name());
      t->set_event_type(type->event_descriptor()->full_name());
      descs.push_back(type->state_descriptor());
      descs.push_back(type->event_descriptor());
      if (auto* reply = type->reply_descriptor()) {
        t->set_reply_type(reply->full_name());
        descs.push_back(reply);
      }
    }
  // The saved-offer event (with the offer): what the history holds.
  descs.push_back(v1::OfferSaved::descriptor());
  *out->mutable_files() = rpc::files_of(descs);
  pool_ = std::make_shared<rpc::type_pool>(out->files());
  types_ = std::move(out);
}

grpc::ServerUnaryReactor* admin_service::DescribeTypes(grpc::CallbackServerContext* ctx,
                                                       const v1::DescribeTypesRequest*,
                                                       v1::DescribeTypesResponse* resp) {
  unary_call call{ctx};
  *resp = *types_;
  call.ok();
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::OfferHistory(grpc::CallbackServerContext* ctx,
                                                      const v1::OfferHistoryRequest* req,
                                                      v1::OfferHistoryResponse* resp) {
  unary_call call{ctx};
  if (req->offer_id().empty()) {
    call.finish(invalid("offer_id is required"));
    return call.reactor();
  }
  uint32_t size = std::min<uint32_t>(20, limits_.page_size_max);
  if (req->page_size() != 0)
    if (auto problem = check_page_size("page_size", req->page_size(), limits_, size);
        !problem.empty()) {
      call.finish(invalid(problem));
      return call.reactor();
    }
  int64_t before = 0;
  if (!req->page_token().empty()) {
    char* end = nullptr;
    errno = 0;
    before = std::strtoll(req->page_token().c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || before <= 0) {
      call.finish(invalid("page_token `" + req->page_token()
                          + "` is not one this call gave (next_page_token)"));
      return call.reactor();
    }
  }
  resp->set_enabled(history_);
  auto where = cluster_.placement; // the offer's history is in its shard's group's database
  auto types = pool_;
  auto id = req->offer_id();
  hub_.run_blocking([=] {
    // One more than the page: the base of the page's oldest change, and whether more exist.
    auto rows = persistence::read_history(where->of_shard(shard_of(id, where->shard_count())), id,
                                          before, size + 1);
    if (!rows) {
      call.finish(rows.error());
      return;
    }
    std::vector<v1::OfferSaved> events(rows->size());
    for (size_t i = 0; i < rows->size(); ++i)
      if (!events[i].ParseFromString((*rows)[i].event)) {
        call.finish(
          grpc::Status{grpc::StatusCode::DATA_LOSS, "history row " + std::to_string((*rows)[i].id)
                                                      + " of offer " + id + " does not parse"});
        return;
      }
    size_t shown = std::min<size_t>(size, rows->size());
    for (size_t i = 0; i < shown; ++i)
      describe_change((*rows)[i], events[i], i + 1 < events.size() ? &events[i + 1] : nullptr,
                      *types, *resp->add_changes());
    if (rows->size() > size)
      resp->set_next_page_token(std::to_string((*rows)[shown - 1].id));
    call.ok();
  });
  return call.reactor();
}

grpc::ServerWriteReactor<v1::TraceEvent>* admin_service::Trace(grpc::CallbackServerContext*,
                                                               const v1::TraceRequest* req) {
  struct refused final : grpc::ServerWriteReactor<v1::TraceEvent> {
    explicit refused(grpc::Status s) { Finish(std::move(s)); }
    void OnDone() override { delete this; }
  };
  if (!traces_)
    return new refused({grpc::StatusCode::UNIMPLEMENTED, "this node serves no traces"});
  if (int{!req->offer_id().empty()} + int{!req->entity_key().empty()}
        + int{!req->stage_id().empty()}
      != 1)
    return new refused(invalid("give one of offer_id (one offer), entity_key (one durable entity, "
                               "kind/id) or stage_id (one stage)"));
  if (!req->entity_key().empty()) {
    auto slash = req->entity_key().find('/');
    std::string key;
    grpc::StatusCode code;
    if (slash == std::string::npos)
      return new refused(invalid("entity_key: `" + req->entity_key() + "` is not kind/id"));
    if (!entities_)
      return new refused(
        {grpc::StatusCode::NOT_FOUND, "entity_key: this node hosts no actor types"});
    if (auto problem = check_entity(*entities_, req->entity_key().substr(0, slash),
                                    req->entity_key().substr(slash + 1), key, code);
        !problem.empty())
      return new refused({code, "entity_key: " + problem});
  }
  if (!req->stage_id().empty())
    if (auto st = admin::registered_stage(*stages_, req->stage_id()); !st.ok())
      return new refused(st);
  uint32_t events = 0;
  int64_t ms = 0;
  if (auto problem = check_trace(req->max_events(), req->for_ms(), limits_, events, ms);
      !problem.empty())
    return new refused(invalid(problem));
  lg->info("trace started offer={} entity={} stage={} max_events={} for_ms={}", req->offer_id(),
           req->entity_key(), req->stage_id(), events, ms);
  return start_trace(traces_, *req, true, events, ms);
}

} // namespace gost::runtime
