// images: the image functions of gostd (ImageService, docs/images.md) against thumbor on the
// same 1 MP JPEGs, served by this program's own HTTP server on loopback (bench/images.sh starts
// gostd and thumbor). Prints one JSON line:
//  - computed per second, per function: `--ratio N` (and `--preview`, `--main-color`) distinct
//    image URLs (the same bytes under distinct queries: distinct result keys, so every one is
//    fetched and computed) asked in Batch calls of 500 — each answered PENDING and queued once
//    — then read back with cache_only until every one is DONE; from the first request to the
//    last result;
//  - cache hits: `--hits` unary Ratio calls on computed URLs from `--concurrency` threads:
//    latency p50 and p99 (every answer DONE, width and height checked);
//  - the peer: thumbor's `/unsafe/meta/` (the image's size as JSON: fetch and decode) and
//    `/unsafe/fit-in/16x16/` (a tiny JPEG) on the same number of distinct URLs, from
//    `--concurrency` client threads; its figures are requests answered per second.
//  - CPU: gostd's CPU seconds per computed result (`--gost-pid`), thumbor's per request
//    (`--thumbor-pids`), proc_cpu.hpp.
// With `--peer-addr` instead of `--thumbor` (bench/images_queue.sh): the queues compared — the
// same Ratio and MainColor work on `--addr` (a node with images.queue=kafka) and then on
// `--peer-addr` (one with images.queue=postgres), with how long the asks took (the Kafka queue
// answers PENDING only after the broker's acknowledgement).
// clang-format off
//   gost_image_bench --addr HOST:PORT --thumbor HOST:PORT [--ratio 4000] [--preview 600]
//                    [--main-color 600] [--hits 20000] [--concurrency 16]
//                    [--gost-pid PID] [--thumbor-pids PID,...] [--thumbor-processes N]
//   gost_image_bench --addr HOST:PORT --peer-addr HOST:PORT [--ratio N] [--main-color N]
//                    [--gost-pid PID] [--peer-pid PID]
// clang-format on
#include <curl/curl.h>
#include <vips/vips8>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http_server.hpp"
#include "gost/v1/images.grpc.pb.h"
#include "proc_cpu.hpp"

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace v1 = gost::v1;

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "gost_image_bench: %s\n", why.c_str());
  std::exit(1);
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// A 1000 x 1000 sRGB JPEG (quality 85) that compresses like a photo: smooth gradients with
/// noise on top, about 300 KB.
std::string photo_jpeg() {
  using vips::VImage;
  auto xy = VImage::xyz(1000, 1000);
  auto x = xy.extract_band(0);
  auto y = xy.extract_band(1);
  auto noise = VImage::gaussnoise(1000, 1000, VImage::option()->set("sigma", 12.0));
  auto r = (x * 0.2 + y * 0.05 + noise);
  auto g = (y * 0.2 + 40 + noise);
  auto b = ((x + y) * 0.1 + 60 + noise);
  auto rgb = r.bandjoin(g)
               .bandjoin(b)
               .cast(VIPS_FORMAT_UCHAR)
               .copy(VImage::option()->set("interpretation", VIPS_INTERPRETATION_sRGB));
  void* buf = nullptr;
  size_t size = 0;
  rgb.write_to_buffer(".jpg", &buf, &size, VImage::option()->set("Q", 85));
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

struct options {
  std::string addr, thumbor, peer_addr;
  pid_t peer_pid = 0;
  int ratio = 4000, preview = 600, main_color = 600, hits = 20000, concurrency = 16;
  pid_t gost_pid = 0;
  std::vector<pid_t> thumbor_pids;
  int thumbor_processes = 1;
};

double cpu_of(const std::vector<pid_t>& pids) {
  double s = 0;
  for (auto p : pids)
    s += gost::bench::process_cpu_seconds(p);
  return s;
}

// -- gost -------------------------------------------------------------------------------------

struct computed {
  double per_s = 0;
  double cpu_us_per_op = 0;
  double ask_ms_per_500 = 0; ///< the asking Batch calls (500 URLs each, all PENDING): mean time
};

/// Asks for `n` distinct images' `fn`, then reads them back until every one is DONE.
computed compute_all(v1::ImageService::Stub& stub, v1::ImageFunction fn, const std::string& base,
                     const std::string& tag, int n, pid_t gost_pid) {
  std::vector<std::string> urls;
  for (int i = 0; i < n; ++i)
    urls.push_back(base + "?" + tag + "=" + std::to_string(i));
  auto batch = [&](const std::vector<std::string>& list, bool cache_only) {
    std::vector<v1::ImageResponse> out;
    for (size_t at = 0; at < list.size(); at += 500) {
      v1::ImageBatchRequest req;
      req.set_function(fn);
      for (size_t i = at; i < std::min(list.size(), at + 500); ++i) {
        auto* r = req.add_requests();
        r->set_url(list[i]);
        r->mutable_options()->set_cache_only(cache_only);
      }
      v1::ImageBatchResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 30s);
      auto s = stub.Batch(&ctx, req, &resp);
      if (!s.ok())
        die("Batch: " + s.error_message());
      out.insert(out.end(), resp.responses().begin(), resp.responses().end());
    }
    return out;
  };
  auto cpu0 = gost::bench::process_cpu_seconds(gost_pid);
  auto t0 = clock_type::now();
  for (auto& r : batch(urls, false))
    if (r.status() != v1::IMAGE_STATUS_PENDING)
      die(tag + ": a fresh image answered " + v1::ImageStatus_Name(r.status()) + ", not PENDING");
  auto ask_s = seconds_since(t0);
  auto left = urls;
  while (!left.empty()) {
    std::this_thread::sleep_for(20ms);
    auto answers = batch(left, true);
    std::vector<std::string> still;
    for (size_t i = 0; i < answers.size(); ++i) {
      auto st = answers[i].status();
      if (st == v1::IMAGE_STATUS_ERROR)
        die(tag + ": " + left[i] + ": " + answers[i].error_kind() + ": " + answers[i].error());
      if (st != v1::IMAGE_STATUS_DONE)
        still.push_back(left[i]);
    }
    left.swap(still);
    if (seconds_since(t0) > 600)
      die(tag + ": not computed within 10 minutes");
  }
  computed c;
  auto s = seconds_since(t0);
  c.per_s = n / s;
  c.ask_ms_per_500 = ask_s * 1000 / ((n + 499) / 500);
  if (gost_pid > 0)
    c.cpu_us_per_op = (gost::bench::process_cpu_seconds(gost_pid) - cpu0) * 1e6 / n;
  std::fprintf(stderr, "gost %s: %d computed in %.2f s: %.0f/s, %.0f us CPU each\n", tag.c_str(), n,
               s, c.per_s, c.cpu_us_per_op);
  return c;
}

