// The parts of `cowkv` that need no server: argument parsing (global options
// before or after the command, usage errors as exit 2), the exit code of
// every gRPC status class, and the output formats (filefrag table, JSON
// header and bytes, tables, escapes, the kv txn spec).
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "clients/cli/app.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"
#include "clients/cli/progress.h"
#include "clients/cli/usage.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace cli {
namespace {

// Parses argv (without the program name) with a fresh Cli.
struct Parsed {
  int rc;
  std::string chosen;
  Globals globals;
};

Parsed ParseArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "cowkv");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Cli cli;
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  const int rc = cli.Parse(static_cast<int>(argv.size()), argv.data());
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return {rc, rc < 0 ? cli.chosen() : "", cli.globals()};
}

TEST(Parse, GlobalsBeforeTheCommand) {
  Parsed p = ParseArgs({"--server", "10.0.0.1:9", "--timeout", "2.5",
                        "--json", "kv", "get", "-s", "data", "k"});
  EXPECT_EQ(p.rc, -1);
  EXPECT_EQ(p.chosen, "kv get");
  EXPECT_EQ(p.globals.server, "10.0.0.1:9");
  EXPECT_DOUBLE_EQ(p.globals.timeout_seconds, 2.5);
  EXPECT_TRUE(p.globals.timeout_given);
  EXPECT_TRUE(p.globals.json);
}

TEST(Parse, GlobalsAfterTheCommand) {
  Parsed p = ParseArgs({"subvolume", "list", "--json", "--server=h:1"});
  EXPECT_EQ(p.rc, -1);
  EXPECT_EQ(p.chosen, "subvolume list");
  EXPECT_EQ(p.globals.server, "h:1");
  EXPECT_TRUE(p.globals.json);
  EXPECT_FALSE(p.globals.timeout_given);
}

TEST(Parse, Defaults) {
  Parsed p = ParseArgs({"stats"});
  EXPECT_EQ(p.rc, -1);
  EXPECT_EQ(p.globals.server, "127.0.0.1:7420");
  EXPECT_DOUBLE_EQ(p.globals.timeout_seconds, 30);
  EXPECT_FALSE(p.globals.json);
}

TEST(Parse, EveryOnlineCommand) {
  const std::vector<std::vector<std::string>> ok = {
      {"subvolume", "create", "data@2026-11-22"},
      {"subvolume", "snapshot", "-r", "data", "data@1"},
      {"subvolume", "rename", "a", "b"},
      {"subvolume", "delete", "a", "b"},
      {"subvolume", "show", "a"},
      {"kv", "put", "k", "v", "--durability", "async"},
      {"kv", "del", "--prefix", "p"},
      {"kv", "range", "--prefix", "p", "--limit", "5", "--reverse",
       "--keys-only"},
      {"kv", "txn", "spec.json"},
      {"fs", "ls", "-l", "/"},
      {"fs", "mkdir", "-p", "/a/b", "--mode", "0700"},
      {"fs", "put", "-", "/f"},
      {"fs", "cat", "/f", "/g"},
      {"fs", "mv", "--exchange", "/a", "/b"},
      {"fs", "ln", "--symbolic", "-s", "data", "target", "/l"},
      {"fs", "rm", "/a"},
      {"fs", "rmdir", "/d"},
      {"fs", "fsync", "--data", "/f"},
      {"fs", "clone", "--length", "64K", "/a", "/b"},
      {"fs", "fiemap", "/f"},
      {"sync"},
      {"check"},
      {"check", "--json", "img"},
  };
  for (const auto& args : ok) {
    Parsed p = ParseArgs(args);
    EXPECT_EQ(p.rc, -1) << args[0] << " " << args[1 % args.size()];
  }
}

