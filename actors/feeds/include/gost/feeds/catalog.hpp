// The category catalog and its attributes (seed 004, "unification"): recognises the category a
// seller wrote (an Avito Autoload `Category`, a YML shop's category path, …) and checks and
// normalises the seller's attributes against it. Built from two TSV texts
// (actors/feeds/data/README.md); `builtin()` is the one compiled into the binary.
// Immutable after parse, so one catalog is shared by every thread without locks.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gost::feeds {

struct category {
  std::string id;                   // stable slug, "transport.cars"
  std::string name;                 // "Автомобили"
  std::string path;                 // "Транспорт / Автомобили"
  const category* parent = nullptr; // null for a top-level category
  std::vector<std::string> synonyms;
  int depth = 0;    // 0 for a top-level category
  size_t order = 0; // position in the file

  // True when this is `other` or one of its descendants.
  bool within(const category& other) const;
};

enum class attribute_type { enumeration, number, text };

struct attribute {
  std::string id;                    // slug, unique within a category: "color", "transmission"
  std::string name;                  // canonical Russian name, "Коробка передач"
  std::vector<std::string> synonyms; // other names sellers use
  const category* owner = nullptr;   // null: every category ("*")
  attribute_type type = attribute_type::text;
  std::vector<std::string> values; // enumeration: the canonical values, in file order
  std::optional<double> min, max;  // number: bounds, inclusive
  std::vector<std::string> units;  // number: accepted unit suffixes
  size_t max_length = 0;           // text: in code points
};

enum class attribute_error { none, unknown_attribute, bad_value };

struct attribute_result {
  attribute_error error = attribute_error::none;
  std::string id;                  // canonical attribute id (empty on unknown_attribute)
  std::string value;               // canonical value (empty on an error)
  std::string message;             // what is wrong, for the seller's report (empty when ok)
  const attribute* attr = nullptr; // the attribute matched (null on unknown_attribute)

  explicit operator bool() const { return error == attribute_error::none; }
};

struct catalog_result;

class catalog {
public:
  // Parses the two files; on the first problem returns an error naming the file
  // ("categories.tsv" / "attributes.tsv"), the line and what is wrong.
  static catalog_result parse(std::string_view categories_tsv, std::string_view attributes_tsv);

  // The catalog compiled into the binary (data/*.tsv, embedded by data/embed.cmake). Parsed
  // once on first use; a broken embedded file is a build defect, so it aborts with the message.
  static const catalog& builtin();

  // The category of a path as the seller wrote it, most general level first
  // ({"Транспорт", "Автомобили"}, {"Смартфоны"}, {"Электроника", "Смартфоны"}). Each level is
  // matched by folded name or synonym; the result is the deepest category of the longest chain
  // of recognised levels each descending from the one before. Levels that are unknown, or
  // recognised but off that chain, are skipped. Ambiguous names are settled by the earlier
  // levels, then by file order. Null when no level is recognised.
  const category* find(const std::vector<std::string>& levels) const;

  // A category by its id, null if unknown.
  const category* by_id(std::string_view id) const;

  // Checks one attribute of an offer in category c: the name is matched (folded, synonyms) among
  // the attributes of c and its ancestors, the nearest definition winning; the value must fit the
  // attribute's type. See attribute_result.
  attribute_result resolve(const category& c, std::string_view name, std::string_view value) const;

  // The attributes that apply to c (its own, then its ancestors', then "*"), one per id.
  std::vector<const attribute*> attributes(const category& c) const;

  // All categories in file order.
  const std::vector<const category*>& categories() const;

  catalog(catalog&&) noexcept;
  catalog& operator=(catalog&&) noexcept;
  ~catalog();

  struct impl;

private:
  explicit catalog(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

struct catalog_result {
  std::optional<catalog> value;
  std::string error; // "attributes.tsv:12: unknown category \"transport.carz\""

  explicit operator bool() const { return value.has_value(); }
};

} // namespace gost::feeds
