#include "gost/persistence/scheduled/actions.hpp"

#include <set>
#include <unordered_map>

#include "gost/persistence/random_id.hpp"
#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

std::string bytes_of(const google::protobuf::MessageLite& m) {
  std::string out;
  m.SerializeToString(&out);
  return out;
}

/// An action from its (meta, spec, status) columns at `first`.
v1::ScheduledAction action_of(const pqxx::row& row, int first) {
  v1::ScheduledAction a;
  auto parse = [&](google::protobuf::MessageLite& m, int col, const char* what) {
    if (!m.ParseFromString(pqxx::binarystring{row[first + col]}.str()))
      throw std::runtime_error{std::string{"scheduled_actions."} + what + " does not parse"};
  };
  parse(*a.mutable_meta(), 0, "meta");
  parse(*a.mutable_spec(), 1, "spec");
  parse(*a.mutable_status(), 2, "status");
  return a;
}

/// The action's due time for queries and for its queue row: none when paused or when nothing
/// is left; a pending run-now when it is earlier.
std::optional<int64_t> scheduled_column(const v1::ScheduledActionStatus& st) {
  if (st.paused())
    return std::nullopt;
  std::optional<int64_t> due;
  if (!st.finished() && st.scheduled_at_ms() != 0)
    due = st.scheduled_at_ms();
  if (st.run_now_at_ms() != 0 && (!due || st.run_now_at_ms() < *due))
    due = st.run_now_at_ms();
  return due;
}

/// Appends `records` to the attempt log of `id` and trims it to the last attempts_kept.
void write_attempts(pqxx::transaction_base& tx, const std::string& id,
                    const std::vector<attempt_record>& records) {
  if (records.empty())
    return;
  for (auto& r : records)
    tx.exec_params("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms, attempt,"
                   " outcome, error, duration_ms, node, shard, epoch, run_now)"
                   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                   id, r.at_ms, r.occurrence_ms, r.attempt, r.outcome, r.error, r.duration_ms,
                   r.node, r.shard, r.epoch, r.run_now);
  tx.exec_params("DELETE FROM scheduled_attempts WHERE action_id = $1 AND seq <= (SELECT seq"
                 " FROM scheduled_attempts WHERE action_id = $1 ORDER BY seq DESC"
                 " OFFSET $2 LIMIT 1)",
                 id, attempts_kept);
}

/// Writes the whole action (meta, spec, status and the query columns) over its row.
void write_action(pqxx::transaction_base& tx, const v1::ScheduledAction& a) {
  tx.exec_params("UPDATE scheduled_actions SET action_guid = $2, meta = $3, spec = $4,"
                 " status = $5, status_scheduled_at_ms = $6, failures_in_row = $7, paused = $8"
                 " WHERE action_id = $1",
                 a.meta().id(), a.meta().guid(), pqxx::binarystring{bytes_of(a.meta())},
                 pqxx::binarystring{bytes_of(a.spec())}, pqxx::binarystring{bytes_of(a.status())},
                 scheduled_column(a.status()), a.status().failures_in_row(), a.status().paused());
}

void insert_incoming(pqxx::transaction_base& tx, const v1::ScheduledAction& a, uint32_t shard) {
  tx.exec_params("INSERT INTO scheduled_incoming (shard, action_id, action_guid, scheduled_at_ms)"
                 " VALUES ($1, $2, $3, $4)",
                 static_cast<int64_t>(shard), a.meta().id(), a.meta().guid(),
                 scheduled_column(a.status()));
}

/// True when the lease of `l.shard` is at `l.epoch` and names `l.owner`; holds a takeover
/// until the commit.
bool fence(pqxx::transaction_base& tx, const scheduled_lease& l) {
  return !tx.exec_params("SELECT 1 FROM shard_leases WHERE shard = $1 AND epoch = $2"
                         " AND owner = $3 FOR SHARE",
                         static_cast<int64_t>(l.shard), l.epoch, l.owner)
            .empty();
}

