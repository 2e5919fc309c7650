#pragma once
// Generic pieces of typed routing, shared by every entity protocol:
//
// - every request to an entity names its entity first, right after its atoms
//   (`(get_atom, id)`, `(update_atom, state_atom, id, stage, ...)`), so `entity_id_of(args...)`
//   finds where it goes without knowing the operation;
// - `reply_of<Ops, Ts...>` is the reply type of request `Ts...` to an actor of interface
//   `Ops`, computed from the interface (a request the interface does not have fails to compile);
// - `make_handlers<Sigs>(f)` turns a list of signatures into one handler per signature, each
//   calling `f(reply_tag<Out...>{}, args&...)`: a shard, a peer link or any other forwarder
//   implements a whole interface with one generic lambda, so an operation is spelled once (in
//   its protocol header), not once per forwarder.

#include <string>
#include <tuple>
#include <type_traits>

#include <caf/atom.hpp>
#include <caf/detail/type_list.hpp>
#include <caf/replies_to.hpp>
#include <caf/response_type.hpp>
#include <caf/result.hpp>
#include <caf/typed_response_promise.hpp>

namespace gost {

template <class T>
struct is_atom_constant : std::false_type {};

template <caf::atom_value V>
struct is_atom_constant<caf::atom_constant<V>> : std::true_type {};

/// The entity a request is for: its first argument after the atoms.
template <class T, class... Ts>
const std::string& entity_id_of(const T& x, const Ts&... xs) {
  if constexpr (is_atom_constant<T>::value) {
    static_assert(sizeof...(Ts) > 0, "an entity request names its entity after its atoms");
    return entity_id_of(xs...);
  } else {
    static_assert(std::is_same<T, std::string>::value,
                  "an entity request names its entity (a std::string) right after its atoms");
    return x;
  }
}

/// The reply types of request `Ts...` to an actor with interface `Ops` (a caf::typed_actor),
/// as a caf::detail::type_list.
template <class Ops, class... Ts>
using replies_of = typename caf::response_type<typename Ops::signatures, std::decay_t<Ts>...>::type;

/// The reply type of a request with a one-value reply.
template <class Ops, class... Ts>
using reply_of = typename caf::detail::tl_head<replies_of<Ops, Ts...>>::type;

/// Names the reply of the signature a handler made by `make_handlers` serves.
template <class... Outs>
struct reply_tag {
  using result_type = caf::result<Outs...>;
  using promise_type = caf::typed_response_promise<Outs...>;
};

namespace detail {

template <class Sig>
struct handler_for;

template <class... Ins, class... Outs>
struct handler_for<caf::typed_mpi<caf::detail::type_list<Ins...>, caf::output_tuple<Outs...>>> {
  template <class F>
  static auto make(F f) {
    return [f](Ins&... xs) -> caf::result<Outs...> { return f(reply_tag<Outs...>{}, xs...); };
  }
};

template <class Sigs>
struct handlers_for;

template <class... Sigs>
struct handlers_for<caf::detail::type_list<Sigs...>> {
  template <class F>
  static auto make(F f) {
    return std::make_tuple(handler_for<Sigs>::make(f)...);
  }
};

} // namespace detail

/// One handler per signature in `Sigs` (e.g. `offer_ops::signatures`), as a std::tuple: each
/// takes the signature's arguments by reference and returns `f(reply_tag<Out...>{}, args...)`,
/// which must convert to `caf::result<Out...>` (a value, an error, a delegation, a promise).
template <class Sigs, class F>
auto make_handlers(F f) {
  return detail::handlers_for<Sigs>::make(std::move(f));
}

namespace detail {

template <class Outs>
struct reply_handler;

template <class... Outs>
struct reply_handler<caf::detail::type_list<Outs...>> {
  template <class F>
  static auto make(F f) {
    return [f](Outs&... xs) mutable { f(xs...); };
  }
};

} // namespace detail

/// A response handler for request `Ts...` to an `Ops` actor with the reply's exact signature
/// (as CAF's typed `request(...).then(...)` wants), calling the generic `f(reply&...)`.
template <class Ops, class... Ts, class F>
auto on_reply(F f) {
  return detail::reply_handler<replies_of<Ops, Ts...>>::make(std::move(f));
}

/// A typed behavior of interface `Behavior` from a tuple of handlers (make_handlers) and more
/// handlers for the interface's other signatures.
template <class Behavior, class Tuple, class... Fs>
Behavior make_behavior(Tuple handlers, Fs... more) {
  return std::apply([&](auto&... hs) { return Behavior{hs..., more...}; }, handlers);
}

} // namespace gost
