// The daemon's parts that need no process of their own: framing, request
// parsing, the report's JSON round trip, the state directory's checks,
// graph inlining and in-flight deduplication.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/inflight_store.h"
#include "daemon/line_splitter.h"
#include "daemon/protocol.h"
#include "daemon/state_dir.h"
#include "engine/format/plan_parser.h"
#include "engine/format/plan_text.h"
#include "engine/report/report_codec.h"
#include "engine/verifier.h"

namespace shardproof::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kSource = SHARDPROOF_SOURCE_DIR;

std::string temp_dir() {
  char tmpl[] = "/tmp/sp-parts-XXXXXX";
  return mkdtemp(tmpl) ? tmpl : "";
}

TEST(LineSplitter, SplitsAcrossReadsAndRefusesOversizedFrames) {
  LineSplitter s(10);
  std::vector<std::string> lines;
  auto collect = [&](std::string&& l) { lines.push_back(l); };
  EXPECT_TRUE(s.feed("ab", 2, collect));
  EXPECT_TRUE(s.feed("c\nde\n\nf", 7, collect));
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "de", ""}));
  EXPECT_EQ(s.pending(), 1u);
  EXPECT_TRUE(s.feed("123456789", 9, collect));  // "f123456789": exactly the limit
  EXPECT_FALSE(s.feed("0", 1, collect)) << "11 bytes without a newline";
  LineSplitter big(4);
  EXPECT_FALSE(big.feed("12345\n", 6, collect)) << "refused before the newline arrives";
}

TEST(LineSplitter, PayloadsAreHandedOverWholeAndLinesResumeAfterThem) {
  LineSplitter s(10);
  std::vector<std::string> lines, payloads;
  auto line = [&](std::string&& l) {
    lines.push_back(l);
    if (l == "p7") {
      EXPECT_TRUE(s.expect_payload(7));
    } else if (l == "big") {
      EXPECT_FALSE(s.expect_payload(11)) << "beyond the limit";
    }
  };
  auto payload = [&](std::string&& p) { payloads.push_back(p); };
  auto feed = [&](std::string_view bytes) {
    return s.feed(bytes.data(), bytes.size(), line, payload);
  };
  EXPECT_TRUE(feed("p7\na\nb"));
  EXPECT_TRUE(s.mid_frame());
  EXPECT_EQ(s.pending(), 3u);
  EXPECT_TRUE(payloads.empty());
  EXPECT_TRUE(feed("\nc\r\nx\np7\n"));
  EXPECT_EQ(payloads, (std::vector<std::string>{"a\nb\nc\r\n"})) << "newlines and all";
  EXPECT_EQ(lines, (std::vector<std::string>{"p7", "x", "p7"}));
  EXPECT_TRUE(s.mid_frame()) << "a payload announced, no byte of it yet";
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_TRUE(feed("0123456big\n"));
  EXPECT_EQ(payloads.back(), "0123456");
  EXPECT_EQ(lines.back(), "big");
  EXPECT_FALSE(s.mid_frame());
  EXPECT_TRUE(feed("p7\n0123456789ab\n"));
  EXPECT_EQ(payloads.back(), "0123456");
  EXPECT_EQ(lines.back(), "789ab");
}

TEST(Protocol, RawPayloadRequestsAreCheckedFieldByField) {
  VerifyRequest r;
  r.path = "p.json";
  r.text = "not sent";
  r.text_bytes = 12;
  json m = json::parse(to_frame(verify_request_message(3, r)));
  EXPECT_FALSE(m["plan"].contains("text")) << m.dump();
  uint64_t length = 0;
  std::string why;
  ASSERT_TRUE(payload_length(m, &length, &why));
  EXPECT_EQ(length, 12u);
  std::optional<VerifyRequest> back = parse_verify_request(m, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->text_bytes, 12u);
  EXPECT_TRUE(back->text.empty()) << "filled from the payload by the server";
  for (const char* none : {R"({"type":"status","plan":{"text_bytes":-1}})",
                           R"({"type":"verify","plan":{"text":"{}"}})", R"({"type":"verify"})"}) {
    EXPECT_TRUE(payload_length(json::parse(none), &length, &why)) << none;
    EXPECT_EQ(length, 0u);
  }
  for (const char* bad : {R"({"type":"verify","plan":{"text_bytes":-1}})",
                          R"({"type":"verify","plan":{"text_bytes":"5"}})",
                          R"({"type":"verify","plan":{"text_bytes":2.5}})"}) {
    why.clear();
    EXPECT_FALSE(payload_length(json::parse(bad), &length, &why)) << bad;
    EXPECT_NE(why.find("text_bytes"), std::string::npos);
    EXPECT_FALSE(parse_verify_request(json::parse(bad), &why)) << bad;
  }
  for (const char* both : {R"({"type":"verify","plan":{"text_bytes":2,"text":"{}"}})",
                           R"({"type":"verify","plan":{"text_bytes":2,"key":"k","digest":"d"}})"}) {
    EXPECT_TRUE(payload_length(json::parse(both), &length, &why)) << "the payload is still read";
    why.clear();
    EXPECT_FALSE(parse_verify_request(json::parse(both), &why)) << both;
    EXPECT_NE(why.find("text_bytes"), std::string::npos) << why;
  }
}