/// The API's writes go to the database of the action's group without a lease of their own:
/// each holds the lease rows of the shards it writes (FOR SHARE, in shard order as a heartbeat
/// locks them) and is refused while one is fenced by a move (`moved:<target>`, ADR 0023): a
/// move's fence waits for the writes in flight, and none lands after its last catch-up. The
/// shards are its queue rows' and its actions' home shards (a part of a group may move, an
/// action's queue rows being on other shards than its home).
caf::error check_not_moving(pqxx::transaction_base& tx, const std::set<uint32_t>& shards) {
  std::string list;
  for (auto s : shards)
    list += (list.empty() ? "" : ",") + std::to_string(s);
  for (auto row : tx.exec("SELECT shard, coalesce(owner, '') FROM shard_leases WHERE shard = ANY("
                          "'{"
                          + list + "}'::int[]) ORDER BY shard FOR SHARE"))
    if (row[1].as<std::string>().rfind("moved:", 0) == 0)
      return make_db_error(db_errc::unavailable,
                           "shard " + row[0].as<std::string>()
                             + " is moving to another shard group's database (gostctl "
                               "move-shards): retry in a moment");
  return {};
}

} // namespace

const char* to_string(step_outcome x) {
  switch (x) {
    case step_outcome::none: return "none";
    case step_outcome::moved: return "moved";
    case step_outcome::dropped: return "dropped";
    case step_outcome::done: return "done";
    case step_outcome::fenced: return "fenced";
  }
  return "?";
}

caf::error create_scheduled_action(pg_pool& pool, const v1::ScheduledAction& a,
                                   uint32_t incoming_shard, uint32_t home_shard) {
  bool taken = false;
  caf::error moving;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    if ((moving = check_not_moving(tx, {incoming_shard, home_shard})))
      return;
    auto r = tx.exec_params(
      "INSERT INTO scheduled_actions (action_id, action_guid, meta, spec, status,"
      " status_scheduled_at_ms, failures_in_row, paused) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
      " ON CONFLICT (action_id) DO NOTHING RETURNING 1",
      a.meta().id(), a.meta().guid(), pqxx::binarystring{bytes_of(a.meta())},
      pqxx::binarystring{bytes_of(a.spec())}, pqxx::binarystring{bytes_of(a.status())},
      scheduled_column(a.status()), a.status().failures_in_row(), a.status().paused());
    taken = r.empty();
    if (taken)
      return;
    insert_incoming(tx, a, incoming_shard);
    tx.commit();
  });
  if (err)
    return err;
  if (moving)
    return moving;
  if (taken)
    return make_db_error(db_errc::already_exists,
                         "scheduled action '" + a.meta().id() + "' exists; update it instead");
  return {};
}

caf::error
create_scheduled_actions(pg_pool& pool,
                         const std::vector<std::pair<v1::ScheduledAction, uint32_t>>& actions,
                         const std::set<uint32_t>& home_shards) {
  if (actions.empty())
    return {};
  std::string taken;
  caf::error moving;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    taken.clear();
    pqxx::work tx{c};
    auto shards = home_shards;
    for (auto& a : actions)
      shards.insert(a.second);
    if ((moving = check_not_moving(tx, shards)))
      return;
    values_list rows, incoming;
    blob_params blobs;
    for (auto& [a, shard] : actions) {
      auto due = scheduled_column(a.status());
      auto due_sql = due ? std::to_string(*due) : std::string{"NULL::bigint"};
      rows.row(tx.quote(a.meta().id()) + "," + tx.quote(a.meta().guid()) + ","
               + blobs.add(bytes_of(a.meta())) + "," + blobs.add(bytes_of(a.spec())) + ","
               + blobs.add(bytes_of(a.status())) + "," + due_sql + ","
               + std::to_string(a.status().failures_in_row()));
      incoming.row(std::to_string(shard) + "," + tx.quote(a.meta().id()) + ","
                   + tx.quote(a.meta().guid()) + "," + due_sql);
    }
    auto r =
      blobs.exec(tx, "INSERT INTO scheduled_actions (action_id, action_guid, meta, spec,"
                     " status, status_scheduled_at_ms, failures_in_row) VALUES "
                       + rows.str() + " ON CONFLICT (action_id) DO NOTHING RETURNING action_id");
    if (r.size() != actions.size()) {
      // Name one taken id; the transaction is dropped (nothing stored).
      std::unordered_map<std::string, bool> stored;
      for (auto row : r)
        stored.emplace(row[0].as<std::string>(), true);
      for (auto& a : actions)
        if (stored.count(a.first.meta().id()) == 0) {
          taken = a.first.meta().id();
          break;
        }
      if (taken.empty())
        taken = "?"; // the same id twice in the batch
      return;
    }
    tx.exec("INSERT INTO scheduled_incoming (shard, action_id, action_guid, scheduled_at_ms)"
            " VALUES "
            + incoming.str());
    tx.commit();
  });
  if (err)
    return err;
  if (moving)
    return moving;
  if (!taken.empty())
    return make_db_error(db_errc::already_exists,
                         "scheduled action '" + taken + "' exists; nothing of the batch stored");
  return {};
}

