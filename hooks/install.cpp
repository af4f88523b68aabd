#include "hooks/install.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hooks/pre_commit_script.h"

namespace shardproof::hooks {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

bool is_ours(const fs::path& hook) {
  return read_text(hook).find(kHookMarker) != std::string::npos;
}

std::string single_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Written beside the hook, then renamed over it: git never runs half a script.
Status write_script(const fs::path& hook, const std::string& text) {
  fs::path tmp = hook;
  tmp += ".shardproof-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Status::error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::permissions(tmp, fs::perms(0755), ec);
  if (!ec) fs::rename(tmp, hook, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error("cannot install " + hook.string() + ": " + ec.message());
  }
  return Status();
}

}  // namespace

std::string pre_commit_framework_advice(const std::string& config_text,
                                        const std::string& version) {
  const std::string head = std::string("this repository uses the pre-commit framework (") +
                           kPreCommitFrameworkConfig + "): no git hook installed";
  if (config_text.find("shardproof-verify") != std::string::npos)
    return head +
           "; its hook shardproof-verify is already listed there (`pre-commit install` "
           "puts it to work)";
  return head + ". Add shardproof to " + kPreCommitFrameworkConfig +
         " instead, then run `pre-commit install`:\n"
         "\n"
         "repos:\n"
         "  - repo: https://github.com/YOUR-ORG/shardproof  # where you install shardproof from\n"
         "    rev: v" +
         version +
         "\n"
         "    hooks:\n"
         "      - id: shardproof-verify\n"
         "\n"
         "(shardproof must be on PATH: the hook is `language: system`; docs/integration.md)";
}

std::string hook_script(const std::string& binary) {
  std::string script = kPreCommitScript;
  const std::string placeholder = "installed_bin=''";
  size_t at = script.find(placeholder);
  if (at != std::string::npos)
    script.replace(at, placeholder.size(), "installed_bin=" + single_quoted(binary));
  return script;
}

Status install_hook(const std::string& hooks_dir, const std::string& binary, std::string* message) {
  fs::path dir(hooks_dir);
  fs::path hook = dir / "pre-commit";
  fs::path kept = dir / "pre-commit.local";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::error("cannot create " + dir.string() + ": " + ec.message());
  std::string script = hook_script(binary);

  bool exists = fs::symlink_status(hook, ec).type() != fs::file_type::not_found;
  if (exists && is_ours(hook)) {
    if (read_text(hook) == script) {
      *message = "already installed: " + hook.string();
      return Status();
    }
    if (Status s = write_script(hook, script); !s.ok()) return s;
    *message = "updated " + hook.string();
    return Status();
  }
  if (exists) {
    if (fs::symlink_status(kept, ec).type() != fs::file_type::not_found)
      return Status::error(hook.string() + " is not shardproof's and " + kept.string() +
                           " exists too: move one of them away, then install again");
    fs::rename(hook, kept, ec);
    if (ec) return Status::error("cannot rename " + hook.string() + ": " + ec.message());
    if (Status s = write_script(hook, script); !s.ok()) {
      fs::rename(kept, hook, ec);
      return s;
    }
    *message = "installed " + hook.string() + "; the hook that was there is now " +
               kept.filename().string() + " and runs first";
    return Status();
  }
  if (Status s = write_script(hook, script); !s.ok()) return s;
  *message = "installed " + hook.string();
  return Status();
}

Status uninstall_hook(const std::string& hooks_dir, std::string* message) {
  fs::path dir(hooks_dir);
  fs::path hook = dir / "pre-commit";
  fs::path kept = dir / "pre-commit.local";
  std::error_code ec;
  if (fs::symlink_status(hook, ec).type() == fs::file_type::not_found) {
    *message = "not installed: no " + hook.string();
    return Status();
  }
  if (!is_ours(hook)) {
    *message = "not installed: " + hook.string() + " is not shardproof's (left alone)";
    return Status();
  }
  fs::remove(hook, ec);
  if (ec) return Status::error("cannot remove " + hook.string() + ": " + ec.message());
  if (fs::symlink_status(kept, ec).type() != fs::file_type::not_found) {
    fs::rename(kept, hook, ec);
    if (ec) return Status::error("cannot restore " + kept.string() + ": " + ec.message());
    *message = "removed shardproof's hook; restored the original " + hook.string();
    return Status();
  }
  *message = "removed " + hook.string();
  return Status();
}

}  // namespace shardproof::hooks
