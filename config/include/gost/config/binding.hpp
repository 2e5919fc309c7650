#pragma once
// A key bound to the member it fills, on the key's own line of the schema (redpanda's
// `property<T>`, in C++17):
//
//   keys.add(num(value_kind::integer, "pg.pool_size", "4", 1, 256, "Connections of the pool."),
//            bind_to(&node_config::pg, &pg_config::pool_size));
//
// (`bind_to`, not `bind`: argument-dependent lookup would find std::bind for chrono members.)
//
// The member's type decides how a value reaches it and which keys may fill it:
// `std::string` takes a string key, `bool` a boolean, an integer type an integer or size key
// whose bounds fit the type, `std::chrono::milliseconds` a duration. A type parsed from text
// (`host:port`, a list) specializes `member_traits` with a `parse`; the schema then runs that
// parse as the key's `check` when the value is read, so a bad value is reported with where it
// came from (file and line, variable, command line). A key whose kind or bounds do not fit its
// member is a bug: `bound_schema::add` throws, and every test and every start builds the
// schema.

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gost/config/schema.hpp"

namespace gost::config {

/// How a value reaches a member of type `T`:
///   static bool fits(const key_spec&)            the key may fill such a member
///   static std::string parse(const value&, T&)   converts; returns the problem or ""
///   static constexpr bool parses_text            parse can fail: run it when reading
template <class T, class = void>
struct member_traits; // a member type with no traits cannot be bound (compile error)

template <>
struct member_traits<std::string> {
  static constexpr bool parses_text = false;
  static bool fits(const key_spec& k) { return k.kind == value_kind::string; }
  static std::string parse(const value& v, std::string& out) {
    out = v.text;
    return {};
  }
};

template <>
struct member_traits<bool> {
  static constexpr bool parses_text = false;
  static bool fits(const key_spec& k) { return k.kind == value_kind::boolean; }
  static std::string parse(const value& v, bool& out) {
    out = v.number != 0;
    return {};
  }
};

template <class T>
struct member_traits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr bool parses_text = false;
  /// Integer and size keys with both bounds inside T's range (so the cast below is exact).
  static bool fits(const key_spec& k) {
    if ((k.kind != value_kind::integer && k.kind != value_kind::size) || !k.min || !k.max)
      return false;
    using lim = std::numeric_limits<T>;
    if constexpr (std::is_signed_v<T>)
      return *k.min >= lim::min() && *k.max <= lim::max();
    else
      return *k.min >= 0 && static_cast<uint64_t>(*k.max) <= lim::max();
  }
  static std::string parse(const value& v, T& out) {
    out = static_cast<T>(v.number);
    return {};
  }
};

template <>
struct member_traits<std::chrono::milliseconds> {
  static constexpr bool parses_text = false;
  static bool fits(const key_spec& k) { return k.kind == value_kind::duration; }
  static std::string parse(const value& v, std::chrono::milliseconds& out) {
    out = std::chrono::milliseconds{v.number};
    return {};
  }
};

/// What `bind_to` makes: how a key's value reaches its member of `Config`.
template <class Config>
struct binding {
  std::function<bool(const key_spec&)> fits;
  std::function<std::string(const value&, Config&)> assign; ///< the problem, or ""
  std::function<std::string(const std::string&)> check;     ///< empty unless parsed from text
};

/// Binds a key to the member reached from `Config` through `first` and then `rest`:
/// `bind_to(&node_config::pg, &pg_config::dsn)`, or for a nested section
/// `bind_to(&node_config::stages, &stages_config::expire, &expire_stage_config::after)`.
template <class Config, class First, class... Rest>
binding<Config> bind_to(First Config::*first, Rest... rest) {
  using member_t = std::remove_reference_t<decltype(((std::declval<Config&>().*first).*....*rest))>;
  using traits = member_traits<member_t>;
  binding<Config> b;
  b.fits = [](const key_spec& k) { return traits::fits(k); };
  b.assign = [first, rest...](const value& v, Config& c) {
    return traits::parse(v, ((c.*first).*....*rest));
  };
  if constexpr (traits::parses_text)
    b.check = [](const std::string& text) {
      value v;
      v.text = text;
      member_t scratch{};
      return traits::parse(v, scratch);
    };
  return b;
}

/// A schema whose every key is bound to a member of `Config`: declaring a key and binding it
/// is one call, so there is no key without a member and no member without a key.
template <class Config>
class bound_schema {
public:
  bound_schema& add(key_spec spec, binding<Config> b) {
    if (!b.fits(spec))
      throw std::logic_error("config key `" + spec.name
                             + "`: its kind or bounds do not fit the member it is bound to");
    if (b.check)
      spec.check = std::move(b.check);
    auto name = spec.name;
    schema_.add(std::move(spec)); // parses the default, check included
    bound_.push_back({std::move(name), std::move(b.assign)});
    return *this;
  }

  const schema& keys() const noexcept { return schema_; }

  /// Sets every bound member of `out` from `st`. On a value its member cannot take, returns
  /// false with `error` naming the key.
  bool fill(const settings& st, Config& out, std::string& error) const {
    for (auto& [name, assign] : bound_) {
      if (auto problem = assign(st.get(name), out); !problem.empty()) {
        error = "config key `" + name + "` is invalid: " + problem;
        return false;
      }
    }
    return true;
  }

private:
  struct bound_key {
    std::string name;
    std::function<std::string(const value&, Config&)> assign;
  };
  schema schema_;
  std::vector<bound_key> bound_;
};

} // namespace gost::config
