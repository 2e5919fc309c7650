#include "gost/offers/builtin_stages.hpp"

#include "gost/v1/events.pb.h"

namespace gost {

namespace {

constexpr int max_entries = 64;

/// Records where each of its runs happened (node, shard, lease epoch) and comes back by timer.
class audit_stage final : public stage {
public:
  explicit audit_stage(std::chrono::milliseconds every) : every_(every) {}

  decision should_process(const v1::Offer&, const google::protobuf::Any* state) const override {
    // A new offer runs now; one with a trail already has its timer queued.
    return state == nullptr ? decision::process() : decision::skip();
  }

  stage_result process(const v1::Offer&, const google::protobuf::Any* state) const override {
    v1::AuditTrail trail;
    if (state != nullptr)
      state->UnpackTo(&trail);
    auto* e = trail.add_entries();
    if (auto* run = current_run()) {
      e->set_node_id(run->node_id);
      e->set_shard(run->shard);
      e->set_epoch(run->epoch);
    }
    auto now = stage_clock::now();
    e->set_at_us(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count());
    trail.set_runs(trail.runs() + 1);
    if (trail.entries_size() > max_entries)
      trail.mutable_entries()->DeleteSubrange(0, trail.entries_size() - max_entries);
    stage_result r;
    r.state.emplace();
    r.state->PackFrom(trail);
    r.timer = now + every_;
    return r;
  }

  std::vector<std::string> interests() const override { return {"id"}; } // runs by its timer

  const google::protobuf::Descriptor* state_type() const override {
    return v1::AuditTrail::descriptor();
  }

private:
  std::chrono::milliseconds every_;
};

} // namespace

std::shared_ptr<const stage> make_audit_stage(std::chrono::milliseconds every) {
  return std::make_shared<audit_stage>(every);
}

} // namespace gost
