// The oracle of the soundness fuzzer on plan files: each plan's verdict at
// full size (no shape reduction; the solver with the same limits) and
// whether random full-size values show a difference in some stage (the
// concrete interpreter: exact rationals, integer inputs also aimed at the
// stage's constants). A hand-written plan's truth, to set beside
// `shardproof verify`: `shardproof_full_size_verdict PLAN...` prints
// "PLAN: full-size VERDICT; random values differ|agree" per plan.
#include <cstdio>
#include <string>

#include "engine/prove/stage_testing.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "engine/format/plan_parser.h"
#include "engine/report/report.h"

int main(int argc, char** argv) {
  using namespace shardproof;
  VerifyOptions full;
  full.jobs = 1;
  full.reduce_shapes = false;
  for (int a = 1; a < argc; ++a) {
    const std::string path = argv[a];
    Report r = verify_plan_file(path, full);
    bool differs = false;
    if (r.verdict != Verdict::Invalid) {
      ParseResult parsed = parse_plan_file(path);
      if (parsed.plan)
        for (const Stage& s : build_stages(*parsed.plan))
          if (refute_by_testing(s, 24, true)) differs = true;
    }
    std::printf("%s: full-size %s; random values %s\n", path.c_str(),
                verdict_name(r.verdict), differs ? "differ" : "agree");
  }
  return 0;
}
