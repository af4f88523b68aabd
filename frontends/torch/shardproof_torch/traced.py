"""What capture keeps of each traced program: the neutral trace and what the plan needs of
the program's model (parameter names and shapes, and the blocks of the ranks that run it).
Picklable, so a program traced in the second process (forked.py) comes back whole; only the
model itself, a graph of fake tensors, stays behind."""


def shapes_of(named_tensors):
    return {name: list(t.shape) for name, t in named_tensors if t is not None}


class Logical:
    def __init__(self, trace, params, buffers):
        self.trace = trace
        self.params = params    # name -> shape
        self.buffers = buffers  # name -> shape


class Traced:
    """One distinct rank program: it serves every rank that agrees with `coords` on the
    coordinates the program read (docs/torch-harness.md, one trace per distinct program)."""

    def __init__(self, trace, coords, model, harness):
        self.trace = trace
        self.coords = coords
        self.model = model  # None once pickled: then only ranks in `blocks` can be placed
        self.harness = harness  # the harness instance that built `model` (None once pickled)
        self.param_names = [name for name, _ in model.named_parameters()]
        self.blocks = {}    # rank -> its blocks (or forked's failure for that rank)

    def key(self, coords):
        return tuple(coords[a] for a in self.trace.read_axes)

    def serves(self, coords):
        return self.key(coords) == self.key(self.coords)

    def can_place(self, rank):
        return rank in self.blocks or self.model is not None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["model"] = None
        state["harness"] = None
        return state
