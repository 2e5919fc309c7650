// gost_feed_bench: the feed processor's side of one load, timed (bench/feed.sh; MISSION "How
// fast": a feed of 100,000 offers fetched, validated, unified and sent in under 30 s, RSS under
// 300 MB; parse-and-validate at least 50% of `xmllint --stream` on the same file).
//
//   gost_feed_bench topics --brokers B --topics T1,T2
//       creates the topics (the broker's default partitions) so that a node subscribed to them
//       is assigned them at once; run before the node starts.
//   gost_feed_bench run --url URL --blob-dir DIR --brokers B --requests-topic T
//                       --responses-topic R [--seller S] [--task T] [--batch-size 500]
//                       [--timeout-s 900] [--split 1] [--producer-max-kbytes K]
//                       [--gostd-pid PID --pg-postmaster PID]
//       (a) fetches URL with gost::http::perform + on_body into a gost::blob_store writer (the
//           loader's download: SHA-256 content address), (b)+(c) runs feed_processor::run on
//           the stored file — the check pass (read_feed without a callback), then unify and
//           send in batches through kafka::seller_sink<FeedRequest> (the node's producer: the
//           Kafka kit's idempotent one), the end strictly after every batch was acknowledged —
//           and (d) reads the responses topic (the Kafka kit's group_consumer) until the offer
//           store's terminal FeedResponse for the task arrives. (e) The process's peak RSS
//           (VmHWM) after that. CPU per offer over (a)-(d) (proc_cpu.hpp): of gost — this
//           process and the gostd — and of PostgreSQL; the processor's own beside it. With --split
//           1 it then times the send pass's parts on the stored file, outside the measured
//           interval: the reader extracting offers, + unification,
//           + protobuf serialization of the batches (Kafka's share is the rest of send_s).
//       Prints one JSON line; progress on stderr. Fails (exit 1) when anything did not
//       complete, or the terminal summary does not count every offer sent.
//   gost_feed_bench check --file PATH [--repeat 3] [--split 0]
//       the check pass alone (and the send pass's parts), no broker: the reader's own figure.
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "gost/core/backoff.hpp"
#include "gost/core/blob_store.hpp"
#include "gost/core/http_client.hpp"
#include "gost/feeds/catalog.hpp"
#include "gost/feeds/feed_processor.hpp"
#include "gost/feeds/gazetteer.hpp"
#include "gost/feeds/unifier.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/v1/feed_exchange.pb.h"
#include "kafka/group_consumer.hpp"
#include "kafka/producer.hpp"
#include "kafka/seller_sink.hpp"
#include "proc_cpu.hpp"

using namespace gost;
using clock_type = std::chrono::steady_clock;
namespace kafka = gost::runtime::kafka;

namespace {

[[noreturn]] void die(const std::string& why) {
  std::cerr << "gost_feed_bench: " << why << "\n";
  std::exit(1);
}

double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::map<std::string, std::string> parse_args(int argc, char** argv, int from) {
  std::map<std::string, std::string> a;
  for (int i = from; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || i + 1 >= argc)
      die("arguments are --name value pairs; got " + k);
    a[k.substr(2)] = argv[++i];
  }
  return a;
}

std::string need(const std::map<std::string, std::string>& a, const std::string& k) {
  auto it = a.find(k);
  if (it == a.end() || it->second.empty())
    die("--" + k + " is required");
  return it->second;
}

std::string get(const std::map<std::string, std::string>& a, const std::string& k,
                const std::string& def) {
  auto it = a.find(k);
  return it == a.end() ? def : it->second;
}

/// The process's peak resident set (VmHWM), in MiB.
/// 100000 -> "100,000".
std::string grouped(uint64_t n) {
  auto s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0; // kB
  return 0;
}

// --- topics ------------------------------------------------------------------------------------

