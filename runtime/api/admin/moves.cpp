// gost.v1.AdminService MoveShards (issue 28, ADR 0023 decision 5; `gostctl move-shards`): a
// group's shard range moved to another group online. The move runs on a thread of its own (it
// takes seconds to hours) and streams its progress; the service's end waits for the moves
// running here (one cut short before its fence is resumed by asking again; after its fence it
// finishes, since the range serves nowhere until the switch).
#include "api/admin_service.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "cluster/router.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/groups.hpp"
#include "gost/persistence/cluster/moves.hpp"
#include "gost/persistence/errors.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("console");

/// Writes progress messages as they come, from any thread, one write at a time; finishes once
/// the last is written. Deletes itself when gRPC is done with it.
class move_stream final : public grpc::ServerWriteReactor<v1::MoveShardsProgress> {
public:
  explicit move_stream(grpc::Status refused) { Finish(std::move(refused)); }
  move_stream() = default;

  /// Queues `m` (dropped once the client is gone).
  void push(v1::MoveShardsProgress m) {
    std::unique_lock<std::mutex> lock{mtx_};
    if (gone_)
      return;
    queue_.push_back(std::move(m));
    if (writing_)
      return;
    writing_ = true;
    auto* next = &queue_.front();
    lock.unlock();
    StartWrite(next);
  }

  /// The last call: finishes with `s` once the queue is written. Nothing touches the stream
  /// after it.
  void finish(grpc::Status s) {
    std::unique_lock<std::mutex> lock{mtx_};
    if (writing_) {
      final_ = std::move(s);
      return;
    }
    lock.unlock();
    Finish(std::move(s));
  }

  /// The client went away: the move goes on (it finishes or stops by itself).
  bool gone() const {
    std::lock_guard<std::mutex> lock{mtx_};
    return gone_;
  }

private:
  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock{mtx_};
    queue_.pop_front();
    if (!ok) {
      gone_ = true;
      queue_.clear();
    }
    if (!queue_.empty()) {
      auto* next = &queue_.front();
      lock.unlock();
      StartWrite(next);
      return;
    }
    writing_ = false;
    if (final_) {
      auto s = std::move(*final_);
      final_.reset();
      lock.unlock();
      Finish(std::move(s));
    }
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock{mtx_};
    gone_ = true;
  }
  void OnDone() override { delete this; }

  mutable std::mutex mtx_;
  std::deque<v1::MoveShardsProgress> queue_;
  bool writing_ = false;
  bool gone_ = false;
  std::optional<grpc::Status> final_;
};

v1::MoveShardsProgress progress(const std::string& step, const std::string& detail) {
  v1::MoveShardsProgress p;
  p.set_step(step);
  p.set_detail(detail);
  return p;
}

} // namespace

using namespace admin;

struct admin_service::move_runs {
  std::mutex mtx;
  std::condition_variable cv;
  int running = 0;
  std::atomic<bool> stopping{false};
  move_figures figures;
};

std::shared_ptr<admin_service::move_runs> admin_service::new_move_runs() {
  return std::make_shared<move_runs>();
}

std::shared_ptr<const admin_service::move_figures> admin_service::move_counts() const {
  return {moves_, &moves_->figures}; // lives as long as the runs' state
}

admin_service::~admin_service() {
  moves_->stopping = true;
  std::unique_lock<std::mutex> lock{moves_->mtx};
  moves_->cv.wait(lock, [&] { return moves_->running == 0; });
}

