// gostd: one gost node, with the built-in stages and the built-in task type (moderation,
// docs/tasks.md), and no actor types of an application's own.
// An application builds its own node the same way (gost/runtime/node_builder.hpp). See
// `gostd --help` and docs/config.md.
#include "gost/runtime/node_builder.hpp"
#include "gost/tasks/moderation.hpp"

int main(int argc, char** argv) {
  return gost::node_builder{}.add_task_type<gost::tasks::moderation>().run(argc, argv);
}
