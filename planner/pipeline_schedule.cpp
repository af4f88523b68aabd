// The pipeline schedule section a transformer plan carries (pp >= 2): the
// per-rank order of its point-to-point operations under Megatron's 1F1B
// schedule (forward_backward_pipelining_without_interleaving): warm-up
// forwards, then one forward and one backward at a time, then the cool-down
// backwards. One pipeline per (dp, cp, tp) coordinate. Every operation
// blocks (a step of one), so where a stage both sends and receives in the
// steady state, even stages send first and odd stages receive first: two
// neighbours never both wait to send. Two bugs change only this section
// (the graphs stay correct): one stage with its send and receive swapped,
// and a first stage that runs one warm-up forward fewer.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

nlohmann::json p2p(bool send, int peer, const std::string& tensor) {
  return {{send ? "send" : "recv", peer}, {"tensor", tensor}};
}

}  // namespace

nlohmann::json pipeline_schedule(const Layout& s) {
  if (s.vpp > 1) return interleaved_schedule(s);
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < s.world(); ++r) ranks.push_back(nlohmann::json::array());
  const int P = s.pp, M = s.mb;
  // The stage whose order the swap bug flips: the last one.
  const int swapped = s.bug("schedule-sendrecv-swapped") ? P - 1 : -1;
  for (int d = 0; d < s.dp; ++d)
    for (int c = 0; c < s.cp; ++c)
      for (int t = 0; t < s.tp; ++t)
        for (int p = 0; p < P; ++p) {
          nlohmann::json& steps = ranks[size_t(s.rank(d, c, t, p))];
          const int prev = p > 0 ? s.rank(d, c, t, p - 1) : -1;
          const int next = p + 1 < P ? s.rank(d, c, t, p + 1) : -1;
          auto fwd_in = [&](int m) { return resid(s.stage_begin(p)) + ".mb" + std::to_string(m); };
          auto fwd_out = [&](int m) {
            return resid(s.stage_begin(p + 1)) + ".mb" + std::to_string(m);
          };
          auto bwd_in = [&](int m) { return grad(fwd_out(m)); };
          auto bwd_out = [&](int m) { return grad(fwd_in(m)); };
          auto step = [&](nlohmann::json op) {
            if (!op.is_null()) steps.push_back(nlohmann::json::array({std::move(op)}));
          };
          // A send and a receive of the steady state: even stages send first.
          const bool send_first = (p % 2 == 0) != (p == swapped);
          auto pair = [&](nlohmann::json send, nlohmann::json recv) {
            step(send_first ? send : recv);
            step(send_first ? recv : send);
          };
          auto recv_fwd = [&](int m) { return prev >= 0 ? p2p(false, prev, fwd_in(m)) : nullptr; };
          auto send_fwd = [&](int m) { return next >= 0 ? p2p(true, next, fwd_out(m)) : nullptr; };
          auto recv_bwd = [&](int m) { return next >= 0 ? p2p(false, next, bwd_in(m)) : nullptr; };
          auto send_bwd = [&](int m) { return prev >= 0 ? p2p(true, prev, bwd_out(m)) : nullptr; };
          int warmup = std::min(P - p - 1, M);
          if (p == 0 && s.bug("schedule-missing-warmup") && warmup > 0) --warmup;
          for (int m = 0; m < warmup; ++m) {
            step(recv_fwd(m));
            step(send_fwd(m));
          }
          const int steady = M - warmup;
          if (steady > 0) step(recv_fwd(warmup));
          for (int i = 0; i < steady; ++i) {
            pair(send_fwd(warmup + i), recv_bwd(i));
            if (i + 1 == steady)
              step(send_bwd(i));
            else
              pair(send_bwd(i), recv_fwd(warmup + i + 1));
          }
          for (int m = steady; m < M; ++m) {
            step(recv_bwd(m));
            step(send_bwd(m));
          }
        }
  return {{"ranks", std::move(ranks)}};
}

}  // namespace shardproof::planner::transformer
