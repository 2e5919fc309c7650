#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "gost/config/binding.hpp"
#include "gost/config/node_config.hpp"

using namespace gost::config;

namespace {

// argv/envp builders that own their strings.
struct args {
  std::vector<std::string> store;
  std::vector<char*> ptrs;
  args(std::initializer_list<std::string> xs) : store(xs) {
    for (auto& s : store)
      ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(store.size()); }
  char** argv() { return ptrs.data(); }
};

/// A text that must be refused, and what the error must say.
struct bad_case {
  const char* text;
  const char* says;
};

std::string temp_file(const std::string& content) {
  char name[] = "/tmp/gost-config-XXXXXX";
  int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(name) << content;
  return name;
}

} // namespace

TEST_CASE("defaults produce a complete config") {
  args a{"gostd"};
  args env{"PATH=/bin"};
  auto r = load_node_config(a.argc(), a.argv(), env.argv());
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->grpc.listen.host == "127.0.0.1");
  CHECK(r.config->grpc.listen.port == 50051);
  CHECK(r.config->shard.count == 64);
  CHECK(r.config->scheduler.threads >= 1);
  CHECK(r.config->pg.dsn.empty());
  CHECK(r.config->offer.idle_timeout == std::chrono::seconds{60});
}

TEST_CASE("command line beats environment beats file") {
  auto f = temp_file("; comment\n[shard]\ncount = 16\n[pg]\npool_size = 3 ; trailing\n"
                     "dsn = \"host=a port=1\"\n[log]\nlevel = debug\n");
  args a{"gostd", "--config", f, "--pg.pool_size=7"};
  args env{"GOST_SHARD_COUNT=32", "GOST_UNRELATED=1"};
  auto r = load_node_config(a.argc(), a.argv(), env.argv());
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->shard.count == 32); // env over file
  CHECK(r.config->pg.pool_size == 7); // cli over file
  CHECK(r.config->pg.dsn == "host=a port=1");
  CHECK(r.config->log.level == "debug");
  CHECK(r.config->config_dump.find("shard.count = 32  (env GOST_SHARD_COUNT)")
        != std::string::npos);
  std::remove(f.c_str());
}

TEST_CASE("space-separated option values work") {
  args a{"gostd", "--shard.count", "8", "--api.request_timeout", "250ms"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->shard.count == 8);
  CHECK(r.config->api.request_timeout == std::chrono::milliseconds{250});
}

TEST_CASE("unknown keys are rejected with the key named") {
  SUBCASE("command line") {
    args a{"gostd", "--shard.cuont=3"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("unknown config key `shard.cuont`") != std::string::npos);
  }
  SUBCASE("file") {
    auto f = temp_file("[pg]\ndsnn = x\n");
    args a{"gostd", "--config=" + f};
    auto r = load_node_config(a.argc(), a.argv(), nullptr);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("`pg.dsnn`") != std::string::npos);
    CHECK(r.error.find(":2") != std::string::npos); // the line number
    std::remove(f.c_str());
  }
}

TEST_CASE("out-of-range and mistyped values are rejected") {
  struct bad {
    std::string arg;
    std::string key;
  };
  for (auto& b : std::vector<bad>{{"--shard.count=0", "shard.count"},
                                  {"--shard.count=abc", "shard.count"},
                                  {"--pg.pool_size=100000", "pg.pool_size"},
                                  {"--log.level=loud", "log.level"},
                                  {"--api.request_timeout=10", "api.request_timeout"},
                                  {"--grpc.listen=nohostport", "grpc.listen"},
                                  {"--grpc.listen=h:70000", "grpc.listen"},
                                  {"--cluster.advertise_port=70000", "cluster.advertise_port"},
                                  {"--cluster.advertise_port=-1", "cluster.advertise_port"},
                                  {"--outbox.relay=maybe", "outbox.relay"},
                                  {"--log.levels=x", "log.levels"}}) {
    CAPTURE(b.arg);
    args a{"gostd", b.arg};
    auto r = load_node_config(a.argc(), a.argv(), nullptr);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("`" + b.key + "`") != std::string::npos);
  }
}

