"""Every lowering rule against torch: the lowered graph, run by the engine's interpreter with
real functions, equals torch's eager float64 result."""
import numpy as np
import pytest

from conftest import HAVE_TORCH, needs_torch

pytestmark = needs_torch

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F
    from fidelity import plan_of_trace, run_eval
    from shardproof_torch.tracer_torch1.capture import trace_function
    from shardproof_torch.tracer_torch1.library import ops

    torch.manual_seed(0)
    D = torch.float64

    def r(*shape):
        return torch.randn(*shape, dtype=D)

    def grad_of(f, *xs):
        """fn(*xs, g) -> grads of <f(*xs), g> w.r.t. the real xs: exercises backward ops."""
        def run(*args):
            inputs = [a.detach().requires_grad_(a.is_floating_point()) for a in args[:-1]]
            out = f(*inputs)
            wrt = [i for i in inputs if i.requires_grad]
            return (out,) + torch.autograd.grad(out, wrt, args[-1])
        return run

CASES = {}


def case(name, inputs):
    def register(fn):
        CASES[name] = (fn, inputs)
        return fn
    return register


if HAVE_TORCH:
    ids = torch.tensor([[1, 3, 0], [2, 2, 4]])
    target = torch.tensor([2, 0, 4, 1])
    mask = torch.tensor([[True, False, True], [False, False, True]])

    case("linear_addmm_t", lambda: [r(4, 3), r(5, 3), r(5)])(
        lambda x, w, b: F.linear(x, w, b))
    case("matmul_bmm_expand", lambda: [r(2, 3, 4), r(4, 5)])(lambda a, b: torch.matmul(a, b))
    case("bmm", lambda: [r(2, 3, 4), r(2, 4, 5)])(lambda a, b: torch.bmm(a, b))
    case("views", lambda: [r(2, 3, 4)])(
        lambda x: (x.permute(2, 0, 1).reshape(4, 6).t().unsqueeze(0).squeeze(0),
                   x.transpose(0, 1).contiguous().view(3, 8), x[:, 1], x[:, :, 1:3]))
    case("expand", lambda: [r(3, 1)])(lambda x: x.expand(2, 3, 4) * 1.0)
    case("elementwise", lambda: [r(3, 4), r(3, 4).abs() + 0.5])(
        lambda a, b: (a + b, a - 2 * b, a * b, a / b, a / 4, -a, 3 - a, a ** 2, b ** 0.5,
                      b ** -0.5, torch.maximum(a, b), torch.clamp(a, -0.5, 0.5), a.abs(),
                      torch.exp(a), torch.log(b), torch.rsqrt(b), 1 / b))
    for act in ("gelu", "silu", "relu", "tanh", "sigmoid"):
        fn = getattr(F, act) if act not in ("tanh", "sigmoid") else getattr(torch, act)
        case(f"{act}_fwd_bwd", lambda: [r(3, 4), r(3, 4)])(grad_of(fn))
    case("gelu_tanh_fwd_bwd", lambda: [r(3, 4), r(3, 4)])(
        grad_of(lambda x: F.gelu(x, approximate="tanh")))
    case("reductions", lambda: [r(3, 4, 5)])(
        lambda x: (x.sum(), x.sum(1), x.mean(), x.mean(-1, keepdim=True), x.amax(-1),
                   x.amax((0, 2), keepdim=True), x.max(dim=1).values))
    case("softmax_fwd_bwd", lambda: [r(3, 5), r(3, 5)])(grad_of(lambda x: F.softmax(x, -1)))
    case("log_softmax_fwd_bwd", lambda: [r(3, 5), r(3, 5)])(
        grad_of(lambda x: F.log_softmax(x, -1)))
    case("layer_norm_fwd_bwd", lambda: [r(2, 3, 6), r(6), r(6), r(2, 3, 6)])(
        grad_of(lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-5)))
    case("rms_norm_fwd_bwd", lambda: [r(4, 6), r(6), r(4, 6)])(
        grad_of(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w))
    case("embedding_fwd_bwd", lambda: [r(5, 3), ids, r(2, 3, 3)])(
        grad_of(lambda t, i: F.embedding(i, t)))
    case("cross_entropy_fwd_bwd", lambda: [r(4, 5), target, torch.tensor(1.5, dtype=D)])(
        grad_of(lambda x, t: F.cross_entropy(x, t)))
    case("nll_sum_fwd_bwd", lambda: [r(4, 5), target, torch.tensor(0.5, dtype=D)])(
        grad_of(lambda x, t: F.nll_loss(F.log_softmax(x, -1), t, reduction="sum")))
    case("mse_fwd_bwd", lambda: [r(4, 3), r(4, 3), torch.tensor(2.0, dtype=D)])(
        grad_of(lambda x, y: F.mse_loss(x, y)))
    case("tril_masked_fill", lambda: [r(4, 4)])(
        lambda x: (torch.tril(x), torch.triu(x, 1),
                   x.masked_fill(torch.tril(torch.ones(4, 4, dtype=torch.bool)).logical_not(),
                                 -1e4)))
    case("bool_mask_assign", lambda: [r(2, 3), mask])(
        lambda x, m: _assign(x, m))
    case("int_index_fwd_bwd", lambda: [r(4, 5), target, r(4)])(
        grad_of(lambda x, t: x[torch.arange(4), t]))
    case("gather_fwd_bwd", lambda: [r(4, 5), target.view(4, 1), r(4, 1)])(
        grad_of(lambda x, t: torch.gather(x, 1, t)))
    case("cat_split", lambda: [r(2, 3), r(2, 5)])(
        lambda a, b: (torch.cat([a, b], 1), *torch.split(torch.cat([a, b], 1), [4, 4], 1),
                      *torch.chunk(b, 1, 0)))
    case("casts_compare", lambda: [r(3, 4), ids])(
        lambda x, i: (i.to(D) * 2, (x > 0).to(D), torch.where(x > 0, x, 0.0),
                      (x != 0.5).to(D), ((x > 0) & (x < 1)).to(D), ((x > 0) | (x < -1)).to(D)))
    case("arange_where", lambda: [r(5)])(
        lambda x: torch.where(torch.arange(5) < 3, x, torch.arange(2, 12, 2, dtype=D)))


