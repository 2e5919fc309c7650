// gost.v1.FeedService through the real gostd process with feed.enabled on the real broker
// (GOST_TEST_KAFKA: the feed processor needs one): feeds created (bad input refused naming the
// field), a file uploaded in chunks (broken streams store nothing), its load run through the
// whole pipeline on this one node (processor → requests topic → the offer store → answers)
// until it succeeded, loads and errors listed and paged, the CSV export over the admin HTTP
// listener, gostctl's feed verbs, a parsed feed's hidden errors, and the feed deleted: its
// closing load succeeds and housekeeping cleans its history, the stored file included.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "gost/testing/grpc.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/feed_service.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using google::protobuf::util::TimeUtil;
using testing::child_process;

namespace {

/// A node with the feed processor (and the offer store's side of the exchange) on fresh topics.
struct feed_node {
  testing::temp_db db;
  std::string tag = std::to_string(getpid()) + "-"
                    + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string port_file = testing::temp_path("gostd-feed-api");
  std::string blob_dir = testing::temp_path("gost-feed-api-blobs");
  std::unique_ptr<child_process> proc;
  int grpc_port = 0;
  int http_port = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::FeedService::Stub> feeds;

  feed_node() {
    proc = std::make_unique<child_process>(
      GOSTD_PATH,
      testing::node_args(
        db, port_file,
        {"--kafka.brokers=" + testing::kafka_brokers(), "--kafka.topic=gost.saved-" + tag,
         "--feed.requests_topic=gost.feed-req-" + tag,
         "--feed.responses_topic=gost.feed-resp-" + tag, "--feed.group=gost.feeds-" + tag,
         "--feed.responses_group=gost.feed-processor-" + tag, "--feed.enabled=true",
         "--feed.poll=50ms", "--feed.max_file_bytes=64k", "--feed.keep_loads=2",
         "--feed.min_period=1m", "--images.blob_dir=" + blob_dir,
         // housekeeping (the feed cleanup) every 6 s
         "--api.request_ttl=60s", "--stages.expire.enabled=false"}));
    std::tie(grpc_port, http_port) = testing::read_ports(*proc, port_file);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                  grpc::InsecureChannelCredentials());
    feeds = v1::FeedService::NewStub(channel);
  }
  ~feed_node() {
    proc->signal(SIGTERM);
    proc->wait(30s);
    std::remove(port_file.c_str());
    std::filesystem::remove_all(blob_dir);
  }

  /// Stored files (the blob store's, temporary files aside).
  size_t files() const {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : std::filesystem::recursive_directory_iterator(blob_dir, ec))
      if (e.is_regular_file() && e.path().filename().string().rfind(".tmp", 0) != 0)
        ++n;
    return n;
  }

  grpc::Status create(const std::string& seller, const std::string& ns, const v1::FeedSettings& s,
                      v1::Feed* out = nullptr) {
    v1::CreateFeedRequest req;
    req.mutable_feed()->set_seller_id(seller);
    req.mutable_feed()->set_namespace_(ns);
    *req.mutable_settings() = s;
    v1::CreateFeedResponse resp;
    auto st = testing::call(
      [&](auto* ctx, auto& r, auto* a) { return feeds->CreateFeed(ctx, r, a); }, req, resp);
    if (out != nullptr)
      *out = resp.feed();
    return st;
  }

  /// Streams `bytes` in `chunk`-sized messages after the FeedRef (`total`: total_bytes).
  grpc::Status upload(const std::string& seller, const std::string& ns, const std::string& bytes,
                      size_t chunk, int64_t total, v1::UploadResponse& resp,
                      bool name_first = true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto writer = feeds->Upload(&ctx, &resp);
    v1::UploadRequest m;
    if (name_first) {
      m.mutable_feed()->set_seller_id(seller);
      m.mutable_feed()->set_namespace_(ns);
      m.set_total_bytes(total);
      writer->Write(m);
    }
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      m.Clear();
      m.set_chunk(bytes.substr(at, chunk));
      if (!writer->Write(m))
        break; // the server answered already
    }
    writer->WritesDone();
    return writer->Finish();
  }

  v1::FeedLoad load(const std::string& seller, int64_t id, grpc::Status* status = nullptr) {
    v1::GetLoadRequest req;
    req.set_seller_id(seller);
    req.set_load_id(id);
    v1::GetLoadResponse resp;
    auto st = testing::call([&](auto* ctx, auto& r, auto* a) { return feeds->GetLoad(ctx, r, a); },
                            req, resp);
    if (status != nullptr)
      *status = st;
    return resp.load();
  }

  bool load_ends(const std::string& seller, int64_t id, v1::FeedLoad::Status want) {
    return testing::eventually(60s,
                               [&] {
                                 auto s = load(seller, id).status();
                                 return s == want || s == v1::FeedLoad::FAILED;
                               })
           && load(seller, id).status() == want;
  }

  grpc::Status errors(const v1::ListErrorsRequest& req, v1::ListErrorsResponse& resp) {
    return testing::call([&](auto* ctx, auto& r, auto* a) { return feeds->ListErrors(ctx, r, a); },
                         req, resp);
  }

  std::string addr() const { return "127.0.0.1:" + std::to_string(grpc_port); }
};

