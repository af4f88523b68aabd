#include "engine/prove/bounded_check.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<long> g_interrupts{0}, g_overruns{0};
thread_local std::function<void()> t_overrun_handler;
thread_local unsigned t_grace_ms = 0;
// Set once a check of this thread overran: its solve was abandoned, so the
// thread asks nothing more (each further check would be unknown anyway).
thread_local bool t_abandoned = false;

// How a watched check ended.
struct Watched {
  bool interrupted = false;
  bool overran = false;
};

// The checks running now, by ticket, and the one thread that interrupts
// those past their deadline and reports those past their grace. Both are
// done under the mutex that disarm() takes, so a context is never
// interrupted after its check has been disarmed (and may be destroyed).
class Watchdog {
 public:
  // Never destroyed: an abandoned solve (solve_abandonable.h) may still
  // disarm its check while the process exits.
  static Watchdog& instance() {
    static Watchdog* watchdog = new Watchdog;
    return *watchdog;
  }

  uint64_t arm(Z3_context ctx, Z3_solver solver, Clock::time_point deadline,
               Clock::time_point overrun, std::function<void()> on_overrun) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t ticket = next_++;
    watched_.emplace(ticket,
                     Watch{ctx, solver, gettid(), deadline, overrun, std::move(on_overrun), false});
    wake_.notify_one();
    return ticket;
  }

  Watched disarm(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = watched_.find(ticket);
    const Watched ended{it->second.fired, it->second.overran};
    watched_.erase(it);
    return ended;
  }

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct Watch {
    Z3_context ctx;
    Z3_solver solver;
    pid_t thread;  // the checking thread (arm() runs on it)
    Clock::time_point deadline, overrun;
    std::function<void()> on_overrun;  // emptied once called
    bool fired;
    bool overran = false;
    // When the watchdog acts on it next (max: never).
    Clock::time_point next() const {
      if (!fired) return deadline;
      return on_overrun ? overrun : Clock::time_point::max();
    }
  };

  Watchdog() {
    std::thread([this] { run(); }).detach();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      Watch* first = nullptr;
      for (auto& [ticket, watch] : watched_)
        if (!first || watch.next() < first->next()) first = &watch;
      if (!first || first->next() == Clock::time_point::max()) {
        wake_.wait(lock);
      } else if (Clock::now() < first->next()) {
        wake_.wait_until(lock, first->next());
      } else if (!first->fired) {
        // The solver's running check only: Z3_interrupt would leave the
        // context cancelled for later calls (simplify throws "canceled").
        Z3_solver_interrupt(first->ctx, first->solver);
        first->fired = true;
        ++g_interrupts;
      } else {
        std::function<void()> report = std::move(first->on_overrun);
        first->on_overrun = nullptr;
        first->overran = true;
        ++g_overruns;
        // The check runs on, abandoned, until Z3 returns (minutes, maybe):
        // at the lowest priority, so that it takes only idle time from the
        // solves still wanted. (On Linux, a thread's own priority.)
        setpriority(PRIO_PROCESS, static_cast<id_t>(first->thread), 19);
        report();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Watch> watched_;
  uint64_t next_ = 0;
};

// Disarms on every way out of the check, a Z3 exception included.
class Armed {
 public:
  Armed(z3::solver& solver, unsigned timeout_ms)
      : ticket_(Watchdog::instance().arm(
            solver.ctx(), solver, Clock::now() + std::chrono::milliseconds(timeout_ms),
            Clock::now() + std::chrono::milliseconds(uint64_t{timeout_ms} + t_grace_ms),
            t_overrun_handler)) {}
  ~Armed() {
    if (armed_) Watchdog::instance().disarm(ticket_);
  }
  Watched disarm() {
    armed_ = false;
    return Watchdog::instance().disarm(ticket_);
  }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;

 private:
  uint64_t ticket_;
  bool armed_ = true;
};

}  // namespace

z3::check_result bounded_check(z3::solver& solver, unsigned timeout_ms, std::string* why) {
  // No Z3 `timeout` parameter: Z3_solver_check only turns it into a timer
  // that cancels the check, which is what the watchdog's interrupt does, and
  // setting parameters on a solver that holds assertions re-reads every
  // module's parameters under a global lock (a fifth of a small stage's
  // time, since thousands of small queries share one incremental solver).
  if (timeout_ms == 0) {
    const z3::check_result result = solver.check();
    if (result == z3::unknown && why) *why = solver.reason_unknown();
    return result;
  }
  if (t_abandoned) {
    if (why) *why = "abandoned";
    return z3::unknown;
  }
  Armed armed(solver, timeout_ms);
  z3::check_result result = z3::unknown;
  Watched ended;
  try {
    result = solver.check();
    ended = armed.disarm();
  } catch (const z3::exception&) {
    // An interrupt may surface as an error ("canceled"): unknown. Any
    // other Z3 error is the caller's.
    ended = armed.disarm();
    if (!ended.interrupted) throw;
  }
  t_abandoned = t_abandoned || ended.overran;
  // Whatever the check returned once interrupted (an answer that raced the
  // deadline included), it is not trusted: unknown.
  if (ended.interrupted) {
    if (why) *why = "interrupted after " + std::to_string(timeout_ms) + " ms of wall clock";
    return z3::unknown;
  }
  if (result == z3::unknown && why) *why = solver.reason_unknown();
  return result;
}

void set_overrun_handler(std::function<void()> handler, unsigned grace_ms) {
  t_overrun_handler = std::move(handler);
  t_grace_ms = grace_ms;
  t_abandoned = false;
}

long watchdog_interrupts() {
  return g_interrupts.load();
}
long watchdog_overruns() {
  return g_overruns.load();
}

}  // namespace shardproof