def _assign(x, m):
    y = x.clone()
    y[m] = 0.0
    return y


def _nested(t):
    return t.detach().to(torch.float64).tolist() if t.is_floating_point() else t.tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_matches_torch(name, eval_bin):
    fn, make_inputs = CASES[name]
    inputs = make_inputs()
    expected = fn(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    trace = trace_function(fn, inputs)
    plan = plan_of_trace(trace)
    values = {f"in{i}": _nested(x) for i, x in enumerate(inputs)}
    got = run_eval(eval_bin, plan, values)
    assert len(got) == len(expected)
    for i, e in enumerate(expected):
        np.testing.assert_allclose(np.array(got[f"out{i}"], dtype=np.float64),
                                   e.detach().to(torch.float64).numpy(), rtol=1e-9, atol=1e-9,
                                   err_msg=f"{name}: output {i}")


# ---- optimizer steps: the shardproof ops, lowered, against torch.optim's real first step

OPTIMIZERS = {
    "sgd": (lambda p: torch.optim.SGD([p], lr=0.1),
            lambda p, g: ops().sgd_step(p, g, 0.1, 0.0, 0.0, False, False)),
    "sgd_wd": (lambda p: torch.optim.SGD([p], lr=0.1, weight_decay=0.01),
               lambda p, g: ops().sgd_step(p, g, 0.1, 0.0, 0.01, False, False)),
    "sgd_momentum": (lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.5),
                     lambda p, g: ops().sgd_step(p, g, 0.1, 0.9, 0.0, False, False)),
    "sgd_nesterov": (lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True),
                     lambda p, g: ops().sgd_step(p, g, 0.1, 0.9, 0.0, True, False)),
    "adam": (lambda p: torch.optim.Adam([p], lr=1e-2, weight_decay=0.1),
             lambda p, g: ops().adam_step(p, g, 1e-2, 0.9, 0.999, 1e-8, 0.1, False, False)),
    "adamw": (lambda p: torch.optim.AdamW([p], lr=1e-2, weight_decay=0.1),
              lambda p, g: ops().adam_step(p, g, 1e-2, 0.9, 0.999, 1e-8, 0.1, True, False)),
    "adamw_maximize": (lambda p: torch.optim.AdamW([p], lr=1e-2, maximize=True),
                       lambda p, g: ops().adam_step(p, g, 1e-2, 0.9, 0.999, 1e-8, 0.01, True,
                                                    True)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_step_matches_torch(name, eval_bin):
    make_opt, leaf = OPTIMIZERS[name]
    p0, g = r(3, 4), r(3, 4)
    p = torch.nn.Parameter(p0.clone())
    p.grad = g.clone()
    make_opt(p).step()
    trace = trace_function(leaf, [p0, g])
    got = run_eval(eval_bin, plan_of_trace(trace), {"in0": p0.tolist(), "in1": g.tolist()})
    np.testing.assert_allclose(np.array(got["out0"]), p.detach().numpy(), rtol=1e-9, atol=1e-12)
