#pragma once
// Internal to persistence/: small helpers for building multi-row statements (shared by the
// tables of every domain). Never include from other folders.

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

} // namespace gost::persistence
