// Torch harnesses in the hooks: `harnesses` in .shardproof.json, the scan
// of a harness's local imports, and the selection of a harness when it or a
// file it imports changes. The CLI side (capture, verify H.py) is
// tests/harness_cli_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "hooks/process.h"
#include "hooks/python_imports.h"
#include "hooks/repo_config.h"
#include "hooks/selection.h"

namespace shardproof::hooks {
namespace {

class PythonTree : public TreeReader {
 public:
  std::map<std::string, std::string> files;
  int reads = 0;
  std::map<std::string, std::optional<std::string>> read(
      const std::vector<std::string>& paths) override {
    ++reads;
    std::map<std::string, std::optional<std::string>> out;
    for (const std::string& p : paths) {
      auto it = files.find(p);
      out[p] = it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    return out;
  }
  std::vector<std::string> plan_candidates() override { return {}; }
  std::vector<std::string> python_files() override {
    std::vector<std::string> out;
    for (const auto& [path, text] : files)
      if (path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0) out.push_back(path);
    return out;
  }
};

std::string modules(const std::string& source) {
  std::string out;
  for (const PythonImport& i : scan_python_imports(source)) {
    out += std::string(i.level, '.') + i.module;
    if (!i.names.empty()) {
      out += "[";
      for (size_t k = 0; k < i.names.size(); ++k) out += (k ? "," : "") + i.names[k];
      out += "]";
    }
    out += " ";
  }
  return out;
}

TEST(HarnessImports, StatementsOfEveryForm) {
  EXPECT_EQ(modules("import torch\nimport a.b as c, d\n"), "torch a.b d ");
  EXPECT_EQ(modules("from model import MLP, Block as B\n"), "model[MLP,Block] ");
  EXPECT_EQ(modules("from . import layers\nfrom ..util.x import (f,\n  g)  # tail\n"),
            ".[layers] ..util.x[f,g] ");
  EXPECT_EQ(modules("if x: import m; import n\ndef f():\n    from p import *\n"), "n p[*] ");
  // Comments and docstrings are not code; a backslash continues a line.
  EXPECT_EQ(modules("# import nope\n\"\"\"\nimport nope2 (\n\"\"\"\nimport \\\n  yes\n"), "yes ");
  EXPECT_EQ(modules("x = 'import nope'\nimportant = 1\nfromage = 2\n"), "");
}

TEST(HarnessImports, CandidatesFollowPythonsResolution) {
  auto candidates = [](const std::string& source, const std::string& importer) {
    std::set<std::string> out;
    for (const PythonImport& i : scan_python_imports(source))
      for (const std::string& c : import_candidates(i, importer, "train")) out.insert(c);
    return out;
  };
  std::set<std::string> c = candidates("import model.layers\n", "train/h.py");
  EXPECT_TRUE(c.count("train/model.py"));
  EXPECT_TRUE(c.count("train/model/__init__.py"));
  EXPECT_TRUE(c.count("train/model/layers.py"));
  EXPECT_TRUE(c.count("model/layers.py"));  // from the repository root too
  c = candidates("from .x import y\n", "train/pkg/m.py");
  EXPECT_TRUE(c.count("train/pkg/x.py"));
  EXPECT_TRUE(c.count("train/pkg/x/y.py"));
  c = candidates("from .. import util\n", "train/pkg/m.py");
  EXPECT_TRUE(c.count("train/__init__.py"));
  EXPECT_TRUE(c.count("train/util.py"));
}

TEST(HarnessImports, DependenciesAreTransitiveAndLocal) {
  PythonTree tree;
  tree.files["train/h.py"] = "import torch\nfrom model import GPT\n";
  tree.files["train/model/__init__.py"] = "from .gpt import GPT\n";
  tree.files["train/model/gpt.py"] = "from .layers import Block\nimport numpy\n";
  tree.files["train/model/layers.py"] = "import torch.nn as nn\n";
  tree.files["train/unrelated.py"] = "import model\n";
  std::vector<std::string> deps = harness_dependencies("train/h.py", tree);
  EXPECT_EQ(deps, (std::vector<std::string>{"train/h.py", "train/model/__init__.py",
                                            "train/model/gpt.py", "train/model/layers.py"}));
  // Import cycles end.
  tree.files["train/model/layers.py"] = "from . import gpt\n";
  EXPECT_EQ(harness_dependencies("train/h.py", tree).size(), 4u);
}

TEST(HarnessImports, ModulesBesideAParentOnSysPathAreDependencies) {
  // The examples' layout: the harness puts its parent directory on sys.path
  // and imports a module there. Before, only the harness's directory and the
  // repository root were searched, so a bug committed in that module ran no
  // harness (hooks and CI gate green).
  PythonTree tree;
  tree.files["examples/torch/mlp/harness.py"] =
      "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n"
      "from megatron_layers import bug\nfrom model import MLP\n";
  tree.files["examples/torch/mlp/model.py"] = "import torch\n";
  tree.files["examples/torch/megatron_layers.py"] = "import torch\n";
  tree.files["examples/torch/gpt/model.py"] = "import torch\n";
  EXPECT_EQ(
      harness_dependencies("examples/torch/mlp/harness.py", tree),
      (std::vector<std::string>{"examples/torch/megatron_layers.py",
                                "examples/torch/mlp/harness.py", "examples/torch/mlp/model.py"}));
  // A directory a file adds to sys.path by name (`os.path.join(here, "..", "lib")`).
  tree.files["train/h.py"] =
      "import sys\nsys.path.insert(0, os.path.join(HERE, '..', 'lib'))\nfrom tp import Col\n";
  tree.files["lib/tp.py"] = "from helpers import x\n";
  tree.files["lib/helpers.py"] = "x = 1\n";
  tree.files["tools/tp.py"] = "y = 1\n";
  EXPECT_EQ(harness_dependencies("train/h.py", tree),
            (std::vector<std::string>{"lib/helpers.py", "lib/tp.py", "train/h.py"}));
}

TEST(HarnessSelection, AHarnessRunsWhenItOrAFileItImportsChanges) {
  PythonTree tree;
  tree.files["train/h.py"] = "from model import GPT\n";
  tree.files["train/model.py"] = "from layers import Block\n";
  tree.files["train/layers.py"] = "x = 1\n";
  tree.files["train/other.py"] = "y = 1\n";
  tree.files["tools/h.py"] = "import other\n";  // matches no harness pattern
  RepoConfig config;
  config.harnesses = {"train/h.py"};

  Selection s = select_plans({{"train/layers.py", false}}, config, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].path, "train/h.py");
  EXPECT_TRUE(s.plans[0].harness);
  EXPECT_EQ(s.plans[0].reason, "imports train/layers.py");

