#include "daemon/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/build_id.h"
#include "daemon/daemon_log.h"
#include "daemon/line_splitter.h"
#include "daemon/pid_lock.h"
#include "daemon/protocol.h"
#include "daemon/service.h"
#include "daemon/stale_files.h"

namespace shardproof::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Seconds (ticks) between heartbeats to clients with a request running.
constexpr uint64_t kHeartbeatTicks = 5;
// A client that sends this many malformed frames in a row is dropped.
constexpr int kMaxBadFrames = 16;
// What a connection's unsent output may hold: beyond the first, progress
// events are dropped (they are advice); beyond the second, the connection
// (a client that does not read its answers).
constexpr size_t kProgressQueueLimit = size_t{1} << 20;
constexpr size_t kOutputQueueLimit = size_t{64} << 20;

void log(const std::string& message) {
  daemon_log(message);
}

struct Connection {
  Connection(uint64_t id, size_t frame_limit) : id(id), splitter(frame_limit) {}
  uint64_t id;
  uv_pipe_t pipe;
  LineSplitter splitter;
  bool greeted = false;
  bool heartbeat = false;  // asked for heartbeats in its hello
  bool closing = false;
  int running = 0;               // its requests running on their threads
  Clock::time_point last_heard;  // its last bytes, or its last answer
  // Set when it goes away: its running requests stop solving for nobody.
  std::shared_ptr<std::atomic<bool>> gone = std::make_shared<std::atomic<bool>>(false);
  bool dropping = false;  // refused for good: what else it sends is ignored
  int bad_frames = 0;
  Clock::time_point partial_since;  // when the unfinished frame began
  nlohmann::json awaiting;          // a frame waiting for its payload
};

struct WriteRequest {
  uv_write_t req;
  std::string data;
  uint64_t connection;
  bool close_after;
};

// A message from a request thread, delivered on the loop thread.
struct Outgoing {
  uint64_t connection;
  std::string frame;
  bool final;
  bool progress;  // may be dropped when the client does not keep up
};

class Server {
 public:
  Server(const DaemonConfig& config, Service& service) : config_(config), service_(service) {}