struct latency {
  double p50_ms = 0, p99_ms = 0;
};

/// Unary Ratio calls on images computed already, from `threads` threads.
latency cache_hits(const std::string& addr, const std::string& base, int computed_n, int hits,
                   int threads) {
  std::vector<std::vector<double>> per(threads);
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      // A channel per thread, as a gateway's connections.
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", t);
      auto stub = v1::ImageService::NewStub(
        grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
      for (int i; (i = next.fetch_add(1)) < hits;) {
        v1::ImageRequest req;
        req.set_url(base + "?ratio=" + std::to_string((i * 7919) % computed_n));
        v1::ImageResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 10s);
        auto t0 = clock_type::now();
        auto s = stub->Ratio(&ctx, req, &resp);
        per[t].push_back(seconds_since(t0) * 1000);
        if (!s.ok())
          die("Ratio: " + s.error_message());
        if (resp.status() != v1::IMAGE_STATUS_DONE || resp.ratio().width() != 1000
            || resp.ratio().height() != 1000)
          die("Ratio of a computed image: " + resp.ShortDebugString());
      }
    });
  for (auto& t : ts)
    t.join();
  std::vector<double> all;
  for (auto& p : per)
    all.insert(all.end(), p.begin(), p.end());
  std::sort(all.begin(), all.end());
  latency l;
  l.p50_ms = all[all.size() / 2];
  l.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  std::fprintf(stderr, "gost cache hits: %d, p50 %.3f ms, p99 %.3f ms\n", hits, l.p50_ms, l.p99_ms);
  return l;
}

// -- thumbor ----------------------------------------------------------------------------------

size_t sink(char*, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(size * n, 'x');
  return size * n;
}

