// Several gostd processes on one database: shards spread evenly, move on join and leave
// without errors visible to clients, are taken over after kill -9, and a paused node loses its
// leases. Requests to any node get the owner's answer.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gost/testing/held_locks.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/image_node.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/scheduled_api.hpp"
#include <google/protobuf/wrappers.pb.h>

#include "gost/core/shard_hash.hpp"
#include "gost/internal/v1/node_service.grpc.pb.h"
#include "gost/testing/tasks.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/events.pb.h"
#include "gost/v1/images.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

constexpr int shard_count = 16;

struct node {
  std::string id;
  std::string port_file;
  std::string addr;  ///< gRPC host:port
  int http_port = 0; ///< the admin HTTP listener (/metrics)
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::OfferService::Stub> stub;

  node(const std::string& node_id, const testing::temp_db& db, std::vector<std::string> extra = {})
    : id(node_id), port_file("/tmp/gostd-cluster-" + node_id + "-" + std::to_string(getpid())) {
    std::remove(port_file.c_str());
    std::vector<std::string> args{
      "--pg.dsn=" + db.dsn(),      "--node.id=" + id,
      "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
      "--caf.listen=127.0.0.1:0",  "--shard.count=" + std::to_string(shard_count),
      "--cluster.heartbeat=200ms", "--cluster.lease_timeout=2s",
      "--cluster.max_moves=8",     "--api.request_timeout=15s",
      "--shutdown.timeout=20s"};
    for (auto& e : extra) { // an extra flag replaces the default of the same key
      auto key = e.substr(0, e.find('=') + 1);
      args.erase(std::remove_if(args.begin(), args.end(),
                                [&](const std::string& a) { return a.rfind(key, 0) == 0; }),
                 args.end());
      args.push_back(e);
    }
    proc = std::make_unique<child_process>(GOSTD_PATH, args);
    int port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    addr = "127.0.0.1:" + std::to_string(port);
    stub = v1::OfferService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    http_port = testing::read_ports(*proc, port_file).second;
  }
  ~node() { std::remove(port_file.c_str()); }

  grpc::Status create(const std::string& sku, v1::Offer& out,
                      const std::string& seller = "cluster-seller") {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id(seller);
    req.mutable_offer()->set_external_id(sku);
    req.mutable_offer()->set_title("t");
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->CreateOffer(&ctx, req, &resp);
    out = resp.offer();
    return s;
  }
  grpc::Status update(const std::string& offer_id, const std::string& title, int64_t& version,
                      const std::string& seller = "cluster-seller") {
    v1::UpdateOfferRequest req;
    req.mutable_offer()->set_id(offer_id);
    req.mutable_offer()->set_seller_id(seller);
    req.mutable_offer()->set_title(title);
    // These fields only: the offer keeps its external id (a full replacement would clear it).
    req.mutable_update_mask()->add_paths("title");
    req.mutable_update_mask()->add_paths("seller_id");
    v1::UpdateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->UpdateOffer(&ctx, req, &resp);
    version = resp.offer().version();
    return s;
  }
  /// GetOffer by (seller, external id), the namespace empty.
  grpc::Status get_by_key(const std::string& seller, const std::string& external_id,
                          v1::Offer& out) {
    v1::GetOfferRequest req;
    req.mutable_ref()->mutable_key()->set_seller_id(seller);
    req.mutable_ref()->mutable_key()->set_external_id(external_id);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->GetOffer(&ctx, req, &resp);
    out = resp.offer();
    return s;
  }
  /// A seller's offers' ids through ListOffers, page after page of `page_size`, in order.
  std::vector<std::string> list_ids(const std::string& seller, int page_size) {
    std::vector<std::string> ids;
    std::string token;
    int pages = 0;
    do {
      v1::ListOffersRequest req;
      req.set_seller_id(seller);
      req.set_page_size(page_size);
      req.set_page_token(token);
      v1::ListOffersResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 20s);
      auto st = stub->ListOffers(&ctx, req, &resp);
      REQUIRE_MESSAGE(st.ok(), st.error_message());
      for (auto& o : resp.offers())
        ids.push_back(o.id());
      token = resp.next_page_token();
      REQUIRE(++pages < 1000);
    } while (!token.empty());
    return ids;
  }
  grpc::Status get(const std::string& offer_id, v1::Offer& out) {
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(offer_id);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->GetOffer(&ctx, req, &resp);
    out = resp.offer();
    return s;
  }
};

/// Live owners and how many shards each holds.
std::map<std::string, int> owners(const testing::temp_db& db) {
  std::map<std::string, int> out;
  auto text = db.scalar("SELECT coalesce(string_agg(owner || '=' || n, ' ' ORDER BY owner), '')"
                        " FROM (SELECT owner, count(*) AS n FROM shard_leases"
                        "       WHERE owner IS NOT NULL AND heartbeat_at > now() - interval '2 s'"
                        "       GROUP BY owner) o");
  size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find(' ', pos);
    auto item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    auto eq = item.find('=');
    out[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

/// Every shard (of the `shards` whose leases `db` holds) owned by exactly the given nodes, each
/// within one of an even share.
bool spread_over(const testing::temp_db& db, const std::vector<std::string>& ids,
                 int shards = shard_count) {
  auto o = owners(db);
  if (o.size() != ids.size())
    return false;
  int total = 0;
  for (auto& id : ids) {
    auto i = o.find(id);
    if (i == o.end())
      return false;
    auto share = shards / static_cast<int>(ids.size());
    if (i->second < share || i->second > share + 1)
      return false;
    total += i->second;
  }
  return total == shards;
}

std::string describe(const testing::temp_db& db) {
  std::string s;
  for (auto& [k, v] : owners(db))
    s += k + "=" + std::to_string(v) + " ";
  return s;
}

/// Clients updating offers through some nodes until stopped; every acknowledged version is
/// remembered, every failure counted with its message.
struct load {
  std::vector<std::string> ids;
  std::map<std::string, std::string> seller_of; ///< an offer's seller, when not cluster-seller
  std::vector<node*> via;
  std::atomic<bool> stop{false};
  std::atomic<int> acked{0};
  std::mutex m;
  std::map<std::string, int64_t> last_acked;
  std::vector<std::string> failures;
  /// Set: UNAVAILABLE answers (a retry advice, as during a shard move's fence) are counted in
  /// `unavailable` instead of `failures`.
  bool retry_unavailable = false;
  int unavailable = 0;
  std::vector<std::thread> threads;

  void start(int clients) {
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([this, c] {
        for (size_t i = static_cast<size_t>(c); !stop; i += 7) {
          auto& id = ids[i % ids.size()];
          std::vector<node*> targets;
          {
            std::lock_guard<std::mutex> guard{m};
            targets = via;
          }
          auto* n = targets[i % targets.size()];
          int64_t version = 0;
          auto seller = seller_of.count(id) != 0 ? seller_of.at(id) : "cluster-seller";
          auto s = n->update(id, "title " + std::to_string(i), version, seller);
          std::lock_guard<std::mutex> guard{m};
          if (s.ok()) {
            ++acked;
            auto& v = last_acked[id];
            v = std::max(v, version);
          } else if (retry_unavailable && s.error_code() == grpc::StatusCode::UNAVAILABLE) {
            ++unavailable;
          } else {
            failures.push_back(n->id + ": " + s.error_message());
          }
        }
      });
  }
  /// Waits (at most `timeout`) until `n` more updates were acknowledged: the load goes on
  /// through whatever happened just before.
  bool more_acked(int n, std::chrono::milliseconds timeout = 30s) {
    auto target = acked.load() + n;
    return testing::eventually(timeout, [&] { return acked.load() >= target; });
  }
  void use(std::vector<node*> nodes) {
    std::lock_guard<std::mutex> guard{m};
    via = std::move(nodes);
  }
  void finish() {
    stop = true;
    for (auto& t : threads)
      if (t.joinable())
        t.join();
  }
  /// A test that stopped at a failed REQUIRE: the clients stop too (not std::terminate).
  ~load() { finish(); }
  /// Every acknowledged update is in the database (nothing after it was lost).
  void check_durable(const testing::temp_db& db) { check_durable({&db}); }
  /// The same across the databases of shard groups: each offer in one of them.
  void check_durable(const std::vector<const testing::temp_db*>& dbs) {
    for (auto& [id, v] : last_acked) {
      int64_t stored = -1;
      for (auto* db : dbs)
        stored = std::max<int64_t>(
          stored, std::stoll(db->scalar("SELECT coalesce(max(version), -1) FROM offers"
                                        " WHERE offer_id = '"
                                        + id + "'")));
      CHECK_MESSAGE(stored >= v, id);
    }
  }
};

/// One run of the audit stage: where and under which lease an offer was processed.
struct audit_entry {
  std::string offer_id;
  std::string node_id;
  uint32_t shard = 0;
  int64_t epoch = 0;
  int64_t at_us = 0;
};

/// Every audit stage run recorded in the database, per offer in run order.
std::map<std::string, std::vector<audit_entry>> audit_trails(const testing::temp_db& db) {
  auto hex = db.scalar("SELECT string_agg(offer_id || '=' || encode(state, 'hex'), ',')"
                       " FROM stage_states WHERE stage_id = 'audit' AND state IS NOT NULL");
  std::map<std::string, std::vector<audit_entry>> out;
  std::stringstream rows{hex};
  std::string row;
  while (std::getline(rows, row, ',')) {
    auto eq = row.find('=');
    auto offer = row.substr(0, eq);
    std::string bytes;
    for (size_t i = eq + 1; i + 1 < row.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(row.substr(i, 2), nullptr, 16)));
    google::protobuf::Any any;
    v1::AuditTrail trail;
    REQUIRE(any.ParseFromString(bytes));
    REQUIRE(any.UnpackTo(&trail));
    auto& entries = out[offer];
    for (auto& e : trail.entries())
      entries.push_back({offer, e.node_id(), e.shard(), e.epoch(), e.at_us()});
  }
  return out;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::vector<std::string> create_offers(node& n, int count) {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    v1::Offer o;
    auto s = n.create("sku-" + std::to_string(i), o);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    ids.push_back(o.id());
  }
  return ids;
}

} // namespace

