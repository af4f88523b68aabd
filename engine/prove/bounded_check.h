// Every solver call, bounded by wall-clock time (docs/soundness.md, section
// 5). Z3 4.8.12 does not keep its own `timeout`: a fuzzer plan's check ran
// minutes past 1 s. One process-wide watchdog thread watches every check:
//   1. at the deadline it interrupts the query's context (Z3_interrupt,
//      which Z3 allows from another thread): the check returns *unknown*;
//   2. a check still running a grace period later is in a stretch of
//      search that Z3 does not interrupt either: the watchdog calls the
//      overrun handler of the thread that asked (solve_abandonable.h
//      abandons that solve, reported *unknown*).
// An interrupted check is *unknown*, whatever it returns.
#pragma once

#include <functional>
#include <string>

#include <z3++.h>

namespace shardproof {

// `solver.check()` within `timeout_ms` of wall clock (0: unbounded), also
// under the `rlimit` the solver was given. On *unknown*, `why` (when given)
// says why. Callers run at most one check per context at a time (the
// interrupt names the context, not the solver).
z3::check_result bounded_check(z3::solver& solver, unsigned timeout_ms, std::string* why = nullptr);

// How long past its deadline a check may run before it counts as overrun.
unsigned overrun_grace_ms(unsigned timeout_ms);

// The calling thread's overrun handler (empty: none), called at most once
// per check, on the watchdog's thread.
void set_overrun_handler(std::function<void()> handler);

// Checks the watchdog has interrupted, and those that overran, since the
// process started (for tests and diagnostics).
long watchdog_interrupts();
long watchdog_overruns();

}  // namespace shardproof
