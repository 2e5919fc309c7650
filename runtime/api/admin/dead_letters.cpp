// gost.v1.AdminService: the open dead letters (ListDeadLetters) and their verbs (retry,
// discard); the outbox's own dead letters, rows parked by the relay (ListParkedOutbox) and
// theirs (retry, drop).
#include "api/admin_service.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <memory>

#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/ask_owner_async.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/errc.hpp"
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

/// The first `limit` rows by id of the shard groups' pages (each in id order). Ids are unique
/// across groups (persistence/cluster/groups.hpp `group_id_base`): the merged page's last id is
/// the next page's start in every group, and a verb by id asks each group (one holds it).
template <class Row>
void merge_by_id(std::vector<Row>& all, size_t limit) {
  std::sort(all.begin(), all.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
  if (all.size() > limit)
    all.resize(limit);
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
  auto pools = cluster_.group_pools();
  hub_.run_blocking([=] {
    // One more than the page: whether a next page exists; each group's, merged by id.
    auto rows = caf::expected<std::vector<persistence::dead_letter_row>>{
      std::vector<persistence::dead_letter_row>{}};
    for (auto* pool : pools) {
      auto some = persistence::list_dead_letters(*pool, f, after, size + 1);
      if (!some) {
        done(to_status(some.error()));
        return;
      }
      rows->insert(rows->end(), some->begin(), some->end());
    }
    merge_by_id(*rows, size + 1);
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

namespace {

/// Letters read per page by a retry, and requeues asked of the owners at once.
constexpr size_t retry_page = 200;
constexpr size_t retry_in_flight = 64;

/// One requeue of a retry: an offer and a stage, with every matching letter of theirs.
struct requeue_ask {
  std::string offer_id;
  std::string stage_id;
  uint32_t shard = 0;
  std::vector<int64_t> letters;
  std::future<caf::expected<int64_t>> answer;
  bool settled = false;
  bool release = false; ///< requeued, or the offer is gone (nothing to run)
};

/// RetryDeadLetters on a blocking thread: the matching letters, paged; a requeue through the
/// owner of each offer's shard for each; the letters whose requeue was taken released.
void retry_letters(const std::vector<persistence::pg_pool*>& pools, call_hub& hub, router& routes,
                   const persistence::dead_letter_filter& f, const std::string& who,
                   const unary_call& call, v1::DeadLettersVerbResponse* resp) {
  auto what = describe(f);
  auto deadline = call.deadline();
  uint64_t requeued = 0;
  uint64_t left = 0;
  std::string left_reason;
  grpc::StatusCode left_code = grpc::StatusCode::UNAVAILABLE;
  auto leave = [&](size_t letters, const std::string& why, grpc::StatusCode code) {
    if (left == 0) {
      left_reason = why;
      left_code = code;
    }
    left += letters;
  };
  std::vector<int64_t> release;
  // One ask per offer and stage however many letters they have; asked as the pages are read,
  // at most `retry_in_flight` unanswered at once, settled oldest first.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<requeue_ask>> asks;
  std::deque<std::shared_ptr<requeue_ask>> flight;
  auto settle = [&](requeue_ask& a) {
    a.settled = true;
    auto letter = "letter " + std::to_string(a.letters.front()) + " (offer " + a.offer_id
                  + ", shard " + std::to_string(a.shard) + ")";
    // The ask ends by the deadline (a last attempt on another node may take a little longer).
    if (a.answer.wait_until(deadline + remote_attempt) != std::future_status::ready) {
      leave(a.letters.size(), letter + ": the owner of its shard did not answer in time; retry",
            grpc::StatusCode::UNAVAILABLE);
      return;
    }
    caf::expected<int64_t> due{int64_t{0}};
    try {
      due = a.answer.get();
    } catch (const std::future_error&) { // the hub stopped with the ask parked
      leave(a.letters.size(), letter + ": the node is stopping; retry on another node",
            grpc::StatusCode::UNAVAILABLE);
      return;
    }
    if (due) {
      ++requeued;
      a.release = true;
    } else if (due.error() == errc::not_found) {
      a.release = true; // deleted since: there is nothing to run again
    } else {
      auto st = to_status(due.error());
      leave(a.letters.size(), letter + ": " + st.error_message(), st.error_code());
      return;
    }
    release.insert(release.end(), a.letters.begin(), a.letters.end());
  };
  bool out_of_time = false;
  bool read_failed = false; // the letters after `after` of a group are not known
  int64_t after = 0;
  // Each shard group's letters in turn (their ids are apart: ADR 0023).
  for (size_t g = 0; g < pools.size();) {
    auto page = persistence::list_dead_letters(*pools[g], f, after, retry_page);
    if (!page) {
      read_failed = true;
      if (left == 0) {
        left_reason = "reading the dead letters failed: " + to_status(page.error()).error_message();
        left_code = to_status(page.error()).error_code();
      }
      break;
    }
    if (page->empty()) {
      after = 0;
      ++g;
      continue;
    }
    after = page->back().id;
    for (auto& d : *page) {
      if (!out_of_time && clock_type::now() >= deadline)
        out_of_time = true;
      if (out_of_time) {
        leave(1,
              "letter " + std::to_string(d.id)
                + ": the call's time (api.request_timeout) ran out before it was asked; retry",
              grpc::StatusCode::UNAVAILABLE);
        continue;
      }
      auto& a = asks[{d.offer_id, d.stage_id}];
      if (a) { // its offer and stage are asked already: the letter shares the outcome
        a->letters.push_back(d.id);
        if (a->settled) {
          if (a->release)
            release.push_back(d.id);
          else
            ++left;
        }
        continue;
      }
      if (flight.size() >= retry_in_flight) {
        settle(*flight.front());
        flight.pop_front();
      }
      a = std::make_shared<requeue_ask>();
      a->offer_id = d.offer_id;
      a->stage_id = d.stage_id;
      a->shard = d.shard;
      a->letters.push_back(d.id);
      // As RequeueOffer: the owner's offer actor writes the entry, fenced by its lease. The
      // first letter's id is the request id: a retry after a lost answer (or a failed release)
      // is answered, never queued twice.
      a->answer = ask_owner_async<int64_t>(
        hub, routes, deadline, [](int64_t due_us) { return due_us; }, requeue_atom_v, d.offer_id,
        d.stage_id, request_id{"dead-letter:" + std::to_string(d.id), "console", who});
      flight.push_back(a);
    }
  }
  while (!flight.empty()) {
    settle(*flight.front());
    flight.pop_front();
  }
  // Only the letters whose requeue the owner took (or whose offer is gone) are released.
  uint64_t released = 0;
  if (!release.empty()) {
    persistence::dead_letter_filter taken;
    taken.ids = std::move(release);
    // Each id is in one group's database: released there.
    auto n = caf::expected<uint64_t>{uint64_t{0}};
    for (auto* pool : pools) {
      auto in_group = persistence::discard_dead_letters(*pool, taken);
      if (!in_group) {
        n = std::move(in_group.error());
        break;
      }
      *n += *in_group;
    }
    if (!n) {
      lg->warn("dead letters retried {} requeued={} but not released by={}: {}", what, requeued,
               who, persistence::error_message(n.error()));
      call.finish(grpc::Status{to_status(n.error()).error_code(),
                               std::to_string(requeued)
                                 + " offer(s) queued again, but releasing their letters failed: "
                                 + to_status(n.error()).error_message()
                                 + "; a retry releases them without queuing them again"});
      return;
    }
    released = *n;
  }
  bool incomplete = left > 0 || read_failed;
  if (incomplete)
    lg->warn("dead letters retried {} released={} requeued={} left={} by={} first_left=\"{}\"",
             what, released, requeued, left, who, left_reason);
  else
    lg->info("dead letters retried {} released={} requeued={} left=0 by={}", what, released,
             requeued, who);
  if (incomplete) {
    // Not all done: what was, and the first reason the rest was left (UNAVAILABLE while a
    // shard has no owner). Running it again retries only the open letters.
    call.finish(grpc::Status{left_code, std::to_string(released) + " dead letter(s) released, "
                                          + std::to_string(requeued) + " offer(s) queued again; "
                                          + std::to_string(left)
                                          + " dead letter(s) left open: " + left_reason});
    return;
  }
  resp->set_released(released);
  resp->set_requeued(requeued);
  call.ok();
}

} // namespace

grpc::ServerUnaryReactor* admin_service::dead_letter_verb(grpc::CallbackServerContext* ctx,
                                                          const v1::DeadLettersVerbRequest* req,
                                                          v1::DeadLettersVerbResponse* resp,
                                                          bool retry) {
  // A retry asks the owners: it has the API's time limit (a discard is one statement).
  unary_call call{ctx, retry ? timeout_ : std::chrono::milliseconds{0}};
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
  auto pools = cluster_.group_pools();
  auto* hub = &hub_;
  auto* routes = &router_;
  hub_.run_blocking([=] {
    auto what = describe(f);
    if (!retry) {
      uint64_t released = 0;
      for (auto* pool : pools) { // every group's matching letters
        auto n = persistence::discard_dead_letters(*pool, f);
        if (!n) {
          if (released > 0)
            lg->warn("dead letters discarded {} released={} by={}, then a group failed: {}", what,
                     released, who, persistence::error_message(n.error()));
          call.finish(n.error());
          return;
        }
        released += *n;
      }
      lg->info("dead letters discarded {} released={} by={}", what, released, who);
      resp->set_released(released);
      call.ok();
      return;
    }
    retry_letters(pools, *hub, *routes, f, who, call, resp);
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
  auto pools = cluster_.group_pools();
  hub_.run_blocking([=] {
    // Each group's page, merged by id (ids apart per group).
    auto rows = caf::expected<std::vector<persistence::parked_outbox_row>>{
      std::vector<persistence::parked_outbox_row>{}};
    for (auto* pool : pools) {
      auto some = persistence::list_parked_outbox(*pool, after, size + 1);
      if (!some) {
        call.finish(some.error());
        return;
      }
      rows->insert(rows->end(), some->begin(), some->end());
    }
    merge_by_id(*rows, size + 1);
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
  auto pools = cluster_.group_pools();
  hub_.run_blocking([=] {
    // Each id is in one group's database (ids apart per group): asked of each.
    auto n = caf::expected<uint64_t>{uint64_t{0}};
    for (auto* pool : pools) {
      auto in_group = retry ? persistence::retry_parked_outbox(*pool, ids)
                            : persistence::drop_parked_outbox(*pool, ids);
      if (!in_group) {
        n = std::move(in_group.error());
        break;
      }
      *n += *in_group;
    }
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