int create_topics(const std::map<std::string, std::string>& a) {
  auto brokers = need(a, "brokers");
  std::vector<std::string> names;
  std::stringstream ss(need(a, "topics"));
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty())
      names.push_back(t);
  char err[512];
  auto* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof(err))
      != RD_KAFKA_CONF_OK)
    die(err);
  auto* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (!rk)
    die(err);
  std::vector<rd_kafka_NewTopic_t*> topics;
  for (auto& n : names) {
    auto* t = rd_kafka_NewTopic_new(n.c_str(), -1, -1, err, sizeof(err)); // broker defaults
    if (!t)
      die(err);
    topics.push_back(t);
  }
  auto* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, topics.data(), topics.size(), nullptr, q);
  auto* ev = rd_kafka_queue_poll(q, 30'000);
  int rc = 0;
  if (!ev || rd_kafka_event_error(ev)) {
    std::cerr << "gost_feed_bench: creating topics failed: "
              << (ev ? rd_kafka_event_error_string(ev) : "no answer within 30 s") << "\n";
    rc = 1;
  } else {
    size_t n = 0;
    auto* res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    for (size_t i = 0; i < n; ++i) {
      auto e = rd_kafka_topic_result_error(res[i]);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        std::cerr << "gost_feed_bench: topic " << rd_kafka_topic_result_name(res[i]) << ": "
                  << rd_kafka_err2str(e) << "\n";
        rc = 1;
      }
    }
  }
  if (ev)
    rd_kafka_event_destroy(ev);
  for (auto* t : topics)
    rd_kafka_NewTopic_destroy(t);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return rc;
}

// --- the responses ---------------------------------------------------------------------------

/// What the offer store answered for our task, filled by the consumer's thread.
struct answers {
  std::string task;
  std::mutex mtx;
  std::condition_variable cv;
  std::map<int, int64_t> outcomes; ///< OfferResult::Outcome -> count
  int64_t results = 0;
  bool first_seen = false;
  clock_type::time_point first_at, end_at;
  bool ended = false;
  v1::FeedSummary summary;
};

// --- the split ---------------------------------------------------------------------------------

struct split {
  double extract_s = 0, unify_s = 0, serialize_s = 0;
};

/// The send pass's parts, each a full pass over the stored file: reading offers alone, then
/// with unification, then with the batches serialized as seller_sink does (no Kafka).
split time_parts(const std::string& path, const feeds::unifier& u, const feeds::reader_limits& lim,
                 const feeds::load_spec& spec) {
  split s;
  auto timed = [&](const feeds::ad_callback& cb) {
    auto src = feeds::file_source(path);
    auto t = clock_type::now();
    auto r = feeds::read_feed(src, lim, cb);
    if (!r.ok())
      die("split pass failed: " + (r.fatal ? r.fatal->describe() : std::string("stopped")));
    return seconds(clock_type::now() - t);
  };
  int64_t last_line = 0;
  s.extract_s = timed([&](feeds::feed_ad&& ad) {
    last_line = ad.line;
    return true;
  });
  s.unify_s = timed([&](feeds::feed_ad&& ad) {
    auto x = u.unify(std::move(ad), spec.unify);
    return x.offer.ByteSizeLong() > 0 || true; // the offer is built; nothing more
  });
  v1::FeedRequest batch;
  batch.set_seller_id(spec.seller_id);
  batch.set_task_id(spec.task_id);
  auto* body = batch.mutable_batch();
  size_t bytes = 0;
  std::unordered_set<std::string> seen;
  s.serialize_s = timed([&](feeds::feed_ad&& ad) {
    if (!ad.external_id.empty() && !seen.insert(ad.external_id).second)
      return true;
    auto x = u.unify(std::move(ad), spec.unify);
    if (x.rejected()) {
      auto* r = body->add_rejected();
      r->set_external_id(x.offer.external_id());
      r->set_reason(x.reason());
    } else {
      *body->add_offers() = std::move(x.offer);
    }
    if (static_cast<size_t>(body->offers_size() + body->rejected_size()) >= spec.batch_size) {
      bytes += batch.SerializeAsString().size();
      body->Clear();
    }
    return true;
  });
  std::cerr << "gost_feed_bench: split: extract " << s.extract_s << " s, +unify " << s.unify_s
            << " s, +protobuf " << s.serialize_s << " s (" << bytes / 1048576.0
            << " MiB of batches); the last offer's line as read: " << last_line << "\n";
  return s;
}

