// Goal: the cowkvd binary behaves as its usage says — SIGTERM/SIGINT drain
// an in-flight call, commit and exit 0 (an async write survives the
// restart); a second cowkvd on the same device is refused; bad flags exit 2;
// an existing non-cowkv device is not formatted without --mkfs.
// Method: fork/exec the binary (its path is argv[1]), read its stderr for
// the chosen port, talk to it through the generated stub, signal it and
// check its exit status.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

const char* g_cowkvd = nullptr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name, "-", getpid(), ".img");
}

struct Proc {
  pid_t pid = -1;
  int err = -1;         // read end of its stderr
  std::string output;   // stderr so far
};

Proc Spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(g_cowkvd));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(g_cowkvd, argv.data());
    _exit(127);
  }
  close(fds[1]);
  p.err = fds[0];
  return p;
}

// Appends what stderr has within 100 ms; false at EOF.
bool ReadSome(Proc& p) {
  pollfd pfd{p.err, POLLIN, 0};
  if (poll(&pfd, 1, 100) <= 0) return true;
  char buf[4096];
  const ssize_t n = read(p.err, buf, sizeof(buf));
  if (n <= 0) return false;
  p.output.append(buf, n);
  return true;
}

// Reads stderr until `needle` appears after `from`, stderr closes, or 30 s pass.
bool WaitFor(Proc& p, const std::string& needle, size_t from = 0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (p.output.find(needle, from) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline || !ReadSome(p)) {
      return p.output.find(needle, from) != std::string::npos;
    }
  }
  return true;
}

int Port(Proc& p) {
  if (!WaitFor(p, "(port ")) return 0;
  const size_t at = p.output.find("(port ") + 6;
  if (!WaitFor(p, "\n", at)) return 0;  // the whole line, not a piece of it
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(p.output.substr(at, p.output.find(')', at) - at), &port));
  return port;
}

int ExitCode(Proc& p) {
  int status = 0;
  EXPECT_EQ(waitpid(p.pid, &status, 0), p.pid);
  while (ReadSome(p)) {
  }  // the rest of stderr, up to EOF
  close(p.err);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

std::vector<std::string> ServeArgs(const std::string& device) {
  return {"--device", device, "--create-size", "32M", "--listen", "127.0.0.1:0",
          "--metrics-listen", ""};
}

TEST(Cowkvd, SigtermDrainsCommitsAndExitsZero) {
  const std::string device = TempPath("drain");
  Proc p = Spawn(ServeArgs(device));
  const int port = Port(p);
  ASSERT_GT(port, 0) << p.output;
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto kv = cowkv::v1::KV::NewStub(channel);
  auto files = cowkv::v1::Files::NewStub(channel);
  cowkv::v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  put.set_durability(cowkv::v1::DURABILITY_ASYNC);  // durable only through the stop's commit
  cowkv::v1::PutResponse put_resp;
  ASSERT_TRUE(kv->Put(Ctx().get(), put, &put_resp).ok());

  // An in-flight Write stream: started before the signal, finished after.
  auto ctx = Ctx();
  cowkv::v1::WriteResponse wr;
  auto w = files->Write(ctx.get(), &wr);
  cowkv::v1::WriteRequest first;
  first.set_path("/f");
  first.set_create(true);
  first.set_data("first;");
  ASSERT_TRUE(w->Write(first));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(p.pid, SIGTERM), 0);
  ASSERT_TRUE(WaitFor(p, "draining")) << p.output;
  cowkv::v1::WriteRequest more;
  more.set_data("second");
  ASSERT_TRUE(w->Write(more));
  w->WritesDone();
  const grpc::Status ws = w->Finish();
  EXPECT_TRUE(ws.ok()) << ws.error_message();
  EXPECT_EQ(wr.bytes_written(), 12u);
  // Close the connection: gRPC's shutdown waits (about 5 s) for idle
  // clients that never poll their connection, as this blocked test would not.
  w.reset();
  kv.reset();
  files.reset();
  channel.reset();
  EXPECT_EQ(ExitCode(p), 0) << p.output;
  EXPECT_NE(p.output.find("stopped cleanly"), std::string::npos) << p.output;
  // The drain ends before the 10 s drain timeout. (With a call in flight at
  // the signal, gRPC 1.51's shutdown handshake with the client adds about
  // 5 s; an idle server stops at once, below.)
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(9));

  // Restart on the same device (not formatted again): everything is there.
  Proc again = Spawn(ServeArgs(device));
  const int port2 = Port(again);
  ASSERT_GT(port2, 0) << again.output;
  EXPECT_EQ(again.output.find("created and formatted"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("created=false"), std::string::npos) << again.output;
  auto channel2 = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port2),
                                      grpc::InsecureChannelCredentials());
  cowkv::v1::GetRequest get;
  get.set_key("k");
  cowkv::v1::GetResponse got;
  const grpc::Status gs = cowkv::v1::KV::NewStub(channel2)->Get(Ctx().get(), get, &got);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  EXPECT_EQ(got.kv().value(), "v");
  cowkv::v1::StatRequest stat;
  stat.set_path("/f");
  cowkv::v1::FileStat st;
  ASSERT_TRUE(cowkv::v1::Files::NewStub(channel2)->Stat(Ctx().get(), stat, &st).ok());
  EXPECT_EQ(st.size(), 12u);

  // A second server on the same device is refused while this one runs.
  Proc second = Spawn(ServeArgs(device));
  EXPECT_EQ(ExitCode(second), 1);
  EXPECT_NE(second.output.find("in use"), std::string::npos) << second.output;

  channel2.reset();
  const auto interrupted = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(again.pid, SIGINT), 0);
  EXPECT_EQ(ExitCode(again), 0) << again.output;
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, std::chrono::seconds(3));
}