TEST_CASE(
  "nodes share the shards evenly; a join and a graceful leave move them without client errors") {
  testing::temp_db db;
  node n1{"n1", db};
  node n2{"n2", db};
  node n3{"n3", db};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2", "n3"});
                                      }),
                  describe(db));
  auto ids = create_offers(n1, 60);
  load l;
  l.ids = ids;
  l.use({&n1, &n2, &n3});
  l.start(4);
  REQUIRE(l.more_acked(20)); // the load runs before n4 joins

  node n4{"n4", db};
  l.use({&n1, &n2, &n3, &n4});
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return spread_over(db, {"n1", "n2", "n3", "n4"});
                                    }),
                describe(db));
  {
    // The console shows the members and the leases.
    child_process nodes{GOSTCTL_PATH, {"--addr", n3.addr, "nodes"}};
    REQUIRE(nodes.wait(30s) == 0);
    auto out = nodes.output();
    for (auto id : {"n1", "n2", "n3", "n4"})
      CHECK(out.find(std::string{id} + " ") != std::string::npos);
    CHECK(out.find("alive") != std::string::npos);
    child_process shards{GOSTCTL_PATH, {"--addr", n3.addr, "shards"}};
    REQUIRE(shards.wait(30s) == 0);
    CHECK(shards.output().find("16 shard(s)") != std::string::npos);
  }
  CHECK(l.more_acked(20)); // and goes on with n4 serving

  // n2 leaves: clients stop using it first (as a load balancer would), then SIGTERM.
  l.use({&n1, &n3, &n4});
  n2.proc->signal(SIGTERM);
  CHECK_MESSAGE(n2.proc->wait(30s) == 0, n2.proc->output());
  CHECK(n2.proc->output().find("all shards handed off") != std::string::npos);
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return spread_over(db, {"n1", "n3", "n4"});
                                    }),
                describe(db));
  CHECK(l.more_acked(20)); // and goes on after n2 left
  l.finish();

  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  l.check_durable(db);
  // Any node answers for any offer, with the owner's answer.
  for (auto& id : ids) {
    v1::Offer a, b, c;
    REQUIRE(n1.get(id, a).ok());
    REQUIRE(n3.get(id, b).ok());
    REQUIRE(n4.get(id, c).ok());
    CHECK(a.version() == b.version());
    CHECK(b.version() == c.version());
    CHECK(a.title() == c.title());
  }
  // The same for StateService: a compare-and-set through one node is seen through the others
  // (two thirds of the offers live on another node than the one asked).
  auto state_stub = [](const node& n) {
    return v1::StateService::NewStub(
      grpc::CreateChannel(n.addr, grpc::InsecureChannelCredentials()));
  };
  auto s1 = state_stub(n1);
  auto s3 = state_stub(n3);
  auto s4 = state_stub(n4);
  for (size_t i = 0; i < 12; ++i) {
    auto& id = ids[i];
    CAPTURE(id);
    google::protobuf::StringValue v;
    v.set_value("reviewed " + id);
    v1::UpdateStateRequest u;
    u.set_offer_id(id);
    u.set_stage_id("expire");
    u.mutable_state()->PackFrom(v);
    v1::UpdateStateResponse ur;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      auto st = (i % 2 == 0 ? s1 : s4)->Update(&ctx, u, &ur);
      REQUIRE_MESSAGE(st.ok(), st.error_message());
    }
    CHECK(ur.updated());
    CHECK(ur.version() == 1);
    for (auto* stub : {s1.get(), s3.get(), s4.get()}) {
      v1::ReadStateRequest r;
      r.set_offer_id(id);
      r.set_stage_id("expire");
      v1::ReadStateResponse rr;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      REQUIRE(stub->Read(&ctx, r, &rr).ok());
      CHECK(rr.version() == 1);
      google::protobuf::StringValue back;
      CHECK(rr.state().UnpackTo(&back));
      CHECK(back.value() == v.value());
    }
    v1::UpdateStateResponse stale; // the same expected version again, through another node
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    REQUIRE(s3->Update(&ctx, u, &stale).ok());
    CHECK_FALSE(stale.updated());
    CHECK(stale.version() == 1);
  }
}

TEST_CASE("kill -9: the dead node's shards are owned again well before the lease timeout and "
          "nothing acknowledged is lost") {
  testing::temp_db db;
  // The audit stage records, every 200 ms per offer, the node and lease epoch of its run. The
  // lease timeout is long (10 s): a takeover much sooner is the liveness lock's doing (the dead
  // process's connection closed), not the lease timeout's.
  std::vector<std::string> flags{"--stages.audit.enabled=true", "--stages.audit.every=200ms",
                                 "--cluster.lease_timeout=10s"};
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  node n3{"n3", db, flags};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2", "n3"});
                                      }),
                  describe(db));
  auto epochs_before =
    db.scalar("SELECT string_agg(epoch::text, ',' ORDER BY shard) FROM shard_leases");
  auto ids = create_offers(n1, 60);
  load l;
  l.ids = ids;
  l.use({&n1, &n2});
  l.start(4);
  REQUIRE(l.more_acked(20)); // the load runs before the kill

  n3.proc->signal(SIGKILL);
  CHECK(n3.proc->wait(10s) == 128 + SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  auto killed_us = now_us();
  REQUIRE_MESSAGE(testing::eventually(20s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2"});
                                      }),
                  describe(db));
  auto took = std::chrono::steady_clock::now() - t0;
  MESSAGE("shards owned again after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 5s); // half the lease timeout
  CHECK_MESSAGE(n1.proc->output().find("lease acquired") != std::string::npos, n1.proc->output());
  CHECK(l.more_acked(20)); // updates go on through the new owners
  l.finish();
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  l.check_durable(db);
  // Epochs only grow: every shard's epoch now is at least the one before.
  auto epochs_after =
    db.scalar("SELECT string_agg(epoch::text, ',' ORDER BY shard) FROM shard_leases");
  std::stringstream before{epochs_before}, after{epochs_after};
  std::string a, b;
  int moved = 0;
  while (std::getline(before, a, ',') && std::getline(after, b, ',')) {
    CHECK(std::stoll(b) >= std::stoll(a));
    moved += std::stoll(b) > std::stoll(a) ? 1 : 0;
  }
  CHECK(moved >= shard_count / 3); // at least the dead node's shards moved

  // The audit trails: no offer was processed under two leases at once, and the timers of the
  // dead node's offers kept firing on the new owners.
  auto trails = audit_trails(db);
  std::map<std::pair<uint32_t, int64_t>, std::set<std::string>> nodes_of_lease;
  int moved_trails = 0, fired_after_kill = 0;
  for (auto& [offer, entries] : trails) {
    std::map<uint32_t, int64_t> last_epoch;
    std::set<std::string> nodes;
    bool fired = false;
    for (auto& e : entries) {
      CHECK(e.epoch > 0);
      auto& seen = last_epoch[e.shard];
      CHECK_MESSAGE(e.epoch >= seen, "an older lease ran after a newer one");
      seen = e.epoch;
      nodes_of_lease[{e.shard, e.epoch}].insert(e.node_id);
      nodes.insert(e.node_id);
      fired = fired || e.at_us > killed_us;
    }
    moved_trails += nodes.count("n3") != 0 && nodes.size() > 1 ? 1 : 0;
    fired_after_kill += fired ? 1 : 0;
  }
  CHECK(trails.size() == 60);
  for (auto& [lease, holders] : nodes_of_lease)
    CHECK_MESSAGE(holders.size() == 1,
                  "shard " << lease.first << " epoch " << lease.second << " ran on several nodes");
  CHECK(moved_trails > 0); // offers of the killed node were audited by another one later
  CHECK(fired_after_kill
        == static_cast<int>(trails.size())); // every offer's timer fired again after the kill
}

TEST_CASE("a node restarted with the same id after kill -9 takes its shards back at once") {
  testing::temp_db db;
  std::vector<std::string> flags{"--cluster.lease_timeout=10s"};
  std::vector<std::string> ids;
  {
    node n1{"n1", db, flags};
    REQUIRE_MESSAGE(testing::eventually(30s, [&] { return spread_over(db, {"n1"}); }),
                    describe(db));
    ids = create_offers(n1, 20);
    n1.proc->signal(SIGKILL);
    CHECK(n1.proc->wait(10s) == 128 + SIGKILL);
  }
  // The old incarnation's leases are still fresh (10 s): only the liveness lock, free since
  // its process died, lets the new one take them now.
  auto t0 = std::chrono::steady_clock::now();
  node again{"n1", db, flags};
  for (auto& id : ids) {
    v1::Offer o;
    auto s = again.get(id, o);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
  }
  auto took = std::chrono::steady_clock::now() - t0;
  MESSAGE("restarted and served every offer after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 5s);
  CHECK(spread_over(db, {"n1"}));
}

TEST_CASE("a node frozen in the middle of a commit does not hold its shards: they serve elsewhere "
          "by the lease timeout") {
  testing::temp_db db;
  std::vector<std::string> flags{"--stages.audit.enabled=true", "--stages.audit.every=100ms"};
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2"});
                                      }),
                  describe(db));
  auto ids = create_offers(n1, 60);
  load l;
  l.ids = ids;
  l.use({&n1}); // n2's offers through n1: forwarded, so n2 commits all the time
  l.start(4);
  REQUIRE(l.more_acked(20));

  // Pause n2 until one of its transactions holding a lease row is caught half-way (a write
  // batch's FOR SHARE, or a heartbeat's UPDATE).
  auto in_commit = [&] {
    return db.scalar("SELECT count(*) FROM pg_stat_activity a JOIN pg_locks k ON k.pid = a.pid"
                     " WHERE a.application_name = 'gost/n2' AND a.xact_start IS NOT NULL"
                     "   AND k.relation = 'shard_leases'::regclass")
           != "0";
  };
  bool caught = false;
  int64_t stopped_us = 0;
  for (int attempt = 0; attempt < 40 && !caught; ++attempt) {
    n2.proc->signal(SIGSTOP);
    stopped_us = now_us();
    caught = in_commit();
    if (!caught) {
      n2.proc->signal(SIGCONT);
      // Not a wait for anything: the next pause falls at another point of n2's work.
      std::this_thread::sleep_for(std::chrono::milliseconds{37 + 11 * attempt % 60});
    }
  }
  REQUIRE_MESSAGE(caught, "no transaction of n2 holding a lease row was caught in 40 pauses");
  auto held =
    db.scalar("SELECT string_agg(shard || ':' || epoch, ',') FROM shard_leases WHERE owner = 'n2'");
  std::map<uint32_t, int64_t> paused_epoch;
  {
    std::stringstream ss{held};
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto c = item.find(':');
      paused_epoch[static_cast<uint32_t>(std::stoul(item.substr(0, c)))] =
        std::stoll(item.substr(c + 1));
    }
  }
  REQUIRE(!paused_epoch.empty());
  // Lease timeout 2 s, heartbeat 200 ms: every shard is n1's within the lease timeout plus a
  // heartbeat and some slack, although n2 stays frozen, its transaction open.
  auto t0 = std::chrono::steady_clock::now();
  bool moved = testing::eventually(5s, [&] { return spread_over(db, {"n1"}); });
  auto took = std::chrono::steady_clock::now() - t0;
  MESSAGE("frozen owner's shards served elsewhere after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK_MESSAGE(moved, describe(db));
  // Every offer answers through n1 while n2 is still frozen.
  for (auto& id : ids) {
    v1::Offer o;
    auto s = n1.get(id, o);
    CHECK_MESSAGE(s.ok(), s.error_message());
  }
  n2.proc->signal(SIGCONT);
  CHECK_MESSAGE(
    testing::eventually(
      20s, [&] { return n2.proc->output().find("lease taken over") != std::string::npos; }),
    n2.proc->output());
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return spread_over(db, {"n1", "n2"});
                                    }),
                describe(db));
  CHECK(l.more_acked(20));
  l.finish();
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  l.check_durable(db);
  // The resumed node wrote nothing under the leases it lost: every run recorded after the
  // pause on n2 is under a newer lease than the one it held when frozen.
  for (auto& [offer, entries] : audit_trails(db))
    for (auto& e : entries)
      if (e.node_id == "n2" && e.at_us > stopped_us) {
        auto p = paused_epoch.find(e.shard);
        CHECK_MESSAGE((p == paused_epoch.end() || e.epoch > p->second),
                      "n2 ran shard " << e.shard << " at its old epoch " << e.epoch
                                      << " after the pause");
      }
}

TEST_CASE("a paused node loses its leases; awake again it serves the new owner's data, not its "
          "stale copies") {
  testing::temp_db db;
  node n1{"n1", db};
  node n2{"n2", db};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2"});
                                      }),
                  describe(db));
  auto ids = create_offers(n1, 40);
  n2.proc->signal(SIGSTOP);
  // Past the lease timeout n1 takes every shard, at new epochs, and serves them.
  REQUIRE_MESSAGE(testing::eventually(20s, [&] { return spread_over(db, {"n1"}); }), describe(db));
  std::map<std::string, int64_t> acked;
  for (auto& id : ids) {
    int64_t v = 0;
    auto s = n1.update(id, "while n2 slept", v);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    acked[id] = v;
  }
  n2.proc->signal(SIGCONT);
  // n2 notices at its next heartbeat that its leases were taken, stops those shards, and
  // then gets an even share back by hand-off.
  CHECK_MESSAGE(
    testing::eventually(
      20s, [&] { return n2.proc->output().find("lease taken over") != std::string::npos; }),
    n2.proc->output());
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return spread_over(db, {"n1", "n2"});
                                    }),
                describe(db));
  for (auto& [id, v] : acked) {
    v1::Offer o;
    REQUIRE(n2.get(id, o).ok());
    CHECK(o.version() == v);
    CHECK(o.title() == "while n2 slept");
  }
}

