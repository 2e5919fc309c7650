// gostctl, cluster: the members (nodes), the shards' leases (shards), a node's drain
// (drain, undrain) and the shard group map (groups, group add).
#include "gostctl/cli.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <google/protobuf/util/time_util.h>

#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

int nodes(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::ListNodesRequest req;
  gost::v1::ListNodesResponse resp;
  auto s = admin->ListNodes(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%-20s %-8s %7s %9s  %-22s %-22s %-22s %s\n", "node", "state", "shards", "hb age ms",
              "caf", "grpc", "http", "started");
  for (auto& n : resp.nodes())
    std::printf("%-20s %-8s %7u %9lld  %-22s %-22s %-22s %s\n", n.node_id().c_str(),
                n.leaving() ? "leaving"
                : n.alive() ? "alive"
                            : "dead",
                n.shards(), static_cast<long long>(n.heartbeat_age_ms()), n.caf_addr().c_str(),
                n.grpc_addr().c_str(), n.http_addr().c_str(),
                google::protobuf::util::TimeUtil::ToString(n.started_at()).c_str());
  std::printf("(answered by %s)\n", resp.answered_by().c_str());
  return 0;
}

int shards(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::ListShardsRequest req;
  gost::v1::ListShardsResponse resp;
  auto s = admin->ListShards(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%6s %-20s %8s %9s  %s\n", "shard", "owner", "epoch", "hb age ms", "state");
  int moving = 0;
  for (auto& l : resp.shards()) {
    std::string state = l.free() ? "free" : "owned";
    if (!l.handoff_to().empty() && !l.free()) {
      state = "moving to " + l.handoff_to();
      ++moving;
    }
    if (!l.group().empty()) // several shard groups: which database keeps the lease
      state += " (group " + l.group() + ")";
    std::printf("%6u %-20s %8lld %9lld  %s\n", l.shard(),
                l.owner().empty() ? "-" : l.owner().c_str(), static_cast<long long>(l.epoch()),
                static_cast<long long>(l.heartbeat_age_ms()), state.c_str());
  }
  std::printf("%d shard(s), %d move(s) in progress\n", resp.shards_size(), moving);
  return 0;
}

/// drain / undrain [NODE]: the node at --addr, or NODE found among the cluster's members
/// (gostctl nodes) and asked at its gRPC address. A drain prints the shards it still holds
/// every second while it waits (on stderr).
int drain_verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  using namespace gost::v1;
  bool drain = c.cmd == "drain";
  std::unique_ptr<AdminService::Stub> other;
  AdminService::Stub* target = &admin;
  DrainNodeRequest req;
  req.set_who(who(c));
  if (!c.positional.empty()) {
    req.set_node_id(c.positional[0]);
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ListNodesResponse nodes;
    if (auto s = admin.ListNodes(&ctx, ListNodesRequest{}, &nodes); !s.ok())
      return fail(s);
    auto n = std::find_if(nodes.nodes().begin(), nodes.nodes().end(),
                          [&](const NodeInfo& x) { return x.node_id() == req.node_id(); });
    if (n == nodes.nodes().end()) {
      std::fprintf(stderr, "gostctl %s: no node %s in the cluster (gostctl nodes lists them)\n",
                   c.cmd.c_str(), req.node_id().c_str());
      return 1;
    }
    if (n->node_id() != nodes.answered_by()) {
      other = AdminService::NewStub(channel_to(n->grpc_addr()));
      target = other.get();
    }
  }
  std::atomic<bool> done{false};
  std::thread progress;
  if (drain)
    progress = std::thread([&] {
      // The node's own count of the shards it still holds, as ListShards sees the leases.
      long last = -1;
      while (!done.load()) {
        for (int i = 0; i < 10 && !done.load(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds{100});
        if (done.load())
          break;
        grpc::ClientContext ctx;
        set_deadline(ctx);
        ListShardsResponse shards;
        if (!target->ListShards(&ctx, ListShardsRequest{}, &shards).ok())
          continue;
        std::string node = req.node_id();
        if (node.empty()) { // the node at --addr: the one whose leases are marked leaving
          grpc::ClientContext nctx;
          set_deadline(nctx);
          ListNodesResponse nodes;
          if (!target->ListNodes(&nctx, ListNodesRequest{}, &nodes).ok())
            continue;
          node = nodes.answered_by();
        }
        long held =
          std::count_if(shards.shards().begin(), shards.shards().end(),
                        [&](const ShardInfo& s) { return s.owner() == node && !s.free(); });
        if (held != last)
          std::fprintf(stderr, "draining %s: %ld shard(s) still held\n", node.c_str(), held);
        last = held;
      }
    });
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  // Every shard drains at once, each for at most 30 s before the node cuts it.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{120});
  DrainNodeResponse resp;
  auto s = drain ? target->DrainNode(&ctx, req, &resp) : target->UndrainNode(&ctx, req, &resp);
  done = true;
  if (progress.joinable())
    progress.join();
  if (!s.ok())
    return fail(s);
  if (drain)
    std::printf("node %s drained: %u shard(s) handed off; it takes none until `gostctl undrain "
                "%s`\n",
                resp.node_id().c_str(), resp.handed_off(), resp.node_id().c_str());
  else
    std::printf("node %s %s\n", resp.node_id().c_str(),
                resp.changed() ? "undrained: it takes its share of the shards again"
                               : "was not drained");
  return 0;
}

int drain_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return drain_verb(*admin, c);
}

