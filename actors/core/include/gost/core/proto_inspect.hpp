#pragma once
// Lets CAF carry protobuf messages: a value of `pb<M>` travels as M's wire bytes when it
// crosses a process boundary and as itself (copy-on-write in caf::message) inside one.

#include <string>
#include <utility>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

namespace gost {

template <class M>
struct pb {
  M value;

  pb() = default;
  explicit pb(M x) : value(std::move(x)) {}
};

template <class Inspector, class M>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, pb<M>& x) {
  std::string bytes;
  x.value.SerializeToString(&bytes);
  return f(caf::meta::type_name(M::descriptor()->full_name().c_str()), bytes);
}

template <class Inspector, class M>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, pb<M>& x) {
  std::string bytes;
  auto parse = caf::meta::load_callback([&]() -> caf::error {
    if (!x.value.ParseFromString(bytes))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name(M::descriptor()->full_name().c_str()), bytes, parse);
}

} // namespace gost
