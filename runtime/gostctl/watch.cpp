// gostctl, watching a node: top (AdminService.Top, refreshed) and trace (AdminService.Trace, a
// stream of an offer's, an entity's or a stage's events).
#include "gostctl/cli.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

double per_second(uint64_t now, uint64_t before, double secs) {
  return now > before && secs > 0 ? static_cast<double>(now - before) / secs : 0.0;
}

/// The durable entity kinds of a `top` frame: each kind (resident actors, its lanes' sums), then
/// its lanes, with rates against `before`; and the entity shards' totals.
void print_kinds(const gost::v1::TopResponse& now, const gost::v1::TopResponse* before,
                 double secs) {
  if (now.kinds_size() == 0)
    return;
  std::map<std::string, const gost::v1::KindTop*> prev_kinds;
  std::map<std::pair<std::string, std::string>, const gost::v1::LaneTop*> prev_lanes;
  if (before != nullptr) {
    for (auto& k : before->kinds())
      prev_kinds[k.kind()] = &k;
    for (auto& l : before->lanes())
      prev_lanes[{l.kind(), l.lane()}] = &l;
  }
  int64_t resident = 0;
  int64_t mailbox = 0;
  for (auto& t : now.entity_shards()) {
    resident += t.resident();
    mailbox += t.mailbox();
  }
  std::printf("\nentity kinds: %d shard(s), resident=%lld mailbox=%lld\n", now.entity_shards_size(),
              static_cast<long long>(resident), static_cast<long long>(mailbox));
  std::printf("%-28s %9s %8s %8s %8s %8s %8s\n", "kind / lane", "resident", "runs/s", "fail/s",
              "running", "backlog", "dead");
  for (auto& k : now.kinds()) {
    auto p = prev_kinds.find(k.kind());
    const gost::v1::KindTop* b = p == prev_kinds.end() ? nullptr : p->second;
    std::printf("%-28s %9lld %8.1f %8.1f %8lld %8lld %8llu\n", k.kind().c_str(),
                static_cast<long long>(k.resident()),
                b != nullptr ? per_second(k.runs(), b->runs(), secs) : 0.0,
                b != nullptr ? per_second(k.failures(), b->failures(), secs) : 0.0,
                static_cast<long long>(k.running()), static_cast<long long>(k.backlog()),
                static_cast<unsigned long long>(k.dead_letters()));
    for (auto& l : now.lanes()) {
      if (l.kind() != k.kind())
        continue;
      auto q = prev_lanes.find({l.kind(), l.lane()});
      const gost::v1::LaneTop* lb = q == prev_lanes.end() ? nullptr : q->second;
      auto name = "  " + (l.lane().empty() ? std::string{"(default lane)"} : l.lane());
      std::printf("%-28s %9s %8.1f %8.1f %8lld %8lld %8llu\n", name.c_str(), "-",
                  lb != nullptr ? per_second(l.runs(), lb->runs(), secs) : 0.0,
                  lb != nullptr ? per_second(l.failures(), lb->failures(), secs) : 0.0,
                  static_cast<long long>(l.running()), static_cast<long long>(l.backlog()),
                  static_cast<unsigned long long>(l.dead_letters()));
    }
  }
}