  s = select_plans({{"train/h.py", false}}, config, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].reason, "changed");

  // A deleted imported file counts; an unrelated .py file does not.
  EXPECT_EQ(select_plans({{"train/model.py", true}}, config, tree).plans.size(), 1u);
  EXPECT_TRUE(select_plans({{"train/other.py", false}}, config, tree).empty());

  // Excluded harnesses are left out; no change to a .py file reads nothing.
  config.exclude = {"train/**"};
  EXPECT_TRUE(select_plans({{"train/h.py", false}}, config, tree).empty());
  tree.reads = 0;
  config.exclude.clear();
  EXPECT_TRUE(select_plans({{"README.md", false}}, config, tree).empty());
  EXPECT_EQ(tree.reads, 0);
}

TEST(HarnessConfig, HarnessesAreGlobLists) {
  std::string error;
  std::optional<RepoConfig> c =
      parse_repo_config(R"({"harnesses": ["train/*_harness.py"]})", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->harnesses, std::vector<std::string>{"train/*_harness.py"});
  EXPECT_FALSE(parse_repo_config(R"({"harnesses": "train/h.py"})", &error));
  EXPECT_NE(error.find("/harnesses"), std::string::npos) << error;
  EXPECT_FALSE(parse_repo_config(R"({"harnesses": [""]})", &error));
}

TEST(HarnessProcess, EnvironmentEntriesReplaceByName) {
  ProcessOptions o;
  o.env = {"SHARDPROOF_TEST_VAR=set by the test", "HOME=/nowhere"};
  ProcessResult r = run_process({"/bin/sh", "-c", "echo \"$SHARDPROOF_TEST_VAR|$HOME\""}, o);
  EXPECT_EQ(r.out, "set by the test|/nowhere\n");
}

}  // namespace
}  // namespace shardproof::hooks
