#include "gost/persistence/write_behind.hpp"

#include <map>
#include <set>
#include <string_view>

#include "pg_internal.hpp"

namespace gost::persistence {

namespace {

/// Joins "(a, b, c)" rows with commas.
class values_list {
public:
  void row(std::string r) {
    if (!text_.empty())
      text_ += ",";
    text_ += "(" + r + ")";
    ++rows_;
  }
  bool empty() const { return rows_ == 0; }
  const std::string& str() const { return text_; }

private:
  std::string text_;
  size_t rows_ = 0;
};

struct queue_key {
  std::string stage_id;
  std::string offer_id;
  bool operator<(const queue_key& o) const {
    return std::tie(stage_id, offer_id) < std::tie(o.stage_id, o.offer_id);
  }
};

} // namespace

caf::expected<std::vector<write_outcome>>
commit_write_sets(pg_pool& pool, uint32_t shard, int64_t epoch, const std::vector<write_set>& sets) {
  std::vector<write_outcome> outcomes;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    outcomes.assign(sets.size(), write_outcome::conflict);
    pqxx::work tx{c};
    auto shard_txt = std::to_string(shard);
    // Fencing: FOR SHARE blocks a takeover (which updates the row) until we commit, and a
    // takeover that happened already shows as a different epoch.
    auto lease = tx.exec("SELECT epoch FROM shard_leases WHERE shard = " + shard_txt + " FOR SHARE");
    if (lease.empty() || lease[0][0].as<int64_t>() != epoch) {
      outcomes.assign(sets.size(), write_outcome::fenced);
      return; // rolled back by the destructor
    }
    // Current versions, locked in a fixed order so two transactions never deadlock.
    std::set<std::string> ids;
    for (auto& s : sets)
      ids.insert(s.offer_id);
    std::string id_list;
    for (auto& id : ids)
      id_list += (id_list.empty() ? "" : ",") + tx.quote(id);
    std::map<std::string, int64_t> version;
    if (!ids.empty())
      for (auto row : tx.exec("SELECT offer_id, version FROM offers WHERE offer_id IN (" + id_list
                              + ") ORDER BY offer_id FOR UPDATE"))
        version[row[0].as<std::string>()] = row[1].as<int64_t>();

    // New offers first: their rows must exist before anything refers to them. A row that is
    // not inserted (id or seller key taken) makes its set a conflict.
    std::set<std::string> inserted;
    values_list insert_rows;
    for (auto& s : sets)
      if (s.op == offer_op::insert && s.new_body && version.count(s.offer_id) == 0)
        insert_rows.row(tx.quote(s.offer_id) + "," + shard_txt + "," + tx.quote(s.key.seller_id)
                        + "," + tx.quote(s.key.ns) + ","
                        + (s.key.external_id.empty() ? std::string{"NULL"}
                                                     : tx.quote(s.key.external_id))
                        + ",1," + tx.quote_raw(*s.new_body));
    if (!insert_rows.empty())
      for (auto row : tx.exec("INSERT INTO offers (offer_id, shard, seller_id, namespace,"
                              " external_id, version, body) VALUES " + insert_rows.str()
                              + " ON CONFLICT DO NOTHING RETURNING offer_id"))
        inserted.insert(row[0].as<std::string>());

    // Decide each set in order; later sets of the same offer see earlier ones.
    std::map<std::string, std::pair<int64_t, const std::string*>> bodies; // last body per offer
    std::map<std::pair<std::string, std::string>, const std::string*> states;
    std::set<queue_key> deletes;
    std::map<queue_key, queue_entry> upserts;
    std::set<std::string> removed;
    values_list outbox;
    values_list dead_rows;
    for (size_t i = 0; i < sets.size(); ++i) {
      auto& s = sets[i];
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
      } else if (s.op != offer_op::insert && (v == version.end() || v->second != s.expected_version)) {
        continue; // conflict
      }
      outcomes[i] = write_outcome::committed;
      for (auto& d : s.dead_letters)
        dead_rows.row(shard_txt + "," + tx.quote(s.offer_id) + "," + tx.quote(d.stage_id) + ","
                      + tx.quote(d.reason) + "," + std::to_string(d.attempts));
      if (s.op == offer_op::remove) {
        bodies.erase(s.offer_id);
        for (auto it = states.begin(); it != states.end();)
          it = it->first.first == s.offer_id ? states.erase(it) : std::next(it);
        for (auto it = upserts.begin(); it != upserts.end();)
          it = it->first.offer_id == s.offer_id ? upserts.erase(it) : std::next(it);
        removed.insert(s.offer_id);
        if (s.outbox)
          outbox.row(shard_txt + "," + tx.quote(s.offer_id) + "," + std::to_string(v->second + 1)
                     + "," + tx.quote_raw(*s.outbox));
        version.erase(v);
        continue;
      }
      if (s.op == offer_op::insert) {
        bodies.erase(s.offer_id); // the row was just written with this body
      } else if (s.new_body) {
        v->second = s.expected_version + 1;
        bodies[s.offer_id] = {v->second, &*s.new_body};
      }
      for (auto& [stage, bytes] : s.states)
        states[{s.offer_id, stage}] = &bytes;
      for (auto& stage : s.dequeue) {
        queue_key k{stage, s.offer_id};
        upserts.erase(k);
        deletes.insert(k);
      }
      for (auto& e : s.enqueue) {
        queue_key k{e.stage_id, e.offer_id};
        auto [it, fresh] = upserts.emplace(k, e);
        if (!fresh) {
          it->second.due_at_us = std::min(it->second.due_at_us, e.due_at_us);
          it->second.prio = std::min(it->second.prio, e.prio);
        }
      }
      if (s.outbox)
        outbox.row(shard_txt + "," + tx.quote(s.offer_id) + "," + std::to_string(v->second) + ","
                   + tx.quote_raw(*s.outbox));
    }

