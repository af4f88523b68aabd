from base import (BATCH_LAYOUT, MESH, batch, build_rank, finalize_grads, loss,  # noqa: F401
                  optimizer)