TEST_CASE("external stages are declared with an address and options") {
  std::vector<external_stage_config> out;
  std::string error;
  REQUIRE(parse_external_stages(
    "moderation=10.0.0.5:7000;interests=title|description;parallelism=4;rate=50;deadline_ms=500;"
    "attempts=2  pricing=localhost:7001",
    out, error));
  REQUIRE(out.size() == 2);
  CHECK(out[0].id == "moderation");
  CHECK(out[0].address == "10.0.0.5:7000");
  CHECK(out[0].interests == std::vector<std::string>{"title", "description"});
  CHECK(out[0].parallelism == 4);
  CHECK(out[0].rate_limit == 50);
  CHECK(out[0].deadline == std::chrono::milliseconds{500});
  CHECK(out[0].attempts == 2);
  CHECK(out[1].id == "pricing");
  CHECK(out[1].interests.empty());
  CHECK(out[1].parallelism == 16);
  CHECK(parse_external_stages("", out, error));
  CHECK(out.empty());

  for (auto [text, says] :
       {bad_case{"moderation", "ID=HOST:PORT"}, bad_case{"m=host", "HOST:PORT"},
        bad_case{"m=host:0", "port in [1, 65535]"}, bad_case{"m=a:1 m=b:2", "declared twice"},
        bad_case{"m=a:1;parallelism=0", "parallelism"},
        bad_case{"m=a:1;colour=red", "`colour` is unknown"}}) {
    CAPTURE(text);
    CHECK_FALSE(parse_external_stages(text, out, error));
    CHECK(error.find(says) != std::string::npos);
  }

  // Through the loader, the error names the key.
  args a{"gostd", "--stages.external=m=a:1;rate=-1"};
  args env{"PATH=/bin"};
  auto r = load_node_config(a.argc(), a.argv(), env.argv());
  CHECK_FALSE(r.config);
  CHECK(r.error.find("stages.external") != std::string::npos);
  CHECK(r.error.find("rate") != std::string::npos);
}

TEST_CASE("every key lands in the member it is bound to") {
  // One key of each member type, and one of a nested section, set away from its default.
  args a{"gostd",
         "--pg.pool_size=9",
         "--pg.embedded_port=6000",
         "--pg.dsn=host=x",
         "--caf.listen=0.0.0.0:7001",
         "--cluster.heartbeat=300ms",
         "--cluster.lease_timeout=3s",
         "--cluster.drain_timeout=7s",
         "--cluster.advertise_port=7101",
         "--outbox.relay=false",
         "--offer.max_resident=77",
         "--stages.expire.after=2h",
         "--stages.audit.enabled=true",
         "--stages.photos.workers=3",
         "--stages.external=m=h:1",
         "--log.levels=cluster=debug, kafka=warn"};
  args env{"PATH=/bin"};
  auto r = load_node_config(a.argc(), a.argv(), env.argv());
  REQUIRE_MESSAGE(r.config, r.error);
  auto& c = *r.config;
  CHECK(c.pg.pool_size == 9);
  CHECK(c.pg.embedded_port == 6000);
  CHECK(c.pg.dsn == "host=x");
  CHECK(c.caf.listen.host == "0.0.0.0");
  CHECK(c.caf.listen.port == 7001);
  CHECK(c.cluster.heartbeat == std::chrono::milliseconds{300});
  CHECK(c.cluster.lease_timeout == std::chrono::seconds{3});
  CHECK(c.cluster.drain_timeout == std::chrono::seconds{7});
  CHECK(c.cluster.advertise_port == 7101);
  CHECK_FALSE(c.outbox.relay);
  CHECK(c.offer.max_resident == 77);
  CHECK(c.stages.expire.after == std::chrono::hours{2});
  CHECK(c.stages.expire.enabled); // the default
  CHECK(c.stages.audit.enabled);
  CHECK(c.stages.photos.workers == 3);
  REQUIRE(c.stages.external.size() == 1);
  CHECK(c.stages.external[0].address == "h:1");
  REQUIRE(c.log.levels.size() == 2);
  CHECK(c.log.levels[0].logger == "cluster");
  CHECK(c.log.levels[0].level == "debug");
  CHECK(c.log.levels[1].logger == "kafka");
  CHECK(c.log.levels[1].level == "warn");
  // Derived values are resolved.
  CHECK_FALSE(c.node.id.empty());
  CHECK_FALSE(c.pg.embedded_script.empty());
}

