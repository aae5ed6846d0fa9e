// cowkv: the command-line tool. Everything lives in the library (app.cc and
// one .cc per command, see commands.h); this only parses and runs.
#include "clients/cli/app.h"

int main(int argc, char** argv) {
  cowkv::cli::Cli cli;
  const int rc = cli.Parse(argc, argv);
  if (rc >= 0) return rc;
  return cli.Run();
}
