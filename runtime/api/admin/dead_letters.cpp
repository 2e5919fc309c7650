// gost.v1.AdminService: the open dead letters (ListDeadLetters) and their verbs (retry,
// discard); the outbox's own dead letters, rows parked by the relay (ListParkedOutbox) and
// theirs (retry, drop).
#include "api/admin_service.hpp"

#include <cerrno>
#include <cstdlib>
#include <map>

#include <caf/send.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "cluster/wakes.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/persistence/offers/dead_letters.hpp"
#include "gost/persistence/outbox/outbox.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

const auto lg = gost::log::get("console");

/// The filter as persistence takes it; a problem naming the field, or OK.
grpc::Status dead_letter_filter_of(const v1::DeadLetterFilter& in,
                                   persistence::dead_letter_filter& out) {
  out.stage_id = in.stage_id();
  if (in.has_since())
    out.since_us = TimeUtil::TimestampToMicroseconds(in.since());
  if (in.has_until())
    out.until_us = TimeUtil::TimestampToMicroseconds(in.until());
  if ((in.has_since() && out.since_us <= 0) || (in.has_until() && out.until_us <= 0))
    return invalid("filter.since and filter.until must be after the Unix epoch");
  if (out.since_us != 0 && out.until_us != 0 && out.until_us <= out.since_us)
    return invalid("filter.until must be after filter.since");
  return grpc::Status::OK;
}

/// The id a page ended at, from a page token (empty: 0); false when it is not one we gave.
bool page_after(const std::string& token, int64_t& after) {
  after = 0;
  if (token.empty())
    return true;
  char* end = nullptr;
  errno = 0;
  after = std::strtoll(token.c_str(), &end, 10);
  return errno == 0 && *end == '\0' && after >= 0;
}

/// Text of a filter for the log.
std::string describe(const persistence::dead_letter_filter& f) {
  std::string out;
  if (!f.ids.empty()) {
    out += "ids=";
    for (size_t i = 0; i < f.ids.size(); ++i)
      out += (i ? "," : "") + std::to_string(f.ids[i]);
  }
  if (!f.stage_id.empty())
    out += (out.empty() ? "" : " ") + std::string{"stage="} + f.stage_id;
  if (f.since_us != 0)
    out += (out.empty() ? "" : " ") + std::string{"since="}
           + TimeUtil::ToString(TimeUtil::MicrosecondsToTimestamp(f.since_us));
  if (f.until_us != 0)
    out += (out.empty() ? "" : " ") + std::string{"until="}
           + TimeUtil::ToString(TimeUtil::MicrosecondsToTimestamp(f.until_us));
  return out;
}

} // namespace

using namespace admin;

grpc::ServerUnaryReactor* admin_service::ListDeadLetters(grpc::CallbackServerContext* ctx,
                                                         const v1::ListDeadLettersRequest* req,
                                                         v1::ListDeadLettersResponse* resp) {
  unary_call call{ctx};
  list_dead_letters(*req, resp, finish(call));
  return call.reactor();
}

