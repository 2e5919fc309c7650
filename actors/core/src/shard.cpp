// The kit shard's logging (one place, one format: `event key=value ...`), out of the template.
#include "gost/core/kit/shard.hpp"

#include "gost/core/log.hpp"

namespace gost::kit {

namespace {

const auto lg = gost::log::get("kit");

} // namespace

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

namespace log {

void drained(const char* kind, uint32_t shard) {
  lg->info("shard drained kind={} shard={}", kind, shard);
}

void draining(const char* kind, uint32_t shard, size_t resident) {
  lg->info("shard draining kind={} shard={} resident={}", kind, shard, resident);
}

void drain_cut(const char* kind, uint32_t shard, std::chrono::milliseconds after,
               const std::vector<std::string>& ids) {
  // Every id, so that an operator can look each one up (they are few: a drain passivates the
  // idle ones at once, and only actors inside an event are left).
  std::string list;
  for (auto& id : ids)
    list += (list.empty() ? "" : ",") + id;
  lg->warn("shard drain cut kind={} shard={} after_ms={} cut={} ids={}; the next owner redoes "
           "their unfinished work (raise cluster.drain_timeout if they needed longer)",
           kind, shard, after.count(), ids.size(), list);
}

void dead_letter(const char* kind, uint32_t shard, const std::string& id, const std::string& lane,
                 int attempts, const std::string& reason) {
  lg->error("dead letter kind={} shard={} id={} lane={} attempts={} reason={}", kind, shard, id,
            lane, attempts, reason);
}

void dead_letter_not_written(const char* kind, uint32_t shard, const std::string& id,
                             const std::string& lane, const caf::error& err) {
  lg->warn("dead letter not written kind={} shard={} id={} lane={} error={}", kind, shard, id, lane,
           error_message(err));
}

void lease_lost(const char* kind, uint32_t shard) {
  lg->error("shard lease lost kind={} shard={}; stopping the shard", kind, shard);
}

void run_failed(const char* kind, uint32_t shard, const std::string& id, const std::string& lane,
                int attempt, bool outage, int64_t retry_in_ms, const caf::error& err) {
  if (outage)
    lg->warn("run unavailable kind={} shard={} id={} lane={} retry_in_ms={} error={}", kind, shard,
             id, lane, retry_in_ms, error_message(err));
  else
    lg->warn("run failed kind={} shard={} id={} lane={} attempt={} retry_in_ms={} error={}", kind,
             shard, id, lane, attempt, retry_in_ms, error_message(err));
}

void poll_failed(const char* kind, uint32_t shard, const caf::error& err,
                 std::chrono::milliseconds retry_in) {
  lg->warn("queue poll failed kind={} shard={} retry_in_ms={} error={}", kind, shard,
           retry_in.count(), error_message(err));
}

void crashed(const char* kind, uint32_t shard, const std::string& id) {
  lg->warn("entity actor stopped unexpectedly kind={} shard={} id={}", kind, shard, id);
}

} // namespace log

} // namespace gost::kit
