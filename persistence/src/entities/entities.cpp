#include "gost/persistence/entities/entities.hpp"

#include <map>
#include <set>
#include <tuple>

#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

using key = std::pair<std::string, std::string>; ///< (kind, entity_id)

/// The advisory lock class of output inserts ('gosu'; nodes' liveness locks use 'gost').
constexpr int64_t output_lock_class = 1735357301;

/// "(kind, id),(kind, id)" for `(kind, entity_id) IN (VALUES ...)`.
template <class Keys>
std::string key_rows(pqxx::transaction_base& tx, const Keys& keys) {
  values_list rows;
  for (auto& [kind, id] : keys)
    rows.row(tx.quote(kind) + "," + tx.quote(id));
  return rows.str();
}

/// "name<US>due<RS>name<US>due" (load_entities' aggregate) into timers.
std::vector<entity_timer> parse_timers(const std::string& s) {
  std::vector<entity_timer> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    auto end = s.find('\x1e', pos);
    if (end == std::string::npos)
      end = s.size();
    auto unit = s.find('\x1f', pos);
    if (unit != std::string::npos && unit < end)
      out.push_back({s.substr(pos, unit - pos), std::stoll(s.substr(unit + 1, end - unit - 1))});
    pos = end + 1;
  }
  return out;
}

} // namespace

