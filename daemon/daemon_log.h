// One line of the daemon's log (its stderr; the log file when started in
// the background): a timestamp, the pid, the message.
#pragma once

#include <unistd.h>

#include <ctime>
#include <iostream>
#include <string>

namespace shardproof::daemon {

inline void daemon_log(const std::string& message) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::cerr << stamp << " shardproof daemon[" << getpid() << "]: " << message << std::endl;
}

}  // namespace shardproof::daemon
