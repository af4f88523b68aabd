// A slow network for the remote cache's deadline tests: a TCP proxy on
// loopback (the port is the kernel's choice) in front of a Unix socket (the
// test's redis-server) that holds every chunk it reads, either way, for
// `delay` before passing it on. One thread polls every connection; the
// destructor wakes it through a pipe, joins it and closes everything.
// Chunks are small here (Redis commands and records), so a blocking send
// is good enough.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace shardproof::testing {

class DelayProxy {
 public:
  using Clock = std::chrono::steady_clock;

  DelayProxy(std::string target_socket, std::chrono::milliseconds delay)
      : target_(std::move(target_socket)), delay_(delay) {
    listen_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (listen_ < 0 || bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_, 16) != 0 ||
        getsockname(listen_, reinterpret_cast<sockaddr*>(&addr), &size) != 0 ||
        pipe2(wake_, O_CLOEXEC) != 0)
      return;  // port() stays 0
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~DelayProxy() {
    if (thread_.joinable()) {
      char stop = 0;
      if (write(wake_[1], &stop, 1) != 1) perror("DelayProxy: cannot wake the thread");
      thread_.join();
    }
    for (Link& link : links_) close_link(link);
    for (int fd : {listen_, wake_[0], wake_[1]})
      if (fd >= 0) close(fd);
  }
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  int port() const { return port_; }  // 0: the proxy could not start
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };
  struct Link {
    int client = -1, server = -1;
    std::deque<Chunk> to_server, to_client;
    bool dead = false;
  };

  void run() {
    for (;;) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_, POLLIN, 0}};
      for (const Link& link : links_) {
        fds.push_back({link.client, POLLIN, 0});
        fds.push_back({link.server, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), next_due_ms()) < 0 && errno != EINTR) return;
      if (fds[0].revents != 0) return;  // the destructor
      const size_t polled = links_.size();
      if (fds[1].revents & POLLIN) accept_one();
      for (size_t i = 0; i < polled; ++i) {
        Link& link = links_[i];
        if (fds[2 + 2 * i].revents != 0) receive(link.client, &link.to_server, &link);
        if (fds[3 + 2 * i].revents != 0) receive(link.server, &link.to_client, &link);
      }
      for (Link& link : links_) {
        send_due(link.server, &link.to_server, &link);
        send_due(link.client, &link.to_client, &link);
        if (link.dead) close_link(link);
      }
      std::erase_if(links_, [](const Link& link) { return link.dead; });
    }
  }

  // A new client, and its own connection to the target.
  void accept_one() {
    Link link;
    link.client = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
    if (link.client < 0) return;
    link.server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", target_.c_str());
    if (link.server < 0 ||
        connect(link.server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close_link(link);
      return;
    }
    links_.push_back(std::move(link));
  }

  // What `from` has to say, held until now + delay; the end of it or an
  // error ends the link (what is still held is dropped).
  void receive(int from, std::deque<Chunk>* queue, Link* link) {
    char buffer[16384];
    ssize_t n = recv(from, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0)
      queue->push_back({Clock::now() + delay_, std::string(buffer, static_cast<size_t>(n))});
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
      link->dead = true;
  }

  void send_due(int to, std::deque<Chunk>* queue, Link* link) {
    while (!link->dead && !queue->empty() && queue->front().due <= Clock::now()) {
      const std::string& bytes = queue->front().bytes;
      for (size_t sent = 0; sent < bytes.size();) {
        ssize_t n = send(to, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          link->dead = true;
          break;
        }
        sent += static_cast<size_t>(n);
      }
      queue->pop_front();
    }
  }

  // Milliseconds until the first held chunk is due (rounded up); -1: none.
  int next_due_ms() const {
    std::optional<Clock::time_point> first;
    for (const Link& link : links_)
      for (const std::deque<Chunk>* queue : {&link.to_server, &link.to_client})
        if (!queue->empty() && (!first || queue->front().due < *first)) first = queue->front().due;
    if (!first) return -1;
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(*first - Clock::now());
    return static_cast<int>(std::max<long long>(0, wait.count()));
  }

  static void close_link(Link& link) {
    for (int* fd : {&link.client, &link.server})
      if (*fd >= 0) close(std::exchange(*fd, -1));
  }

  std::string target_;
  std::chrono::milliseconds delay_;
  int listen_ = -1, wake_[2] = {-1, -1}, port_ = 0;
  std::vector<Link> links_;  // the thread's alone while it runs
  std::thread thread_;
};

}  // namespace shardproof::testing
