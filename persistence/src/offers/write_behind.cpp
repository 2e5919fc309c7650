#include "gost/persistence/offers/write_behind.hpp"

#include <map>
#include <set>
#include <tuple>

#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

struct state_key {
  std::string offer_id;
  std::string stage_id;
  bool operator<(const state_key& o) const {
    return std::tie(offer_id, stage_id) < std::tie(o.offer_id, o.stage_id);
  }
};

/// What a batch does to one (offer, stage) row of stage_states: its state, and its queue
/// entry (the row's due_at_us / priority).
struct row_change {
  uint32_t shard = 0;                 ///< the offer's shard (the column)
  const std::string* state = nullptr; ///< new state; nullptr: keep
  int64_t state_writes = 0;           ///< writes of the state in the batch (version increment)
  enum class due : uint8_t {
    keep,  ///< untouched
    exact, ///< set to `at` / `prio` (the entry was consumed in this batch, maybe re-queued)
    least, ///< queued: the earlier due time and the higher priority of old and new win
    clear, ///< consumed and not re-queued
  } due_mode = due::keep;
  int64_t at = 0;
  priority prio = priority::normal;

  void dequeue() { due_mode = due::clear; }
  void enqueue(const queue_entry& e) {
    switch (due_mode) {
      case due::keep:
        due_mode = due::least;
        at = e.due_at_us;
        prio = e.prio;
        return;
      case due::clear:
        due_mode = due::exact;
        at = e.due_at_us;
        prio = e.prio;
        return;
      case due::exact:
      case due::least:
        at = std::min(at, e.due_at_us);
        prio = std::min(prio, e.prio);
        return;
    }
  }
};

/// The length-delimited framing of `repeated OfferSaved events = 1` in gost.v1.OutboxBatch:
/// appending each event's bytes like this yields a serialized OutboxBatch.
void append_event(std::string& batch, const std::string& event) {
  batch.push_back('\x0a'); // field 1, wire type 2
  auto n = static_cast<uint64_t>(event.size());
  while (n >= 0x80) {
    batch.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  batch.push_back(static_cast<char>(n));
  batch += event;
}

/// Writes the stage_states rows of a batch: one multi-row upsert per kind of change (at most
/// four statements), and for entries consumed without a state of their own, a clear.
void write_state_rows(pqxx::work& tx, const std::map<state_key, row_change>& rows) {
  // Kinds: (state set?, due mode) -> the ON CONFLICT clause.
  struct group {
    values_list values;
    blob_params blobs;
  };
  std::map<std::pair<bool, row_change::due>, group> groups;
  values_list cleared; // (offer, stage): consumed, no new state, not re-queued
  for (auto& [key, ch] : rows) {
    auto kind = std::make_pair(ch.state != nullptr, ch.due_mode);
    if (!kind.first && ch.due_mode == row_change::due::clear) {
      cleared.row(tx.quote(key.offer_id) + "," + tx.quote(key.stage_id));
      continue;
    }
    if (!kind.first && ch.due_mode == row_change::due::keep)
      continue;
    auto& g = groups[kind];
    bool queued = ch.due_mode == row_change::due::exact || ch.due_mode == row_change::due::least;
    g.values.row(tx.quote(key.offer_id) + "," + tx.quote(key.stage_id) + ","
                 + std::to_string(ch.shard) + ","
                 + (ch.state != nullptr ? g.blobs.add(*ch.state) : std::string{"NULL::bytea"}) + ","
                 + std::to_string(ch.state_writes) + ","
                 + (queued ? std::to_string(ch.at) : std::string{"NULL::bigint"}) + ","
                 + std::to_string(static_cast<int16_t>(ch.prio)));
  }
  for (auto& [kind, g] : groups) {
    auto [has_state, due] = kind;
    std::string set;
    if (has_state)
      set = "state = EXCLUDED.state, state_version = s.state_version + EXCLUDED.state_version,"
            " updated_at = now()";
    switch (due) {
      case row_change::due::keep: break;
      case row_change::due::exact:
      case row_change::due::clear:
        set += std::string{set.empty() ? "" : ", "}
               + "due_at_us = EXCLUDED.due_at_us, priority = EXCLUDED.priority";
        break;
      case row_change::due::least:
        set += std::string{set.empty() ? "" : ", "}
               + "due_at_us = LEAST(s.due_at_us, EXCLUDED.due_at_us),"
                 " priority = CASE WHEN s.due_at_us IS NULL THEN EXCLUDED.priority"
                 " ELSE LEAST(s.priority, EXCLUDED.priority) END";
        break;
    }
    g.blobs.exec(tx, "INSERT INTO stage_states AS s (offer_id, stage_id, shard, state,"
                     " state_version, due_at_us, priority) VALUES "
                       + g.values.str() + " ON CONFLICT (offer_id, stage_id) DO UPDATE SET " + set);
  }
  if (!cleared.empty()) {
    // A row that only held the queue entry goes; one with a state keeps it.
    auto keys = "(offer_id, stage_id) IN (VALUES " + cleared.str() + ")";
    tx.exec("DELETE FROM stage_states WHERE " + keys + " AND state IS NULL");
    tx.exec("UPDATE stage_states SET due_at_us = NULL WHERE " + keys
            + " AND due_at_us IS NOT NULL");
  }
}

} // namespace