/// groups [--json]: the map's version, and per group its id, name, shard count, ranges and
/// DSN (password masked).
int groups(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::ListGroupsResponse resp;
  auto s = admin->ListGroups(&ctx, gost::v1::ListGroupsRequest{}, &resp);
  if (!s.ok())
    return fail(s);
  if (has(c, "json")) {
    print_json(resp);
    return 0;
  }
  std::printf("shard map version %llu, %u shards\n",
              static_cast<unsigned long long>(resp.version()), resp.shard_count());
  std::printf("%5s %-16s %7s  %-24s %s\n", "group", "name", "shards", "ranges", "dsn");
  for (auto& g : resp.groups()) {
    std::string ranges;
    for (auto& r : g.ranges()) {
      ranges += (ranges.empty() ? "" : ",") + std::to_string(r.first());
      if (r.last() != r.first())
        ranges += "-" + std::to_string(r.last());
      if (r.moving())
        ranges += " (moving to " + std::to_string(r.moving_to()) + ")";
    }
    std::printf("%5u %-16s %7u  %-24s %s\n", g.id(), g.name().c_str(), g.shards(),
                ranges.empty() ? "-" : ranges.c_str(),
                g.id() == 0 ? "(the catalog: pg.dsn)" : g.dsn().c_str());
  }
  return 0;
}

/// group add NAME DSN.
int group(const cli& c) {
  if (c.positional.empty() || c.positional[0] != "add" || c.positional.size() != 3) {
    std::fprintf(stderr, "usage: gostctl group add NAME DSN (the DSN in quotes: "
                         "\"host=... dbname=...\")\n");
    return 2;
  }
  gost::v1::AddGroupRequest req;
  req.set_name(c.positional[1]);
  req.set_dsn(c.positional[2]);
  req.set_who(who(c));
  gost::v1::AddGroupResponse resp;
  auto admin = admin_stub(c);
  if (!verb_call(
        c, [&](auto* ctx, auto& r, auto* out) { return admin->AddGroup(ctx, r, out); }, req, resp))
    return 1;
  std::printf("group %u `%s` added: %d migration(s) applied on its database, %s; it holds no "
              "shard until a range moves to it\n",
              resp.group_id(), req.name().c_str(), resp.migrations_applied(),
              resp.installation_created() ? "its installation row created with this "
                                            "installation's shard count"
                                          : "its installation row matches");
  return 0;
}

