#include "node/embedded_pg.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "gost/core/errc.hpp"

namespace gost::runtime {

caf::expected<std::string> start_embedded_pg(const config::pg_config& pg) {
  if (access(pg.embedded_script.c_str(), X_OK) != 0)
    return make_error(errc::unavailable,
                      "embedded PostgreSQL script `" + pg.embedded_script
                        + "` not found or not executable; set `pg.embedded_script` or set "
                          "`pg.dsn` to use an existing server");
  char dir[4096];
  std::string data_dir = pg.embedded_dir;
  if (!data_dir.empty() && data_dir[0] != '/' && getcwd(dir, sizeof(dir)) != nullptr)
    data_dir = std::string{dir} + "/" + data_dir;
  pid_t pid = fork();
  if (pid < 0)
    return make_error(errc::internal, "fork failed while starting embedded PostgreSQL");
  if (pid == 0) {
    setenv("GOST_PG_DIR", data_dir.c_str(), 1);
    setenv("GOST_PG_PORT", std::to_string(pg.embedded_port).c_str(), 1);
    execl(pg.embedded_script.c_str(), pg.embedded_script.c_str(), "start",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error(errc::unavailable,
                      "embedded PostgreSQL did not start (`" + pg.embedded_script
                        + " start` failed, see its output above); check `pg.embedded_dir`="
                        + data_dir + " and `pg.embedded_port`=" + std::to_string(pg.embedded_port)
                        + ", or set `pg.dsn`");
  return "postgresql://gost@127.0.0.1:" + std::to_string(pg.embedded_port) + "/gost";
}

} // namespace gost::runtime
