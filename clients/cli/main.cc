// cowkv: the command-line tool. Everything lives in the library (app.cc and
// one .cc per command, see commands.h); this only parses and runs.
#include "absl/synchronization/mutex.h"
#include "clients/cli/app.h"

int main(int argc, char** argv) {
  // Debian's Abseil checks every lock for deadlock cycles (no NDEBUG): the
  // tests keep that, the shipped tools do not (see server/main.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  cowkv::cli::Cli cli;
  const int rc = cli.Parse(argc, argv);
  if (rc >= 0) return rc;
  return cli.Run();
}
