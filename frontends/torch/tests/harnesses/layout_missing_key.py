from base import (MESH, batch, build_logical, build_rank, finalize_grads, loss,  # noqa: F401
                  optimizer)

BATCH_LAYOUT = {"x": {"dp": 0}}