    if (!removed.empty()) {
      std::string list;
      for (auto& id : removed)
        list += (list.empty() ? "" : ",") + tx.quote(id);
      tx.exec("DELETE FROM stage_queue WHERE offer_id IN (" + list + ")");
      tx.exec("DELETE FROM stage_states WHERE offer_id IN (" + list + ")");
      tx.exec("DELETE FROM offers WHERE offer_id IN (" + list + ")");
    }
    if (!dead_rows.empty())
      tx.exec("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, attempts) VALUES "
              + dead_rows.str());
    values_list offer_rows;
    for (auto& [id, vb] : bodies)
      offer_rows.row(tx.quote(id) + "," + std::to_string(vb.first) + "," + tx.quote_raw(*vb.second));
    if (!offer_rows.empty())
      tx.exec("UPDATE offers o SET version = v.version, body = v.body, updated_at = now()"
              " FROM (VALUES " + offer_rows.str() + ") AS v(offer_id, version, body)"
              " WHERE o.offer_id = v.offer_id");
    values_list state_rows;
    for (auto& [key, bytes] : states)
      state_rows.row(tx.quote(key.first) + "," + tx.quote(key.second) + "," + tx.quote_raw(*bytes));
    if (!state_rows.empty())
      tx.exec("INSERT INTO stage_states (offer_id, stage_id, state) VALUES " + state_rows.str()
              + " ON CONFLICT (offer_id, stage_id) DO UPDATE SET state = EXCLUDED.state,"
                " updated_at = now()");
    values_list delete_rows;
    for (auto& k : deletes)
      delete_rows.row(tx.quote(k.stage_id) + "," + tx.quote(k.offer_id));
    if (!delete_rows.empty())
      tx.exec("DELETE FROM stage_queue WHERE shard = " + shard_txt
              + " AND (stage_id, offer_id) IN (VALUES " + delete_rows.str() + ")");
    values_list queue_rows;
    for (auto& [k, e] : upserts)
      queue_rows.row(shard_txt + "," + tx.quote(e.stage_id) + "," + tx.quote(e.offer_id) + ","
                     + std::to_string(e.due_at_us) + ","
                     + std::to_string(static_cast<int16_t>(e.prio)));
    if (!queue_rows.empty())
      tx.exec("INSERT INTO stage_queue (shard, stage_id, offer_id, due_at_us, priority) VALUES "
              + queue_rows.str()
              + " ON CONFLICT (shard, stage_id, offer_id) DO UPDATE SET"
                " due_at_us = LEAST(stage_queue.due_at_us, EXCLUDED.due_at_us),"
                " priority = LEAST(stage_queue.priority, EXCLUDED.priority)");
    if (!outbox.empty())
      tx.exec("INSERT INTO outbox (shard, offer_id, version, payload) VALUES " + outbox.str());
    tx.commit();
  });
  if (err)
    return err;
  return outcomes;
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
    auto r = after == nullptr
               ? tx.exec_params("SELECT stage_id, offer_id, due_at_us, priority FROM stage_queue"
                                " WHERE shard = $1 AND due_at_us <= $2"
                                " ORDER BY due_at_us, stage_id, offer_id LIMIT $3",
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit))
               : tx.exec_params("SELECT stage_id, offer_id, due_at_us, priority FROM stage_queue"
                                " WHERE shard = $1 AND due_at_us <= $2"
                                " AND (due_at_us, stage_id, offer_id) > ($4, $5, $6)"
                                " ORDER BY due_at_us, stage_id, offer_id LIMIT $3",
                                static_cast<int64_t>(shard), until_us, static_cast<int64_t>(limit),
                                after->due_at_us, after->stage_id, after->offer_id);
    out.reserve(r.size());
    for (auto row : r)
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                     static_cast<priority>(row[3].as<int16_t>())});
  });
  if (err)
    return err;
  return out;
}

