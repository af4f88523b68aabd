// A verify's plan text as a raw payload after its frame (plan.text_bytes,
// docs/protocol.md), against a daemon run in this process with small
// limits: the same report as the "text" field, and clients that announce
// too much, stop halfway, stall, follow the payload with garbage or give a
// bad length leave the daemon serving others.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon/build_id.h"
#include "daemon/config.h"
#include "daemon/protocol.h"
#include "daemon/server.h"
#include "tests/cli_runner.h"
#include "tests/raw_client.h"

namespace shardproof::daemon {
namespace {

using nlohmann::json;
using shardproof::testing::RawClient;
namespace fs = std::filesystem;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";
constexpr uint64_t kFrameLimit = 1 << 20;

json verify_header(const json& id, const json& text_bytes) {
  return {{"type", "verify"},
          {"id", id},
          {"plan", {{"path", "p.json"}, {"text_bytes", text_bytes}}},
          {"options", {{"progress", false}}}};
}

std::string frame(const json& message) {
  return message.dump() + "\n";
}

json without_stats(json report) {
  report.erase("stats");
  return report;
}

class PayloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sp-pl-XXXXXX";  // short: the socket path must fit
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_.paths.dir = dir_;
    config_.paths.socket = dir_ + "/d.sock";
    config_.paths.lock = dir_ + "/d.lock";
    config_.jobs = 1;
    config_.idle_timeout_seconds = 0;
    config_.frame_limit = kFrameLimit;
    config_.partial_frame_timeout_seconds = 1;
    daemon_ = std::thread([this] { exit_code_ = run_daemon(config_); });
    for (int i = 0; i < 200 && !fs::exists(config_.paths.socket); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(fs::exists(config_.paths.socket));
  }

