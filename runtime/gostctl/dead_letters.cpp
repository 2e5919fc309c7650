// gostctl, dead letters: the open ones (deadletters) and their verbs (retry-dead, discard-dead);
// the outbox rows the relay parked (parked) and theirs (retry-parked, drop-parked).
#include "gostctl/cli.hpp"

#include <climits>
#include <cstdio>

#include <google/protobuf/util/time_util.h>

namespace gost::ctl {

namespace {

/// --limit N and --after ID into `req`'s page (a page size; `noun` names what --after is);
/// false on a bad one (exit code 2).
template <class Request>
bool page_opts(const cli& c, const char* noun, Request& req) {
  int64_t n = 0;
  if (c.opts.count("limit")) {
    if (!positive(opt(c, "limit"), n) || n > INT32_MAX) {
      std::fprintf(stderr, "gostctl %s: --limit `%s` is not a page size (1 or more)\n",
                   c.cmd.c_str(), opt(c, "limit").c_str());
      return false;
    }
    req.set_page_size(static_cast<int32_t>(n));
  }
  if (c.opts.count("after")) {
    if (!positive(opt(c, "after"), n)) {
      std::fprintf(stderr, "gostctl %s: --after `%s` is not a %s id\n", c.cmd.c_str(),
                   opt(c, "after").c_str(), noun);
      return false;
    }
    req.set_page_token(opt(c, "after"));
  }
  return true;
}

/// The positional ids into `req.ids`; false on one that is not an id (exit code 2), naming
/// `noun` and the verb `lister` that lists them.
template <class Request>
bool id_args(const cli& c, const char* noun, const char* lister, Request& req) {
  for (auto& p : c.positional) {
    int64_t id = 0;
    if (!positive(p, id)) {
      std::fprintf(stderr, "gostctl %s: `%s` is not a %s id (gostctl %s lists them)\n",
                   c.cmd.c_str(), p.c_str(), noun, lister);
      return false;
    }
    req.add_ids(id);
  }
  return true;
}

/// --stage, --since, --until into a filter; false on a bad one (exit code 2).
bool dead_filter(const cli& c, gost::v1::DeadLetterFilter& f) {
  f.set_stage_id(opt(c, "stage"));
  bool given = false;
  if (!time_opt(c, "since", f.mutable_since(), given))
    return false;
  if (!given)
    f.clear_since();
  if (!time_opt(c, "until", f.mutable_until(), given))
    return false;
  if (!given)
    f.clear_until();
  return true;
}

/// deadletters [--stage S] [--since T] [--until T] [--limit N] [--after ID]
int list_dead(gost::v1::AdminService::Stub& admin, const cli& c) {
  gost::v1::ListDeadLettersRequest req;
  if (!dead_filter(c, *req.mutable_filter()) || !page_opts(c, "dead letter", req))
    return 2;
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  gost::v1::ListDeadLettersResponse resp;
  auto s = admin.ListDeadLetters(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (resp.letters().empty()) {
    auto& f = req.filter();
    bool filtered = !f.stage_id().empty() || f.has_since() || f.has_until();
    std::printf("no open dead letters%s\n", filtered ? " match" : "");
    return 0;
  }
  std::printf("%-8s %-5s %-36s %-16s %-8s %-20s %s\n", "id", "shard", "offer", "stage", "attempts",
              "created", "reason");
  for (auto& d : resp.letters())
    std::printf("%-8lld %-5u %-36s %-16s %-8d %-20s %s\n", static_cast<long long>(d.id()),
                d.shard(), d.offer_id().c_str(), d.stage_id().c_str(), d.attempts(),
                google::protobuf::util::TimeUtil::ToString(d.created_at()).substr(0, 19).c_str(),
                d.reason().c_str());
  if (!resp.next_page_token().empty())
    std::printf("more: gostctl deadletters --after %s (with the same filter)\n",
                resp.next_page_token().c_str());
  return 0;
}

/// retry-dead / discard-dead ID... | --stage S [--since T] [--until T]
int dead_verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  bool retry = c.cmd == "retry-dead";
  gost::v1::DeadLettersVerbRequest req;
  if (!id_args(c, "dead letter", "deadletters", req))
    return 2;
  if (!dead_filter(c, *req.mutable_filter()))
    return 2;
  auto& f = req.filter();
  if (req.ids().empty() && f.stage_id().empty() && !f.has_since() && !f.has_until()) {
    std::fprintf(stderr,
                 "gostctl %s: give dead letter ids, or --stage S (and/or --since, "
                 "--until); there is no `all`\n",
                 c.cmd.c_str());
    return 2;
  }
  req.set_who(who(c));
  gost::v1::DeadLettersVerbResponse resp;
  auto call = [&](grpc::ClientContext* ctx, const gost::v1::DeadLettersVerbRequest& r,
                  gost::v1::DeadLettersVerbResponse* o) {
    return retry ? admin.RetryDeadLetters(ctx, r, o) : admin.DiscardDeadLetters(ctx, r, o);
  };
  if (!verb_call(c, call, req, resp))
    return 1;
  if (retry)
    std::printf("%llu dead letter(s) released, %llu offer(s) queued again, due now\n",
                static_cast<unsigned long long>(resp.released()),
                static_cast<unsigned long long>(resp.requeued()));
  else
    std::printf("%llu dead letter(s) discarded\n",
                static_cast<unsigned long long>(resp.released()));
  return 0;
}

/// parked [--limit N] [--after ID]
int list_parked(gost::v1::AdminService::Stub& admin, const cli& c) {
  gost::v1::ListParkedOutboxRequest req;
  if (!page_opts(c, "parked row", req))
    return 2;
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  gost::v1::ListParkedOutboxResponse resp;
  auto s = admin.ListParkedOutbox(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (resp.rows().empty()) {
    std::printf("no parked outbox rows\n");
    return 0;
  }
  std::printf("%-8s %-5s %-24s %-36s %-9s %-17s %-20s %s\n", "id", "shard", "topic", "key", "bytes",
              "reason", "parked", "error");
  for (auto& p : resp.rows())
    std::printf("%-8lld %-5u %-24s %-36s %-9lld %-17s %-20s %s\n", static_cast<long long>(p.id()),
                p.shard(), p.topic().c_str(), p.key().c_str(), static_cast<long long>(p.bytes()),
                p.reason().c_str(),
                google::protobuf::util::TimeUtil::ToString(p.parked_at()).substr(0, 19).c_str(),
                p.error().c_str());
  if (!resp.next_page_token().empty())
    std::printf("more: gostctl parked --after %s\n", resp.next_page_token().c_str());
  return 0;
}

/// retry-parked / drop-parked ID...
int parked_verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  bool retry = c.cmd == "retry-parked";
  gost::v1::ParkedOutboxVerbRequest req;
  if (!id_args(c, "parked row", "parked", req))
    return 2;
  if (req.ids().empty()) {
    std::fprintf(stderr, "gostctl %s: give parked row ids (gostctl parked lists them)\n",
                 c.cmd.c_str());
    return 2;
  }
  req.set_who(who(c));
  gost::v1::ParkedOutboxVerbResponse resp;
  auto call = [&](grpc::ClientContext* ctx, const gost::v1::ParkedOutboxVerbRequest& r,
                  gost::v1::ParkedOutboxVerbResponse* o) {
    return retry ? admin.RetryParkedOutbox(ctx, r, o) : admin.DropParkedOutbox(ctx, r, o);
  };
  if (!verb_call(c, call, req, resp))
    return 1;
  if (retry)
    std::printf("%llu parked row(s) back in the outbox; their shard's relay sends them next\n",
                static_cast<unsigned long long>(resp.rows()));
  else
    std::printf("%llu parked row(s) dropped (never published)\n",
                static_cast<unsigned long long>(resp.rows()));
  return 0;
}

int list_parked_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return list_parked(*admin, c);
}

int parked_verb_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return parked_verb(*admin, c);
}

