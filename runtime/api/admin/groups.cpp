// gost.v1.AdminService: the shard group map (issue 28, ADR 0023): ListGroups reads it from the
// catalog database, AddGroup declares a group (persistence/cluster/groups.hpp declare_group:
// the new database migrated and its installation checked before the catalog's row).
#include "api/admin_service.hpp"

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/conninfo.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("console");

} // namespace

using namespace admin;

grpc::ServerUnaryReactor* admin_service::ListGroups(grpc::CallbackServerContext* ctx,
                                                    const v1::ListGroupsRequest*,
                                                    v1::ListGroupsResponse* resp) {
  unary_call call{ctx};
  auto pool = cluster_.pool;
  auto shard_count = router_.shard_count();
  hub_.run_blocking([call, resp, pool, shard_count] {
    auto map = persistence::load_group_map(*pool, shard_count);
    if (!map) {
      call.finish(map.error());
      return;
    }
    resp->set_version(map->version());
    resp->set_shard_count(map->shard_count());
    for (auto& g : map->groups()) {
      auto* out = resp->add_groups();
      out->set_id(g.id);
      out->set_name(g.name);
      out->set_dsn(persistence::masked_dsn(g.dsn));
      uint32_t shards = 0;
      for (auto& r : map->ranges()) {
        if (r.group != g.id)
          continue;
        auto* range = out->add_ranges();
        range->set_first(r.first);
        range->set_last(r.last);
        range->set_moving(r.moving_to.has_value());
        range->set_moving_to(r.moving_to.value_or(0));
        shards += r.size();
      }
      out->set_shards(shards);
    }
    call.ok();
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* admin_service::AddGroup(grpc::CallbackServerContext* ctx,
                                                  const v1::AddGroupRequest* req,
                                                  v1::AddGroupResponse* resp) {
  unary_call call{ctx};
  auto pool = cluster_.pool;
  auto shard_count = router_.shard_count();
  auto name = req->name();
  auto dsn = req->dsn();
  auto who = who_asked(ctx, req->who());
  auto connect_timeout = timeout_;
  auto shown = persistence::masked_dsn(dsn);
  lg->info("group add asked name={} dsn=\"{}\" by={}", name, shown, who);
  hub_.run_blocking([=] {
    auto added = persistence::declare_group(*pool, name, dsn, shard_count, connect_timeout);
    if (!added) {
      lg->warn("group add refused name={} dsn=\"{}\" by={} error={}", name, shown, who,
               persistence::error_message(added.error()));
      call.finish(added.error());
      return;
    }
    lg->info("group added group={} name={} dsn=\"{}\" migrations_applied={} "
             "installation_created={} by={}",
             added->id, name, shown, added->migrations_applied, added->installation_created, who);
    resp->set_group_id(added->id);
    resp->set_migrations_applied(added->migrations_applied);
    resp->set_installation_created(added->installation_created);
    call.ok();
  });
  return call.reactor();
}

} // namespace gost::runtime
