#include "gost/persistence/cluster/moves.hpp"

#include <set>
#include <vector>

#include "gost/persistence/cluster/leases.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/scheduled/actions.hpp"
#include "pg_internal.hpp"
#include "sql.hpp"

namespace gost::persistence {

namespace {

std::string shards_text(uint32_t first, uint32_t last) {
  return first == last ? "shard " + std::to_string(first)
                       : "shards " + std::to_string(first) + "-" + std::to_string(last);
}

/// A table copied row by row, keyed by its primary key: the rows of the range, by their
/// `shard` column, or by `home` in a table without one.
struct keyed_table {
  const char* name;
  std::vector<std::string> key;
  /// The row's shard in SQL when the table has no `shard` column (`t`: the row; `%n`: the
  /// installation's shard count): its key's home shard (migration 0030, gost_shard_of). A move
  /// of a whole group takes every row of such a table (each belongs to one of its shards); a
  /// move of a part selects by it. Its change-log trigger logs every row (the move filters).
  const char* home = nullptr;
  /// A row is written at the target only while this holds of it (`r`): its parent row is
  /// there. A row whose parent came after the first pass is in the change log with it, and the
  /// catch-up copies the parent first (tables in this order, a transaction's entries together).
  const char* parent_there = nullptr;
  /// Its writers hold no lease: while the group moves, a trigger at the source refuses their
  /// writes once the range is fenced (migration 0027, gost_move_fence, for a whole group;
  /// migration 0030, gost_move_fence_rows, by the sellers' home shards for a part: `fence_by`
  /// names the column that finds the seller, `seller_id` or `task_id` of feed_tasks). It stays
  /// after the move (a writer with the old map is refused, not lost) until a move brings a
  /// range into that database again.
  bool fenced = false;
  const char* fence_by = nullptr;
};

constexpr const char* by_action = "gost_shard_of(t.action_id, %n)";
constexpr const char* by_seller = "gost_shard_of(t.seller_id, %n)";
constexpr const char* by_task_seller =
  "(SELECT gost_shard_of(p.seller_id, %n) FROM feed_tasks p WHERE p.task_id = t.task_id)";
constexpr const char* by_entity = "gost_shard_of(t.kind || '/' || t.entity_id, %n)";
constexpr const char* task_there =
  "EXISTS (SELECT 1 FROM feed_tasks t WHERE t.task_id = r.task_id)";

/// In copy order: a referenced table before the tables referring to it (scheduled_attempts'
/// rows need their action's).
const std::vector<keyed_table>& keyed_tables() {
  static const std::vector<keyed_table> tables{
    {"offers", {"offer_id"}},
    {"stage_states", {"offer_id", "stage_id"}},
    {"offer_requests", {"offer_id", "request_id"}},
    {"offer_history", {"offer_id", "id"}},
    {"rescan_sweeps", {"token", "shard"}},
    // Scheduled actions (in their id's home group; the API's writes are refused while their
    // shard is fenced, persistence/src/scheduled/actions.cpp `check_not_moving`). A verb's
    // attempts have no shard: their action's.
    {"scheduled_actions", {"action_id"}, by_action},
    {"scheduled_incoming", {"shard", "seq"}},
    {"scheduled_processing", {"shard", "action_id", "action_guid"}},
    {"scheduled_attempts",
     {"action_id", "seq"},
     by_action,
     "EXISTS (SELECT 1 FROM scheduled_actions a WHERE a.action_id = r.action_id)"},
    // Image functions: a task's partition is a shard; a result has its key's partition, not
    // stored. Their writers hold no lease (a cache: a result stored at the source during the
    // fence is computed again at the target when asked).
    {"image_tasks", {"function", "partition", "args"}, "t.partition % %n"},
    {"image_results", {"result_key"}, "gost_result_partition(t.result_key, %n)"},
    // Feeds: keyed by seller, every row in the seller's home group, written without a lease
    // (fenced). A task's items and batches need their task (a foreign key), and find their
    // seller through it.
    {"feeds", {"seller_id", "namespace"}, by_seller, nullptr, true, "seller_id"},
    {"feed_loads", {"seller_id", "load_id"}, by_seller, nullptr, true, "seller_id"},
    {"feed_queue", {"seller_id", "load_id"}, by_seller, nullptr, true, "seller_id"},
    {"feed_statistics", {"seller_id", "load_id"}, by_seller, nullptr, true, "seller_id"},
    {"feed_offer_batches",
     {"seller_id", "load_id", "batch_id"},
     by_seller,
     nullptr,
     true,
     "seller_id"},
    {"feed_offer_errors",
     {"seller_id", "load_id", "external_id", "error_id"},
     by_seller,
     nullptr,
     true,
     "seller_id"},
    {"feed_old_loads", {"seller_id", "load_id"}, by_seller, nullptr, true, "seller_id"},
    {"feed_tasks", {"task_id"}, by_seller, nullptr, true, "seller_id"},
    {"feed_items", {"task_id", "external_id"}, by_task_seller, task_there, true, "task_id"},
    {"feed_batches", {"task_id", "batch_id"}, by_task_seller, task_there, true, "task_id"},
    // The claims of keys whose offers are in another group, and the shards outside the home
    // group holding a seller's offers (migrations 0031, 0032): in the seller's home group.
    {"offer_keys", {"seller_id", "namespace", "external_id"}, by_seller},
    {"seller_spread", {"seller_id", "stray_shard"}, by_seller},
    // Durable entities (tasks, the application's actor types): written by their shards' lease
    // holders, fenced as the offers' writers are; an event sent to an entity of a fenced shard
    // is kept as a forward instead (persistence/src/entities/entities.cpp). Pending events and
    // kept request ids have no shard column: their entity's. Outputs stay where they were
    // written (`entity_outputs`: not copied, not removed): their seqs are the source database's,
    // where consumers' positions point (PullOutputs' token).
    {"entities", {"kind", "entity_id"}},
    {"entity_events", {"kind", "entity_id", "seq"}, by_entity},
    {"entity_requests", {"kind", "entity_id", "request_id"}, by_entity},
    {"entity_forwards", {"request_id"}}, // by the sender's shard; the request id kept
  };
  return tables;
}

/// Tables not copied but emptied at the source after the switch: the feeds' per-seller locks
/// belong to steps the fence refuses (copied, a lock would hold its seller at the target until
/// the reaper's `lock_max_hold`); at the target the work is taken again and redone.
struct dropped_table {
  const char* name;
  const char* home; ///< as keyed_table::home
};

const std::vector<dropped_table>& dropped_tables() {
  static const std::vector<dropped_table> tables{{"feed_locks", by_seller}};
  return tables;
}

/// A table whose rows take a new id from a sequence at the target (ids are per database):
/// moved, not copied, while the range is fenced. `sequence_of` names the table whose `id`
/// sequence gives the new ids (outbox_parked's ids are outbox_batches' ids).
struct queued_table {
  const char* name;
  const char* sequence_of;
};

const std::vector<queued_table>& queued_tables() {
  static const std::vector<queued_table> tables{
    {"outbox_batches", "outbox_batches"},
    {"outbox_parked", "outbox_batches"},
    {"dead_letters", "dead_letters"},
    {"entity_dead_letters", "entity_dead_letters"},
  };
  return tables;
}

struct column {
  std::string name;
  std::string type;     ///< format_type: what a key read from JSON text is cast to
  std::string sequence; ///< a serial column's sequence, else empty
};

std::vector<column> columns_of(pqxx::transaction_base& tx, const std::string& table) {
  std::vector<column> out;
  for (auto row : tx.exec_params("SELECT attname, format_type(atttypid, atttypmod),"
                                 " coalesce(pg_get_serial_sequence($1, attname), '')"
                                 " FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0"
                                 " AND NOT attisdropped ORDER BY attnum",
                                 table))
    out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>()});
  return out;
}