caf::expected<v1::ScheduledAction>
change_scheduled_action(pg_pool& pool, const std::string& id,
                        const std::function<caf::error(v1::ScheduledAction&)>& change,
                        uint32_t incoming_shard, uint32_t home_shard,
                        std::vector<attempt_record>* records) {
  v1::ScheduledAction out;
  caf::error refusal;
  bool missing = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    refusal = caf::error{};
    pqxx::work tx{c};
    if ((refusal = check_not_moving(tx, {incoming_shard, home_shard})))
      return;
    auto r = tx.exec_params(
      "SELECT meta, spec, status FROM scheduled_actions WHERE action_id = $1 FOR UPDATE", id);
    missing = r.empty();
    if (missing)
      return;
    out = action_of(r[0], 0);
    auto guid = out.meta().guid();
    if (records != nullptr)
      records->clear();
    if ((refusal = change(out)))
      return;
    if (out.meta().guid() == guid)
      return; // nothing to change
    write_action(tx, out);
    insert_incoming(tx, out, incoming_shard);
    if (records != nullptr)
      write_attempts(tx, id, *records);
    tx.commit();
  });
  if (err)
    return err;
  if (missing)
    return make_db_error(db_errc::not_found, "no scheduled action '" + id + "'");
  if (refusal)
    return refusal;
  return out;
}

caf::expected<int64_t> rehome_scheduled_actions(pg_pool& pool, uint32_t first, uint32_t last,
                                                uint32_t shard_count) {
  auto range = [&](const std::string& shard) {
    return "(" + shard + " BETWEEN " + std::to_string(first) + " AND " + std::to_string(last) + ")";
  };
  auto home = "gost_shard_of(a.action_id, " + std::to_string(shard_count) + ")";
  std::vector<std::pair<std::string, uint32_t>> found; // action, home shard
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    found.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec("SELECT DISTINCT a.action_id, " + home
                            + " FROM scheduled_actions a JOIN (SELECT shard, action_id,"
                              " action_guid FROM scheduled_incoming UNION ALL SELECT shard,"
                              " action_id, action_guid FROM scheduled_processing) q"
                              " USING (action_id, action_guid) WHERE "
                            + range(home) + " <> " + range("q.shard")))
      found.emplace_back(row[0].as<std::string>(), row[1].as<uint32_t>());
  });
  if (err)
    return err;
  int64_t done = 0;
  for (auto& [id, shard] : found) {
    bool changed = false;
    err = with_connection(pool, [&](pqxx::connection& c) {
      changed = false;
      pqxx::work tx{c};
      auto r = tx.exec_params(
        "SELECT meta, spec, status FROM scheduled_actions WHERE action_id = $1 FOR UPDATE", id);
      if (r.empty())
        return; // deleted meanwhile
      auto a = action_of(r[0], 0);
      a.mutable_meta()->set_guid(random_id());
      write_action(tx, a);
      insert_incoming(tx, a, shard);
      tx.commit();
      changed = true;
    });
    if (err)
      return err;
    done += changed ? 1 : 0;
  }
  return done;
}

caf::expected<bool> delete_scheduled_action(pg_pool& pool, const std::string& id,
                                            uint32_t home_shard) {
  bool deleted = false;
  caf::error moving;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    if ((moving = check_not_moving(tx, {home_shard})))
      return;
    deleted =
      !tx.exec_params("DELETE FROM scheduled_actions WHERE action_id = $1 RETURNING 1", id).empty();
    tx.commit();
  });
  if (err)
    return err;
  if (moving)
    return moving;
  return deleted;
}