caf::expected<std::vector<std::pair<std::string, std::string>>>
load_states(pg_pool& pool, const std::string& offer_id) {
  std::vector<std::pair<std::string, std::string>> out;
  auto err = with_connection(pool, [&](pqxx::connection& c) {
    out.clear();
    pqxx::nontransaction tx{c};
    for (auto row :
         tx.exec_params("SELECT stage_id, state FROM stage_states WHERE offer_id = $1", offer_id)) {
      pqxx::binarystring bytes{row[1]};
      out.emplace_back(row[0].as<std::string>(), bytes.str());
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
    for (auto row : tx.exec("SELECT offer_id, body, version FROM offers WHERE offer_id IN (" + list + ")")) {
      pqxx::binarystring bytes{row[1]};
      auto body = bytes.str();
      auto version = row[2].as<int64_t>();
      each(row[0].as<std::string>(), [&](offer_row& r) {
        r.found = true;
        r.body = body;
        r.version = version;
      });
    }
    for (auto row : tx.exec("SELECT offer_id, stage_id, state FROM stage_states WHERE offer_id IN ("
                            + list + ")")) {
      pqxx::binarystring bytes{row[2]};
      auto st = std::make_pair(row[1].as<std::string>(), bytes.str());
      each(row[0].as<std::string>(), [&](offer_row& r) { r.states.push_back(st); });
    }
    for (auto row : tx.exec("SELECT stage_id, offer_id, due_at_us, priority FROM stage_queue"
                            " WHERE offer_id IN (" + list + ")")) {
      queue_entry e{row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                    static_cast<priority>(row[3].as<int16_t>())};
      each(e.offer_id, [&](offer_row& r) { r.queued.push_back(e); });
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
    for (auto row : tx.exec_params("SELECT offer_id FROM offers WHERE shard = $1 AND offer_id > $2"
                                   " ORDER BY offer_id LIMIT $3",
                                   static_cast<int64_t>(shard), after_id,
                                   static_cast<int64_t>(limit)))
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
                                   " count(*) FILTER (WHERE due_at_us > $1)"
                                   " FROM stage_queue GROUP BY stage_id",
                                   now_us)) {
      auto& sc = by[row[0].as<std::string>()];
      sc.queued = row[1].as<uint64_t>();
      sc.timers = row[2].as<uint64_t>();
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
    for (auto row : tx.exec_params("SELECT stage_id, offer_id, due_at_us, priority FROM stage_queue"
                                   " WHERE offer_id = $1 ORDER BY stage_id",
                                   offer_id))
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<int64_t>(),
                     static_cast<priority>(row[3].as<int16_t>())});
  });
  if (err)
    return err;
  return out;
}

} // namespace gost::persistence