/// How one table is read and written by the move (its statements, made once).
struct table_sql {
  std::string name;
  std::string home; ///< keyed_table::home with the shard count in; empty: a `shard` column
  std::vector<std::string> key;
  std::vector<std::string> key_types; ///< the key columns' SQL types, in key order
  std::string key_list;               ///< "a, b"
  std::string key_json;               ///< jsonb_build_object('a', a, 'b', b)::text
  std::string key_casts; ///< "(k->>'a')::text, (k->>'b')::bigint": keys from a JSON array
  std::string upsert;    ///< $1: a JSON array of rows
  std::string remove;    ///< $1: a JSON array of keys
  /// Sequences of its serial columns (offer_history.id): copied rows keep their ids, so the
  /// target's sequence must go past the source's before the target's writers use it.
  std::vector<std::string> sequences;
};

/// `home` with `%n` replaced by the shard count.
std::string home_sql(const char* home, uint32_t shard_count) {
  std::string out = home == nullptr ? "" : home;
  for (auto at = out.find("%n"); at != std::string::npos; at = out.find("%n", at))
    out.replace(at, 2, std::to_string(shard_count));
  return out;
}

table_sql make_table_sql(pqxx::transaction_base& tx, const keyed_table& t, uint32_t shard_count) {
  table_sql s;
  s.name = t.name;
  s.home = home_sql(t.home, shard_count);
  s.key = t.key;
  auto cols = columns_of(tx, t.name);
  std::string set_cols;
  std::string set_vals;
  for (auto& c : cols) {
    if (!c.sequence.empty())
      s.sequences.push_back(c.sequence);
    bool is_key = false;
    for (auto& k : t.key)
      is_key = is_key || k == c.name;
    if (is_key)
      continue;
    set_cols += (set_cols.empty() ? "" : ", ") + c.name;
    set_vals += (set_vals.empty() ? "" : ", ") + std::string{"EXCLUDED."} + c.name;
  }
  // The casts in key order (columns come in table order).
  for (auto& k : t.key)
    for (auto& c : cols)
      if (c.name == k) {
        s.key_types.push_back(c.type);
        s.key_casts += (s.key_casts.empty() ? "" : ", ") + ("(k->>'" + k + "')::" + c.type);
      }
  for (auto& k : t.key) {
    s.key_list += (s.key_list.empty() ? "" : ", ") + k;
    s.key_json += (s.key_json.empty() ? "" : ", ") + ("'" + k + "', " + k);
  }
  s.key_json = "jsonb_build_object(" + s.key_json + ")::text";
  s.upsert = "INSERT INTO " + s.name + " SELECT * FROM jsonb_populate_recordset(NULL::" + s.name
             + ", $1::jsonb) r" + (t.parent_there ? std::string{" WHERE "} + t.parent_there : "")
             + " ON CONFLICT (" + s.key_list + ") DO UPDATE SET (" + set_cols + ") = ROW("
             + set_vals + ")";
  s.remove = "DELETE FROM " + s.name + " t WHERE (" + s.key_list + ") IN (SELECT " + s.key_casts
             + " FROM jsonb_array_elements($1::jsonb) k)";
  return s;
}

/// " AND (a, b) > (x, y)": the keyset after `last` (empty: from the first), on the typed key,
/// which compares as the index orders.
std::string after_key(pqxx::transaction_base& tx, const table_sql& t,
                      const std::vector<std::string>& last) {
  if (last.empty())
    return {};
  std::string typed;
  for (size_t i = 0; i < last.size(); ++i)
    typed += (i == 0 ? "" : ", ") + tx.quote(last[i]) + "::" + t.key_types[i];
  return " AND (" + t.key_list + ") > (" + typed + ")";
}

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += ',';
    out += items[i];
  }
  out += ']';
  return out;
}

/// The heartbeat of a fenced lease: far ahead, finite (lease listings subtract it from now()).
constexpr const char* fenced_heartbeat = "9999-01-01 00:00:00+00";

class mover {
public:
  mover(pg_pool& catalog, pg_pool& source, pg_pool& target, const move_plan& plan,
        const move_options& opts)
    : catalog_(catalog), source_(source), target_(target), plan_(plan), opts_(opts) {
    range_ = "shard BETWEEN " + std::to_string(plan.first) + " AND " + std::to_string(plan.last);
  }

  caf::expected<move_report> run() {
    if (auto err = check())
      return err;
    // A move resumed after its fence finishes whatever the source holds now; before it, a part
    // is refused while the source holds offers (and a resumed one undone).
    bool fenced = false;
    if (plan_.resumed) {
      auto f = already_fenced();
      if (!f)
        return f.error();
      fenced = *f;
    }
    if (!fenced)
      if (auto refused = part_refusal()) {
        if (plan_.resumed)
          if (auto err = abandon())
            return err;
        return refused;
      }
    if (auto err = mark_moving())
      return err;
    if (auto err = prepare())
      return err;
    for (auto& t : tables_)
      if (auto err = copy(t))
        return err;
    // Catch up until a round is small: the fence then waits for little.
    for (int round = 0; round < opts_.max_rounds; ++round) {
      if (cancelled())
        return cancel_error();
      auto n = catch_up();
      if (!n)
        return n.error();
      if (*n <= opts_.small_round)
        break;
    }
    if (!fenced)
      if (auto refused = part_refusal()) {
        // Offers came meanwhile (a feed's load, a client): the part is not moved. The move
        // is undone, so that the map takes other moves again.
        if (auto err = abandon())
          return err;
        return refused;
      }
    auto fenced_at = std::chrono::steady_clock::now();
    if (auto err = fence())
      return err;
    if (!plan_.whole) {
      // A part: each action goes with its home shard; one whose queue rows are on the other
      // side is given new ones on its home shard (the old ones go stale).
      auto rehomed = rehome_scheduled_actions(source_, plan_.first, plan_.last, plan_.shard_count);
      if (!rehomed)
        return rehomed.error();
      if (*rehomed > 0)
        say("fence", "scheduled actions: " + std::to_string(*rehomed)
                       + " given queue rows on their home shards");
      // Offers left on the other side of the cut than their seller's home shard get their
      // keys claimed in the home database (ADR 0023 "Splits" item 6).
      if (auto err = claim_strays())
        return err;
    }
    // Nothing writes the range now: what is left in the log is the last of it.
    for (int round = 0;; ++round) {
      auto n = catch_up();
      if (!n)
        return n.error();
      if (*n == 0)
        break;
      if (round > 10)
        return make_db_error(db_errc::internal,
                             "the range is still written after its fence (" + std::to_string(*n)
                               + " rows in the last round): a writer without a lease check; "
                                 "the move stays fenced, run it again");
    }
    if (auto err = unclaim_homecoming())
      return err;
    for (auto& q : queued_tables())
      if (auto err = move_queued(q))
        return err;
    if (auto err = switch_map())
      return err;
    report_.fenced = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - fenced_at);
    say("switch", "map version " + std::to_string(report_.map_version) + "; fenced for "
                    + std::to_string(report_.fenced.count()) + " ms");
    if (auto err = finish_source())
      return err;
    return report_;
  }