TEST_CASE("the node's data lives under node.data_dir: relative paths are taken from it") {
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
  args env{"PATH=/bin"};
  {
    // By default: `var` of the working directory, made absolute once, with the embedded
    // server's data and the blobs under it.
    args a{"gostd"};
    auto r = load_node_config(a.argc(), a.argv(), env.argv());
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK(r.config->pg.embedded_dir == std::string{cwd} + "/var/pg");
    CHECK(r.config->images.blob_dir == std::string{cwd} + "/var/blobs");
  }
  {
    // One key moves both; a relative path under it is taken from it, an absolute one kept.
    args a{"gostd", "--node.data_dir=/srv/gost/", "--images.blob_dir=images/"};
    auto r = load_node_config(a.argc(), a.argv(), env.argv());
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK(r.config->pg.embedded_dir == "/srv/gost/pg");
    CHECK(r.config->images.blob_dir == "/srv/gost/images");
    args b{"gostd", "--node.data_dir=data", "--pg.embedded_dir=/var/lib/pg"};
    r = load_node_config(b.argc(), b.argv(), env.argv());
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK(r.config->pg.embedded_dir == "/var/lib/pg");
    CHECK(r.config->images.blob_dir == std::string{cwd} + "/data/blobs");
  }
  {
    args a{"gostd", "--node.data_dir="};
    auto r = load_node_config(a.argc(), a.argv(), env.argv());
    CHECK_FALSE(r.config);
    CHECK(r.error.find("node.data_dir") != std::string::npos);
  }
}

TEST_CASE("a key whose kind or bounds do not fit its member is refused when the schema is built") {
  struct cfg {
    uint16_t port = 0;
    std::string name;
  };
  bound_schema<cfg> keys;
  key_spec port;
  port.name = "x.port";
  port.kind = value_kind::integer;
  port.default_value = "1";
  port.min = 0;
  port.max = 70000; // more than a uint16_t holds
  CHECK_THROWS_AS(keys.add(port, bind_to(&cfg::port)), std::logic_error);
  port.max = 65535;
  CHECK_NOTHROW(keys.add(port, bind_to(&cfg::port)));
  key_spec name;
  name.name = "x.name";
  name.kind = value_kind::duration; // a duration cannot fill a string
  name.default_value = "1s";
  CHECK_THROWS_AS(keys.add(name, bind_to(&cfg::name)), std::logic_error);
}

