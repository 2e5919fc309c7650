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

/// The write-behind fence (offers' and entities' writers): the epochs at which `owner` holds
/// the lease of each shard of `writes` (fenced_write<...>s), read FOR SHARE in shard order, so
/// that a takeover (which updates the lease row) waits for the commit. A shard held by another
/// node, or by none, is left out: its writes are fenced whatever their epoch, since an epoch
/// alone can be issued twice when a failover lost its bump (ADR 0023 §6).
template <class Writes>
std::map<uint32_t, int64_t> held_leases(pqxx::transaction_base& tx, const Writes& writes,
                                        const std::string& owner) {
  std::set<uint32_t> shards;
  for (auto& w : writes)
    shards.insert(w.shard);
  std::map<uint32_t, int64_t> held;
  if (!shards.empty())
    for (auto row : tx.exec("SELECT shard, epoch, owner = " + tx.quote(owner)
                            + " FROM shard_leases WHERE shard IN (" + number_list(shards)
                            + ") ORDER BY shard FOR SHARE"))
      if (!row[2].is_null() && row[2].as<bool>())
        held[row[0].as<uint32_t>()] = row[1].as<int64_t>();
  return held;
}

} // namespace gost::persistence
