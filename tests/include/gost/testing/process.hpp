#pragma once
// Test support: run a program as a child process with its stderr captured to a file.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gost::testing {

/// A file's whole content ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class child_process {
public:
  child_process(const std::string& path, std::vector<std::string> args) {
    char tmpl[] = "/tmp/gost-child-XXXXXX";
    int fd = mkstemp(tmpl);
    stderr_path_ = tmpl;
    args.insert(args.begin(), path);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fd, STDERR_FILENO);
      dup2(fd, STDOUT_FILENO);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    close(fd);
  }

  ~child_process() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(stderr_path_.c_str());
  }

  pid_t pid() const { return pid_; }
  void signal(int sig) { kill(pid_, sig); }

  /// Waits at most `timeout` for the exit; returns the exit code, or -1 on timeout, or
  /// 128+signal when killed by a signal.
  int wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      auto r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
  }

  bool running() {
    int status = 0;
    return waitpid(pid_, &status, WNOHANG) == 0;
  }

  std::string output() const { return read_file(stderr_path_); }

private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string stderr_path_;
};

/// Polls `pred` every 20 ms until it holds or `timeout` passed.
template <class Pred>
bool eventually(std::chrono::milliseconds timeout, Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  return true;
}

/// The gRPC port a gostd child writes first into its `grpc.port_file`, once it serves; 0 when
/// the process exited first or `timeout` passed (callers REQUIRE it with the output).
inline int served_port(child_process& p, const std::string& port_file,
                       std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
  int port = 0;
  eventually(timeout, [&] {
    std::ifstream in(port_file);
    return static_cast<bool>(in >> port) || !p.running();
  });
  return port;
}

} // namespace gost::testing