TEST(Parse, UsageErrorsExit2) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"--bogus"},
      {"kv"},                                      // no subcommand
      {"kv", "get"},                               // KEY missing
      {"kv", "put", "k", "v", "--durability", "sometimes"},
      {"fs", "mv", "--exchange", "--no-replace", "/a", "/b"},
      {"fs", "mkdir", "--mode", "999", "/a"},
      {"fs", "clone", "--length", "lots", "/a", "/b"},
      {"--timeout", "-1", "sync"},
      {"subvolume", "snapshot", "data"},           // NAME missing
  };
  for (const auto& args : bad) {
    EXPECT_EQ(ParseArgs(args).rc, kExitUsage)
        << (args.empty() ? "(none)" : args[0]);
  }
}

TEST(Parse, HelpAndVersionExit0) {
  EXPECT_EQ(ParseArgs({"--help"}).rc, 0);
  EXPECT_EQ(ParseArgs({"--version"}).rc, 0);
  EXPECT_EQ(ParseArgs({"fs", "fiemap", "--help"}).rc, 0);
}

// `fs ln --help` names the symlink flag by its real name: -s is
// --subvolume everywhere, so help that says "with -s" sends people astray.
TEST(Parse, FsLnHelpNamesTheSymlinkFlag) {
  const char* argv[] = {"cowkv", "fs", "ln", "--help"};
  Cli cli;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli.Parse(4, argv), 0);
  const std::string help = testing::internal::GetCapturedStdout() +
                           testing::internal::GetCapturedStderr();
  EXPECT_NE(help.find("symlink target with --symbolic"), std::string::npos) << help;
  EXPECT_EQ(help.find("with -s)"), std::string::npos) << help;
  EXPECT_NE(help.find("-s,--subvolume"), std::string::npos) << help;
}

TEST(Parse, FirstCommandWordSkipsOptionValues) {
  const char* argv[] = {"cowkv", "--server", "kv", "--timeout", "3",
                        "--json", "fs", "ls"};
  EXPECT_STREQ(FirstCommandWord(8, argv), "fs");
  const char* none[] = {"cowkv", "--json"};
  EXPECT_EQ(FirstCommandWord(2, none), nullptr);
}

TEST(ExitCodes, OnePerStatusClass) {
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OK), 0);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::INTERNAL), 1);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::INVALID_ARGUMENT), 3);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::NOT_FOUND), 4);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::ALREADY_EXISTS), 5);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::FAILED_PRECONDITION), 6);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::ABORTED), 7);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OUT_OF_RANGE), 7);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::RESOURCE_EXHAUSTED), 8);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::DATA_LOSS), 9);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAVAILABLE), 10);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::DEADLINE_EXCEEDED), 11);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAUTHENTICATED), 12);
}

TEST(Names, SubvolumeNameProblem) {
  EXPECT_EQ(SubvolumeNameProblem("data@2026-11-22"), "");
  EXPECT_NE(SubvolumeNameProblem(""), "");
  EXPECT_NE(SubvolumeNameProblem("a/b"), "");
  EXPECT_NE(SubvolumeNameProblem(std::string("a\0b", 3)), "");
  EXPECT_EQ(SubvolumeNameProblem(std::string(255, 'x')), "");
  EXPECT_NE(SubvolumeNameProblem(std::string(256, 'x')), "");
}

v1::FiemapExtent Extent(uint64_t logical, uint64_t physical, uint64_t length,
                        uint32_t flags) {
  v1::FiemapExtent e;
  e.set_logical(logical);
  e.set_physical(physical);
  e.set_length(length);
  e.set_flags(flags);
  return e;
}

TEST(Fiemap, OneSharedExtentLikeFilefrag) {
  const std::string out = FormatFiemap(
      "/a", 300000,
      {Extent(0, 163840000, 303104,
              v1::FIEMAP_FLAG_LAST | v1::FIEMAP_FLAG_SHARED)});
  EXPECT_EQ(out,
            "Filesystem type is: cowkv\n"
            "File size of /a is 300000 (74 blocks of 4096 bytes)\n"
            " ext:     logical_offset:        physical_offset: length:   "
            "expected: flags:\n"
            "   0:        0..      73:      40000..     40073:     74:      "
            "       last,shared,eof\n"
            "/a: 1 extent found\n");
}

