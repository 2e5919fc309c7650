#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/conninfo.hpp"

#include <atomic>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

std::string interval(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

/// A lease is free when nobody owns it, its owner stopped heartbeating it for the lease
/// timeout (paused, cut off, or gone without a liveness lock), or its owner's process is gone
/// (its liveness lock is free: migration 0011).
std::string free_lease(std::chrono::milliseconds lease_timeout) {
  return "(owner IS NULL OR heartbeat_at IS NULL"
         " OR heartbeat_at < now() - interval '"
         + interval(lease_timeout)
         + "'"
           " OR owner IN (SELECT node_id FROM gone_nodes))";
}

} // namespace

std::string application_name(const std::string& node_id) {
  return (application_name_prefix + node_id).substr(0, 63);
}

caf::error ensure_lease_rows(pg_pool& pool, uint32_t shard_count) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("INSERT INTO shard_leases (shard) SELECT generate_series(0, $1 - 1)"
                   " ON CONFLICT DO NOTHING",
                   static_cast<int64_t>(shard_count));
  });
}

caf::error ensure_lease_rows(pg_pool& pool, const std::vector<uint32_t>& shards) {
  if (shards.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec("INSERT INTO shard_leases (shard) SELECT unnest(ARRAY[" + number_list(shards)
            + "]::int[]) ON CONFLICT DO NOTHING");
  });
}

caf::error register_node(pg_pool& pool, const node_row& n) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("INSERT INTO nodes (node_id, caf_host, caf_port, grpc_addr, http_addr)"
                   " VALUES ($1, $2, $3, $4, $5)"
                   " ON CONFLICT (node_id) DO UPDATE SET caf_host = EXCLUDED.caf_host,"
                   " caf_port = EXCLUDED.caf_port, grpc_addr = EXCLUDED.grpc_addr,"
                   " http_addr = EXCLUDED.http_addr, started_at = now(), heartbeat_at = now(),"
                   " leaving = false",
                   n.node_id, n.caf_host, n.caf_port, n.grpc_addr, n.http_addr);
    tx.exec(std::string{"NOTIFY "} + cluster_channel);
  });
}

caf::error set_leaving(pg_pool& pool, const std::string& node_id, bool leaving) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("UPDATE nodes SET leaving = $2 WHERE node_id = $1", node_id, leaving);
    tx.exec(std::string{"NOTIFY "} + cluster_channel);
  });
}