caf::expected<std::vector<write_outcome>>
commit_entity_writes(pg_pool& pool, const std::vector<fenced_write<entity_write>>& writes,
                     const std::string& owner) {
  std::vector<write_outcome> outcomes;
  auto mark = new_commit_mark();
  auto err = commit_marked(pool, mark, [&](pqxx::connection& c) {
    outcomes.assign(writes.size(), write_outcome::conflict);
    // Every statement below is a round trip to the server, waited on while the batch's writers
    // (and the sets queued behind them) wait: statements that need no answer of their own are
    // sent together (docs/operations.md, "CreateTask under 50 ms of database latency").
    pqxx::work tx{c};
    // Fencing per shard, as for offers (FOR SHARE holds a takeover until the commit; the rows
    // locked in shard order, as a heartbeat locks them; the owner and the epoch compared, as
    // held_leases does: a shard another node holds, or none, is fenced), and the current
    // versions of the entities
    // whose version a write checks (plain reads: one writer per shard writes its entities' states,
    // and another node's only under the lease locked here), in the round trip of the commit mark.
    //
    // The shards of the events' targets are locked too (FOR KEY SHARE, locked_leases: their
    // owners' heartbeats do not wait): a target's shard fenced by a move of a part of this
    // group (its lease owned by `moved:<group>`, ADR 0023) has left this database, so its
    // events are kept as forwards, relayed to its new group; and the move's fence waits for
    // this commit, so no event is written here after it.
    std::set<uint32_t> shards;
    std::set<uint32_t> event_shards;
    std::set<key> checked;
    for (auto& w : writes) {
      shards.insert(w.shard);
      if (w.ws.expected_version >= 0)
        checked.emplace(w.ws.kind, w.ws.entity_id);
      for (auto& e : w.ws.events)
        if (!e.forward)
          event_shards.insert(e.shard);
    }
    std::map<uint32_t, int64_t> held;
    std::set<uint32_t> moved_away;
    std::map<key, int64_t> version;
    bool marked = !shards.empty();
    if (marked) {
      auto sql = mark_statements(tx, mark) + "WITH l AS MATERIALIZED ("
                 + locked_leases(tx, shards, event_shards, owner)
                 + ")"
                   " SELECT NULL::text, NULL::text, shard::bigint, epoch FROM l WHERE mine"
                   " UNION ALL SELECT NULL, NULL, shard, NULL FROM l WHERE moved";
      if (!checked.empty())
        sql += " UNION ALL SELECT kind, entity_id, NULL, version FROM entities"
               " WHERE (kind, entity_id) IN (VALUES "
               + key_rows(tx, checked) + ")";
      for (auto row : tx.exec(sql)) {
        if (!row[0].is_null())
          version[{row[0].as<std::string>(), row[1].as<std::string>()}] = row[3].as<int64_t>();
        else if (row[3].is_null())
          moved_away.insert(row[2].as<uint32_t>());
        else
          held[row[2].as<uint32_t>()] = row[3].as<int64_t>();
      }
    }
    std::vector<bool> live(writes.size());
    for (size_t i = 0; i < writes.size(); ++i) {
      auto h = held.find(writes[i].shard);
      live[i] = h != held.end() && h->second == writes[i].epoch;
      if (!live[i])
        outcomes[i] = write_outcome::fenced;
    }
    // Rows seen just now need no insert below (an event's own entity, usually).
    std::set<key> existing;
    for (auto& [k, _] : version)
      existing.insert(k);

    struct final_state {
      int64_t version;
      const std::string* state;
      const std::string* lane;
      uint32_t shard;
      const std::optional<std::string>* tag;
    };
    std::map<key, final_state> states;
    std::set<key> touched; // entities whose pending events change: their due time is recomputed
    std::map<key, std::pair<uint32_t, const std::string*>> targets; // rows to create: shard, lane
    values_list consumed, retried, outputs, cancelled, forwards;
    blob_params output_blobs, forward_blobs;
    std::vector<std::tuple<key, int64_t, uint32_t, const std::string*, int32_t>> dead;
    std::vector<std::pair<const entity_event_out*, bool>> events; // (event, has request id)
    for (size_t i = 0; i < writes.size(); ++i) {
      if (!live[i])
        continue;
      auto& w = writes[i].ws;
      key k{w.kind, w.entity_id};
      auto v = version.end();
      if (w.expected_version >= 0) {
        v = version.find(k);
        if (v == version.end() && w.expected_version == 0)
          v = version.emplace(k, 0).first; // a new entity (an ask before any send): row below
        if (v == version.end() || v->second != w.expected_version)
          continue; // conflict: another event of this entity committed first (or it is gone)
      }
      if (w.answer && !w.answer->request_id.empty()) {
        // An ask's answer is kept with its request id; an id answered already makes the whole
        // write a duplicate (the caller reads the kept answer).
        auto& a = *w.answer;
        auto r = tx.exec_params(
          "INSERT INTO entity_requests (kind, entity_id, request_id, seq, is_ask, reply,"
          " refusal_code, refusal, version)"
          " VALUES ($1, $2, $3, 0, true, CASE WHEN $4 THEN $5::bytea END, NULLIF($6, 0),"
          " NULLIF($7, ''), $8) ON CONFLICT DO NOTHING",
          w.kind, w.entity_id, a.request_id, a.reply.has_value(),
          pqxx::binarystring{a.reply ? *a.reply : std::string{}}, a.refusal_code, a.refusal,
          a.version);
        if (r.affected_rows() == 0) {
          outcomes[i] = write_outcome::duplicate;
          continue;
        }
      }
      if (v != version.end() && w.new_state) {
        v->second += 1;
        states[k] = {v->second, &*w.new_state, &w.lane, writes[i].shard, &w.tag};
      }
      outcomes[i] = write_outcome::committed;
      auto ent = tx.quote(w.kind) + "," + tx.quote(w.entity_id);
      if (w.consumed_seq != 0) {
        consumed.row(ent + "," + std::to_string(w.consumed_seq));
        touched.insert(k);
      }
      if (w.retry_seq != 0) {
        retried.row(ent + "," + std::to_string(w.retry_seq) + "," + std::to_string(w.retry_at_us));
        touched.insert(k);
      }
      if (w.dead_seq != 0) {
        dead.emplace_back(k, w.dead_seq, writes[i].shard, &w.dead_reason, w.dead_attempts);
        touched.insert(k);
      }
      if (existing.count(k) == 0)
        targets.emplace(k, std::make_pair(writes[i].shard, &w.lane));
      for (auto& name : w.cancelled_timers) {
        cancelled.row(ent + "," + tx.quote(name));
        touched.insert(k);
      }
      for (auto& e : w.events) {
        // The target lives in another group's database (or its shard just left this one):
        // relayed later.
        if (e.forward || moved_away.count(e.shard) != 0) {
          forwards.row(std::to_string(writes[i].shard) + "," + tx.quote(e.kind) + ","
                       + tx.quote(e.entity_id) + "," + std::to_string(e.due_at_us) + ","
                       + forward_blobs.add(e.payload));
          continue;
        }
        events.emplace_back(&e, !e.request_id.empty());
        key t{e.kind, e.entity_id};
        touched.insert(t);
        if (existing.count(t) == 0)
          targets.emplace(t, std::make_pair(e.shard, &e.lane));
      }
      for (auto& [lane, payload] : w.outputs)
        outputs.row(tx.quote(w.kind) + "," + tx.quote(lane) + "," + tx.quote(w.entity_id) + ","
                    + output_blobs.add(payload));
    }

    // Changes of pending events without parameters, in order in one round trip (run_plain).
    std::string plain_sql;
    auto run_plain = [&] {
      if (!plain_sql.empty())
        tx.exec(plain_sql);
      plain_sql.clear();
    };
    if (!consumed.empty())
      plain_sql += "DELETE FROM entity_events e USING (VALUES " + consumed.str()
                   + ") AS d(kind, entity_id, seq) WHERE e.kind = d.kind"
                     " AND e.entity_id = d.entity_id AND e.seq = d.seq::bigint;";
    if (!retried.empty())
      plain_sql += "UPDATE entity_events e SET attempts = e.attempts + 1, due_at_us = r.due::bigint"
                   " FROM (VALUES "
                   + retried.str()
                   + ") AS r(kind, entity_id, seq, due) WHERE e.kind = r.kind"
                     " AND e.entity_id = r.entity_id AND e.seq = r.seq::bigint;";
    if (!dead.empty())
      run_plain();
    for (auto& [k, seq, shard, reason, attempts] : dead) {
      tx.exec_params(
        "INSERT INTO entity_dead_letters (kind, entity_id, shard, payload, reason, attempts)"
        " SELECT kind, entity_id, $4, payload, $5, $6 FROM entity_events"
        " WHERE kind = $1 AND entity_id = $2 AND seq = $3",
        k.first, k.second, seq, static_cast<int64_t>(shard), *reason, attempts);
      tx.exec_params("DELETE FROM entity_events WHERE kind = $1 AND entity_id = $2 AND seq = $3",
                     k.first, k.second, seq);
    }
    if (!cancelled.empty())
      plain_sql += "DELETE FROM entity_events e USING (VALUES " + cancelled.str()
                   + ") AS d(kind, entity_id, timer) WHERE e.kind = d.kind"
                     " AND e.entity_id = d.entity_id AND e.timer = d.timer;";
    // (A statement of their own: a timer consumed or cancelled and set again by one handler is
    // deleted, then inserted; within one statement the two would touch one row.)
    run_plain();
    // Then, in one statement of data-modifying WITH queries (each runs to completion; they touch
    // disjoint rows): the rows of entities seen for the first time (a first event sent to
    // them), and the new events: those carrying a request id only the first time that id is
    // seen (a repeat within the batch is one too); named timers replace the pending one of
    // their name (the last set wins within a batch).
    blob_params event_blobs;
    std::string with;
    auto part = [&](const std::string& name, const std::string& sql) {
      with += (with.empty() ? "WITH " : ", ") + name + " AS (" + sql + ")";
    };
    if (!targets.empty()) {
      values_list rows;
      for (auto& [k, t] : targets)
        rows.row(tx.quote(k.first) + "," + tx.quote(k.second) + "," + std::to_string(t.first) + ","
                 + tx.quote(*t.second));
      part("targets", "INSERT INTO entities (kind, entity_id, shard, lane) VALUES " + rows.str()
                        + " ON CONFLICT DO NOTHING");
    }
    values_list plain, keyed;
    std::set<std::tuple<std::string, std::string, std::string>> request_ids;
    std::map<std::tuple<std::string, std::string, std::string>, const entity_event_out*> timers;
    for (auto& [e, with_id] : events) {
      if (!e->timer.empty()) {
        timers[{e->kind, e->entity_id, e->timer}] = e;
        continue;
      }
      if (with_id) {
        if (request_ids.emplace(e->kind, e->entity_id, e->request_id).second)
          keyed.row(tx.quote(e->kind) + "," + tx.quote(e->entity_id) + "," + tx.quote(e->request_id)
                    + "," + std::to_string(e->due_at_us) + "::bigint,"
                    + event_blobs.add(e->payload));
        continue;
      }
      plain.row(tx.quote(e->kind) + "," + tx.quote(e->entity_id) + ","
                + std::to_string(e->due_at_us) + "," + event_blobs.add(e->payload));
    }
    if (!plain.empty())
      part("plain",
           "INSERT INTO entity_events (kind, entity_id, due_at_us, payload) VALUES " + plain.str());
    if (!timers.empty()) {
      values_list rows;
      for (auto& [k, e] : timers)
        rows.row(tx.quote(e->kind) + "," + tx.quote(e->entity_id) + ","
                 + std::to_string(e->due_at_us) + "," + event_blobs.add(e->payload) + ","
                 + tx.quote(e->timer));
      part("timers",
           "INSERT INTO entity_events (kind, entity_id, due_at_us, payload, timer) VALUES "
             + rows.str()
             + " ON CONFLICT (kind, entity_id, timer) WHERE timer IS NOT NULL DO UPDATE"
               " SET due_at_us = EXCLUDED.due_at_us, payload = EXCLUDED.payload,"
               " attempts = 0");
    }
    if (!keyed.empty()) {
      part("keyed(kind, entity_id, request_id, due_at_us, payload)", "VALUES " + keyed.str());
      part("req", "INSERT INTO entity_requests (kind, entity_id, request_id, seq)"
                  " SELECT kind, entity_id, request_id,"
                  " nextval(pg_get_serial_sequence('entity_events', 'seq')) FROM keyed"
                  " ON CONFLICT DO NOTHING RETURNING kind, entity_id, request_id, seq");
      part("firsts", "INSERT INTO entity_events (kind, entity_id, seq, due_at_us, payload)"
                     " SELECT kind, entity_id, req.seq, keyed.due_at_us, keyed.payload"
                     " FROM req JOIN keyed USING (kind, entity_id, request_id)");
    }
    if (!with.empty())
      event_blobs.exec(tx, with + " SELECT 1");
    // One update per entity: its new state (if any) and, when its pending events changed, the
    // kit's queue entry (its earliest event), computed in the same statement.
    if (!states.empty() || !touched.empty()) {
      values_list rows;
      blob_params blobs;
      auto s = states.begin();
      auto t = touched.begin();
      while (s != states.end() || t != touched.end()) {
        bool take_state = t == touched.end() || (s != states.end() && s->first <= *t);
        bool take_touch = s == states.end() || (t != touched.end() && *t <= s->first);
        auto& k = take_state ? s->first : *t;
        auto row = tx.quote(k.first) + "," + tx.quote(k.second) + ",";
        if (take_state) {
          auto& f = s->second;
          row += std::to_string(f.version) + "," + blobs.add(*f.state) + "," + tx.quote(*f.lane)
                 + "," + (*f.tag ? tx.quote(**f.tag) : std::string{"NULL"});
        } else {
          row += "NULL,NULL::bytea,NULL,NULL";
        }
        row += take_touch ? ",true" : ",false";
        rows.row(std::move(row));
        if (take_state)
          ++s;
        if (take_touch)
          ++t;
      }
      blobs.exec(tx, "UPDATE entities e SET version = COALESCE(v.version::bigint, e.version),"
                     " state = CASE WHEN v.version IS NULL THEN e.state ELSE v.state END,"
                     " lane = COALESCE(v.lane::text, e.lane), tag = COALESCE(v.tag::text, e.tag),"
                     " updated_at = CASE WHEN v.version IS NULL THEN e.updated_at ELSE now() END,"
                     " due_at_us = CASE WHEN v.touched THEN (SELECT min(x.due_at_us)"
                     " FROM entity_events x WHERE x.kind = e.kind AND x.entity_id = e.entity_id)"
                     " ELSE e.due_at_us END"
                     " FROM (VALUES "
                       + rows.str()
                       + ") AS v(kind, entity_id, version, state, lane, tag, touched)"
                         " WHERE e.kind = v.kind AND e.entity_id = v.entity_id");
    }
    // Consumers read outputs behind a cursor (their seq): seqs must become visible in their
    // order, so transactions inserting outputs (any writer, any node) take turns, holding the
    // lock from their outputs' insert to their commit. It is taken last, after every row lock
    // of the transaction: a holder waits for no other lock, so it closes no cycle, and it holds
    // the lock two round trips (insert, COMMIT), not the whole transaction's (it was taken
    // first before: every batch with outputs, on every node, then waited for the whole of the
    // others').
    if (!forwards.empty())
      forward_blobs.exec(tx, "INSERT INTO entity_forwards (shard, kind, entity_id, due_at_us,"
                             " payload) VALUES "
                               + forwards.str());
    if (!outputs.empty()) {
      tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(output_lock_class) + ", 0)");
      output_blobs.exec(tx, "INSERT INTO entity_outputs (kind, lane, entity_id, payload) VALUES "
                              + outputs.str());
    }
    if (!marked)
      write_mark(tx, mark);
    tx.commit();
  });
  if (err)
    return err;
  return outcomes;
}