TEST(Fiemap, FragmentsInlineAndEmpty) {
  const std::string two = FormatFiemap(
      "f", 8192,
      {Extent(0, 4096 * 100, 4096, 0),
       Extent(4096, 4096 * 200, 4096, v1::FIEMAP_FLAG_LAST)});
  EXPECT_NE(two.find("   1:        1..       1:        200..       200:"
                     "      1:        101: last,eof\n"),
            std::string::npos)
      << two;
  EXPECT_NE(two.find("f: 2 extents found\n"), std::string::npos);
  const std::string inline_ext = FormatFiemap(
      "i", 6,
      {Extent(0, 0, 6, v1::FIEMAP_FLAG_LAST | v1::FIEMAP_FLAG_INLINE |
                           v1::FIEMAP_FLAG_NOT_ALIGNED)});
  EXPECT_NE(inline_ext.find("(1 block of 4096 bytes)"), std::string::npos);
  EXPECT_NE(inline_ext.find("   0:        0..       5:          0..         "
                            "5:      6:             "
                            "last,not_aligned,inline,eof\n"),
            std::string::npos)
      << inline_ext;
  const std::string empty = FormatFiemap("e", 0, {});
  EXPECT_EQ(empty,
            "Filesystem type is: cowkv\n"
            "File size of e is 0 (0 blocks of 4096 bytes)\n"
            "e: 0 extents found\n");
}

// fallocate's preallocated extents: "unwritten", in filefrag's flag order
// (after inline, before shared), also past EOF.
TEST(Fiemap, UnwrittenExtents) {
  EXPECT_EQ(absl::StrJoin(FiemapFlagNames(v1::FIEMAP_FLAG_LAST | v1::FIEMAP_FLAG_SHARED |
                                          v1::FIEMAP_FLAG_UNWRITTEN),
                          ","),
            "last,unwritten,shared");
  const std::string out = FormatFiemap(
      "p", 4096,
      {Extent(0, 4096 * 10, 4096, 0),
       Extent(4096, 4096 * 11, 8192, v1::FIEMAP_FLAG_LAST | v1::FIEMAP_FLAG_UNWRITTEN)});
  EXPECT_NE(out.find("last,unwritten,eof\n"), std::string::npos) << out;
}

TEST(Json, HeaderComesFirstAndBytesRoundTrip) {
  Json j = JsonObject();
  j["a"] = 1;
  const std::string text = DumpJson(j);
  EXPECT_EQ(text, "{\n  \"__header\": {\n    \"version\": \"1\"\n  },\n"
                  "  \"a\": 1\n}\n");
  EXPECT_EQ(BytesJson("héllo"), Json("héllo"));
  const std::string binary("\x00\xff", 2);
  Json b = BytesJson(binary);
  EXPECT_EQ(b.dump(), "{\"base64\":\"AP8=\"}");
  EXPECT_EQ(*BytesFromJson(b, "x"), binary);
  EXPECT_FALSE(BytesFromJson(Json(3), "x").ok());
  EXPECT_FALSE(BytesFromJson(Json{{"base64", "!!"}}, "x").ok());
}

TEST(Text, EscapesAndUtf8) {
  EXPECT_TRUE(IsUtf8("plain é €"));
  EXPECT_FALSE(IsUtf8("\xc3"));
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_EQ(EscapeBytes("a\tb\nc\\d"), "a\\tb\\nc\\\\d");
  EXPECT_EQ(EscapeBytes(std::string("\x00\xff é", 5)), "\\x00\\xff é");
}

