// Canonical form of a stage (design.md, "Canonical form: what a stage key
// must cover"): the stage with every name replaced by its position, as bytes.
// Canonicalisation renames, never reorders: the bytes encode the input order
// of every op (and so collective group order), every attribute, dtypes,
// full and reduced sizes, every claim (tensor, slice, part) and the logical
// region. Two stages share bytes only if one proof serves both.
#pragma once

#include <string>

#include "engine/stage/stage.h"

namespace shardproof {

// Bumped whenever the encoding, the prover or the canonical form changes in
// a way that could change a verdict. Part of every stage key.
constexpr int kEngineVersion = 2;  // 2: refutations of large stages need a full-size witness

// `with_full_size` false leaves out what only reports read (full positions,
// full value-map bounds): what is left is all a verdict depends on. Full
// shapes stay: a mean's divisor is its full-size count.
std::string canonical_bytes(const Stage& stage, bool with_full_size = true);

// A hash of canonical_bytes(stage, false): two stages with equal verdict keys
// get the same verdict, wherever in a plan they sit (the class verifier
// compares stages at different mesh coordinates by it).
std::string verdict_key(const Stage& stage);

// What was proved of a stage (docs/soundness.md, "One proof per reduced
// query"): the canonical bytes of the stage as the solver sees it (reduced
// sizes, attributes, claims, value maps at reduced positions) with, in
// place of the full shapes, only the full sizes its ops' semantics read
// (engine/ops/full_sizes.h: a mean's count). Two stages that reduce to the
// same query share it whatever their other full sizes: the same layer at
// another mesh.
std::string proof_bytes(const Stage& stage);

// XXH3-128 of proof_bytes and every version the proof depends on (engine,
// operator semantics, Z3), as 32 hex digits.
std::string proof_key(const Stage& stage);

// XXH3-128 of the canonical bytes and every version the verdict depends on
// (engine, operator semantics, Z3), as 32 hex digits.
std::string stage_key(const Stage& stage);

}  // namespace shardproof