/// One frame of `top` for one node: `now` with rates against `before` (same node, earlier).
void print_top(const gost::v1::TopResponse& now, const gost::v1::TopResponse* before,
               const std::string& addr) {
  double secs = before != nullptr ? static_cast<double>(now.at_us() - before->at_us()) / 1e6 : 0;
  std::map<uint32_t, const gost::v1::ShardTop*> prev_shards;
  std::map<std::string, const gost::v1::StageTop*> prev_stages;
  if (before != nullptr) {
    for (auto& t : before->shards())
      prev_shards[t.shard()] = &t;
    for (auto& t : before->stages())
      prev_stages[t.stage_id()] = &t;
  }
  int64_t resident = 0;
  int64_t mailbox = 0;
  uint64_t runs = 0;
  uint64_t failures = 0;
  for (auto& t : now.shards()) {
    resident += t.resident();
    mailbox += t.mailbox();
    runs += t.runs();
    failures += t.failures();
  }
  std::printf("node %s (%s): %d shard(s), resident=%lld mailbox=%lld runs=%llu failures=%llu"
              " (rates over %.1fs)\n",
              now.node_id().c_str(), addr.c_str(), now.shards_size(),
              static_cast<long long>(resident), static_cast<long long>(mailbox),
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(failures),
              secs);
  std::printf("\n%6s %8s %9s %8s %8s %8s %8s %8s %12s %9s %7s\n", "shard", "epoch", "resident",
              "mailbox", "runs/s", "fail/s", "running", "backlog", "oldest due", "wlag ms",
              "wbatch");
  for (auto& t : now.shards()) {
    auto p = prev_shards.find(t.shard());
    const gost::v1::ShardTop* b = p == prev_shards.end() ? nullptr : p->second;
    std::printf("%6u %8lld %9lld %8lld %8.1f %8.1f %8lld %8lld %10.1fs %9lld %7llu\n", t.shard(),
                static_cast<long long>(t.epoch()), static_cast<long long>(t.resident()),
                static_cast<long long>(t.mailbox()),
                b != nullptr ? per_second(t.runs(), b->runs(), secs) : 0.0,
                b != nullptr ? per_second(t.failures(), b->failures(), secs) : 0.0,
                static_cast<long long>(t.running()), static_cast<long long>(t.backlog()),
                static_cast<double>(t.oldest_due_age_ms()) / 1000,
                static_cast<long long>(t.write_lag_ms()),
                static_cast<unsigned long long>(t.write_batch()));
  }
  std::printf("\n%-20s %-7s %9s %12s %8s %8s %8s\n", "stage", "state", "queued", "oldest due",
              "runs/s", "fail/s", "dead");
  for (auto& t : now.stages()) {
    auto p = prev_stages.find(t.stage_id());
    const gost::v1::StageTop* b = p == prev_stages.end() ? nullptr : p->second;
    std::printf("%-20s %-7s %9llu %10.1fs %8.1f %8.1f %8llu\n", t.stage_id().c_str(),
                t.paused() ? "PAUSED" : "running", static_cast<unsigned long long>(t.queued()),
                static_cast<double>(t.oldest_due_age_ms()) / 1000,
                b != nullptr ? per_second(t.runs(), b->runs(), secs) : 0.0,
                b != nullptr ? per_second(t.failures(), b->failures(), secs) : 0.0,
                static_cast<unsigned long long>(t.dead_letters()));
  }
  print_kinds(now, before, secs);
  if (now.images_size() == 0)
    return;
  std::map<std::string, const gost::v1::ImageTop*> prev_images;
  if (before != nullptr)
    for (auto& t : before->images())
      prev_images[t.function()] = &t;
  std::printf("\n%-12s %7s %9s %8s %8s %8s %8s %8s %8s %8s\n", "image fn", "workers", "in flight",
              "waiting", "queued", "done/s", "fail/s", "hit/s", "miss/s", "dup/s");
  for (auto& t : now.images()) {
    auto p = prev_images.find(t.function());
    const gost::v1::ImageTop* b = p == prev_images.end() ? nullptr : p->second;
    auto rate = [&](uint64_t v, uint64_t (gost::v1::ImageTop::*prev)() const) {
      return b != nullptr ? per_second(v, (b->*prev)(), secs) : 0.0;
    };
    std::printf("%-12s %7lld %9lld %8lld %8s %8.1f %8.1f %8.1f %8.1f %8.1f\n", t.function().c_str(),
                static_cast<long long>(t.workers()), static_cast<long long>(t.in_flight()),
                static_cast<long long>(t.waiting()),
                t.queued() < 0 ? "-" : std::to_string(t.queued()).c_str(),
                rate(t.computed(), &gost::v1::ImageTop::computed),
                rate(t.failed(), &gost::v1::ImageTop::failed),
                rate(t.cache_hits(), &gost::v1::ImageTop::cache_hits),
                rate(t.cache_misses(), &gost::v1::ImageTop::cache_misses),
                rate(t.skipped(), &gost::v1::ImageTop::skipped));
  }
}

int top(const cli& c) {
  const auto& addr = c.addr;
  bool once = c.opts.count("once") != 0;
  double interval = std::atof(opt(c, "interval", once ? "1" : "2").c_str());
  if (interval <= 0 || interval > 3600) {
    std::fputs("gostctl top: --interval must be a number of seconds in (0, 3600]\n", stderr);
    return 2;
  }
  // The nodes to show: the one at --addr, or with --all every alive member it lists.
  std::vector<std::string> addrs{addr};
  if (c.opts.count("all") != 0) {
    auto admin = gost::v1::AdminService::NewStub(channel(c));
    grpc::ClientContext ctx;
    admin_context(ctx, c);
    gost::v1::ListNodesResponse nodes;
    auto s = admin->ListNodes(&ctx, gost::v1::ListNodesRequest{}, &nodes);
    if (!s.ok())
      return fail(s);
    addrs.clear();
    for (auto& n : nodes.nodes())
      if (n.alive())
        addrs.push_back(n.grpc_addr());
  }
  std::vector<std::unique_ptr<gost::v1::AdminService::Stub>> stubs;
  for (auto& a : addrs)
    stubs.push_back(gost::v1::AdminService::NewStub(channel_to(a)));
  auto sample = [&](std::vector<gost::v1::TopResponse>& out) -> grpc::Status {
    out.assign(stubs.size(), {});
    for (size_t i = 0; i < stubs.size(); ++i) {
      grpc::ClientContext ctx;
      admin_context(ctx, c);
      auto s = stubs[i]->Top(&ctx, gost::v1::TopRequest{}, &out[i]);
      if (!s.ok())
        return grpc::Status{s.error_code(), addrs[i] + ": " + s.error_message()};
    }
    return grpc::Status::OK;
  };
  std::vector<gost::v1::TopResponse> before;
  std::vector<gost::v1::TopResponse> now;
  auto s = sample(before);
  if (!s.ok())
    return fail(s);
  auto wait = std::chrono::microseconds{static_cast<int64_t>(interval * 1e6)};
  for (;;) {
    std::this_thread::sleep_for(wait);
    s = sample(now);
    if (!s.ok())
      return fail(s);
    if (!once)
      std::fputs("\033[H\033[2J", stdout); // like top: the frame replaces the last one
    for (size_t i = 0; i < now.size(); ++i) {
      if (i > 0)
        std::printf("\n");
      print_top(now[i], &before[i], addrs[i]);
    }
    std::fflush(stdout);
    if (once)
      return 0;
    before.swap(now);
  }
}

