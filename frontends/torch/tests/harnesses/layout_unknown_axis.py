from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)


def param_layout(name, param, ctx):
    return {"axis": "mp", "dim": 0} if name.endswith("weight") else None