caf::expected<std::optional<v1::ScheduledAction>> get_scheduled_action(pg_pool& pool,
                                                                       const std::string& id) {
  std::optional<v1::ScheduledAction> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params("SELECT meta, spec, status FROM scheduled_actions WHERE action_id = $1", id);
    if (!r.empty())
      out = action_of(r[0], 0);
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<attempt_record>> attempts_of(pg_pool& pool, const std::string& id,
                                                       size_t limit) {
  std::vector<attempt_record> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec_params("SELECT at_ms, occurrence_ms, attempt, outcome, error,"
                                   " duration_ms, node, run_now, shard, epoch"
                                   " FROM scheduled_attempts"
                                   " WHERE action_id = $1 ORDER BY seq DESC LIMIT $2",
                                   id, static_cast<int64_t>(limit))) {
      attempt_record a;
      a.at_ms = row[0].as<int64_t>();
      a.occurrence_ms = row[1].as<int64_t>();
      a.attempt = row[2].as<int32_t>();
      a.outcome = row[3].as<std::string>();
      a.error = row[4].as<std::string>();
      if (!row[5].is_null())
        a.duration_ms = row[5].as<int64_t>();
      a.node = row[6].as<std::string>();
      a.run_now = row[7].as<bool>();
      if (!row[8].is_null())
        a.shard = row[8].as<int64_t>();
      if (!row[9].is_null())
        a.epoch = row[9].as<int64_t>();
      out.push_back(std::move(a));
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<scheduled_queue_row>> queue_rows_of(pg_pool& pool, const std::string& id,
                                                              const std::string& guid) {
  std::vector<scheduled_queue_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT false, shard, scheduled_at_ms FROM scheduled_incoming"
                            " WHERE action_id = $1 AND action_guid = $2 UNION ALL"
                            " SELECT true, shard, scheduled_at_ms FROM scheduled_processing"
                            " WHERE action_id = $1 AND action_guid = $2",
                            id, guid);
    for (auto row : r)
      out.push_back(
        {row[0].as<bool>(), row[1].as<uint32_t>(), id, guid,
         row[2].is_null() ? std::nullopt : std::optional<int64_t>{row[2].as<int64_t>()}});
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<v1::ScheduledAction>> list_scheduled_actions(pg_pool& pool,
                                                                       const std::string& after_id,
                                                                       size_t limit,
                                                                       const scheduled_filter& f) {
  std::vector<v1::ScheduledAction> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params(
      // Byte order (migration 0025's index): the scheduler merges groups' pages in it.
      "SELECT meta, spec, status FROM scheduled_actions WHERE action_id COLLATE \"C\" > $1"
      " AND (NOT $2 OR status_scheduled_at_ms <= $3) AND (NOT $4 OR failures_in_row > 0)"
      " AND (NOT $6 OR paused) ORDER BY action_id COLLATE \"C\" LIMIT $5",
      after_id, f.due, f.now_ms, f.failing, static_cast<int64_t>(limit), f.paused);
    for (auto row : r)
      out.push_back(action_of(row, 0));
  });
  if (err)
    return err;
  return out;
}

