// Runs a shell command in a test and keeps what it printed (stdout and stderr
// together): the tests that drive a tool or an oracle (sclite, md-eval.pl, the
// bench binaries) read its output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace earshot::testing {

struct CommandResult {
  int status = -1;  // the exit status; -1 when it could not run or was killed by a signal
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "cannot run " + command};
  CommandResult r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace earshot::testing
