#include "bench/bench_util.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "benchmark/benchmark.h"

namespace cowkv_bench {

bool ParseU64(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

double PercentileUs(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  std::sort(v->begin(), v->end());
  size_t rank = static_cast<size_t>(std::ceil(p * v->size()));
  rank = std::min(std::max<size_t>(rank, 1), v->size());
  return (*v)[rank - 1] * 1e6;
}

std::string RemovePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return "remove " + path + ": " + ec.message();
  return "";
}

std::string FlagValue(int argc, char** argv, const std::string& prefix) {
  std::string v;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) v = argv[i] + prefix.size();
  }
  return v;
}

bool ReadOutFlags(int argc, char** argv, const char* program, OutFlags* out) {
  out->file = FlagValue(argc, argv, "--benchmark_out=");
  out->format = FlagValue(argc, argv, "--benchmark_out_format=");
  if (out->format == "csv") {
    std::fprintf(stderr, "%s: --benchmark_out_format=csv is not supported\n", program);
    return false;
  }
  return true;
}

std::string MakeRunDir(const std::string& base, const std::string& prefix, std::string* err) {
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) {
    *err = "mkdir " + base + ": " + ec.message();
    return "";
  }
  const std::string tmpl = base + "/" + prefix + ".XXXXXX";  // mkdtemp's template
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    *err = "mkdtemp " + tmpl + ": " + std::strerror(errno);
    return "";
  }
  return buf.data();
}

namespace {

// Forwards to `inner` with the run names cleared as RunWithExactNames says.
class ExactNameReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ExactNameReporter(benchmark::BenchmarkReporter* inner) : inner_(inner) {}

  bool ReportContext(const Context& context) override {
    // RunSpecifiedBenchmarks set our streams (e.g. the --benchmark_out file).
    inner_->SetOutputStream(&GetOutputStream());
    inner_->SetErrorStream(&GetErrorStream());
    return inner_->ReportContext(context);
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> renamed(runs);
    for (Run& r : renamed) {
      r.run_name.min_time.clear();
      r.run_name.min_warmup_time.clear();
      r.run_name.iterations.clear();
      r.run_name.time_type.clear();
    }
    inner_->ReportRuns(renamed);
  }
  void Finalize() override { inner_->Finalize(); }

 private:
  benchmark::BenchmarkReporter* inner_;
};

}  // namespace

void RunWithExactNames(const OutFlags& out) {
  const std::string& out_file = out.file;
  const std::string& out_format = out.format;
  std::unique_ptr<benchmark::BenchmarkReporter> display_inner(
      benchmark::CreateDefaultDisplayReporter());
  ExactNameReporter display(display_inner.get());
  std::unique_ptr<benchmark::BenchmarkReporter> file_inner;
  std::unique_ptr<ExactNameReporter> file;
  if (!out_file.empty()) {
    if (out_format == "console") {
      file_inner =
          std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
    } else {
      file_inner = std::make_unique<benchmark::JSONReporter>();
    }
    file = std::make_unique<ExactNameReporter>(file_inner.get());
  }
  benchmark::RunSpecifiedBenchmarks(&display, file.get());
}

}  // namespace cowkv_bench
