#include "gost/config/node_config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "gost/config/binding.hpp"

#ifndef GOST_VERSION
#define GOST_VERSION "dev"
#endif
#ifndef GOST_DEFAULT_PG_SCRIPT
#define GOST_DEFAULT_PG_SCRIPT "scripts/pg.sh"
#endif

namespace gost::config {

namespace {

key_spec str(std::string name, std::string def, std::string desc) {
  key_spec k;
  k.name = std::move(name);
  k.kind = value_kind::string;
  k.default_value = std::move(def);
  k.description = std::move(desc);
  return k;
}

key_spec choice(std::string name, std::string def, std::vector<std::string> choices,
                std::string desc) {
  auto k = str(std::move(name), std::move(def), std::move(desc));
  k.choices = std::move(choices);
  return k;
}

key_spec num(value_kind kind, std::string name, std::string def, int64_t min, int64_t max,
             std::string desc) {
  key_spec k;
  k.name = std::move(name);
  k.kind = kind;
  k.default_value = std::move(def);
  k.min = min;
  k.max = max;
  k.description = std::move(desc);
  return k;
}

/// The levels a logger may be set to (`log.level` offers the same).
const std::vector<std::string>& level_names() {
  static const std::vector<std::string> names{"trace", "debug", "info", "warn", "error", "off"};
  return names;
}

std::string trimmed(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + x;
  return out;
}

/// A whole-string integer in [min, max], or nullopt.
std::optional<int64_t> whole_number(const std::string& text, int64_t min, int64_t max) {
  try {
    size_t pos = 0;
    auto v = std::stoll(text, &pos);
    if (pos != text.size() || v < min || v > max)
      return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(sep, start);
    if (end == std::string::npos)
      end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

} // namespace

bool parse_external_stages(const std::string& text, std::vector<external_stage_config>& out,
                           std::string& error) {
  out.clear();
  std::istringstream words{text};
  std::string entry;
  while (words >> entry) {
    auto parts = split(entry, ';');
    auto eq = parts[0].find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "`" + entry + "`: expected ID=HOST:PORT[;KEY=VALUE...]";
      return false;
    }
    external_stage_config c;
    c.id = parts[0].substr(0, eq);
    c.address = parts[0].substr(eq + 1);
    auto colon = c.address.rfind(':');
    if (colon == std::string::npos || colon == 0
        || !whole_number(c.address.substr(colon + 1), 1, 65535)) {
      error = "`" + entry + "`: the address must be HOST:PORT with a port in [1, 65535]";
      return false;
    }
    for (auto& other : out)
      if (other.id == c.id) {
        error = "stage id `" + c.id + "` is declared twice";
        return false;
      }
    for (size_t i = 1; i < parts.size(); ++i) {
      auto kv = parts[i].find('=');
      auto key = parts[i].substr(0, kv);
      auto value = kv == std::string::npos ? std::string{} : parts[i].substr(kv + 1);
      auto bad = [&](const char* want) {
        error = "`" + entry + "`: option `" + key + "` " + want;
        return false;
      };
      if (key == "interests") {
        for (auto& f : split(value, '|'))
          if (!f.empty())
            c.interests.push_back(f);
      } else if (key == "parallelism") {
        auto v = whole_number(value, 1, 1024);
        if (!v)
          return bad("must be an integer in [1, 1024]");
        c.parallelism = static_cast<int>(*v);
      } else if (key == "rate") {
        auto v = whole_number(value, 0, 1'000'000);
        if (!v)
          return bad("must be an integer in [0, 1000000] (calls per second; 0: unlimited)");
        c.rate_limit = static_cast<double>(*v);
      } else if (key == "deadline_ms") {
        auto v = whole_number(value, 1, 600'000);
        if (!v)
          return bad("must be an integer in [1, 600000]");
        c.deadline = std::chrono::milliseconds{*v};
      } else if (key == "after_save") {
        if (value != "0" && value != "1")
          return bad("must be 0 or 1");
        c.after_save = value == "1";
      } else if (key == "attempts") {
        auto v = whole_number(value, 1, 100);
        if (!v)
          return bad("must be an integer in [1, 100]");
        c.attempts = static_cast<int>(*v);
      } else {
        return bad(
          "is unknown (known: interests, parallelism, rate, deadline_ms, attempts, after_save)");
      }
    }
    out.push_back(std::move(c));
  }
  return true;
}

const std::vector<std::string>& logger_names() {
  static const std::vector<std::string> names{"node",  "pg",      "cluster", "api", "kafka",
                                              "feeds", "console", "offers",  "kit", "scheduled"};
  return names;
}

namespace {

/// `log.levels`: `LOGGER=LEVEL` entries separated by commas (spaces around them allowed).
std::string parse_logger_levels(const std::string& text, std::vector<logger_level>& out) {
  out.clear();
  if (trimmed(text).empty())
    return {};
  for (auto& raw : split(text, ',')) {
    auto entry = trimmed(raw);
    auto eq = entry.find('=');
    if (eq == std::string::npos)
      return "`" + entry + "`: expected LOGGER=LEVEL, entries separated by commas";
    logger_level l{trimmed(entry.substr(0, eq)), trimmed(entry.substr(eq + 1))};
    auto& loggers = logger_names();
    if (std::find(loggers.begin(), loggers.end(), l.logger) == loggers.end())
      return "`" + entry + "`: no logger is named `" + l.logger + "` (loggers: " + joined(loggers)
             + ")";
    auto& levels = level_names();
    if (std::find(levels.begin(), levels.end(), l.level) == levels.end())
      return "`" + entry + "`: `" + l.level + "` is not a level (levels: " + joined(levels) + ")";
    for (auto& before : out)
      if (before.logger == l.logger)
        return "logger `" + l.logger + "` is named twice";
    out.push_back(std::move(l));
  }
  return {};
}

/// `stages.video.allowed_hosts`: host names separated by commas or spaces.
std::string parse_host_suffixes(const std::string& text, std::vector<std::string>& out) {
  out.clear();
  std::string word;
  std::string all;
  for (char c : text)
    all += c == ',' ? ' ' : c;
  std::istringstream words{all};
  while (words >> word) {
    for (auto& c : word)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!word.empty() && word.front() == '.')
      word.erase(0, 1);
    if (word.find('*') != std::string::npos)
      return "`" + word
             + "`: write the domain without `*` (`example.com` matches example.com "
               "and every name under it)";
    for (char c : word)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
        return "`" + word
               + "` is not a host name (letters, digits, `.` and `-`; no scheme, "
                 "port or path)";
    if (!word.empty())
      out.push_back(word);
  }
  return {};
}

} // namespace

// Member types parsed from a string key (binding.hpp): their parse runs when a value is read,
// so a bad one is reported with its source.

template <>
struct member_traits<endpoint> {
  static constexpr bool parses_text = true;
  static bool fits(const key_spec& k) { return k.kind == value_kind::string; }
  static std::string parse(const value& v, endpoint& out) {
    auto& text = v.text;
    auto colon = text.rfind(':');
    auto port = colon == std::string::npos || colon == 0
                  ? std::nullopt
                  : whole_number(text.substr(colon + 1), 0, 65535);
    if (!port)
      return "expected host:port with a port in [0, 65535]";
    out.host = text.substr(0, colon);
    out.port = static_cast<uint16_t>(*port);
    return {};
  }
};

template <>
struct member_traits<std::vector<external_stage_config>> {
  static constexpr bool parses_text = true;
  static bool fits(const key_spec& k) { return k.kind == value_kind::string; }
  static std::string parse(const value& v, std::vector<external_stage_config>& out) {
    std::string why;
    parse_external_stages(v.text, out, why);
    return why;
  }
};

template <>
struct member_traits<host_suffixes> {
  static constexpr bool parses_text = true;
  static bool fits(const key_spec& k) { return k.kind == value_kind::string; }
  static std::string parse(const value& v, host_suffixes& out) {
    return parse_host_suffixes(v.text, out.suffixes);
  }
};

template <>
struct member_traits<std::vector<logger_level>> {
  static constexpr bool parses_text = true;
  static bool fits(const key_spec& k) { return k.kind == value_kind::string; }
  static std::string parse(const value& v, std::vector<logger_level>& out) {
    return parse_logger_levels(v.text, out);
  }
};

namespace {

using node_keys = bound_schema<node_config>;

/// Why `id` cannot name the key `stages.<id>.enabled` of an application's stage, or "".
std::string stage_key_problem(const std::string& id, const schema& builtin) {
  if (id.empty())
    return "a stage needs an id";
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return "stage id `" + id
             + "` cannot name the config key `stages.<id>.enabled`: use letters, digits, `_`, "
               "`.` and `-`";
  if (builtin.find("stages." + id + ".enabled") != nullptr)
    return "stage id `" + id + "` is a built-in stage's (`stages." + id
           + ".enabled` is gost's key); give the application's stage another id";
  return {};
}

/// `stages.<id>.enabled` of one of the application's stages, filling
/// stages_config::application[id].
void add_application_stage(node_keys& k, const std::string& id, const std::string& app) {
  binding<node_config> b;
  b.fits = [](const key_spec& spec) { return spec.kind == value_kind::boolean; };
  b.assign = [id](const value& v, node_config& c) {
    c.stages.application[id] = v.number != 0;
    return std::string{};
  };
  k.add(num(value_kind::boolean, "stages." + id + ".enabled", "true", 0, 1,
            "Run the application's stage `" + id + "` (registered by " + app
              + " with node_builder::add_stage). false: this node does not register it; its "
                "queue entries coming due here are dropped, as for any stage the node does not "
                "know."),
        std::move(b));
}

node_keys make_node_keys(const application& app) {
  using vk = value_kind;
  node_keys k;
  k.add(str("node.id", "",
            "Unique name of this node in the cluster. Empty: derived from the host name and "
            "the gRPC port."),
        bind_to(&node_config::node, &identity_config::id));
  k.add(str("node.data_dir", "var",
            "Directory of the node's data: the embedded PostgreSQL (`pg.embedded_dir`) and the "
            "image and feed blobs (`images.blob_dir`) go under it when those are relative. "
            "Relative: from the working directory, made absolute at start (the packaged node: "
            "/var/lib/gost)."),
        bind_to(&node_config::node, &identity_config::data_dir));
  k.add(str("grpc.listen", "127.0.0.1:50051",
            "host:port of the public gRPC API (OfferService, server reflection). Port 0 "
            "picks a free port; the chosen one is logged and written to `grpc.port_file`."),
        bind_to(&node_config::grpc, &grpc_config::listen));
  k.add(str("grpc.port_file", "",
            "When set, the node writes the bound gRPC port and then the admin HTTP port, one per "
            "line, to this file once it serves (for tests and scripts that use port 0)."),
        bind_to(&node_config::grpc, &grpc_config::port_file));
  k.add(str("grpc.tls_cert", "",
            "PEM file of the certificate (chain) the public gRPC API (`grpc.listen`) presents: "
            "set it with `grpc.tls_key` and the API speaks TLS only (a plaintext client fails). "
            "Empty: plaintext (loopback or a private network only; docs/security.md)."),
        bind_to(&node_config::grpc, &grpc_config::tls_cert));
  k.add(str("grpc.tls_key", "", "PEM file of the private key of `grpc.tls_cert`."),
        bind_to(&node_config::grpc, &grpc_config::tls_key));
  k.add(str("grpc.tls_client_ca", "",
            "PEM file of the CA that signs client certificates for `grpc.listen` (needs "
            "`grpc.tls_cert`). A client certificate's subject (CN or a SAN) then maps to a "
            "role through `auth.cert_roles`."),
        bind_to(&node_config::grpc, &grpc_config::tls_client_ca));
  k.add(choice("grpc.tls_client_auth", "optional", {"optional", "required"},
               "With `grpc.tls_client_ca`: `required` refuses a TLS client without a "
               "certificate the CA signed (at the handshake); `optional` verifies one when given "
               "and lets token callers in without."),
        bind_to(&node_config::grpc, &grpc_config::tls_client_auth));
  k.add(str("caf.listen", "127.0.0.1:0",
            "host:port of the node-to-node link (gost.v1.NodeService over gRPC): requests for "
            "shards owned by another node are forwarded there. Port 0 picks a free port; the "
            "chosen one is registered in the `nodes` table."),
        bind_to(&node_config::caf, &node_link_config::listen));
  k.add(str("cluster.tls_cert", "",
            "PEM certificate (chain) of this node for mutual TLS on node-to-node links. Set "
            "together with `cluster.tls_key` and `cluster.tls_ca`; all empty: plaintext links "
            "(loopback or a private network only). Certificates must name `gost-node` as a "
            "subject alternative name (docs/cluster.md)."),
        bind_to(&node_config::cluster, &cluster_config::tls_cert));
  k.add(str("cluster.tls_key", "", "PEM private key of `cluster.tls_cert`."),
        bind_to(&node_config::cluster, &cluster_config::tls_key));
  k.add(str("cluster.tls_ca", "",
            "PEM certificate of the CA that signs every node's certificate; a peer without a "
            "certificate it signed is refused."),
        bind_to(&node_config::cluster, &cluster_config::tls_ca));
  k.add(str("cluster.advertise_host", "",
            "The host other nodes use to reach this node's `caf.listen`. Empty: the host of "
            "`caf.listen` (127.0.0.1 when that is 0.0.0.0)."),
        bind_to(&node_config::cluster, &cluster_config::advertise_host));
  k.add(num(vk::integer, "cluster.advertise_port", "0", 0, 65535,
            "The port other nodes dial to reach this node's `caf.listen` (with "
            "`cluster.advertise_host`): set it when something between the nodes forwards "
            "another port to the link listener (a NAT, a proxy). 0: the port the link "
            "listener bound."),
        bind_to(&node_config::cluster, &cluster_config::advertise_port));
  k.add(num(vk::duration, "cluster.heartbeat", "1s", 50, 60'000,
            "How often a node renews its heartbeat and its shard leases, takes free leases up "
            "to an even share and hands shards to nodes below theirs."),
        bind_to(&node_config::cluster, &cluster_config::heartbeat));
  k.add(num(vk::duration, "cluster.lease_timeout", "5s", 200, 600'000,
            "A node (and its leases) whose heartbeat is older than this is dead: its shards "
            "are taken by the others, at a new epoch. Keep it several heartbeats long. A killed "
            "process is noticed sooner, by its liveness lock (docs/cluster.md); this is for a "
            "paused or cut-off one. gost's sessions end a transaction idle for half of it."),
        bind_to(&node_config::cluster, &cluster_config::lease_timeout));
  k.add(str("kafka.brokers", "",
            "Kafka bootstrap servers (host:port,...) the after-save events go to. Empty: "
            "librdkafka's in-process mock cluster, for a zero-setup run (events are not kept)."),
        bind_to(&node_config::kafka, &kafka_config::brokers));
  k.add(str("kafka.topic", "gost.offer-saved",
            "Topic of the after-save events: one message per saved offer, key = offer id, value "
            "= gost.v1.OfferSaved."),
        bind_to(&node_config::kafka, &kafka_config::topic));
  k.add(str("kafka.after_save_group", "gost.after-save",
            "Kafka consumer group of the nodes that feed stages' after_save hooks from "
            "`kafka.topic` (only when a stage has one and `kafka.brokers` is set). Every event "
            "reaches each hook once per group, at least once."),
        bind_to(&node_config::kafka, &kafka_config::after_save_group));
  k.add(str("feed.requests_topic", "",
            "Kafka topic of feed load requests (gost.v1.FeedRequest, docs/feeds.md). Empty: the "
            "feed exchange is off. Needs `kafka.brokers`."),
        bind_to(&node_config::feed, &feed_config::requests_topic));
  k.add(str("feed.responses_topic", "gost.feed-responses",
            "Kafka topic of the per-offer results and terminal summaries (gost.v1.FeedResponse)."),
        bind_to(&node_config::feed, &feed_config::responses_topic));
  k.add(str("feed.group", "gost.feeds", "Kafka consumer group of the nodes that apply feed loads."),
        bind_to(&node_config::feed, &feed_config::group));
  k.add(num(vk::duration, "kafka.message_timeout", "30s", 1000, 3'600'000,
            "How long the producer tries to deliver an event before the relay gives the round "
            "up and tries again (the outbox rows stay in PostgreSQL meanwhile)."),
        bind_to(&node_config::kafka, &kafka_config::message_timeout));
  k.add(num(vk::size, "kafka.message_max_bytes", "1m", 64 * 1024, 1'000'000'000,
            "Largest message the outbox relay's producer sends (librdkafka's "
            "`message.max.bytes`). Set it to the `max.message.bytes` of the after-save and "
            "image topics (a broker's default: 1 MiB + 12). The node refuses to start when "
            "`limits.offer_max_bytes` or `limits.state_max_bytes` plus 4 KiB of envelope does "
            "not fit; an event larger still (an offer with many states) is parked, not sent "
            "(docs/operations.md, \"Parked outbox rows\")."),
        bind_to(&node_config::kafka, &kafka_config::message_max_bytes));
  k.add(num(vk::duration, "kafka.session_timeout", "45s", 6000, 300'000,
            "How long a consumer group (the after_save hooks, the feed exchange, the image "
            "queue) waits for a member that stopped heartbeating, a node killed or cut off, "
            "before it gives that member's partitions to the others (librdkafka's "
            "`session.timeout.ms`; the brokers bound it by group.min/max.session.timeout.ms)."),
        bind_to(&node_config::kafka, &kafka_config::session_timeout));
  k.add(num(vk::boolean, "outbox.relay", "true", 0, 1,
            "Publish the committed after-save events of the shards this node owns to Kafka. "
            "false: they stay in the outbox table (for tests, or when another process relays "
            "them)."),
        bind_to(&node_config::outbox, &outbox_config::relay));
  k.add(num(vk::duration, "outbox.poll", "50ms", 5, 60'000,
            "How often the outbox relay looks for committed events of the shards this node "
            "owns while it finds some."),
        bind_to(&node_config::outbox, &outbox_config::poll));
  k.add(num(vk::duration, "outbox.poll_idle", "1s", 5, 60'000,
            "The longest wait between the outbox relay's looks that find nothing: each such "
            "look doubles the wait from outbox.poll up to this. The first event after a quiet "
            "spell goes out within it; a look that finds events brings back outbox.poll."),
        bind_to(&node_config::outbox, &outbox_config::poll_idle));
  k.add(num(vk::integer, "cluster.max_moves", "4", 1, 1024,
            "Shards a node hands off at once when another node is below its share (a join "
            "or a leave never moves everything at once)."),
        bind_to(&node_config::cluster, &cluster_config::max_moves));
  k.add(num(vk::duration, "cluster.drain_timeout", "20s", 100, 600'000,
            "A shard's hand-off (a rebalance, `gostctl drain`, a stopping node) waits this long "
            "for its entity actors to finish what they hold; past it those still running are "
            "cut: sent a kill (taken when a call they are inside returns), logged with their "
            "ids (`shard drain cut`) and counted "
            "(`gost_*_drain_cut_total`), and the lease goes anyway (fencing refuses anything "
            "they still write; the next owner redoes their unfinished events). Keep it below "
            "`shutdown.timeout`."),
        bind_to(&node_config::cluster, &cluster_config::drain_timeout));
  k.add(str("http.listen", "127.0.0.1:0",
            "host:port (IPv4) of the admin HTTP endpoint: `/` the web console (read-only, "
            "JSON under `/api/`), `/status` status page, `/healthz` (liveness), `/readyz` "
            "(readiness: 200, or 503 with the reason), `/metrics` (Prometheus). Port 0 picks "
            "a free port."),
        bind_to(&node_config::http, &http_config::listen));
  {
    auto token = str("console.token", "",
                     "Token the console's verbs need (gostctl pause, resume, passivate, requeue, "
                     "retry-dead, discard-dead, drain: `--token` or `GOST_TOKEN`, sent as gRPC "
                     "metadata `authorization: Bearer <token>`). Empty: the verbs work only "
                     "while `grpc.listen` is a loopback address, and are refused naming this key "
                     "otherwise. With `auth.tokens` (roles), an admin token like theirs. Never "
                     "shown in the configuration dump.");
    token.secret = true;
    k.add(std::move(token), bind_to(&node_config::console, &console_config::token));
  }
  {
    auto tokens = str("auth.tokens", "",
                      "Callers of the gRPC API and the admin HTTP listener, comma-separated "
                      "`name:role:token` entries; role is `read` (gets, lists, the console's "
                      "reads, /metrics), `write` (read, and every mutation) or `admin` (write, "
                      "and the console's verbs: pause, drain, retry-dead...). A caller sends "
                      "`authorization: Bearer <token>` (gostctl --token, GOST_TOKEN). Set (or "
                      "`auth.tokens_file`, or `auth.cert_roles`): every call but health and "
                      "reflection needs a credential, and `console.token` is an admin token. "
                      "Empty: no roles (only the verbs are guarded, by `console.token` or "
                      "loopback). Never shown in the configuration dump.");
    tokens.secret = true;
    k.add(std::move(tokens), bind_to(&node_config::auth, &auth_config::tokens));
  }
  k.add(str("auth.tokens_file", "",
            "File of more `auth.tokens` entries, one `name:role:token` a line (`#` starts a "
            "comment): keeps the secrets out of the configuration. Read at start."),
        bind_to(&node_config::auth, &auth_config::tokens_file));
  k.add(str("auth.cert_roles", "",
            "Roles of client certificates (`grpc.tls_client_ca`), comma-separated "
            "`subject:role` entries: the certificate's common name or a subject alternative "
            "name, and `read`, `write` or `admin`."),
        bind_to(&node_config::auth, &auth_config::cert_roles));
  k.add(num(vk::integer, "console.recent_events", "16", 0, 1024,
            "Events each entity actor keeps for `gostctl offer ID` (kind, source, stage, result, "
            "duration, version; reads are traced, not kept), in a ring that grows to this size "
            "as the actor sees events: about 32 bytes per event per actor that saw that many. "
            "0: none kept (the live trace still works)."),
        bind_to(&node_config::console, &console_config::recent_events));
  k.add(num(vk::duration, "console.sample_interval", "5s", 100, 3'600'000,
            "How often the node samples its own figures for the web console's plots "
            "(`/api/series`: runs/s, failures/s, backlog and write lag per stage and per kind, "
            "kept in memory; no outside service)."),
        bind_to(&node_config::console, &console_config::sample_interval));
  k.add(num(vk::integer, "console.sample_count", "360", 2, 100'000,
            "Samples the node keeps for the web console's plots: the plots span "
            "`console.sample_count` x `console.sample_interval` (360 x 5s: 30 minutes). About "
            "40 bytes per sample per stage or kind."),
        bind_to(&node_config::console, &console_config::sample_count));
  k.add(str("pg.dsn", "",
            "libpq connection string of the PostgreSQL server holding gost's tables, e.g. "
            "`postgresql://gost@127.0.0.1:5432/gost`. Empty: start (or reuse) the embedded "
            "server described by `pg.embedded_*`."),
        bind_to(&node_config::pg, &pg_config::dsn));
  k.add(str("pg.embedded_dir", "pg",
            "Data directory of the embedded PostgreSQL server (created with initdb on first "
            "start). Relative paths are taken from `node.data_dir`."),
        bind_to(&node_config::pg, &pg_config::embedded_dir));
  k.add(num(vk::integer, "pg.embedded_port", "54329", 1024, 65535,
            "Loopback port of the embedded PostgreSQL server."),
        bind_to(&node_config::pg, &pg_config::embedded_port));
  k.add(str("pg.embedded_script", "",
            "Script that starts the embedded server (`pg.sh start`). Empty: "
            "`../libexec/gost/pg.sh` beside the binary (an installed node), else "
            "`scripts/pg.sh` of the source tree the node was built from."),
        bind_to(&node_config::pg, &pg_config::embedded_script));
  k.add(num(vk::integer, "pg.pool_size", "4", 1, 256,
            "Number of PostgreSQL connections of this node's pool (writers, stores, API "
            "calls). The node opens two more: the cluster manager's (heartbeats, leases) and "
            "the liveness connection that LISTENs, so pool_size + 2 in all."),
        bind_to(&node_config::pg, &pg_config::pool_size));
  k.add(num(vk::duration, "pg.connect_timeout", "10s", 100, 600'000,
            "How long the node waits for PostgreSQL at start before giving up."),
        bind_to(&node_config::pg, &pg_config::connect_timeout));
  k.add(num(vk::integer, "shard.count", "64", 1, 65536,
            "Number of shards of the installation. Fixed at the first start and stored in the "
            "database; a node configured with another value refuses to start."),
        bind_to(&node_config::shard, &shard_config::count));
  k.add(num(vk::integer, "scheduler.threads", "0", 0, 256,
            "CAF scheduler worker threads. 0: the number of cores."),
        bind_to(&node_config::scheduler, &scheduler_config::threads));
  k.add(choice("scheduler.policy", "sharing", {"sharing", "stealing"},
               "CAF scheduling policy. `sharing`: one queue, idle workers sleep; measured "
               "fastest on small machines where PostgreSQL shares the cores (the stage "
               "benchmark ran 1.5x faster on 2 cores). `stealing`: per-worker queues whose idle "
               "workers poll each other (CAF's default; can pay off with many cores)."),
        bind_to(&node_config::scheduler, &scheduler_config::policy));
  k.add(num(vk::duration, "offer.idle_timeout", "60s", 10, 86'400'000,
            "An offer actor with no event for this long is passivated (stopped; its state "
            "stays in PostgreSQL)."),
        bind_to(&node_config::offer, &offer_config::idle_timeout));
  k.add(num(vk::integer, "offer.max_resident", "100000", 1, 100'000'000,
            "At most this many offer actors in memory per shard; beyond it the least recently "
            "used one is passivated (its state stays in PostgreSQL)."),
        bind_to(&node_config::offer, &offer_config::max_resident));
  k.add(num(vk::duration, "entity.idle_timeout", "60s", 10, 86'400'000,
            "An actor of an application's actor type (a durable entity, a task) with no event "
            "for this long is passivated (its state stays in PostgreSQL)."),
        bind_to(&node_config::entity, &entity_config::idle_timeout));
  k.add(num(vk::integer, "entity.max_resident", "100000", 1, 100'000'000,
            "At most this many actors of the application's actor types in memory per shard, "
            "all kinds together; beyond it the least recently used one is passivated."),
        bind_to(&node_config::entity, &entity_config::max_resident));
  k.add(num(vk::duration, "api.request_timeout", "10s", 10, 600'000,
            "Deadline for one API request inside the node (routing, actor, database)."),
        bind_to(&node_config::api, &api_config::request_timeout));
  k.add(num(vk::duration, "api.request_ttl", "24h", 60'000, 2'592'000'000,
            "A write sent with a request_id is answered again, not applied again, when it is "
            "retried within this long; after it the id is forgotten (docs/api.md, Retries)."),
        bind_to(&node_config::api, &api_config::request_ttl));
  // The image functions (seed 003; actors/images/README.md).
  k.add(num(vk::boolean, "images.enabled", "true", 0, 1,
            "Serve gost.v1.ImageService and run the image functions' pools on the partitions "
            "(shards) this node holds."),
        bind_to(&node_config::images, &images_config::enabled));
  k.add(num(vk::integer, "images.ratio_workers", "4", 0, 256,
            "Threads of the Ratio pool (header reads: cheap). 0: this node computes no Ratio."),
        bind_to(&node_config::images, &images_config::ratio_workers));
  k.add(num(vk::integer, "images.preview_workers", "2", 0, 256,
            "Threads of the Preview pool (decodes with shrink-on-load)."),
        bind_to(&node_config::images, &images_config::preview_workers));
  k.add(
    num(vk::integer, "images.main_color_workers", "2", 0, 256, "Threads of the MainColor pool."),
    bind_to(&node_config::images, &images_config::main_color_workers));
  k.add(num(vk::integer, "images.rotate_workers", "1", 0, 256,
            "Threads of the Rotate pool (full decodes and encodes: the costliest)."),
        bind_to(&node_config::images, &images_config::rotate_workers));
  k.add(num(vk::integer, "images.max_pixels", "40000000", 1, 1'000'000'000,
            "Images with more pixels (width x height, read from the header) are refused before "
            "decoding: the answer is an error status `too_many_pixels`."),
        bind_to(&node_config::images, &images_config::max_pixels));
  k.add(num(vk::size, "images.max_bytes", "20m", 1024, 1LL << 30,
            "The largest image downloaded; a larger one is an error status `too_large`."),
        bind_to(&node_config::images, &images_config::max_bytes));
  k.add(num(vk::duration, "images.fetch_timeout", "10s", 100, 600'000,
            "One download, redirects included; past it the attempt failed (retried)."),
        bind_to(&node_config::images, &images_config::fetch_timeout));
  k.add(num(vk::boolean, "images.allow_private_sources", "false", 0, 1,
            "Fetch images from loopback, private and link-local addresses. Off, such an "
            "address (also one a name resolves to, or a redirect points at) is refused: the "
            "service must not become a way into the internal network."),
        bind_to(&node_config::images, &images_config::allow_private_sources));
  k.add(num(vk::integer, "images.max_attempts", "5", 1, 100,
            "Attempts of a task failing recoverably (download failed, HTTP 5xx); then its last "
            "error is cached as the result."),
        bind_to(&node_config::images, &images_config::max_attempts));
  k.add(num(vk::duration, "images.retry_delay", "1s", 10, 3'600'000,
            "The first retry's delay; each next one doubles it (at most 5 minutes)."),
        bind_to(&node_config::images, &images_config::retry_delay));
  k.add(num(vk::duration, "images.ttl", "7d", 1000, 31'536'000'000,
            "How long a result (or an error status) is kept when the request gives no ttl."),
        bind_to(&node_config::images, &images_config::ttl));
  k.add(num(vk::duration, "images.poll", "250ms", 5, 60'000,
            "How often a function's feeder looks for queued tasks while looks find some (one "
            "small query per function)."),
        bind_to(&node_config::images, &images_config::poll));
  k.add(num(vk::duration, "images.poll_idle", "5s", 5, 600'000,
            "The longest wait between a feeder's looks that find no task: each doubles the "
            "wait from images.poll up to this (a safety look). Tasks queued on any node wake "
            "the feeders of their partition's owner at once."),
        bind_to(&node_config::images, &images_config::poll_idle));
  k.add(num(vk::boolean, "feed.enabled", "false", 0, 1,
            "Run the feed loader and processor pools on this node (seed 004, docs/feeds.md): "
            "sellers' feeds are downloaded, checked, unified and sent on `feed.requests_topic`, "
            "and the answers on `feed.responses_topic` are stored. Needs `kafka.brokers` and "
            "`feed.requests_topic`."),
        bind_to(&node_config::feeds, &feeds_config::enabled));
  k.add(num(vk::integer, "feed.loader_workers", "2", 1, 64,
            "Downloads at once (the loader pool's workers); one per seller at a time."),
        bind_to(&node_config::feeds, &feeds_config::loader_workers));
  k.add(num(vk::integer, "feed.processor_workers", "2", 1, 64,
            "Loads processed at once (the processor pool's workers); one per seller at a time."),
        bind_to(&node_config::feeds, &feeds_config::processor_workers));
  k.add(num(vk::duration, "feed.poll", "1s", 10, 60'000,
            "How often an idle pool looks for work (one small query)."),
        bind_to(&node_config::feeds, &feeds_config::poll));
  k.add(num(vk::size, "feed.max_file_bytes", "512m", 1024, 17'179'869'184,
            "The largest feed file; a larger download or upload fails the load (`limit`)."),
        bind_to(&node_config::feeds, &feeds_config::max_file_bytes));
  k.add(num(vk::integer, "feed.max_depth", "24", 4, 256,
            "The deepest element nesting of a feed; deeper fails the load (`limit`)."),
        bind_to(&node_config::feeds, &feeds_config::max_depth));
  k.add(num(vk::integer, "feed.max_offers", "500000", 1, 100'000'000,
            "The most offers in one feed; more fails the load (`limit`)."),
        bind_to(&node_config::feeds, &feeds_config::max_offers));
  k.add(num(vk::integer, "feed.max_field_chars", "100000", 64, 10'000'000,
            "The longest text or attribute value in a feed, in characters; longer fails the "
            "load (`limit`)."),
        bind_to(&node_config::feeds, &feeds_config::max_field_chars));
  k.add(num(vk::duration, "feed.fetch_timeout", "5m", 1000, 3'600'000,
            "One feed download, redirects included; past it the attempt failed (retried)."),
        bind_to(&node_config::feeds, &feeds_config::fetch_timeout));
  k.add(num(vk::boolean, "feed.allow_private_sources", "false", 0, 1,
            "Download feeds from loopback, private and link-local addresses (tests, internal "
            "sources). Off, such an address is refused, also one a name resolves to."),
        bind_to(&node_config::feeds, &feeds_config::allow_private_sources));
  k.add(str("feed.proxy", "",
            "The HTTP proxy feed downloads go through (seed 004: squid), e.g. "
            "http://proxy.internal:3128. Empty: direct."),
        bind_to(&node_config::feeds, &feeds_config::proxy));
  k.add(num(vk::integer, "feed.batch_size", "500", 1, 10'000,
            "Offers per request on `feed.requests_topic`."),
        bind_to(&node_config::feeds, &feeds_config::batch_size));
  k.add(num(vk::integer, "feed.keep_loads", "10", 1, 10'000,
            "Loads of a feed kept with their statistics and errors; older ones are removed "
            "with their files (seed 004 cleanup, option 2)."),
        bind_to(&node_config::feeds, &feeds_config::keep_loads));
  k.add(num(vk::duration, "feed.min_period", "5m", 1000, 31'536'000'000,
            "The shortest period a URL feed may be fetched on."),
        bind_to(&node_config::feeds, &feeds_config::min_period));
  k.add(num(vk::duration, "feed.lock_max_hold", "6h", 60'000, 604'800'000,
            "A seller's loader or processor lock held longer is freed by the reaper (a hung "
            "worker); locks of nodes that died are freed at once."),
        bind_to(&node_config::feeds, &feeds_config::lock_max_hold));
  k.add(num(vk::duration, "feed.retry_delay", "10s", 10, 3'600'000,
            "The first retry's delay after a transient failure (download failed, brokers "
            "away); each next one doubles it (at most 10 minutes)."),
        bind_to(&node_config::feeds, &feeds_config::retry_delay));
  k.add(num(vk::integer, "feed.max_attempts", "8", 1, 1000,
            "Transient failures of one load before it fails for good."),
        bind_to(&node_config::feeds, &feeds_config::max_attempts));
  k.add(str("feed.catalog_dir", "",
            "A directory with the unification data (categories.tsv, attributes.tsv, "
            "gazetteer.tsv; formats: actors/feeds/data/README.md) used instead of the built-in "
            "data: loaded at start (a broken file refuses the start, naming file and line) and "
            "again within seconds when a file changes (a broken change is refused and logged; "
            "the data in use stays). Empty: the data compiled into gost."),
        bind_to(&node_config::feeds, &feeds_config::catalog_dir));
  k.add(str("feed.geocoder_url", "",
            "An external geocoder asked for addresses the shipped gazetteer cannot place: GET "
            "<url>?address=... answering gost.v1.GeocoderAnswer as JSON, 404 when unknown "
            "(docs/feed-format.md \"Geocoding\"). While it fails, such offers are carried by "
            "their load unchanged (never deleted) and reported. Empty: the gazetteer alone."),
        bind_to(&node_config::feeds, &feeds_config::geocoder_url));
  k.add(num(vk::duration, "feed.geocoder_timeout", "2s", 10, 60'000,
            "One call to `feed.geocoder_url`; past it the geocoder counts as unavailable."),
        bind_to(&node_config::feeds, &feeds_config::geocoder_timeout));
  k.add(str("feed.responses_group", "gost.feed-processor",
            "Kafka consumer group of the nodes that store the offer store's answers to loads "
            "(read from `feed.responses_topic`)."),
        bind_to(&node_config::feeds, &feeds_config::responses_group));
  k.add(str("images.blob_dir", "blobs",
            "Where rotated images and uploaded feed files are stored (files named by their "
            "content's SHA-256), served by the node at http://<http.listen>/blobs/NAME. "
            "Relative paths are taken from `node.data_dir`."),
        bind_to(&node_config::images, &images_config::blob_dir));
  k.add(str("images.notify_topic", "",
            "Kafka topic of finished image results and error statuses: key = the result key, "
            "value = gost.v1.ImageNotice, written through the outbox in the transaction that "
            "stores the outcome (so none is lost; at least once). Empty: no notification. "
            "Needs `outbox.relay`."),
        bind_to(&node_config::images, &images_config::notify_topic));
  k.add(choice("images.queue", "postgres", {"postgres", "kafka"},
               "Where image tasks wait. `postgres`: the image_tasks table (identical requests "
               "are one row; each node computes the partitions of the shards it holds). "
               "`kafka`: a topic per function (`images.kafka.topic_prefix` + ratio, preview, "
               "main_color, rotate), keyed by the result key, read by a consumer group per "
               "function (the broker spreads the partitions over the nodes); a task whose result "
               "was stored after it was asked is skipped; retries of recoverable failures still "
               "go through PostgreSQL. Needs `kafka.brokers`."),
        bind_to(&node_config::images, &images_config::queue));
  k.add(str("images.kafka.topic_prefix", "gost.images.",
            "images.queue=kafka: the tasks' topics are this + the function's name (made on "
            "first use where the brokers allow it)."),
        bind_to(&node_config::images, &images_config::kafka_topic_prefix));
  k.add(str("images.kafka.group", "gost-images",
            "images.queue=kafka: the consumer groups are this + \".\" + the function's name; "
            "every node of a cluster uses the same."),
        bind_to(&node_config::images, &images_config::kafka_group));
  k.add(str("images.redis.address", "",
            "host:port of a Redis in front of the image results in PostgreSQL (read first, "
            "filled from PostgreSQL with the TTL left there, written after PostgreSQL). Redis "
            "away fails no call: PostgreSQL answers (gost_image_redis_fallbacks_total). Empty: "
            "no Redis layer."),
        bind_to(&node_config::images, &images_config::redis_address));
  k.add(str("images.redis.prefix", "gost:img:",
            "Prefix of the Redis keys of image results (several clusters may share a Redis)."),
        bind_to(&node_config::images, &images_config::redis_prefix));
  k.add(num(vk::duration, "images.redis.connect_timeout", "200ms", 1, 60'000,
            "Opening a connection to Redis; past it the call falls back to PostgreSQL and Redis "
            "is left alone for a second."),
        bind_to(&node_config::images, &images_config::redis_connect_timeout));
  k.add(num(vk::duration, "images.redis.timeout", "200ms", 1, 60'000,
            "One Redis command (a read of a batch, the writes of a batch); past it the call "
            "falls back to PostgreSQL."),
        bind_to(&node_config::images, &images_config::redis_timeout));
  k.add(num(vk::duration, "history.retention", "7d", 0, 31'536'000'000,
            "How long each committed change of an offer is kept for `gostctl history` "
            "(AdminService.OfferHistory): written with the change in its transaction, reaped "
            "by housekeeping after this long. 0s: no history is written (and what was kept is "
            "reaped)."),
        bind_to(&node_config::history, &history_config::retention));
  k.add(num(vk::boolean, "tasks.enabled", "true", 0, 1,
            "Host the task types this program registers (the stock node: moderation) and serve "
            "TaskService. "
            "false: this node hosts no task type (set it alike on every node). An installation "
            "of several shard groups needs it false until tasks work across groups (ADR 0023, "
            "build step 3)."),
        bind_to(&node_config::tasks, &tasks_config::enabled));
  k.add(num(vk::duration, "tasks.retry_delay", "10m", 0, 2'592'000'000,
            "A task group's retry delay when CreateGroup gives none: a task event whose step "
            "failed is handled again this much later, times its attempts so far (seed 002's "
            "\"+10 minutes\"; docs/tasks.md)."),
        bind_to(&node_config::tasks, &tasks_config::retry_delay));
  k.add(num(vk::integer, "tasks.max_attempts", "5", 1, 100,
            "A task group's attempts of one event when CreateGroup gives none; after them the "
            "event goes to entity_dead_letters and the task's other events go on."),
        bind_to(&node_config::tasks, &tasks_config::max_attempts));
  // Scheduled actions (seed 001, docs/scheduled-actions.md).
  k.add(num(vk::boolean, "scheduled.enabled", "true", 0, 1,
            "Run a scheduled-actions worker for every shard this node owns (it fires the "
            "actions of that shard). false: this node serves the API only."),
        bind_to(&node_config::scheduled, &scheduled_config::enabled));
  k.add(num(vk::duration, "scheduled.poll", "100ms", 5, 60'000,
            "How often the node's poller reads its shards (one read for all of them) while "
            "reads find work, waking the shards' workers (due actions wake their worker at "
            "their time). An action created or changed on any node brings a read at once, at "
            "most one per this period."),
        bind_to(&node_config::scheduled, &scheduled_config::poll));
  k.add(num(vk::duration, "scheduled.poll_idle", "5s", 5, 600'000,
            "The longest wait between the poller's reads that find no work: each doubles the "
            "wait from scheduled.poll up to this (a safety read; creations and changes wake "
            "it at once, through a wake notice when made on another node)."),
        bind_to(&node_config::scheduled, &scheduled_config::poll_idle));
  k.add(num(vk::integer, "scheduled.batch", "256", 1, 100'000,
            "At most this many queue rows a shard's worker moves (one transaction), and this "
            "many actions it fires (begun in one transaction, finished in one), per iteration "
            "before it looks again."),
        bind_to(&node_config::scheduled, &scheduled_config::batch));
  k.add(num(vk::boolean, "scheduled.allow_private_targets", "false", 0, 1,
            "Let HTTP actions call loopback, private and link-local addresses (127.0.0.0/8, "
            "10.0.0.0/8, 192.168.0.0/16, ::1, ...). Checked when an action is created and "
            "again when its connection opens."),
        bind_to(&node_config::scheduled, &scheduled_config::allow_private_targets));
  k.add(num(vk::integer, "scheduled.default_max_attempts", "5", 1, 100,
            "Attempts per occurrence of an action whose retry policy sets none; then the "
            "occurrence is given up and the next one scheduled."),
        bind_to(&node_config::scheduled, &scheduled_config::default_max_attempts));
  k.add(num(vk::duration, "scheduled.default_backoff", "1s", 1, 86'400'000,
            "Wait before an action's second attempt when its retry policy sets none; doubled "
            "after each failed attempt (up to 32 times this)."),
        bind_to(&node_config::scheduled, &scheduled_config::default_backoff));
  k.add(num(vk::duration, "scheduled.default_deadline", "10s", 1, 600'000,
            "Time limit of one attempt of an action whose retry policy sets none."),
        bind_to(&node_config::scheduled, &scheduled_config::default_deadline));
  // What one request may hold (docs/api.md, "Limits"): each refusal names its key.
  k.add(num(vk::integer, "limits.title_max_chars", "512", 1, 65'536,
            "Longest offer title, in characters (Unicode code points, not bytes). 512 is "
            "several times what marketplaces show (80 to 200 characters), so gost never "
            "refuses a title a feed took from another site, while a description pasted into "
            "the title is refused."),
        bind_to(&node_config::limits, &limits_config::title_max_chars));
  k.add(num(vk::integer, "limits.description_max_chars", "65536", 1, 1'048'576,
            "Longest offer description, in characters. 65536: every description accepted "
            "before this key existed (64 KiB of UTF-8) still is; listings rarely need more "
            "than a few thousand."),
        bind_to(&node_config::limits, &limits_config::description_max_chars));
  k.add(num(vk::integer, "limits.attributes_max", "500", 0, 100'000,
            "Most attributes of one offer. A catalog category has tens; 500 leaves room for "
            "feeds that send every attribute they know."),
        bind_to(&node_config::limits, &limits_config::attributes_max));
  k.add(num(vk::integer, "limits.attribute_key_max_chars", "256", 1, 65'536,
            "Longest attribute name, in characters (names are catalog attribute names)."),
        bind_to(&node_config::limits, &limits_config::attribute_key_max_chars));
  k.add(num(vk::integer, "limits.attribute_value_max_chars", "4096", 1, 1'048'576,
            "Longest attribute value, in characters (values are short; a list of features "
            "fits in 4096)."),
        bind_to(&node_config::limits, &limits_config::attribute_value_max_chars));
  k.add(num(vk::integer, "limits.photos_max", "100", 0, 10'000,
            "Most photos of one offer. Marketplaces show 10 to 50; 100 leaves room."),
        bind_to(&node_config::limits, &limits_config::photos_max));
  k.add(num(vk::size, "limits.offer_max_bytes", "512k", 1024, 256LL << 20,
            "Largest offer, in bytes of its serialized content (id, version, source and "
            "timestamps, which gost sets, not counted), checked on the offer as it will be "
            "stored (a masked update merged with the stored fields). 512 KiB keeps an offer "
            "with its stage states in one Kafka message of a broker's default size (1 MB): the "
            "after-save event carries both."),
        bind_to(&node_config::limits, &limits_config::offer_max_bytes));
  k.add(num(vk::size, "limits.state_max_bytes", "1020k", 1024, 256LL << 20,
            "Largest stage state a StateService.Update may write, in bytes of the packed "
            "google.protobuf.Any. Keep states small: an offer's actor holds all of them. "
            "1020 KiB: with 4 KiB of envelope, an after-save event carrying a state at this "
            "limit fits `kafka.message_max_bytes` (1 MiB)."),
        bind_to(&node_config::limits, &limits_config::state_max_bytes));
  k.add(num(vk::size, "limits.event_max_bytes", "1m", 1024, 256LL << 20,
            "Largest event EntityService.Send takes, in bytes of the packed "
            "google.protobuf.Any (an event is a row in PostgreSQL until its entity handled "
            "it); also a task's `input` (TaskService.CreateTask), `payload` (SendEvent) and "
            "`reason` (Cancel). A refusal names the field."),
        bind_to(&node_config::limits, &limits_config::event_max_bytes));
  k.add(num(vk::integer, "limits.page_size_max", "1000", 1, 100'000,
            "Most items one call lists: ListOffers' `page_size`, EntityService.PullOutputs' "
            "and TaskService.PullResults' and ListTasks' `limit` (0 asks for 100, or this "
            "limit when it is lower)."),
        bind_to(&node_config::limits, &limits_config::page_size_max));
  k.add(num(vk::size, "limits.page_max_bytes", "2m", 64 * 1024, 1LL << 30,
            "A ListOffers page ends early, with a `next_page_token`, once its offers reach "
            "this many bytes (the first offer always goes), so a page fits in the 4 MiB a gRPC "
            "client accepts by default."),
        bind_to(&node_config::limits, &limits_config::page_max_bytes));
  k.add(num(vk::size, "limits.request_max_bytes", "4m", 64 * 1024, 1LL << 30,
            "Largest request message the public gRPC API receives (gRPC's own default: 4 MiB). "
            "gRPC refuses a larger one itself with RESOURCE_EXHAUSTED (\"Received message "
            "larger than max\") before gost sees it. Must exceed `limits.offer_max_bytes`, "
            "`limits.state_max_bytes` and `limits.event_max_bytes` by 4 KiB (the rest of a "
            "request). Node links take twice this."),
        bind_to(&node_config::limits, &limits_config::request_max_bytes));
  k.add(num(vk::integer, "limits.trace_events_max", "10000", 1, 10'000'000,
            "Most events one live trace (AdminService.Trace, `gostctl trace`) may ask for "
            "(`max_events`; 0 asks for 1000, or this limit when it is lower)."),
        bind_to(&node_config::limits, &limits_config::trace_events_max));
  k.add(num(vk::duration, "limits.trace_duration_max", "1h", 1000, 86'400'000,
            "Longest a live trace may ask to run (`for_ms`; 0 asks for 60 s, or this limit "
            "when it is lower)."),
        bind_to(&node_config::limits, &limits_config::trace_duration_max));
  k.add(num(vk::integer, "limits.traces_max", "16", 1, 1024,
            "Live traces a node serves at once (its clients' and other nodes' for offers it "
            "owns); one more is refused with RESOURCE_EXHAUSTED naming this key."),
        bind_to(&node_config::limits, &limits_config::traces_max));
  k.add(num(vk::duration, "shutdown.timeout", "30s", 100, 600'000,
            "On SIGTERM the node drains for at most this long before it stops anyway."),
        bind_to(&node_config::shutdown, &shutdown_config::timeout));
  k.add(num(vk::integer, "write.batch_max", "500", 1, 10'000,
            "Write-behind group commit: a shard's batch commits once it holds this many "
            "write-sets."),
        bind_to(&node_config::write, &write_config::batch_max));
  k.add(num(vk::duration, "write.flush_delay", "2ms", 0, 1000,
            "Write-behind group commit: the longest a write-set waits for others to join its "
            "batch."),
        bind_to(&node_config::write, &write_config::flush_delay));
  k.add(num(vk::duration, "queue.lookahead", "5s", 10, 600'000,
            "Queue entries (stage runs, entity events and timers) due within this window are "
            "held in memory by their shard (at most queue.page of them); later ones stay in "
            "PostgreSQL."),
        bind_to(&node_config::queue, &queue_config::lookahead));
  k.add(num(vk::duration, "queue.poll", "250ms", 5, 60'000,
            "How often a busy shard looks in PostgreSQL for queue entries coming due."),
        bind_to(&node_config::queue, &queue_config::poll));
  k.add(num(vk::duration, "queue.poll_idle", "30s", 5, 600'000,
            "The longest wait between a shard's polls that find no work due: each such poll "
            "doubles the wait from queue.poll up to this (a safety poll). Entries due later are "
            "polled for in time whatever this is (each poll answers the next one past the "
            "look-ahead; those the shard's own actors commit are learned), and work written for "
            "the shard elsewhere (a requeue or an entity's event on another node) comes with a "
            "wake notice, so an idle shard costs a statement per this period."),
        bind_to(&node_config::queue, &queue_config::poll_idle));
  k.add(num(vk::integer, "queue.page", "5000", 10, 1'000'000,
            "Most queue entries a shard loads from PostgreSQL at once."),
        bind_to(&node_config::queue, &queue_config::page));
  k.add(num(vk::duration, "queue.prefetch", "250ms", 0, 600'000,
            "Offers with a stage entry (a timer) due within this window are loaded ahead of "
            "time, so the stage runs on time instead of after a load. Keep it below "
            "queue.lookahead minus queue.poll. 0: off."),
        bind_to(&node_config::queue, &queue_config::prefetch));
  k.add(num(vk::integer, "stage.max_attempts", "3", 1, 100,
            "Failed attempts of one stage on one offer before the entry is dead-lettered."),
        bind_to(&node_config::stage, &stage_config::max_attempts));
  k.add(num(vk::integer, "stage.max_chain", "10", 1, 1000,
            "A stage re-triggered more often than this in one chain of stage runs is cut and "
            "dead-lettered (change storm)."),
        bind_to(&node_config::stage, &stage_config::max_chain));
  k.add(num(vk::duration, "rescan.interval", "24h", 0, 30LL * 86'400'000,
            "Background rescan: every this often each shard walks all its offers, asks every "
            "stage and enqueues at background priority. 0ms: off."),
        bind_to(&node_config::rescan, &rescan_config::interval));
  k.add(num(vk::integer, "rescan.page", "500", 1, 100'000,
            "Offers a shard reads at once during a background rescan."),
        bind_to(&node_config::rescan, &rescan_config::page));
  k.add(num(vk::boolean, "stages.expire.enabled", "true", 0, 1,
            "Run the built-in `expire` stage (seed task 1: take offers off exposure after a "
            "while)."),
        bind_to(&node_config::stages, &stages_config::expire, &expire_stage_config::enabled));
  k.add(num(vk::duration, "stages.expire.after", "180d", 1000, 3650LL * 86'400'000,
            "How long after its creation an active offer is made inactive by `expire`."),
        bind_to(&node_config::stages, &stages_config::expire, &expire_stage_config::after));
  k.add(str("stages.external", "",
            "Stages served by other processes over gost.v1.StageService (gRPC). Entries "
            "separated by spaces: `ID=HOST:PORT` with optional `;KEY=VALUE` options: "
            "`interests=title|price` (top-level Offer fields it reacts to; default every change), "
            "`parallelism=16` (calls at once on this node), `rate=0` (runs per second on this "
            "node, 0 unlimited), `deadline_ms=2000` (per call), `attempts=3` (calls per run, "
            "with back-off), `after_save=0` (1: call AfterSave with every after-save event). "
            "Example: `moderation=10.0.0.5:7000;interests=title|description`."),
        bind_to(&node_config::stages, &stages_config::external));
  k.add(num(vk::boolean, "stages.audit.enabled", "false", 0, 1,
            "Run the built-in `audit` stage: every offer records where its runs happened (node, "
            "shard, lease epoch) in its state, by a timer of `stages.audit.every`. For checks "
            "and debugging: it writes every offer that often."),
        bind_to(&node_config::stages, &stages_config::audit, &audit_stage_config::enabled));
  k.add(num(vk::duration, "stages.audit.every", "60s", 10, 86'400'000,
            "How often the `audit` stage runs per offer."),
        bind_to(&node_config::stages, &stages_config::audit, &audit_stage_config::every));
  // The photo stages (issue 16 item 9; actors/photos/README.md, docs/images.md).
  k.add(num(vk::boolean, "stages.photos.enabled", "true", 0, 1,
            "Run the built-in photo stages `photos.download`, `photos.ratio_color` and "
            "`photos.orientation` over the image functions. They run only when `images.enabled` "
            "is on as well: with images off they are off whatever this says."),
        bind_to(&node_config::stages, &stages_config::photos, &photos_stages_config::enabled));
  k.add(num(vk::duration, "stages.photos.recheck", "1s", 10, 3'600'000,
            "A photo stage whose photos are still being computed comes back after this long to "
            "ask the image service again, and doubles the wait each time (up to "
            "`stages.photos.recheck_max`); it never waits for a computation."),
        bind_to(&node_config::stages, &stages_config::photos, &photos_stages_config::recheck));
  k.add(num(vk::duration, "stages.photos.recheck_max", "5m", 10, 86'400'000,
            "The longest wait between two asks of a photo stage (at least "
            "`stages.photos.recheck`)."),
        bind_to(&node_config::stages, &stages_config::photos, &photos_stages_config::recheck_max));
  k.add(num(vk::integer, "stages.photos.workers", "4", 1, 256,
            "Threads of each photo stage's pool: its runs read the image results and queue tasks "
            "in PostgreSQL, off the actors' threads."),
        bind_to(&node_config::stages, &stages_config::photos, &photos_stages_config::workers));
  // The catalog's evolution (issue 25 item 1; actors/catalog/README.md,
  // docs/catalog-evolution.md).
  k.add(str("stages.catalog.migrations", "",
            "A directory of catalog migration files (`*.tsv`, one per version: renames, merges "
            "and splits of categories, attribute renames and value mappings; format: "
            "docs/catalog-evolution.md). Set, the built-in stage `catalog.evolve` runs: at start "
            "the node stores the versions it does not know yet in PostgreSQL (a stored version "
            "with other rules refuses the start), and each shard enqueues once, at background "
            "priority, the offers a new version moves. Empty: the stage is off."),
        bind_to(&node_config::stages, &stages_config::catalog, &catalog_stage_config::migrations));
  // The video check (issue 25 item 3; actors/videos/README.md, docs/video-check.md).
  k.add(num(vk::boolean, "stages.video.enabled", "false", 0, 1,
            "Run the built-in stage `video.check` (off by default: it calls out): each offer's "
            "video URLs are checked over "
            "HTTP (HEAD, then a ranged GET) and the offer's videos show available, unavailable "
            "or unknown with the time. It calls out only to public addresses (unless "
            "`stages.video.allow_private`) and, when `stages.video.allowed_hosts` is set, only to "
            "those hosts."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::enabled));
  k.add(str("stages.video.allowed_hosts", "",
            "The video hosts `video.check` may call, separated by commas or spaces: "
            "`example.com` allows example.com and every name under it. A video elsewhere is "
            "recorded `unknown` (`host_not_allowed`) and never fetched; a redirect elsewhere "
            "gives `unknown` too. Empty: any public host."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::allowed_hosts));
  k.add(num(vk::boolean, "stages.video.allow_private", "false", 0, 1,
            "Let `video.check` call loopback, private and link-local addresses (tests, a local "
            "demo). Off: such a video is `unknown` (`private_address`), never fetched."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::allow_private));
  k.add(num(vk::duration, "stages.video.recheck", "24h", 10, 30LL * 86'400'000,
            "How long after a verdict (available, unavailable, or a host not allowed) a video is "
            "checked again."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::recheck));
  k.add(num(vk::duration, "stages.video.retry", "1m", 10, 86'400'000,
            "After a passing error (5xx, 429, a timeout, no connection) the video is checked "
            "again this much later, doubled with every such error in a row up to "
            "`stages.video.retry_max` (and never later than `stages.video.recheck`)."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::retry));
  k.add(num(vk::duration, "stages.video.retry_max", "1h", 10, 30LL * 86'400'000,
            "The longest wait after passing errors (at least `stages.video.retry`)."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::retry_max));
  k.add(num(vk::duration, "stages.video.timeout", "10s", 10, 600'000,
            "Deadline of each request of `video.check` (HEAD, and the ranged GET), connection "
            "included; past it the video is `unknown` (`timeout`) and retried sooner."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::timeout));
  k.add(num(vk::integer, "stages.video.workers", "4", 1, 256,
            "Threads of the `video.check` stage's pool: its runs wait on HTTP, off the actors' "
            "threads."),
        bind_to(&node_config::stages, &stages_config::video, &video_stage_config::workers));
  // Notifications of offers published, expired, rejected (issue 25 item 4; actors/notify,
  // docs/notifications.md).
  k.add(num(vk::boolean, "stages.notify.enabled", "false", 0, 1,
            "Run the built-in stage `notify.on_change` (off by default: it calls out): when a "
            "saved version publishes, expires or rejects an offer, its after_save hook sends a "
            "notification keyed `<offer_id>:<version>` to `stages.notify.topic` and, when set, "
            "to `stages.notify.webhook`, at least once (the receiver de-duplicates by the key). "
            "Needs kafka.brokers (the hook is fed from the after-save topic)."),
        bind_to(&node_config::stages, &stages_config::notify, &notify_stage_config::enabled));
  k.add(str("stages.notify.topic", "gost.offer-notifications",
            "The Kafka topic of `notify.on_change`'s notifications (gost.v1.OfferNotification, "
            "Kafka key: the offer id, header Idempotency-Key: `<offer_id>:<version>`). Empty: "
            "none sent to Kafka."),
        bind_to(&node_config::stages, &stages_config::notify, &notify_stage_config::topic));
  k.add(str("stages.notify.webhook", "",
            "An http(s) URL `notify.on_change` POSTs each notification to as JSON (header "
            "Idempotency-Key: `<offer_id>:<version>`); any answer but a 2xx is retried until "
            "it succeeds. Empty: no webhook."),
        bind_to(&node_config::stages, &stages_config::notify, &notify_stage_config::webhook));
  k.add(num(vk::duration, "stages.notify.timeout", "10s", 10, 600'000,
            "Deadline of each webhook request of `notify.on_change`, connection included; past "
            "it the notification is retried."),
        bind_to(&node_config::stages, &stages_config::notify, &notify_stage_config::timeout));
  k.add(num(vk::boolean, "stages.notify.allow_private", "false", 0, 1,
            "Let `notify.on_change` POST to a loopback, private or link-local address (an "
            "internal receiver, tests). Off: such a webhook is refused (and retried, logged)."),
        bind_to(&node_config::stages, &stages_config::notify, &notify_stage_config::allow_private));
  // The application's own stages (node_builder::add_stage), after the built-in ones.
  for (auto& id : app.stages)
    add_application_stage(k, id, app.name);
  k.add(choice("log.level", "info", {"trace", "debug", "info", "warn", "error", "off"},
               "Minimum level of log lines."),
        bind_to(&node_config::log, &log_config::level));
  k.add(choice("log.format", "text", {"text", "json"},
               "`text` for people, `json` for log collectors (one object per line)."),
        bind_to(&node_config::log, &log_config::format));
  k.add(str("log.levels", "",
            "Levels of single loggers, each overriding `log.level` for its own lines: "
            "`LOGGER=LEVEL` entries separated by commas, e.g. `cluster=debug,kafka=warn`. "
            "Loggers: `node` (start and stop, readiness), `pg` (embedded PostgreSQL, "
            "migrations, the database lost and back), `cluster` (leases, hand-off, node "
            "links), `api` (gRPC services), `kafka` (outbox relay, after_save hooks, the "
            "brokers lost and back), `feeds` (feed exchange), `console` (admin HTTP), "
            "`offers` (shards, offer actors, stages), `kit` (actor pools and other shared "
            "actors), `scheduled` (scheduled-actions workers). Every line names its logger "
            "(`logger=` in text, `\"logger\"` in JSON)."),
        bind_to(&node_config::log, &log_config::levels));
  return k;
}

/// `gost_example 1.0.0 (gost 0.1.0)`; gostd at gost's own version is `gostd 0.1.0`.
std::string banner(const application& app) {
  auto out = app.name + " " + app.version;
  if (app.name != "gostd" || app.version != GOST_VERSION)
    out += " (gost " GOST_VERSION ")";
  return out;
}

std::string usage(const schema& s, const application& app) {
  auto& n = app.name;
  return banner(app)
         + " - a gost node: shards of offer actors over PostgreSQL.\n\n"
           "Usage: "
         + n + " [--config FILE] [--KEY=VALUE | --KEY VALUE]...\n       " + n
         + " --help | --version | --config-reference\n\n"
           "With no pg.dsn the node starts an embedded PostgreSQL in pg.embedded_dir.\n"
           "SIGTERM or SIGINT drains and stops the node.\n\n"
           "Keys (also settable in the config file and as GOST_* variables):\n"
         + s.help_text();
}

const node_keys& node_bindings() {
  static const node_keys k = make_node_keys(application{});
  return k;
}

/// The keys of `app`: gostd's when it has no stages of its own, else built for it. Throws
/// std::invalid_argument naming a stage id that cannot name its key.
std::shared_ptr<const node_keys> application_bindings(const application& app) {
  if (app.stages.empty()) // gostd's static keys, not owned (the aliasing constructor)
    return std::shared_ptr<const node_keys>(std::shared_ptr<void>{}, &node_bindings());
  std::vector<std::string> seen;
  for (auto& id : app.stages) {
    if (auto problem = stage_key_problem(id, node_bindings().keys()); !problem.empty())
      throw std::invalid_argument(problem);
    if (std::find(seen.begin(), seen.end(), id) != seen.end())
      throw std::invalid_argument("stage id `" + id + "` is registered twice");
    seen.push_back(id);
  }
  return std::make_shared<const node_keys>(make_node_keys(app));
}

/// node.data_dir made absolute (from the working directory), and the data paths that are
/// relative taken from it; none keeps a trailing `/`.
void resolve_data_paths(node_config& c) {
  auto& data = c.node.data_dir;
  if (data.empty())
    return; // validate() refuses it
  if (data[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr)
      data = std::string{cwd} + "/" + data;
  }
  while (data.size() > 1 && data.back() == '/')
    data.pop_back();
  for (auto* path : {&c.pg.embedded_dir, &c.images.blob_dir}) {
    if (!path->empty() && (*path)[0] != '/')
      *path = data + "/" + *path;
    while (path->size() > 1 && path->back() == '/')
      path->pop_back();
  }
}

/// What the schema leaves for the node to work out: its id, the embedded server's script, the
/// scheduler's threads, the data paths made absolute.
void resolve(node_config& c, const char* argv0) {
  // Once, here: nothing later depends on the working directory.
  resolve_data_paths(c);
  if (c.node.id.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0)
      std::strcpy(host, "node");
    c.node.id = std::string{host} + "-" + std::to_string(c.grpc.listen.port);
  }
  if (c.pg.embedded_script.empty()) {
    // An installed node's own script first: the source tree it was built from may still
    // exist on the machine that built the package, with a different pg.sh in it.
    std::string self = argv0 != nullptr ? argv0 : "";
    auto slash = self.rfind('/');
    if (slash != std::string::npos) {
      auto beside = self.substr(0, slash) + "/../libexec/gost/pg.sh";
      if (access(beside.c_str(), X_OK) == 0)
        c.pg.embedded_script = beside;
    }
    if (c.pg.embedded_script.empty())
      c.pg.embedded_script = GOST_DEFAULT_PG_SCRIPT;
  }
  if (c.scheduler.threads == 0)
    c.scheduler.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

} // namespace

const char* gost_version() {
  return GOST_VERSION;
}

const schema& node_schema() {
  return node_bindings().keys();
}

schema node_schema(const application& app) {
  return application_bindings(app)->keys();
}

std::string validate(const node_config& c) {
  constexpr uint64_t request_room = 4096; // ids, request id, update mask around the content
  constexpr uint64_t event_room = 4096;   // ids, version, timestamps, record key and headers
  {
    std::vector<std::string> set, missing;
    for (auto [key, value] : {std::pair{"cluster.tls_cert", &c.cluster.tls_cert},
                              std::pair{"cluster.tls_key", &c.cluster.tls_key},
                              std::pair{"cluster.tls_ca", &c.cluster.tls_ca}})
      (value->empty() ? missing : set).push_back(key);
    if (!set.empty() && !missing.empty())
      return "cluster.tls_cert, cluster.tls_key and cluster.tls_ca must be set together (or none "
             "of them for plaintext links); set: "
             + joined(set) + "; missing: " + joined(missing);
  }
  if (c.grpc.tls_cert.empty() != c.grpc.tls_key.empty())
    return "grpc.tls_cert and grpc.tls_key must be set together (or neither, for a plaintext "
           "API)";
  if (!c.grpc.tls_client_ca.empty() && c.grpc.tls_cert.empty())
    return "grpc.tls_client_ca needs grpc.tls_cert and grpc.tls_key (client certificates come "
           "over TLS)";
  if (!c.auth.cert_roles.empty() && c.grpc.tls_client_ca.empty())
    return "auth.cert_roles needs grpc.tls_client_ca (the CA that signs the client "
           "certificates)";
  if (c.feeds.enabled && c.feed.requests_topic.empty())
    return "feed.enabled needs feed.requests_topic (the processor sends loads on it)";
  if (c.feeds.enabled && c.feeds.responses_group.empty())
    return "feed.responses_group must not be empty";
  if (!c.feed.requests_topic.empty() && c.kafka.brokers.empty())
    return "feed.requests_topic needs kafka.brokers (the feed exchange runs on a real broker)";
  if (c.kafka.topic.empty())
    return "kafka.topic must not be empty";
  if (c.node.data_dir.empty())
    return "node.data_dir must not be empty: set the directory of the node's data (default `var`)";
  // Each content limit, with `room` bytes around it, must fit the ceiling `ceiling_key`.
  using limit = std::pair<const char*, uint64_t>;
  auto must_fit = [](std::initializer_list<limit> limits, uint64_t room, const char* ceiling_key,
                     uint64_t ceiling, const char* or_else, const char* also) -> std::string {
    for (auto [key, bytes] : limits)
      if (bytes + room > ceiling)
        return std::string{ceiling_key} + " (" + std::to_string(ceiling) + ") must be at least "
               + key + " (" + std::to_string(bytes) + ") + " + std::to_string(room) + ", or "
               + or_else + "; raise " + ceiling_key + also + " or lower " + key;
    return {};
  };
  // A request at a content limit must pass gRPC's own limit with its ids and mask around it.
  if (auto e = must_fit({limit{"limits.offer_max_bytes", c.limits.offer_max_bytes},
                         limit{"limits.state_max_bytes", c.limits.state_max_bytes},
                         limit{"limits.event_max_bytes", c.limits.event_max_bytes}},
                        request_room, "limits.request_max_bytes",
                        static_cast<uint64_t>(c.limits.request_max_bytes),
                        "a request at that limit could not be sent", "");
      !e.empty())
    return e;
  // An after-save event carries the offer and its states; one at its limit, with the ids,
  // version, timestamps and the record's key around it, must fit one Kafka message.
  if (auto e = must_fit({limit{"limits.offer_max_bytes", c.limits.offer_max_bytes},
                         limit{"limits.state_max_bytes", c.limits.state_max_bytes}},
                        event_room, "kafka.message_max_bytes", c.kafka.message_max_bytes,
                        "an after-save event at that limit could not be published",
                        " (and the topic's max.message.bytes)");
      !e.empty())
    return e;
  if (c.stages.photos.recheck_max < c.stages.photos.recheck)
    return "stages.photos.recheck_max must be at least stages.photos.recheck";
  if (c.stages.video.retry_max < c.stages.video.retry)
    return "stages.video.retry_max must be at least stages.video.retry";
  if (c.stages.notify.enabled) {
    if (c.stages.notify.topic.empty() && c.stages.notify.webhook.empty())
      return "stages.notify.enabled needs stages.notify.topic or stages.notify.webhook (where to "
             "send the notifications)";
    if (c.kafka.brokers.empty())
      return "stages.notify.enabled needs kafka.brokers (its after_save hook is fed from the "
             "after-save topic, which the in-process mock cluster does not share)";
    auto& w = c.stages.notify.webhook;
    if (!w.empty() && w.rfind("http://", 0) != 0 && w.rfind("https://", 0) != 0)
      return "stages.notify.webhook must be an http:// or https:// URL, got `" + w + "`";
  }
  if (!c.images.notify_topic.empty() && !c.outbox.relay)
    return "images.notify_topic needs outbox.relay (the notifications go through the outbox); "
           "set outbox.relay=true or leave images.notify_topic empty";
  if (c.images.queue == "kafka" && c.kafka.brokers.empty())
    return "images.queue=kafka needs kafka.brokers (the in-process mock cluster is not shared "
           "with consumers); set kafka.brokers or images.queue=postgres";
  if (c.images.queue == "kafka" && c.images.kafka_topic_prefix.empty())
    return "images.kafka.topic_prefix must not be empty with images.queue=kafka";
  if (c.images.queue == "kafka" && c.images.kafka_group.empty())
    return "images.kafka.group must not be empty with images.queue=kafka";
  if (auto& a = c.images.redis_address; !a.empty()) {
    auto colon = a.rfind(':');
    if (colon == std::string::npos || colon == 0 || !whole_number(a.substr(colon + 1), 1, 65535))
      return "images.redis.address must be host:port with a port in 1..65535 (got \"" + a
             + "\"), or empty for no Redis layer";
  }
  if (c.cluster.lease_timeout < 2 * c.cluster.heartbeat)
    return "cluster.lease_timeout must be at least twice cluster.heartbeat (a lease must "
           "survive one late heartbeat)";
  if (c.cluster.advertise_port != 0 && c.caf.listen.port == 0)
    return "cluster.advertise_port needs a fixed port in caf.listen (what forwards the advertised "
           "port must know where the link listens; caf.listen's port 0 picks a new one each "
           "start)";
  return {};
}

load_result load_node_config(int argc, char** argv, char** envp, const application& app) {
  load_result res;
  std::shared_ptr<const node_keys> keys;
  try {
    keys = application_bindings(app);
  } catch (const std::invalid_argument& e) {
    res.error = e.what();
    return res;
  }
  auto& sch = keys->keys();
  settings st{sch, app.name};
  // First pass: special flags and the config file location.
  std::string file;
  if (auto e = std::getenv("GOST_CONFIG"))
    file = e;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      res.output = usage(sch, app);
      return res;
    }
    if (a == "--version") {
      res.output = banner(app) + "\n";
      return res;
    }
    if (a == "--config-reference") {
      res.output = sch.reference_markdown(app.name);
      return res;
    }
    if (a == "--config" && i + 1 < argc)
      file = argv[++i];
    else if (a.rfind("--config=", 0) == 0)
      file = a.substr(9);
  }
  if (!file.empty() && !st.load_file(file, res.error))
    return res;
  if (!st.load_env(envp, res.error))
    return res;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config") {
      ++i;
      continue;
    }
    if (a.rfind("--config=", 0) == 0)
      continue;
    if (a.rfind("--", 0) != 0) {
      res.error = "unexpected argument `" + a + "`; options look like --key=value (see --help)";
      return res;
    }
    auto body = a.substr(2);
    auto eq = body.find('=');
    std::string key;
    std::string val;
    if (eq != std::string::npos) {
      key = body.substr(0, eq);
      val = body.substr(eq + 1);
    } else if (i + 1 < argc) {
      key = body;
      val = argv[++i];
    } else {
      res.error = "option --" + body + " needs a value (--" + body + "=VALUE)";
      return res;
    }
    if (!st.set(key, val, "command line", res.error))
      return res;
  }

  node_config c;
  if (!keys->fill(st, c, res.error))
    return res;
  resolve(c, argc > 0 ? argv[0] : nullptr);
  if (res.error = validate(c); !res.error.empty())
    return res;
  c.config_dump = st.dump();
  c.app = app;
  res.config = std::move(c);
  return res;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

} // namespace gost::config
