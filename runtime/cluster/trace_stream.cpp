#include "cluster/trace_stream.hpp"

#include <condition_variable>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "cluster/router.hpp"
#include "gost/core/log.hpp"
#include "gost/internal/v1/node_service.grpc.pb.h"
#include "gost/persistence/cluster/leases.hpp"
#include "rpc/trace_view.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("console");

using clock_type = std::chrono::steady_clock;

/// How often a waiting trace looks at its bounds, the client and the shard's owner.
constexpr auto tick = std::chrono::milliseconds{100};

/// The owner of `shard` other than this node, as PostgreSQL's leases say: its id and node-link
/// address; empty when none holds it (moving, expired) or the read failed.
std::pair<std::string, std::string> remote_owner(const trace_context& ctx, uint32_t shard) {
  auto leases = persistence::list_leases(*ctx.pool, ctx.lease_timeout);
  if (!leases)
    return {};
  std::string owner;
  for (auto& l : *leases)
    if (l.shard == shard && !l.free)
      owner = l.owner;
  if (owner.empty() || owner == ctx.node_id)
    return {};
  auto nodes = persistence::list_nodes(*ctx.pool, ctx.lease_timeout);
  if (!nodes)
    return {};
  for (auto& n : *nodes)
    if (n.node_id == owner && n.alive)
      return {owner, n.caf_host + ":" + std::to_string(n.caf_port)};
  return {};
}

} // namespace

class trace_reactor final : public grpc::ServerWriteReactor<v1::TraceEvent> {
public:
  trace_reactor(std::shared_ptr<trace_context> ctx, v1::TraceRequest req, bool follow,
                uint32_t events, int64_t ms)
    : ctx_(std::move(ctx)), req_(std::move(req)), follow_(follow), max_(events),
      deadline_(clock_type::now() + std::chrono::milliseconds{ms}) {
    {
      std::lock_guard<std::mutex> guard{ctx_->mtx_};
      ctx_->live_.insert(this);
    }
    ++ctx_->hub->serving;
    std::thread{[this] { run(); }}.detach();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> guard{mtx_};
    writing_ = false;
    if (!ok)
      cancelled_ = true;
    cv_.notify_all();
  }

  void OnCancel() override { cancel(); }

  void OnDone() override {
    std::lock_guard<std::mutex> guard{mtx_};
    done_ = true;
    cv_.notify_all();
  }

  /// The client went away or the node stops: ends the trace, and the remote stream it reads.
  void cancel() {
    std::lock_guard<std::mutex> guard{mtx_};
    cancelled_ = true;
    if (remote_ != nullptr)
      remote_->TryCancel();
    cv_.notify_all();
  }

private:
  bool over() {
    std::lock_guard<std::mutex> guard{mtx_};
    return cancelled_ || ctx_->stopping() || sent_ >= max_ || clock_type::now() >= deadline_;
  }

