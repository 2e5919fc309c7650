#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gost/config/schema.hpp"

namespace gost::config {

/// gost's own version: the CMake project version the library was built as.
const char* gost_version();

/// Who runs the node: an application built on gost (gost::node_builder) names itself, and each
/// stage it registers gets a key `stages.<id>.enabled` (boolean, default true). gostd is the
/// application `gostd`, at gost's version, with no stages of its own.
struct application {
  std::string name = "gostd";
  std::string version = gost_version();
  std::vector<std::string> stages; ///< ids of the application's own stages (add_stage)
};

/// The schema of `gostd`. Every key a node reads is declared here, once, bound to its member
/// of `node_config` (src/node_config.cpp).
const schema& node_schema();

/// The schema of an application: gostd's keys and, after the built-in stages' keys,
/// `stages.<id>.enabled` for each of `app.stages`. Throws std::invalid_argument when a stage's
/// id cannot name such a key (a built-in key has it, or it holds other characters than
/// letters, digits, `_`, `.` and `-`); load_node_config reports that as its error instead.
schema node_schema(const application& app);

/// A `host:port` pair as configured.
struct endpoint {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

/// A stage served by another process over gost.v1.StageService (`stages.external`).
struct external_stage_config {
  std::string id;
  std::string address;                      ///< host:port
  std::vector<std::string> interests;       ///< top-level Offer fields; empty: every change
  int parallelism = 16;                     ///< pool workers: most calls at once on the node
  double rate_limit = 0;                    ///< runs per second on the node; 0: unlimited
  std::chrono::milliseconds deadline{2000}; ///< per RPC
  int attempts = 3;                         ///< RPC attempts within one run (back-off in between)
  bool after_save = false;                  ///< call AfterSave with every after-save event
};

/// Parses `stages.external`: entries separated by spaces, each `ID=HOST:PORT` optionally
/// followed by `;KEY=VALUE` options (interests=a|b, parallelism=N, rate=N, deadline_ms=N,
/// attempts=N, after_save=0|1). On a problem returns false with `error` naming the entry.
bool parse_external_stages(const std::string& text, std::vector<external_stage_config>& out,
                           std::string& error);

/// The named loggers of a node, one per runtime folder or actor domain: node, pg, cluster, api,
/// kafka, feeds, console, offers, kit. `log.levels` may name only these.
const std::vector<std::string>& logger_names();

/// One entry of `log.levels`: this logger logs from `level` up (instead of `log.level`).
struct logger_level {
  std::string logger;
  std::string level; ///< trace, debug, info, warn, error or off
};

// The sections of node_config: one struct per key prefix, one member per key, named as in the
// key (`pg.pool_size` is `node_config::pg.pool_size`). The values are set from the schema
// (defaults included) by load_node_config; a default-constructed section holds no defaults.

struct identity_config { // node.*
  std::string id;        ///< resolved: never empty
  std::string data_dir;  ///< resolved: absolute, without a trailing `/`
};

struct grpc_config {
  endpoint listen;
  std::string port_file;
  std::string tls_cert;        ///< PEM file; empty: plaintext (with tls_key)
  std::string tls_key;         ///< PEM file of tls_cert's key
  std::string tls_client_ca;   ///< PEM file of the CA of client certificates; empty: none asked
  std::string tls_client_auth; ///< none, optional or required (with tls_client_ca)
};

struct auth_config {       // auth.*
  std::string tokens;      ///< `name:role:token`, comma-separated (a secret)
  std::string tokens_file; ///< a file of such entries, one a line
  std::string cert_roles;  ///< `subject:role`, comma-separated (client certificates' CN or SAN)
};

/// `caf.*`: the node-to-node link (gost.v1.NodeService over gRPC; the prefix is older than
/// ADR 0004, which replaced CAF's own middleman).
struct node_link_config {
  endpoint listen;
};

struct http_config {
  endpoint listen;
};

struct console_config {       // console.*
  std::string token;          ///< empty: the verbs only on loopback
  uint16_t recent_events = 0; ///< events each entity actor keeps for `gostctl offer ID`
  std::chrono::milliseconds sample_interval{}; ///< the web page's plots: one sample this often
  uint32_t sample_count = 0;                   ///< samples kept (the plots' span)
};

/// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

struct pg_config {
  std::string dsn; ///< empty: the embedded server below
  std::string embedded_dir;
  uint16_t embedded_port = 0;
  std::string embedded_script; ///< resolved: never empty
  int pool_size = 0;
  std::chrono::milliseconds connect_timeout{};
};

struct shard_config {
  uint32_t count = 0;
};

struct scheduler_config {
  int threads = 0;    ///< resolved: never 0
  std::string policy; ///< "sharing" or "stealing"
};

struct cluster_config {
  std::string tls_cert; ///< all three empty: plaintext node links (validate() holds all-or-none)
  std::string tls_key;
  std::string tls_ca;
  std::string advertise_host;
  uint16_t advertise_port = 0; ///< 0: the port the node link listener bound
  std::chrono::milliseconds heartbeat{};
  std::chrono::milliseconds lease_timeout{};
  int max_moves = 0;
  std::chrono::milliseconds drain_timeout{}; ///< a shard's drain cuts what is left after it
};

struct kafka_config {
  std::string brokers; ///< empty: librdkafka's mock cluster
  std::string topic;
  std::string after_save_group;
  std::chrono::milliseconds message_timeout{};
  /// The outbox relay's producer's message.max.bytes: keep it at the topic's (broker's)
  /// max.message.bytes; validate() checks the limits fit in it.
  uint32_t message_max_bytes = 0;
  /// How long a consumer group waits for a member that stopped heartbeating (a crashed
  /// node) before it hands that member's partitions to the others.
  std::chrono::milliseconds session_timeout{};
};

struct feed_config {
  std::string requests_topic; ///< empty: the feed exchange is off
  std::string responses_topic;
  std::string group;
};

/// `feed.*` beyond the exchange's topics: the feed processor's side of seed 004 (docs/feeds.md
/// "Feed processor"): sellers' feeds loaded by the loader and processor pools and sent over the
/// feed exchange's topics.
struct feeds_config {
  bool enabled = false; ///< the loader and processor pools run on this node
  int loader_workers = 0;
  int processor_workers = 0;
  std::chrono::milliseconds poll{}; ///< how often an idle pool looks for work
  uint64_t max_file_bytes = 0;      ///< a feed file (download or upload)
  int max_depth = 0;                ///< element nesting in a feed
  uint64_t max_offers = 0;          ///< offers in one feed
  uint64_t max_field_chars = 0;     ///< one text or attribute value
  std::chrono::milliseconds fetch_timeout{};
  bool allow_private_sources = false; ///< feeds from loopback and private addresses
  std::string proxy;                  ///< the HTTP proxy of downloads (seed: squid); empty: none
  int batch_size = 0;                 ///< offers per request on the requests topic
  int keep_loads = 0;                 ///< loads of a feed kept (history); older ones cleaned
  std::chrono::milliseconds min_period{};    ///< the shortest period of a URL feed
  std::chrono::milliseconds lock_max_hold{}; ///< a lock held longer is reaped (a hung worker)
  std::chrono::milliseconds retry_delay{};   ///< a transient failure's first delay (doubling)
  int max_attempts = 0;                      ///< transient failures before the load fails
  std::string responses_group;               ///< consumer group reading the offer store's answers
  std::string catalog_dir;                   ///< the catalog and gazetteer files; empty: built in
  std::string geocoder_url;                  ///< asked for addresses the gazetteer cannot place
  std::chrono::milliseconds geocoder_timeout{};
};

struct outbox_config {
  bool relay = false;
  std::chrono::milliseconds poll{};
  std::chrono::milliseconds poll_idle{};
};

struct offer_config {
  std::chrono::milliseconds idle_timeout{};
  size_t max_resident = 0;
};

/// The application's actor types (durable entities): their actors' passivation, apart from
/// offers'.
struct entity_config {
  std::chrono::milliseconds idle_timeout{};
  size_t max_resident = 0;
};

struct api_config {
  std::chrono::milliseconds request_timeout{};
  std::chrono::milliseconds request_ttl{}; ///< how long a write's request_id is remembered
};

/// `history.*`: the offers' history (gostctl history, docs/adr/0010-offer-history.md).
struct history_config {
  std::chrono::milliseconds retention{}; ///< 0: no history kept
};

/// `tasks.*`: what a task group gets when CreateGroup leaves a setting out (docs/tasks.md).
struct tasks_config {
  bool enabled = true;                     ///< the binary's task types are hosted
  std::chrono::milliseconds retry_delay{}; ///< a failed event again after this × attempts
  int max_attempts = 0;                    ///< then dead-lettered
};

/// `images.*`: the image functions (seed 003, actors/images/README.md).
struct images_config {
  bool enabled = false;
  int ratio_workers = 0;
  int preview_workers = 0;
  int main_color_workers = 0;
  int rotate_workers = 0;
  uint64_t max_pixels = 0;
  uint64_t max_bytes = 0;
  std::chrono::milliseconds fetch_timeout{};
  bool allow_private_sources = false;
  int max_attempts = 0;
  std::chrono::milliseconds retry_delay{};
  std::chrono::milliseconds ttl{};
  std::chrono::milliseconds poll{};
  std::chrono::milliseconds poll_idle{}; ///< a feeder's longest wait when looks find nothing
  std::string blob_dir;
  std::string notify_topic; ///< empty: no notification of finished results
  std::string queue;        ///< postgres | kafka
  /// `images.kafka.*`: the Kafka queue (images.queue=kafka): a topic and a group per function.
  std::string kafka_topic_prefix;
  std::string kafka_group;
  /// `images.redis.*`: the Redis layer in front of the results (address empty: off).
  std::string redis_address;
  std::string redis_prefix;
  std::chrono::milliseconds redis_connect_timeout{};
  std::chrono::milliseconds redis_timeout{};
};

/// `scheduled.*`: scheduled actions (seed 001, docs/scheduled-actions.md).
struct scheduled_config {
  bool enabled = false;                  ///< a worker per owned shard
  std::chrono::milliseconds poll{};      ///< how often a worker looks for API changes
  std::chrono::milliseconds poll_idle{}; ///< the poller's longest wait when reads find nothing
  int batch = 0;                         ///< rows moved / fired per iteration at most
  bool allow_private_targets = false;    ///< HTTP to loopback/private addresses
  int default_max_attempts = 0;          ///< an action's retry policy when it sets none
  std::chrono::milliseconds default_backoff{};
  std::chrono::milliseconds default_deadline{};
};

/// `limits.*`: what one request may hold (docs/api.md, "Limits"). Text in characters
/// (Unicode code points), sizes in bytes.
struct limits_config {
  uint32_t title_max_chars = 0;
  uint32_t description_max_chars = 0;
  uint32_t attributes_max = 0;
  uint32_t attribute_key_max_chars = 0;
  uint32_t attribute_value_max_chars = 0;
  uint32_t photos_max = 0;
  uint32_t offer_max_bytes = 0;
  uint32_t state_max_bytes = 0;
  uint32_t event_max_bytes = 0;
  uint32_t page_size_max = 0;
  uint32_t page_max_bytes = 0;
  int32_t request_max_bytes = 0; ///< gRPC takes an int
  uint32_t trace_events_max = 0;
  std::chrono::milliseconds trace_duration_max{};
  uint32_t traces_max = 0;
};

struct shutdown_config {
  std::chrono::milliseconds timeout{};
};

struct write_config {
  size_t batch_max = 0;
  std::chrono::milliseconds flush_delay{};
};

struct queue_config {
  std::chrono::milliseconds lookahead{};
  std::chrono::milliseconds poll{};
  std::chrono::milliseconds poll_idle{};
  uint32_t page = 0;
  std::chrono::milliseconds prefetch{};
};

struct stage_config {
  int max_attempts = 0;
  int max_chain = 0;
};

struct rescan_config {
  std::chrono::milliseconds interval{};
  uint32_t page = 0;
};

struct expire_stage_config {
  bool enabled = false;
  std::chrono::milliseconds after{};
};

struct audit_stage_config {
  bool enabled = false;
  std::chrono::milliseconds every{};
};

/// `stages.photos.*`: the photo stages over the image functions (actors/photos).
struct photos_stages_config {
  bool enabled = false;                ///< registered only when images.enabled as well
  std::chrono::milliseconds recheck{}; ///< first wait before asking for pending results again
  std::chrono::milliseconds recheck_max{};
  int workers = 0; ///< each photo stage's pool (its process() reads and queues in PostgreSQL)
};

/// `stages.video.allowed_hosts`: host suffixes, lower-case, without a leading dot.
struct host_suffixes {
  std::vector<std::string> suffixes; ///< empty: any host
};

/// `stages.video.*`: the `video.check` stage (actors/videos, docs/video-check.md).
struct video_stage_config {
  bool enabled = false;
  host_suffixes allowed_hosts;
  bool allow_private = false;
  std::chrono::milliseconds recheck{};   ///< after a verdict
  std::chrono::milliseconds retry{};     ///< first wait after a passing error, doubled
  std::chrono::milliseconds retry_max{}; ///< the back-off's cap
  std::chrono::milliseconds timeout{};   ///< each request's deadline
  int workers = 0;                       ///< the stage's pool (its runs wait on HTTP)
};

/// `stages.notify.*`: the `notify.on_change` stage (actors/notify, docs/notifications.md).
struct notify_stage_config {
  bool enabled = false;
  std::string topic;                   ///< empty: no Kafka notification
  std::string webhook;                 ///< empty: no webhook
  std::chrono::milliseconds timeout{}; ///< the webhook request's deadline
  bool allow_private = false;
};

/// `stages.catalog.*`: the `catalog.evolve` stage (actors/catalog, docs/catalog-evolution.md).
struct catalog_stage_config {
  std::string migrations; ///< a directory of migration files; empty: the stage is off
};

struct stages_config {
  expire_stage_config expire;
  std::vector<external_stage_config> external;
  audit_stage_config audit;
  photos_stages_config photos;
  video_stage_config video;
  notify_stage_config notify;
  catalog_stage_config catalog;
  /// `stages.<id>.enabled` of the application's own stages (application::stages), by id. A
  /// stage not in here (a node built without load_node_config) runs.
  std::map<std::string, bool> application;
};

struct log_config {
  std::string level;
  std::string format; ///< "text" or "json"
  std::vector<logger_level> levels;
};

/// The immutable configuration of one node, built after every check passed. Nothing in the
/// node reads configuration from anywhere else; each subsystem takes its section.
struct node_config {
  identity_config node;
  grpc_config grpc;
  node_link_config caf;
  http_config http;
  console_config console;
  auth_config auth;
  pg_config pg;
  shard_config shard;
  scheduler_config scheduler;
  cluster_config cluster;
  kafka_config kafka;
  feed_config feed;
  outbox_config outbox;
  offer_config offer;
  entity_config entity;
  api_config api;
  history_config history;
  tasks_config tasks;
  images_config images;
  feeds_config feeds;
  scheduled_config scheduled;
  limits_config limits;
  shutdown_config shutdown;
  write_config write;
  queue_config queue;
  stage_config stage;
  rescan_config rescan;
  stages_config stages;
  log_config log;