namespace {

/// Plans the move asked (reading the map), runs it, streams its steps and finishes `stream`.
void run_move(move_stream& stream, persistence::pg_pool& catalog,
              const std::function<persistence::pg_pool*(uint32_t)>& group_pool,
              uint32_t shard_count, uint32_t first, uint32_t last_shard, const std::string& to,
              const std::string& who, std::chrono::milliseconds node_timeout,
              std::function<bool()> cancelled, admin_service::move_figures& figures) {
  auto map = persistence::load_group_map(catalog, shard_count);
  if (!map) {
    figures.failed.fetch_add(1, std::memory_order_relaxed);
    stream.finish(to_status(map.error()));
    return;
  }
  auto planned = persistence::plan_move(*map, first, last_shard, to);
  if (auto* problem = std::get_if<std::string>(&planned)) {
    // The range and the group as given are wrong, or the map does not allow the move now.
    bool bad_input = first > last_shard || last_shard >= shard_count
                     || problem->rfind("no group is named", 0) == 0;
    figures.refused.fetch_add(1, std::memory_order_relaxed);
    stream.finish(
      {bad_input ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::FAILED_PRECONDITION,
       *problem});
    return;
  }
  auto plan = std::get<persistence::move_plan>(planned);
  auto* source = group_pool ? group_pool(plan.from) : nullptr;
  auto* target = group_pool ? group_pool(plan.to) : nullptr;
  if (source == nullptr || target == nullptr) {
    figures.refused.fetch_add(1, std::memory_order_relaxed);
    stream.finish({grpc::StatusCode::FAILED_PRECONDITION,
                   "this node has no connection to group `"
                     + (source == nullptr ? plan.from_name : plan.to_name)
                     + "` (it was declared after the node started, or was unreachable then): "
                       "restart the node, then move"});
    return;
  }
  auto range = std::to_string(plan.first) + "-" + std::to_string(plan.last);
  lg->info("shard move asked shards={} from={} to={} resumed={} by={}", range, plan.from_name,
           plan.to_name, plan.resumed, who);
  persistence::move_options opts;
  opts.node_timeout = node_timeout;
  // A part of a group holding offers moves too: the offers the cut leaves outside their
  // seller's home group get their keys claimed there at the fence (ADR 0023 "Splits").
  opts.split_offers = true;
  opts.cancelled = std::move(cancelled);
  opts.progress = [&stream, range](const std::string& step, const std::string& detail) {
    lg->info("shard move shards={} step={} {}", range, step, detail);
    stream.push(progress(step, detail));
  };
  figures.running.fetch_add(1, std::memory_order_relaxed);
  auto report = persistence::move_shards(catalog, *source, *target, plan, opts);
  figures.running.fetch_sub(1, std::memory_order_relaxed);
  if (!report) {
    // Refusals of the move's own checks (nothing written) are failed_precondition.
    (to_status(report.error()).error_code() == grpc::StatusCode::FAILED_PRECONDITION
       ? figures.refused
       : figures.failed)
      .fetch_add(1, std::memory_order_relaxed);
    lg->warn("shard move failed shards={} from={} to={} by={} error={}", range, plan.from_name,
             plan.to_name, who, persistence::error_message(report.error()));
    stream.finish(to_status(report.error()));
    return;
  }
  int64_t copied = 0;
  for (auto& [table, n] : report->copied)
    copied += n;
  figures.done.fetch_add(1, std::memory_order_relaxed);
  figures.rows_copied.fetch_add(static_cast<uint64_t>(copied), std::memory_order_relaxed);
  figures.rows_caught_up.fetch_add(static_cast<uint64_t>(report->caught_up),
                                   std::memory_order_relaxed);
  figures.queued_moved.fetch_add(static_cast<uint64_t>(report->moved_queued),
                                 std::memory_order_relaxed);
  figures.last_fence_ms.store(report->fenced.count(), std::memory_order_relaxed);
  lg->info("shard move done shards={} from={} to={} map_version={} rows_copied={} "
           "rows_caught_up={} rounds={} queued_moved={} fenced_ms={} rows_removed={} by={}",
           range, plan.from_name, plan.to_name, report->map_version, copied, report->caught_up,
           report->rounds, report->moved_queued, report->fenced.count(), report->removed, who);
  auto last = progress("done", "shards " + range + " are served by group `" + plan.to_name + "`");
  last.set_done(true);
  last.set_map_version(report->map_version);
  last.set_rows_copied(copied);
  last.set_rows_caught_up(report->caught_up);
  last.set_rounds(report->rounds);
  last.set_queued_moved(report->moved_queued);
  last.set_fenced_ms(report->fenced.count());
  last.set_rows_removed(report->removed);
  last.set_from(plan.from_name);
  stream.push(std::move(last));
  stream.finish(grpc::Status::OK);
}

} // namespace

grpc::ServerWriteReactor<v1::MoveShardsProgress>*
admin_service::MoveShards(grpc::CallbackServerContext* ctx, const v1::MoveShardsRequest* req) {
  if (req->to().empty()) {
    moves_->figures.refused.fetch_add(1, std::memory_order_relaxed);
    return new move_stream(invalid("to: name the target group (gostctl groups lists them)"));
  }
  auto catalog = cluster_.pool;
  auto group_pool = [view = cluster_](uint32_t id) { return view.group_pool(id); };
  auto shard_count = router_.shard_count();
  auto who = who_asked(ctx, req->who());
  auto first = req->first();
  auto last_shard = req->last();
  auto to = req->to();
  auto* stream = new move_stream();
  auto runs = moves_;
  {
    std::lock_guard<std::mutex> lock{runs->mtx};
    ++runs->running;
  }
  auto node_timeout = cluster_.lease_timeout;
  // Everything that reads PostgreSQL runs on the move's own thread, the plan's checks too:
  // the gRPC thread returns the stream at once.
  std::thread{[=] {
    run_move(
      *stream, *catalog, group_pool, shard_count, first, last_shard, to, who, node_timeout,
      [runs] { return runs->stopping.load(); }, runs->figures);
    std::lock_guard<std::mutex> lock{runs->mtx};
    --runs->running;
    runs->cv.notify_all();
  }}.detach();
  return stream;
}

} // namespace gost::runtime
