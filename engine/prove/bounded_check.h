// Every solver call, bounded by wall-clock time (docs/soundness.md, section
// 5). Z3 4.8.12 does not keep its own `timeout`: a fuzzer plan's check ran
// minutes past 1 s. One process-wide watchdog thread watches every check:
//   1. at the deadline it interrupts the running check
//      (Z3_solver_interrupt, allowed from another thread; unlike
//      Z3_interrupt it leaves the context usable afterwards): the check
//      returns, and is *unknown*;
//   2. a check still running a grace period later is in a stretch of
//      search that Z3 does not interrupt either: the watchdog calls the
//      overrun handler of the thread that asked (solve_abandonable.h
//      abandons that solve, reported *unknown*; the thread asks nothing
//      more).
// An interrupted check is *unknown*, whatever it returns.
#pragma once

#include <functional>
#include <string>

#include <z3++.h>

namespace shardproof {

// `solver.check()` within `timeout_ms` of wall clock (0: unbounded), also
// under the `rlimit` the solver was given. On *unknown*, `why` (when given)
// says why.
z3::check_result bounded_check(z3::solver& solver, unsigned timeout_ms, std::string* why = nullptr);

// The calling thread's overrun handler (empty: none): called, on the
// watchdog's thread, when one of its checks runs `grace_ms` past its
// deadline (an overrun: Z3 did not stop when interrupted).
void set_overrun_handler(std::function<void()> handler, unsigned grace_ms = 0);

// Checks the watchdog has interrupted, and those that overran, since the
// process started (for tests and diagnostics).
long watchdog_interrupts();
long watchdog_overruns();

}  // namespace shardproof