caf::expected<std::vector<write_outcome>>
commit_write_sets(pg_pool& pool, const std::vector<fenced_write<write_set>>& sets,
                  const std::string& owner, commit_options opts) {
  std::vector<write_outcome> outcomes;
  auto mark = new_commit_mark();
  auto err = commit_marked(pool, mark, [&](pqxx::connection& c) {
    outcomes.assign(sets.size(), write_outcome::conflict);
    pqxx::work tx{c};
    // Fencing, per shard of the batch: FOR SHARE blocks a takeover (which updates the lease
    // row) until we commit, and a takeover that happened already shows as another epoch or
    // another owner. Sets of a shard held at another epoch, or by another node (an epoch issued
    // again after a failover lost its bump, ADR 0023 §6), or by none, are fenced; the rest of
    // the batch goes on.
    // A new offer's seller's home shard is locked with them (commit_options::home_shard): an
    // insert whose home moved to another group's database is refused, and a split's fence
    // waits for the inserts in flight.
    // A key change holds its old and new seller's home shards too, and needs both here.
    std::vector<uint32_t> home(sets.size(), 0);
    std::vector<uint32_t> old_home(sets.size(), 0);
    std::set<uint32_t> homes;
    if (opts.home_shard)
      for (size_t i = 0; i < sets.size(); ++i) {
        auto& ws = sets[i].ws;
        if (ws.op == offer_op::insert || ws.rekey)
          homes.insert(home[i] = opts.home_shard(ws.key.seller_id));
        if (ws.rekey)
          homes.insert(old_home[i] = ws.previous_seller == ws.key.seller_id
                                       ? home[i]
                                       : opts.home_shard(ws.previous_seller));
      }
    auto leases = held_leases(tx, sets, owner, homes);
    std::vector<bool> live(sets.size(), false);
    for (size_t i = 0; i < sets.size(); ++i) {
      auto& ws = sets[i].ws;
      auto h = leases.held.find(sets[i].shard);
      live[i] = h != leases.held.end() && h->second == sets[i].epoch;
      if (!live[i]) {
        outcomes[i] = write_outcome::fenced;
      } else if (opts.home_shard && ws.op == offer_op::insert && leases.here.count(home[i]) == 0) {
        // Not only a home marked moved: a home this database holds no lease row of (the offer's
        // id drawn with the old map before a split, its shard moved meanwhile, the insert
        // routed on to the new owner in the other database) would make a stray nobody claims.
        live[i] = false;
        outcomes[i] = write_outcome::home_moved;
      } else if (opts.home_shard && ws.rekey
                 && (leases.here.count(home[i]) == 0 || leases.here.count(old_home[i]) == 0)) {
        live[i] = false;
        outcomes[i] = write_outcome::key_elsewhere;
      }
    }
    // Current versions. No row locks: only the lease holder writes a shard's rows, and it
    // writes them from one writer per shard, one batch at a time, so nothing can change them
    // between this read and the commit (a takeover waits on the lease row above).
    std::set<std::string> ids;
    for (size_t i = 0; i < sets.size(); ++i)
      if (live[i])
        ids.insert(sets[i].ws.offer_id);
    auto id_list = quoted_list(tx, ids);
    std::map<std::string, int64_t> version;
    if (!ids.empty())
      for (auto row :
           tx.exec("SELECT offer_id, version FROM offers WHERE offer_id IN (" + id_list + ")"))
        version[row[0].as<std::string>()] = row[1].as<int64_t>();

    // Sets carrying a request id that committed before are duplicates: nothing is applied.
    std::set<std::pair<std::string, std::string>> requests_seen;
    {
      values_list keys;
      for (size_t i = 0; i < sets.size(); ++i)
        if (live[i] && !sets[i].ws.request_id.empty())
          keys.row(tx.quote(sets[i].ws.offer_id) + "," + tx.quote(sets[i].ws.request_id));
      if (!keys.empty())
        for (auto row : tx.exec("SELECT offer_id, request_id FROM offer_requests"
                                " WHERE (offer_id, request_id) IN (VALUES "
                                + keys.str() + ")"))
          requests_seen.emplace(row[0].as<std::string>(), row[1].as<std::string>());
    }
    auto duplicate = [&](const write_set& ws) {
      return !ws.request_id.empty() && requests_seen.count({ws.offer_id, ws.request_id}) != 0;
    };

    // New offers first: their rows must exist before anything refers to them. A row that is
    // not inserted (id or seller key taken) makes its set a conflict.
    std::set<std::string> inserted;
    values_list insert_rows;
    blob_params insert_blobs;
    for (size_t i = 0; i < sets.size(); ++i) {
      auto& s = sets[i].ws;
      if (live[i] && !duplicate(s) && s.op == offer_op::insert && s.new_body
          && version.count(s.offer_id) == 0)
        insert_rows.row(
          tx.quote(s.offer_id) + "," + std::to_string(sets[i].shard) + ","
          + tx.quote(s.key.seller_id) + "," + tx.quote(s.key.ns) + ","
          + (s.key.external_id.empty() ? std::string{"NULL"} : tx.quote(s.key.external_id)) + ",1,"
          + insert_blobs.add(*s.new_body));
    }
    // A key claimed for an offer in another group's database (offer_keys, migration 0031) is
    // taken as a key in `offers` is.
    if (!insert_rows.empty())
      for (auto row : insert_blobs.exec(
             tx, "INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version,"
                 " body) SELECT v.* FROM (VALUES "
                   + insert_rows.str()
                   + ") AS v(offer_id, shard, seller_id, namespace, external_id, version, body)"
                     " WHERE NOT EXISTS (SELECT 1 FROM offer_keys k WHERE k.seller_id = v.seller_id"
                     " AND k.namespace = v.namespace AND k.external_id = v.external_id)"
                     " ON CONFLICT DO NOTHING RETURNING offer_id"))
        inserted.insert(row[0].as<std::string>());

    // Seller keys the batch's re-keyed offers would take, with the offers holding them now
    // (the new ones above included, and the claims of offers in another group's database,
    // migration 0031). A key another set of the batch gives up is not free for
    // this one (the key columns change in one statement, which checks the unique index row by
    // row), a removed offer's is (its row goes first); a
    // key another transaction takes meanwhile fails the UPDATE below (unique_violation): the
    // whole batch runs again (commit_marked) and finds that key here.
    using seller_key = std::tuple<std::string, std::string, std::string>;
    std::map<seller_key, std::string> key_holder;
    {
      values_list keys;
      for (size_t i = 0; i < sets.size(); ++i) {
        auto& k = sets[i].ws.key;
        if (live[i] && sets[i].ws.rekey && !k.external_id.empty())
          keys.row(tx.quote(k.seller_id) + "," + tx.quote(k.ns) + "," + tx.quote(k.external_id));
      }
      if (!keys.empty())
        for (auto row :
             tx.exec("WITH w (seller_id, namespace, external_id) AS (VALUES " + keys.str()
                     + ") SELECT seller_id, namespace, external_id, offer_id FROM offers"
                       " WHERE (seller_id, namespace, external_id) IN (SELECT * FROM w)"
                       " UNION ALL SELECT seller_id, namespace, external_id, offer_id"
                       " FROM offer_keys WHERE (seller_id, namespace, external_id) IN"
                       " (SELECT * FROM w)"))
          key_holder[{row[0].as<std::string>(), row[1].as<std::string>(),
                      row[2].as<std::string>()}] = row[3].as<std::string>();
    }
    std::map<std::string, const offer_key_columns*> rekeyed; // the last key per offer

    // Decide each set in order; later sets of the same offer see earlier ones.
    std::map<std::string, std::pair<int64_t, const std::string*>> bodies; // last body per offer
    std::map<state_key, row_change> state_rows;
    std::set<std::string> removed;
    struct shard_outbox {
      std::string payload;
      int32_t events = 0;
    };
    std::map<uint32_t, shard_outbox> outbox; ///< one outbox_batches row per shard of the batch
    values_list dead_rows;
    // The outbox rows and the history rows go in one statement (a data-modifying CTE): the
    // history costs no round trip of its own.
    values_list history_rows;
    blob_params tail_blobs;
    values_list request_rows;
    blob_params request_blobs;
    for (size_t i = 0; i < sets.size(); ++i) {
      if (!live[i])
        continue;
      auto& s = sets[i].ws;
      auto shard = sets[i].shard;
      if (duplicate(s)) {
        outcomes[i] = write_outcome::duplicate;
        continue;
      }
      if (s.op == offer_op::insert) {
        if (inserted.erase(s.offer_id) == 0)
          continue; // conflict: it existed, or its seller key is taken
        version[s.offer_id] = 1;
        removed.erase(s.offer_id);
      }
      auto v = version.find(s.offer_id);
      if (s.op == offer_op::none) {
        if (v == version.end()) {
          // The offer is gone: bookkeeping still applies (drop its queue entry, keep the letter).
          v = version.emplace(s.offer_id, 0).first;
        }
      } else if (s.op != offer_op::insert
                 && (v == version.end() || v->second != s.expected_version)) {
        continue; // conflict
      }
      if (s.op == offer_op::change && s.rekey) {
        if (!s.key.external_id.empty()) {
          seller_key k{s.key.seller_id, s.key.ns, s.key.external_id};
          auto h = key_holder.find(k);
          if (h != key_holder.end() && h->second != s.offer_id && removed.count(h->second) == 0) {
            outcomes[i] = write_outcome::key_taken;
            continue;
          }
          key_holder[k] = s.offer_id;
        }
        rekeyed[s.offer_id] = &s.key;
      }
      outcomes[i] = write_outcome::committed;
      if (!s.request_id.empty()) {
        request_rows.row(tx.quote(s.offer_id) + "," + tx.quote(s.request_id) + ","
                         + std::to_string(shard) + "," + request_blobs.add(s.answer));
        requests_seen.emplace(s.offer_id, s.request_id); // a second one in this batch: duplicate
      }
      for (auto& d : s.dead_letters)
        dead_rows.row(std::to_string(shard) + "," + tx.quote(s.offer_id) + ","
                      + tx.quote(d.stage_id) + "," + tx.quote(d.reason) + ","
                      + std::to_string(d.attempts));
      if (s.outbox) {
        auto& o = outbox[shard];
        append_event(o.payload, *s.outbox);
        ++o.events;
        if (opts.history) {
          // The offer's version after the set: a state-only change leaves it as it is.
          int64_t after = s.op == offer_op::insert                 ? 1
                          : s.new_body || s.op == offer_op::remove ? s.expected_version + 1
                                                                   : v->second;
          history_rows.row(tx.quote(s.offer_id) + "," + std::to_string(shard) + ","
                           + std::to_string(after) + "," + tail_blobs.add(*s.outbox));
        }
      }
      if (s.op == offer_op::remove) {
        bodies.erase(s.offer_id);
        for (auto it = state_rows.begin(); it != state_rows.end();)
          it = it->first.offer_id == s.offer_id ? state_rows.erase(it) : std::next(it);
        removed.insert(s.offer_id);
        rekeyed.erase(s.offer_id);
        version.erase(v);
        continue;
      }
      if (s.op == offer_op::insert) {
        bodies.erase(s.offer_id); // the row was just written with this body
      } else if (s.new_body) {
        v->second = s.expected_version + 1;
        bodies[s.offer_id] = {v->second, &*s.new_body};
      }
      // A gone offer (bookkeeping only): its consumed entries go, nothing else is written back.
      bool gone = s.op == offer_op::none && v->second == 0;
      auto row_of = [&](const std::string& offer, const std::string& stage) -> row_change& {
        auto& row = state_rows[{offer, stage}];
        row.shard = shard;
        return row;
      };
      if (!gone)
        for (auto& [stage, bytes] : s.states) {
          auto& row = row_of(s.offer_id, stage);
          row.state = &bytes;
          ++row.state_writes;
        }
      for (auto& stage : s.dequeue)
        row_of(s.offer_id, stage).dequeue();
      if (!gone)
        for (auto& e : s.enqueue)
          row_of(e.entity_id, e.lane).enqueue(e);
    }

    if (!removed.empty()) {
      auto list = quoted_list(tx, removed);
      tx.exec("DELETE FROM stage_states WHERE offer_id IN (" + list + ")");
      tx.exec("DELETE FROM offers WHERE offer_id IN (" + list + ")");
    }
    if (!dead_rows.empty())
      tx.exec("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, attempts) VALUES "
              + dead_rows.str());
    values_list offer_rows;
    blob_params offer_blobs;
    for (auto& [id, vb] : bodies)
      offer_rows.row(tx.quote(id) + "," + std::to_string(vb.first) + ","
                     + offer_blobs.add(*vb.second));
    if (!offer_rows.empty())
      offer_blobs.exec(tx,
                       "UPDATE offers o SET version = v.version, body = v.body, updated_at = now()"
                       " FROM (VALUES "
                         + offer_rows.str()
                         + ") AS v(offer_id, version, body)"
                           " WHERE o.offer_id = v.offer_id");
    if (!rekeyed.empty()) {
      values_list key_rows;
      for (auto& [id, k] : rekeyed)
        key_rows.row(tx.quote(id) + "," + tx.quote(k->seller_id) + "," + tx.quote(k->ns) + ","
                     + (k->external_id.empty() ? std::string{"NULL"} : tx.quote(k->external_id)));
      tx.exec("UPDATE offers o SET seller_id = v.seller_id, namespace = v.ns,"
              " external_id = v.external_id FROM (VALUES "
              + key_rows.str()
              + ") AS v(offer_id, seller_id, ns, external_id) WHERE o.offer_id = v.offer_id");
    }
    write_state_rows(tx, state_rows);
    if (!outbox.empty()) {
      values_list outbox_rows;
      for (auto& [shard, o] : outbox)
        outbox_rows.row(std::to_string(shard) + "," + std::to_string(o.events) + ","
                        + tail_blobs.add(o.payload));
      std::string sql;
      if (!history_rows.empty())
        sql = "WITH h AS (INSERT INTO offer_history (offer_id, shard, version, event) VALUES "
              + history_rows.str() + ") ";
      tail_blobs.exec(tx, sql + "INSERT INTO outbox_batches (shard, events, payload) VALUES "
                            + outbox_rows.str());
    }
    if (!request_rows.empty())
      request_blobs.exec(tx,
                         "INSERT INTO offer_requests (offer_id, request_id, shard, answer) VALUES "
                           + request_rows.str());
    write_mark(tx, mark);
    tx.commit();
  });
  // A unique key taken by other transactions on every run (commit_marked runs it three
  // times): no set of the batch is at fault, none was written; retrying is right, not
  // ALREADY_EXISTS for all of them.
  if (err == db_errc::already_exists)
    return make_db_error(db_errc::unavailable,
                         "a seller key this batch re-keys an offer to kept being taken by "
                         "concurrent writes; nothing was written, retry ("
                           + error_message(err) + ")");
  if (err)
    return err;
  return outcomes;
}

