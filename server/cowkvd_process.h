// A cowkvd subprocess for tests that drive the server from outside (kill -9,
// restarts, its memory): list_append_grpc_test, watch_soak_test. Test-only.
#ifndef COWKV_SERVER_COWKVD_PROCESS_H_
#define COWKV_SERVER_COWKVD_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cowkv {
namespace server {
namespace testing_process {

// The cowkvd binary (main() sets it from argv[1]).
inline const char* g_cowkvd = nullptr;

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t EnvInt(const char* name, int64_t def) {
  const char* v = std::getenv(name);
  int64_t n = 0;
  return v != nullptr && absl::SimpleAtoi(v, &n) ? n : def;
}

inline std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// A cowkvd process on one device, restartable on the same port; its stderr
// goes to a file per incarnation (read for the port, kept for a failure).
class Cowkvd {
 public:
  // `extra`: more flags (e.g. --create-size 1G: later ones win).
  explicit Cowkvd(std::string device, std::vector<std::string> extra = {})
      : device_(std::move(device)), extra_(std::move(extra)) {}
  ~Cowkvd() {
    if (pid_ > 0) Kill9();
  }

  // Starts it (port 0 the first time: a free one) and waits for its port.
  bool Start() {
    static std::atomic<int> incarnations{0};
    log_ = absl::StrCat(TempDir(), "/cowkvd-", getpid(), "-", ++incarnations, ".log");
    unlink(log_.c_str());
    std::vector<std::string> args = {g_cowkvd,
                                     "--device",
                                     device_,
                                     "--create-size",
                                     "512M",
                                     "--listen",
                                     absl::StrCat("127.0.0.1:", port_),
                                     "--metrics-listen",
                                     "",
                                     "--commit-interval-ms",
                                     "100"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(g_cowkvd, argv.data());
      _exit(127);
    }
    return WaitForPort();
  }

  void Kill9() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // SIGTERM: drain, commit, exit; the exit code.
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  bool WaitForPort() {
    const int64_t deadline = NowNs() + 60'000'000'000;
    while (NowNs() < deadline) {
      const std::string out = Log();
      const size_t at = out.find("(port ");
      const size_t end = at == std::string::npos ? at : out.find(')', at);
      int port = 0;
      if (end != std::string::npos && absl::SimpleAtoi(out.substr(at + 6, end - at - 6), &port)) {
        port_ = port;
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return false;  // it exited
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  const std::string device_;
  const std::vector<std::string> extra_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace testing_process
}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_COWKVD_PROCESS_H_