void admin_service::list_dead_letters(const v1::ListDeadLettersRequest& req,
                                      v1::ListDeadLettersResponse* resp, done_fn done) {
  uint32_t size = 0;
  if (auto problem = check_page_size("page_size", req.page_size(), limits_, size);
      !problem.empty()) {
    done(invalid(problem));
    return;
  }
  int64_t after = 0;
  if (!page_after(req.page_token(), after)) {
    done(
      invalid("page_token `" + req.page_token() + "` is not one this call gave (next_page_token)"));
    return;
  }
  persistence::dead_letter_filter f;
  if (auto st = dead_letter_filter_of(req.filter(), f); !st.ok()) {
    done(st);
    return;
  }
  auto pool = cluster_.pool;
  hub_.run_blocking([=] {
    // One more than the page: whether a next page exists.
    auto rows = persistence::list_dead_letters(*pool, f, after, size + 1);
    if (!rows) {
      done(to_status(rows.error()));
      return;
    }
    bool more = rows->size() > size;
    if (more)
      rows->resize(size);
    for (auto& d : *rows) {
      auto* out = resp->add_letters();
      out->set_id(d.id);
      out->set_shard(d.shard);
      out->set_offer_id(d.offer_id);
      out->set_stage_id(d.stage_id);
      out->set_reason(d.reason);
      out->set_attempts(d.attempts);
      *out->mutable_created_at() = TimeUtil::MicrosecondsToTimestamp(d.created_us);
    }
    if (more && !rows->empty())
      resp->set_next_page_token(std::to_string(rows->back().id));
    done(grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* admin_service::RetryDeadLetters(grpc::CallbackServerContext* ctx,
                                                          const v1::DeadLettersVerbRequest* req,
                                                          v1::DeadLettersVerbResponse* resp) {
  return dead_letter_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::DiscardDeadLetters(grpc::CallbackServerContext* ctx,
                                                            const v1::DeadLettersVerbRequest* req,
                                                            v1::DeadLettersVerbResponse* resp) {
  return dead_letter_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::dead_letter_verb(grpc::CallbackServerContext* ctx,
                                                          const v1::DeadLettersVerbRequest* req,
                                                          v1::DeadLettersVerbResponse* resp,
                                                          bool retry) {
  unary_call call{ctx};
  persistence::dead_letter_filter f;
  if (auto st = dead_letter_filter_of(req->filter(), f); !st.ok()) {
    call.finish(st);
    return call.reactor();
  }
  f.ids.assign(req->ids().begin(), req->ids().end());
  for (auto id : f.ids)
    if (id <= 0) {
      call.finish(invalid("ids: " + std::to_string(id) + " is not a dead letter id"));
      return call.reactor();
    }
  if (f.empty()) {
    // Never every letter by accident: say which.
    call.finish(invalid("give ids, or a filter (filter.stage_id, filter.since, filter.until); "
                        "an empty filter would match every dead letter"));
    return call.reactor();
  }
  // A retry queues the stage: it must be one this node runs (a discard may clear any).
  if (retry && !f.stage_id.empty())
    if (auto st = registered_stage(*stages_, f.stage_id); !st.ok()) {
      call.finish(st);
      return call.reactor();
    }
  auto who = who_asked(ctx, req->who());
  auto pool = cluster_.pool;
  auto* routes = &router_;
  auto wakes = cluster_.wakes;
  hub_.run_blocking([=] {
    auto what = describe(f);
    if (!retry) {
      auto n = persistence::discard_dead_letters(*pool, f);
      if (!n) {
        call.finish(n.error());
        return;
      }
      lg->info("dead letters discarded {} released={} by={}", what, *n, who);
      resp->set_released(*n);
      call.ok();
      return;
    }
    auto r = persistence::retry_dead_letters(*pool, f, kit::now_us());
    if (!r) {
      call.finish(r.error());
      return;
    }
    lg->info("dead letters retried {} released={} requeued={} by={}", what, r->released,
             r->entries.size(), who);
    resp->set_released(r->released);
    resp->set_requeued(r->entries.size());
    // As RequeueOffer: the owners on this node hear of it now; another node's shard is woken.
    std::map<uint32_t, persistence::queue_entries> by_shard;
    for (size_t i = 0; i < r->entries.size(); ++i)
      by_shard[r->shards[i]].push_back(r->entries[i]);
    for (auto& [shard, entries] : by_shard)
      if (auto local = routes->local(kinds::offers, shard))
        caf::anon_send(*local, enqueued_atom_v, std::move(entries),
                       static_cast<uint8_t>(kit::event_source::console));
      else if (wakes)
        wakes->wake(kinds::offers_name, shard);
    call.ok();
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::ListParkedOutbox(grpc::CallbackServerContext* ctx,
                                                          const v1::ListParkedOutboxRequest* req,
                                                          v1::ListParkedOutboxResponse* resp) {
  unary_call call{ctx};
  uint32_t size = 0;
  if (auto problem = check_page_size("page_size", req->page_size(), limits_, size);
      !problem.empty()) {
    call.finish(invalid(problem));
    return call.reactor();
  }
  int64_t after = 0;
  if (!page_after(req->page_token(), after)) {
    call.finish(invalid("page_token `" + req->page_token()
                        + "` is not one this call gave (next_page_token)"));
    return call.reactor();
  }
  auto pool = cluster_.pool;
  hub_.run_blocking([=] {
    auto rows = persistence::list_parked_outbox(*pool, after, size + 1);
    if (!rows) {
      call.finish(rows.error());
      return;
    }
    bool more = rows->size() > size;
    if (more)
      rows->resize(size);
    for (auto& p : *rows) {
      auto* out = resp->add_rows();
      out->set_id(p.id);
      out->set_shard(p.shard);
      out->set_events(p.events);
      out->set_topic(p.topic);
      out->set_key(p.key);
      out->set_bytes(p.bytes);
      out->set_reason(p.reason);
      out->set_error(p.error);
      *out->mutable_parked_at() = TimeUtil::MicrosecondsToTimestamp(p.parked_us);
    }
    if (more && !rows->empty())
      resp->set_next_page_token(std::to_string(rows->back().id));
    call.ok();
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::RetryParkedOutbox(grpc::CallbackServerContext* ctx,
                                                           const v1::ParkedOutboxVerbRequest* req,
                                                           v1::ParkedOutboxVerbResponse* resp) {
  return parked_outbox_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::DropParkedOutbox(grpc::CallbackServerContext* ctx,
                                                          const v1::ParkedOutboxVerbRequest* req,
                                                          v1::ParkedOutboxVerbResponse* resp) {
  return parked_outbox_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::parked_outbox_verb(grpc::CallbackServerContext* ctx,
                                                            const v1::ParkedOutboxVerbRequest* req,
                                                            v1::ParkedOutboxVerbResponse* resp,
                                                            bool retry) {
  unary_call call{ctx};
  std::vector<int64_t> ids(req->ids().begin(), req->ids().end());
  if (ids.empty()) {
    call.finish(invalid("ids: give the parked rows' ids (ListParkedOutbox lists them)"));
    return call.reactor();
  }
  for (auto id : ids)
    if (id <= 0) {
      call.finish(invalid("ids: " + std::to_string(id) + " is not a parked row id"));
      return call.reactor();
    }
  auto who = who_asked(ctx, req->who());
  auto pool = cluster_.pool;
  hub_.run_blocking([=] {
    auto n = retry ? persistence::retry_parked_outbox(*pool, ids)
                   : persistence::drop_parked_outbox(*pool, ids);
    if (!n) {
      call.finish(n.error());
      return;
    }
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i)
      list += (i ? "," : "") + std::to_string(ids[i]);
    lg->info("parked outbox rows {} ids={} rows={} by={}", retry ? "retried" : "dropped", list, *n,
             who);
    resp->set_rows(*n);
    call.ok();
  });
  return call.reactor();
}

} // namespace gost::runtime