private:
  /// The rows of a table that move (`t` the row): the range's by the `shard` column; in a
  /// table without one, every row when the whole group moves, else those whose home shard is in
  /// the range.
  std::string rows_of(const std::string& home) const {
    if (home.empty())
      return range_;
    return plan_.whole ? std::string{"true"} : in_range(home);
  }
  std::string in_range(const std::string& shard_sql) const {
    return "(" + shard_sql + ") BETWEEN " + std::to_string(plan_.first) + " AND "
           + std::to_string(plan_.last);
  }
  /// Whether a table's rows need the home shard checked row by row (a part of a group moves).
  bool by_home(const table_sql& t) const { return !t.home.empty() && !plan_.whole; }

  void say(const std::string& step, const std::string& detail) {
    if (opts_.progress)
      opts_.progress(step, detail);
  }
  bool cancelled() const { return opts_.cancelled && opts_.cancelled(); }
  caf::error cancel_error() const {
    return make_db_error(db_errc::unavailable,
                         "the move of " + shards_text(plan_.first, plan_.last) + " to `"
                           + plan_.to_name
                           + "` was cut short (the node is stopping) before its fence; the "
                             "range still serves from `"
                           + plan_.from_name + "`: ask for the move again to resume it");
  }

  /// Refusals before anything is written.
  caf::error check() {
    auto in_source = list_nodes(source_, opts_.node_timeout);
    if (!in_source)
      return in_source.error();
    auto in_target = list_nodes(target_, opts_.node_timeout);
    if (!in_target)
      return in_target.error();
    std::set<std::string> there;
    for (auto& n : *in_target)
      if (n.alive)
        there.insert(n.node_id);
    for (auto& n : *in_source)
      if (n.alive && there.count(n.node_id) == 0)
        return make_db_error(db_errc::schema_mismatch,
                             "node " + n.node_id + " serves group `" + plan_.from_name
                               + "` but not group `" + plan_.to_name
                               + "` (a node opens the groups declared at its start): restart it "
                                 "before moving shards there");
    return {};
  }

  /// Whether the range's leases at the source are fenced for this move already (a move cut
  /// short after its fence, asked again).
  caf::expected<bool> already_fenced() {
    bool all = false;
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      pqxx::nontransaction tx{c};
      all = tx.exec_params("SELECT count(*) FILTER (WHERE owner = $3) = $2::int - $1::int + 1"
                           " FROM shard_leases WHERE shard BETWEEN $1::int AND $2::int",
                           static_cast<int64_t>(plan_.first), static_cast<int64_t>(plan_.last),
                           "moved:" + plan_.to_name)[0][0]
              .as<bool>();
    });
    if (err)
      return err;
    return all;
  }

  /// Without `split_offers`, a part of a group is not moved while the source holds offers: a
  /// seller's offers would be spread over two databases with no claims of their keys (the
  /// writers' home checks may be off). Asked at the start and again right before the fence.
  caf::error part_refusal() {
    if (plan_.whole || opts_.split_offers)
      return {};
    bool any = false;
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      pqxx::nontransaction tx{c};
      any = tx.exec("SELECT EXISTS (SELECT 1 FROM offers)")[0][0].as<bool>();
    });
    if (err)
      return err;
    if (!any)
      return {};
    return make_db_error(db_errc::schema_mismatch,
                         "group `" + plan_.from_name
                           + "` holds offers (a part spreads its sellers' offers over two "
                             "databases: their keys are claimed only with split_offers, which "
                             "gostctl move-shards sets); "
                           + shards_text(plan_.first, plan_.last)
                           + " are a part of it: move the whole group instead (ADR 0023)");
  }

  /// Strays that come home. A claim (offer_keys) names an offer in another database than its
  /// seller's home; after the move some of the target's claims may name offers of the target
  /// itself: offers of the range whose seller is at home in the target (an earlier split left
  /// them outside it), or offers the target held already whose seller's home came with the
  /// range. A claim of its own database's offer would keep the old key taken for good after a
  /// key change at home (the offer is found, so no release frees it): dropped, once the rows
  /// are all there (after the last catch-up). So are the spread rows naming a shard the
  /// target's group holds after the switch. Idempotent; nothing to do in an installation
  /// that never split a group holding offers.
  caf::error unclaim_homecoming() {
    auto map = load_group_map(catalog_, plan_.shard_count);
    if (!map)
      return map.error();
    std::string mine =
      "stray_shard BETWEEN " + std::to_string(plan_.first) + " AND " + std::to_string(plan_.last);
    for (auto& r : map->ranges())
      if (r.group == plan_.to)
        mine +=
          " OR stray_shard BETWEEN " + std::to_string(r.first) + " AND " + std::to_string(r.last);
    int64_t claims = 0;
    int64_t spread = 0;
    auto err = with_connection(target_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      auto r = tx.exec("WITH k AS (DELETE FROM offer_keys k USING offers o"
                       "  WHERE o.offer_id = k.offer_id RETURNING 1),"
                       " p AS (DELETE FROM seller_spread WHERE "
                       + mine
                       + " RETURNING 1)"
                         " SELECT (SELECT count(*) FROM k), (SELECT count(*) FROM p)");
      claims = r[0][0].as<int64_t>();
      spread = r[0][1].as<int64_t>();
      tx.commit();
    });
    if (err)
      return err;
    report_.unclaimed = claims;
    if (claims + spread > 0)
      say("fence", std::to_string(claims) + " keys of offers come home unclaimed, "
                     + std::to_string(spread) + " spread rows dropped");
    return {};
  }

  /// A part, at its fence (the range's writers stopped; a new offer whose seller's home shard
  /// is fenced is refused, commit_options::home_shard): every offer of the source that the cut
  /// leaves outside its seller's home group (a "stray") gets its key claimed in the seller's
  /// home database (`offer_keys`, the claimed offer's id), and the seller a `seller_spread` row
  /// there naming the stray's shard — before the source's rows go, so that a key is never
  /// missing from both `offers` and the claims. Strays moving out (shard in the range, seller's
  /// home a shard the source keeps): claimed at the source, in one statement; strays staying
  /// (shard outside, home inside): read at the source by seller and claimed at the target. An
  /// offer that was a stray already (its seller at home in a third group) keeps its claim and
  /// spread row there: they name its id and shard, which a move does not change. The home
  /// shard is computed in SQL (gost_shard_of, ~19 µs a seller) once per distinct seller.
  /// Idempotent: a move resumed after its fence claims again what is claimed.
  caf::error claim_strays() {
    auto first = static_cast<int64_t>(plan_.first);
    auto last = static_cast<int64_t>(plan_.last);
    auto count = static_cast<int64_t>(plan_.shard_count);
    // Moving out: the seller's home is a shard the source keeps (a lease row here, not fenced
    // by this or an earlier move).
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      auto r = tx.exec_params(
        "WITH s AS (SELECT DISTINCT seller_id FROM offers WHERE shard BETWEEN $1 AND $2),"
        " h AS (SELECT seller_id FROM s WHERE EXISTS (SELECT 1 FROM shard_leases l"
        "  WHERE l.shard = gost_shard_of(s.seller_id, $3) AND l.shard NOT BETWEEN $1 AND $2"
        "  AND coalesce(l.owner, '') NOT LIKE 'moved:%')),"
        " k AS (INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id)"
        "  SELECT o.seller_id, o.namespace, o.external_id, o.offer_id FROM offers o"
        "  JOIN h USING (seller_id) WHERE o.shard BETWEEN $1 AND $2"
        "  AND o.external_id IS NOT NULL"
        "  ON CONFLICT (seller_id, namespace, external_id) DO UPDATE SET offer_id ="
        "  EXCLUDED.offer_id RETURNING 1),"
        " p AS (INSERT INTO seller_spread (seller_id, stray_shard) SELECT DISTINCT o.seller_id,"
        "  o.shard FROM offers o JOIN h USING (seller_id) WHERE o.shard BETWEEN $1 AND $2"
        "  ON CONFLICT DO NOTHING RETURNING 1)"
        " SELECT (SELECT count(*) FROM k), (SELECT count(*) FROM h)",
        first, last, count);
      report_.claimed = r[0][0].as<int64_t>();
      report_.spread = r[0][1].as<int64_t>();
      tx.commit();
    });
    if (err)
      return err;
    // Staying: the seller's home goes to the target's database with the range.
    std::vector<std::string> sellers;
    std::vector<std::string> spread_rows; // seller_spread rows for the target, as JSON
    err = with_connection(source_, [&](pqxx::connection& c) {
      sellers.clear();
      spread_rows.clear();
      pqxx::nontransaction tx{c};
      for (auto row : tx.exec_params(
             "WITH h AS (SELECT seller_id FROM (SELECT DISTINCT seller_id FROM offers"
             " WHERE shard NOT BETWEEN $1 AND $2) s"
             " WHERE gost_shard_of(seller_id, $3) BETWEEN $1 AND $2)"
             " SELECT h.seller_id, (SELECT jsonb_agg(jsonb_build_object('seller_id', h.seller_id,"
             " 'stray_shard', x.shard, 'created_at', now()))::text FROM (SELECT DISTINCT shard"
             " FROM offers o WHERE o.seller_id = h.seller_id AND o.shard NOT BETWEEN $1 AND $2) x)"
             " FROM h ORDER BY h.seller_id",
             first, last, count)) {
        sellers.push_back(row[0].as<std::string>());
        spread_rows.push_back(row[1].as<std::string>());
      }
    });
    if (err)
      return err;
    const table_sql* keys = nullptr;
    const table_sql* spread = nullptr;
    for (auto& t : tables_) {
      if (t.name == "offer_keys")
        keys = &t;
      if (t.name == "seller_spread")
        spread = &t;
    }
    if (keys == nullptr || spread == nullptr)
      return make_db_error(db_errc::internal, "the move knows no offer_keys or seller_spread");
    constexpr size_t sellers_per_read = 500;
    for (size_t at = 0; at < sellers.size(); at += sellers_per_read) {
      auto end = std::min(sellers.size(), at + sellers_per_read);
      // Each seller's rows are a JSON array: the chunk's rows are their concatenation.
      std::vector<std::string> rows;
      for (size_t i = at; i < end; ++i) {
        auto& a = spread_rows[i];
        if (a.size() > 2)
          rows.push_back(a.substr(1, a.size() - 2));
      }
      if (auto e = upsert(*spread, rows))
        return e;
      report_.spread += static_cast<int64_t>(end - at);
      std::vector<std::string> chunk{sellers.begin() + static_cast<std::ptrdiff_t>(at),
                                     sellers.begin() + static_cast<std::ptrdiff_t>(end)};
      // The chunk's keyed offers outside the range, a batch at a time in key order.
      std::vector<std::string> after;
      for (;;) {
        std::vector<std::string> claims;
        err = with_connection(source_, [&](pqxx::connection& c) {
          claims.clear();
          pqxx::nontransaction tx{c};
          std::string past;
          if (!after.empty())
            past = " AND (seller_id, namespace, external_id) > (" + tx.quote(after[0]) + ", "
                   + tx.quote(after[1]) + ", " + tx.quote(after[2]) + ")";
          auto r = tx.exec_params(
            "SELECT to_jsonb(x)::text, x.seller_id, x.namespace, x.external_id FROM"
            " (SELECT seller_id, namespace, external_id, offer_id, now() AS created_at"
            "  FROM offers WHERE seller_id IN ("
              + quoted_list(tx, chunk)
              + ") AND shard NOT BETWEEN $1 AND $2 AND external_id IS NOT NULL" + past
              + ") x ORDER BY 2, 3, 4 LIMIT $3",
            first, last, static_cast<int64_t>(opts_.batch));
          for (auto row : r) {
            claims.push_back(row[0].as<std::string>());
            after = {row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<std::string>()};
          }
        });
        if (err)
          return err;
        if (auto e = upsert(*keys, claims))
          return e;
        report_.claimed += static_cast<int64_t>(claims.size());
        if (claims.size() < static_cast<size_t>(opts_.batch))
          break;
      }
    }
    say("fence", "offers outside their seller's home group: " + std::to_string(report_.claimed)
                   + " keys claimed, " + std::to_string(report_.spread) + " sellers spread");
    return {};
  }

  /// The catalog says the range is moving (a node that starts meanwhile sees it).
  caf::error mark_moving() {
    if (plan_.resumed) {
      say("prepare", "resuming the move begun earlier");
      return {};
    }
    return with_connection(catalog_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      tx.exec("SELECT version FROM shard_map FOR UPDATE");
      // A map of one group may have no range row yet: group 0 holds every shard.
      tx.exec("INSERT INTO shard_ranges (first_shard, last_shard, group_id)"
              " SELECT 0, (SELECT shard_count - 1 FROM installation), 0"
              " WHERE NOT EXISTS (SELECT 1 FROM shard_ranges)");
      if (plan_.whole) {
        tx.exec_params("UPDATE shard_ranges SET moving_to = $2 WHERE group_id = $1",
                       static_cast<int64_t>(plan_.from), static_cast<int64_t>(plan_.to));
      } else {
        // A part: the ranges of the group it overlaps are cut around it, and it gets a range
        // row of its own, marked.
        std::vector<std::pair<int64_t, int64_t>> pieces;
        for (auto row :
             tx.exec_params("DELETE FROM shard_ranges WHERE group_id = $1"
                            " AND first_shard <= $3 AND last_shard >= $2"
                            " RETURNING first_shard, last_shard",
                            static_cast<int64_t>(plan_.from), static_cast<int64_t>(plan_.first),
                            static_cast<int64_t>(plan_.last))) {
          auto first = row[0].as<int64_t>();
          auto last = row[1].as<int64_t>();
          if (first < plan_.first)
            pieces.emplace_back(first, plan_.first - 1);
          if (last > plan_.last)
            pieces.emplace_back(plan_.last + 1, last);
        }
        for (auto& [first, last] : pieces)
          tx.exec_params("INSERT INTO shard_ranges (first_shard, last_shard, group_id)"
                         " VALUES ($1, $2, $3)",
                         first, last, static_cast<int64_t>(plan_.from));
        tx.exec_params("INSERT INTO shard_ranges (first_shard, last_shard, group_id, moving_to)"
                       " VALUES ($1, $2, $3, $4)",
                       static_cast<int64_t>(plan_.first), static_cast<int64_t>(plan_.last),
                       static_cast<int64_t>(plan_.from), static_cast<int64_t>(plan_.to));
      }
      tx.exec("UPDATE shard_map SET version = version + 1");
      tx.exec(std::string{"NOTIFY "} + groups_channel);
      tx.commit();
    });
  }

  /// The source's change-log triggers dropped and its log emptied.
  caf::error change_log_off() {
    return with_connection(source_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      for (auto& t : keyed_tables())
        tx.exec(std::string{"DROP TRIGGER IF EXISTS gost_move ON "} + t.name);
      tx.exec("DELETE FROM move_changes");
      tx.commit();
    });
  }

  /// A move of a part refused before its fence: the range serves from the source as before;
  /// the change log is off, the rows copied are deleted at the target, and the range is no
  /// longer marked moving (its range row stays cut: the same group on both sides of it).
  caf::error abandon() {
    auto err = change_log_off();
    if (err)
      return err;
    if (tables_.empty()) // a resumed move refused before its prepare
      err = with_connection(source_, [&](pqxx::connection& c) {
        tables_.clear();
        pqxx::nontransaction tx{c};
        for (auto& t : keyed_tables())
          tables_.push_back(make_table_sql(tx, t, plan_.shard_count));
      });
    if (err)
      return err;
    int64_t removed = 0;
    for (auto it = tables_.rbegin(); it != tables_.rend(); ++it) {
      if (!by_home(*it)) {
        int64_t n = 0;
        err = with_connection(target_, [&](pqxx::connection& c) {
          pqxx::work tx{c};
          tx.exec("SET LOCAL gost.moving = 'on'");
          n = static_cast<int64_t>(
            tx.exec("DELETE FROM " + it->name + " t WHERE " + range_).affected_rows());
          tx.commit();
        });
        removed += n;
      } else {
        err = remove_by_home(target_, *it, &removed);
      }
      if (err)
        return err;
    }
    err = with_connection(catalog_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      tx.exec("SELECT version FROM shard_map FOR UPDATE");
      tx.exec_params("UPDATE shard_ranges SET moving_to = NULL WHERE group_id = $1",
                     static_cast<int64_t>(plan_.from));
      tx.exec("UPDATE shard_map SET version = version + 1");
      tx.exec(std::string{"NOTIFY "} + groups_channel);
      tx.commit();
    });
    if (err)
      return err;
    say("prepare", "the move is undone: " + std::to_string(removed) + " rows copied to `"
                     + plan_.to_name + "` deleted");
    return {};
  }

  /// The triggers logging the range's writes at the source (from before the first copy on),
  /// and the target's rows of the range cleared (an earlier move away may have left some).
  caf::error prepare() {
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      tables_.clear();
      pqxx::work tx{c};
      tx.exec("DELETE FROM move_changes");
      for (auto& t : keyed_tables()) {
        std::string keys;
        for (auto& k : t.key)
          keys += (keys.empty() ? "" : ",") + k;
        tx.exec(std::string{"DROP TRIGGER IF EXISTS gost_move ON "} + t.name);
        tx.exec(std::string{"CREATE TRIGGER gost_move AFTER INSERT OR UPDATE OR DELETE ON "}
                + t.name + " FOR EACH ROW EXECUTE FUNCTION gost_move_log('"
                + (t.home != nullptr ? std::string{"*"} : std::to_string(plan_.first)) + "', '"
                + std::to_string(plan_.last) + "', '" + keys + "')");
        tables_.push_back(make_table_sql(tx, t, plan_.shard_count));
        if (t.fenced && plan_.whole)
          tx.exec(std::string{"CREATE OR REPLACE TRIGGER gost_move_fence BEFORE INSERT OR UPDATE "
                              "OR DELETE ON "}
                  + t.name + " FOR EACH STATEMENT EXECUTE FUNCTION gost_move_fence('"
                  + std::to_string(plan_.first) + "')");
        else if (t.fenced) // a part: by each statement's sellers, whose lease rows say where
          for (auto& [suffix, event, rows] :
               {std::make_tuple("ins", "INSERT", "NEW"), std::make_tuple("upd", "UPDATE", "NEW"),
                std::make_tuple("del", "DELETE", "OLD")})
            tx.exec(std::string{"CREATE OR REPLACE TRIGGER gost_move_fence_"} + suffix + " AFTER "
                    + event + " ON " + t.name + " REFERENCING " + rows
                    + " TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION "
                      "gost_move_fence_rows('"
                    + std::to_string(plan_.shard_count) + "', '" + t.fence_by + "')");
      }
      tx.commit();
    });
    if (err)
      return err;
    int64_t cleared = 0;
    err = with_connection(target_, [&](pqxx::connection& c) {
      cleared = 0;
      pqxx::work tx{c};
      tx.exec("SET LOCAL gost.moving = 'on'");
      // A fence an earlier move of the target's whole group left there: a range comes back now.
      // (The fence of a part, gost_move_fence_ins/upd/del, stays: it refuses the sellers of
      // shards that left only.)
      for (auto& t : keyed_tables())
        if (t.fenced)
          tx.exec(std::string{"DROP TRIGGER IF EXISTS gost_move_fence ON "} + t.name);
      for (auto& t : keyed_tables())
        if (t.home == nullptr) // the other tables' rows at the target are the target's own
          cleared +=
            tx.exec(std::string{"DELETE FROM "} + t.name + " WHERE " + range_).affected_rows();
      tx.commit();
    });
    if (err)
      return err;
    // A part asked again: what an earlier run copied of the tables without a shard column is
    // deleted there too (the log that would have carried later deletes was emptied above).
    if (plan_.resumed && !plan_.whole)
      for (auto& t : tables_)
        if (by_home(t))
          if (auto e = remove_by_home(target_, t, &cleared))
            return e;
    say("prepare", "change log on at `" + plan_.from_name + "`; " + std::to_string(cleared)
                     + " stale rows of the range cleared at `" + plan_.to_name + "`");
    return {};
  }

  caf::error upsert(const table_sql& t, const std::vector<std::string>& rows) {
    if (rows.empty())
      return {};
    auto body = json_array(rows);
    return with_connection(target_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      // Past a fence of the target's own (gost_move_fence_rows): the range may have left this
      // database before, its lease rows here still saying where it went until the switch.
      tx.exec("SET LOCAL gost.moving = 'on'");
      tx.exec_params(t.upsert, body);
      tx.commit();
    });
  }

  /// The first pass: the range's rows in key order, a batch at a time.
  caf::error copy(const table_sql& t) {
    std::vector<std::string> last; // the key of the last row copied
    int64_t copied = 0;
    auto next_say = std::chrono::steady_clock::now();
    for (;;) {
      if (cancelled())
        return cancel_error();
      std::vector<std::string> rows;
      std::vector<std::string> key;
      auto err = with_connection(source_, [&](pqxx::connection& c) {
        rows.clear();
        key.clear();
        pqxx::nontransaction tx{c};
        auto after = after_key(tx, t, last);
        auto r = tx.exec("SELECT to_jsonb(t)::text, " + t.key_list + " FROM " + t.name + " t WHERE "
                         + rows_of(t.home) + after + " ORDER BY " + t.key_list + " LIMIT "
                         + std::to_string(opts_.batch));
        for (auto row : r) {
          rows.push_back(row[0].as<std::string>());
          key.clear();
          for (size_t i = 1; i < row.size(); ++i)
            key.push_back(row[static_cast<int>(i)].as<std::string>());
        }
      });
      if (err)
        return err;
      if (rows.empty())
        break;
      if (auto e = upsert(t, rows))
        return e;
      copied += static_cast<int64_t>(rows.size());
      last = key;
      if (std::chrono::steady_clock::now() >= next_say) {
        say("copy", t.name + ": " + std::to_string(copied) + " rows");
        next_say = std::chrono::steady_clock::now() + std::chrono::seconds{2};
      }
      if (rows.size() < static_cast<size_t>(opts_.batch))
        break;
    }
    report_.copied[t.name] = copied;
    say("copy", t.name + ": " + std::to_string(copied) + " rows, done");
    return {};
  }

  /// One round: every row whose key the log holds is copied again (or deleted at the target
  /// when it is gone at the source); then the log entries read are deleted, those only: an
  /// entry of a transaction that commits meanwhile has a lower seq than some read (seqs are
  /// drawn at the write, not the commit) and waits for the next round. Answers the rows done.
  caf::expected<int64_t> catch_up() {
    ++report_.rounds;
    std::string seqs; // the entries read, as an array literal's elements
    std::map<std::string, std::vector<std::string>> keys; // by table
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      keys.clear();
      seqs.clear();
      pqxx::nontransaction tx{c};
      std::set<std::pair<std::string, std::string>> seen;
      for (auto row : tx.exec("SELECT seq, tbl, key::text FROM move_changes")) {
        seqs += (seqs.empty() ? "" : ",") + row[0].as<std::string>();
        auto entry = std::make_pair(row[1].as<std::string>(), row[2].as<std::string>());
        if (seen.insert(entry).second)
          keys[entry.first].push_back(entry.second);
      }
    });
    if (err)
      return err;
    int64_t done = 0;
    for (auto& t : tables_) {
      auto it = keys.find(t.name);
      if (it == keys.end())
        continue;
      auto& all = it->second;
      for (size_t at = 0; at < all.size(); at += static_cast<size_t>(opts_.batch)) {
        std::vector<std::string> chunk(all.begin() + static_cast<std::ptrdiff_t>(at),
                                       all.begin()
                                         + static_cast<std::ptrdiff_t>(std::min(
                                           all.size(), at + static_cast<size_t>(opts_.batch))));
        std::vector<std::string> rows;
        std::set<std::string> found;
        err = with_connection(source_, [&](pqxx::connection& c) {
          rows.clear();
          found.clear();
          pqxx::nontransaction tx{c};
          // A part of a group: the log has every row of a table without a shard column; those
          // of the shards that stay are left alone.
          auto moving = by_home(t) ? in_range(t.home) : std::string{"true"};
          for (auto row :
               tx.exec_params("SELECT " + t.key_json + ", to_jsonb(t)::text, " + moving + " FROM "
                                + t.name + " t WHERE (" + t.key_list + ") IN (SELECT " + t.key_casts
                                + " FROM jsonb_array_elements($1::jsonb) k)",
                              json_array(chunk))) {
            found.insert(row[0].as<std::string>());
            if (row[2].as<bool>())
              rows.push_back(row[1].as<std::string>());
          }
        });
        if (err)
          return err;
        if (auto e = upsert(t, rows))
          return e;
        done += static_cast<int64_t>(rows.size());
        std::vector<std::string> gone;
        for (auto& k : chunk)
          if (found.count(k) == 0)
            gone.push_back(k);
        if (!gone.empty()) {
          auto body = json_array(gone);
          int64_t deleted = 0;
          err = with_connection(target_, [&](pqxx::connection& c) {
            pqxx::work tx{c};
            tx.exec("SET LOCAL gost.moving = 'on'");
            // A row gone at the source is deleted at the target when it is of the range there.
            deleted = static_cast<int64_t>(
              tx.exec_params(by_home(t) ? t.remove + " AND " + in_range(t.home) : t.remove, body)
                .affected_rows());
            tx.commit();
          });
          done += deleted;
          if (err)
            return err;
        }
      }
    }
    if (!seqs.empty()) {
      err = with_connection(source_, [&](pqxx::connection& c) {
        pqxx::nontransaction tx{c};
        tx.exec_params("DELETE FROM move_changes WHERE seq = ANY($1::bigint[])", "{" + seqs + "}");
      });
      if (err)
        return err;
    }
    report_.caught_up += done;
    say("catch-up",
        "round " + std::to_string(report_.rounds) + ": " + std::to_string(done) + " rows");
    return done;
  }

  /// The range's leases at the source: a new epoch owned by `moved:<target>`, which no node
  /// is and none may take (its heartbeat, `fenced_heartbeat`, never grows old). Commits hold their
  /// leases' rows to the end (FOR SHARE the shards they write, FOR KEY SHARE those they only
  /// check: a seller's home, an event's target): the rows locked FOR UPDATE first, in shard
  /// order as commits and heartbeats lock them, wait for both kinds in flight, and every later
  /// commit fails its check, as after a takeover.
  caf::error fence() {
    epochs_.clear();
    auto err = with_connection(source_, [&](pqxx::connection& c) {
      epochs_.clear();
      pqxx::work tx{c};
      tx.exec_params("INSERT INTO shard_leases (shard) SELECT generate_series($1::int, $2::int)"
                     " ON CONFLICT DO NOTHING",
                     static_cast<int64_t>(plan_.first), static_cast<int64_t>(plan_.last));
      tx.exec_params("SELECT shard FROM shard_leases WHERE shard BETWEEN $1 AND $2"
                     " ORDER BY shard FOR UPDATE",
                     static_cast<int64_t>(plan_.first), static_cast<int64_t>(plan_.last));
      for (auto row : tx.exec_params(
             "UPDATE shard_leases SET epoch = CASE WHEN owner = $3 THEN epoch ELSE epoch + 1 END,"
             " owner = $3, heartbeat_at = $4, acquired_at = now(), handoff_to = NULL"
             " WHERE shard BETWEEN $1 AND $2 RETURNING shard, epoch",
             static_cast<int64_t>(plan_.first), static_cast<int64_t>(plan_.last),
             "moved:" + plan_.to_name, fenced_heartbeat))
        epochs_[row[0].as<uint32_t>()] = row[1].as<int64_t>();
      tx.exec(std::string{"NOTIFY "} + cluster_channel);
      tx.commit();
    });
    if (err)
      return err;
    say("fence", shards_text(plan_.first, plan_.last) + " fenced at `" + plan_.from_name
                   + "`: calls for them wait for the switch");
    return {};
  }

  /// Rows whose ids are the database's own: inserted at the target with new ids (in id order:
  /// the outbox keeps its order per shard), then deleted at the source, a batch at a time. A
  /// move cut between the two leaves a batch at both: relayed twice (at least once, as ever).
  caf::error move_queued(const queued_table& q) {
    std::string cols;
    err_ = with_connection(target_, [&](pqxx::connection& c) {
      cols.clear();
      pqxx::nontransaction tx{c};
      for (auto& col : columns_of(tx, q.name))
        if (col.name != "id")
          cols += ", " + col.name;
    });
    if (err_)
      return err_;
    int64_t moved = 0;
    for (;;) {
      std::vector<std::string> rows;
      std::vector<std::string> ids;
      auto err = with_connection(source_, [&](pqxx::connection& c) {
        rows.clear();
        ids.clear();
        pqxx::nontransaction tx{c};
        for (auto row :
             tx.exec(std::string{"SELECT id, to_jsonb(t)::text FROM "} + q.name + " t WHERE "
                     + range_ + " ORDER BY id LIMIT " + std::to_string(opts_.batch))) {
          ids.push_back(row[0].as<std::string>());
          rows.push_back(row[1].as<std::string>());
        }
      });
      if (err)
        return err;
      if (rows.empty())
        break;
      auto body = json_array(rows);
      err = with_connection(target_, [&](pqxx::connection& c) {
        pqxx::nontransaction tx{c};
        tx.exec_params(std::string{"INSERT INTO "} + q.name + " (id" + cols
                         + ") SELECT nextval(pg_get_serial_sequence('" + q.sequence_of + "', 'id'))"
                         + cols + " FROM (SELECT * FROM jsonb_populate_recordset(NULL::" + q.name
                         + ", $1::jsonb) ORDER BY id) r",
                       body);
      });
      if (err)
        return err;
      std::string list;
      for (auto& id : ids)
        list += (list.empty() ? "" : ",") + id;
      err = with_connection(source_, [&](pqxx::connection& c) {
        pqxx::nontransaction tx{c};
        tx.exec(std::string{"DELETE FROM "} + q.name + " WHERE id IN (" + list + ")");
      });
      if (err)
        return err;
      moved += static_cast<int64_t>(rows.size());
    }
    report_.moved_queued += moved;
    if (moved > 0)
      say("fence", std::string{q.name} + ": " + std::to_string(moved) + " rows moved");
    return {};
  }

  /// The target's leases start at the fenced epochs (the taker's acquisition adds one: an
  /// epoch never goes back for a shard), then one catalog transaction points the range there.
  caf::error switch_map() {
    // The target's sequences past the source's: the copied rows keep their ids.
    for (auto& t : tables_)
      for (auto& seq : t.sequences) {
        int64_t at_source = 0;
        auto err = with_connection(source_, [&](pqxx::connection& c) {
          pqxx::nontransaction tx{c};
          at_source = tx.exec("SELECT last_value FROM " + seq)[0][0].as<int64_t>();
        });
        if (!err)
          err = with_connection(target_, [&](pqxx::connection& c) {
            pqxx::nontransaction tx{c};
            tx.exec("SELECT setval('" + seq + "', greatest(" + std::to_string(at_source)
                    + ", (SELECT last_value FROM " + seq + ")))");
          });
        if (err)
          return err;
      }
    std::string shards;
    std::string epochs;
    for (auto& [shard, epoch] : epochs_) {
      shards += (shards.empty() ? "" : ",") + std::to_string(shard);
      epochs += (epochs.empty() ? "" : ",") + std::to_string(epoch);
    }
    auto err = with_connection(target_, [&](pqxx::connection& c) {
      pqxx::nontransaction tx{c};
      tx.exec("INSERT INTO shard_leases (shard, epoch) SELECT * FROM unnest(ARRAY[" + shards
              + "]::int[], ARRAY[" + epochs
              + "]::bigint[]) ON CONFLICT (shard) DO UPDATE SET owner = NULL,"
                " heartbeat_at = NULL, handoff_to = NULL,"
                " epoch = greatest(shard_leases.epoch, EXCLUDED.epoch)");
    });
    if (err)
      return err;
    return with_connection(catalog_, [&](pqxx::connection& c) {
      pqxx::work tx{c};
      tx.exec("SELECT version FROM shard_map FOR UPDATE");
      tx.exec_params("UPDATE shard_ranges SET group_id = $2, moving_to = NULL"
                     " WHERE group_id = $1 AND moving_to = $2",
                     static_cast<int64_t>(plan_.from), static_cast<int64_t>(plan_.to));
      report_.map_version =
        tx.exec("UPDATE shard_map SET version = version + 1 RETURNING version")[0][0]
          .as<uint64_t>();
      tx.exec(std::string{"NOTIFY "} + groups_channel);
      tx.commit();
    });
  }

  /// The change log off, and the range's rows deleted at the source, a batch at a time (its
  /// lease rows stay, fenced: a node that still has the old map cannot take them).
  caf::error finish_source() {
    auto err = change_log_off();
    if (err)
      return err;
    std::vector<std::pair<std::string, std::string>> emptied; // table, rows
    for (size_t i = 0; i < tables_.size(); ++i) {
      auto& t = tables_[i];
      if (!by_home(t)) {
        emptied.emplace_back(t.name, rows_of(t.home));
      } else if (keyed_tables()[i].parent_there == nullptr) {
        // (A child's rows go with its parent's: ON DELETE CASCADE.)
        if (auto e = remove_by_home(t))
          return e;
      }
    }
    for (auto& t : dropped_tables())
      emptied.emplace_back(t.name, plan_.whole ? std::string{"true"}
                                               : in_range(home_sql(t.home, plan_.shard_count)));
    for (auto& e : emptied) {
      const auto& table = e.first;
      const auto& rows = e.second;
      for (;;) {
        int64_t n = 0;
        err = with_connection(source_, [&](pqxx::connection& c) {
          pqxx::work tx{c};
          tx.exec("SET LOCAL gost.moving = 'on'"); // past the fence of the feeds' tables
          n = tx.exec("DELETE FROM " + table + " WHERE ctid IN (SELECT ctid FROM " + table
                      + " t WHERE " + rows + " LIMIT 5000)")
                .affected_rows();
          tx.commit();
        });
        if (err)
          return err;
        report_.removed += n;
        if (n == 0)
          break;
      }
    }
    say("clean", std::to_string(report_.removed) + " rows deleted at `" + plan_.from_name + "`");
    return {};
  }

  /// The rows of the range in a table without a shard column, at the source, when a part
  /// moved: the table is read once in key order, a batch at a time (a `DELETE ... LIMIT` would
  /// read the rows that stay again at every batch), and the batch's rows of the range deleted.
  caf::error remove_by_home(const table_sql& t) {
    return remove_by_home(source_, t, &report_.removed);
  }
  caf::error remove_by_home(pg_pool& where, const table_sql& t, int64_t* count) {
    std::vector<std::string> last;
    for (;;) {
      size_t seen = 0;
      int64_t removed = 0;
      auto err = with_connection(where, [&](pqxx::connection& c) {
        seen = 0;
        removed = 0;
        pqxx::work tx{c};
        tx.exec("SET LOCAL gost.moving = 'on'"); // past the fence of the feeds' tables
        std::vector<std::string> doomed;
        std::vector<std::string> key;
        for (auto row : tx.exec("SELECT " + t.key_json + ", " + in_range(t.home) + ", " + t.key_list
                                + " FROM " + t.name + " t WHERE true" + after_key(tx, t, last)
                                + " ORDER BY " + t.key_list + " LIMIT 5000")) {
          ++seen;
          if (row[1].as<bool>())
            doomed.push_back(row[0].as<std::string>());
          key.clear();
          for (size_t i = 2; i < row.size(); ++i)
            key.push_back(row[static_cast<int>(i)].as<std::string>());
        }
        if (!doomed.empty())
          removed =
            static_cast<int64_t>(tx.exec_params(t.remove, json_array(doomed)).affected_rows());
        tx.commit();
        if (seen > 0)
          last = key;
      });
      if (err)
        return err;
      *count += removed;
      if (seen < 5000)
        return {};
    }
  }

  pg_pool& catalog_;
  pg_pool& source_;
  pg_pool& target_;
  const move_plan& plan_;
  const move_options& opts_;
  std::string range_;
  std::vector<table_sql> tables_;
  std::map<uint32_t, int64_t> epochs_;
  move_report report_;
  caf::error err_;
};

} // namespace

