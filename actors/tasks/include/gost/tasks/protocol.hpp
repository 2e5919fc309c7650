#pragma once
// The task domain's protocol (seed 002, docs/tasks.md). Tasks are durable entities of the kit
// (gost/entities/protocol.hpp): a task of type `moderation` is the entity
// `task.moderation/<task id>`, its lane is its group, and everything reaches it through the
// entity operations (send_atom, view_atom). What this header adds: how task ids, kinds and
// groups are named, and the domain's own CAF block at its fixed start (gost/core/type_ids.hpp:
// tasks know nothing of offers).
//
// `register_task_types(cfg)` registers the core blocks, the durable entities' and this one
// with a config.

#include <optional>
#include <string>
#include <string_view>

#include "gost/core/proto_inspect.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/type_ids.hpp"
#include "gost/v1/tasks.pb.h"

namespace gost::tasks {

/// A task's state, carried by messages that hand a decoded task around (e.g. to a test or a
/// tool in the same process).
using task_msg = pb<v1::Task>;
/// A task's event.
using task_event_msg = pb<v1::TaskEvent>;

/// The entity kind of a task type: `task.<type>`.
std::string task_kind(std::string_view task_type);

/// The task type of an entity kind, or none when it is not a task kind.
std::optional<std::string> task_type_of_kind(std::string_view kind);

/// A group id is 1..64 letters, digits, '.', '_' or '-'; an empty answer means it is one,
/// otherwise the answer says what is wrong.
std::string check_group_id(std::string_view group);

/// The id of a task: `<group>:<key>` (the key is the client's, or one made up at creation).
std::string task_id(std::string_view group, std::string_view key);

/// The group of a task id, or none when `id` is not one.
std::optional<std::string> group_of_task(std::string_view id);

/// Registers the core blocks, the durable entities' and the task block with a config (the node
/// registers each domain's: `register_offer_types` is the offers').
void register_task_types(caf::actor_system_config& cfg);

} // namespace gost::tasks

CAF_BEGIN_TYPE_ID_BLOCK(gost_tasks, gost::type_ids::tasks)
  CAF_ADD_TYPE_ID(gost_tasks, (gost::tasks::task_msg))
  CAF_ADD_TYPE_ID(gost_tasks, (gost::tasks::task_event_msg))
CAF_END_TYPE_ID_BLOCK(gost_tasks)

static_assert(caf::id_block::gost_tasks::end <= gost::type_ids::scheduled,
              "gost_tasks outgrew its IDs (gost/core/type_ids.hpp)");