TEST(Cowkvd, UsageErrorsExitTwo) {
  const std::string device = TempPath("usage");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"--device", device, "--tls-cert", "/nonexistent"},
           {"--device", device, "--create-size", "12Q"},
           {"--device", device, "--no-such-flag"},
       }) {
    Proc p = Spawn(args);
    EXPECT_EQ(ExitCode(p), 2) << p.output;
    EXPECT_NE(p.output.find("cowkvd: usage: "), std::string::npos) << p.output;
  }
  Proc help = Spawn({"--help"});
  EXPECT_EQ(ExitCode(help), 0);
}

// Beyond loopback without TLS and a token, cowkvd refuses to start and
// says why, unless told --insecure-listen; /metrics likewise.
TEST(Cowkvd, RefusesAnUnprotectedNetworkListener) {
  const std::string device = TempPath("insecure");
  std::vector<std::string> args = ServeArgs(device);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--listen") args[i + 1] = "0.0.0.0:0";
  }
  Proc p = Spawn(args);
  EXPECT_EQ(ExitCode(p), 2) << p.output;
  EXPECT_NE(p.output.find("--insecure-listen"), std::string::npos) << p.output;
  std::vector<std::string> metrics = ServeArgs(device);
  for (size_t i = 0; i + 1 < metrics.size(); ++i) {
    if (metrics[i] == "--metrics-listen") metrics[i + 1] = "0.0.0.0:0";
  }
  Proc m = Spawn(metrics);
  EXPECT_EQ(ExitCode(m), 2) << m.output;
  EXPECT_NE(m.output.find("/metrics has no authentication"), std::string::npos) << m.output;
  args.push_back("--insecure-listen");
  Proc ok = Spawn(args);
  ASSERT_GT(Port(ok), 0) << ok.output;
  ASSERT_EQ(kill(ok.pid, SIGTERM), 0);
  EXPECT_EQ(ExitCode(ok), 0) << ok.output;
}