int list_dead_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return list_dead(*admin, c);
}

int dead_verb_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return dead_verb(*admin, c);
}

} // namespace

std::vector<command> dead_letter_commands() {
  return {
    {"deadletters", "dead letters", "[--stage S] [--since T] [--until T] [--limit N] [--after ID]",
     "the open dead letters, oldest first: id, shard, offer, stage,\n"
     "attempts, created, reason; --limit per page (default 100, at most\n"
     "the node's limits.page_size_max), --after the id a page ended at",
     list_dead_cmd},
    {"retry-dead", "dead letters", "ID [ID...] | --stage S [--since T] [--until T]",
     "release dead letters and put each offer into its stage's queue,\n"
     "due now (the stage runs again); a filter must name something",
     dead_verb_cmd},
    {"discard-dead", "dead letters", "ID [ID...] | --stage S [--since T] [--until T]",
     "release dead letters without running the stage again", dead_verb_cmd},
    {"parked", "dead letters", "[--limit N] [--after ID]",
     "outbox rows the relay parked because the broker refused a message\n"
     "for good (too large for the topic, ...): id, shard, topic, key,\n"
     "bytes, reason, parked, error; the rows behind them went on",
     list_parked_cmd},
    {"retry-parked", "dead letters", "ID [ID...]",
     "put parked outbox rows back into the outbox (after raising the\n"
     "topic's max.message.bytes and kafka.message_max_bytes): sent next",
     parked_verb_cmd},
    {"drop-parked", "dead letters", "ID [ID...]",
     "delete parked outbox rows: their events are never published", parked_verb_cmd},
  };
}

} // namespace gost::ctl