caf::expected<std::vector<held_lease>> heartbeat(pg_pool& pool, const std::string& node_id,
                                                 const std::vector<held_lease>& held) {
  std::vector<held_lease> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::work tx{c};
    tx.exec_params("UPDATE nodes SET heartbeat_at = now() WHERE node_id = $1", node_id);
    if (!held.empty()) {
      std::string pairs;
      for (auto& h : held)
        pairs += (pairs.empty() ? "(" : ",(") + std::to_string(h.shard) + ","
                 + std::to_string(h.epoch) + ")";
      // The rows are locked in shard order, as commits lock them (FOR SHARE, ordered): a
      // heartbeat and a commit of the same node never deadlock.
      for (auto row : tx.exec_params(
             "UPDATE shard_leases l SET heartbeat_at = now()"
             " FROM (SELECT s.shard FROM shard_leases s"
             "       JOIN (VALUES "
               + pairs
               + ") AS h(shard, epoch)"
                 "         ON s.shard = h.shard AND s.epoch = h.epoch"
                 "       WHERE s.owner = $1 ORDER BY s.shard FOR NO KEY UPDATE OF s) AS k"
                 " WHERE l.shard = k.shard RETURNING l.shard, l.epoch",
             node_id))
        out.push_back({row[0].as<uint32_t>(), row[1].as<int64_t>()});
    }
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<node_row>> list_nodes(pg_pool& pool,
                                                std::chrono::milliseconds node_timeout) {
  std::vector<node_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec("SELECT node_id, caf_host, caf_port, grpc_addr, http_addr, leaving,"
                            " (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint,"
                            " (extract(epoch FROM started_at) * 1000000)::bigint,"
                            " heartbeat_at > now() - interval '"
                            + interval(node_timeout)
                            + "',"
                              " node_id IN (SELECT node_id FROM gone_nodes)"
                              " FROM nodes ORDER BY node_id")) {
      node_row n;
      n.node_id = row[0].as<std::string>();
      n.caf_host = row[1].as<std::string>();
      n.caf_port = row[2].as<int>();
      n.grpc_addr = row[3].as<std::string>();
      n.http_addr = row[4].as<std::string>();
      n.leaving = row[5].as<bool>();
      n.heartbeat_age_ms = row[6].as<int64_t>();
      n.started_at_us = row[7].as<int64_t>();
      n.gone = row[9].as<bool>();
      n.alive = row[8].as<bool>() && !n.leaving && !n.gone;
      out.push_back(std::move(n));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<lease_row>> list_leases(pg_pool& pool,
                                                  std::chrono::milliseconds lease_timeout) {
  std::vector<lease_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec("SELECT shard, coalesce(owner, ''), epoch, " + free_lease(lease_timeout)
                 + ","
                   " coalesce(greatest((extract(epoch FROM now() - heartbeat_at) * 1000)::bigint,"
                   " 0), 0),"
                   " coalesce(handoff_to, '')"
                   " FROM shard_leases ORDER BY shard")) {
      lease_row l;
      l.shard = row[0].as<uint32_t>();
      l.owner = row[1].as<std::string>();
      l.epoch = row[2].as<int64_t>();
      l.free = row[3].as<bool>();
      l.heartbeat_age_ms = row[4].as<int64_t>();
      l.handoff_to = row[5].as<std::string>();
      out.push_back(std::move(l));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<acquisition> acquire_free_lease(pg_pool& pool, const std::string& node_id,
                                              std::chrono::milliseconds lease_timeout,
                                              const std::vector<uint32_t>& only) {
  acquisition out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = {};
    pqxx::nontransaction tx{c};
    // One statement (its own transaction). SKIP LOCKED: two nodes acquiring at once take
    // different shards instead of waiting. FOR NO KEY UPDATE, the strength of the UPDATE
    // itself: a row its expired owner's commit holds FOR SHARE is skipped (below), one another
    // node's commit only checks (FOR KEY SHARE, a seller's home) is not. The NOTIFY tells the other
    // nodes where the shard went (their routes follow at once, not at their next heartbeat).
    auto r = tx.exec_params(
      "WITH taken AS (UPDATE shard_leases SET owner = $1, epoch = epoch + 1, acquired_at = now(),"
      "   heartbeat_at = now(), last_processing_start = now(), handoff_to = NULL"
      " WHERE shard = (SELECT shard FROM shard_leases WHERE "
        + free_lease(lease_timeout)
        + (only.empty() ? std::string{} : " AND shard IN (" + number_list(only) + ")")
        + "   ORDER BY (handoff_to = $1) IS TRUE DESC, last_processing_start NULLS FIRST, shard"
          "   LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)"
          " RETURNING shard, epoch)"
          " SELECT shard, epoch, pg_notify($2, $1) FROM taken",
      node_id, std::string{cluster_channel});
    if (!r.empty()) {
      out.lease = held_lease{r[0][0].as<uint32_t>(), r[0][1].as<int64_t>()};
      return;
    }
    // Nothing free could be locked. A free lease whose row is locked is held FOR SHARE by a
    // commit of its expired owner that froze half-way (a paused process): end the owner's
    // transactions older than half the lease timeout (it is fenced by the lease timeout
    // anyway; PostgreSQL ends an idle one by itself, idle_in_transaction_session_timeout,
    // but not one stuck in a statement). The next round takes the lease.
    auto stuck = tx.exec_params(
      "SELECT a.pid, l.owner, pg_terminate_backend(a.pid)"
      " FROM (SELECT DISTINCT owner FROM shard_leases WHERE owner IS NOT NULL AND owner <> $1"
      "       AND "
        + free_lease(lease_timeout)
        + ") l"
          " JOIN pg_stat_activity a ON a.application_name = left($2 || l.owner, 63)"
          " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
          "   AND a.xact_start < now() - interval '"
        + interval(lease_timeout / 2) + "'",
      node_id, std::string{application_name_prefix});
    for (auto row : stuck)
      out.ended.push_back({row[1].as<std::string>(), row[0].as<int>()});
  });
  if (err)
    return err;
  return out;
}

caf::expected<int64_t> free_previous_leases(pg_pool& pool, const std::string& node_id,
                                            const std::vector<uint32_t>& held) {
  int64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    std::string keep = held.empty() ? "" : " AND shard NOT IN (" + number_list(held) + ")";
    // The rows locked in shard order first, as heartbeats, commits and a move's fence lock
    // them (an UPDATE of several rows locks them in no fixed order: a deadlock with the fence).
    auto r =
      tx.exec_params("WITH freed AS (UPDATE shard_leases SET owner = NULL,"
                     "   heartbeat_at = NULL, handoff_to = $1"
                     " WHERE shard IN (SELECT shard FROM shard_leases WHERE owner = $1"
                       + keep
                       + " ORDER BY shard FOR NO KEY UPDATE) AND owner = $1 RETURNING shard)"
                         " SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify($2, '') END"
                         " FROM freed",
                     node_id, std::string{cluster_channel});
    n = r[0][0].as<int64_t>();
  });
  if (err)
    return err;
  return n;
}

