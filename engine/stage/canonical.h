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

// XXH3-128 of the canonical bytes and every version the verdict depends on
// (engine, operator semantics, Z3), as 32 hex digits.
std::string stage_key(const Stage& stage);

}  // namespace shardproof