/// `n` GETs of thumbor's `prefix` + a distinct image URL, from `threads` threads; answers/s.
computed thumbor_all(const std::string& thumbor, const std::string& prefix, const std::string& base,
                     const std::string& tag, int n, int threads, const std::vector<pid_t>& pids) {
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::string first_error;
  std::mutex mtx;
  auto cpu0 = cpu_of(pids);
  auto t0 = clock_type::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      CURL* h = curl_easy_init();
      std::string body;
      for (int i; (i = next.fetch_add(1)) < n;) {
        // thumbor takes the image's URL in its path (its query escaped).
        auto url =
          "http://" + thumbor + prefix + base.substr(7) + "%3F" + tag + "%3D" + std::to_string(i);
        body.clear();
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        long code = 0;
        auto rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK || code != 200) {
          if (failed.fetch_add(1) == 0) {
            std::lock_guard<std::mutex> g{mtx};
            first_error =
              url + ": "
              + (rc != CURLE_OK ? curl_easy_strerror(rc) : "HTTP " + std::to_string(code));
          }
        }
      }
      curl_easy_cleanup(h);
    });
  for (auto& t : ts)
    t.join();
  if (failed > 0)
    die("thumbor " + tag + ": " + std::to_string(failed.load()) + " failed, first " + first_error);
  computed c;
  auto s = seconds_since(t0);
  c.per_s = n / s;
  c.cpu_us_per_op = (cpu_of(pids) - cpu0) * 1e6 / n;
  std::fprintf(stderr, "thumbor %s: %d in %.2f s: %.0f/s, %.0f us CPU each\n", tag.c_str(), n, s,
               c.per_s, c.cpu_us_per_op);
  return c;
}

} // namespace

