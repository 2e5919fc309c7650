#include "gost/persistence/scheduled/actions.hpp"

#include "pg_internal.hpp"

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

/// True when the lease of `l.shard` is at `l.epoch`; holds a takeover until the commit.
bool fence(pqxx::transaction_base& tx, const scheduled_lease& l) {
  return !tx.exec_params("SELECT 1 FROM shard_leases WHERE shard = $1 AND epoch = $2 FOR SHARE",
                         static_cast<int64_t>(l.shard), l.epoch)
            .empty();
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
                                   uint32_t incoming_shard) {
  bool taken = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
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
  if (taken)
    return make_db_error(db_errc::already_exists,
                         "scheduled action '" + a.meta().id() + "' exists; update it instead");
  return {};
}

caf::expected<v1::ScheduledAction>
change_scheduled_action(pg_pool& pool, const std::string& id,
                        const std::function<caf::error(v1::ScheduledAction&)>& change,
                        uint32_t incoming_shard, std::vector<attempt_record>* records) {
  v1::ScheduledAction out;
  caf::error refusal;
  bool missing = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    refusal = caf::error{};
    pqxx::work tx{c};
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

caf::expected<bool> delete_scheduled_action(pg_pool& pool, const std::string& id) {
  bool deleted = false;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    deleted =
      !tx.exec_params("DELETE FROM scheduled_actions WHERE action_id = $1 RETURNING 1", id).empty();
    tx.commit();
  });
  if (err)
    return err;
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
      "SELECT meta, spec, status FROM scheduled_actions WHERE action_id > $1"
      " AND (NOT $2 OR status_scheduled_at_ms <= $3) AND (NOT $4 OR failures_in_row > 0)"
      " AND (NOT $6 OR paused) ORDER BY action_id LIMIT $5",
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
