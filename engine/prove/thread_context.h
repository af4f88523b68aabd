// A Z3 context per thread, reused by the stages that thread solves: making
// one costs about as much as solving a small stage (the soundness fuzzer
// spent 14% of its time in Z3_mk_context). Each stage still asks its own
// solvers; a context only shares declarations and hash-consed terms, which
// no solver sees unless asserted into it.
#pragma once

#include <memory>

#include <z3++.h>

namespace shardproof {

// This thread's context when no one else holds it, else a new one. It is
// renewed every few hundred leases, so what it interns stays bounded.
std::shared_ptr<z3::context> lease_thread_context();

}  // namespace shardproof
