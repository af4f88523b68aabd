// A small synchronous Redis client for the remote tier of the verdict cache
// (remote_store.h), on hiredis: where the server is (a redis:// or unix://
// address), and GET/SET/PING with a deadline on every step, so a server
// that is gone or stalled costs at most the timeout, never a hang.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

struct redisContext;

namespace shardproof::cache {

struct RedisAddress {
  std::string host;  // TCP, with port
  int port = 6379;
  std::string unix_path;  // or a Unix socket
  int db = 0;
  std::string password;  // redis://:password@host, sent with AUTH
};

// redis://[:password@]host[:port][/db] or unix:///path/redis.sock[?db=N];
// nullopt with `why` set for anything else.
std::optional<RedisAddress> parse_redis_url(const std::string& url, std::string* why);

class RedisClient {
 public:
  enum class Result {
    Ok,       // done (GET: the value is set)
    Missing,  // GET: no such key
    Refused,  // the server answered with an error (out of memory, read-only replica)
    Failed,   // no answer in time or the connection broke: the client is unusable
  };

  // Connects, authenticates and selects the database within `timeout`;
  // every later command has the same deadline. Null with `why` set.
  static std::unique_ptr<RedisClient> connect(const RedisAddress& address,
                                              std::chrono::milliseconds timeout, std::string* why);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  Result get(const std::string& key, std::string* value, std::string* why);
  Result set(const std::string& key, const std::string& value, std::string* why);
  // PING then DBSIZE: whether the server answers, and how many keys it holds.
  Result probe(long long* keys, std::string* why);

 private:
  explicit RedisClient(redisContext* context) : context_(context) {}
  redisContext* context_;
};

}  // namespace shardproof::cache