TEST(Text, TableAlignsAndTrims) {
  Table t({"NAME", "SIZE>"});
  t.Add({"a", "1"});
  t.Add({"long-name", "12345"});
  EXPECT_EQ(t.Render(),
            "NAME        SIZE\n"
            "a              1\n"
            "long-name  12345\n");
  EXPECT_EQ(ModeString(v1::FILE_KIND_DIRECTORY, 0755), "drwxr-xr-x");
  EXPECT_EQ(ModeString(v1::FILE_KIND_REGULAR, 0644), "-rw-r--r--");
}

TEST(TxnSpec, ParsesEveryPart) {
  v1::TxnRequest req;
  absl::Status s = ParseTxnSpec(R"({
    "compare": [{"key": "owner", "target": "value", "op": "=", "value": "alice"},
                {"key": "n", "target": "version", "op": ">", "number": 2},
                {"key": "lock", "target": "exists", "exists": false}],
    "success": [{"put": {"key": "lock", "value": {"base64": "AP8="}}},
                {"delete": {"key": "x"}},
                {"delete_range": {"start": "a", "end": "b"}},
                {"range": {"prefix": "p", "limit": 3, "keys_only": true}}],
    "failure": [{"range": {"start": "lock", "end": "lock\u0000"}}],
    "durability": "async"})",
                                &req);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(req.compare_size(), 3);
  EXPECT_EQ(req.compare(1).target(), v1::Compare::TARGET_VERSION);
  EXPECT_EQ(req.compare(1).op(), v1::Compare::OP_GREATER);
  EXPECT_EQ(req.compare(1).number(), 2u);
  EXPECT_EQ(req.compare(2).op(), v1::Compare::OP_EQUAL);
  ASSERT_EQ(req.success_size(), 4);
  EXPECT_EQ(req.success(0).put().value(), std::string("\x00\xff", 2));
  EXPECT_EQ(req.success(2).delete_range().end(), "b");
  EXPECT_TRUE(req.success(3).range().keys_only());
  EXPECT_EQ(req.failure(0).range().end(), std::string("lock\0", 5));
  EXPECT_EQ(req.durability(), v1::DURABILITY_ASYNC);
}

TEST(TxnSpec, NamesTheBadPart) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"not json", "not valid JSON"},
      {R"({"sucess": []})", "unknown field 'sucess'"},
      {R"({"success": [{"put": {"key": 1}}]})", "success[0].put.key"},
      {R"({"success": [{"get": {}}]})", "unknown op 'get'"},
      {R"({"compare": [{"key": "k", "target": "size"}]})", "compare[0].target"},
      {R"({"compare": [{"key": "k", "op": "~"}]})", "compare[0].op"},
      {R"({"compare": [{"key": "k", "number": -1}]})", "must not be negative"},
      {R"({"durability": "soon"})", "durability"},
  };
  for (const auto& [spec, want] : bad) {
    v1::TxnRequest req;
    absl::Status s = ParseTxnSpec(spec, &req);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(std::string(s.message()).find(want), std::string::npos)
        << spec << " -> " << s.message();
  }
}

TEST(TxnSpec, ResponseForms) {
  v1::TxnResponse r;
  r.set_succeeded(false);
  r.set_revision(9);
  r.add_responses()->mutable_delete_()->set_deleted(2);
  v1::KeyValue* kv = r.add_responses()->mutable_range()->add_kvs();
  kv->set_key("k");
  kv->set_value("v");
  r.mutable_responses(1)->mutable_range()->set_count(1);
  EXPECT_EQ(TxnResponseText(r),
            "FAILURE\nrevision: 9\n[0] delete: 2 deleted\n[1] range: 1 key\n"
            "k\tv\n");
  Json j = TxnResponseJson(r);
  EXPECT_EQ(j.begin().key(), "__header");
  EXPECT_EQ(j["responses"][0]["delete"]["deleted"], 2);
  EXPECT_EQ(j["responses"][1]["range"]["kvs"][0]["value"], "v");
}

