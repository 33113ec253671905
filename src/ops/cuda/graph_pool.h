// The caching allocator's (memory.cpp) private pools for recorded training
// steps (step_record.cpp). A CUDA graph keeps the address of every block
// its kernels touched, so while it exists none of those blocks may go to
// another owner that keeps data in it across replays, nor back to the
// driver. A pool owns:
//   - every block allocated or released while it captures (the step's
//     temporaries: the arena's growth, the step's tensors), and
//   - every block live when its capture ends (the parameters, gradients and
//     moments, the arena's blocks; most live as long as the graph anyway),
// and a block it owns, once released, is handed out again only to that
// pool's next capture, never to ordinary allocations, and never freed to
// the driver. Released, the pool gives its free blocks back to the cache.
// Every use of a block stays ordered on the one stream of the context (see
// memory.cpp), so ordinary work between replays may run in blocks the
// graph also uses as scratch: what it must not do is keep data there.
//
// While a pool captures, the device's zero fills and device-to-device copies
// (Arena::zeros, Tensor::zeros: cudaMemset through the legacy default
// stream, which would invalidate the capture) are queued on the captured
// stream instead, at the same place in the step's order.
#pragma once

#include <cuda_runtime_api.h>

namespace ssm::cuda {

struct GraphPool;

// A new pool capturing `stream` on `device` (one capture at a time a device).
GraphPool* begin_graph_pool(int device, cudaStream_t stream);
// Ends the capture: the blocks live now become the pool's too.
void end_graph_pool_capture(GraphPool* pool);
// Its free blocks back to the cache; live ones become ordinary blocks.
void release_graph_pool(GraphPool* pool);

}  // namespace ssm::cuda