  /// Writes one event and waits until gRPC took it; false when the client is gone.
  bool write(const v1::TraceEvent& e, bool counts) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (cancelled_)
        return false;
      out_ = e;
      writing_ = true;
    }
    StartWrite(&out_); // outside the lock: gRPC may call OnWriteDone on this thread
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [&] { return !writing_; });
    if (counts)
      ++sent_;
    return !cancelled_;
  }

  /// Waits a tick (or until cancelled).
  void pause() {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, tick * 2, [&] { return cancelled_ || ctx_->stopping(); });
  }

  void owner_is(const std::string& node, uint32_t shard) {
    if (node == owner_)
      return;
    bool first = owner_.empty();
    owner_ = node;
    if (first)
      return;
    v1::TraceEvent e;
    e.set_offer_id(req_.offer_id());
    e.set_entity_key(req_.entity_key());
    e.set_shard(shard);
    e.set_node(node);
    e.set_kind("owner");
    write(e, false);
  }

  /// This node's events of the subscription while `still` holds.
  template <class Still>
  void serve_local(const std::string& id, const std::string& lane, Still still) {
    auto sub = ctx_->hub->subscribe(id, lane);
    kit::trace_event ev;
    while (!over() && still()) {
      if (!sub->next(ev, tick))
        continue;
      v1::TraceEvent e;
      to_proto(ev.e, ev.entity_id, ev.shard, ctx_->node_id, e);
      if (!write(e, true))
        break;
    }
  }

  /// The owner's events over its NodeService.Trace, until that stream ends.
  void serve_remote(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(ctx_->link_max_bytes);
    if (ctx_->security.enabled)
      args.SetSslTargetNameOverride("gost-node");
    auto channel = grpc::CreateCustomChannel(address, ctx_->security.channel_credentials(), args);
    auto stub = internal::v1::NodeService::NewStub(channel);
    grpc::ClientContext rctx;
    rctx.set_deadline(
      std::chrono::system_clock::now()
      + std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - clock_type::now()));
    auto req = req_;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (cancelled_ || ctx_->stopping())
        return;
      req.set_max_events(max_ - sent_);
      req.set_for_ms(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - clock_type::now())
             .count()));
      remote_ = &rctx;
    }
    auto reader = stub->Trace(&rctx, req);
    v1::TraceEvent e;
    while (reader->Read(&e))
      if (!write(e, true))
        break;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      remote_ = nullptr;
    }
    rctx.TryCancel();
    auto st = reader->Finish();
    if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED)
      lg->debug("trace offer={}{} from {}: {}", req_.offer_id(), req_.entity_key(), address,
                st.error_message());
  }

  void run() {
    auto routes = ctx_->routes.lock();
    // One offer, or one durable entity (kind/id): shards hold both, the same hash places them.
    auto one = !req_.offer_id().empty() ? req_.offer_id() : req_.entity_key();
    if (routes && !one.empty()) {
      auto id = one;
      auto shard = routes->shard_of(id);
      routes.reset();
      auto local = [&] {
        auto r = ctx_->routes.lock();
        return r && r->here(shard);
      };
      while (!over()) {
        if (local()) {
          owner_is(ctx_->node_id, shard);
          serve_local(id, {}, local);
          if (!follow_)
            break; // a node link's trace ends when the shard leaves: the caller follows it
        } else if (follow_) {
          auto [node, address] = remote_owner(*ctx_, shard);
          if (node.empty()) {
            pause(); // moving, or its owner died and the lease has not expired yet
            continue;
          }
          owner_is(node, shard);
          serve_remote(address);
          if (!over())
            pause(); // the stream ended: the shard moved on, or the owner is gone
        } else {
          break;
        }
      }
    } else if (routes) {
      routes.reset();
      serve_local({}, req_.stage_id(), [] { return true; });
    }
    Finish(grpc::Status::OK);
    {
      std::unique_lock<std::mutex> lock{mtx_};
      cv_.wait(lock, [&] { return done_; });
    }
    {
      std::lock_guard<std::mutex> guard{ctx_->mtx_};
      ctx_->live_.erase(this);
    }
    --ctx_->hub->serving;
    delete this;
  }

  std::shared_ptr<trace_context> ctx_;
  v1::TraceRequest req_;
  bool follow_;
  uint32_t max_;
  clock_type::time_point deadline_;
  std::string owner_; ///< the node serving the offer's events now (empty: none yet)

  std::mutex mtx_;
  std::condition_variable cv_;
  v1::TraceEvent out_; ///< the event being written
  bool writing_ = false;
  bool cancelled_ = false;
  bool done_ = false;
  uint32_t sent_ = 0;
  grpc::ClientContext* remote_ = nullptr; ///< the owner's stream being read
};

void trace_context::stop() {
  stopping_ = true;
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto* r : live_)
    r->cancel();
}

namespace {

class refused final : public grpc::ServerWriteReactor<v1::TraceEvent> {
public:
  explicit refused(grpc::Status s) { Finish(std::move(s)); }
  void OnDone() override { delete this; }
};

} // namespace

grpc::ServerWriteReactor<v1::TraceEvent>* start_trace(std::shared_ptr<trace_context> ctx,
                                                      const v1::TraceRequest& req, bool follow,
                                                      uint32_t events, int64_t ms) {
  if (ctx->stopping())
    return new refused({grpc::StatusCode::UNAVAILABLE, "the node is stopping"});
  if (ctx->hub->serving.load() >= static_cast<int64_t>(ctx->traces_max))
    return new refused({grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "this node serves " + std::to_string(ctx->traces_max)
                          + " traces already (limits.traces_max); end one or raise the key"});
  return new trace_reactor(std::move(ctx), req, follow, events, ms);
}

} // namespace gost::runtime