namespace {

/// A CA and a node certificate signed by it (subject alternative name gost-node), made with
/// the openssl command line in `dir`: ca.pem, node.pem, node.key.
void make_certs(const std::string& dir) {
  auto script =
    "set -e; cd '" + dir
    + "';"
      " openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2"
      "   -subj '/CN=gost test CA' 2>/dev/null;"
      " openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj '/CN=gost-node'"
      "   2>/dev/null;"
      " printf 'subjectAltName=DNS:gost-node\\n' > ext.cnf;"
      " openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem"
      "   -days 2 -extfile ext.cnf 2>/dev/null";
  REQUIRE(std::system(("mkdir -p '" + dir + "' && sh -c \"" + script + "\"").c_str()) == 0);
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// NodeService.Forward(get id) straight at a node's link port with the given credentials.
grpc::Status probe(const std::string& addr, std::shared_ptr<grpc::ChannelCredentials> creds,
                   const std::string& id) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("gost-node");
  auto stub = internal::v1::NodeService::NewStub(grpc::CreateCustomChannel(addr, creds, args));
  internal::v1::ForwardRequest req;
  req.set_get(id);
  internal::v1::ForwardResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  return stub->Forward(&ctx, req, &resp);
}

} // namespace

TEST_CASE(
  "node links with mutual TLS: forwarding works, peers without a valid certificate are refused") {
  auto dir = "/tmp/gost-tls-" + std::to_string(getpid());
  make_certs(dir + "/good");
  make_certs(dir + "/rogue"); // another CA: valid-looking, but not ours
  auto tls = [&](const std::string& d) {
    return std::vector<std::string>{"--cluster.tls_cert=" + d + "/node.pem",
                                    "--cluster.tls_key=" + d + "/node.key",
                                    "--cluster.tls_ca=" + d + "/ca.pem"};
  };
  testing::temp_db db;
  node n1{"t1", db, tls(dir + "/good")};
  node n2{"t2", db, tls(dir + "/good")};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"t1", "t2"});
                                      }),
                  describe(db));
  CHECK(n1.proc->output().find("tls=mutual") != std::string::npos);
  // Half of these go over a TLS link to the other node, and are read back through the other.
  auto ids = create_offers(n1, 20);
  for (auto& id : ids) {
    v1::Offer got;
    auto s = n2.get(id, got);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    CHECK(got.id() == id);
  }

  auto link = "127.0.0.1:" + db.scalar("SELECT caf_port FROM nodes WHERE node_id = 't1'");
  auto good = [&](const std::string& d) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = slurp(dir + "/good/ca.pem");
    o.pem_private_key = slurp(d + "/node.key");
    o.pem_cert_chain = slurp(d + "/node.pem");
    return grpc::SslCredentials(o);
  };
  // A peer with a certificate of our CA is served.
  CHECK(probe(link, good(dir + "/good"), ids.front()).ok());
  // No fallback to plaintext, and a certificate of another CA is refused.
  CHECK(probe(link, grpc::InsecureChannelCredentials(), ids.front()).error_code()
        == grpc::StatusCode::UNAVAILABLE);
  CHECK_FALSE(probe(link, good(dir + "/rogue"), ids.front()).ok());
  {
    grpc::SslCredentialsOptions no_client_cert;
    no_client_cert.pem_root_certs = slurp(dir + "/good/ca.pem");
    CHECK_FALSE(probe(link, grpc::SslCredentials(no_client_cert), ids.front()).ok());
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("a join is noticed at once through LISTEN/NOTIFY, not at the next heartbeat") {
  // Heartbeats every 10 s: without notifications the first node would see the second one (and
  // the second the leases handed to it) only at their next heartbeats, seconds later.
  testing::temp_db db;
  std::vector<std::string> slow{"--cluster.heartbeat=10s", "--cluster.lease_timeout=30s",
                                "--cluster.max_moves=16"};
  node n1{"l1", db, slow};
  REQUIRE_MESSAGE(testing::eventually(30s, [&] { return spread_over(db, {"l1"}); }), describe(db));
  // n1 listens for cluster changes (its session connects on a thread of its own and holds
  // the node's liveness lock once it listens): a join before that would only be seen at n1's
  // next heartbeat.
  REQUIRE(testing::eventually(10s, [&] {
    return db.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     " AND application_name = 'gost/l1/live'")
             == "1"
           && db.scalar("SELECT locked_since IS NOT NULL FROM nodes WHERE node_id = 'l1'") == "t";
  }));
  auto t0 = std::chrono::steady_clock::now();
  node n2{"l2", db, slow};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"l1", "l2"});
                                      }),
                  describe(db));
  auto took =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  MESSAGE("shards spread over both nodes after " << took.count() << " ms");
  CHECK(took < 5s);
  // n1 heard of n2 through the notification (its own heartbeat was seconds away). n2 may
  // have found the handed-off leases in its first round already, so only n1 is checked.
  CHECK(n1.proc->output().find("cluster change notified") != std::string::npos);
}

TEST_CASE("offer inspection tells residency and mailbox from the owner, asked on any node") {
  testing::temp_db db;
  node n1{"i1", db};
  node n2{"i2", db};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"i1", "i2"});
                                      }),
                  describe(db));
  // Offers until each node owns at least one of them.
  std::map<std::string, std::string> owner_of; // offer id -> owning node
  for (int i = 0; i < 40; ++i) {
    v1::Offer o;
    REQUIRE(n1.create("inspect-" + std::to_string(i), o).ok());
    auto owner =
      db.scalar("SELECT owner FROM shard_leases WHERE shard = "
                + db.scalar("SELECT shard FROM offers WHERE offer_id = '" + o.id() + "'"));
    owner_of[o.id()] = owner;
    std::set<std::string> seen;
    for (auto& [id, n] : owner_of)
      seen.insert(n);
    if (seen.size() == 2)
      break;
  }
  std::set<std::string> owners_seen;
  for (auto& [id, n] : owner_of)
    owners_seen.insert(n);
  REQUIRE(owners_seen.size() == 2);
  for (auto* asked : {&n1, &n2}) {
    auto admin = v1::AdminService::NewStub(
      grpc::CreateChannel(asked->addr, grpc::InsecureChannelCredentials()));
    for (auto& [id, owner] : owner_of) {
      v1::Offer got;
      REQUIRE(asked->get(id, got).ok()); // the owner's actor is resident after this
      v1::InspectOfferRequest req;
      req.set_offer_id(id);
      v1::InspectOfferResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 20s);
      auto s = admin->InspectOffer(&ctx, req, &resp);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
      INFO("asked " << asked->id << " about " << id << " owned by " << owner);
      CHECK(resp.found());
      CHECK(resp.resident());
      CHECK(resp.mailbox() >= 0);
    }
  }
}

TEST_CASE("a write forwarded to a slow owner is answered once, applied once (one true answer)") {
  testing::temp_db db;
  node a{"a", db};
  node b{"b", db};
  REQUIRE(testing::eventually(20s, [&] {
    auto o = owners(db);
    return o.size() == 2 && o["a"] + o["b"] == shard_count;
  }));
  // An offer owned by b, changed through a: every call is forwarded.
  std::string id;
  for (int i = 0; id.empty() && i < 64; ++i) {
    v1::Offer o;
    REQUIRE(a.create("slow-" + std::to_string(i), o).ok());
    if (db.scalar("SELECT l.owner FROM shard_leases l JOIN offers o ON o.shard = l.shard"
                  " WHERE o.offer_id = '"
                  + o.id() + "'")
        == "b")
      id = o.id();
  }
  REQUIRE_FALSE(id.empty());
  auto version_of = [&] {
    return db.scalar("SELECT version FROM offers WHERE offer_id = '" + id + "'");
  };

  SUBCASE("UpdateOffer with an expected version") {
    // The owner's commit waits 4 s on a row lock: longer than a forwarded call's 2 s attempt,
    // after which the forwarding node sends the call again (with the same request id).
    auto lock =
      testing::hold_locks(db, "SELECT 1 FROM offers WHERE offer_id = '" + id + "' FOR UPDATE", 4s,
                          "/tmp/gost-lock-" + std::to_string(getpid()));
    v1::UpdateOfferRequest req;
    req.mutable_offer()->set_id(id);
    req.mutable_offer()->set_seller_id("cluster-seller");
    req.mutable_offer()->set_title("once");
    req.set_expected_version(1);
    v1::UpdateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = a.stub->UpdateOffer(&ctx, req, &resp);
    CHECK_MESSAGE(s.ok(), s.error_code() << " " << s.error_message());
    CHECK(resp.offer().version() == 2);
    CHECK(resp.offer().title() == "once");
    CHECK(lock->wait(10s) == 0);
    CHECK(version_of() == "2"); // applied once: a second application would be version 3
    // Every forwarded write got a request id: the create and this update, each once.
    CHECK(db.scalar("SELECT count(*) FROM offer_requests WHERE offer_id = '" + id + "'") == "2");
  }
  SUBCASE("StateService.Update compare-and-set") {
    auto states =
      v1::StateService::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
    google::protobuf::Int64Value v;
    auto update = [&](int64_t value, int64_t expected, v1::UpdateStateResponse& resp) {
      v.set_value(value);
      v1::UpdateStateRequest req;
      req.set_offer_id(id);
      req.set_stage_id("expire");
      req.mutable_state()->PackFrom(v);
      req.set_expected_version(expected);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 20s);
      return states->Update(&ctx, req, &resp);
    };
    v1::UpdateStateResponse first;
    REQUIRE(update(1, 0, first).ok());
    REQUIRE(first.updated());
    auto lock = testing::hold_locks(db,
                                    "SELECT 1 FROM stage_states WHERE offer_id = '" + id
                                      + "' AND stage_id = 'expire' FOR UPDATE",
                                    4s, "/tmp/gost-lock-" + std::to_string(getpid()));
    v1::UpdateStateResponse second;
    auto s = update(2, 1, second);
    CHECK_MESSAGE(s.ok(), s.error_message());
    CHECK(second.updated()); // the caller's write applied, and so answered
    CHECK(second.version() == 2);
    CHECK(lock->wait(10s) == 0);
    CHECK(db.scalar("SELECT state_version FROM stage_states WHERE offer_id = '" + id
                    + "' AND stage_id = 'expire'")
          == "2");
  }
  SUBCASE("CreateOffer retried with its request id is stored once, answered the same") {
    auto create = [&](v1::CreateOfferResponse& resp) {
      v1::CreateOfferRequest req;
      req.mutable_offer()->set_seller_id("retrying-seller");
      req.mutable_offer()->set_title("once");
      req.set_request_id("create-1");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 20s);
      return a.stub->CreateOffer(&ctx, req, &resp);
    };
    v1::CreateOfferResponse r1, r2;
    REQUIRE(create(r1).ok());
    auto s = create(r2);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    CHECK(r2.offer().id() == r1.offer().id());
    CHECK(r2.offer().version() == 1);
    CHECK(db.scalar("SELECT count(*) FROM offers WHERE seller_id = 'retrying-seller'") == "1");
  }
}