// --- check ------------------------------------------------------------------------------------

/// The check pass alone on a file, `--repeat` times (the reader's figure without a broker:
/// before/after a change to feed_reader.cpp); also the send pass's parts with --split 1.
int check_only(const std::map<std::string, std::string>& a) {
  auto path = need(a, "file");
  int repeat = std::stoi(get(a, "repeat", "3"));
  feeds::reader_limits limits;
  for (int i = 0; i < repeat; ++i) {
    auto src = feeds::file_source(path);
    auto t = clock_type::now();
    auto r = feeds::read_feed(src, limits);
    if (!r.ok())
      die("check failed: " + (r.fatal ? r.fatal->describe() : std::string("stopped")));
    std::printf("check %.3f s (%llu offers, %llu bytes)\n", seconds(clock_type::now() - t),
                static_cast<unsigned long long>(r.offers),
                static_cast<unsigned long long>(r.bytes));
  }
  if (get(a, "split", "0") == "1") {
    feeds::unifier u(std::shared_ptr<const feeds::catalog>(&feeds::catalog::builtin(),
                                                           [](const feeds::catalog*) {}),
                     std::shared_ptr<const feeds::gazetteer>(&feeds::gazetteer::builtin(),
                                                             [](const feeds::gazetteer*) {}));
    feeds::load_spec spec;
    spec.seller_id = "s";
    spec.task_id = "t";
    time_parts(path, u, limits, spec);
  }
  std::printf("peak rss %.0f MiB\n", peak_rss_mib());
  return 0;
}

// --- the run -----------------------------------------------------------------------------------

