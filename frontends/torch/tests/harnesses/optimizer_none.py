from base import BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss  # noqa: F401


def optimizer(params):
    return None
