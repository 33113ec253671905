// A CUDA injection library that records every kernel's start and end on the
// GPU (CUPTI's concurrent-kernel activity: kernels keep overlapping, graph
// nodes and programmatic dependent launches included) and writes them, one
// line each, to $SSM_TRACE_OUT at exit: start_ns end_ns graph_id grid block name.
// ncu times kernels one at a time; this sees them as a decode step's graph
// runs them. Built and used by trace.sh; not part of the engine.
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE* out;

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8u << 20;
  *buffer = (uint8_t*)aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                      size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity* record = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)record;
    if (out)
      fprintf(out, "%llu %llu %u %d %d %s\n", (unsigned long long)k->start, (unsigned long long)k->end,
              k->graphId, k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ,
              k->name ? k->name : "?");
  }
  free(buffer);
}

static void finish(void) {
  cuptiActivityFlushAll(1);
  if (out) fclose(out);
  out = NULL;
}

int InitializeInjection(void) {
  const char* path = getenv("SSM_TRACE_OUT");
  out = fopen(path ? path : "kernel_trace.txt", "w");
  if (!out) return 0;
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(stderr, "kernel_trace: CUPTI activity tracing failed to start\n");
    return 0;
  }
  atexit(finish);
  return 1;
}