caf::expected<step_outcome> move_one_incoming(pg_pool& pool, const scheduled_lease& lease,
                                              const std::string& sync_guid) {
  step_outcome out = step_outcome::none;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    if (!fence(tx, lease)) {
      out = step_outcome::fenced;
      return;
    }
    auto in = tx.exec_params("SELECT seq, created_at, action_id, action_guid"
                             " FROM scheduled_incoming WHERE shard = $1 ORDER BY seq LIMIT 1"
                             " FOR UPDATE SKIP LOCKED",
                             static_cast<int64_t>(lease.shard));
    if (in.empty()) {
      out = step_outcome::none;
      return;
    }
    auto seq = in[0][0].as<int64_t>();
    auto created_at = in[0][1].as<std::string>();
    auto id = in[0][2].as<std::string>();
    auto guid = in[0][3].as<std::string>();
    // FOR SHARE: an API change of this action waits for the move (or the move for it), so the
    // guid compared is the guid at commit.
    auto a = tx.exec_params("SELECT action_guid, status_scheduled_at_ms FROM scheduled_actions"
                            " WHERE action_id = $1 FOR SHARE",
                            id);
    tx.exec_params("DELETE FROM scheduled_incoming WHERE shard = $1 AND seq = $2",
                   static_cast<int64_t>(lease.shard), seq);
    if (a.empty() || a[0][0].as<std::string>() != guid) {
      out = step_outcome::dropped;
    } else {
      tx.exec_params("INSERT INTO scheduled_processing (shard, action_id, action_guid,"
                     " scheduled_at_ms, added_to_incoming_at, moved_by_sync, moved_at)"
                     " VALUES ($1, $2, $3, $4, $5::timestamptz, $6, now())",
                     static_cast<int64_t>(lease.shard), id, guid,
                     a[0][1].is_null() ? std::nullopt
                                       : std::optional<int64_t>{a[0][1].as<int64_t>()},
                     created_at, sync_guid);
      out = step_outcome::moved;
    }
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<move_counts> move_incoming(pg_pool& pool, const scheduled_lease& lease,
                                         const std::string& sync_guid, size_t limit) {
  move_counts out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = move_counts{};
    pqxx::work tx{c};
    if (!fence(tx, lease)) {
      out.fenced = true;
      return;
    }
    // One statement: the oldest incoming rows (SKIP LOCKED), deleted; those whose guid is the
    // action's current one (the action locked FOR SHARE, in id order as every multi-action
    // step locks: an API change waits for the commit, and a change committed meanwhile is
    // re-read, so its new guid drops the row) go to processing, due at the action's
    // status_scheduled_at_ms or parked.
    auto r = tx.exec_params(
      "WITH picked AS (SELECT seq FROM scheduled_incoming WHERE shard = $1 ORDER BY seq"
      " LIMIT $3 FOR UPDATE SKIP LOCKED),"
      " gone AS (DELETE FROM scheduled_incoming i USING picked p WHERE i.shard = $1"
      " AND i.seq = p.seq RETURNING i.created_at, i.action_id, i.action_guid),"
      " cur AS (SELECT g.created_at, a.action_id, a.action_guid, a.status_scheduled_at_ms"
      " FROM gone g JOIN scheduled_actions a ON a.action_id = g.action_id"
      " AND a.action_guid = g.action_guid ORDER BY a.action_id FOR SHARE OF a),"
      " ins AS (INSERT INTO scheduled_processing (shard, action_id, action_guid,"
      " scheduled_at_ms, added_to_incoming_at, moved_by_sync, moved_at)"
      " SELECT $1, action_id, action_guid, status_scheduled_at_ms, created_at, $2, now()"
      " FROM cur RETURNING 1)"
      " SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM ins)",
      static_cast<int64_t>(lease.shard), sync_guid, static_cast<int64_t>(limit));
    auto gone = r[0][0].as<int64_t>();
    out.moved = r[0][1].as<int64_t>();
    out.dropped = gone - out.moved;
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<due_row>> due_rows(pg_pool& pool, uint32_t shard, int64_t now_ms,
                                             size_t limit) {
  std::vector<due_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT action_id, action_guid, scheduled_at_ms"
                        " FROM scheduled_processing WHERE shard = $1"
                        " AND scheduled_at_ms <= $2 ORDER BY scheduled_at_ms LIMIT $3",
                        static_cast<int64_t>(shard), now_ms, static_cast<int64_t>(limit)))
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>()});
  });
  if (err)
    return err;
  return out;
}