TEST_CASE("gostctl drain hands a node's shards away under load without client errors; the "
          "drained node keeps serving and takes none until undrain") {
  testing::temp_db db;
  node n1{"n1", db};
  node n2{"n2", db};
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"n1", "n2"});
                                      }),
                  describe(db));
  auto ids = create_offers(n1, 40);
  load l;
  l.ids = ids;
  l.use({&n1, &n2}); // clients keep calling the drained node too: it forwards
  l.start(4);
  REQUIRE(l.more_acked(20));

  // Asked at n1, for n2: gostctl finds n2's address among the members.
  child_process drain{GOSTCTL_PATH, {"--addr", n1.addr, "--who", "e2e", "drain", "n2"}};
  REQUIRE_MESSAGE(drain.wait(90s) == 0, drain.output());
  CHECK_MESSAGE(drain.output().find("node n2 drained: 8 shard(s) handed off") != std::string::npos,
                drain.output());
  CHECK(owners(db) == std::map<std::string, int>{{"n1", shard_count}});
  CHECK(n2.proc->output().find("node drained node=n2 handed_off=8 by=e2e") != std::string::npos);
  CHECK(l.more_acked(40)); // through both nodes, n2 forwarding to n1
  // Several heartbeats later n2 still holds nothing, and says it is leaving: its row's
  // heartbeat_at moved on three times, each heartbeat followed by its look at the leases.
  std::set<std::string> beats;
  REQUIRE(testing::eventually(20s, [&] {
    beats.insert(db.scalar("SELECT heartbeat_at::text FROM nodes WHERE node_id = 'n2'"));
    return beats.size() >= 4;
  }));
  CHECK(owners(db).count("n2") == 0);
  child_process nodes{GOSTCTL_PATH, {"--addr", n2.addr, "nodes"}};
  REQUIRE(nodes.wait(30s) == 0);
  CHECK_MESSAGE(nodes.output().find("leaving") != std::string::npos, nodes.output());

  // The last node taking shards cannot be drained: nobody would take them.
  child_process refused{GOSTCTL_PATH, {"--addr", n1.addr, "drain"}};
  CHECK(refused.wait(30s) == 1);
  CHECK_MESSAGE(refused.output().find("no other node is alive to take the shards of node n1")
                  != std::string::npos,
                refused.output());
  CHECK(owners(db) == std::map<std::string, int>{{"n1", shard_count}});
  // Another node's id at this node is refused with what to do.
  v1::DrainNodeRequest other;
  other.set_node_id("n1");
  v1::DrainNodeResponse ignored;
  grpc::ClientContext ctx;
  auto admin2 =
    v1::AdminService::NewStub(grpc::CreateChannel(n2.addr, grpc::InsecureChannelCredentials()));
  auto st = admin2->DrainNode(&ctx, other, &ignored);
  CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(st.error_message().find("this is node n2, not n1") != std::string::npos);

  child_process undrain{GOSTCTL_PATH, {"--addr", n2.addr, "undrain"}};
  REQUIRE_MESSAGE(undrain.wait(30s) == 0, undrain.output());
  CHECK(undrain.output().find("node n2 undrained") != std::string::npos);
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return spread_over(db, {"n1", "n2"});
                                    }),
                describe(db));
  CHECK(l.more_acked(20));
  l.finish();
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  l.check_durable(db);
}

TEST_CASE("an offer owned by the other node: described and traced through either node, and the "
          "trace follows the offer when its owner leaves") {
  testing::temp_db db;
  node n1{"t1", db};
  auto n2 = std::make_unique<node>("t2", db);
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(db, {"t1", "t2"});
                                      }),
                  describe(db));
  // An offer whose shard t2 owns, created through t1 (forwarded).
  std::string id;
  for (int i = 0; i < 60 && id.empty(); ++i) {
    v1::Offer o;
    REQUIRE(n1.create("trace-" + std::to_string(i), o).ok());
    auto owner =
      db.scalar("SELECT owner FROM shard_leases WHERE shard = "
                + db.scalar("SELECT shard FROM offers WHERE offer_id = '" + o.id() + "'"));
    if (owner == "t2")
      id = o.id();
  }
  REQUIRE_FALSE(id.empty());
  auto admin =
    v1::AdminService::NewStub(grpc::CreateChannel(n1.addr, grpc::InsecureChannelCredentials()));

  // Described through t1: the owner's actor, its events.
  v1::InspectOfferRequest ireq;
  ireq.set_offer_id(id);
  v1::InspectOfferResponse ir;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = admin->InspectOffer(&ctx, ireq, &ir);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
  }
  INFO(ir.DebugString());
  CHECK(ir.resident());
  CHECK(ir.owner() == "t2");
  CHECK(ir.epoch() >= 1);
  REQUIRE(ir.recent_size() >= 1);
  CHECK(ir.recent(0).kind() == "create");
  CHECK(ir.recent(0).source() == "api");
  CHECK(ir.recent(0).node() == "t2");
  CHECK(ir.recent(0).version() == 1);

  // Traced through t1 while t2 owns it.
  grpc::ClientContext tctx;
  v1::TraceRequest treq;
  treq.set_offer_id(id);
  treq.set_for_ms(120'000);
  auto reader = admin->Trace(&tctx, treq);
  std::mutex m;
  std::vector<v1::TraceEvent> events;
  std::thread t{[&] {
    v1::TraceEvent e;
    while (reader->Read(&e)) {
      std::lock_guard<std::mutex> guard{m};
      events.push_back(e);
    }
  }};
  struct canceller {
    grpc::ClientContext& ctx;
    std::thread& t;
    ~canceller() {
      ctx.TryCancel();
      if (t.joinable())
        t.join();
    }
  } stop_trace{tctx, t};
  auto seen = [&](const std::string& kind, const std::string& node_id) {
    std::lock_guard<std::mutex> guard{m};
    for (auto& e : events)
      if (e.kind() == kind && e.node() == node_id)
        return true;
    return false;
  };
  int64_t version = 0;
  int round = 0;
  // The owner subscribes once t1's stream reaches it: update until an event comes through.
  REQUIRE(testing::eventually(30s, [&] {
    REQUIRE(n1.update(id, "traced " + std::to_string(++round), version).ok());
    return seen("update", "t2");
  }));

  // t2 leaves: its shards move to t1 (hand-off); the trace goes on from the new owner.
  n2->proc->signal(SIGTERM);
  auto rc = n2->proc->wait(60s);
  REQUIRE_MESSAGE(rc == 0, n2->proc->output());
  REQUIRE(testing::eventually(30s, [&] { return seen("owner", "t1"); }));
  REQUIRE(testing::eventually(30s, [&] {
    REQUIRE(n1.update(id, "after the move " + std::to_string(++round), version).ok());
    return seen("update", "t1");
  }));
  std::lock_guard<std::mutex> guard{m};
  for (auto& e : events)
    if (e.kind() == "update")
      CHECK(e.offer_id() == id);
}

namespace {

/// A catalog `db` (made by a first node's start) declaring group 1, `east`, holding the upper
/// half of the shards, and the groups `empty` (2, 3, ...) holding none. Answers the flags of
/// these tests' nodes: the audit stage on, the parts a test does not look at off (scheduled
/// actions and images have cases of their own below; tasks stay on, as in production).
std::vector<std::string>
declare_groups(const testing::temp_db& db, const testing::temp_db& east,
               const std::vector<std::pair<std::string, const testing::temp_db*>>& empty = {}) {
  {
    node first{"n0", db}; // the catalog's schema and installation
    first.proc->signal(SIGTERM);
    REQUIRE(first.proc->wait(30s) == 0);
  }
  constexpr int half = shard_count / 2;
  std::string groups = "(1, 'east', '" + east.dsn() + "')";
  int id = 2;
  for (auto& [name, d] : empty)
    groups += ", (" + std::to_string(id++) + ", '" + name + "', '" + d->dsn() + "')";
  db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES " + groups);
  db.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, "
            + std::to_string(half - 1) + ", 0), (" + std::to_string(half) + ", "
            + std::to_string(shard_count - 1) + ", 1)");
  // The first node wrote lease rows for every shard; a group's database keeps its own shards'
  // (as when the groups are declared before any node starts): the writers' home checks read
  // a lease row as "this shard's rows are here".
  db.scalar("DELETE FROM shard_leases WHERE shard >= " + std::to_string(half));
  return {"--stages.audit.enabled=true", "--stages.audit.every=200ms",
          "--cluster.lease_timeout=10s", "--scheduled.enabled=false", "--images.enabled=false"};
}

/// 60 offers of six sellers created through `n`, in the load `l` (ids and sellers).
void create_seller_offers(node& n, load& l) {
  for (int i = 0; i < 60; ++i) {
    v1::Offer o;
    auto seller = "seller-" + std::to_string(i % 6);
    auto s = n.create("sku-" + std::to_string(i), o, seller);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    l.ids.push_back(o.id());
    l.seller_of[o.id()] = seller;
  }
}

/// Seller k's offer sku-k looked up by key through `n`: its id in `l`.
void check_by_key(node& n, const load& l, int k) {
  auto seller = "seller-" + std::to_string(k);
  v1::Offer o;
  auto st = n.get_by_key(seller, "sku-" + std::to_string(k), o);
  CHECK_MESSAGE(st.ok(), seller << ": " << st.error_message());
  CHECK(o.id() == l.ids[static_cast<size_t>(k)]);
}

/// Both nodes hold an even share of each group's leases, in the group's own database.
void await_group_spread(const testing::temp_db& db, const testing::temp_db& east) {
  constexpr int half = shard_count / 2;
  REQUIRE_MESSAGE(
    testing::eventually(
      30s,
      [&] {
        return spread_over(db, {"n1", "n2"}, half) && spread_over(east, {"n1", "n2"}, half);
      }),
    describe(db) << "| " << describe(east));
}

