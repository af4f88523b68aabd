from base import (BATCH_LAYOUT, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  loss, optimizer)