caf::expected<std::optional<std::string>> find_answer(pg_pool& pool, const std::string& offer_id,
                                                      const std::string& request_id) {
  std::optional<std::string> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.reset();
    pqxx::nontransaction tx{c};
    auto r =
      tx.exec_params("SELECT answer FROM offer_requests WHERE offer_id = $1 AND request_id = $2",
                     offer_id, request_id);
    if (!r.empty())
      out = pqxx::binarystring{r[0][0]}.str();
  });
  if (err)
    return err;
  return out;
}

caf::expected<int64_t> reap_requests(pg_pool& pool, const std::vector<uint32_t>& shards,
                                     int64_t max_age_s) {
  return reap_by_age(pool, "offer_requests", "created_at", shards, max_age_s);
}

caf::expected<std::vector<int64_t>> acquire_all_leases(pg_pool& pool, const std::string& owner,
                                                       uint32_t shard_count) {
  std::vector<int64_t> epochs(shard_count, 0);
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    pqxx::work tx{c};
    tx.exec_params("INSERT INTO shard_leases (shard) SELECT generate_series(0, $1 - 1)"
                   " ON CONFLICT DO NOTHING",
                   static_cast<int64_t>(shard_count));
    auto r = tx.exec_params("UPDATE shard_leases SET owner = $1, epoch = epoch + 1,"
                            " acquired_at = now(), heartbeat_at = now()"
                            " WHERE shard < $2 RETURNING shard, epoch",
                            owner, static_cast<int64_t>(shard_count));
    for (auto row : r)
      epochs[row[0].as<size_t>()] = row[1].as<int64_t>();
    tx.commit();
  });
  if (err)
    return err;
  return epochs;
}

