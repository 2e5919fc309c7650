#pragma once
// A stage with a typed state: write `should_process` and `process` against your own protobuf
// message instead of google.protobuf.Any; the packing is done here (docs/adding-a-stage.md).
//
//   class photo_count final : public gost::typed_stage<photos::v1::PhotoCount> {
//     gost::decision should_process(const gost::v1::Offer& o, const photos::v1::PhotoCount* s)
//     const override; gost::typed_result<photos::v1::PhotoCount> process(const gost::v1::Offer& o,
//                                                       const photos::v1::PhotoCount* s) const
//                                                       override;
//   };

#include <optional>

#include "gost/offers/stage.hpp"

namespace gost {

/// `process`'s answer with a typed state; every part is optional (stage_result's meaning).
template <class State>
struct typed_result {
  std::optional<v1::Offer> offer;
  std::optional<State> state;
  std::optional<stage_clock::time_point> timer;
};

template <class State>
class typed_stage : public stage {
public:
  /// `state` is null until the stage first stored one.
  virtual decision should_process(const v1::Offer& offer, const State* state) const = 0;
  virtual typed_result<State> process(const v1::Offer& offer, const State* state) const = 0;

  decision should_process(const v1::Offer& offer, const google::protobuf::Any* state) const final {
    State s;
    return should_process(offer, unpack(state, s));
  }

  stage_result process(const v1::Offer& offer, const google::protobuf::Any* state) const final {
    State s;
    auto r = process(offer, unpack(state, s));
    stage_result out;
    out.offer = std::move(r.offer);
    out.timer = r.timer;
    if (r.state) {
      out.state.emplace();
      out.state->PackFrom(*r.state);
    }
    return out;
  }

  const google::protobuf::Descriptor* state_type() const final { return State::descriptor(); }

private:
  /// Null when there is no state; a stored state of another type is a failure of the run
  /// (never silently replaced).
  static const State* unpack(const google::protobuf::Any* state, State& into) {
    if (state == nullptr)
      return nullptr;
    if (!state->UnpackTo(&into))
      throw std::runtime_error("the stage's stored state is a " + state->type_url() + ", not a "
                               + State::descriptor()->full_name());
    return &into;
  }
};

} // namespace gost