int main(int argc, char** argv) {
  if (VIPS_INIT(argv[0]) != 0)
    die("libvips did not start");
  curl_global_init(CURL_GLOBAL_DEFAULT);
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--addr")
      o.addr = v;
    else if (k == "--peer-addr")
      o.peer_addr = v;
    else if (k == "--peer-pid")
      o.peer_pid = std::stoi(v);
    else if (k == "--thumbor")
      o.thumbor = v;
    else if (k == "--ratio")
      o.ratio = std::stoi(v);
    else if (k == "--preview")
      o.preview = std::stoi(v);
    else if (k == "--main-color")
      o.main_color = std::stoi(v);
    else if (k == "--hits")
      o.hits = std::stoi(v);
    else if (k == "--concurrency")
      o.concurrency = std::stoi(v);
    else if (k == "--thumbor-processes")
      o.thumbor_processes = std::stoi(v);
    else if (k == "--gost-pid")
      o.gost_pid = std::stoi(v);
    else if (k == "--thumbor-pids") {
      for (size_t pos = 0; pos < v.size();) {
        auto end = v.find(',', pos);
        o.thumbor_pids.push_back(std::stoi(v.substr(pos, end - pos)));
        pos = end == std::string::npos ? v.size() : end + 1;
      }
    } else
      die("unknown option " + k);
  }
  if (o.addr.empty() || (o.thumbor.empty() && o.peer_addr.empty()))
    die("give --addr (gostd's gRPC) and --thumbor (thumbor's HTTP) or --peer-addr (a second "
        "gostd)");

  auto jpeg = photo_jpeg();
  std::fprintf(stderr, "image: 1000 x 1000 JPEG, %zu bytes\n", jpeg.size());
  gost::testing::http_server images{[&jpeg](const gost::testing::http_server::call&) {
    return gost::testing::http_server::reply{200, jpeg, {{"Content-Type", "image/jpeg"}}};
  }};
  auto base = "http://127.0.0.1:" + std::to_string(images.port()) + "/photo.jpg";

  if (!o.peer_addr.empty()) {
    // The queues: the same work on each node, one after the other (distinct URLs per node).
    auto kafka =
      v1::ImageService::NewStub(grpc::CreateChannel(o.addr, grpc::InsecureChannelCredentials()));
    auto pg = v1::ImageService::NewStub(
      grpc::CreateChannel(o.peer_addr, grpc::InsecureChannelCredentials()));
    // Warm-up, not measured: the Kafka queue's topics are made on first use and its consumers
    // join their groups (seconds, once per installation); the PostgreSQL queue's the same.
    for (auto* stub : {kafka.get(), pg.get()})
      for (auto fn : {v1::IMAGE_FUNCTION_RATIO, v1::IMAGE_FUNCTION_MAIN_COLOR})
        compute_all(*stub, fn, base, stub == kafka.get() ? "kwarm" : "pwarm", 20, 0);
    auto k_ratio =
      compute_all(*kafka, v1::IMAGE_FUNCTION_RATIO, base, "kratio", o.ratio, o.gost_pid);
    auto k_color =
      compute_all(*kafka, v1::IMAGE_FUNCTION_MAIN_COLOR, base, "kcolor", o.main_color, o.gost_pid);
    auto p_ratio = compute_all(*pg, v1::IMAGE_FUNCTION_RATIO, base, "pratio", o.ratio, o.peer_pid);
    auto p_color =
      compute_all(*pg, v1::IMAGE_FUNCTION_MAIN_COLOR, base, "pcolor", o.main_color, o.peer_pid);
    std::printf(
      "{\"bench\": \"images_queue\", \"value\": %.0f, \"unit\": \"Ratio computed/s through "
      "the Kafka queue (images.queue=kafka)\", \"main_color_per_s\": %.0f, "
      "\"ask_ms_per_500\": %.1f, \"gost_cpu_us_per_ratio\": %.0f, \"peer\": \"the PostgreSQL "
      "queue (images.queue=postgres), same settings\", \"peer_value\": %.0f, \"ratio\": %.2f, "
      "\"peer_main_color_per_s\": %.0f, \"peer_ask_ms_per_500\": %.1f, "
      "\"peer_cpu_us_per_ratio\": %.0f}\n",
      k_ratio.per_s, k_color.per_s, k_ratio.ask_ms_per_500, k_ratio.cpu_us_per_op, p_ratio.per_s,
      k_ratio.per_s / p_ratio.per_s, p_color.per_s, p_ratio.ask_ms_per_500, p_ratio.cpu_us_per_op);
    return 0;
  }

  auto stub =
    v1::ImageService::NewStub(grpc::CreateChannel(o.addr, grpc::InsecureChannelCredentials()));
  auto ratio = compute_all(*stub, v1::IMAGE_FUNCTION_RATIO, base, "ratio", o.ratio, o.gost_pid);
  auto preview =
    compute_all(*stub, v1::IMAGE_FUNCTION_PREVIEW, base, "preview", o.preview, o.gost_pid);
  auto color =
    compute_all(*stub, v1::IMAGE_FUNCTION_MAIN_COLOR, base, "main_color", o.main_color, o.gost_pid);
  auto hits = cache_hits(o.addr, base, o.ratio, o.hits, o.concurrency);

  auto meta =
    thumbor_all(o.thumbor, "/unsafe/meta/", base, "meta", o.ratio, o.concurrency, o.thumbor_pids);
  auto tiny = thumbor_all(o.thumbor, "/unsafe/fit-in/16x16/", base, "tiny", o.preview,
                          o.concurrency, o.thumbor_pids);

  std::printf(
    "{\"bench\": \"images\", \"value\": %.0f, \"unit\": \"Ratio computed/s (1 MP JPEG fetched over "
    "HTTP)\", \"preview_per_s\": %.0f, \"main_color_per_s\": %.0f, \"cache_hit_p50_ms\": %.3f, "
    "\"cache_hit_p99_ms\": %.3f, \"gost_cpu_us_per_ratio\": %.0f, \"gost_cpu_us_per_preview\": "
    "%.0f, \"gost_cpu_us_per_main_color\": %.0f, \"peer\": \"thumbor 7.8.0 /unsafe/meta/ (%d "
    "processes)\", \"peer_value\": %.0f, \"ratio\": %.2f, \"peer_preview_per_s\": %.0f, "
    "\"preview_ratio\": %.2f, \"peer_cpu_us_per_meta\": %.0f, \"peer_cpu_us_per_preview\": %.0f, "
    "\"image_bytes\": %zu}\n",
    ratio.per_s, preview.per_s, color.per_s, hits.p50_ms, hits.p99_ms, ratio.cpu_us_per_op,
    preview.cpu_us_per_op, color.cpu_us_per_op, o.thumbor_processes, meta.per_s,
    ratio.per_s / meta.per_s, tiny.per_s, preview.per_s / tiny.per_s, meta.cpu_us_per_op,
    tiny.cpu_us_per_op, jpeg.size());
  return 0;
}