/// move-shards FIRST-LAST --to GROUP: streams the move's steps, then its
/// figures.
int move_shards(const cli& c) {
  auto usage = [] {
    std::fprintf(stderr, "usage: gostctl move-shards FIRST-LAST --to GROUP "
                         "(every shard of one group: gostctl groups lists them)\n");
    return 2;
  };
  if (c.positional.size() != 1 || !has(c, "to") || opt(c, "to").empty())
    return usage();
  auto& range = c.positional[0];
  auto dash = range.find('-');
  // A shard number: decimal digits only (0 is a shard).
  auto number = [](const std::string& t, int64_t& out) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out = std::stoll(t);
    return true;
  };
  int64_t first = 0;
  int64_t last = 0;
  bool ok = dash != std::string::npos && number(range.substr(0, dash), first)
            && number(range.substr(dash + 1), last);
  if (!ok) {
    std::fprintf(stderr, "gostctl move-shards: `%s` is not a range FIRST-LAST of shard numbers\n",
                 range.c_str());
    return usage();
  }
  gost::v1::MoveShardsRequest req;
  req.set_first(static_cast<uint32_t>(first));
  req.set_last(static_cast<uint32_t>(last));
  req.set_to(opt(c, "to"));
  req.set_who(who(c));
  auto admin = admin_stub(c);
  grpc::ClientContext ctx; // no deadline: a move takes as long as its rows
  admin_context(ctx, c);
  auto reader = admin->MoveShards(&ctx, req);
  std::printf("moving shards %s to group `%s`\n", range.c_str(), req.to().c_str());
  std::fflush(stdout);
  gost::v1::MoveShardsProgress p;
  gost::v1::MoveShardsProgress last_seen;
  while (reader->Read(&p)) {
    if (p.done()) {
      last_seen = p;
      continue;
    }
    std::printf("  %-9s %s\n", p.step().c_str(), p.detail().c_str());
    std::fflush(stdout);
  }
  auto s = reader->Finish();
  if (!s.ok())
    return fail(s);
  std::printf("done: shards %s moved from `%s` to `%s` (map version %llu): %lld rows copied, "
              "%lld caught up in %d round(s), %lld queued rows moved, fenced for %lld ms, %lld "
              "rows removed at the source\n",
              range.c_str(), last_seen.from().c_str(), req.to().c_str(),
              static_cast<unsigned long long>(last_seen.map_version()),
              static_cast<long long>(last_seen.rows_copied()),
              static_cast<long long>(last_seen.rows_caught_up()), last_seen.rounds(),
              static_cast<long long>(last_seen.queued_moved()),
              static_cast<long long>(last_seen.fenced_ms()),
              static_cast<long long>(last_seen.rows_removed()));
  return 0;
}

} // namespace

std::vector<command> cluster_commands() {
  return {
    {"nodes", "cluster", "", "cluster members: addresses, alive, heartbeat age, shards held",
     nodes},
    {"shards", "cluster", "", "every shard's lease: owner, epoch, heartbeat age, moves in progress",
     shards},
    {"drain", "cluster", "[NODE]",
     "hand every shard of the node (default: the one at --addr) to the\n"
     "other nodes and take none until undrain; waits until done, printing\n"
     "the shards still held; refused when no other node is alive",
     drain_cmd},
    {"undrain", "cluster", "[NODE]", "end a drain: the node takes its share of the shards again",
     drain_cmd},
    {"groups", "cluster", "[--json]",
     "the shard group map: its version, and each group's id, name,\n"
     "shard count, ranges (moves in progress) and database (the DSN's\n"
     "password masked)",
     groups, "--json"},
    {"group", "cluster", "add NAME DSN",
     "declare a shard group on the database DSN (it holds no shard until\n"
     "a range moves to it): the node connects to it, applies gost's\n"
     "migrations and checks its installation row (none yet: given this\n"
     "installation's shard count; another count: refused) before the\n"
     "catalog's row is written; logged with --who",
     group},
    {"move-shards", "cluster", "FIRST-LAST --to GROUP",
     "move shards of one group to group GROUP online: all of them\n"
     "(FIRST-LAST as `groups` shows) or a part (a split: offers the cut\n"
     "leaves outside their seller's home group keep their keys claimed\n"
     "there): copy, catch up, a\n"
     "short fence (calls for the range wait), the map switched, the\n"
     "source's rows deleted. Prints each step; logged with --who; asked\n"
     "again after it was cut short, it resumes",
     move_shards},
  };
}

} // namespace gost::ctl