caf::expected<std::vector<entity_row>>
load_entities(pg_pool& pool, const std::vector<std::string>& keys, int64_t now_us, size_t max_due) {
  std::vector<entity_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.assign(keys.size(), entity_row{});
    if (keys.empty())
      return;
    std::map<key, std::vector<size_t>> index;
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string kind, id;
      if (split_entity_key(keys[i], kind, id))
        index[{kind, id}].push_back(i);
    }
    if (index.empty())
      return;
    std::set<key> ks;
    for (auto& [k, _] : index)
      ks.insert(k);
    pqxx::nontransaction tx{c};
    // One statement: each entity's row, its pending events counted (with their earliest due
    // time and its named timers, "name<US>due<RS>..."), and one row per event due now (at most
    // `max_due`, by due time then seq; none: one row with NULLs).
    auto r = tx.exec_params(
      "SELECT e.kind, e.entity_id, e.version, e.state, e.lane, a.n, a.next, a.timers,"
      " d.seq, d.due_at_us, d.attempts, d.payload, d.timer FROM entities e"
      " CROSS JOIN LATERAL (SELECT count(*) AS n, min(x.due_at_us) AS next,"
      " string_agg(x.timer || chr(31) || x.due_at_us, chr(30) ORDER BY x.timer)"
      " FILTER (WHERE x.timer IS NOT NULL) AS timers FROM entity_events x"
      " WHERE x.kind = e.kind AND x.entity_id = e.entity_id) a"
      " LEFT JOIN LATERAL (SELECT x.seq, x.due_at_us, x.attempts, x.payload, x.timer"
      " FROM entity_events x WHERE x.kind = e.kind AND x.entity_id = e.entity_id"
      " AND x.due_at_us <= $1 ORDER BY x.due_at_us, x.seq LIMIT $2) d ON true"
      " WHERE (e.kind, e.entity_id) IN (VALUES "
        + key_rows(tx, ks) + ") ORDER BY e.kind, e.entity_id, d.due_at_us, d.seq",
      now_us, static_cast<int64_t>(max_due));
    const std::vector<size_t>* rows_of = nullptr; // the entity of the previous row
    for (auto row : r) {
      auto& at = index[{row[0].as<std::string>(), row[1].as<std::string>()}];
      bool first = &at != rows_of;
      rows_of = &at;
      for (auto i : at) {
        auto& e = out[i];
        if (first) {
          e.found = true;
          e.version = row[2].as<int64_t>();
          if (!row[3].is_null())
            e.state = pqxx::binarystring{row[3]}.str();
          e.lane = row[4].as<std::string>();
          e.pending = row[5].as<int64_t>();
          e.next_due_us = row[6].is_null() ? 0 : row[6].as<int64_t>();
          if (!row[7].is_null())
            e.timers = parse_timers(row[7].as<std::string>());
        }
        if (!row[8].is_null())
          e.due.push_back({row[8].as<int64_t>(), row[9].as<int64_t>(), row[10].as<int32_t>(),
                           pqxx::binarystring{row[11]}.str(),
                           row[12].is_null() ? std::string{} : row[12].as<std::string>()});
      }
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<queue_entries> due_entities(pg_pool& pool, uint32_t shard, int64_t until_us,
                                          size_t limit, const queue_entry* after) {
  queue_entries out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    std::string after_kind, after_id;
    if (after != nullptr)
      split_entity_key(after->entity_id, after_kind, after_id);
    // The page, then the hint (queue_store): the first entry past the window, one more probe
    // of the same index.
    constexpr const char* hint = " UNION ALL (SELECT kind, entity_id, lane, due_at_us"
                                 " FROM entities WHERE shard = $1 AND due_at_us > $2"
                                 " ORDER BY due_at_us LIMIT 1)";
    auto r = after == nullptr
               ? tx.exec_params(std::string{"(SELECT kind, entity_id, lane, due_at_us FROM entities"
                                            " WHERE shard = $1 AND due_at_us IS NOT NULL"
                                            " AND due_at_us <= $2"
                                            " ORDER BY due_at_us, kind, entity_id LIMIT $3)"}
                                  + hint,
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit))
               : tx.exec_params(std::string{"(SELECT kind, entity_id, lane, due_at_us FROM entities"
                                            " WHERE shard = $1 AND due_at_us IS NOT NULL"
                                            " AND due_at_us <= $2"
                                            " AND (due_at_us, kind, entity_id) > ($4, $5, $6)"
                                            " ORDER BY due_at_us, kind, entity_id LIMIT $3)"}
                                  + hint,
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit),
                                after->due_at_us, after_kind, after_id);
    out.reserve(r.size());
    for (auto row : r) {
      auto kind = row[0].as<std::string>();
      out.push_back({kind + "/" + row[2].as<std::string>(),
                     entity_key(kind, row[1].as<std::string>()), row[3].as<int64_t>(),
                     priority::normal});
    }
    hint_last(out, until_us);
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<entity_output>> read_entity_outputs(pg_pool& pool,
                                                              const std::string& kind,
                                                              const std::string& lane,
                                                              int64_t after_seq, size_t limit) {
  std::vector<entity_output> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT seq, entity_id, payload FROM entity_outputs"
                        " WHERE kind = $1 AND lane = $2 AND seq > $3 ORDER BY seq LIMIT $4",
                        kind, lane, after_seq, static_cast<int64_t>(limit)))
      out.push_back(
        {row[0].as<int64_t>(), row[1].as<std::string>(), pqxx::binarystring{row[2]}.str()});
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::optional<entity_answer>> find_entity_answer(pg_pool& pool,
                                                               const std::string& kind,
                                                               const std::string& id,
                                                               const std::string& request_id) {
  std::optional<entity_answer> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params("SELECT reply, refusal_code, refusal, version FROM entity_requests"
                            " WHERE kind = $1 AND entity_id = $2 AND request_id = $3 AND is_ask",
                            kind, id, request_id);
    if (r.empty())
      return;
    entity_answer a;
    a.request_id = request_id;
    if (!r[0][0].is_null())
      a.reply = pqxx::binarystring{r[0][0]}.str();
    a.refusal_code = r[0][1].is_null() ? 0 : r[0][1].as<int32_t>();
    a.refusal = r[0][2].is_null() ? std::string{} : r[0][2].as<std::string>();
    a.version = r[0][3].is_null() ? 0 : r[0][3].as<int64_t>();
    out = std::move(a);
  });
  if (err)
    return err;
  return out;
}