  int run() {
    uv_loop_init(&loop_);
    loop_.data = this;
    uv_pipe_init(&loop_, &listener_, 0);
    listener_.data = this;
    // We hold the pid lock: a socket file still there is a dead daemon's.
    unlink(config_.paths.socket.c_str());
    int rc = uv_pipe_bind(&listener_, config_.paths.socket.c_str());
    if (rc == 0) chmod(config_.paths.socket.c_str(), 0600);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 128, on_connection);
    if (rc != 0) {
      log("cannot listen on " + config_.paths.socket + ": " + uv_strerror(rc));
      uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
      uv_run(&loop_, UV_RUN_DEFAULT);
      uv_loop_close(&loop_);
      return kDaemonExitError;
    }
    uv_async_init(&loop_, &wake_, on_wake);
    wake_.data = this;
    uv_timer_init(&loop_, &tick_);
    tick_.data = this;
    uv_timer_start(&tick_, on_tick, 1000, 1000);
    for (int i = 0; i < 3; ++i) {
      static const int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
      uv_signal_init(&loop_, &signals_[i]);
      signals_[i].data = this;
      uv_signal_start(&signals_[i], on_signal, kSignals[i]);
    }
    last_activity_ = Clock::now();
    log("listening on " + config_.paths.socket + " (build " + build_id() + ")");
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    return stopped_by_signal_ ? 128 + stopped_by_signal_ : kDaemonExitOk;
  }

  // No request thread runs any more: the service may be destroyed.
  bool quiescent() const { return threads_ == 0; }

 private:
  static Server& of(void* data) { return *static_cast<Server*>(data); }
  static Server& of_loop(uv_handle_t* handle) { return of(handle->loop->data); }
  static Connection& connection(uv_handle_t* handle) {
    return *static_cast<Connection*>(handle->data);
  }

  // ---- connections ----

  static void on_connection(uv_stream_t* listener, int status) {
    Server& s = of(listener->data);
    if (status < 0) return;
    auto owned = std::make_unique<Connection>(s.next_id_++, s.config_.frame_limit);
    Connection& conn = *owned;
    uv_pipe_init(&s.loop_, &conn.pipe, 0);
    conn.pipe.data = &conn;
    s.connections_[conn.id] = std::move(owned);
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&conn.pipe)) != 0) {
      s.close(conn);
      return;
    }
    s.last_activity_ = conn.last_heard = Clock::now();
    if (!s.same_user(conn)) {
      log("refused a connection from another user");
      s.close(conn);
      return;
    }
    if (s.stopping_ || static_cast<int>(s.connections_.size()) > s.config_.max_connections) {
      s.send(conn,
             error_message(nullptr, s.stopping_ ? "shutting-down" : "too-many-connections",
                           "the daemon cannot take this connection"),
             true);
      return;
    }
    uv_read_start(reinterpret_cast<uv_stream_t*>(&conn.pipe), on_alloc, on_read);
  }

  // The socket sits in a private directory; this holds even if it did not.
  bool same_user(Connection& conn) {
    uv_os_fd_t fd;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(&conn.pipe), &fd) != 0) return false;
    ucred cred{};
    socklen_t length = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 && cred.uid == geteuid();
  }

  Connection* find(uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() || it->second->closing ? nullptr : it->second.get();
  }

  void close(Connection& conn) {
    if (conn.closing) return;
    conn.closing = true;
    *conn.gone = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&conn.pipe), [](uv_handle_t* handle) {
      of_loop(handle).connections_.erase(connection(handle).id);
    });
  }

  static void on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    Server& s = of_loop(handle);
    *buf = uv_buf_init(s.read_buffer_, sizeof s.read_buffer_);
  }

  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    Server& s = of_loop(reinterpret_cast<uv_handle_t*>(stream));
    Connection* conn = &connection(reinterpret_cast<uv_handle_t*>(stream));
    if (conn->closing) return;
    if (nread < 0) {  // EOF or error: what it started is cancelled (Connection::gone)
      s.close(*conn);
      return;
    }
    s.last_activity_ = conn->last_heard = Clock::now();
    bool had_partial = conn->splitter.mid_frame();
    int frames = 0;
    bool fits = conn->splitter.feed(
        buf->base, static_cast<size_t>(nread),
        [&](std::string&& line) {
          ++frames;
          if (!conn->closing && !conn->dropping) s.handle_line(*conn, std::move(line));
        },
        [&](std::string&& payload) {
          ++frames;
          if (!conn->closing && !conn->dropping) s.handle_payload(*conn, std::move(payload));
        });
    if (conn->closing) return;
    if (conn->dropping) {
      uv_read_stop(stream);
      return;
    }
    if (!fits) {
      s.refuse(*conn, error_message(nullptr, "frame-too-large", s.too_large()));
      uv_read_stop(stream);
      return;
    }
    // The clock of an unfinished frame (or payload) starts when it starts.
    if (conn->splitter.mid_frame() && (!had_partial || frames > 0))
      conn->partial_since = Clock::now();
  }

  std::string too_large() const {
    return "a frame exceeds the limit of " + std::to_string(config_.frame_limit) + " bytes";
  }

  // The last word to a client whose stream cannot be followed any further.
  void refuse(Connection& conn, const json& error) {
    send(conn, error, true);
    conn.dropping = true;
  }

  // ---- writing ----

  void send(Connection& conn, const json& message, bool close_after = false) {
    write(conn, to_frame(message), close_after);
  }

  void write(Connection& conn, std::string data, bool close_after) {
    if (conn.closing) return;
    // A client that stops reading must not make the daemon hold its output forever.
    if (queued(conn) > kOutputQueueLimit) {
      log("dropping connection " + std::to_string(conn.id) + ": it does not read its answers");
      close(conn);
      return;
    }
    auto* w = new WriteRequest{{}, std::move(data), conn.id, close_after};
    w->req.data = this;
    uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&conn.pipe), &buf, 1, on_written);
    if (rc != 0) {
      delete w;
      close(conn);
    }
  }

  static size_t queued(Connection& conn) {
    return uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(&conn.pipe));
  }

  static void on_written(uv_write_t* req, int status) {
    std::unique_ptr<WriteRequest> w(reinterpret_cast<WriteRequest*>(req));
    Server& s = of(req->data);
    if (Connection* conn = s.find(w->connection); conn && (status < 0 || w->close_after))
      s.close(*conn);
  }

  // Thread-safe: queues a message for the loop thread.
  void post(uint64_t connection, const json& message, bool final) {
    std::string frame = to_frame(message);  // serialised here, off the loop
    std::lock_guard<std::mutex> lock(outbox_mutex_);
    if (outbox_closed_) return;  // the loop is gone: nobody to tell
    outbox_.push_back(
        {connection, std::move(frame), final, message.value("type", std::string()) == "progress"});
    uv_async_send(&wake_);
  }

  static void on_wake(uv_async_t* handle) {
    Server& s = of(handle->data);
    std::vector<Outgoing> batch;
    {
      std::lock_guard<std::mutex> lock(s.outbox_mutex_);
      batch.swap(s.outbox_);
    }
    // Consecutive frames for one connection go out as one write.
    for (size_t i = 0; i < batch.size();) {
      std::string data;
      size_t j = i;
      Connection* conn = s.find(batch[i].connection);
      const bool behind = conn && queued(*conn) > kProgressQueueLimit;
      for (; j < batch.size() && batch[j].connection == batch[i].connection; ++j) {
        if (!(behind && batch[j].progress)) data += batch[j].frame;
        if (batch[j].final) {
          --s.active_;
          s.last_activity_ = Clock::now();
          if (conn) {
            --conn->running;
            conn->last_heard = s.last_activity_;
          }
          if (s.stopping_ && s.active_ == 0) s.check_soon();
        }
      }
      if (conn && !data.empty()) s.write(*conn, std::move(data), false);
      i = j;
    }
  }

  // ---- requests ----

  void handle_line(Connection& conn, std::string&& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return;  // blank: ignored
    json m = json::parse(line, nullptr, false);
    line = std::string();  // a large "text" must not be held twice
    if (m.is_discarded() || !m.is_object() || !m.contains("type") || !m["type"].is_string()) {
      send(conn, error_message(nullptr, "malformed",
                               "a frame must be one JSON object with a string \"type\""));
      if (++conn.bad_frames >= kMaxBadFrames) close(conn);
      return;
    }
    conn.bad_frames = 0;
    // A payload belongs to its frame whatever the answer: it is read first,
    // so that the stream stays in step (before hello there is none: the
    // connection is closed anyway).
    if (conn.greeted) {
      uint64_t length = 0;
      std::string why;
      json id = m.contains("id") ? m["id"] : json(nullptr);
      if (!payload_length(m, &length, &why)) {
        refuse(conn, error_message(id, "bad-request", why + "; the stream cannot be followed"));
        return;
      }
      if (length > 0 && !conn.splitter.expect_payload(length)) {
        refuse(conn, error_message(id, "frame-too-large",
                                   "plan.text_bytes " + std::to_string(length) +
                                       " exceeds the frame limit of " +
                                       std::to_string(config_.frame_limit) + " bytes"));
        return;
      }
      if (length > 0) {
        conn.awaiting = std::move(m);  // handled when its payload is complete
        return;
      }
    }
    handle_message(conn, m, std::string());
  }

  void handle_payload(Connection& conn, std::string&& payload) {
    json m = std::move(conn.awaiting);
    conn.awaiting = nullptr;
    handle_message(conn, m, std::move(payload));
  }

  // `payload`: what followed the frame (empty when nothing did).
  void handle_message(Connection& conn, const json& m, std::string&& payload) {
    std::string type = m["type"].get<std::string>();
    json id = m.contains("id") ? m["id"] : json(nullptr);
    if (!conn.greeted) {
      greet(conn, m, id, type);
      return;
    }
    if (!id.is_number_integer() && !id.is_string()) {
      send(conn,
           error_message(nullptr, "missing-id", "every request needs an integer or string \"id\""));
      return;
    }
    if (type == "verify") {
      std::string why;
      std::optional<VerifyRequest> request = parse_verify_request(m, &why);
      if (!request) {
        send(conn, error_message(id, "bad-request", why));
        return;
      }
      if (request->text_bytes) request->text = std::move(payload);
      if (!request->key.empty()) {  // a cache lookup: answered here, no thread hop
        service_.answer_by_identity(id, *request,
                                    [&](const json& message, bool) { send(conn, message); });
        return;
      }
      start(conn, id,
            [request = std::move(*request), gone = conn.gone](Service& service, const json& id,
                                                              const Reply& reply) mutable {
              service.verify(id, std::move(request), reply, gone.get());
            });
    } else if (type == "stats") {
      start(conn, id,
            [](Service& service, const json& id, const Reply& reply) { service.stats(id, reply); });
    } else if (type == "status") {
      json status = service_.status();
      status["connections"] = connections_.size();
      status["active_requests"] = active_;
      send(conn, result_message(id, status));
    } else if (type == "cancel") {
      // {"request": N} cancels that verify; without it, every running one.
      uint64_t which = 0;
      if (m.contains("request")) {
        if (!m["request"].is_number_unsigned()) {
          send(conn, error_message(id, "bad-request", "cancel: \"request\" must be a request id"));
          return;
        }
        which = m["request"].get<uint64_t>();
      }
      send(conn, result_message(id, {{"cancelled", service_.cancel(which)}}));
    } else if (type == "shutdown") {
      send(conn, result_message(id, {{"stopping", true}}));
      begin_shutdown("asked by a client");
    } else {
      send(conn, error_message(id, "unknown-request",
                               "unknown request type \"" + type +
                                   "\" (verify, status, stats, cancel, shutdown)"));
    }
  }

  void greet(Connection& conn, const json& m, const json& id, const std::string& type) {
    if (type != "hello") {
      send(conn, error_message(id, "hello-required", "the first frame must be a hello"), true);
      return;
    }
    json protocol = m.value("protocol", json(nullptr));
    std::string build =
        m.contains("build") && m["build"].is_string() ? m["build"].get<std::string>() : "";
    if (protocol != kProtocolVersion || build != build_id()) {
      send(conn,
           error_message(id, "version-mismatch",
                         "this daemon speaks protocol " + std::to_string(kProtocolVersion) +
                             " as build " + build_id() + "; the client sent protocol " +
                             protocol.dump() + " as build " + build),
           true);
      return;
    }
    conn.greeted = true;
    conn.heartbeat = m.value("heartbeat", false) == true;
    json hello = hello_message(build_id());
    hello["pid"] = static_cast<int64_t>(getpid());
    send(conn, hello);
  }

  using Work = std::function<void(Service&, const json&, const Reply&)>;

  // Runs a long request on its own thread; its messages come back via post().
  void start(Connection& conn, const json& id, Work work) {
    if (stopping_) {
      send(conn, error_message(id, "shutting-down", "the daemon is stopping"));
      return;
    }
    if (active_ >= config_.max_active_requests) {
      send(conn, error_message(id, "busy", "too many requests at once; try again"));
      return;
    }
    uint64_t connection = conn.id;
    ++active_;
    ++conn.running;
    ++threads_;
    try {
      std::thread([this, connection, id, work = std::move(work)] {
        work(service_, id, [this, connection](const json& message, bool final) {
          post(connection, message, final);
        });
        --threads_;  // last: from here on the thread touches nothing of ours
      }).detach();
    } catch (const std::system_error& e) {
      --active_;
      --conn.running;
      --threads_;
      send(conn, error_message(id, "busy", std::string("cannot start the request: ") + e.what()));
    }
  }

  // Writes what lookups on the loop marked as used, off the loop (a write
  // may wait for another writer). One at a time.
  void flush_in_background() {
    if (flushing_.exchange(true)) return;
    ++threads_;
    try {
      std::thread([this] {
        service_.flush();
        flushing_ = false;
        --threads_;
      }).detach();
    } catch (const std::system_error&) {
      flushing_ = false;
      --threads_;
    }
  }

  // ---- stopping ----

  void begin_shutdown(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    stop_started_ = Clock::now();
    log("stopping: " + why);
    // New clients find no socket (and start a fresh daemon) from here on.
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    unlink(config_.paths.socket.c_str());
    // Requests still running stop solving: nobody will wait for them.
    for (auto& [id, c] : connections_) *c->gone = true;
    service_.flush();
    check_soon();
  }

  // Runs the tick shortly (not a second later): lets pending answers go out
  // first, then finishes a shutdown that has nothing left to wait for.
  void check_soon() { uv_timer_start(&tick_, on_tick, 20, 1000); }

  void finish() {
    for (auto& [id, c] : connections_) close(*c);
    {
      std::lock_guard<std::mutex> lock(outbox_mutex_);
      outbox_closed_ = true;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    for (uv_signal_t& s : signals_) uv_close(reinterpret_cast<uv_handle_t*>(&s), nullptr);
  }

  static void on_tick(uv_timer_t* timer) {
    Server& s = of(timer->data);
    auto now = Clock::now();
    std::vector<Connection*> stalled;
    for (auto& [id, c] : s.connections_)
      if (!c->closing && !c->dropping && c->splitter.mid_frame() &&
          now - c->partial_since > std::chrono::seconds(s.config_.partial_frame_timeout_seconds))
        stalled.push_back(c.get());
    for (Connection* c : stalled) {
      s.refuse(
          *c, error_message(nullptr, "incomplete-frame", "a frame was started and never finished"));
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->pipe));
    }
    s.close_idle(now);
    if (++s.ticks_ % kHeartbeatTicks == 0) s.heartbeat();
    if (!s.stopping_ && s.service_.needs_flush()) s.flush_in_background();
    if (!s.stopping_ && s.config_.idle_timeout_seconds > 0 && s.active_ == 0 &&
        now - s.last_activity_ > std::chrono::seconds(s.config_.idle_timeout_seconds))
      s.begin_shutdown("idle for " + std::to_string(s.config_.idle_timeout_seconds) + " s");
    if (s.stopping_ &&
        (s.active_ == 0 ||
         now - s.stop_started_ > std::chrono::seconds(s.config_.shutdown_grace_seconds)))
      s.finish();
  }

  // Silent connections hold a slot each: one that has not said hello, or
  // has nothing running and has said nothing for a while, is closed.
  void close_idle(Clock::time_point now) {
    std::vector<Connection*> idle;
    for (auto& [id, c] : connections_) {
      if (c->closing || c->running > 0 || c->splitter.mid_frame()) continue;
      int limit = c->greeted ? config_.connection_idle_seconds : config_.hello_timeout_seconds;
      if (limit > 0 && now - c->last_heard > std::chrono::seconds(limit)) idle.push_back(c.get());
    }
    for (Connection* c : idle)
      send(*c, error_message(nullptr, "idle", "closed after a silence; connect again"), true);
  }

  // Tells each client with a request running that the daemon is alive: a
  // client that hears nothing for long gives up on it (client.h).
  void heartbeat() {
    static const std::string kFrame = to_frame({{"type", "heartbeat"}});
    for (auto& [id, c] : connections_)
      if (!c->closing && c->heartbeat && c->running > 0 && queued(*c) <= kProgressQueueLimit)
        write(*c, kFrame, false);
  }

  static void on_signal(uv_signal_t* handle, int signum) {
    Server& s = of(handle->data);
    if (!s.stopping_) s.stopped_by_signal_ = signum;
    s.begin_shutdown("signal " + std::to_string(signum));
  }

  const DaemonConfig& config_;
  Service& service_;
  uv_loop_t loop_;
  uv_pipe_t listener_;
  uv_async_t wake_;
  uv_timer_t tick_;
  uv_signal_t signals_[3];
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = 1;
  char read_buffer_[64 * 1024];
  std::mutex outbox_mutex_;
  std::vector<Outgoing> outbox_;
  bool outbox_closed_ = false;
  std::atomic<int> threads_{0};  // request (and flush) threads alive
  std::atomic<bool> flushing_{false};
  int active_ = 0;  // requests running on their threads (loop thread only)
  int stopped_by_signal_ = 0;
  uint64_t ticks_ = 0;
  bool stopping_ = false;
  Clock::time_point last_activity_, stop_started_;
};

}  // namespace

int run_daemon(const DaemonConfig& config) {
  Status status;
  pid_t holder = 0;
  std::unique_ptr<PidLock> lock = PidLock::acquire(config.paths.lock, &status, &holder);
  if (!lock) {
    if (holder == 0) {
      log(status.message());
      return kDaemonExitError;
    }
    log("already running" + (holder > 0 ? " as pid " + std::to_string(holder) : std::string()));
    return kDaemonExitRunning;
  }
  if (int n = remove_stale_files(config.paths); n > 0)
    log("removed the files of " + std::to_string(n) + " stale daemon" + (n == 1 ? "" : "s"));
  std::signal(SIGPIPE, SIG_IGN);  // a client that vanishes must not kill us
  auto service = std::make_unique<Service>(config);
  auto server = std::make_unique<Server>(config, *service);
  int code = server->run();
  log("stopped");
  if (!server->quiescent()) {
    // Request threads still use the service: leave without destructors
    // (the cache is flushed; LMDB stays consistent whatever they were doing).
    service->flush();
    std::_Exit(code);
  }
  return code;
}

}  // namespace shardproof::daemon