// Goal: --log-format=json writes one JSON object per line, each with ts,
// level, event and msg, and the operator events happen: start (with the
// options), mount, serving, auth_failed (with method and peer), enospc
// (with what was refused), stopping, stopped.
TEST(Cowkvd, JsonLogsHaveOneEventPerLine) {
  const std::string device = TempPath("jsonlog");
  const std::string token_file = absl::StrCat(TempPath("jsonlog-token"), ".txt");
  {
    FILE* f = fopen(token_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("s3cret\n", f);
    fclose(f);
  }
  std::vector<std::string> args = ServeArgs(device);
  for (const char* a : {"--log-format", "json", "--auth-token-file", token_file.c_str()}) {
    args.push_back(a);
  }
  Proc p = Spawn(args);
  const int port = Port(p);
  ASSERT_GT(port, 0) << p.output;
  auto kv = cowkv::v1::KV::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                       grpc::InsecureChannelCredentials()));
  cowkv::v1::PutRequest put;
  put.set_key("k");
  put.set_value(std::string(1 << 20, 'v'));
  cowkv::v1::PutResponse resp;
  EXPECT_EQ(kv->Put(Ctx().get(), put, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Fill the 32 MiB device: the refused write is logged.
  grpc::Status s;
  for (int i = 0; i < 64 && s.ok(); ++i) {
    auto ctx = Ctx();
    ctx->AddMetadata("authorization", "Bearer s3cret");
    put.set_key(absl::StrCat("k", i));
    s = kv->Put(ctx.get(), put, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ASSERT_EQ(kill(p.pid, SIGTERM), 0);
  EXPECT_EQ(ExitCode(p), 0) << p.output;
  std::vector<std::string> events;
  size_t start = 0;
  while (start < p.output.size()) {
    const size_t end = p.output.find('\n', start);
    const std::string line = p.output.substr(start, end - start);
    start = end == std::string::npos ? p.output.size() : end + 1;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not one JSON object: " << line;
    for (const char* key : {"ts", "level", "event", "msg"}) {
      ASSERT_TRUE(j.contains(key) && j[key].is_string()) << key << " in " << line;
    }
    const std::string event = j["event"];
    events.push_back(event);
    if (event == "start") {
      EXPECT_EQ(j["device"], device);
      EXPECT_EQ(j["auth"], true);
      EXPECT_TRUE(j["max_inflight_bytes"].is_number());
    }
    if (event == "auth_failed") {
      EXPECT_EQ(j["method"], "cowkv.v1.KV/Put");
      EXPECT_NE(j["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
      EXPECT_EQ(j["level"], "warning");
    }
    if (event == "enospc") {
      EXPECT_EQ(j["reason"], "ENOSPC") << line;
    }
    if (event == "mount") {
      EXPECT_TRUE(j["log_entries_replayed"].is_number());
    }
  }
  const std::vector<std::string> want = {"start", "mount", "serving", "auth_failed", "enospc",
                                         "stopping", "stopped"};
  size_t at = 0;
  for (const std::string& e : events) {
    if (at < want.size() && e == want[at]) ++at;
  }
  EXPECT_EQ(at, want.size()) << p.output;
}

TEST(Cowkvd, ExistingDeviceIsNotFormattedWithoutMkfs) {
  const std::string device = TempPath("existing");
  const int fd = open(device.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 32 << 20), 0);
  close(fd);
  Proc p = Spawn(ServeArgs(device));
  EXPECT_EQ(ExitCode(p), 1);
  EXPECT_NE(p.output.find("--mkfs"), std::string::npos) << p.output;
  std::vector<std::string> args = ServeArgs(device);
  args.push_back("--mkfs");
  Proc formatted = Spawn(args);
  ASSERT_GT(Port(formatted), 0) << formatted.output;
  ASSERT_EQ(kill(formatted.pid, SIGTERM), 0);
  EXPECT_EQ(ExitCode(formatted), 0) << formatted.output;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: cowkvd_test PATH_TO_COWKVD\n");
    return 2;
  }
  g_cowkvd = argv[1];
  return RUN_ALL_TESTS();
}
