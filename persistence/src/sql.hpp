#pragma once
// Internal to persistence/: small helpers for building multi-row statements (shared by the
// tables of every domain). Never include from other folders.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace gost::persistence {

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
  size_t size() const { return rows_; }
  const std::string& str() const { return text_; }

private:
  std::string text_;
  size_t rows_ = 0;
};

/// Binary parameters ($n) of one statement: bytea values travel as they are, with no escaping
/// on our side and no hex decoding on the server's.
class blob_params {
public:
  /// Adds a value and returns its placeholder.
  std::string add(const std::string& bytes) {
    blobs_.emplace_back(bytes);
    return "$" + std::to_string(blobs_.size()) + "::bytea";
  }
  pqxx::result exec(pqxx::transaction_base& tx, const std::string& sql) const {
    return tx.exec_params(sql, pqxx::prepare::make_dynamic_params(blobs_));
  }

private:
  std::vector<pqxx::binarystring> blobs_;
};

/// "a,b,c" of quoted values, for `IN (...)` lists.
template <class Strings>
std::string quoted_list(pqxx::transaction_base& tx, const Strings& values) {
  std::string out;
  for (auto& v : values)
    out += (out.empty() ? "" : ",") + tx.quote(v);
  return out;
}

/// "1,2,3" of numbers, for `IN (...)` lists.
template <class Numbers>
std::string number_list(const Numbers& values) {
  std::string out;
  for (auto v : values)
    out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

/// The leases a batch's fence read: the epochs at which the writer holds its shards, and the
/// shards that moved to another group's database (owner `moved:<group>`, ADR 0023).
struct batch_leases {
  std::map<uint32_t, int64_t> held;
  std::set<uint32_t> moved;
  std::set<uint32_t> here; ///< shards of this database: a lease row, not marked moved
};

/// A SELECT (columns shard, epoch, mine, moved) that locks the lease rows of `own` FOR SHARE
/// and those of `others` (less `own`) FOR KEY SHARE, one row after the other in shard order.
///
/// - FOR SHARE on the shards a commit writes: a takeover (an acquisition, `FOR NO KEY UPDATE`,
///   or a release) waits for the commit, and one that happened already shows as another epoch
///   or owner.
/// - FOR KEY SHARE on the other nodes' shards a commit only checks (a new offer's seller's
///   home, an entity event's target): only a move's fence (`FOR UPDATE`, in shard order)
///   waits for the commit; those nodes' heartbeats and acquisitions (no-key UPDATEs) do not.
/// - One pass in shard order, as heartbeats, `free_previous_leases` and the fence lock: no
///   deadlock with any of them (two passes, one per strength, could meet the fence crosswise).
/// `mine` is the row's owner being `owner`; `moved` its being `moved:<group>` (ADR 0023).
/// A batch that only writes (the common case) gets the plain `IN (...) ORDER BY shard FOR
/// SHARE`: the LATERAL form costs about 15 % more as a statement (docs/performance.md).
inline std::string locked_leases(pqxx::transaction_base& tx, const std::set<uint32_t>& own,
                                 const std::set<uint32_t>& others, const std::string& owner) {
  std::set<uint32_t> all = own;
  all.insert(others.begin(), others.end());
  if (all.size() == own.size()) // every shard written: one strength, the plain statement
    return "SELECT shard, epoch, owner = " + tx.quote(owner)
           + " AS mine, owner LIKE 'moved:%' AS moved FROM shard_leases WHERE shard IN ("
           + number_list(own) + ") ORDER BY shard FOR SHARE";
  std::string shards, strong;
  for (auto s : all) {
    shards += (shards.empty() ? "" : ",") + std::to_string(s);
    strong += std::string{strong.empty() ? "" : ","} + (own.count(s) != 0 ? "t" : "f");
  }
  return "SELECT u.shard, coalesce(a.epoch, b.epoch) AS epoch,"
         " coalesce(a.owner, b.owner) = "
         + tx.quote(owner)
         + " AS mine, coalesce(a.owner, b.owner) LIKE 'moved:%' AS moved"
           " FROM unnest('{"
         + shards + "}'::int[], '{" + strong
         + "}'::bool[]) AS u(shard, own)"
           " LEFT JOIN LATERAL (SELECT epoch, owner FROM shard_leases s"
           "   WHERE s.shard = u.shard AND u.own FOR SHARE) a ON true"
           " LEFT JOIN LATERAL (SELECT epoch, owner FROM shard_leases s"
           "   WHERE s.shard = u.shard AND NOT u.own FOR KEY SHARE) b ON true"
           " WHERE a.epoch IS NOT NULL OR b.epoch IS NOT NULL";
}

/// The write-behind fence (offers' writers): the epochs at which `owner` holds the lease of
/// each shard of `writes` (fenced_write<...>s), their rows locked FOR SHARE (locked_leases), so
/// that a takeover waits for the commit. A shard held by another node, or by none, is left
/// out: its writes are fenced whatever their epoch, since an epoch alone can be issued twice
/// when a failover lost its bump (ADR 0023 §6). `also`: more shards locked in the same
/// statement, FOR KEY SHARE unless written too (a new offer's seller's home shard), reported
/// in `moved` when a split fenced them (the fence waits for this commit).
template <class Writes>
batch_leases held_leases(pqxx::transaction_base& tx, const Writes& writes, const std::string& owner,
                         const std::set<uint32_t>& also = {}) {
  std::set<uint32_t> own;
  for (auto& w : writes)
    own.insert(w.shard);
  batch_leases out;
  if (own.empty() && also.empty())
    return out;
  for (auto row : tx.exec(locked_leases(tx, own, also, owner))) {
    auto shard = row[0].as<uint32_t>();
    if (!row[2].is_null() && row[2].as<bool>())
      out.held[shard] = row[1].as<int64_t>();
    if (!row[3].is_null() && row[3].as<bool>())
      out.moved.insert(shard);
    else
      out.here.insert(shard);
  }
  return out;
}

} // namespace gost::persistence