caf::expected<shard_work> look_at_shard(pg_pool& pool, uint32_t shard) {
  shard_work out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out = shard_work{};
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params("SELECT EXISTS (SELECT 1 FROM scheduled_incoming WHERE shard = $1),"
                     " (SELECT min(scheduled_at_ms) FROM scheduled_processing WHERE shard = $1"
                     " AND scheduled_at_ms IS NOT NULL)",
                     static_cast<int64_t>(shard));
    out.incoming = r[0][0].as<bool>();
    if (!r[0][1].is_null())
      out.next_due = r[0][1].as<int64_t>();
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<shard_work>> look_at_shards(pg_pool& pool,
                                                      const std::vector<uint32_t>& shards) {
  std::vector<shard_work> out;
  if (shards.empty())
    return out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.assign(shards.size(), shard_work{});
    pqxx::nontransaction tx{c};
    // Two index probes per shard (scheduled_incoming's key, scheduled_processing_due).
    auto r =
      tx.exec("SELECT s.i, EXISTS (SELECT 1 FROM scheduled_incoming i WHERE i.shard = s.shard),"
              " (SELECT min(scheduled_at_ms) FROM scheduled_processing p"
              " WHERE p.shard = s.shard AND p.scheduled_at_ms IS NOT NULL)"
              " FROM unnest('{"
              + number_list(shards) + "}'::integer[]) WITH ORDINALITY AS s(shard, i)");
    for (auto row : r) {
      auto& w = out.at(row[0].as<size_t>() - 1);
      w.incoming = row[1].as<bool>();
      if (!row[2].is_null())
        w.next_due = row[2].as<int64_t>();
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<step_outcome> update_due_action(
  pg_pool& pool, const scheduled_lease& lease, const due_row& row, const std::string& sync_guid,
  const std::function<action_change(v1::ScheduledAction&)>& fn, v1::ScheduledAction* out) {
  step_outcome outcome = step_outcome::none;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    if (!fence(tx, lease)) {
      outcome = step_outcome::fenced;
      return;
    }
    auto r = tx.exec_params("SELECT action_guid, meta, spec, status FROM scheduled_actions"
                            " WHERE action_id = $1 FOR UPDATE",
                            row.action_id);
    if (r.empty() || r[0][0].as<std::string>() != row.action_guid) {
      tx.exec_params("DELETE FROM scheduled_processing WHERE shard = $1 AND action_id = $2"
                     " AND action_guid = $3",
                     static_cast<int64_t>(lease.shard), row.action_id, row.action_guid);
      tx.commit();
      outcome = step_outcome::dropped;
      return;
    }
    auto a = action_of(r[0], 1);
    auto change = fn(a);
    if (change.write) {
      write_action(tx, a);
      write_attempts(tx, row.action_id, change.records);
      tx.exec_params("UPDATE scheduled_processing SET scheduled_at_ms = $4,"
                     " last_reschedule_by_sync = $5, last_reschedule_at = now()"
                     " WHERE shard = $1 AND action_id = $2 AND action_guid = $3",
                     static_cast<int64_t>(lease.shard), row.action_id, row.action_guid,
                     change.due_ms, sync_guid);
      tx.commit();
    }
    if (out != nullptr)
      *out = std::move(a);
    outcome = change.write ? step_outcome::done : step_outcome::none;
  });
  if (err)
    return err;
  return outcome;
}

caf::expected<std::vector<step_outcome>>
update_due_actions(pg_pool& pool, const scheduled_lease& lease, const std::vector<due_row>& rows,
                   const std::string& sync_guid,
                   const std::function<action_change(size_t, v1::ScheduledAction&)>& fn) {
  std::vector<step_outcome> out;
  if (rows.empty())
    return out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.assign(rows.size(), step_outcome::none);
    pqxx::work tx{c};
    std::vector<std::string> ids;
    for (auto& row : rows)
      ids.push_back(row.action_id);
    auto shard = std::to_string(lease.shard);
    // The fence and the actions in one round trip: the lease row FOR SHARE (as fence() does),
    // the actions FOR UPDATE in id order (as every multi-action step locks: no deadlock
    // between steps), and one row of NULLs when the lease is held; nothing at all when not.
    auto r = tx.exec("WITH lease AS MATERIALIZED (SELECT 1 FROM shard_leases WHERE shard = " + shard
                     + " AND epoch = " + std::to_string(lease.epoch)
                     + " AND owner = " + tx.quote(lease.owner)
                     + " FOR SHARE) SELECT a.* FROM lease, LATERAL (SELECT action_id, action_guid,"
                       " meta, spec, status FROM scheduled_actions WHERE action_id IN ("
                     + quoted_list(tx, ids)
                     + ") ORDER BY action_id FOR UPDATE) a UNION ALL SELECT NULL, NULL, NULL,"
                       " NULL, NULL FROM lease");
    if (r.empty()) {
      out.assign(1, step_outcome::fenced);
      return;
    }
    std::unordered_map<std::string, pqxx::row> by_id;
    for (auto row : r)
      if (!row[0].is_null())
        by_id.emplace(row[0].as<std::string>(), row);
    values_list stale, statuses, reschedules, attempts, logged;
    blob_params blobs;
    auto opt = [](const std::optional<int64_t>& v) {
      return v ? std::to_string(*v) : std::string{"NULL::bigint"};
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      auto& row = rows[i];
      auto it = by_id.find(row.action_id);
      if (it == by_id.end() || it->second[1].as<std::string>() != row.action_guid) {
        stale.row(tx.quote(row.action_id) + "," + tx.quote(row.action_guid));
        out[i] = step_outcome::dropped;
        continue;
      }
      auto a = action_of(it->second, 2);
      auto change = fn(i, a);
      if (!change.write)
        continue;
      auto due_col = scheduled_column(a.status());
      statuses.row(tx.quote(row.action_id) + "," + blobs.add(bytes_of(a.status())) + ","
                   + (due_col ? std::to_string(*due_col) : std::string{"NULL::bigint"}) + ","
                   + std::to_string(a.status().failures_in_row()));
      reschedules.row(
        tx.quote(row.action_id) + "," + tx.quote(row.action_guid) + ","
        + (change.due_ms ? std::to_string(*change.due_ms) : std::string{"NULL::bigint"}));
      for (auto& rec : change.records)
        attempts.row(tx.quote(row.action_id) + "," + std::to_string(rec.at_ms) + ","
                     + std::to_string(rec.occurrence_ms) + "," + std::to_string(rec.attempt) + ","
                     + tx.quote(rec.outcome) + "," + tx.quote(rec.error) + ","
                     + opt(rec.duration_ms) + "," + tx.quote(rec.node) + ","
                     + (rec.shard ? std::to_string(*rec.shard) : std::string{"NULL::integer"}) + ","
                     + opt(rec.epoch) + "," + (rec.run_now ? "true" : "false"));
      if (!change.records.empty())
        logged.row(tx.quote(row.action_id));
      out[i] = step_outcome::done;
    }
    if (!stale.empty())
      tx.exec("DELETE FROM scheduled_processing p USING (VALUES " + stale.str()
              + ") AS v(id, guid) WHERE p.shard = " + shard
              + " AND p.action_id = v.id AND p.action_guid = v.guid");
    if (!statuses.empty()) // one statement: the statuses and the rows' due times
      blobs.exec(tx, "WITH s AS (UPDATE scheduled_actions a SET status = v.status,"
                     " status_scheduled_at_ms = v.due, failures_in_row = v.failures FROM (VALUES "
                       + statuses.str()
                       + ") AS v(id, status, due, failures) WHERE a.action_id = v.id)"
                         " UPDATE scheduled_processing p SET scheduled_at_ms = v.due,"
                         " last_reschedule_by_sync = "
                       + tx.quote(sync_guid) + ", last_reschedule_at = now() FROM (VALUES "
                       + reschedules.str() + ") AS v(id, guid, due) WHERE p.shard = " + shard
                       + " AND p.action_id = v.id AND p.action_guid = v.guid");
    if (!attempts.empty()) {
      // The attempt log (as write_attempts does per action): all entries in one statement,
      // then each logged action's log trimmed to its last attempts_kept.
      tx.exec("INSERT INTO scheduled_attempts (action_id, at_ms, occurrence_ms, attempt, outcome,"
              " error, duration_ms, node, shard, epoch, run_now) VALUES "
              + attempts.str());
      tx.exec("DELETE FROM scheduled_attempts s USING (VALUES " + logged.str()
              + ") AS v(id) WHERE s.action_id = v.id AND s.seq <= (SELECT t.seq FROM"
                " scheduled_attempts t WHERE t.action_id = v.id ORDER BY t.seq DESC OFFSET "
              + std::to_string(attempts_kept) + " LIMIT 1)");
    }
    tx.commit();
  });
  if (err)
    return err;
  return out;
}

caf::expected<int64_t> sweep_parked(pg_pool& pool, const scheduled_lease& lease) {
  int64_t n = -1;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    if (!fence(tx, lease)) {
      n = -1;
      return;
    }
    n = static_cast<int64_t>(
      tx.exec_params("DELETE FROM scheduled_processing p WHERE p.shard = $1"
                     " AND p.scheduled_at_ms IS NULL AND NOT EXISTS (SELECT 1 FROM"
                     " scheduled_actions a WHERE a.action_id = p.action_id"
                     " AND a.action_guid = p.action_guid)",
                     static_cast<int64_t>(lease.shard))
        .affected_rows());
    tx.commit();
  });
  if (err)
    return err;
  return n;
}

} // namespace gost::persistence