caf::expected<int64_t> reap_entity_requests(pg_pool& pool, int64_t max_age_s) {
  int64_t n = 0;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto r = tx.exec_params(
      "DELETE FROM entity_requests WHERE created_at < now() - make_interval(secs => $1)",
      static_cast<double>(max_age_s));
    n = static_cast<int64_t>(r.affected_rows());
  });
  if (err)
    return err;
  return n;
}

caf::expected<std::vector<entity_forward>>
read_entity_forwards(pg_pool& pool, const std::vector<uint32_t>& shards, size_t limit) {
  std::vector<entity_forward> out;
  if (shards.empty())
    return out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params("SELECT request_id, shard, kind, entity_id, due_at_us, payload, attempts"
                     " FROM (SELECT DISTINCT ON (kind, entity_id) * FROM entity_forwards"
                     " WHERE shard IN ("
                       + number_list(shards)
                       + ") ORDER BY kind, entity_id, id) head WHERE retry_at <= now()"
                         " ORDER BY id LIMIT $1",
                     static_cast<int64_t>(limit));
    out.reserve(r.size());
    for (auto row : r)
      out.push_back({row[0].as<std::string>(), row[1].as<uint32_t>(), row[2].as<std::string>(),
                     row[3].as<std::string>(), row[4].as<int64_t>(),
                     pqxx::binarystring{row[5]}.str(), row[6].as<int32_t>()});
  });
  if (err)
    return err;
  return out;
}