TEST(Protocol, VerifyRequestsAreCheckedFieldByField) {
  VerifyRequest r;
  r.path = "p.json";
  r.text = "{}";
  r.rlimit = 5;
  r.timeout_ms = 7;
  r.progress = false;
  std::string why;
  std::optional<VerifyRequest> back =
      parse_verify_request(json::parse(to_frame(verify_request_message(3, r))), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->path, "p.json");
  EXPECT_EQ(back->rlimit, 5u);
  EXPECT_EQ(back->timeout_ms, 7u);
  EXPECT_FALSE(back->progress);
  for (const char* bad : {R"({"type":"verify"})", R"({"type":"verify","plan":"x"})",
                          R"({"type":"verify","plan":{"text":1}})",
                          R"({"type":"verify","plan":{"text":""},"options":{"rlimit":-1}})",
                          R"({"type":"verify","plan":{"text":""},"options":{"progress":"yes"}})",
                          R"({"type":"verify","plan":{"text":""},"options":[]})"}) {
    EXPECT_FALSE(parse_verify_request(json::parse(bad), &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

// The client sends how to infer claims; the daemon takes exactly the three
// names and refuses anything else rather than fall back to a default.
TEST(Protocol, InferClaimsOptionIsParsedAndChecked) {
  std::string why;
  for (ClaimInference mode : {ClaimInference::Auto, ClaimInference::On, ClaimInference::Off}) {
    VerifyRequest r;
    r.text = "{}";
    r.infer_claims = mode;
    std::optional<VerifyRequest> back =
        parse_verify_request(json::parse(to_frame(verify_request_message(1, r))), &why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->infer_claims, mode) << claim_inference_name(mode);
  }
  std::optional<VerifyRequest> absent =
      parse_verify_request(json::parse(R"({"type":"verify","plan":{"text":""}})"), &why);
  ASSERT_TRUE(absent) << why;
  EXPECT_EQ(absent->infer_claims, VerifyOptions{}.infer_claims);
  for (const char* bad : {R"("yes")", R"("ON")", R"("")", "true", "1", "null", R"(["on"])"}) {
    why.clear();
    const std::string m =
        std::string(R"({"type":"verify","plan":{"text":""},"options":{"infer_claims":)") + bad +
        "}}";
    EXPECT_FALSE(parse_verify_request(json::parse(m), &why)) << bad;
    EXPECT_NE(why.find("options.infer_claims"), std::string::npos) << bad << ": " << why;
  }
}

TEST(ReportCodec, ReportsSurviveTheirJson) {
  VerifyOptions options;
  options.jobs = 2;
  for (const char* plan : {"tp2-ffn.json", "tp2-ffn-bug-mean.json"}) {
    Report r = verify_plan_file((kSource / "examples" / plan).string(), options);
    std::optional<Report> back = report_from_json(report_to_json(r));
    ASSERT_TRUE(back) << plan;
    EXPECT_EQ(report_to_text(*back), report_to_text(r));
    EXPECT_EQ(report_to_json(*back), report_to_json(r));
  }
  std::string dir = temp_dir();
  std::ofstream(dir + "/bad.json") << "{";
  for (const std::string& path : {dir + "/bad.json", dir + "/missing.json"}) {
    Report r = verify_plan_file(path, options);
    std::optional<Report> back = report_from_json(report_to_json(r));
    ASSERT_TRUE(back) << path;
    EXPECT_EQ(report_to_text(*back), report_to_text(r));
  }
  fs::remove_all(dir);
  EXPECT_FALSE(report_from_json(json::parse(R"({"verdict":"maybe"})")));
  EXPECT_FALSE(report_from_json(json::array()));
}

TEST(StateDir, OnlyAPrivateDirectoryOfThisUserIsUsed) {
  std::string root = temp_dir();
  std::string dir = root + "/state";
  ASSERT_TRUE(prepare_state_dir(dir).ok());
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "created private";

  chmod(dir.c_str(), 0755);
  Status open = prepare_state_dir(dir);
  EXPECT_FALSE(open.ok());
  EXPECT_NE(open.message().find("chmod 700"), std::string::npos) << open.message();
  chmod(dir.c_str(), 0700);

  std::string link = root + "/link";
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  EXPECT_FALSE(prepare_state_dir(link).ok()) << "a symlink could point anywhere";

  std::string file = root + "/file";
  std::ofstream(file) << "x";
  EXPECT_FALSE(prepare_state_dir(file).ok());

  if (geteuid() == 0) {  // only root can give a directory away
    ASSERT_EQ(chown(dir.c_str(), 4242, 4242), 0);
    Status foreign = prepare_state_dir(dir);
    EXPECT_FALSE(foreign.ok());
    EXPECT_NE(foreign.message().find("owned by uid 4242"), std::string::npos) << foreign.message();
  }
  fs::remove_all(root);
}

TEST(StateDir, SocketPathLengthIsChecked) {
  std::string saved = std::getenv("XDG_RUNTIME_DIR") ? std::getenv("XDG_RUNTIME_DIR") : "";
  std::string root = temp_dir();
  std::string deep = root + "/" + std::string(90, 'd');
  setenv("XDG_RUNTIME_DIR", deep.c_str(), 1);
  DaemonPaths paths;
  Status s = daemon_paths("/tmp/cache", &paths);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("longer than"), std::string::npos) << s.message();
  setenv("XDG_RUNTIME_DIR", root.c_str(), 1);
  ASSERT_TRUE(daemon_paths("/tmp/cache", &paths).ok());
  DaemonPaths other;
  ASSERT_TRUE(daemon_paths("/tmp/other-cache", &other).ok());
  EXPECT_NE(paths.socket, other.socket) << "one daemon per cache directory";
  if (saved.empty())
    unsetenv("XDG_RUNTIME_DIR");
  else
    setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  fs::remove_all(root);
}

TEST(PlanText, GraphFilesAreInlinedExactly) {
  fs::path plan = kSource / "examples" / "dp2-sgd.json";
  std::ifstream in(plan);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(has_graph_references(text.str()));
  std::string why;
  std::optional<std::string> inlined =
      inline_graph_references(text.str(), plan.parent_path().string(), &why);
  ASSERT_TRUE(inlined) << why;
  EXPECT_FALSE(has_graph_references(*inlined));
  VerifyOptions options;
  options.jobs = 2;
  ParseResult parsed = parse_plan_text(*inlined, plan.string(), "/nonexistent");
  ASSERT_TRUE(parsed.plan) << (parsed.error ? parsed.error->to_string() : parsed.io_error);
  Report from_text = verify_plan(*parsed.plan, options);
  Report from_file = verify_plan_file(plan.string(), options);
  from_text.stats.seconds = from_file.stats.seconds = 0;
  from_text.stats.phases = from_file.stats.phases = {};
  EXPECT_EQ(report_to_json(from_text), report_to_json(from_file));
  EXPECT_FALSE(has_graph_references(R"({"logical": {}, "parallel": {"x": "y"}})"));
  EXPECT_TRUE(has_graph_references(R"({"parallel": "g.json"})"));
  EXPECT_FALSE(has_graph_references("garbage"));
  EXPECT_FALSE(inline_graph_references(R"({"logical": "missing.json"})", "/nonexistent", &why));
}

// A store that counts what reaches it.
class CountingStore : public StageVerdictStore {
 public:
  std::optional<std::string> lookup(const StageIdentity&) override {
    ++lookups;
    return std::nullopt;
  }
  void finish(const StageIdentity&, const std::optional<std::string>& outcome, double) override {
    if (outcome) ++stored;
  }
  std::atomic<int> lookups{0}, stored{0};
};

TEST(InflightStore, ConcurrentLookupsOfOneKeyWaitForTheFirstSolve) {
  CountingStore inner;
  InflightStore store(&inner);
  StageIdentity id{"k", "d", "v"};
  std::atomic<int> solves{0};
  std::vector<std::string> answers(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::optional<std::string> got = store.lookup(id);
      if (!got) {
        ++solves;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        store.finish(id, std::string("verdict"), 0.05);
        got = "verdict";
      }
      answers[t] = *got;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(solves, 1);
  EXPECT_EQ(store.joined(), 7);
  EXPECT_EQ(inner.stored, 1);
  for (const std::string& a : answers) EXPECT_EQ(a, "verdict");
  EXPECT_EQ(store.in_flight(), 0);
}

TEST(InflightStore, AnUndecidedSolveLetsTheNextCallerTry) {
  InflightStore store(nullptr);
  StageIdentity id{"k", "d", "v"};
  ASSERT_FALSE(store.lookup(id));
  std::thread waiter([&] {
    std::optional<std::string> got = store.lookup(id);  // waits, then owns the key
    EXPECT_FALSE(got);
    store.finish(id, std::nullopt, 0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  store.finish(id, std::nullopt, 0);  // unknown: nothing to share
  waiter.join();
  EXPECT_EQ(store.in_flight(), 0);
}

}  // namespace
}  // namespace shardproof::daemon
