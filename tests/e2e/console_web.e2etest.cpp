// The web console on the admin HTTP listener (issue 13 item 6, issue 24 item 6; docs/console.md
// "The web page"): the page loaded by Debian's headless Chromium shows the node, its shards as
// a grid, every kind of work (the built-in task type), an offer's and a task's describe views
// with decoded states, and plots of the node's samples (/api/series), and its screenshot has
// them drawn; the JSON endpoints' status codes and content types; the probes answer while a
// client holds a connection open and idle.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include <grpcpp/grpcpp.h>
#include <unistd.h>
#include <vips/vips8>

#include "gost/testing/grpc.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"
#include "gost/v1/tasks.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::call;
using testing::child_process;
using testing::eventually;
using testing::temp_path;

namespace {

const std::string node_id = "web-e2e-node";

/// A node with the audit stage (one run per new offer, its state an AuditTrail), one offer
/// created through gRPC whose audit state is stored, and one moderation task (the built-in task
/// type: an entity kind) waiting for its verdict; it samples its figures every 200 ms.
struct web_node {
  web_node()
    : port_file(temp_path("gostd-web")),
      node(GOSTD_PATH,
           testing::node_args(db, port_file,
                              {"--node.id=" + node_id, "--stages.audit.enabled=true",
                               "--stages.audit.every=1h", "--outbox.relay=false",
                               "--console.sample_interval=200ms", "--console.sample_count=50"})) {
    int grpc_port = 0, h = 0;
    std::tie(grpc_port, h) = testing::read_ports(node, port_file);
    http_port = static_cast<uint16_t>(h);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                       grpc::InsecureChannelCredentials());
    offers = v1::OfferService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
    tasks = v1::TaskService::NewStub(channel);
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("web-seller");
    req.mutable_offer()->set_title(title);
    req.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
    v1::CreateOfferResponse resp;
    auto create = [&](grpc::ClientContext* c, const v1::CreateOfferRequest& r,
                      v1::CreateOfferResponse* o) { return offers->CreateOffer(c, r, o); };
    auto st = call(create, req, resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    offer_id = resp.offer().id();
    // The audit stage runs once on the new offer: wait for its state.
    REQUIRE(eventually(30s, [&] {
      v1::InspectOfferRequest in;
      in.set_offer_id(offer_id);
      v1::InspectOfferResponse out;
      auto inspect = [&](grpc::ClientContext* c, const v1::InspectOfferRequest& r,
                         v1::InspectOfferResponse* o) { return admin->InspectOffer(c, r, o); };
      return call(inspect, in, out).ok() && out.states().count("audit") != 0;
    }));
    // A task: its Init runs on the entity shards (runs of kind task.moderation).
    v1::CreateGroupRequest group;
    group.mutable_group()->set_group_id("web");
    group.mutable_group()->set_task_type("moderation");
    group.mutable_group()->set_source("web-e2e");
    group.mutable_group()->set_max_attempts(3);
    v1::CreateGroupResponse group_resp;
    auto create_group = [&](grpc::ClientContext* c, const v1::CreateGroupRequest& r,
                            v1::CreateGroupResponse* o) { return tasks->CreateGroup(c, r, o); };
    st = call(create_group, group, group_resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    v1::ModerationInput input;
    input.set_item_id("item-1");
    input.set_content("content of item-1");
    input.set_verdict_timeout_ms(3600000);
    input.set_max_issues(3);
    v1::CreateTaskRequest task;
    task.set_group_id("web");
    task.set_client_key("item-1");
    task.mutable_input()->PackFrom(input);
    v1::CreateTaskResponse task_resp;
    auto create_task = [&](grpc::ClientContext* c, const v1::CreateTaskRequest& r,
                           v1::CreateTaskResponse* o) { return tasks->CreateTask(c, r, o); };
    st = call(create_task, task, task_resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    task_id = task_resp.task_id();
    // The samples have seen the audit run and the task's: a rate of each, after a run.
    REQUIRE(eventually(30s, [&] {
      auto series = get("/api/series");
      return std::regex_search(series, std::regex{R"("key":"audit","runs_per_s":\[[^\]]*[1-9])"})
             && std::regex_search(
               series, std::regex{R"("key":"task.moderation","runs_per_s":\[[^\]]*[1-9])"});
    }));
  }
  ~web_node() {
    node.signal(SIGTERM);
    node.wait(30s);
    std::remove(port_file.c_str());
  }

  std::string get(const std::string& path) { return testing::http_get(http_port, path); }

  /// Changes the offer's price every 250 ms from a thread of its own while `keep` holds, so a
  /// trace opened meanwhile has events to show.
  std::thread updating(std::atomic<bool>& keep) {
    return std::thread{[this, &keep] {
      for (int i = 1; keep.load(); ++i) {
        v1::UpdateOfferRequest req;
        req.mutable_offer()->set_id(offer_id);
        req.mutable_offer()->mutable_price()->set_amount_minor(100 * i);
        req.mutable_offer()->mutable_price()->set_currency("RUB");
        req.mutable_update_mask()->add_paths("price");
        v1::UpdateOfferResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 10s);
        (void)offers->UpdateOffer(&ctx, req, &resp);
        std::this_thread::sleep_for(250ms);
      }
    }};
  }

  // Markup in the title: the page must show it as text.
  const std::string title = "web <b>console</b> bike";
  testing::temp_db db;
  std::string port_file;
  child_process node;
  uint16_t http_port = 0;
  std::unique_ptr<v1::OfferService::Stub> offers;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::TaskService::Stub> tasks;
  std::string offer_id;
  std::string task_id;
};

/// The status line's code ("HTTP/1.1 404 Not Found" -> 404), 0 without a response.
int status_of(const std::string& resp) {
  return resp.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(resp.c_str() + 9) : 0;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

/// What a screenshot shows: its size, the pixels of one colour (within 12 per channel: the
/// plots' lines are drawn in it) and how many pixels are not the page's white.
struct picture {
  int width = 0, height = 0;
  size_t coloured = 0, not_white = 0;
};

picture look_at(const std::string& png, uint8_t r, uint8_t g, uint8_t b) {
  static bool started = [] { return VIPS_INIT("gost-test") == 0; }();
  REQUIRE(started);
  auto img = vips::VImage::new_from_file(png.c_str()).colourspace(VIPS_INTERPRETATION_sRGB);
  if (img.bands() == 4)
    img = img.extract_band(0, vips::VImage::option()->set("n", 3));
  picture p{img.width(), img.height()};
  img = img.cast(VIPS_FORMAT_UCHAR);
  size_t size = 0;
  auto* px = static_cast<uint8_t*>(img.write_to_memory(&size));
  for (size_t i = 0; i + 2 < size; i += 3) {
    if (std::abs(px[i] - r) <= 12 && std::abs(px[i + 1] - g) <= 12 && std::abs(px[i + 2] - b) <= 12)
      ++p.coloured;
    if (px[i] < 240 || px[i + 1] < 240 || px[i + 2] < 240)
      ++p.not_white;
  }
  g_free(px);
  return p;
}

/// Chromium's path on PATH, or "" (then the test fails, naming the package).
std::string find_chromium() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  std::stringstream dirs{path};
  for (std::string dir; std::getline(dirs, dir, ':');)
    for (const char* name : {"chromium", "chromium-browser"})
      if (auto p = dir + "/" + name; ::access(p.c_str(), X_OK) == 0)
        return p;
  return {};
}

} // namespace

TEST_CASE("web console: the page in headless Chromium shows the node, its shards and an offer") {
  auto chromium = find_chromium();
  REQUIRE_MESSAGE(!chromium.empty(),
                  "chromium is not installed, and this test loads the web console in it: run "
                  "scripts/install-deps.sh (it installs Debian's package `chromium`)");
  web_node n;
  auto dom_file = temp_path("web-dom");
  auto profile = temp_path("web-chromium-profile");
  // The trace is asked for too (trace=1), for at most 3 events or 6 s, while the offer changes.
  auto url = "http://127.0.0.1:" + std::to_string(n.http_port) + "/?offer=" + n.offer_id
             + "&trace=1&for=6&max=3&kind=task.moderation&id=" + n.task_id;
  std::atomic<bool> keep{true};
  auto updates = n.updating(keep);
  struct stop_updates {
    std::atomic<bool>& keep;
    std::thread& t;
    ~stop_updates() {
      keep = false;
      t.join();
    }
  } stop{keep, updates};
  child_process browser{"/bin/sh",
                        {"-c", chromium
                                 + " --headless=new --disable-gpu --no-sandbox --no-first-run "
                                   "--disable-dev-shm-usage --user-data-dir="
                                 + profile + " --virtual-time-budget=8000 --dump-dom '" + url
                                 + "' >" + dom_file + " 2>/dev/null"}};
  REQUIRE_MESSAGE(browser.wait(120s) == 0, "chromium did not dump the page");
  std::ifstream in{dom_file};
  std::stringstream ss;
  ss << in.rdbuf();
  auto dom = ss.str();
  std::remove(dom_file.c_str());
  std::system(("rm -rf " + profile).c_str());
  auto status_at = dom.find("id=\"trace-status\"");
  INFO("trace status: ", dom.substr(status_at == std::string::npos ? 0 : status_at, 300));
  INFO(dom);
  // The node, and the tables the page fills from /api/top, /api/shards, /api/stages.
  CHECK(has(dom, "<span id=\"node-id\">" + node_id + "</span>"));
  CHECK(has(dom, "<th>epoch</th>"));
  CHECK(has(dom, "<td class=\"text\">" + node_id + "</td>")); // a shard's owner, a node row
  CHECK(has(dom, "<div id=\"top-shards\" class=\"table\"><table>"));
  CHECK(has(dom, "<td class=\"text\">audit</td>"));
  // The describe view: the title as text (its markup escaped, not made elements), the version,
  // and the audit stage's state decoded from its protobuf type.
  CHECK(has(dom, "<td class=\"text\">web &lt;b&gt;console&lt;/b&gt; bike</td>"));
  CHECK_FALSE(has(dom, "<b>console</b>"));
  CHECK(has(dom, "<td class=\"text\">version</td><td class=\"text\">")); // it changes meanwhile
  CHECK(has(dom, "data-stage=\"audit\""));
  CHECK(has(dom, "\"@type\": \"type.googleapis.com/gost.v1.AuditTrail\""));
  CHECK(has(dom, "\"node_id\": \"" + node_id + "\""));
  CHECK(has(dom, "\"runs\": \"1\""));
  // The live trace panel shows the offer's events as they came: its price updates.
  // (the dump may come before the stream's end: the events shown are what counts)
  CHECK((has(dom, "<li>{&quot;offer_id&quot;:&quot;" + n.offer_id)
         || has(dom, "<li>{\"offer_id\":\"" + n.offer_id)));
  CHECK(has(dom, "update"));
  CHECK((has(dom, "\"source\":\"api\"") || has(dom, "&quot;source&quot;:&quot;api&quot;")));

  // Every kind: the task type among the tasks, with a link to its describe view, and the
  // task's describe view (kind + id from the URL) with its state decoded.
  CHECK(has(dom, "<div id=\"tasks\" class=\"table\"><table>"));
  CHECK(has(dom, "<a href=\"#entity-section\">task.moderation</a>"));
  CHECK(has(dom, "<div id=\"images\" class=\"table\"><table>")); // images.enabled by default
  CHECK(has(dom, "<td class=\"text\">preview</td>"));
  CHECK(has(dom, "<td class=\"text\">scheduled actions: attempts</td>"));
  CHECK(has(dom, "<p id=\"entity-status\" class=\"muted\">entity task.moderation/" + n.task_id
                   + "</p>"));
  CHECK(has(dom, "<td class=\"text\">task.moderation/" + n.task_id + "</td>"));
  CHECK(has(dom, "<pre id=\"entity-state\">{\n  \"@type\": \"type.googleapis.com/gost.v1.Task\""));
  CHECK(has(dom, "\"state_name\": \"waiting\""));
  // The shards as a grid: one cell per shard (8, as the node runs), each with its title.
  CHECK(count_of(dom, "class=\"shard-cell\"") + count_of(dom, "class=\"shard-cell ") == 8);
  CHECK(has(dom, "title=\"shard 0 · owner " + node_id + " · epoch "));
  CHECK(has(dom, "<div id=\"shards\" class=\"table\" hidden=\"\"><table>")); // the toggle
  // Plots of the samples: a card per stage and kind, each figure a path through its points.
  CHECK(has(dom, "<div class=\"series\" data-group=\"stage\" data-key=\"audit\">"));
  CHECK(has(dom, "<div class=\"series\" data-group=\"task\" data-key=\"task.moderation\">"));
  CHECK(has(dom, "<div class=\"series\" data-group=\"offers\" data-key=\"offers\">"));
  std::smatch m;
  REQUIRE(std::regex_search(
    dom, m,
    std::regex{
      R"re(<path d="M[0-9.]+ [0-9]+( L[0-9.]+ [0-9]+)+" stroke="#1f6fb2"[^>]*data-points="([0-9]+)")re"}));
  CHECK(std::stoi(m[2]) >= 2);
  CHECK(count_of(dom, "stroke=\"#1f6fb2\"") >= 3); // runs/s of the stage, the offers, the task

  // The screenshot: a PNG of the window's size with the plots drawn (the runs/s line's colour)
  // and the page not blank. GOST_KEEP_SHOT=1 keeps the PNG in /tmp to look at.
  auto png = temp_path("web-shot") + ".png";
  auto profile2 = temp_path("web-chromium-profile");
  child_process shot{"/bin/sh",
                     {"-c", chromium
                              + " --headless=new --disable-gpu --no-sandbox --no-first-run "
                                "--disable-dev-shm-usage --hide-scrollbars --user-data-dir="
                              + profile2
                              + " --virtual-time-budget=5000 --window-size=1200,900 "
                                "--screenshot="
                              + png + " 'http://127.0.0.1:" + std::to_string(n.http_port)
                              + "/' >/dev/null 2>&1"}};
  REQUIRE_MESSAGE(shot.wait(120s) == 0, "chromium did not take the screenshot");
  std::system(("rm -rf " + profile2).c_str());
  REQUIRE(::access(png.c_str(), R_OK) == 0);
  auto pic = look_at(png, 0x1f, 0x6f, 0xb2);
  if (!std::getenv("GOST_KEEP_SHOT"))
    std::remove(png.c_str());
  CHECK(pic.width == 1200);
  CHECK(pic.height == 900);
  CHECK(pic.coloured >= 40);               // a few plot lines' worth of pixels
  CHECK(pic.not_white > 1200 * 900 / 100); // text, frames, cells: not a blank page
}

TEST_CASE("web console: JSON endpoints, refusals, and probes while a client idles") {
  web_node n;
  const std::string json = "Content-Type: application/json; charset=utf-8\r\n";
  for (auto path : {"/api/top", "/api/stages", "/api/nodes", "/api/shards", "/api/deadletters",
                    "/api/deadletters?stage=audit&limit=10", "/api/series"}) {
    auto r = n.get(path);
    CHECK_MESSAGE(status_of(r) == 200, path, r);
    CHECK_MESSAGE(has(r, json), path);
  }
  CHECK(has(n.get("/api/top"), "\"node_id\":\"" + node_id + "\""));
  CHECK(has(n.get("/api/shards"), "\"owner\":\"" + node_id + "\""));

  auto offer = n.get("/api/offer?id=" + n.offer_id);
  CHECK(status_of(offer) == 200);
  CHECK(has(offer, json));
  CHECK(has(offer, "\"version\":\"1\""));
  CHECK(has(offer, "\"states\":{\"audit\":{\"@type\":\"type.googleapis.com/gost.v1.AuditTrail\""));

  // The samples: the config's interval and count, per stage and kind.
  auto series = n.get("/api/series");
  CHECK(has(series, "{\"interval_ms\":200,\"capacity\":50,\"at_us\":["));
  CHECK(has(series, "{\"group\":\"stage\",\"key\":\"audit\",\"runs_per_s\":["));
  CHECK(has(series, "{\"group\":\"kind\",\"key\":\"task.moderation\",\"runs_per_s\":["));
  CHECK(has(series, "\"write_lag_ms\":["));

  // The task's describe view; a kind the node does not host is refused naming what to fix.
  auto entity = n.get("/api/entity?kind=task.moderation&id=" + n.task_id);
  CHECK(status_of(entity) == 200);
  CHECK(has(entity, "\"entity_key\":\"task.moderation/" + n.task_id + "\""));
  CHECK(has(entity, "\"state\":{\"@type\":\"type.googleapis.com/gost.v1.Task\""));
  CHECK(status_of(n.get("/api/entity?kind=task.moderation&id=web:never-sent")) == 404);
  auto no_kind = n.get("/api/entity?kind=no.such.kind&id=x");
  CHECK(status_of(no_kind) / 100 == 4);
  CHECK(has(no_kind, "no.such.kind"));

  auto unknown = n.get("/api/offer?id=0123456789abcdef0123456789abcdef");
  CHECK(status_of(unknown) == 404);
  CHECK(has(unknown, json));
  CHECK(has(unknown, "does not exist"));
  for (auto bad : {std::string{"/api/offer"}, std::string{"/api/offer?id="},
                   "/api/offer?id=" + std::string(300, 'a'), std::string{"/api/offer?id=%zz"},
                   std::string{"/api/offer?offer=x"}, std::string{"/api/deadletters?limit=x"},
                   std::string{"/api/deadletters?limit=0"}, std::string{"/api/top?verbose=1"},
                   std::string{"/api/trace"}, "/api/trace?offer=" + n.offer_id + "&for=0",
                   std::string{"/api/series?window=1h"}, std::string{"/api/entity"},
                   std::string{"/api/entity?kind=task.moderation"},
                   std::string{"/api/entity?kind=task.moderation&id="},
                   std::string{"/api/entity?kind=task.moderation&id=x&offer=y"},
                   "/api/trace?offer=" + n.offer_id + "&max=many"}) {
    auto r = n.get(bad);
    CHECK_MESSAGE(status_of(r) == 400, bad, r);
    // With a message, as JSON: the endpoint's error, or the listener's on a bad escape.
    CHECK_MESSAGE(has(r, json), bad, r);
    CHECK_MESSAGE(has(r, "\"error\":"), bad, r);
  }
  {
    // The trace as newline-delimited JSON, here while the offer changes: two update events.
    std::atomic<bool> keep{true};
    auto updates = n.updating(keep);
    auto trace = n.get("/api/trace?offer=" + n.offer_id + "&for=10&max=2");
    keep = false;
    updates.join();
    CHECK(status_of(trace) == 200);
    CHECK(has(trace, "Content-Type: application/x-ndjson; charset=utf-8"));
    auto body = trace.substr(trace.find("\r\n\r\n") + 4);
    CHECK(std::count(body.begin(), body.end(), '\n') == 2);
    CHECK(has(body, "{\"offer_id\":\"" + n.offer_id + "\""));
    CHECK(has(body, "\"kind\":\"update\""));
  }
  // An offer id the trace refuses (too long) comes back as the endpoints' errors do.
  CHECK(status_of(n.get("/api/trace?offer=" + std::string(300, 'x'))) == 400);
  CHECK(status_of(n.get("/api/nope")) == 404);
  CHECK(has(n.get("/nope"), "not found: /nope"));

  auto page = n.get("/");
  CHECK(status_of(page) == 200);
  CHECK(has(page, "Content-Type: text/html; charset=utf-8\r\n"));
  CHECK(has(page, "<script src=\"/console.js\" defer></script>"));
  CHECK(has(page, "Content-Security-Policy: default-src 'self'"));
  CHECK(n.get("/console") == page);
  CHECK(has(n.get("/console.js"), "Content-Type: text/javascript; charset=utf-8\r\n"));
  CHECK(has(n.get("/console.css"), "Content-Type: text/css; charset=utf-8\r\n"));
  CHECK(has(n.get("/plots.js"), "Content-Type: text/javascript; charset=utf-8\r\n"));
  CHECK(has(n.get("/status"), "<h2>configuration</h2>"));

  // A client that connects and sends nothing (a browser's spare connection) holds no probe
  // up: /metrics and /readyz answer at once, not after its read timeout (5 s).
  int idle = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(n.http_port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(::connect(idle, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  auto start = std::chrono::steady_clock::now();
  CHECK(has(n.get("/metrics"), "gost_ready 1"));
  CHECK(status_of(n.get("/readyz")) == 200);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  ::close(idle);
}