v1::FeedSettings upload_settings() {
  v1::FeedSettings s;
  s.set_kind(v1::FeedSettings::UPLOAD);
  return s;
}

v1::FeedSettings url_settings(const std::string& url, int64_t period_s) {
  v1::FeedSettings s;
  s.set_kind(v1::FeedSettings::URL);
  s.set_url(url);
  *s.mutable_period() = TimeUtil::SecondsToDuration(period_s);
  return s;
}

/// The status is INVALID_ARGUMENT and its message names `field`.
void refused_naming(const grpc::Status& st, const std::string& field) {
  CHECK_MESSAGE(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT, st.error_message());
  CHECK_MESSAGE(st.error_message().find(field) != std::string::npos, st.error_message());
}

std::string sample(const char* name) {
  std::ifstream in{std::string{GOST_SOURCE_DIR} + "/actors/feeds/data/samples/" + name,
                   std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, {}};
}

std::pair<int, std::string> gostctl(const feed_node& n, std::vector<std::string> args) {
  args.insert(args.begin(), {"--addr", n.addr()});
  child_process p{GOSTCTL_PATH, args};
  int rc = p.wait(30s);
  return {rc, p.output()};
}

/// The body of an HTTP response (after the blank line).
std::string body_of(const std::string& response) {
  auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string{} : response.substr(at + 4);
}

} // namespace