int run(const std::map<std::string, std::string>& a) {
  auto url = need(a, "url");
  auto blob_dir = need(a, "blob-dir");
  auto brokers = need(a, "brokers");
  auto requests_topic = need(a, "requests-topic");
  auto responses_topic = need(a, "responses-topic");
  feeds::load_spec spec;
  spec.seller_id = get(a, "seller", "bench-seller");
  spec.ns = "feed";
  spec.task_id = get(a, "task", "bench-" + std::to_string(::time(nullptr)));
  spec.batch_size = std::stoul(get(a, "batch-size", "500"));
  auto timeout = std::chrono::seconds(std::stol(get(a, "timeout-s", "900")));
  bool do_split = get(a, "split", "1") == "1";
  feeds::reader_limits limits; // the node's defaults (feed.max_file_bytes 512m, ...)

  // Before the clock, as in a running node: the catalog and gazetteer parsed (at first use),
  // the producer made, the responses' reader in its group.
  feeds::unifier unify(
    std::shared_ptr<const feeds::catalog>(&feeds::catalog::builtin(), [](const feeds::catalog*) {}),
    std::shared_ptr<const feeds::gazetteer>(&feeds::gazetteer::builtin(),
                                            [](const feeds::gazetteer*) {}));
  kafka::producer_options po;
  po.role = "the feed benchmark's producer";
  po.settings = {kafka::brokers_setting(brokers)};
  if (auto kb = get(a, "producer-max-kbytes", ""); !kb.empty()) // librdkafka's local queue
    po.settings.push_back({"queue.buffering.max.kbytes", kb, "--producer-max-kbytes"});
  auto prod = kafka::producer::make(std::move(po));
  if (!prod)
    die("no producer: " + persistence::error_message(prod.error()));
  kafka::seller_sink<v1::FeedRequest> sink(std::move(*prod), requests_topic, "feed requests");

  answers ans;
  ans.task = spec.task_id;
  kafka::consumer_options co;
  co.role = "the feed benchmark's responses reader";
  co.brokers = brokers;
  co.group = "gost.feed-bench-" + spec.task_id;
  co.group_key = "--responses-topic";
  co.topic = responses_topic;
  co.topic_key = "--responses-topic";
  co.settings = {{"allow.auto.create.topics", "true", ""}};
  auto consumer = kafka::make_group_consumer(
    std::move(co),
    [&ans](const std::vector<kafka::message_view>& batch, const stop_signal&) {
      v1::FeedResponse r;
      std::lock_guard<std::mutex> lk(ans.mtx);
      for (auto& m : batch) {
        if (!r.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size()))
            || r.task_id() != ans.task)
          continue;
        if (!ans.first_seen) {
          ans.first_seen = true;
          ans.first_at = clock_type::now();
        }
        if (r.has_result()) {
          ++ans.results;
          ++ans.outcomes[r.result().outcome()];
        } else if (r.has_end() && !ans.ended) {
          ans.ended = true;
          ans.end_at = clock_type::now();
          ans.summary = r.end();
          ans.cv.notify_all();
        }
      }
      return kafka::verdict::handled;
    },
    1000);
  if (!consumer)
    die("no consumer: " + persistence::error_message(consumer.error()));

  stop_signal stop;
  blob_store blobs(blob_dir, "");
  std::vector<pid_t> gost_pids{::getpid()};
  if (auto g = get(a, "gostd-pid", ""); !g.empty())
    gost_pids.push_back(static_cast<pid_t>(std::stol(g)));
  bench::cpu_meter all(gost_pids, static_cast<pid_t>(std::stol(get(a, "pg-postmaster", "0"))));
  bench::cpu_meter self({::getpid()}, 0);
  auto cpu0 = all.sample(), self0 = self.sample();

  // (a) fetch
  auto t0 = clock_type::now();
  auto file = blobs.begin();
  if (!file.error().empty())
    die("blob store: " + file.error());
  http::request req;
  req.url = url;
  req.deadline = std::chrono::minutes(5);
  req.max_body = limits.max_file_bytes;
  req.allow_private = true; // the script's server is on loopback
  req.on_body = [&file](const char* data, size_t n) { return file.write(data, n); };
  auto resp = http::perform(req);
  if (!resp.success())
    die("fetching " + url
        + " failed: " + (resp.answered() ? "HTTP " + std::to_string(resp.status) : resp.message));
  auto bytes = file.bytes();
  auto name = file.finish("xml");
  if (name.empty())
    die("storing the file failed: " + file.error());
  auto path = blobs.path_of(name);
  auto t_fetched = clock_type::now();
  std::cerr << "gost_feed_bench: fetched " << bytes << " bytes in " << seconds(t_fetched - t0)
            << " s as " << name << "\n";

  // (b) + (c) check, unify, send; the end strictly after every batch was acknowledged
  feeds::feed_processor proc(unify, limits);
  auto rep = proc.run([&] { return feeds::file_source(path); }, spec, sink, nullptr, stop);
  auto t_sent = clock_type::now();
  if (rep.outcome != feeds::load_report::status::succeeded)
    die(std::string("the load did not succeed: ") + feeds::to_string(rep.outcome) + " "
        + (rep.fatal ? rep.fatal->describe() : ""));
  std::cerr << "gost_feed_bench: " << rep.offers << " offers: " << rep.sent << " sent, "
            << rep.rejected << " rejected, " << rep.duplicates << " duplicates, " << rep.warnings
            << " warnings, " << rep.batches << " batches; check " << rep.check_time.count()
            << " s, send " << rep.send_time.count() << " s\n";
  auto send_start = t_sent - std::chrono::duration_cast<clock_type::duration>(rep.send_time);

  // (d) the offer store's terminal response
  {
    std::unique_lock<std::mutex> lk(ans.mtx);
    auto deadline = clock_type::now() + timeout;
    while (!ans.ended) {
      if (ans.cv.wait_until(lk, std::min(deadline, clock_type::now() + std::chrono::seconds(5)))
          == std::cv_status::timeout) {
        if (clock_type::now() >= deadline)
          die("no terminal response for task " + spec.task_id + " within "
              + std::to_string(timeout.count()) + " s (" + std::to_string(ans.results)
              + " offer results so far)");
        std::cerr << "gost_feed_bench: " << ans.results << " offer results so far\n";
      }
    }
  }
  auto rss = peak_rss_mib();
  auto cpu1 = all.sample(), self1 = self.sample();
  consumer->reset();
  auto& s = ans.summary;
  int64_t stored = s.added() + s.updated() + s.unchanged();
  std::cerr << "gost_feed_bench: summary added=" << s.added() << " updated=" << s.updated()
            << " unchanged=" << s.unchanged() << " rejected=" << s.rejected()
            << " duplicates=" << s.duplicates() << " batches=" << s.batches() << "; " << ans.results
            << " offer results read\n";
  // The work completed: every offer sent and every rejected one answered, once.
  if (stored + s.rejected() != static_cast<int64_t>(rep.sent + rep.rejected)
      || s.batches() != rep.batches)
    die("the terminal summary does not count every offer: stored " + std::to_string(stored)
        + " + rejected " + std::to_string(s.rejected()) + " against " + std::to_string(rep.sent)
        + " sent + " + std::to_string(rep.rejected) + " rejected here, batches "
        + std::to_string(s.batches()) + " of " + std::to_string(rep.batches));

  double fetch_s = seconds(t_fetched - t0), value = seconds(t_sent - t0),
         e2e = seconds(ans.end_at - t0), store_s = seconds(ans.end_at - send_start);
  split parts;
  if (do_split)
    parts = time_parts(path, unify, limits, spec);
  std::printf("{\"bench\": \"feed\", \"value\": %.2f, \"unit\": \"s for %s offers\", "
              "\"rss_mib\": %.0f, \"fetch_s\": %.2f, \"check_s\": %.2f, \"send_s\": %.2f, "
              "\"end_to_end_s\": %.2f, \"store_offers_per_s\": %.0f, \"mib\": %.1f, "
              "\"sent\": %llu, \"rejected\": %llu, \"duplicates\": %llu, \"batches\": %d",
              value, grouped(rep.offers).c_str(), rss, fetch_s, rep.check_time.count(),
              rep.send_time.count(), e2e, static_cast<double>(stored) / store_s,
              static_cast<double>(bytes) / 1048576.0, static_cast<unsigned long long>(rep.sent),
              static_cast<unsigned long long>(rep.rejected),
              static_cast<unsigned long long>(rep.duplicates), rep.batches);
  auto ops = static_cast<double>(rep.offers);
  std::printf(", %s, \"processor_cpu_us_per_op\": %.1f", bench::cpu_fields(cpu0, cpu1, ops).c_str(),
              ops > 0 ? (self1.gost - self0.gost) * 1e6 / ops : 0.0);
  if (do_split)
    std::printf(", \"split_extract_s\": %.2f, \"split_unify_s\": %.2f, \"split_protobuf_s\": %.2f",
                parts.extract_s, parts.unify_s, parts.serialize_s);
  std::printf("}\n");
  blobs.remove(name);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    die("usage: gost_feed_bench topics|run --name value ... (see feed_bench.cpp)");
  std::string cmd = argv[1];
  auto a = parse_args(argc, argv, 2);
  if (cmd == "topics")
    return create_topics(a);
  if (cmd == "run")
    return run(a);
  if (cmd == "check")
    return check_only(a);
  die("unknown command " + cmd + " (topics, run)");
}