  void TearDown() override {
    {
      RawClient c(config_.paths.socket);
      c.hello(build_id());
      c.send(frame({{"type", "shutdown"}, {"id", "bye"}}));
      c.read();
    }
    daemon_.join();
    EXPECT_EQ(exit_code_, kDaemonExitOk);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A greeted client.
  std::unique_ptr<RawClient> client() {
    auto c = std::make_unique<RawClient>(config_.paths.socket);
    EXPECT_TRUE(c->connected());
    EXPECT_EQ(c->hello(build_id())["type"], "hello");
    return c;
  }

  // Whether a new client still gets an answer.
  bool serving() {
    auto c = client();
    c->send(frame({{"type", "status"}, {"id", "s"}}));
    return c->read()["type"] == "result";
  }

  DaemonConfig config_;
  std::string dir_;
  std::thread daemon_;
  int exit_code_ = -1;
};

TEST_F(PayloadTest, RawPayloadGivesTheSameReportAsTheTextField) {
  std::string text = shardproof::testing::slurp_file(kExamples / "tp2-ffn.json");
  ASSERT_NE(text.find('\n'), std::string::npos) << "newlines in a payload are not frame ends";
  auto c = client();
  c->send(frame({{"type", "verify"},
                 {"id", 1},
                 {"plan", {{"path", "p.json"}, {"text", text}}},
                 {"options", {{"progress", false}}}}));
  json by_field = c->read();
  ASSERT_EQ(by_field["type"], "result") << by_field.dump();
  EXPECT_EQ(by_field["result"]["verdict"], "equivalent");

  // The same text as a payload, in pieces, with a request right behind it.
  std::string payload = frame(verify_header(2, text.size())) + text;
  size_t third = payload.size() / 3;
  c->send(payload.substr(0, third));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c->send(payload.substr(third, third));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c->send(payload.substr(2 * third) + frame({{"type", "status"}, {"id", 3}}));
  json first = c->read(), second = c->read();
  if (first["id"] == 2) std::swap(first, second);  // the status may come first
  EXPECT_EQ(first["id"], 3);
  EXPECT_EQ(first["type"], "result");
  ASSERT_EQ(second["type"], "result") << second.dump();
  EXPECT_EQ(second["id"], 2);
  EXPECT_EQ(without_stats(second["result"]), without_stats(by_field["result"]));

  // Larger than a read: the payload is gathered across many of them.
  std::string padded = "{" + std::string(300 << 10, ' ') + text.substr(text.find('{') + 1);
  c->send(frame(verify_header(4, padded.size())) + padded);
  json large = c->read();
  ASSERT_EQ(large["type"], "result") << large.dump();
  EXPECT_EQ(without_stats(large["result"]), without_stats(by_field["result"]));
}

TEST_F(PayloadTest, OversizedPayloadIsRefusedBeforeItIsSent) {
  auto c = client();
  c->send(frame(verify_header(1, kFrameLimit + 1)));  // and not one byte of it
  json refused = c->read();
  EXPECT_EQ(refused["code"], "frame-too-large") << refused.dump();
  EXPECT_EQ(refused["id"], 1);
  EXPECT_NE(refused["message"].get<std::string>().find("text_bytes"), std::string::npos);
  EXPECT_TRUE(c->read().is_discarded()) << "the connection is closed";
  EXPECT_TRUE(serving());
}

TEST_F(PayloadTest, HalfAPayloadThenGoneLeavesTheDaemonServing) {
  {
    auto c = client();
    c->send(frame(verify_header(1, 1000)) + std::string(500, ' '));
  }
  EXPECT_TRUE(serving());
}

TEST_F(PayloadTest, HalfAPayloadThenSilenceIsDroppedAfterTheTimeout) {
  auto c = client();
  c->send(frame(verify_header(1, 1000)) + std::string(500, ' '));
  EXPECT_TRUE(serving()) << "others are served while the payload is awaited";
  auto start = std::chrono::steady_clock::now();
  json dropped = c->read();
  EXPECT_EQ(dropped["code"], "incomplete-frame") << dropped.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(c->read().is_discarded());
  EXPECT_TRUE(serving());
}

TEST_F(PayloadTest, GarbageAfterThePayloadIsAMalformedFrame) {
  std::string text = shardproof::testing::slurp_file(kExamples / "tp2-ffn.json");
  auto c = client();
  c->send(frame(verify_header(1, text.size())) + text + "garbage}{\n");
  json a = c->read(), b = c->read();
  if (a["type"] == "result") std::swap(a, b);
  EXPECT_EQ(a["code"], "malformed") << a.dump();
  EXPECT_EQ(b["type"], "result") << b.dump();
  EXPECT_EQ(b["id"], 1);
  c->send(frame({{"type", "status"}, {"id", 2}}));
  EXPECT_EQ(c->read()["type"], "result") << "the connection stays in step";
}

TEST_F(PayloadTest, BadLengthsAreRefusedClearly) {
  // A length that is no length: where the frame ends is unknown, so the
  // connection ends too.
  for (json bad : {json(-1), json("12"), json(1.5), json(nullptr)}) {
    auto c = client();
    c->send(frame(verify_header(7, bad)));
    json e = c->read();
    EXPECT_EQ(e["code"], "bad-request") << bad.dump();
    EXPECT_EQ(e["id"], 7);
    EXPECT_NE(e["message"].get<std::string>().find("text_bytes"), std::string::npos);
    EXPECT_TRUE(c->read().is_discarded()) << bad.dump();
  }
  // A good length beside "text" (or "key"): the payload is read, then the
  // request is refused, and the connection goes on.
  auto c = client();
  json both = verify_header(8, 2);
  both["plan"]["text"] = "{}";
  c->send(frame(both) + "{}");
  json e = c->read();
  EXPECT_EQ(e["code"], "bad-request") << e.dump();
  EXPECT_NE(e["message"].get<std::string>().find("text_bytes"), std::string::npos);
  json keyed = verify_header(9, 2);
  keyed["plan"]["key"] = keyed["plan"]["digest"] = "0";
  c->send(frame(keyed) + "{}");
  EXPECT_EQ(c->read()["code"], "bad-request");
  c->send(frame(verify_header(10, 0)));  // empty: an answer, not a wait
  json empty = c->read();
  EXPECT_EQ(empty["id"], 10) << empty.dump();
  c->send(frame({{"type", "status"}, {"id", 11}}));
  EXPECT_EQ(c->read()["type"], "result");
  EXPECT_TRUE(serving());
}

TEST_F(PayloadTest, AnotherProtocolVersionIsRefused) {
  RawClient c(config_.paths.socket);
  json refused = c.hello(build_id(), kProtocolVersion - 1);
  EXPECT_EQ(refused["code"], "version-mismatch") << refused.dump();
  EXPECT_TRUE(c.read().is_discarded());
  EXPECT_TRUE(serving());
}

}  // namespace
}  // namespace shardproof::daemon