TEST_CASE("feed API: bad input is refused naming the field, and nothing is stored") {
  feed_node n;
  auto s = upload_settings();
  refused_naming(n.create("", "shop", s), "feed.seller_id");
  refused_naming(n.create(std::string(129, 's'), "shop", s), "feed.seller_id");
  refused_naming(n.create("s1", "", s), "feed.namespace");
  refused_naming(n.create("s1", "bad ns!", s), "feed.namespace");
  refused_naming(n.create("s1", "shop", v1::FeedSettings{}), "settings.kind");
  refused_naming(n.create("s1", "shop", url_settings("ftp://feeds.example/a.xml", 3600)),
                 "settings.url");
  refused_naming(n.create("s1", "shop", url_settings("feeds.example/a.xml", 3600)), "settings.url");
  auto short_period = n.create("s1", "shop", url_settings("https://feeds.example/a.xml", 10));
  refused_naming(short_period, "settings.period");
  CHECK(short_period.error_message().find("feed.min_period") != std::string::npos);
  auto with_url = upload_settings();
  with_url.set_url("https://feeds.example/a.xml");
  refused_naming(n.create("s1", "shop", with_url), "settings.url");
  v1::FeedSettings parsed;
  parsed.set_kind(v1::FeedSettings::PARSED);
  refused_naming(n.create("s1", "shop", parsed), "settings.source");

  v1::ListFeedsRequest lr;
  lr.set_seller_id("s1");
  lr.set_include_removed(true);
  v1::ListFeedsResponse list;
  REQUIRE(
    testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->ListFeeds(c, r, a); }, lr, list)
      .ok());
  CHECK(list.feeds_size() == 0);

  // The same settings again: the same feed; others: ALREADY_EXISTS. A URL feed is due at once.
  v1::Feed f;
  REQUIRE(n.create("s1", "shop", s, &f).ok());
  CHECK(f.version() == 1);
  v1::Feed again;
  REQUIRE(n.create("s1", "shop", s, &again).ok());
  CHECK(again.version() == 1);
  s.set_missing(v1::FeedSettings::MAKE_MANUAL);
  CHECK(n.create("s1", "shop", s).error_code() == grpc::StatusCode::ALREADY_EXISTS);
  v1::Feed by_url;
  REQUIRE(
    n.create("s1", "remote", url_settings("https://feeds.example/a.xml", 3600), &by_url).ok());
  CHECK(by_url.has_next_fetch_at());
  CHECK(TimeUtil::TimestampToSeconds(by_url.next_fetch_at()) <= std::time(nullptr) + 1);

  // Upload: the first message must name the feed; a short stream, a stream over
  // feed.max_file_bytes or to a missing feed store nothing.
  v1::UploadResponse up;
  refused_naming(n.upload("s1", "shop", "<x/>", 2, 0, up, false), "feed");
  refused_naming(n.upload("s1", "shop", "<feed></feed>", 4, 100, up), "total_bytes");
  auto big = n.upload("s1", "shop", std::string(70 * 1024, 'x'), 16 * 1024, 0, up);
  CHECK(big.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(big.error_message().find("feed.max_file_bytes") != std::string::npos);
  CHECK(n.upload("s1", "none", "<feed/>", 4, 0, up).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(n.files() == 0);
  v1::ListLoadsRequest llr;
  llr.mutable_feed()->set_seller_id("s1");
  llr.mutable_feed()->set_namespace_("shop");
  v1::ListLoadsResponse loads;
  REQUIRE(testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->ListLoads(c, r, a); }, llr,
                        loads)
            .ok());
  CHECK(loads.loads_size() == 0);

  // LoadNow: an UPLOAD feed has no URL of its own.
  v1::LoadNowRequest now;
  now.mutable_feed()->set_seller_id("s1");
  now.mutable_feed()->set_namespace_("shop");
  v1::LoadNowResponse nr;
  CHECK(testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->LoadNow(c, r, a); }, now, nr)
          .error_code()
        == grpc::StatusCode::FAILED_PRECONDITION);
  now.set_url("gopher://x");
  refused_naming(
    testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->LoadNow(c, r, a); }, now, nr),
    "url");
}