TEST_CASE("validate() refuses half a TLS configuration, naming the keys") {
  args a{"gostd", "--cluster.tls_cert=/etc/gost/node.pem"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_FALSE(r.config);
  CHECK(r.error.find("must be set together") != std::string::npos);
  CHECK(r.error.find("set: cluster.tls_cert") != std::string::npos);
  CHECK(r.error.find("missing: cluster.tls_key, cluster.tls_ca") != std::string::npos);

  // The same rule on a config built by hand, and the other cross-key rules.
  args ok{"gostd"};
  auto base = load_node_config(ok.argc(), ok.argv(), nullptr);
  REQUIRE_MESSAGE(base.config, base.error);
  CHECK(validate(*base.config).empty());
  auto c = *base.config;
  c.cluster.tls_key = "k.pem";
  c.cluster.tls_ca = "ca.pem";
  CHECK(validate(c).find("missing: cluster.tls_cert") != std::string::npos);
  c.cluster.tls_cert = "c.pem";
  CHECK(validate(c).empty());
  c.cluster.lease_timeout = c.cluster.heartbeat;
  CHECK(validate(c).find("cluster.lease_timeout") != std::string::npos);
  c = *base.config;
  c.cluster.advertise_port = 7101; // a proxy's port forwarding to a link listener's port 0
  CHECK(validate(c).find("cluster.advertise_port needs a fixed port in caf.listen")
        != std::string::npos);
  c.caf.listen.port = 7001;
  CHECK(validate(c).empty());
  c = *base.config;
  c.feed.requests_topic = "feeds";
  CHECK(validate(c).find("kafka.brokers") != std::string::npos);
  // The feed processor sends on the requests topic: it needs one (and the brokers behind it).
  c = *base.config;
  CHECK_FALSE(c.feeds.enabled); // off by default
  CHECK(c.feeds.fetch_timeout == std::chrono::minutes{5});
  CHECK(c.feeds.keep_loads == 10);
  c.feeds.enabled = true;
  CHECK(validate(c).find("feed.enabled needs feed.requests_topic") != std::string::npos);
  c.feed.requests_topic = "feeds";
  c.kafka.brokers = "127.0.0.1:9092";
  CHECK(validate(c).empty());
  c.feeds.responses_group.clear();
  CHECK(validate(c).find("feed.responses_group") != std::string::npos);
  c = *base.config;
  CHECK(c.stages.photos.enabled); // the default: on wherever images.enabled is
  CHECK(c.stages.photos.recheck == std::chrono::seconds{1});
  CHECK(c.stages.photos.recheck_max == std::chrono::minutes{5});
  c.stages.photos.recheck_max = c.stages.photos.recheck / 2;
  CHECK(validate(c).find("stages.photos.recheck_max must be at least stages.photos.recheck")
        != std::string::npos);
  c = *base.config;
  c.images.notify_topic = "images.done";
  CHECK(validate(c).empty());
  c.outbox.relay = false;
  CHECK(validate(c).find("images.notify_topic needs outbox.relay") != std::string::npos);
  c = *base.config;
  for (auto bad : {"localhost", ":6379", "redis:0", "redis:65536", "redis:x"}) {
    c.images.redis_address = bad;
    CHECK_MESSAGE(validate(c).find("images.redis.address must be host:port") != std::string::npos,
                  bad);
  }
  c.images.redis_address = "127.0.0.1:6379";
  CHECK(validate(c).empty());
  c = *base.config;
  CHECK(c.images.queue == "postgres"); // the seed's default
  CHECK(c.images.kafka_topic_prefix == "gost.images.");
  CHECK(c.images.kafka_group == "gost-images");
  CHECK(c.kafka.session_timeout == std::chrono::seconds{45});
  c.images.queue = "kafka";
  CHECK(validate(c).find("images.queue=kafka needs kafka.brokers") != std::string::npos);
  c.kafka.brokers = "127.0.0.1:9092";
  CHECK(validate(c).empty());
  c.images.kafka_group.clear();
  CHECK(validate(c).find("images.kafka.group must not be empty") != std::string::npos);
}

TEST_CASE("limits: sizes take k/m suffixes; a request must have room for each content limit") {
  args a{"gostd",
         "--limits.offer_max_bytes=2k",
         "--limits.title_max_chars=10",
         "--limits.request_max_bytes=64k",
         "--limits.state_max_bytes=60k",
         "--limits.event_max_bytes=1k"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->limits.offer_max_bytes == 2048);
  CHECK(r.config->limits.title_max_chars == 10);
  CHECK(r.config->limits.request_max_bytes == 65536);
  CHECK(r.config->limits.state_max_bytes == 61440); // 60k + 4096 is exactly 64k: allowed

  args over{"gostd", "--limits.request_max_bytes=64k", "--limits.offer_max_bytes=1k",
            "--limits.event_max_bytes=1k", "--limits.state_max_bytes=61441"};
  auto refused = load_node_config(over.argc(), over.argv(), nullptr);
  REQUIRE_FALSE(refused.config);
  CHECK(refused.error.find("limits.request_max_bytes (65536) must be at least "
                           "limits.state_max_bytes (61441) + 4096")
        != std::string::npos);
  // The defaults leave the room.
  args ok{"gostd"};
  auto base = load_node_config(ok.argc(), ok.argv(), nullptr);
  REQUIRE_MESSAGE(base.config, base.error);
  auto c = *base.config;
  c.limits.offer_max_bytes = static_cast<uint32_t>(c.limits.request_max_bytes);
  CHECK(validate(c).find("limits.offer_max_bytes") != std::string::npos);
  c = *base.config;
  c.limits.event_max_bytes = static_cast<uint32_t>(c.limits.request_max_bytes) - 4095;
  CHECK(validate(c).find("limits.event_max_bytes") != std::string::npos);
  // Out of bounds names the key, with the bounds as a user writes them.
  args zero{"gostd", "--limits.title_max_chars=0"};
  auto z = load_node_config(zero.argc(), zero.argv(), nullptr);
  REQUIRE_FALSE(z.config);
  CHECK(z.error.find("`limits.title_max_chars`") != std::string::npos);
  args huge{"gostd", "--limits.request_max_bytes=2g"};
  auto h = load_node_config(huge.argc(), huge.argv(), nullptr);
  REQUIRE_FALSE(h.config);
  CHECK(h.error.find("[64k, 1g]") != std::string::npos);
}

TEST_CASE("an after-save event at the offer or state limit must fit kafka.message_max_bytes") {
  // The defaults fit: 1020 KiB of state + 4 KiB of envelope is exactly 1 MiB.
  args ok{"gostd"};
  auto base = load_node_config(ok.argc(), ok.argv(), nullptr);
  REQUIRE_MESSAGE(base.config, base.error);
  CHECK(base.config->kafka.message_max_bytes == 1 << 20);
  CHECK(base.config->limits.state_max_bytes + 4096 == base.config->kafka.message_max_bytes);

  // A producer limit below a content limit is refused, naming both keys.
  args small{"gostd", "--kafka.message_max_bytes=256k", "--limits.offer_max_bytes=512k",
             "--limits.state_max_bytes=200k"};
  auto refused = load_node_config(small.argc(), small.argv(), nullptr);
  REQUIRE_FALSE(refused.config);
  CHECK_MESSAGE(refused.error.find("kafka.message_max_bytes (262144) must be at least "
                                   "limits.offer_max_bytes (524288) + 4096")
                  != std::string::npos,
                refused.error);
  CHECK(refused.error.find("raise kafka.message_max_bytes") != std::string::npos);

  auto c = *base.config;
  c.limits.state_max_bytes += 1;
  CHECK(validate(c).find("limits.state_max_bytes (1044481) + 4096") != std::string::npos);
  c = *base.config;
  c.kafka.message_max_bytes = 2 << 20;
  c.limits.state_max_bytes = (2 << 20) - 4096;
  CHECK(validate(c).empty());
  c.limits.offer_max_bytes = (2 << 20) - 4095;
  CHECK(validate(c).find("limits.offer_max_bytes") != std::string::npos);
}

TEST_CASE("log.levels names known loggers and levels; a mistake names the key") {
  for (auto [text, says] : {bad_case{"clustr=debug", "no logger is named `clustr`"},
                            bad_case{"cluster=loud", "`loud` is not a level"},
                            bad_case{"cluster", "expected LOGGER=LEVEL"},
                            bad_case{"kafka=warn,kafka=info", "named twice"}}) {
    CAPTURE(text);
    args a{"gostd", std::string{"--log.levels="} + text};
    auto r = load_node_config(a.argc(), a.argv(), nullptr);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("`log.levels`") != std::string::npos);
    CHECK(r.error.find("(command line)") != std::string::npos);
    CHECK(r.error.find(says) != std::string::npos);
  }
  auto f = temp_file("[log]\nlevels = \"offers=trace\"\n");
  args a{"gostd", "--config", f};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  REQUIRE(r.config->log.levels.size() == 1);
  CHECK(r.config->log.levels[0].logger == "offers");
  std::remove(f.c_str());
  // Every logger the description lists is one log.levels accepts.
  auto* spec = node_schema().find("log.levels");
  REQUIRE(spec != nullptr);
  for (auto& name : logger_names())
    CHECK(spec->description.find("`" + name + "`") != std::string::npos);
}

