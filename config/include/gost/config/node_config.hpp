#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gost/config/schema.hpp"

namespace gost::config {

/// The schema of `gostd`. Every key a node reads is declared here, once.
const schema& node_schema();

/// A `host:port` pair as configured.
struct endpoint {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

/// A stage served by another process over gost.v1.StageService (`stages.external`).
struct external_stage_config {
  std::string id;
  std::string address;                ///< host:port
  std::vector<std::string> interests; ///< top-level Offer fields; empty: every change
  int parallelism = 16;               ///< pool workers: most calls at once on the node
  double rate_limit = 0;              ///< runs per second on the node; 0: unlimited
  std::chrono::milliseconds deadline{2000}; ///< per RPC
  int attempts = 3;                   ///< RPC attempts within one run (back-off in between)
  bool after_save = false;            ///< call AfterSave with every after-save event
};

/// Parses `stages.external`: entries separated by spaces, each `ID=HOST:PORT` optionally
/// followed by `;KEY=VALUE` options (interests=a|b, parallelism=N, rate=N, deadline_ms=N,
/// attempts=N, after_save=0|1). On a problem returns false with `error` naming the entry.
bool parse_external_stages(const std::string& text, std::vector<external_stage_config>& out,
                           std::string& error);

/// The immutable configuration of one node, built after every check passed. Nothing in the
/// node reads configuration from anywhere else.
struct node_config {
  std::string node_id;
  endpoint grpc_listen;
  std::string grpc_port_file;
  endpoint caf_listen;
  endpoint http_listen;

  std::string pg_dsn; ///< empty: the embedded server below
  std::string pg_embedded_dir;
  uint16_t pg_embedded_port = 0;
  std::string pg_embedded_script;
  int pg_pool_size = 0;
  std::chrono::milliseconds pg_connect_timeout{};

  uint32_t shard_count = 0;
  int scheduler_threads = 0; ///< resolved: never 0
  std::string scheduler_policy; ///< "sharing" or "stealing"
  std::string cluster_advertise_host;
  std::string cluster_tls_cert; ///< all three empty: plaintext node links
  std::string cluster_tls_key;
  std::string cluster_tls_ca;
  std::chrono::milliseconds cluster_heartbeat{};
  std::chrono::milliseconds cluster_lease_timeout{};
  int cluster_max_moves = 4;
  std::string kafka_brokers; ///< empty: librdkafka's mock cluster
  std::string kafka_topic;
  std::chrono::milliseconds kafka_message_timeout{};
  std::string kafka_after_save_group;
  std::string feed_requests_topic; ///< empty: the feed exchange is off
  std::string feed_responses_topic;
  std::string feed_group;
  std::chrono::milliseconds outbox_poll{};
  bool outbox_relay = true;
  std::chrono::milliseconds offer_idle_timeout{};
  size_t offer_max_resident = 0;
  std::chrono::milliseconds request_timeout{};
  std::chrono::milliseconds request_ttl{}; ///< how long a write's request_id is remembered
  std::chrono::milliseconds shutdown_timeout{};

  size_t write_batch_max = 0;
  std::chrono::milliseconds write_flush_delay{};
  std::chrono::milliseconds queue_lookahead{};
  std::chrono::milliseconds queue_poll{};
  std::chrono::milliseconds queue_prefetch{};
  uint32_t queue_page = 0;
  int stage_max_attempts = 0;
  int stage_max_chain = 0;
  std::chrono::milliseconds rescan_interval{};
  uint32_t rescan_page = 0;
  bool expire_enabled = false;
  std::chrono::milliseconds expire_after{};
  bool audit_enabled = false;
  std::chrono::milliseconds audit_every{};
  std::vector<external_stage_config> external_stages;

  std::string log_level;
  std::string log_format;

  std::string config_dump; ///< every key with its value and where it came from
};

/// What `load_node_config` decided.
struct load_result {
  std::optional<node_config> config; ///< set when the node should run
  std::string error;  ///< one line naming the key and what to change
  std::string output; ///< text to print and exit 0 (`--help`, `--config-reference`)
};

/// Reads the node configuration: defaults, then `--config FILE` (or `GOST_CONFIG`), then
/// `GOST_*` environment variables, then `--key=value` / `--key value` arguments.
load_result load_node_config(int argc, char** argv, char** envp);

} // namespace gost::config