caf::error
settle_entity_forwards(pg_pool& pool, const std::vector<std::string>& delivered,
                       const std::vector<std::pair<std::string, std::string>>& failed,
                       const std::vector<std::pair<std::string, std::string>>& given_up) {
  if (delivered.empty() && failed.empty() && given_up.empty())
    return {};
  return with_connection(pool, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c}; // one query string: one implicit transaction
    std::string sql;
    if (!delivered.empty())
      sql +=
        "DELETE FROM entity_forwards WHERE request_id IN (" + quoted_list(tx, delivered) + ");";
    if (!failed.empty()) {
      values_list rows;
      for (auto& [id, error] : failed)
        rows.row(tx.quote(id) + "," + tx.quote(error));
      sql += "UPDATE entity_forwards f SET attempts = f.attempts + 1, last_error = v.error,"
             " retry_at = now() + make_interval(secs => least(300, 2 ^ least(f.attempts, 9)))"
             " FROM (VALUES "
             + rows.str() + ") AS v(request_id, error) WHERE f.request_id = v.request_id;";
    }
    if (!given_up.empty()) {
      values_list rows;
      for (auto& [id, reason] : given_up)
        rows.row(tx.quote(id) + "," + tx.quote(reason));
      sql += "WITH v(request_id, reason) AS (VALUES " + rows.str()
             + "), gone AS (DELETE FROM entity_forwards f USING v WHERE f.request_id = v.request_id"
               " RETURNING f.*, v.reason) INSERT INTO entity_dead_letters (kind, entity_id, shard,"
               " payload, reason, attempts) SELECT kind, entity_id, shard, payload, reason,"
               " attempts + 1 FROM gone;";
    }
    tx.exec(sql);
  });
}

} // namespace gost::persistence
