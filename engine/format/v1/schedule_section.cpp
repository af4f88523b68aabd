// Form of the "schedule" section; every message names the place by its
// JSON pointer, like every other plan rule.
#include "engine/format/v1/schedule_section.h"

#include "engine/json/json_source.h"

namespace shardproof::plan_detail {

std::string read_schedule_section(const Node& node, int world) {
  expect_object(node, "schedule");
  check_keys(node, {"ranks"}, "schedule");
  Node ranks = require(node, "ranks", "schedule", "schedule");
  expect_array(ranks, "schedule.ranks", "schedule");
  if (ranks->items.size() != static_cast<size_t>(world))
    ranks.fail("schedule", "expected one list of steps per rank (" + std::to_string(world) +
                               "), found " + std::to_string(ranks->items.size()));
  for (size_t r = 0; r < ranks->items.size(); ++r) {
    Node steps = ranks.item(r);
    expect_array(steps, "the steps of a rank", "schedule");
    for (size_t s = 0; s < steps->items.size(); ++s) {
      Node step = steps.item(s);
      expect_array(step, "a step (a list of operations posted together)", "schedule");
      for (size_t i = 0; i < step->items.size(); ++i) {
        Node op = step.item(i);
        expect_object(op, "a point-to-point operation");
        check_keys(op, {"send", "recv", "tensor"}, "a point-to-point operation");
        std::optional<Node> send = op.get("send"), recv = op.get("recv");
        if (send.has_value() == recv.has_value())
          op.fail("schedule", "expected exactly one of \"send\" and \"recv\" (the peer rank)");
        const int64_t peer =
            expect_int(send ? *send : *recv, "schedule", "the peer rank", 0, int64_t(world) - 1);
        if (peer == static_cast<int64_t>(r))
          (send ? *send : *recv).fail("schedule", "a rank cannot send to or receive from itself");
        expect_string(require(op, "tensor", "a point-to-point operation", "schedule"),
                      "the tensor moved", "schedule");
      }
    }
  }
  return jsonsrc::serialize(node.value());
}

}  // namespace shardproof::plan_detail