caf::error mark_handoff(pg_pool& pool, const std::string& node_id, held_lease lease,
                        const std::string& to) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("UPDATE shard_leases SET handoff_to = $4"
                   " WHERE shard = $1 AND epoch = $2 AND owner = $3",
                   static_cast<int64_t>(lease.shard), lease.epoch, node_id, to);
  });
}

caf::error release_lease(pg_pool& pool, const std::string& node_id, held_lease lease) {
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    // handoff_to stays: the node it was meant for takes this lease first.
    tx.exec_params("UPDATE shard_leases SET owner = NULL, heartbeat_at = NULL"
                   " WHERE shard = $1 AND epoch = $2 AND owner = $3",
                   static_cast<int64_t>(lease.shard), lease.epoch, node_id);
    tx.exec(std::string{"NOTIFY "} + cluster_channel);
  });
}

std::string wake_payload(const std::string& part, uint32_t shard) {
  return part + ":" + std::to_string(shard);
}

bool parse_wake_payload(const std::string& payload, std::string& part, uint32_t& shard) {
  auto colon = payload.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == payload.size())
    return false;
  uint64_t n = 0;
  for (size_t i = colon + 1; i < payload.size(); ++i) {
    char c = payload[i];
    if (c < '0' || c > '9')
      return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
    if (n > std::numeric_limits<uint32_t>::max())
      return false;
  }
  part = payload.substr(0, colon);
  shard = static_cast<uint32_t>(n);
  return true;
}

caf::error notify_wakes(pg_pool& pool, const std::vector<std::string>& payloads) {
  std::set<std::string> distinct(payloads.begin(), payloads.end());
  if (distinct.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    values_list rows;
    for (auto& p : distinct)
      rows.row(tx.quote(p));
    tx.exec(std::string{"SELECT pg_notify('"} + wake_channel + "', p) FROM (VALUES " + rows.str()
            + ") AS w(p)");
  });
}

namespace {

/// Calls `f` for every change notified on the cluster channel but this node's own lease
/// acquisitions (their payload is the taker's id): its own new leases are no news to it, and
/// the callback ends a lone node's "alone" (a burst of its own acquisitions at start refused
/// its calls until its next look).
class change_receiver final : public pqxx::notification_receiver {
public:
  change_receiver(pqxx::connection_base& c, std::function<void()>& f, const std::string& me,
                  const char* channel = cluster_channel)
    : pqxx::notification_receiver(c, channel), f_(f), me_(me) {}
  void operator()(const std::string& payload, int) override {
    if (me_.empty() || payload != me_)
      f_();
  }

private:
  std::function<void()>& f_;
  const std::string& me_;
};

class wake_receiver final : public pqxx::notification_receiver {
public:
  wake_receiver(pqxx::connection_base& c, std::function<void(const std::string&)>& f)
    : pqxx::notification_receiver(c, wake_channel), f_(f) {}
  void operator()(const std::string& payload, int) override { f_(payload); }

private:
  std::function<void(const std::string&)>& f_;
};

} // namespace