caf::expected<std::vector<queue_entry>> due_entries(pg_pool& pool, uint32_t shard, int64_t until_us,
                                                    size_t limit, const queue_entry* after) {
  std::vector<queue_entry> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    // The page, then the hint (queue_store): the first entry past the window, one more probe
    // of the same index.
    constexpr const char* hint = " UNION ALL (SELECT stage_id, offer_id, due_at_us, priority"
                                 " FROM stage_states WHERE shard = $1 AND due_at_us > $2"
                                 " ORDER BY due_at_us LIMIT 1)";
    auto r = after == nullptr
               ? tx.exec_params(std::string{"(SELECT stage_id, offer_id, due_at_us, priority"
                                            " FROM stage_states WHERE shard = $1"
                                            " AND due_at_us IS NOT NULL AND due_at_us <= $2"
                                            " ORDER BY due_at_us, stage_id, offer_id LIMIT $3)"}
                                  + hint,
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit))
               : tx.exec_params(std::string{"(SELECT stage_id, offer_id, due_at_us, priority"
                                            " FROM stage_states WHERE shard = $1"
                                            " AND due_at_us IS NOT NULL AND due_at_us <= $2"
                                            " AND (due_at_us, stage_id, offer_id) > ($4, $5, $6)"
                                            " ORDER BY due_at_us, stage_id, offer_id LIMIT $3)"}
                                  + hint,
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit),
                                after->due_at_us, after->lane, after->entity_id);
    out.reserve(r.size());
    for (auto row : r)
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                     static_cast<priority>(row[3].as<int16_t>())});
    hint_last(out, until_us);
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<stored_state>> load_states(pg_pool& pool, const std::string& offer_id) {
  std::vector<stored_state> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row : tx.exec_params("SELECT stage_id, state, state_version FROM stage_states"
                                   " WHERE offer_id = $1 AND state IS NOT NULL ORDER BY stage_id",
                                   offer_id)) {
      pqxx::binarystring bytes{row[1]};
      out.push_back({row[0].as<std::string>(), bytes.str(), row[2].as<int64_t>()});
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<offer_row>> load_offers(pg_pool& pool,
                                                  const std::vector<std::string>& ids) {
  std::vector<offer_row> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.assign(ids.size(), offer_row{});
    if (ids.empty())
      return;
    pqxx::nontransaction tx{c};
    std::map<std::string, std::vector<size_t>> index;
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& slot = index[ids[i]];
      if (slot.empty())
        list += (list.empty() ? "" : ",") + tx.quote(ids[i]);
      slot.push_back(i);
    }
    auto each = [&](const std::string& id, auto&& f) {
      for (auto i : index[id])
        f(out[i]);
    };
    for (auto row :
         tx.exec("SELECT offer_id, body, version FROM offers WHERE offer_id IN (" + list + ")")) {
      pqxx::binarystring bytes{row[1]};
      auto body = bytes.str();
      auto version = row[2].as<int64_t>();
      each(row[0].as<std::string>(), [&](offer_row& r) {
        r.found = true;
        r.body = body;
        r.version = version;
      });
    }
    for (auto row : tx.exec("SELECT offer_id, stage_id, state, due_at_us, priority, state_version"
                            " FROM stage_states"
                            " WHERE offer_id IN ("
                            + list + ")")) {
      auto offer_id = row[0].as<std::string>();
      auto stage_id = row[1].as<std::string>();
      if (!row[2].is_null()) {
        pqxx::binarystring bytes{row[2]};
        auto st = stored_state{stage_id, bytes.str(), row[5].as<int64_t>()};
        each(offer_id, [&](offer_row& r) { r.states.push_back(st); });
      }
      if (!row[3].is_null()) {
        queue_entry e{stage_id, offer_id, row[3].as<int64_t>(),
                      static_cast<priority>(row[4].as<int16_t>())};
        each(offer_id, [&](offer_row& r) { r.queued.push_back(e); });
      }
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<std::string>> offer_ids_page(pg_pool& pool, uint32_t shard,
                                                       const std::string& after_id, size_t limit) {
  std::vector<std::string> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT offer_id FROM offers WHERE shard = $1 AND offer_id > $2"
                        " ORDER BY offer_id LIMIT $3",
                        static_cast<int64_t>(shard), after_id, static_cast<int64_t>(limit)))
      out.push_back(row[0].as<std::string>());
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<stage_counts>> count_stages(pg_pool& pool, int64_t now_us) {
  std::vector<stage_counts> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    std::map<std::string, stage_counts> by;
    for (auto row : tx.exec_params("SELECT stage_id, count(*) FILTER (WHERE due_at_us <= $1),"
                                   " count(*) FILTER (WHERE due_at_us > $1),"
                                   " coalesce(min(due_at_us) FILTER (WHERE due_at_us <= $1), 0)"
                                   " FROM stage_states WHERE due_at_us IS NOT NULL"
                                   " GROUP BY stage_id",
                                   now_us)) {
      auto& sc = by[row[0].as<std::string>()];
      sc.queued = row[1].as<uint64_t>();
      sc.timers = row[2].as<uint64_t>();
      sc.oldest_due_us = row[3].as<int64_t>();
    }
    for (auto row : tx.exec("SELECT stage_id, count(*) FROM dead_letters"
                            " WHERE released_at IS NULL GROUP BY stage_id"))
      by[row[0].as<std::string>()].dead_letters = row[1].as<uint64_t>();
    for (auto& [id, sc] : by) {
      sc.stage_id = id;
      out.push_back(sc);
    }
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<queue_entry>> queued_for(pg_pool& pool, const std::string& offer_id) {
  std::vector<queue_entry> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT stage_id, offer_id, due_at_us, priority FROM stage_states"
                        " WHERE offer_id = $1 AND due_at_us IS NOT NULL ORDER BY stage_id",
                        offer_id))
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                     static_cast<priority>(row[3].as<int16_t>())});
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
