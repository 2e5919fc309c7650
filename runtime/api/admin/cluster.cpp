// gost.v1.AdminService: the cluster's members and leases (ListNodes, ListShards) and the
// node's drain (DrainNode, UndrainNode).
#include "api/admin_service.hpp"

#include <algorithm>
#include <map>

#include <caf/event_based_actor.hpp>
#include <google/protobuf/util/time_util.h>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/manager.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/leases.hpp"

namespace gost::runtime {

using google::protobuf::util::TimeUtil;

namespace {

const auto lg = gost::log::get("console");

/// A lease as a group's database holds it, with the group's name.
struct group_lease {
  persistence::lease_row lease;
  std::string group;
};

/// Every shard's lease, read in the database of the group holding it now (ADR 0023: each group
/// keeps its own leases; a database can also keep rows of shards moved away, fenced, which are
/// not shown), in shard order. One group: the catalog's rows as they are.
caf::expected<std::vector<group_lease>> all_leases(const admin_service::cluster_view& view,
                                                   uint32_t shard_count) {
  auto map = persistence::load_group_map(*view.pool, shard_count);
  if (!map)
    return map.error();
  std::vector<group_lease> out;
  for (auto& g : map->groups()) {
    auto shards = map->shards_of(g.id);
    if (shards.empty())
      continue;
    auto* pool = view.group_pool(g.id);
    if (pool == nullptr)
      return make_error(errc::unavailable, "this node has no connection to shard group `" + g.name
                                             + "` (declared after it started): ask another node");
    auto leases = persistence::list_leases(*pool, view.lease_timeout);
    if (!leases)
      return leases.error();
    for (auto& l : *leases)
      if (std::binary_search(shards.begin(), shards.end(), l.shard))
        out.push_back({l, map->single_group() ? std::string{} : g.name});
  }
  std::sort(out.begin(), out.end(), [](const group_lease& a, const group_lease& b) {
    return a.lease.shard < b.lease.shard;
  });
  return out;
}

} // namespace

using namespace admin;

grpc::ServerUnaryReactor* admin_service::DrainNode(grpc::CallbackServerContext* ctx,
                                                   const v1::DrainNodeRequest* req,
                                                   v1::DrainNodeResponse* resp) {
  return drain_verb(ctx, req, resp, true);
}

grpc::ServerUnaryReactor* admin_service::UndrainNode(grpc::CallbackServerContext* ctx,
                                                     const v1::DrainNodeRequest* req,
                                                     v1::DrainNodeResponse* resp) {
  return drain_verb(ctx, req, resp, false);
}

grpc::ServerUnaryReactor* admin_service::drain_verb(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainNodeRequest* req,
                                                    v1::DrainNodeResponse* resp, bool drain) {
  unary_call call{ctx};
  const char* verb = drain ? "drain" : "undrain";
  auto node_id = cluster_.node_id;
  if (!req->node_id().empty() && req->node_id() != node_id) {
    call.finish(
      grpc::Status{grpc::StatusCode::FAILED_PRECONDITION,
                   "this is node " + node_id + ", not " + req->node_id()
                     + ": a node drains itself; ask it at its grpc address (gostctl nodes; "
                       "gostctl "
                     + verb + " NODE finds it)"});
    return call.reactor();
  }
  resp->set_node_id(node_id);
  auto who = who_asked(ctx, req->who());
  auto manager = cluster_.manager;
  // Each shard drains for at most 30 s (the manager's cut), all at once.
  caf::timespan timeout{timeout_ + std::chrono::seconds{35}};
  lg->info("node {} asked node={} by={}", verb, node_id, who);
  hub_.run([=](caf::event_based_actor* self) {
    auto failed = [=](caf::error& err) {
      lg->warn("node {} failed node={} by={} error={}", verb, node_id, who, error_message(err));
      call.finish(err);
    };
    if (drain)
      self->request(manager, timeout, drain_node_atom_v)
        .then(
          [=](uint32_t handed_off) {
            lg->info("node drained node={} handed_off={} by={}", node_id, handed_off, who);
            resp->set_changed(true);
            resp->set_handed_off(handed_off);
            call.ok();
          },
          failed);
    else
      self->request(manager, timeout, undrain_atom_v)
        .then(
          [=](bool changed) {
            lg->info("node undrained node={} changed={} by={}", node_id, changed, who);
            resp->set_changed(changed);
            call.ok();
          },
          failed);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::ListNodes(grpc::CallbackServerContext* ctx,
                                                   const v1::ListNodesRequest*,
                                                   v1::ListNodesResponse* resp) {
  unary_call call{ctx};
  list_nodes(resp, finish(call));
  return call.reactor();
}

void admin_service::list_nodes(v1::ListNodesResponse* resp, done_fn done) {
  auto view = cluster_;
  auto shard_count = router_.shard_count();
  hub_.run_blocking([done, resp, view, shard_count] {
    auto nodes = persistence::list_nodes(*view.pool, view.lease_timeout);
    auto leases = all_leases(view, shard_count);
    if (!nodes || !leases) {
      done(to_status(nodes ? leases.error() : nodes.error()));
      return;
    }
    // Shards held in every group.
    std::map<std::string, uint32_t> held;
    for (auto& l : *leases)
      if (!l.lease.free)
        ++held[l.lease.owner];
    for (auto& n : *nodes) {
      auto* out = resp->add_nodes();
      out->set_node_id(n.node_id);
      out->set_caf_addr(n.caf_host + ":" + std::to_string(n.caf_port));
      out->set_grpc_addr(n.grpc_addr);
      out->set_http_addr(n.http_addr);
      out->set_alive(n.alive);
      out->set_leaving(n.leaving);
      out->set_heartbeat_age_ms(n.heartbeat_age_ms);
      *out->mutable_started_at() = TimeUtil::MicrosecondsToTimestamp(n.started_at_us);
      out->set_shards(held[n.node_id]);
    }
    resp->set_answered_by(view.node_id);
    done(grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* admin_service::ListShards(grpc::CallbackServerContext* ctx,
                                                    const v1::ListShardsRequest*,
                                                    v1::ListShardsResponse* resp) {
  unary_call call{ctx};
  list_shards(resp, finish(call));
  return call.reactor();
}

void admin_service::list_shards(v1::ListShardsResponse* resp, done_fn done) {
  auto view = cluster_;
  auto shard_count = router_.shard_count();
  hub_.run_blocking([done, resp, view, shard_count] {
    auto leases = all_leases(view, shard_count);
    if (!leases) {
      done(to_status(leases.error()));
      return;
    }
    for (auto& [l, group] : *leases) {
      auto* out = resp->add_shards();
      out->set_group(group);
      out->set_shard(l.shard);
      out->set_owner(l.owner);
      out->set_epoch(l.epoch);
      out->set_free(l.free);
      out->set_heartbeat_age_ms(l.heartbeat_age_ms);
      out->set_handoff_to(l.handoff_to);
    }
    done(grpc::Status::OK);
  });
}

} // namespace gost::runtime
