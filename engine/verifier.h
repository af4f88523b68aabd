// The engine's entry point: a plan in, a Report out. The CLI, the daemon and
// the tests all call these the same way.
#pragma once

#include <string>

#include "engine/core/ir.h"
#include "engine/decide/plan_run.h"
#include "engine/format/plan_parser.h"
#include "engine/format/plan_revision.h"
#include "engine/report/report.h"

namespace shardproof {

// Reads, validates and verifies a plan file. Never throws: I/O problems are
// InternalError (exit 4), contract violations Invalid (exit 2).
Report verify_plan_file(const std::string& path, const VerifyOptions& options);

// Parses plan text and verifies it, as verify_plan_file does a file; graph
// references (none in self-contained text) resolve against `base_dir`.
Report verify_plan_text(const std::string& path, const std::string& text,
                        const std::string& base_dir, const VerifyOptions& options);

// Counts the plan's parsing in `report`: in stats.seconds, and added to
// stats.phases.parse, which may already hold reading the verification did
// itself (the class verifier reads each batch of a compact plan).
void add_parse_time(Report& report, double parse_seconds);

// The report of a plan the parser did not accept: invalid, with its
// diagnostic, or an internal error (the file could not be read).
Report unreadable_plan_report(const std::string& path, const ParseResult& parsed);

// Verifies an already validated plan.
Report verify_plan(const Plan& plan, const VerifyOptions& options);

// verify_plan, keeping the record of the run in `record`.
Report verify_plan(const Plan& plan, const VerifyOptions& options, StageRecord& record);

// Verifies `plan`, which is the plan `record` was made for with the contents
// of the ops in `edits` changed (reread_edited). A stage whose cones hold no
// edited op is the same stage (StageUnit) and keeps its recorded identity
// and outcome (stats.reused); only the others are cut and decided. Updates
// `record` for the next edit.
Report verify_plan_edit(const Plan& plan, const OpEdits& edits, const VerifyOptions& options,
                        StageRecord& record);

}  // namespace shardproof
