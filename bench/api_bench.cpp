// api_updates: UpdateOffer through gostd's gRPC API with many concurrent clients, each reply
// arriving after the commit. Creates the offers first, then keeps `--concurrency` updates in
// flight over `--channels` connections for `--seconds`, and prints one JSON line:
// acknowledged updates per second (and errors, and latency percentiles). With --gost-pids
// (the gostd processes, comma-separated) and --pg-postmaster (the server's postmaster pid), also
// the CPU time per acknowledged update of gostd, PostgreSQL and this client over the measured
// seconds (proc_cpu.hpp).
// clang-format off
//   gost_api_bench --addr HOST:PORT[,HOST:PORT...] [--offers 20000] [--concurrency 512] [--channels 8]
//                  [--seconds 20] [--gost-pids PID[,PID...] --pg-postmaster PID]
// clang-format on
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gost/v1/offer_service.grpc.pb.h"
#include "proc_cpu.hpp"

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace v1 = gost::v1;

namespace {

/// "a,b,c" -> {a, b, c}.
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= list.size();) {
    auto end = list.find(',', pos);
    if (end == std::string::npos)
      end = list.size();
    out.push_back(list.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

struct shared_state {
  std::vector<std::unique_ptr<v1::OfferService::Stub>> stubs;
  std::vector<std::string> ids;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<int> in_flight{0};
  std::mutex m;
  std::condition_variable idle;
  std::vector<uint32_t> latencies_us; ///< under m
  std::map<int, uint64_t> codes;      ///< under m
};

/// One client: an update, and when it is answered the next, until told to stop.
class client {
public:
  client(shared_state& s, size_t index) : s_(s), index_(index) {}

  void next() {
    if (s_.stop.load()) {
      if (--s_.in_flight == 0)
        s_.idle.notify_all();
      delete this;
      return;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() + 30s);
    req_.Clear();
    auto& id = s_.ids[(index_ + 7919 * seq_++) % s_.ids.size()];
    req_.mutable_offer()->set_id(id);
    req_.mutable_offer()->set_title("update " + std::to_string(seq_));
    auto* mask = req_.mutable_update_mask();
    mask->add_paths("title");
    t0_ = clock_type::now();
    auto& stub = *s_.stubs[index_ % s_.stubs.size()];
    stub.async()->UpdateOffer(ctx_.get(), &req_, &resp_, [this](grpc::Status st) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0_);
      if (st.ok()) {
        ++s_.ok;
        std::lock_guard<std::mutex> g{s_.m};
        if (s_.latencies_us.size() < 2'000'000)
          s_.latencies_us.push_back(static_cast<uint32_t>(us.count()));
      } else {
        ++s_.failed;
        std::lock_guard<std::mutex> g{s_.m};
        ++s_.codes[st.error_code()];
      }
      next();
    });
  }

private:
  shared_state& s_;
  size_t index_;
  uint64_t seq_ = 0;
  std::unique_ptr<grpc::ClientContext> ctx_;
  v1::UpdateOfferRequest req_;
  v1::UpdateOfferResponse resp_;
  clock_type::time_point t0_;
};

} // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> opt{
    {"offers", "20000"}, {"concurrency", "512"}, {"channels", "8"}, {"seconds", "20"}};
  for (int i = 1; i + 1 < argc; i += 2)
    opt[std::string{argv[i]}.substr(2)] = argv[i + 1];
  if (opt.count("addr") == 0) {
    std::fprintf(stderr, "usage: gost_api_bench --addr HOST:PORT[,HOST:PORT...] [--offers N]"
                         " [--concurrency C] [--channels K] [--seconds S]"
                         " [--gost-pids PID[,PID...] --pg-postmaster PID]\n");
    return 2;
  }
  shared_state s;
  auto channels = std::stoi(opt["channels"]);
  // --addr may name several nodes (a,b,c): the channels go round-robin over them.
  auto addrs = split_commas(opt["addr"]);
  // The CPU measured: the gostd processes (summed) and the server, when given; this client's
  // own (its sending threads and gRPC's) apart.
  std::vector<pid_t> gost_pids;
  if (opt.count("gost-pids") != 0)
    for (auto& p : split_commas(opt["gost-pids"]))
      gost_pids.push_back(static_cast<pid_t>(std::stol(p)));
  auto measure_cpu = !gost_pids.empty() && opt.count("pg-postmaster") != 0;
  gost::bench::cpu_meter meter{
    gost_pids, measure_cpu ? static_cast<pid_t>(std::stol(opt["pg-postmaster"])) : 0};
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i); // distinct connections, not one shared subchannel
    s.stubs.push_back(v1::OfferService::NewStub(grpc::CreateCustomChannel(
      addrs[static_cast<size_t>(i) % addrs.size()], grpc::InsecureChannelCredentials(), args)));
  }

  // The offers, created with a bounded number of creates in flight.
  auto offers = std::stoi(opt["offers"]);
  std::fprintf(stderr, "api_bench: creating %d offers...\n", offers);
  {
    std::mutex m;
    std::condition_variable cv;
    int in_flight = 0;
    int errors = 0;
    for (int i = 0; i < offers; ++i) {
      std::unique_lock<std::mutex> lock{m};
      cv.wait(lock, [&] { return in_flight < 256; });
      ++in_flight;
      lock.unlock();
      auto* ctx = new grpc::ClientContext;
      ctx->set_deadline(std::chrono::system_clock::now() + 60s);
      auto* req = new v1::CreateOfferRequest;
      auto* resp = new v1::CreateOfferResponse;
      req->mutable_offer()->set_seller_id("bench-" + std::to_string(i % 100));
      req->mutable_offer()->set_title("offer " + std::to_string(i));
      s.stubs[i % s.stubs.size()]->async()->CreateOffer(
        ctx, req, resp, [&, ctx, req, resp](grpc::Status st) {
          std::lock_guard<std::mutex> g{m};
          if (st.ok())
            s.ids.push_back(resp->offer().id());
          else if (errors++ == 0)
            std::fprintf(stderr, "api_bench: create failed: %s\n", st.error_message().c_str());
          --in_flight;
          delete ctx;
          delete req;
          delete resp;
          cv.notify_all();
        });
    }
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return in_flight == 0; });
    if (errors > 0 || s.ids.empty()) {
      std::fprintf(stderr, "api_bench: %d creates failed\n", errors);
      return 1;
    }
  }

  auto concurrency = std::stoi(opt["concurrency"]);
  auto seconds = std::stoi(opt["seconds"]);
  std::fprintf(stderr, "api_bench: %d concurrent clients updating for %d s over %d channels...\n",
               concurrency, seconds, channels);
  // Warm-up: a second of load not counted.
  s.in_flight = concurrency;
  for (int i = 0; i < concurrency; ++i)
    (new client(s, static_cast<size_t>(i)))->next();
  std::this_thread::sleep_for(1s);
  auto ok0 = s.ok.load();
  {
    std::lock_guard<std::mutex> g{s.m};
    s.latencies_us.clear();
  }
  auto cpu0 = meter.sample();
  auto client0 = gost::bench::process_cpu_seconds(getpid());
  auto t0 = clock_type::now();
  for (int i = 0; i < seconds; ++i) {
    std::this_thread::sleep_for(1s);
    std::fprintf(stderr, "api_bench: %ds: %llu acknowledged, %llu failed\n", i + 1,
                 static_cast<unsigned long long>(s.ok.load() - ok0),
                 static_cast<unsigned long long>(s.failed.load()));
  }
  auto done = s.ok.load() - ok0;
  auto elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto cpu1 = meter.sample();
  auto client1 = gost::bench::process_cpu_seconds(getpid());
  s.stop = true;
  {
    std::unique_lock<std::mutex> lock{s.m};
    s.idle.wait_for(lock, 60s, [&] { return s.in_flight.load() == 0; });
  }
  std::lock_guard<std::mutex> g{s.m};
  auto& lat = s.latencies_us;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat.empty() ? 0.0
                       : lat[static_cast<size_t>(p * static_cast<double>(lat.size() - 1))] / 1000.0;
  };
  for (auto& [code, n] : s.codes)
    std::fprintf(stderr, "api_bench: status %d: %llu\n", code, static_cast<unsigned long long>(n));
  std::string cpu;
  if (measure_cpu && done > 0) {
    // gost_per_client_cpu: gostd's CPU per update over the client's, the calibration issue 26
    // holds the API to (both absolute figures swing about 2x between machines of this kind).
    char client[128];
    auto client_s = client1 - client0;
    std::snprintf(client, sizeof client,
                  ", \"client_cpu_us_per_op\": %.1f, \"gost_per_client_cpu\": %.2f",
                  client_s * 1e6 / static_cast<double>(done),
                  client_s > 0 ? (cpu1.gost - cpu0.gost) / client_s : 0.0);
    cpu = ", " + gost::bench::cpu_fields(cpu0, cpu1, static_cast<double>(done)) + client;
  }
  std::printf(
    "{\"bench\": \"api_updates\", \"value\": %.0f, \"unit\": \"updates/s acknowledged after "
    "commit\", \"clients\": %d, \"failed\": %llu, \"p50_ms\": %.2f, \"p99_ms\": %.2f%s}\n",
    static_cast<double>(done) / elapsed, concurrency,
    static_cast<unsigned long long>(s.failed.load()), pct(0.5), pct(0.99), cpu.c_str());
  return s.failed.load() == 0 ? 0 : 1;
}
