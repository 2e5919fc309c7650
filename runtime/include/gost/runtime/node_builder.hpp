#pragma once
// gost as a library: an application links gost_runtime, registers its own stages and actor
// types in its own `main`, and runs a node — without editing gost's source (the way Orleans
// or Akka applications host their runtime). gostd is such an application with nothing of its
// own; examples/bank is one with an actor type (docs/adding-an-actor-type.md).
//
//   int main(int argc, char** argv) {
//     return gost::node_builder{}
//       .name("my_app", "1.0.0")                    // --help, --version, logs, /metrics
//       .add_stage<photo_count>("photo_count")      // docs/adding-a-stage.md
//       .add_entity_type<bank::account>()           // docs/adding-an-actor-type.md
//       .add_task_type<gost::tasks::moderation>()   // docs/tasks.md
//       .run(argc, argv);
//   }
//
// The node reads its configuration as gostd does (file, GOST_* environment, command line;
// `--help` lists every key, the application's stages' `stages.<id>.enabled` included: each
// stage registered here gets that key, default true, and a node started with it false does
// not run the stage).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gost/entities/entity_type.hpp"
#include "gost/offers/stage.hpp"
#include "gost/runtime/node.hpp"
#include "gost/tasks/task_type.hpp"

namespace gost {

class node_builder {
public:
  node_builder();

  /// The application's name and version, shown by `--help` and `--version` (`my_app 1.0.0
  /// (gost 0.1.0)`), in the start log line and as labels of `gost_build_info` on /metrics.
  /// Unset: `gostd` at gost's own version.
  node_builder& name(std::string app_name, std::string version);

  /// A C++ stage under a stable id (stored in queues and states: never rename one in use).
  node_builder& add_stage(std::string id, std::shared_ptr<const stage> impl,
                          stage_options opts = {});

  template <class Stage, class... Args>
  node_builder& add_stage(std::string id, Args&&... args) {
    return add_stage(std::move(id), std::make_shared<const Stage>(std::forward<Args>(args)...));
  }

  /// An actor type: entities of its kind are hosted by every node of the cluster that
  /// registers it (register the same types on every node).
  node_builder& add_entity_type(std::shared_ptr<const entity_type_base> type);

  template <class Type, class... Args>
  node_builder& add_entity_type(Args&&... args) {
    return add_entity_type(std::make_shared<const Type>(std::forward<Args>(args)...));
  }

  /// A task type (gost/tasks/task_type.hpp, docs/tasks.md): its tasks are entities of kind
  /// `task.<name>`, reached through TaskService.
  template <class Type, class... Args>
  node_builder& add_task_type(Args&&... args) {
    return add_entity_type<tasks::task_entity<Type>>(std::forward<Args>(args)...);
  }

  /// Reads the configuration, starts the node and serves until SIGTERM or SIGINT (which drain
  /// it). The exit code for `main`: 0 after a clean stop, 1 when the node could not start, 2
  /// for a configuration or registration error (printed to stderr).
  int run(int argc, char** argv);

  /// Starts a node in this process and returns it serving (its ports: `grpc_port()`,
  /// `http_port()`): for an application's PostgreSQL-tier tests (gost/testing/app_node.hpp)
  /// and for embedding. `args` is a command line as `run` reads it (`--pg.dsn=...`, ...): the
  /// defaults and a `--config` file apply, the process environment does not. Throws
  /// std::runtime_error naming what to change when the registration, the configuration or the
  /// start fails. Stop the node with `stop()`, or by destroying it. May be called again (a
  /// restart); the types and stages registered are shared by every node it started.
  std::unique_ptr<runtime::node> start(const std::vector<std::string>& args) const;

private:
  runtime::extensions ext_;
  config::application app_; ///< name, version, and the stages' ids (their `enabled` keys)
  std::string error_;       ///< the first registration error
};

} // namespace gost