/// An offer a split left outside its seller's home group (a stray, ADR 0023 "Splits"), made
/// as a split's fence makes it: the offer's row in the database of its shard's group (`east`),
/// its key claimed and its seller spread in the home database (`home`). The readers through
/// either node: GetOffer by key finds it through the claim, ListOffers merges east's page into
/// the home page (paged too), a create of its key is ALREADY_EXISTS, a change of its key is
/// refused where it lives (FAILED_PRECONDITION), a change keeping the key is served.
void check_stray(node& n1, node& n2, const testing::temp_db& home, const testing::temp_db& east,
                 const std::string& seller, uint32_t east_first) {
  std::string id;
  for (int i = 0; id.empty(); ++i)
    if (shard_of("stray-" + std::to_string(i), shard_count) >= east_first)
      id = "stray-" + std::to_string(i);
  v1::Offer o;
  o.set_id(id);
  o.set_seller_id(seller);
  o.set_external_id("sku-stray");
  o.set_title("left behind");
  o.set_version(1);
  std::string hex;
  for (unsigned char c : o.SerializeAsString()) {
    constexpr const char* digits = "0123456789abcdef";
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  east.scalar("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version,"
              " body) VALUES ('"
              + id + "', " + std::to_string(shard_of(id, shard_count)) + ", '" + seller
              + "', '', 'sku-stray', 1, decode('" + hex + "', 'hex'))");
  home.scalar("INSERT INTO offer_keys (seller_id, namespace, external_id, offer_id) VALUES ('"
              + seller + "', '', 'sku-stray', '" + id + "')");
  home.scalar("INSERT INTO seller_spread (seller_id, stray_shard) VALUES ('" + seller + "', "
              + std::to_string(shard_of(id, shard_count)) + ")");
  auto at_home = home.scalar("SELECT string_agg(offer_id, ',' ORDER BY offer_id COLLATE \"C\")"
                             " FROM offers WHERE seller_id = '"
                             + seller + "'");
  for (auto* n : {&n1, &n2}) {
    // By key: the claim's id; by id: the owner of its shard loads it from east.
    v1::Offer got;
    auto st = n->get_by_key(seller, "sku-stray", got);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(got.id() == id);
    CHECK(got.title() == "left behind");
    // Listed with the seller's offers at home, in id byte order, in pages of 4.
    std::string listed;
    for (auto& x : n->list_ids(seller, 4))
      listed += (listed.empty() ? "" : ",") + x;
    std::vector<std::string> want;
    std::stringstream in{at_home + "," + id};
    for (std::string x; std::getline(in, x, ',');)
      want.push_back(x);
    std::sort(want.begin(), want.end());
    std::string expected;
    for (auto& x : want)
      expected += (expected.empty() ? "" : ",") + x;
    CHECK(listed == expected);
    // Its key is taken.
    v1::Offer dup;
    auto cs = n->create("sku-stray", dup, seller);
    CHECK_MESSAGE(cs.error_code() == grpc::StatusCode::ALREADY_EXISTS, cs.error_message());
  }
  // Its key cannot change where it lives; its title can.
  v1::UpdateOfferRequest up;
  up.mutable_offer()->set_id(id);
  up.mutable_offer()->set_external_id("sku-renamed");
  up.mutable_update_mask()->add_paths("external_id");
  v1::UpdateOfferResponse upr;
  grpc::ClientContext uc;
  uc.set_deadline(std::chrono::system_clock::now() + 20s);
  auto us = n1.stub->UpdateOffer(&uc, up, &upr);
  CHECK(us.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_MESSAGE(us.error_message().find("delete it and create it") != std::string::npos,
                us.error_message());
  CHECK(
    east.scalar("SELECT external_id || ':' || version FROM offers WHERE offer_id = '" + id + "'")
    == "sku-stray:1");
  v1::UpdateOfferRequest title;
  title.mutable_offer()->set_id(id);
  title.mutable_offer()->set_title("found again");
  title.mutable_update_mask()->add_paths("title");
  v1::UpdateOfferResponse titled;
  grpc::ClientContext tc;
  tc.set_deadline(std::chrono::system_clock::now() + 20s);
  auto ts = n2.stub->UpdateOffer(&tc, title, &titled);
  REQUIRE_MESSAGE(ts.ok(), ts.error_message());
  CHECK(titled.offer().version() == 2);
  CHECK(titled.offer().external_id() == "sku-stray");
  // Deleted where it lives: its claim stays behind, until a create of its key finds the
  // claimed offer gone at its owner, drops the claim and creates the offer at home.
  v1::DeleteOfferRequest del;
  del.mutable_ref()->set_id(id);
  v1::DeleteOfferResponse deleted;
  grpc::ClientContext dc;
  dc.set_deadline(std::chrono::system_clock::now() + 20s);
  auto ds = n1.stub->DeleteOffer(&dc, del, &deleted);
  REQUIRE_MESSAGE(ds.ok(), ds.error_message());
  CHECK(east.scalar("SELECT count(*) FROM offers WHERE offer_id = '" + id + "'") == "0");
  CHECK(home.scalar("SELECT count(*) FROM offer_keys") == "1");
  v1::Offer again;
  auto cs = n2.create("sku-stray", again, seller);
  REQUIRE_MESSAGE(cs.ok(), cs.error_message());
  CHECK(again.id() != id);
  CHECK(home.scalar("SELECT count(*) FROM offer_keys") == "0");
  CHECK(home.scalar("SELECT count(*) FROM offers WHERE external_id = 'sku-stray'") == "1");
  // Gone too, so that the rest of the test counts the offers it made. The spread row stays
  // (harmless: the seller's page in east is empty now).
  v1::DeleteOfferRequest del2;
  del2.mutable_ref()->set_id(again.id());
  grpc::ClientContext dc2;
  dc2.set_deadline(std::chrono::system_clock::now() + 20s);
  auto ds2 = n1.stub->DeleteOffer(&dc2, del2, &deleted);
  REQUIRE_MESSAGE(ds2.ok(), ds2.error_message());
}

} // namespace

TEST_CASE("shard groups: each group's shards live in its own database, spread over the nodes "
          "group by group, and move to the survivor after kill -9 with nothing acknowledged lost "
          "(ADR 0023)") {
  testing::temp_db db;   // the catalog database: group 0
  testing::temp_db east; // group 1's database, empty until the nodes migrate it
  constexpr int half = shard_count / 2;
  auto flags = declare_groups(db, east);
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  // Each group's leases are in its own database, shared evenly by the nodes group by group.
  await_group_spread(db, east);
  CHECK(db.scalar("SELECT count(*) FROM shard_leases WHERE shard >= " + std::to_string(half)
                  + " AND owner IN ('n1', 'n2')")
        == "0"); // the catalog's rows of east's shards are left alone
  CHECK(east.scalar("SELECT count(*) FROM shard_leases WHERE shard < " + std::to_string(half))
        == "0");
  CHECK(east.scalar("SELECT shard_count FROM installation") == std::to_string(shard_count));
  CHECK(n1.proc->output().find("shard group served group=1 name=east shards=8")
        != std::string::npos);

  // Offers of six sellers: each seller's in its home group's database (ADR 0023 decision 4).
  load l;
  create_seller_offers(n1, l);
  for (int k = 0; k < 6; ++k) {
    auto seller = "'seller-" + std::to_string(k) + "'";
    auto here = std::stoi(db.scalar("SELECT count(*) FROM offers WHERE seller_id = " + seller));
    auto there = std::stoi(east.scalar("SELECT count(*) FROM offers WHERE seller_id = " + seller));
    bool in_one = (here == 10 && there == 0) || (here == 0 && there == 10);
    CHECK_MESSAGE(in_one, "seller-" << k << ": " << here << " + " << there);
  }
  // By key, through either node: the key is looked up in the seller's home group.
  std::map<std::string, std::string> home_of; // seller -> "db" or "east"
  for (int k = 0; k < 6; ++k) {
    auto seller = "seller-" + std::to_string(k);
    home_of[seller] =
      db.scalar("SELECT count(*) FROM offers WHERE seller_id = '" + seller + "'") == "0" ? "east"
                                                                                         : "db";
    for (auto* n : {&n1, &n2})
      check_by_key(*n, l, k);
  }
  // An offer cannot move to a seller at home in another group: refused, saying why.
  auto other = std::find_if(home_of.begin(), home_of.end(),
                            [&](auto& h) { return h.second != home_of.at("seller-0"); });
  REQUIRE(other != home_of.end()); // the six sellers' homes are in both groups
  {
    int64_t version = 0;
    auto st = n1.update(l.ids[0], "moved", version, other->first);
    CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK_MESSAGE(st.error_message().find("stored in another shard group than the home")
                    != std::string::npos,
                  st.error_message());
    v1::Offer kept;
    REQUIRE(n2.get(l.ids[0], kept).ok());
    CHECK(kept.seller_id() == "seller-0");
    CHECK(kept.title() != "moved");
  }
  // A stray (what a split makes, ADR 0023) is found, listed and guarded through either node.
  auto at_db =
    std::find_if(home_of.begin(), home_of.end(), [&](auto& h) { return h.second == "db"; });
  REQUIRE(at_db != home_of.end());
  check_stray(n1, n2, db, east, at_db->first, half);
  l.use({&n1, &n2});
  l.start(4);
  REQUIRE(l.more_acked(30));
  // Every offer is in its shard's group's database, and only there.
  auto in_db = std::stoi(db.scalar("SELECT count(*) FROM offers"));
  auto in_east = std::stoi(east.scalar("SELECT count(*) FROM offers"));
  CHECK(in_db + in_east == 60);
  CHECK(in_db > 0);
  CHECK(in_east > 0);
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE shard >= " + std::to_string(half)) == "0");
  CHECK(east.scalar("SELECT count(*) FROM offers WHERE shard < " + std::to_string(half)) == "0");
  // An offer's history is read in its group's database (gostctl history).
  {
    auto admin =
      v1::AdminService::NewStub(grpc::CreateChannel(n1.addr, grpc::InsecureChannelCredentials()));
    auto id = east.scalar("SELECT offer_id FROM offers ORDER BY offer_id LIMIT 1");
    // The clients' updates go on meanwhile: the page holds what was there before the call, at
    // least, and what is there after it, at most (a page is 20).
    auto kept = "SELECT least(count(*), 20) FROM offer_history WHERE offer_id = '" + id + "'";
    auto before = std::stoi(east.scalar(kept));
    v1::OfferHistoryRequest req;
    req.set_offer_id(id);
    v1::OfferHistoryResponse resp;
    auto st = testing::call(
      [&](auto* ctx, auto& r, auto* out) { return admin->OfferHistory(ctx, r, out); }, req, resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.changes_size() > 0);
    CHECK(resp.changes_size() >= before);
    CHECK(resp.changes_size() <= std::stoi(east.scalar(kept)));
  }

  // The clients go on through n1 alone (its calls for n2's shards are forwarded until the kill).
  l.use({&n1});
  REQUIRE(l.more_acked(10));
  n2.proc->signal(SIGKILL);
  CHECK(n2.proc->wait(10s) == 128 + SIGKILL);
  // The survivor takes the dead node's leases in both databases (its liveness lock in each).
  REQUIRE_MESSAGE(
    testing::eventually(
      20s, [&] { return spread_over(db, {"n1"}, half) && spread_over(east, {"n1"}, half); }),
    describe(db) << "| " << describe(east));
  CHECK(l.more_acked(30)); // updates go on, every shard through n1 now
  l.finish();

  // A stage paused is paused in every group: the pauses are the catalog's, read by each
  // group's manager. Every offer's next audit run (its timer, or a new offer's first) waits
  // queued, in both groups, and none starts.
  auto admin =
    v1::AdminService::NewStub(grpc::CreateChannel(n1.addr, grpc::InsecureChannelCredentials()));
  auto audit = [&]() {
    v1::TopResponse top;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = admin->Top(&ctx, v1::TopRequest{}, &top);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    for (auto& stage : top.stages())
      if (stage.stage_id() == "audit")
        return stage;
    return v1::StageTop{};
  };
  {
    v1::StageVerbRequest req;
    req.set_stage_id("audit");
    req.set_who("groups-test");
    v1::StageVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    auto st = admin->PauseStage(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  auto runs_at_pause = audit().runs();
  for (int i = 0; i < 24; ++i) {
    v1::Offer o;
    auto st = n1.create("paused-" + std::to_string(i), o, "seller-" + std::to_string(i % 6));
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  const std::string due_audits =
    "SELECT count(*) FROM stage_states WHERE stage_id = 'audit' AND due_at_us IS NOT NULL"
    " AND due_at_us < extract(epoch from now()) * 1e6";
  auto queued = [&] {
    return std::stoi(db.scalar(due_audits)) + std::stoi(east.scalar(due_audits));
  };
  CHECK_MESSAGE(testing::eventually(30s, [&] { return queued() >= 84; }),
                "audit due " << queued() << ", runs " << runs_at_pause << " -> " << audit().runs());
  // gostctl top counts the queue in every group's database (not the catalog's alone).
  CHECK_MESSAGE(testing::eventually(30s, [&] { return audit().queued() >= 84; }),
                "top says " << audit().queued() << " queued, the databases " << queued());
  CHECK(audit().runs() == runs_at_pause);
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  l.check_durable({&db, &east});
  // Each group's outbox is relayed from its own database (a relay per group; Kafka is the
  // in-process mock here): the audit stage keeps writing events, and none stays behind for
  // long in either database.
  const std::string stale =
    "SELECT count(*) FROM outbox_batches WHERE created_at < now() - interval '3 s'";
  CHECK_MESSAGE(
    testing::eventually(30s, [&] { return db.scalar(stale) == "0" && east.scalar(stale) == "0"; }),
    db.scalar(stale) << " " << east.scalar(stale));
  CHECK(std::stoi(east.scalar("SELECT count(*) FROM outbox_batches")) < 200);
  CHECK(std::stoi(east.scalar("SELECT count(*) FROM offer_history")) > 0);
  // No offer was processed under one shard lease on two nodes, and each audit run's lease is
  // its group's: the shards of east ran under east's epochs.
  std::map<std::pair<uint32_t, int64_t>, std::set<std::string>> nodes_of_lease;
  size_t audited = 0;
  for (auto* d : {&db, &east}) {
    for (auto& [offer, entries] : audit_trails(*d)) {
      ++audited;
      for (auto& e : entries) {
        CHECK((e.shard >= half) == (d == &east));
        nodes_of_lease[{e.shard, e.epoch}].insert(e.node_id);
      }
    }
  }
  CHECK(audited == 60);
  for (auto& [lease, holders] : nodes_of_lease)
    CHECK_MESSAGE(holders.size() == 1,
                  "shard " << lease.first << " epoch " << lease.second << " ran on several nodes");
  auto max_epoch = std::stoll(east.scalar("SELECT max(epoch) FROM shard_leases"));
  for (auto& [lease, holders] : nodes_of_lease)
    if (lease.first >= half)
      CHECK(lease.second <= max_epoch);
}

namespace {

using testing::fire_twice_more;
using testing::scheduled_stub;
using testing::successes_of;

/// A ScheduledActionService stub for each of `nodes`, in order.
std::vector<std::unique_ptr<scheduled_stub>> scheduled_stubs(std::initializer_list<node*> nodes) {
  std::vector<std::unique_ptr<scheduled_stub>> out;
  for (auto* n : nodes)
    out.push_back(v1::ScheduledActionService::NewStub(
      grpc::CreateChannel(n->addr, grpc::InsecureChannelCredentials())));
  return out;
}

/// Creates `id`, requeueing `offer` into the audit stage every 300 ms from now.
grpc::Status create_requeue_action(scheduled_stub& stub, const std::string& id,
                                   const std::string& offer) {
  v1::CreateScheduledActionRequest req;
  req.set_id(id);
  auto& spec = *req.mutable_spec();
  spec.set_start_at_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  spec.set_interval_ms(300);
  spec.mutable_event()->mutable_offer_requeue()->set_offer_id(offer);
  spec.mutable_event()->mutable_offer_requeue()->set_stage_id("audit");
  v1::CreateScheduledActionResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  return stub.Create(&ctx, req, &resp);
}

} // namespace

TEST_CASE("shard groups: a scheduled action lives in its id's home group's database, fires on "
          "that group's shards, and goes on firing after kill -9 of a node (ADR 0023)") {
  testing::temp_db db;
  testing::temp_db east;
  constexpr int half = shard_count / 2;
  auto flags = declare_groups(db, east);
  flags.erase(std::remove(flags.begin(), flags.end(), "--scheduled.enabled=false"), flags.end());
  flags.push_back("--scheduled.poll=50ms");
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  await_group_spread(db, east);
  load l;
  create_seller_offers(n1, l);
  auto api = scheduled_stubs({&n1, &n2});
  // 24 actions, each requeueing an offer into the audit stage every 300 ms, made through
  // either node.
  std::vector<std::string> ids;
  for (int i = 0; i < 24; ++i) {
    ids.push_back("tick-" + std::to_string(i));
    auto st = create_requeue_action(*api[i % 2], ids.back(), l.ids[i]);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  // Each action's row is in its id's home group's database only; its queue rows are on that
  // group's shards.
  int homes_east = 0;
  for (auto& id : ids) {
    bool home_east = gost::shard_of(id, shard_count) >= half;
    homes_east += home_east ? 1 : 0;
    auto where = "SELECT count(*) FROM scheduled_actions WHERE action_id = '" + id + "'";
    CHECK_MESSAGE(db.scalar(where) == (home_east ? "0" : "1"), id);
    CHECK_MESSAGE(east.scalar(where) == (home_east ? "1" : "0"), id);
  }
  CHECK(homes_east > 0);
  CHECK(homes_east < 24);
  auto astray = [&] {
    const std::string h = std::to_string(half);
    auto in = [](const testing::temp_db& d, const std::string& cond) {
      return std::stoi(d.scalar("SELECT (SELECT count(*) FROM scheduled_incoming WHERE " + cond
                                + ") + (SELECT count(*) FROM scheduled_processing WHERE " + cond
                                + ") + (SELECT count(*) FROM scheduled_attempts WHERE " + cond
                                + ")"));
    };
    return in(db, "shard >= " + h) + in(east, "shard < " + h);
  };
  CHECK(astray() == 0);

  std::map<std::string, int64_t> zero;
  for (auto& id : ids)
    zero[id] = 0;
  // Every action fires, read through either node (a Get reads the action's group).
  CHECK_MESSAGE(fire_twice_more(*api[1], zero), "the actions did not all fire twice");
  CHECK(std::stoi(east.scalar("SELECT count(*) FROM scheduled_attempts")) > 0);
  CHECK(std::stoi(db.scalar("SELECT count(*) FROM scheduled_attempts")) > 0);
  CHECK(astray() == 0);

  // Listed through either node, five a page: every action once, in id order, across groups.
  std::vector<std::string> listed;
  std::string after;
  for (int page = 0; page < 20; ++page) {
    v1::ListScheduledActionsRequest req;
    req.set_after_id(after);
    req.set_limit(5);
    v1::ListScheduledActionsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = api[page % 2]->List(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    for (auto& a : resp.actions())
      listed.push_back(a.meta().id());
    after = resp.next_after_id();
    if (after.empty())
      break;
  }
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(listed == sorted);

  // Both nodes' workers fired: each works the shards it holds in each group.
  auto nodes_of = [](const testing::temp_db& d) {
    return d.scalar("SELECT coalesce(string_agg(DISTINCT node, ','), '') FROM scheduled_attempts");
  };
  auto fired_by = nodes_of(db) + "," + nodes_of(east);
  CHECK_MESSAGE(fired_by.find("n1") != std::string::npos, fired_by);
  CHECK_MESSAGE(fired_by.find("n2") != std::string::npos, fired_by);

  // kill -9 of n2: n1 takes its leases in both databases, and every action fires again.
  auto before = successes_of(*api[0], ids);
  n2.proc->signal(SIGKILL);
  CHECK(n2.proc->wait(10s) == 128 + SIGKILL);
  REQUIRE_MESSAGE(
    testing::eventually(
      20s, [&] { return spread_over(db, {"n1"}, half) && spread_over(east, {"n1"}, half); }),
    describe(db) << "| " << describe(east));
  CHECK_MESSAGE(fire_twice_more(*api[0], before),
                "the actions did not all fire twice more after the kill");
  CHECK(astray() == 0);
}

TEST_CASE("shard groups: an image task and its result live in its partition's group's "
          "database, computed by the partition's owner, and after kill -9 by the survivor "
          "(ADR 0023)") {
  testing::temp_db db;
  testing::temp_db east;
  constexpr int half = shard_count / 2;
  auto flags = declare_groups(db, east);
  flags.erase(std::remove(flags.begin(), flags.end(), "--images.enabled=false"), flags.end());
  for (auto f :
       {"--images.allow_private_sources=true", "--images.poll=20ms", "--images.retry_delay=50ms"})
    flags.push_back(f);
  auto blobs = testing::temp_path("gostd-group-blobs");
  flags.push_back("--images.blob_dir=" + blobs);
  auto photo = testing::jpeg(120, 80);
  testing::http_server srv{[&](const testing::http_server::call&) {
    return testing::http_server::reply{200, photo};
  }};
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  await_group_spread(db, east);
  std::vector<std::unique_ptr<v1::ImageService::Stub>> api;
  for (auto* n : {&n1, &n2})
    api.push_back(
      v1::ImageService::NewStub(grpc::CreateChannel(n->addr, grpc::InsecureChannelCredentials())));
  // A batch of ratios through either node: each answer settles, whichever node asked.
  auto ask = [&](size_t via, const std::string& tag, int count) {
    v1::ImageBatchRequest req;
    req.set_function(v1::IMAGE_FUNCTION_RATIO);
    for (int i = 0; i < count; ++i)
      req.add_requests()->set_url(srv.url("/" + tag + ".jpg?n=" + std::to_string(i)));
    v1::ImageBatchResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = api[via]->Batch(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return resp;
  };
  auto settled = [&](size_t via, const std::string& tag, int count) {
    return testing::eventually(30s, [&] {
      auto got = ask(via, tag, count);
      for (auto& r : got.responses())
        if (r.status() != v1::IMAGE_STATUS_DONE)
          return false;
      return true;
    });
  };
  auto first = ask(0, "a", 30);
  CHECK(settled(1, "a", 30));
  // Each result in exactly one database, both databases holding some; no task left.
  int in_east = 0;
  for (auto& r : first.responses()) {
    auto q = "SELECT count(*) FROM image_results WHERE result_key = '" + r.key() + "'";
    auto here = db.scalar(q), there = east.scalar(q);
    CHECK_MESSAGE(std::stoi(here) + std::stoi(there) == 1, r.key());
    in_east += there == "1" ? 1 : 0;
  }
  CHECK(in_east > 0);
  CHECK(in_east < 30);
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  CHECK(east.scalar("SELECT count(*) FROM image_tasks") == "0");

  // kill -9 of n2: n1 holds every partition in both groups and computes new asks.
  n2.proc->signal(SIGKILL);
  CHECK(n2.proc->wait(10s) == 128 + SIGKILL);
  REQUIRE_MESSAGE(
    testing::eventually(
      20s, [&] { return spread_over(db, {"n1"}, half) && spread_over(east, {"n1"}, half); }),
    describe(db) << "| " << describe(east));
  ask(0, "b", 30);
  CHECK(settled(0, "b", 30));
  CHECK(std::stoi(east.scalar("SELECT count(*) FROM image_results")) > in_east);
  std::filesystem::remove_all(blobs);
}

namespace {

/// Every page of a console list `call` makes, `page_size` rows a page: the ids `ids_of` reads
/// in each answer, in order.
template <class Req, class Resp, class Call, class Ids>
std::vector<int64_t> page_through(int page_size, Call call, Ids ids_of) {
  std::vector<int64_t> out;
  std::string token;
  for (int page = 0; page < 50; ++page) {
    Req req;
    req.set_page_size(page_size);
    req.set_page_token(token);
    Resp resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = call(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    for (auto id : ids_of(resp))
      out.push_back(id);
    token = resp.next_page_token();
    if (token.empty())
      break;
  }
  return out;
}

} // namespace

TEST_CASE("shard groups: the console lists every group's dead letters and parked outbox rows "
          "in id order, and its verbs reach the group holding each (ADR 0023)") {
  testing::temp_db db;
  testing::temp_db east;
  auto flags = declare_groups(db, east);
  node n1{"n1", db, flags};
  load l;
  create_seller_offers(n1, l);
  auto admin =
    v1::AdminService::NewStub(grpc::CreateChannel(n1.addr, grpc::InsecureChannelCredentials()));
  // Two letters of the audit stage in each group's database, on offers of that group (as a
  // stage given up would write them), and a parked outbox row in each.
  auto letters = [](const testing::temp_db& d) {
    return d.scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason)"
                    " SELECT shard, offer_id, 'audit', 'given up' FROM offers ORDER BY offer_id"
                    " LIMIT 2 RETURNING id");
  };
  letters(db);
  letters(east);
  std::vector<int64_t> east_ids;
  {
    auto ids = east.scalar("SELECT string_agg(id::text, ' ' ORDER BY id) FROM dead_letters");
    std::istringstream in{ids};
    for (int64_t id; in >> id;)
      east_ids.push_back(id);
  }
  REQUIRE(east_ids.size() == 2);
  // Parked as the relay parks a batch: under the batch's id (the outbox's sequence).
  std::vector<int64_t> parked;
  for (auto* d : {&db, &east})
    parked.push_back(std::stoll(d->scalar(
      "INSERT INTO outbox_parked (id, shard, events, payload, created_at, topic, msg_key, bytes,"
      " reason, error) SELECT nextval(pg_get_serial_sequence('outbox_batches', 'id')),"
      " min(shard), 1, '\\x00', now(), 't', 'k', 1, 'message_too_large', 'too large' FROM offers"
      " RETURNING id")));
  CHECK(parked[0] != parked[1]); // ids apart per group

  // Listed two a page: all four, in id order, each id once.
  auto list = [&] {
    return page_through<v1::ListDeadLettersRequest, v1::ListDeadLettersResponse>(
      2, [&](auto* ctx, auto& req, auto* resp) { return admin->ListDeadLetters(ctx, req, resp); },
      [](const v1::ListDeadLettersResponse& r) {
        std::vector<int64_t> ids;
        for (auto& d : r.letters())
          ids.push_back(d.id());
        return ids;
      });
  };
  auto listed = list();
  CHECK(listed.size() == 4);
  CHECK(std::is_sorted(listed.begin(), listed.end()));
  CHECK(std::count(listed.begin(), listed.end(), east_ids[0]) == 1);
  // A discard by id reaches east's database.
  {
    v1::DeadLettersVerbRequest req;
    req.add_ids(east_ids[0]);
    v1::DeadLettersVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = admin->DiscardDeadLetters(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.released() == 1);
  }
  CHECK(east.scalar("SELECT count(*) FROM dead_letters WHERE released_at IS NULL") == "1");
  CHECK(list().size() == 3);
  // A retry by stage requeues the three open letters' offers in both groups and releases them.
  {
    v1::DeadLettersVerbRequest req;
    req.mutable_filter()->set_stage_id("audit");
    v1::DeadLettersVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    auto st = admin->RetryDeadLetters(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.released() == 3);
    CHECK(resp.requeued() == 3);
  }
  CHECK(list().empty());
  CHECK(db.scalar("SELECT count(*) FROM dead_letters WHERE released_at IS NULL") == "0");

  // Parked rows: both listed, and a drop by ids reaches each group.
  {
    auto seen = page_through<v1::ListParkedOutboxRequest, v1::ListParkedOutboxResponse>(
      1, [&](auto* ctx, auto& req, auto* resp) { return admin->ListParkedOutbox(ctx, req, resp); },
      [](const v1::ListParkedOutboxResponse& r) {
        std::vector<int64_t> ids;
        for (auto& row : r.rows())
          ids.push_back(row.id());
        return ids;
      });
    auto sorted = parked;
    std::sort(sorted.begin(), sorted.end());
    CHECK(seen == sorted);
    v1::ParkedOutboxVerbRequest drop;
    for (auto id : parked)
      drop.add_ids(id);
    v1::ParkedOutboxVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto st = admin->DropParkedOutbox(&ctx, drop, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(resp.rows() == 2);
  }
  CHECK(db.scalar("SELECT count(*) FROM outbox_parked") == "0");
  CHECK(east.scalar("SELECT count(*) FROM outbox_parked") == "0");
}

TEST_CASE("shard groups: gostctl move-shards moves a group's shards to another group's database "
          "under load: nothing acknowledged is lost, the leases go on there at higher epochs, "
          "the source's rows are removed (ADR 0023 decision 5)") {
  testing::temp_db db;   // the catalog database: group 0
  testing::temp_db east; // group 1, holding the upper half
  testing::temp_db west; // group 2, declared, holding nothing until the move
  constexpr int half = shard_count / 2;
  const std::string range = std::to_string(half) + "-" + std::to_string(shard_count - 1);
  auto flags = declare_groups(db, east, {{"west", &west}});
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  await_group_spread(db, east);
  // Both nodes run in west as well (each declared group has a part on a node), holding nothing.
  CHECK(testing::eventually(30s, [&] { return west.scalar("SELECT count(*) FROM nodes") == "2"; }));
  CHECK(west.scalar("SELECT count(*) FROM shard_leases") == "0");

  load l;
  create_seller_offers(n1, l);
  REQUIRE(std::stoi(east.scalar("SELECT count(*) FROM offers")) > 0);
  // Tasks in both groups, assigned (their first result), pulled by token before the move.
  testing::task_client tasks{n1.addr};
  REQUIRE(tasks.create_group("mv").ok());
  constexpr int task_count = 24;
  auto task_id = [](int i) { return "mv:k-" + std::to_string(i); };
  for (int i = 0; i < task_count; ++i)
    REQUIRE(tasks.create("mv", "k-" + std::to_string(i), testing::item("k", 10min)).ok());
  auto all_in = [&](const std::string& state) {
    for (int i = 0; i < task_count; ++i)
      if (tasks.get(task_id(i)).state_name() != state)
        return false;
    return true;
  };
  REQUIRE(testing::eventually(30s, [&] { return all_in("waiting"); }));
  auto tasks_in_east = east.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation'");
  REQUIRE(tasks_in_east != "0");
  std::map<std::string, int> pulled; // "task name" -> times
  std::string token;
  auto pull = [&] {
    for (;;) {
      auto rows = tasks.pull_token("mv", token, 5);
      if (rows.empty())
        return;
      for (auto& r : rows)
        ++pulled[r.task_id() + " " + r.name()];
    }
  };
  pull();
  CHECK(pulled.size() == task_count); // the assignments
  l.retry_unavailable = true;
  l.use({&n1, &n2});
  l.start(4);
  REQUIRE(l.more_acked(30));

  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", n1.addr, "--who", "e2e"});
    child_process p{GOSTCTL_PATH, std::move(args)};
    int rc = p.wait(120s);
    return std::make_pair(rc, p.output());
  };
  // Refused before anything is written, saying what to give: a group that is not declared, a
  // range that is not one.
  auto [unknown_rc, unknown_out] = ctl({"move-shards", range, "--to", "north"});
  CHECK(unknown_rc == 1);
  CHECK_MESSAGE(unknown_out.find("gostctl: 3: no group is named `north`") != std::string::npos,
                unknown_out);
  CHECK(ctl({"move-shards", "8-x", "--to", "west"}).first == 2);

  // The move, while the clients update offers of every shard through both nodes.
  auto [rc, out] = ctl({"move-shards", range, "--to", "west"});
  REQUIRE_MESSAGE(rc == 0, out);
  MESSAGE(out);
  CHECK_MESSAGE(out.find("  fence     shards " + range + " fenced at `east`") != std::string::npos,
                out);
  CHECK_MESSAGE(
    out.find("done: shards " + range + " moved from `east` to `west`") != std::string::npos, out);
  // The node that ran it counts it (/metrics): one done, the refusal above (gostctl refused
  // the malformed range itself), the rows it wrote, its fence.
  {
    auto m = testing::http_get(static_cast<uint16_t>(n1.http_port), "/metrics");
    CHECK(testing::metric_sample(m, "gost_shard_moves_total{outcome=\"done\"}") == 1);
    CHECK(testing::metric_sample(m, "gost_shard_moves_total{outcome=\"refused\"}") == 1);
    CHECK(testing::metric_sample(m, "gost_shard_move_rows_total{step=\"copied\"}") > 0);
    CHECK(testing::metric_sample(m, "gost_shard_move_last_fence_seconds") >= 0);
    CHECK(testing::metric_sample(m, "gost_shard_moves_running") == 0);
  }
  // Both nodes take the range's leases in west, evenly; the clients go on.
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(west, {"n1", "n2"}, half);
                                      }),
                  describe(west));
  REQUIRE(l.more_acked(60));
  l.finish();
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  MESSAGE("UNAVAILABLE answers during the move: " << l.unavailable << " of "
                                                  << l.acked.load() + l.unavailable);
  // The tasks moved with their group: each answers from west and takes its verdict there; the
  // consumer's token goes on (east's results read to their end there, the new ones in west),
  // every result once.
  CHECK(west.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation'")
        == tasks_in_east);
  CHECK(east.scalar("SELECT count(*) FROM entities") == "0");
  for (int i = 0; i < task_count; ++i)
    CHECK(testing::eventually(30s, [&] {
      return tasks.send(task_id(i), "verdict", testing::verdict(true), "v-" + std::to_string(i))
        .ok();
    }));
  CHECK(testing::eventually(30s, [&] { return all_in("approved"); }));
  pull();
  CHECK(pulled.size() == 2 * task_count); // + the verdicts
  int twice = 0;
  for (auto& [what, times] : pulled)
    twice += times != 1;
  CHECK(twice == 0);
  // The moved tasks' assignments stay in east (read there), their verdicts are west's.
  CHECK(east.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'mv'") == tasks_in_east);
  CHECK(west.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'mv'") == tasks_in_east);
  // Nothing acknowledged is lost: every acknowledged version is in main or west.
  l.check_durable({&db, &west});
  CHECK(east.scalar("SELECT count(*) FROM offers") == "0"); // the source's rows removed
  CHECK(east.scalar("SELECT count(*) FROM stage_states") == "0");
  CHECK(west.scalar("SELECT count(*) FROM offers WHERE shard < " + std::to_string(half)) == "0");
  CHECK(std::stoi(db.scalar("SELECT count(*) FROM offers"))
          + std::stoi(west.scalar("SELECT count(*) FROM offers"))
        == 60);
  // East's leases stay fenced; west's epochs are above them, shard by shard.
  CHECK(east.scalar("SELECT count(*) FROM shard_leases WHERE shard >= " + std::to_string(half)
                    + " AND owner IS DISTINCT FROM 'moved:west'")
        == "0");
  for (int s = half; s < shard_count; ++s) {
    auto at = "SELECT epoch FROM shard_leases WHERE shard = " + std::to_string(s);
    CHECK_MESSAGE(std::stoll(west.scalar(at)) > std::stoll(east.scalar(at)), "shard " << s);
  }
  // By key through either node: the sellers at home in the moved range are looked up in west.
  for (int k = 0; k < 6; ++k)
    for (auto* n : {&n1, &n2})
      check_by_key(*n, l, k);
  // SIGSTOP across groups: past the lease timeout n1 takes n2's leases in main and in west;
  // awake again, n2 stops its stale shards and serves n1's data, not its own copies.
  n2.proc->signal(SIGSTOP);
  REQUIRE_MESSAGE(
    testing::eventually(
      30s, [&] { return spread_over(db, {"n1"}, half) && spread_over(west, {"n1"}, half); }),
    describe(db) << "| " << describe(west));
  std::map<std::string, int64_t> acked;
  for (auto& id : l.ids) {
    int64_t v = 0;
    auto st = n1.update(id, "while n2 slept", v, l.seller_of.at(id));
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    acked[id] = v;
  }
  n2.proc->signal(SIGCONT);
  CHECK_MESSAGE(
    testing::eventually(
      30s, [&] { return n2.proc->output().find("lease taken over") != std::string::npos; }),
    n2.proc->output());
  for (auto& [id, v] : acked) {
    v1::Offer o;
    // Until its heartbeats confirm its leases again, n2 refuses its own shards' calls
    // (UNAVAILABLE: retry); then it answers with n1's data.
    grpc::Status st;
    CHECK(testing::eventually(20s, [&] {
      st = n2.get(id, o);
      return st.error_code() != grpc::StatusCode::UNAVAILABLE;
    }));
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(o.version() == v);
    CHECK(o.title() == "while n2 slept");
  }
  // No shard ran under one lease on two nodes, before or after the move; the stage runs of the
  // moved shards went on in west.
  std::map<std::pair<uint32_t, int64_t>, std::set<std::string>> nodes_of_lease;
  size_t in_west = 0;
  for (auto* d : {&db, &west})
    for (auto& [offer, entries] : audit_trails(*d)) {
      in_west += d == &west ? 1 : 0;
      for (auto& e : entries)
        nodes_of_lease[{e.shard, e.epoch}].insert(e.node_id);
    }
  CHECK(in_west > 0);
  for (auto& [lease, holders] : nodes_of_lease)
    CHECK_MESSAGE(holders.size() == 1,
                  "shard " << lease.first << " epoch " << lease.second << " ran on several nodes");
  CHECK(n2.proc->output().find("shard group map now version=") != std::string::npos);
  // gostctl shards reads each lease in its group's database: the range's in west (east's
  // fenced rows are not shown).
  auto [shards_rc, shards_out] = ctl({"shards"});
  CHECK(shards_rc == 0);
  CHECK_MESSAGE(shards_out.find("owned (group west)") != std::string::npos, shards_out);
  CHECK_MESSAGE(shards_out.find("owned (group main)") != std::string::npos, shards_out);
  CHECK_MESSAGE(shards_out.find("moved:west") == std::string::npos, shards_out);
  CHECK_MESSAGE(shards_out.find(std::to_string(shard_count) + " shard(s)") != std::string::npos,
                shards_out);
  // The map as gostctl shows it: west holds the range.
  auto [groups_rc, groups_out] = ctl({"groups"});
  CHECK(groups_rc == 0);
  CHECK_MESSAGE(groups_out.find("west") != std::string::npos, groups_out);
  CHECK_MESSAGE(groups_out.find(" " + range + " ") != std::string::npos, groups_out);
}

TEST_CASE("shard groups: gostctl move-shards splits a group holding offers under load: updates "
          "and creates of sellers on both sides of the cut go on, nothing acknowledged is lost, "
          "every key stays unique and is found by key and listed (ADR 0023 \"Splits\")") {
  testing::temp_db db;   // group 0 (main): shards 0-7
  testing::temp_db east; // group 1: shards 8-15, split at `cut`
  testing::temp_db west; // group 2: receives 12-15
  constexpr int half = shard_count / 2;
  constexpr int cut = half + (shard_count - half) / 2;
  auto flags = declare_groups(db, east, {{"west", &west}});
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  await_group_spread(db, east);
  CHECK(testing::eventually(30s, [&] { return west.scalar("SELECT count(*) FROM nodes") == "2"; }));
  // Where a seller's keys are indexed: its home shard's group.
  auto home_of = [&](const std::string& seller) -> const testing::temp_db* {
    auto h = static_cast<int>(shard_of(seller, shard_count));
    return h < half ? &db : h < cut ? &east : &west;
  };
  // Two sellers whose home stays in east, two whose home goes to west, one at home in main.
  std::vector<std::string> sellers;
  int staying = 0, going = 0, in_main = 0;
  for (int i = 0; sellers.size() < 5; ++i) {
    auto s = "split-seller-" + std::to_string(i);
    auto* h = home_of(s);
    int& n = h == &db ? in_main : h == &east ? staying : going;
    if (n < (h == &db ? 1 : 2)) {
      ++n;
      sellers.push_back(s);
    }
  }
  // 12 offers each: east's sellers' ids are drawn over east's shards, both sides of the cut.
  load l;
  for (auto& seller : sellers)
    for (int k = 0; k < 12; ++k) {
      v1::Offer o;
      auto st = n1.create("sku-" + std::to_string(k), o, seller);
      REQUIRE_MESSAGE(st.ok(), st.error_message());
      l.ids.push_back(o.id());
      l.seller_of[o.id()] = seller;
    }
  // The cut leaves strays both ways: offers going to west of sellers whose home stays, and
  // offers staying of sellers whose home goes.
  int out_strays = 0, in_strays = 0;
  for (auto& [id, seller] : l.seller_of) {
    auto shard = static_cast<int>(shard_of(id, shard_count));
    out_strays += home_of(seller) == &east && shard >= cut;
    in_strays += home_of(seller) == &west && shard >= half && shard < cut;
  }
  REQUIRE(out_strays > 0);
  REQUIRE(in_strays > 0);

  l.retry_unavailable = true;
  l.use({&n1, &n2});
  l.start(4);
  // New keys for every seller through both nodes, each create retried on UNAVAILABLE (the
  // fence, a home that moved) until answered.
  std::atomic<bool> stop_creates{false};
  std::mutex cm;
  std::map<std::string, std::string> created; // "seller/key" -> id
  std::vector<std::string> create_failures;
  std::atomic<int> create_unavailable{0};
  std::thread creator([&] {
    for (int i = 0; !stop_creates; ++i) {
      auto& seller = sellers[static_cast<size_t>(i) % sellers.size()];
      auto key = "new-" + std::to_string(i);
      node& n = i % 2 == 0 ? n1 : n2;
      v1::Offer o;
      grpc::Status st;
      bool retried = false;
      for (;;) {
        st = n.create(key, o, seller);
        if (st.error_code() != grpc::StatusCode::UNAVAILABLE)
          break;
        ++create_unavailable;
        retried = true;
      }
      if (st.error_code() == grpc::StatusCode::ALREADY_EXISTS && retried) {
        // An attempt that timed out was written: its offer is found by key.
        st = n.get_by_key(seller, key, o);
      }
      std::lock_guard<std::mutex> g{cm};
      if (st.ok())
        created[seller + "/" + key] = o.id();
      else
        create_failures.push_back(n.id + " " + seller + "/" + key + ": " + st.error_message());
    }
  });
  auto created_count = [&] {
    std::lock_guard<std::mutex> g{cm};
    return created.size();
  };
  REQUIRE(l.more_acked(30));
  REQUIRE(testing::eventually(30s, [&] { return created_count() >= 10; }));

  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", n1.addr, "--who", "e2e"});
    child_process p{GOSTCTL_PATH, std::move(args)};
    int rc = p.wait(120s);
    return std::make_pair(rc, p.output());
  };
  const std::string range = std::to_string(cut) + "-" + std::to_string(shard_count - 1);
  auto [rc, out] = ctl({"move-shards", range, "--to", "west"});
  REQUIRE_MESSAGE(rc == 0, out);
  MESSAGE(out);
  CHECK_MESSAGE(out.find("keys claimed") != std::string::npos, out);
  REQUIRE_MESSAGE(testing::eventually(30s,
                                      [&] {
                                        return spread_over(west, {"n1", "n2"}, shard_count - cut);
                                      }),
                  describe(west));
  // The load goes on across the cut: updates of strays (naming their seller), creates of
  // sellers whose home moved (their ids now drawn in west).
  REQUIRE(l.more_acked(60));
  auto before = created_count();
  REQUIRE(testing::eventually(60s, [&] { return created_count() >= before + 20; }));
  stop_creates = true;
  creator.join();
  l.finish();
  CHECK_MESSAGE(l.failures.empty(), (l.failures.empty() ? "" : l.failures.front()));
  CHECK_MESSAGE(create_failures.empty(), (create_failures.empty() ? "" : create_failures.front()));
  MESSAGE("UNAVAILABLE answers: " << l.unavailable << " updates, " << create_unavailable.load()
                                  << " creates");
  l.check_durable({&db, &east, &west});

  // Every offer of the sellers once, in the database of its shard's group; every key once.
  std::map<std::string, const testing::temp_db*> where; // offer id -> database
  std::map<std::string, std::string> offer_of;          // "seller/key" -> offer id
  std::map<std::string, int> key_count;
  std::string list = "'" + sellers[0] + "'";
  for (size_t i = 1; i < sellers.size(); ++i)
    list += ",'" + sellers[i] + "'";
  for (auto* d : {&db, &east, &west}) {
    auto rows = d->scalar("SELECT coalesce(string_agg(offer_id || ' ' || seller_id || '/' ||"
                          " external_id, ','), '') FROM offers WHERE seller_id IN ("
                          + list + ")");
    std::stringstream in{rows};
    for (std::string row; std::getline(in, row, ',');) {
      auto sp = row.find(' ');
      auto id = row.substr(0, sp);
      auto key = row.substr(sp + 1);
      CHECK_MESSAGE(where.count(id) == 0, id << " is in two databases");
      where[id] = d;
      offer_of[key] = id;
      ++key_count[key];
      auto shard = static_cast<int>(shard_of(id, shard_count));
      auto* group_db = shard < half ? &db : shard < cut ? &east : &west;
      CHECK_MESSAGE(group_db == d, id << " is not in its shard's group's database");
    }
  }
  for (auto& [key, n] : key_count)
    CHECK_MESSAGE(n == 1, key << " is held by " << n << " offers");
  CHECK(where.size() == l.ids.size() + created.size());
  for (auto& id : l.ids)
    CHECK_MESSAGE(where.count(id) == 1, id);
  for (auto& [key, id] : created) {
    auto found = offer_of.find(key);
    bool stored = found != offer_of.end() ? found->second == id : false;
    CHECK_MESSAGE(stored, key << " (" << id << ") is not stored under its key");
  }
  // A stray's key is claimed in its seller's home database, naming it; no claim names an offer
  // of its own database.
  int strays = 0;
  for (auto& [key, id] : offer_of) {
    auto seller = key.substr(0, key.find('/'));
    auto* home = home_of(seller);
    if (where.at(id) == home)
      continue;
    ++strays;
    CHECK_MESSAGE(home->scalar("SELECT count(*) FROM offer_keys WHERE offer_id = '" + id + "'")
                    == "1",
                  key << " (" << id << ") is not claimed at home");
  }
  CHECK(strays >= out_strays + in_strays);
  for (auto* d : {&db, &east, &west})
    CHECK(d->scalar("SELECT count(*) FROM offer_keys k JOIN offers o USING (offer_id)") == "0");
  // Through either node: every key found by key, every seller's offers listed.
  for (auto* n : {&n1, &n2})
    for (auto& [key, id] : offer_of) {
      v1::Offer o;
      auto st = n->get_by_key(key.substr(0, key.find('/')), key.substr(key.find('/') + 1), o);
      CHECK_MESSAGE(st.ok(), key << ": " << st.error_message());
      CHECK_MESSAGE(o.id() == id, key);
    }
  for (auto& seller : sellers) {
    std::set<std::string> want;
    for (auto& [key, id] : offer_of)
      if (key.rfind(seller + "/", 0) == 0)
        want.insert(id);
    std::set<std::string> listed;
    for (auto& x : n2.list_ids(seller, 50))
      CHECK_MESSAGE(listed.insert(x).second, x << " listed twice");
    CHECK_MESSAGE(listed == want, seller);
  }
  // A stray's key stays taken for a create at home.
  for (auto& [key, id] : offer_of) {
    auto seller = key.substr(0, key.find('/'));
    if (where.at(id) == home_of(seller))
      continue;
    v1::Offer dup;
    auto st = n1.create(key.substr(key.find('/') + 1), dup, seller);
    CHECK_MESSAGE(st.error_code() == grpc::StatusCode::ALREADY_EXISTS,
                  key << ": " << st.error_message());
    break;
  }
}

TEST_CASE("shard groups: a group's scheduled actions move with it: none made is lost, each fires "
          "on from the target, and the API's writes meanwhile are refused only to be retried "
          "(ADR 0023)") {
  testing::temp_db db;
  testing::temp_db east;
  testing::temp_db west;
  constexpr int half = shard_count / 2;
  const std::string range = std::to_string(half) + "-" + std::to_string(shard_count - 1);
  auto flags = declare_groups(db, east, {{"west", &west}});
  flags.erase(std::remove(flags.begin(), flags.end(), "--scheduled.enabled=false"), flags.end());
  flags.push_back("--scheduled.poll=50ms");
  node n1{"n1", db, flags};
  node n2{"n2", db, flags};
  await_group_spread(db, east);
  CHECK(testing::eventually(30s, [&] { return west.scalar("SELECT count(*) FROM nodes") == "2"; }));
  load l;
  create_seller_offers(n1, l);
  auto api = scheduled_stubs({&n1, &n2});
  // Actions made through both nodes until the move is over, each requeueing an offer into
  // the audit stage every 300 ms. UNAVAILABLE (the fence) is retried with the same id.
  std::atomic<bool> moving{true};
  std::mutex mtx;
  std::vector<std::string> made;
  std::vector<std::string> failures;
  int refused_then_retried = 0;
  std::thread maker{[&] {
    for (int i = 0; moving || i < 20; ++i) {
      auto id = "mv-" + std::to_string(i);
      for (int attempt = 0;; ++attempt) {
        auto st = create_requeue_action(*api[static_cast<size_t>(i) % 2], id,
                                        l.ids[static_cast<size_t>(i) % l.ids.size()]);
        std::lock_guard<std::mutex> g{mtx};
        // ALREADY_EXISTS: an earlier attempt of this id was stored after all.
        if (st.ok() || (attempt > 0 && st.error_code() == grpc::StatusCode::ALREADY_EXISTS)) {
          made.push_back(id);
          break;
        }
        if (st.error_code() == grpc::StatusCode::UNAVAILABLE && attempt < 200) {
          ++refused_then_retried;
          std::this_thread::sleep_for(50ms);
          continue;
        }
        failures.push_back(id + ": " + std::to_string(static_cast<int>(st.error_code())) + " "
                           + st.error_message());
        break;
      }
    }
  }};
  REQUIRE(testing::eventually(30s, [&] {
    std::lock_guard<std::mutex> g{mtx};
    return made.size() >= 10;
  }));
  child_process ctl{GOSTCTL_PATH,
                    {"--addr", n1.addr, "--who", "e2e", "move-shards", range, "--to", "west"}};
  int rc = ctl.wait(120s);
  moving = false;
  maker.join();
  REQUIRE_MESSAGE(rc == 0, ctl.output());
  CHECK_MESSAGE(failures.empty(), (failures.empty() ? "" : failures.front()));
  MESSAGE("actions made " << made.size() << ", refused during the fence and retried "
                          << refused_then_retried);

  // Every action made is in its home group's database: main's in the catalog's, east's in
  // west's now; east keeps none.
  CHECK(east.scalar("SELECT count(*) FROM scheduled_actions") == "0");
  for (auto& id : made) {
    bool home_moved = gost::shard_of(id, shard_count) >= half;
    auto q = "SELECT count(*) FROM scheduled_actions WHERE action_id = '" + id + "'";
    CHECK_MESSAGE(db.scalar(q) == (home_moved ? "0" : "1"), id);
    CHECK_MESSAGE(west.scalar(q) == (home_moved ? "1" : "0"), id);
  }
  // And each fires on, read through either node.
  CHECK_MESSAGE(fire_twice_more(*api[1], successes_of(*api[0], made)),
                "the actions did not all fire twice more after the move");
  CHECK(std::stoi(west.scalar("SELECT count(*) FROM scheduled_attempts")) > 0);
}