struct cluster_listener::impl {
  std::string dsn;
  std::function<void()> on_change;
  std::function<void(const std::string&)> on_wake; ///< empty: no LISTEN on wake_channel
  std::function<void(bool)> on_lock;               ///< the liveness lock taken / its session lost
  std::string node_id; ///< empty: no liveness lock, no watch for gone nodes
  std::atomic<bool> watch_others{true};
  std::atomic<bool> stopping{false};
  std::atomic<bool> locked{false};
  std::thread thread;

  /// The DSN with a connect timeout and TCP keepalives, so a dead server is noticed (and the
  /// destructor's join never waits on a hanging connect for long); the DSN's own settings win.
  std::string listen_dsn() const {
    return with_conninfo_defaults(dsn, {{"connect_timeout", "5"},
                                        {"keepalives", "1"},
                                        {"keepalives_idle", "10"},
                                        {"keepalives_interval", "5"},
                                        {"keepalives_count", "3"}});
  }

  /// Takes the node's liveness lock if nobody holds it; true once held.
  bool try_lock(pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT pg_try_advisory_lock(1735357300, lock_key) FROM nodes"
                            " WHERE node_id = $1",
                            node_id);
    if (r.empty() || !r[0][0].as<bool>())
      return false;
    tx.exec_params("UPDATE nodes SET locked_since = now() WHERE node_id = $1", node_id);
    return true;
  }

  /// The shards owned by nodes whose process is gone, as text ("" when none).
  static std::string gone_owners_shards(pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec("SELECT coalesce(string_agg(owner || ':' || shard, ',' ORDER BY shard), '')"
                     " FROM shard_leases WHERE owner IN (SELECT node_id FROM gone_nodes)");
    return r[0][0].as<std::string>();
  }

  void run() {
    while (!stopping) {
      try {
        pqxx::connection c{listen_dsn()};
        change_receiver r{c, on_change, node_id};
        // The shard map changed (the catalog's database: a range moved, a group was added).
        change_receiver m{c, on_change, node_id, groups_channel};
        std::optional<wake_receiver> w;
        if (on_wake)
          w.emplace(c, on_wake);
        std::string seen_gone;
        if (!node_id.empty()) {
          pqxx::nontransaction tx{c};
          tx.exec("SET application_name = " + tx.quote(application_name(node_id) + "/live"));
        }
        while (!stopping) {
          if (!node_id.empty() && !locked && try_lock(c)) {
            locked = true;
            // A restarted node takes its previous incarnation's leases back now: the owner of
            // on_lock looks (not on_change, which means another node changed something).
            if (on_lock)
              on_lock(true);
            else
              on_change();
          }
          c.await_notification(0, 200'000);
          if (!node_id.empty() && watch_others) {
            auto gone = gone_owners_shards(c);
            if (gone != seen_gone) {
              seen_gone = gone;
              if (!gone.empty())
                on_change();
            }
          }
        }
      } catch (const std::exception&) {
        // The server went away (the lock with it): reconnect in a second (the heartbeat
        // covers the gap).
        if (locked.exchange(false) && on_lock)
          on_lock(false);
        for (int i = 0; i < 5 && !stopping; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds{200});
      }
    }
  }
};

cluster_listener::cluster_listener(std::string dsn, std::function<void()> on_change,
                                   std::string node_id,
                                   std::function<void(const std::string&)> on_wake,
                                   std::function<void(bool)> on_lock)
  : impl_(std::make_unique<impl>()) {
  impl_->dsn = std::move(dsn);
  impl_->on_change = std::move(on_change);
  impl_->on_wake = std::move(on_wake);
  impl_->on_lock = std::move(on_lock);
  impl_->node_id = std::move(node_id);
  auto* p = impl_.get();
  impl_->thread = std::thread{[p] { p->run(); }};
}

cluster_listener::~cluster_listener() {
  impl_->stopping = true;
  if (impl_->thread.joinable())
    impl_->thread.join();
}

bool cluster_listener::holds_liveness_lock() const {
  return impl_->locked;
}

void cluster_listener::watch_others(bool on) {
  impl_->watch_others = on;
}

} // namespace gost::persistence
