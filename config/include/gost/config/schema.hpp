#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gost::config {

/// The kinds of value a key can hold. Durations are written with a unit: `250ms`, `5s`, `2m`,
/// `1h`; sizes in bytes take `k`/`m`/`g` suffixes (powers of 1024).
enum class value_kind { string, integer, boolean, duration, size };

const char* to_string(value_kind k);

/// One configuration key: everything a user needs to know about it lives here, and
/// `docs/config.md` and `gostd --help` are generated from it. Every key is read once, when the
/// node starts: nothing reloads configuration, so changing any key takes a restart.
struct key_spec {
  std::string name; ///< dotted, lower case: `pg.pool_size`
  value_kind kind;
  std::string default_value;  ///< textual, parsed like user input
  std::optional<int64_t> min; ///< bounds for integer/duration (ms)/size (bytes)
  std::optional<int64_t> max;
  std::vector<std::string> choices; ///< for strings with a closed set of values
  std::string description;
  /// A further check of the text (a structured string such as `host:port`), run after the
  /// kind's own; returns the problem, or an empty string. Set by the binding of a member type
  /// that is parsed from text (binding.hpp).
  std::function<std::string(const std::string&)> check;
  /// A secret (a token): never shown in the configuration dump (log, status page).
  bool secret = false;

  /// `GOST_PG_POOL_SIZE` for `pg.pool_size`.
  std::string env_name() const;
};

/// A parsed, validated value.
struct value {
  std::string text;   ///< as written (after unquoting)
  int64_t number = 0; ///< integer, duration in ms, size in bytes, boolean 0/1
  std::string source; ///< "default", "file <path>:<line>", "env GOST_X", "command line"
};

/// The schema: an ordered set of keys. Parsing and validation go through it, so a key that
/// is not in the schema can never be read.
class schema {
public:
  schema& add(key_spec spec);
  const key_spec* find(std::string_view name) const;
  const std::vector<key_spec>& keys() const noexcept { return keys_; }

  /// Parses `text` as a value of `spec`; on failure returns nullopt and sets `error` to a
  /// message naming the key and what is allowed.
  static std::optional<value> parse(const key_spec& spec, const std::string& text,
                                    std::string source, std::string& error);

  /// Markdown reference table (docs/config.md), headed with the program's name (an
  /// application's `--config-reference` is its own).
  std::string reference_markdown(const std::string& program = "gostd") const;
  /// Plain-text help listing for `--help`.
  std::string help_text() const;

private:
  std::vector<key_spec> keys_;
};

/// Values for every key of a schema, layered: defaults < file < environment < command line.
class settings {
public:
  /// `program` is named in the errors (`see gost_example --help`).
  explicit settings(const schema& s, std::string program = "gostd");

  /// Reads an INI file: `[section]` headers prefix keys (`[pg]` + `dsn = ...` is `pg.dsn`),
  /// `;` and `#` start comments, strings may be double-quoted. Unknown keys are errors.
  bool load_file(const std::string& path, std::string& error);
  /// Reads `GOST_*` variables for known keys from `envp` (unrelated variables are ignored).
  bool load_env(char** envp, std::string& error);
  /// Sets one key (command line); unknown keys and bad values are errors.
  bool set(const std::string& name, const std::string& text, const std::string& source,
           std::string& error);

  const value& get(std::string_view name) const;
  const std::string& str(std::string_view name) const { return get(name).text; }
  int64_t num(std::string_view name) const { return get(name).number; }
  bool flag(std::string_view name) const { return get(name).number != 0; }
  std::chrono::milliseconds ms(std::string_view name) const {
    return std::chrono::milliseconds{get(name).number};
  }

  /// `key = value  (source)` lines, for the start-up log and `gostctl`.
  std::string dump() const;

private:
  const schema& schema_;
  std::string program_;
  std::map<std::string, value, std::less<>> values_;
};

} // namespace gost::config