TEST_CASE("stages.video: defaults, the allow-list parsed and checked, retry_max at least retry") {
  args none{"gostd"};
  auto d = load_node_config(none.argc(), none.argv(), nullptr);
  REQUIRE_MESSAGE(d.config, d.error);
  auto& v = d.config->stages.video;
  CHECK_FALSE(v.enabled);                  // it calls out: a deployment turns it on
  CHECK(v.allowed_hosts.suffixes.empty()); // any public host
  CHECK_FALSE(v.allow_private);
  CHECK(v.recheck == std::chrono::hours{24});
  CHECK(v.retry == std::chrono::minutes{1});
  CHECK(v.retry_max == std::chrono::hours{1});
  CHECK(v.timeout == std::chrono::seconds{10});
  CHECK(v.workers == 4);

  args a{"gostd", "--stages.video.allowed_hosts=YouTube.com, .vimeo.com  cdn.example.net",
         "--stages.video.allow_private=true"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->stages.video.allowed_hosts.suffixes
        == std::vector<std::string>{"youtube.com", "vimeo.com", "cdn.example.net"});
  CHECK(r.config->stages.video.allow_private);

  for (auto [text, says] : {bad_case{"*.example.com", "without `*`"},
                            bad_case{"https://example.com", "is not a host name"},
                            bad_case{"example.com:443", "is not a host name"}}) {
    CAPTURE(text);
    args b{"gostd", std::string{"--stages.video.allowed_hosts="} + text};
    auto bad = load_node_config(b.argc(), b.argv(), nullptr);
    CHECK_FALSE(bad.config);
    CHECK(bad.error.find("`stages.video.allowed_hosts`") != std::string::npos);
    CHECK(bad.error.find(says) != std::string::npos);
  }

  auto c = *d.config;
  c.stages.video.retry_max = c.stages.video.retry / 2;
  CHECK(validate(c).find("stages.video.retry_max must be at least stages.video.retry")
        != std::string::npos);
}