  std::string config_dump; ///< every key with its value and where it came from
  /// Not a key: who runs the node (the `--help` banner, the start log line, gost_build_info).
  application app;
};

/// The rules that span keys (no single key's bounds can say them): the cluster TLS files all
/// or none, the feed exchange on a real broker, a lease outliving a late heartbeat, a topic
/// for the after-save events, a gRPC request with room for an offer, a state or an event at
/// its limit. Returns the first problem as one line naming the keys, or "".
/// load_node_config runs it; a config built another way should too.
std::string validate(const node_config& c);

/// What `load_node_config` decided.
struct load_result {
  std::optional<node_config> config; ///< set when the node should run
  std::string error;                 ///< one line naming the key and what to change
  std::string output;                ///< text to print and exit 0 (`--help`, `--config-reference`)
};

/// Reads the node configuration: defaults, then `--config FILE` (or `GOST_CONFIG`), then
/// `GOST_*` environment variables, then `--key=value` / `--key value` arguments; then fills
/// the struct through the bindings, resolves what is derived (node.id, scheduler.threads,
/// pg.embedded_script; node.data_dir absolute and the data paths under it) and runs validate().
/// `app` names the program in `--help`, `--version` and the errors, and adds its stages' keys
/// (node_schema(app)).
load_result load_node_config(int argc, char** argv, char** envp, const application& app = {});

} // namespace gost::config