int trace(gost::v1::AdminService::Stub& admin, const cli& c) {
  gost::v1::TraceRequest req;
  if (!c.positional.empty()) {
    // kind/id names a durable entity (a task's key: gostctl task ID prints it); offer ids
    // never hold a '/'.
    if (c.positional[0].find('/') != std::string::npos)
      req.set_entity_key(c.positional[0]);
    else
      req.set_offer_id(c.positional[0]);
  }
  req.set_stage_id(opt(c, "stage"));
  if (c.positional.empty() == req.stage_id().empty()) {
    std::fputs("gostctl trace: give an offer id or an entity key (kind/id), or --stage S (not "
               "both)\n",
               stderr);
    return 2;
  }
  if (c.opts.count("for") != 0) {
    auto ms = duration_ms(opt(c, "for"));
    if (ms <= 0) {
      std::fprintf(stderr, "gostctl trace: --for `%s` is not a duration (90s, 5m, 1h)\n",
                   opt(c, "for").c_str());
      return 2;
    }
    req.set_for_ms(ms);
  }
  if (c.opts.count("max") != 0) {
    int64_t n = 0;
    if (!positive(opt(c, "max"), n)) {
      std::fprintf(stderr, "gostctl trace: --max `%s` is not a positive number\n",
                   opt(c, "max").c_str());
      return 2;
    }
    req.set_max_events(n);
  }
  bool json = c.opts.count("json") != 0;
  grpc::ClientContext ctx; // no deadline: the node ends the trace at --for
  auto reader = admin.Trace(&ctx, req);
  if (!json)
    std::printf("tracing %s %s (until %lld events or %lld s; Ctrl-C stops)\n",
                !req.stage_id().empty()   ? "stage"
                : !req.offer_id().empty() ? "offer"
                                          : "entity",
                !req.stage_id().empty()   ? req.stage_id().c_str()
                : !req.offer_id().empty() ? req.offer_id().c_str()
                                          : req.entity_key().c_str(),
                static_cast<long long>(req.max_events() ? req.max_events() : 1000),
                static_cast<long long>((req.for_ms() ? req.for_ms() : 60'000) / 1000));
  std::fflush(stdout);
  gost::v1::TraceEvent e;
  long n = 0;
  while (reader->Read(&e)) {
    if (json) {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(e, &out, o);
      std::printf("%s\n", out.c_str());
    } else {
      print_event(e, !req.stage_id().empty());
    }
    std::fflush(stdout);
    if (e.kind() != "owner")
      ++n;
  }
  auto s = reader->Finish();
  if (!s.ok())
    return fail(s);
  if (!json)
    std::printf("trace ended: %ld event(s)\n", n);
  return 0;
}

int trace_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return trace(*admin, c);
}

} // namespace

std::vector<command> watch_commands() {
  return {
    {"top", "watching", "[--once] [--interval SECONDS] [--all]",
     "per shard and per stage: resident actors, mailbox depth (largest\n"
     "first), runs/s, failures/s, backlog and age of the oldest due entry,\n"
     "write lag and batch size, lease epoch; per durable entity kind and\n"
     "lane: runs/s, failures/s, runs in flight, backlog, dead letters\n"
     "(and the entity shards' resident actors); refreshes every --interval\n"
     "(default 2) until Ctrl-C; --once prints one frame (rates over one\n"
     "interval, default 1 s); --all shows every alive node of the cluster;\n"
     "with image functions, their pools: workers, in flight, queued, rates",
     top, "--once --all"},
    {"trace", "watching",
     "ID [--for DURATION] [--max N] [--json] | trace --stage S [--for DURATION] [--max N]",
     "the offer's (or, with ID kind/id, a durable entity's: a task's\n"
     "key as `gostctl task` prints it) events as they happen, from\n"
     "whichever node owns it (followed across shard moves: `owner`\n"
     "lines), or every event of stage S on this node; until --max events\n"
     "(default 1000), --for (default 60s; 90s, 5m, 1h) or Ctrl-C;\n"
     "--json: one JSON per line",
     trace_cmd, "--json"},
  };
}

} // namespace gost::ctl