TEST_CASE("stages.notify: off by default; when on, a target, kafka.brokers and an http(s) URL") {
  args none{"gostd"};
  auto d = load_node_config(none.argc(), none.argv(), nullptr);
  REQUIRE_MESSAGE(d.config, d.error);
  auto& n = d.config->stages.notify;
  CHECK_FALSE(n.enabled); // it calls out: a deployment turns it on
  CHECK(n.topic == "gost.offer-notifications");
  CHECK(n.webhook.empty());
  CHECK(n.timeout == std::chrono::seconds{10});
  CHECK_FALSE(n.allow_private);

  args a{"gostd", "--stages.notify.enabled=true", "--kafka.brokers=127.0.0.1:9092",
         "--stages.notify.webhook=https://hooks.example.com/offers", "--stages.notify.timeout=3s"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  REQUIRE_MESSAGE(r.config, r.error);
  CHECK(r.config->stages.notify.enabled);
  CHECK(r.config->stages.notify.webhook == "https://hooks.example.com/offers");
  CHECK(r.config->stages.notify.timeout == std::chrono::seconds{3});

  auto c = *r.config;
  c.kafka.brokers.clear();
  CHECK(validate(c).find("stages.notify.enabled needs kafka.brokers") != std::string::npos);
  c = *r.config;
  c.stages.notify.topic.clear();
  c.stages.notify.webhook.clear();
  CHECK(validate(c).find("needs stages.notify.topic or stages.notify.webhook")
        != std::string::npos);
  c = *r.config;
  c.stages.notify.webhook = "hooks.example.com/offers";
  CHECK(validate(c).find("stages.notify.webhook must be an http:// or https:// URL")
        != std::string::npos);
  c.stages.notify.enabled = false; // off: nothing of it is checked
  CHECK(validate(c).empty());
}

TEST_CASE("a missing config file is an error") {
  args a{"gostd", "--config", "/nonexistent/gost.ini"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  CHECK_FALSE(r.config);
  CHECK(r.error.find("/nonexistent/gost.ini") != std::string::npos);
}

TEST_CASE("--help lists every key") {
  args a{"gostd", "--help"};
  auto r = load_node_config(a.argc(), a.argv(), nullptr);
  CHECK_FALSE(r.config);
  for (auto& k : node_schema().keys())
    CHECK(r.output.find("--" + k.name + "=") != std::string::npos);
}

TEST_CASE("docs/config.md is generated from the current schema") {
  std::ifstream in(GOST_SOURCE_DIR "/docs/config.md");
  std::stringstream buf;
  buf << in.rdbuf();
  CHECK_MESSAGE(buf.str() == node_schema().reference_markdown(),
                "docs/config.md is stale: run `cmake --build <build-dir> --target config-docs`");
}

TEST_CASE("an application names itself in --help, --version and its errors") {
  application app;
  app.name = "shop";
  app.version = "2.3.4";
  SUBCASE("--help") {
    args a{"shop", "--help"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK(r.output.rfind(std::string{"shop 2.3.4 (gost "} + gost_version() + ") - ", 0) == 0);
    CHECK(r.output.find("\nUsage: shop [--config FILE]") != std::string::npos);
    CHECK(r.output.find("Usage: gostd") == std::string::npos);
    CHECK(r.output.find("gostd --help") == std::string::npos);
  }
  SUBCASE("--version") {
    args a{"shop", "--version"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK(r.output == std::string{"shop 2.3.4 (gost "} + gost_version() + ")\n");
  }
  SUBCASE("--config-reference is headed with its name") {
    args a{"shop", "--config-reference"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK(r.output.rfind("# shop configuration reference\n", 0) == 0);
    CHECK(r.output.find("gostd") == std::string::npos);
  }
  SUBCASE("gostd keeps its name") {
    args a{"gostd", "--version"};
    CHECK(load_node_config(a.argc(), a.argv(), nullptr).output
          == std::string{"gostd "} + gost_version() + "\n");
  }
  SUBCASE("an unknown key points at the application's own --help") {
    args a{"shop", "--shard.cuont=3"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK(r.error.find("see `shop --help`") != std::string::npos);
  }
  SUBCASE("the config carries who runs it") {
    args a{"shop"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK(r.config->app.name == "shop");
    CHECK(r.config->app.version == "2.3.4");
  }
}

TEST_CASE("an application's stages get stages.<id>.enabled, like the built-in ones") {
  application app;
  app.name = "shop";
  app.stages = {"photo_count", "price.check"};
  SUBCASE("default true, set from the command line, the environment or the file") {
    auto f = temp_file("[stages.price.check]\nenabled = false\n");
    args a{"shop", "--config", f, "--stages.photo_count.enabled=false"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK_FALSE(r.config->stages.application.at("photo_count"));
    CHECK_FALSE(r.config->stages.application.at("price.check"));
    CHECK(r.config->config_dump.find("stages.price.check.enabled = false  (file ")
          != std::string::npos);
    args env{"GOST_STAGES_PHOTO_COUNT_ENABLED=false"};
    args plain{"shop"};
    r = load_node_config(plain.argc(), plain.argv(), env.argv(), app);
    REQUIRE_MESSAGE(r.config, r.error);
    CHECK_FALSE(r.config->stages.application.at("photo_count"));
    CHECK(r.config->stages.application.at("price.check")); // the default
    std::remove(f.c_str());
  }
  SUBCASE("validated like any boolean") {
    args a{"shop", "--stages.photo_count.enabled=maybe"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("`stages.photo_count.enabled`") != std::string::npos);
  }
  SUBCASE("listed by --help after the built-in stages' keys, naming the stage") {
    args a{"shop", "--help"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    auto keys = node_schema(app);
    for (auto& k : keys.keys())
      CHECK(r.output.find("--" + k.name + "=") != std::string::npos);
    auto at = r.output.find("--stages.photo_count.enabled=<boolean>  (default: true;");
    REQUIRE(at != std::string::npos);
    CHECK(at > r.output.find("--stages.photos.workers="));
    CHECK(at < r.output.find("--log.level="));
    CHECK(r.output.find("Run the application's stage `photo_count` (registered by shop", at)
          != std::string::npos);
    CHECK(r.output.find("--stages.price.check.enabled=") != std::string::npos);
  }
  SUBCASE("a stage nobody registered has no key") {
    args a{"shop", "--stages.nope.enabled=false"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr, app);
    CHECK_FALSE(r.config);
    CHECK(r.error.find("unknown config key `stages.nope.enabled` (command line)")
          != std::string::npos);
    args env{"GOST_STAGES_NOPE_ENABLED=false"}; // unrelated variables are ignored
    args plain{"shop"};
    CHECK(load_node_config(plain.argc(), plain.argv(), env.argv(), app).config);
  }
  SUBCASE("gostd has no application keys") {
    CHECK(node_schema().find("stages.photo_count.enabled") == nullptr);
    args a{"gostd", "--stages.photo_count.enabled=false"};
    auto r = load_node_config(a.argc(), a.argv(), nullptr);
    CHECK(r.error.find("unknown config key `stages.photo_count.enabled`") != std::string::npos);
  }
  SUBCASE("an id that cannot name its key is refused, naming the id") {
    for (auto [id, says] :
         {std::pair{"expire", "stage id `expire` is a built-in stage's"},
          std::pair{"photos", "stage id `photos` is a built-in stage's"},
          std::pair{"two words", "stage id `two words` cannot name the config key"},
          std::pair{"a=b", "stage id `a=b` cannot name the config key"}}) {
      application bad;
      bad.stages = {id};
      args a{"gostd"};
      auto r = load_node_config(a.argc(), a.argv(), nullptr, bad);
      CHECK_FALSE(r.config);
      CHECK_MESSAGE(r.error.find(says) != std::string::npos, r.error);
      CHECK_THROWS_AS(node_schema(bad), std::invalid_argument);
    }
  }
}
