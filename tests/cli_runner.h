// Runs the `shardproof` binary as a user would (a shell command line, stdin
// closed) and collects its exit status, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shardproof::testing {

struct CliResult {
  int code = -1;  // exit status; -1 when killed by a signal
  std::string out;
  std::string err;
};

// Single-quoted for a POSIX shell.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `args` is pasted into the command line: quote paths with shell_quote().
// stderr goes through `err_file`.
inline CliResult run_cli(const std::string& args, const std::filesystem::path& err_file) {
  std::string cmd = shell_quote(SHARDPROOF_CLI) + " " + args + " 2>" +
                    shell_quote(err_file.string()) + " </dev/null";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp_file(err_file);
  return r;
}

// A scratch directory per test (named after `prefix`, the process and the
// test), removed afterwards; file() writes a file into it.
class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path file(const std::string& name, const std::string& content) {
    std::filesystem::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  std::string prefix_;
  std::filesystem::path dir_;
};

}  // namespace shardproof::testing