TEST_CASE("feed API: an upload runs through the pipeline; history, errors, CSV, gostctl, delete") {
  feed_node n;
  REQUIRE(n.create("s1", "shop", upload_settings()).ok());
  auto file = sample("native.xml");
  v1::UploadResponse up;
  auto st = n.upload("s1", "shop", file, 300, static_cast<int64_t>(file.size()), up);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(up.bytes() == static_cast<int64_t>(file.size()));
  CHECK(up.sha256().size() == 64);
  CHECK(n.files() == 1);
  auto id = up.load_id();
  CHECK(id > 0);
  auto fresh = n.load("s1", id);
  CHECK(fresh.origin() == "upload");
  CHECK(fresh.sha256() == up.sha256());
  // The node's own processor sends it, the offer store applies it, its answers complete it.
  bool succeeded = n.load_ends("s1", id, v1::FeedLoad::SUCCEEDED);
  REQUIRE_MESSAGE(succeeded, (n.load("s1", id).DebugString() + n.proc->output()));
  auto done = n.load("s1", id);
  CHECK(done.format() == "native");
  CHECK(done.statistics().offers() > 0);
  CHECK(done.statistics().added() > 0);

  // Errors, paged by (external_id, error_id): 25 of them put where the pipeline puts them.
  n.db.scalar("INSERT INTO feed_offer_errors (seller_id, load_id, external_id, error_id,"
              " error_level, error_type, field, title, line, error_message)"
              " SELECT 's1', "
              + std::to_string(id)
              + ", 'e' || lpad(i::text, 2, '0'), 5, CASE WHEN i % 5 = 0 THEN 'warning' ELSE"
                " 'error' END, 'validation', 'Price', 'Title, \"quoted\"', i, 'no price'"
                " FROM generate_series(1, 25) i");
  v1::ListErrorsRequest er;
  er.set_seller_id("s1");
  er.set_load_id(id);
  er.set_type("validation");
  er.set_limit(10);
  std::vector<std::string> seen;
  int64_t total = 0;
  for (int pages = 0; pages < 5; ++pages) {
    v1::ListErrorsResponse page;
    REQUIRE(n.errors(er, page).ok());
    total = page.total();
    for (auto& e : page.errors())
      seen.push_back(e.external_id());
    if (page.errors_size() < 10)
      break;
    er.set_after_external_id(page.errors().rbegin()->external_id());
    er.set_after_error_id(page.errors().rbegin()->error_id());
  }
  CHECK(total == 25);
  REQUIRE(seen.size() == 25);
  CHECK(seen.front() == "e01");
  CHECK(seen.back() == "e25");
  v1::ListErrorsRequest warnings;
  warnings.set_seller_id("s1");
  warnings.set_load_id(id);
  warnings.set_level("warning");
  warnings.set_type("validation");
  v1::ListErrorsResponse w;
  REQUIRE(n.errors(warnings, w).ok());
  CHECK(w.total() == 5);
  warnings.set_level("fatal");
  refused_naming(n.errors(warnings, w), "level");

  // The CSV over the admin HTTP listener: a header, a row per error, quoted.
  auto csv =
    testing::http_get(static_cast<uint16_t>(n.http_port),
                      "/feeds/errors.csv?seller=s1&load=" + std::to_string(id) + "&level=warning");
  CHECK_MESSAGE(testing::http_status(csv) == 200, csv);
  CHECK(csv.find("text/csv") != std::string::npos);
  auto body = body_of(csv);
  CHECK(body.rfind("external_id,error_id,level,type,field,title,line,message\r\n", 0) == 0);
  CHECK(body.find("e05,5,warning,validation,Price,\"Title, \"\"quoted\"\"\",5,no price\r\n")
        != std::string::npos);
  size_t lines = 0;
  for (size_t at = 0; (at = body.find("\r\n", at)) != std::string::npos; at += 2)
    ++lines;
  CHECK(lines == 6); // header + 5 warnings
  auto answers = [&](const std::string& path, int status) {
    auto r = testing::http_get(static_cast<uint16_t>(n.http_port), path);
    CHECK_MESSAGE(testing::http_status(r) == status, path << " answered:\n" << r);
  };
  answers("/feeds/errors.csv?load=1", 400);
  answers("/feeds/errors.csv?seller=s1&load=999999", 404);

  // The web console's feed view: the feeds and their newest loads as JSON.
  auto view = testing::http_get(static_cast<uint16_t>(n.http_port), "/api/feeds?seller=s1&loads=5");
  CHECK_MESSAGE(testing::http_status(view) == 200, view);
  auto view_body = body_of(view);
  CHECK(view_body.find("\"feeds\":[") != std::string::npos);
  CHECK(view_body.find("\"load_id\":\"" + std::to_string(id) + "\"") != std::string::npos);
  CHECK(view_body.find("\"status\":\"SUCCEEDED\"") != std::string::npos);
  answers("/api/feeds?seller=s1&loads=0", 400);
  answers("/api/feeds", 400);

  // gostctl: the seller's feeds, the load, its errors as CSV.
  auto [rc1, feeds_out] = gostctl(n, {"feeds", "--seller", "s1"});
  CHECK_MESSAGE(rc1 == 0, feeds_out);
  CHECK(feeds_out.find("shop") != std::string::npos);
  CHECK(feeds_out.find("1 feed(s)") != std::string::npos);
  auto [rc2, load_out] = gostctl(n, {"feed-load", "s1", std::to_string(id)});
  CHECK_MESSAGE(rc2 == 0, load_out);
  CHECK(load_out.find("SUCCEEDED") != std::string::npos);
  CHECK(load_out.find("the first 20") != std::string::npos);
  CHECK(load_out.find("e20") != std::string::npos);
  CHECK(load_out.find("e21") == std::string::npos);
  auto [rc3, csv_out] = gostctl(n, {"feed-errors", "s1", std::to_string(id), "--csv"});
  CHECK_MESSAGE(rc3 == 0, csv_out);
  CHECK(csv_out.find("e24,5,error,validation,Price") != std::string::npos);
  CHECK(csv_out.find("e25,5,warning,validation,Price") != std::string::npos);
  auto [rc4, missing] = gostctl(n, {"feed-load", "s1", "999999"});
  CHECK(rc4 == 1);
  CHECK(missing.find("no load 999999") != std::string::npos);

  // A parsed feed: its errors are hidden from the seller, shown to operators.
  v1::FeedSettings parsed;
  parsed.set_kind(v1::FeedSettings::PARSED);
  parsed.set_source("avito");
  REQUIRE(n.create("s1", "parsed", parsed).ok());
  v1::LoadNowRequest now;
  now.mutable_feed()->set_seller_id("s1");
  now.mutable_feed()->set_namespace_("parsed");
  now.set_url("https://files.example/profile.json");
  v1::LoadNowResponse nr;
  REQUIRE(
    testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->LoadNow(c, r, a); }, now, nr)
      .ok());
  CHECK(n.load("s1", nr.load_id()).origin() == "url-once");
  n.db.scalar("INSERT INTO feed_offer_errors (seller_id, load_id, external_id, error_id,"
              " error_level, error_type, error_message) VALUES ('s1', "
              + std::to_string(nr.load_id()) + ", 'p1', 0, 'error', 'validation', 'bad')");
  v1::ListErrorsRequest pr;
  pr.set_seller_id("s1");
  pr.set_load_id(nr.load_id());
  v1::ListErrorsResponse hidden;
  REQUIRE(n.errors(pr, hidden).ok());
  CHECK(hidden.hidden());
  CHECK(hidden.errors_size() == 0);
  pr.set_include_hidden(true);
  v1::ListErrorsResponse shown;
  REQUIRE(n.errors(pr, shown).ok());
  CHECK(shown.errors_size() == 1);

  // Delete: a closing load deletes the feed's offers; the history goes, the file with it.
  v1::DeleteFeedRequest dr;
  dr.mutable_feed()->set_seller_id("s1");
  dr.mutable_feed()->set_namespace_("shop");
  v1::DeleteFeedResponse gone;
  REQUIRE(
    testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->DeleteFeed(c, r, a); }, dr, gone)
      .ok());
  CHECK(gone.load_id() > id);
  auto closing = n.load("s1", gone.load_id());
  CHECK(closing.origin() == "delete");
  CHECK(n.load_ends("s1", gone.load_id(), v1::FeedLoad::SUCCEEDED));
  CHECK(n.load("s1", gone.load_id()).statistics().deleted() == done.statistics().added());
  grpc::Status cleaned;
  CHECK(testing::eventually(60s, [&] {
    n.load("s1", id, &cleaned);
    return cleaned.error_code() == grpc::StatusCode::NOT_FOUND && n.files() == 0;
  }));
  CHECK(n.db.scalar("SELECT count(*) FROM feed_offer_errors WHERE load_id = " + std::to_string(id))
        == "0");
  v1::GetFeedRequest gr;
  gr.mutable_feed()->set_seller_id("s1");
  gr.mutable_feed()->set_namespace_("shop");
  v1::GetFeedResponse feed;
  REQUIRE(
    testing::call([&](auto* c, auto& r, auto* a) { return n.feeds->GetFeed(c, r, a); }, gr, feed)
      .ok());
  CHECK(feed.feed().removed());
  CHECK(feed.feed().last_load_id() == gone.load_id());
  // Uploads to a removed feed are refused before any byte is stored.
  CHECK(n.upload("s1", "shop", file, 300, 0, up).error_code()
        == grpc::StatusCode::FAILED_PRECONDITION);

  // /metrics carries the feed processor's figures.
  auto metrics = body_of(testing::http_get(static_cast<uint16_t>(n.http_port), "/metrics"));
  CHECK(metrics.find("gost_feed_loads_sent_total ") != std::string::npos);
  CHECK(metrics.find("gost_feed_loads_cleaned_total ") != std::string::npos);
  CHECK(metrics.find("gost_feed_offer_problems_total{type=\"unknown_category\"}")
        != std::string::npos);
  CHECK(metrics.find("gost_grpc_requests_total{method=\"/gost.v1.FeedService/Upload\",code=\"OK\"}")
        != std::string::npos);
}
