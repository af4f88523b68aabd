#include "cache/redis_client.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <cstdlib>

namespace shardproof::cache {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

bool parse_int(const std::string& text, int low, int high, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  int value = std::atoi(text.c_str());
  if (value < low || value > high) return false;
  *out = value;
  return true;
}

// A server that went away must cost an error, not the process: hiredis
// writes with write(2), so SIGPIPE is blocked on this thread around each
// command and a pending one consumed (as hooks/process.cpp does).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

// Frees the reply whatever happens to it.
struct Reply {
  redisReply* r;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

}  // namespace

std::optional<RedisAddress> parse_redis_url(const std::string& url, std::string* why) {
  RedisAddress a;
  const std::string unix_scheme = "unix://", redis_scheme = "redis://";
  if (url.rfind(unix_scheme, 0) == 0) {
    std::string rest = url.substr(unix_scheme.size());
    if (size_t q = rest.find("?db="); q != std::string::npos) {
      if (!parse_int(rest.substr(q + 4), 0, 1 << 20, &a.db)) {
        *why = "the database in \"" + url + "\" is not a number";
        return std::nullopt;
      }
      rest.resize(q);
    }
    if (rest.empty() || rest[0] != '/') {
      *why = "\"" + url + "\" does not name an absolute socket path (unix:///path/redis.sock)";
      return std::nullopt;
    }
    a.unix_path = rest;
    return a;
  }
  if (url.rfind(redis_scheme, 0) != 0) {
    *why = "\"" + url + "\" is neither redis://host:port/db nor unix:///path/redis.sock";
    return std::nullopt;
  }
  std::string rest = url.substr(redis_scheme.size());
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    std::string user_info = rest.substr(0, at);
    size_t colon = user_info.find(':');
    a.password = colon == std::string::npos ? user_info : user_info.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &a.db)) {
      *why = "the database in \"" + url + "\" is not a number";
      return std::nullopt;
    }
    rest.resize(slash);
  }
  if (size_t colon = rest.rfind(':'); colon != std::string::npos && rest.back() != ']') {
    if (!parse_int(rest.substr(colon + 1), 1, 65535, &a.port)) {
      *why = "the port in \"" + url + "\" is not a number from 1 to 65535";
      return std::nullopt;
    }
    rest.resize(colon);
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']')
    rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) {
    *why = "\"" + url + "\" names no host";
    return std::nullopt;
  }
  a.host = rest;
  return a;
}

std::unique_ptr<RedisClient> RedisClient::connect(const RedisAddress& address,
                                                  std::chrono::milliseconds timeout,
                                                  std::string* why) {
  NoSigpipe guard;
  timeval tv = to_timeval(timeout);
  redisContext* c = address.unix_path.empty()
                        ? redisConnectWithTimeout(address.host.c_str(), address.port, tv)
                        : redisConnectUnixWithTimeout(address.unix_path.c_str(), tv);
  if (!c) {
    *why = "out of memory";
    return nullptr;
  }
  std::unique_ptr<RedisClient> client(new RedisClient(c));
  if (c->err) {
    *why = c->errstr;
    return nullptr;
  }
  if (redisSetTimeout(c, tv) != REDIS_OK) {
    *why = "cannot set a timeout on the connection";
    return nullptr;
  }
  auto command_ok = [&](redisReply* raw, const char* what) {
    Reply reply{raw};
    if (!reply.r) {
      *why = c->errstr[0] ? c->errstr : "no answer";
      return false;
    }
    if (reply.r->type == REDIS_REPLY_ERROR) {
      *why = std::string(what) + ": " + reply.r->str;
      return false;
    }
    return true;
  };
  if (!address.password.empty() &&
      !command_ok(static_cast<redisReply*>(redisCommand(c, "AUTH %s", address.password.c_str())),
                  "AUTH"))
    return nullptr;
  if (address.db != 0 &&
      !command_ok(static_cast<redisReply*>(redisCommand(c, "SELECT %d", address.db)), "SELECT"))
    return nullptr;
  return client;
}

RedisClient::~RedisClient() {
  if (context_) redisFree(context_);
}

RedisClient::Result RedisClient::get(const std::string& key, std::string* value, std::string* why) {
  NoSigpipe guard;
  Reply reply{static_cast<redisReply*>(
      redisCommand(context_, "GET %b", key.data(), static_cast<size_t>(key.size())))};
  if (!reply.r) {
    *why = context_->errstr[0] ? context_->errstr : "no answer";
    return Result::Failed;
  }
  if (reply.r->type == REDIS_REPLY_NIL) return Result::Missing;
  if (reply.r->type == REDIS_REPLY_STRING) {
    value->assign(reply.r->str, reply.r->len);
    return Result::Ok;
  }
  *why = reply.r->type == REDIS_REPLY_ERROR ? reply.r->str : "GET answered something else";
  return Result::Refused;
}

RedisClient::Result RedisClient::set(const std::string& key, const std::string& value,
                                     std::string* why) {
  NoSigpipe guard;
  Reply reply{static_cast<redisReply*>(redisCommand(context_, "SET %b %b", key.data(),
                                                    static_cast<size_t>(key.size()), value.data(),
                                                    static_cast<size_t>(value.size())))};
  if (!reply.r) {
    *why = context_->errstr[0] ? context_->errstr : "no answer";
    return Result::Failed;
  }
  if (reply.r->type == REDIS_REPLY_ERROR) {
    *why = reply.r->str;
    return Result::Refused;
  }
  return Result::Ok;
}

RedisClient::Result RedisClient::probe(long long* keys, std::string* why) {
  NoSigpipe guard;
  Reply ping{static_cast<redisReply*>(redisCommand(context_, "PING"))};
  if (!ping.r) {
    *why = context_->errstr[0] ? context_->errstr : "no answer";
    return Result::Failed;
  }
  Reply size{static_cast<redisReply*>(redisCommand(context_, "DBSIZE"))};
  if (!size.r) {
    *why = context_->errstr[0] ? context_->errstr : "no answer";
    return Result::Failed;
  }
  if (size.r->type != REDIS_REPLY_INTEGER) {
    *why = size.r->type == REDIS_REPLY_ERROR ? size.r->str : "DBSIZE answered something else";
    return Result::Refused;
  }
  *keys = size.r->integer;
  return Result::Ok;
}

}  // namespace shardproof::cache