TEST(Progress, FormatsBytesRateAndTimeLeft) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(48ull << 20), "48.0 MiB");
  EXPECT_EQ(HumanBytes(3ull << 40), "3.0 TiB");
  EXPECT_EQ(FormatProgress("fs put", 48ull << 20, 120ull << 20, absl::Milliseconds(500)),
            "fs put: 48.0 MiB / 120.0 MiB (40%), 96.0 MiB/s, 0:01 left");
  // No rate in the first 100 ms; an unknown total (stdin) has no percent.
  EXPECT_EQ(FormatProgress("fs cat", 2048, 0, absl::Milliseconds(50)), "fs cat: 2.0 KiB");
  EXPECT_EQ(FormatProgress("fs cat", 10ull << 20, 0, absl::Seconds(2)),
            "fs cat: 10.0 MiB, 5.0 MiB/s");
  // Past the estimate (check's total is one): capped at 100%, no time left.
  EXPECT_EQ(FormatProgress("check", 2048, 1024, absl::Seconds(1)),
            "check: 2.0 KiB / 1.0 KiB (100%), 2.0 KiB/s");
  EXPECT_EQ(FormatProgress("x", 1, 3601, absl::Seconds(1)),
            "x: 1 B / 3.5 KiB (0%), 1 B/s, 60:00 left");
}

// Progress driven by a fake clock: nothing before the delay, at most one
// frame per 100 ms, each frame covering the last, erased at the end.
TEST(Progress, DelayRateLimitAndErase) {
  absl::Time now = absl::UnixEpoch();
  std::vector<std::string> out;
  Progress p(
      "fs put", 1000, /*enabled=*/true, absl::Seconds(1), [&] { return now; },
      [&](absl::string_view s) { out.emplace_back(s); });
  p.Add(100);
  now += absl::Milliseconds(999);
  p.Add(100);
  EXPECT_TRUE(out.empty()) << "drawn before the delay";
  now += absl::Milliseconds(1);
  p.Add(100);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "\rfs put: 300 B / 1000 B (30%), 300 B/s, 0:02 left");
  for (int i = 0; i < 50; ++i) {  // 49 ms of updates: no frame
    now += absl::Milliseconds(1);
    p.Add(1);
  }
  EXPECT_EQ(out.size(), 1u);
  now += absl::Milliseconds(51);
  p.Add(650);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].size(), out[0].size()) << "a shorter frame is padded over the last";
  p.Finish();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2], "\r" + std::string(out[0].size() - 1, ' ') + "\r");
  p.Add(1);
  now += absl::Seconds(5);
  p.Add(1);
  p.Finish();
  EXPECT_EQ(out.size(), 3u) << "nothing after the end";
}

TEST(Progress, DisabledOrShortDrawsNothing) {
  absl::Time now = absl::UnixEpoch();
  std::vector<std::string> out;
  {
    Progress off(
        "check", 10, /*enabled=*/false, absl::ZeroDuration(), [&] { return now; },
        [&](absl::string_view s) { out.emplace_back(s); });
    off.Add(5);
    now += absl::Seconds(2);
    off.Add(5);
  }
  {
    Progress quick(
        "check", 10, /*enabled=*/true, absl::Seconds(1), [&] { return now; },
        [&](absl::string_view s) { out.emplace_back(s); });
    quick.Add(10);
  }
  EXPECT_TRUE(out.empty());
}

TEST(Usage, ClosestName) {
  const std::vector<std::string> names = {"--limit", "--prefix", "--reverse", "--rev"};
  EXPECT_EQ(Closest("--limt", names), "--limit");
  EXPECT_EQ(Closest("--prefx", names), "--prefix");
  EXPECT_EQ(Closest("--revers", names), "--reverse");
  EXPECT_EQ(Closest("--bogus", names), "");
}

}  // namespace
}  // namespace cli
}  // namespace cowkv
