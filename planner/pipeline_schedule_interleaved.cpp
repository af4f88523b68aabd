// The schedule section of an interleaved pipeline (--vpp): Megatron's
// interleaved 1F1B (forward_backward_pipelining_with_interleaving). Each pp
// rank p runs vpp chunks (virtual stages q = v * pp + p) and
// microbatches * vpp forward and as many backward steps. Forward step k runs
// chunk (k / pp) % vpp on micro-batch (k / (pp * vpp)) * pp + k % pp;
// backward step k the chunks in reverse. Rank p warms up with
// (pp - p - 1) * 2 + (vpp - 1) * pp forwards (every one when
// microbatches == pp), then alternates one forward and one backward, then
// cools down.
//
// Communication as Megatron posts it: between two compute units (a forward,
// a steady-state forward and backward, a backward) one batch
// (batch_isend_irecv) holds the sends of the unit just run and the receives
// of the next one, so a rank never waits to send before it has posted its
// next receives. Virtual stage pp - 1 of chunk v sends to rank 0's chunk v + 1
// (the ring's wrap-around).
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

nlohmann::json p2p(bool send, int peer, const std::string& tensor) {
  return {{send ? "send" : "recv", peer}, {"tensor", tensor}};
}

struct Compute {
  bool forward;
  int q;  // virtual stage
  int m;  // micro-batch
};

// The rank's compute units in interleaved 1F1B order: a warm-up forward, a
// steady-state forward and backward, or a cool-down backward.
std::vector<std::vector<Compute>> interleaved_order(const Layout& s, int p) {
  const int P = s.pp, V = s.vpp, total = s.mb * V;
  auto chunk = [&](int k, bool forward) {
    const int v = (k / P) % V;
    return forward ? v : V - 1 - v;
  };
  auto mb = [&](int k) { return (k / (P * V)) * P + k % P; };
  auto at = [&](int k, bool forward) { return Compute{forward, chunk(k, forward) * P + p, mb(k)}; };
  int warmup = s.mb == P ? total : std::min((P - p - 1) * 2 + (V - 1) * P, total);
  std::vector<std::vector<Compute>> order;
  for (int k = 0; k < warmup; ++k) order.push_back({at(k, true)});
  for (int k = 0; k < total - warmup; ++k) order.push_back({at(warmup + k, true), at(k, false)});
  for (int k = total - warmup; k < total; ++k) order.push_back({at(k, false)});
  return order;
}

}  // namespace

nlohmann::json interleaved_schedule(const Layout& s) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < s.world(); ++r) ranks.push_back(nlohmann::json::array());
  const int P = s.pp, Q = s.pp * s.vpp;
  auto name = [&](int q, int m) { return resid(s.stage_begin(q)) + ".mb" + std::to_string(m); };
  for (int d = 0; d < s.dp; ++d)
    for (int c = 0; c < s.cp; ++c)
      for (int t = 0; t < s.tp; ++t)
        for (int p = 0; p < P; ++p) {
          nlohmann::json& steps = ranks[size_t(s.rank(d, c, t, p))];
          const int prev = s.rank(d, c, t, (p + P - 1) % P), next = s.rank(d, c, t, (p + 1) % P);
          // What a compute step receives before it runs and sends after.
          auto recv = [&](const Compute& x) -> nlohmann::json {
            if (x.forward) return x.q > 0 ? p2p(false, prev, name(x.q, x.m)) : nullptr;
            return x.q + 1 < Q ? p2p(false, next, grad(name(x.q + 1, x.m))) : nullptr;
          };
          auto send = [&](const Compute& x) -> nlohmann::json {
            if (x.forward) return x.q + 1 < Q ? p2p(true, next, name(x.q + 1, x.m)) : nullptr;
            return x.q > 0 ? p2p(true, prev, grad(name(x.q, x.m))) : nullptr;
          };
          // One batch: the sends of unit `done` (if any), then the receives
          // of unit `next` (if any).
          using Units = std::vector<std::vector<Compute>>;
          const Units order = interleaved_order(s, p);
          // The bug posts them one by one, each blocking, sends first: every
          // rank sends to its ring neighbour at once (the wrap-around closes
          // the ring, where 1F1B's chain had a first stage to break it).
          const bool unbatched = s.bug("schedule-vpp-unbatched");
          auto post = [&](const std::vector<Compute>* done, const std::vector<Compute>* next) {
            nlohmann::json step = nlohmann::json::array();
            auto add = [&](nlohmann::json op) {
              if (op.is_null()) return;
              if (unbatched)
                steps.push_back(nlohmann::json::array({std::move(op)}));
              else
                step.push_back(std::move(op));
            };
            if (done)
              for (const Compute& x : *done) add(send(x));
            if (next)
              for (const Compute& x : *next) add(recv(x));
            if (!step.empty()) steps.push_back(std::move(step));
          };
          post(nullptr, &order.front());
          for (size_t i = 0; i < order.size(); ++i)
            post(&order[i], i + 1 < order.size() ? &order[i + 1] : nullptr);
        }
  return {{"ranks", std::move(ranks)}};
}

}  // namespace shardproof::planner::transformer