std::variant<move_plan, std::string> plan_move(const group_map& map, uint32_t first, uint32_t last,
                                               const std::string& to) {
  auto n = map.shard_count();
  if (first > last)
    return "the range " + std::to_string(first) + "-" + std::to_string(last)
           + " ends before it starts: give FIRST-LAST with FIRST <= LAST";
  if (last >= n)
    return shards_text(first, last) + " go past the installation's " + std::to_string(n)
           + " shards (0-" + std::to_string(n - 1) + ")";
  const shard_group* target = nullptr;
  for (auto& g : map.groups())
    if (g.name == to)
      target = &g;
  if (target == nullptr) {
    std::string names;
    for (auto& g : map.groups())
      names += (names.empty() ? "" : ", ") + g.name;
    return "no group is named `" + to + "` (declared: " + names
           + "); declare it first with `gostctl group add`";
  }
  auto from = map.range_of(first).group;
  for (auto s = first; s <= last; ++s)
    if (map.range_of(s).group != from)
      return shards_text(first, last) + " span groups `" + map.find(from)->name + "` and `"
             + map.group_of(s).name + "`: move one group's shards at a time";
  auto& source = *map.find(from);
  if (from == target->id)
    return shards_text(first, last) + " are in group `" + to + "` already";
  for (auto& r : map.ranges())
    if (r.moving_to && (r.group != from || *r.moving_to != target->id))
      return "a move is under way: " + shards_text(r.first, r.last) + " of `"
             + map.find(r.group)->name + "` to `" + map.find(*r.moving_to)->name
             + "`; ask for that move again to finish it first";
  auto held = map.shards_of(from);
  // The shards marked moving (by a move begun earlier) must be this move's, all of them.
  std::vector<uint32_t> marked;
  for (auto& r : map.ranges())
    if (r.moving_to)
      for (auto s = r.first; s <= r.last; ++s)
        marked.push_back(s);
  bool same = marked.size() == static_cast<size_t>(last - first + 1) && marked.front() == first
              && marked.back() == last;
  if (!marked.empty() && !same)
    return "a move of " + shards_text(marked.front(), marked.back()) + " of `" + source.name
           + "` to `" + to + "` is under way; ask for that move again to finish it first";
  move_plan p;
  p.first = first;
  p.last = last;
  p.from = from;
  p.to = target->id;
  p.from_name = source.name;
  p.to_name = target->name;
  p.whole = held.front() == first && held.back() == last
            && held.size() == static_cast<size_t>(last - first + 1);
  p.shard_count = n;
  p.resumed = !marked.empty();
  return p;
}

std::vector<std::string> move_covered_tables() {
  std::vector<std::string> out{"shard_leases"};
  for (auto& t : keyed_tables())
    out.emplace_back(t.name);
  for (auto& t : queued_tables())
    out.emplace_back(t.name);
  return out;
}

caf::expected<move_report> move_shards(pg_pool& catalog, pg_pool& source, pg_pool& target,
                                       const move_plan& plan, const move_options& opts) {
  mover m{catalog, source, target, plan, opts};
  return m.run();
}

} // namespace gost::persistence
