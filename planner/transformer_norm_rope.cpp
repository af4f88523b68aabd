// RMSNorm (forward and its explicit backward) and rotary embedding (the
// rotate-half form, and its adjoint for the backward), on local tensors.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

Shape keep_last_one(Shape s) {
  s.back() = 1;
  return s;
}

Spec last_full(Spec s) {
  s.back() = Ax::Full;
  return s;
}

}  // namespace

// y = x * r * w with r = rsqrt(mean(x^2) + eps); r and x*r are kept for the
// backward.
std::string Builder::rmsnorm_forward(const Coord& x, const std::string& prefix,
                                     const std::string& in, const std::string& w, const Shape& full,
                                     const Spec& spec) {
  const Shape row = keep_last_one(full);
  const Spec row_spec = last_full(spec);
  std::string sq = act(x, prefix + ".sq", full, spec);
  op(x, prefix + ".square", "square", {in}, {sq});
  std::string ms = act(x, prefix + ".ms", row, row_spec);
  op(x, prefix + ".mean", "mean", {sq}, {ms}, {{"dims", {-1}}, {"keepdim", true}});
  std::string eps = constant(x, prefix + ".eps", {}, "1/100000", "f32");
  std::string mse = act(x, prefix + ".mse", row, row_spec);
  op(x, prefix + ".add_eps", "add", {ms, eps}, {mse});
  std::string r = act(x, prefix + ".r", row, row_spec);
  op(x, prefix + ".rsqrt", "rsqrt", {mse}, {r});
  std::string xr = act(x, prefix + ".xr", full, spec);
  op(x, prefix + ".normalize", "mul", {in, r}, {xr});
  std::string out = act(x, prefix + ".out", full, spec);
  op(x, prefix + ".scale", "mul", {xr, w}, {out});
  return out;
}

// dx = r * (w*dy) - x * r^3 * mean(x * w*dy); dw = sum over tokens of dy * x*r
// (recorded as a gradient contribution of the weight piece `w_local`).
std::string Builder::rmsnorm_backward(const Coord& x, const std::string& prefix,
                                      const std::string& in, const std::string& w_local,
                                      const std::string& dy, const std::string& out_logical,
                                      const Shape& full, const Spec& spec) {
  const Shape row = keep_last_one(full);
  const Spec row_spec = last_full(spec);
  const std::string gp = grad(prefix);
  const std::string r = at(x, prefix + ".r"), xr = at(x, prefix + ".xr");

  std::string prod = act(x, gp + ".dy_xr", full, spec);
  op(x, gp + ".dy_xr", "mul", {dy, xr}, {prod});
  std::vector<int> token_dims;
  for (size_t k = 0; k + 1 < full.size(); ++k) token_dims.push_back(int(k));
  Shape index = g.shape(prod);  // the token dims the sum runs over
  index.pop_back();
  std::string dw = grad_target(x, w_local, "dw", {full.back()}, index);
  op(x, gp + ".dw", "sum", {prod}, {dw}, {{"dims", token_dims}});

  std::string wdy = act(x, gp + ".wdy", full, spec);
  op(x, gp + ".wdy", "mul", {dy, weight(x, w_local)}, {wdy});
  std::string xwdy = act(x, gp + ".xwdy", full, spec);
  op(x, gp + ".xwdy", "mul", {in, wdy}, {xwdy});
  std::string mean = act(x, gp + ".mean", row, row_spec);
  op(x, gp + ".mean", "mean", {xwdy}, {mean}, {{"dims", {-1}}, {"keepdim", true}});
  std::string r2 = act(x, gp + ".r2", row, row_spec);
  op(x, gp + ".r2", "mul", {r, r}, {r2});
  std::string r3 = act(x, gp + ".r3", row, row_spec);
  op(x, gp + ".r3", "mul", {r2, r}, {r3});
  std::string coef = act(x, gp + ".coef", row, row_spec);
  op(x, gp + ".coef", "mul", {r3, mean}, {coef});
  std::string t2 = act(x, gp + ".t2", full, spec);
  op(x, gp + ".t2", "mul", {in, coef}, {t2});
  std::string t1 = act(x, gp + ".t1", full, spec);
  op(x, gp + ".t1", "mul", {wdy, r}, {t1});
  std::string dx = act(x, out_logical, full, spec);
  op(x, gp + ".dx", "sub", {t1, t2}, {dx});
  return dx;
}

// Forward: out = in*cos + rot(in)*sin, rot(v) = concat(-v[D/2:], v[:D/2]).
// Backward (the adjoint): out = in*cos + rot^T(in*sin), rot^T(u) =
// concat(u[D/2:], -u[:D/2]). Tensors are [batch, seq, heads, D].
std::string Builder::rope(const Coord& x, const std::string& in, const std::string& out_logical,
                          bool backward, const Shape& full, const Spec& spec, Part part) {
  const int64_t half = s.D / 2;
  Shape half_full = full;
  half_full.back() = half;
  const std::string cos = weight(x, "rope.cos"), sin = weight(x, "rope.sin");
  const std::string n = out_logical;
  std::string a = act(x, n + ".cos", full, spec, part);
  op(x, n + ".cos", "mul", {in, cos}, {a});
  std::string rotated_from = in;
  if (backward) {
    rotated_from = act(x, n + ".sin", full, spec, part);
    op(x, n + ".sin", "mul", {in, sin}, {rotated_from});
  }
  std::string lo = act(x, n + ".lo", half_full, spec, part);
  op(x, n + ".lo", "slice", {rotated_from}, {lo}, {{"dim", 3}, {"start", 0}, {"end", half}});
  std::string hi = act(x, n + ".hi", half_full, spec, part);
  op(x, n + ".hi", "slice", {rotated_from}, {hi}, {{"dim", 3}, {"start", half}, {"end", s.D}});
  // Forward negates the upper half and puts it first; the adjoint negates
  // the lower half and puts it last.
  const std::string& negated_src = backward ? lo : hi;
  std::string neg = act(x, n + ".neg", half_full, spec, part);
  op(x, n + ".neg", "neg", {negated_src}, {neg});
  std::string rot = act(x, n + ".rot", full, spec, part);
  if (backward)
    op(x, n + ".rot", "concat", {hi, neg}, {rot}, {{"dim", 3}});
  else
    op(x, n + ".rot", "concat", {neg, lo}, {rot}, {{"dim", 3}});
  std::string b = rot;
  if (!backward) {
    b = act(x, n + ".sin", full, spec, part);
    op(x, n + ".sin", "mul", {rot, sin}, {b});
  }
  std::string out = act(x, n, full, spec, part);
  op(x, n + ".add", "add", {a, b}, {out});
  return out;
}

}  // namespace shardproof::planner::transformer
