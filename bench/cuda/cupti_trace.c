/* An event timeline of every kernel, copy and memset a process runs on its
 * GPUs, taken by CUPTI's activity API with no change to the program: the
 * CUDA driver loads this library when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection() before the first CUDA call returns.
 *
 *   FSDPC_TRACE_DIR=out CUDA_INJECTION64_PATH=.../libfsdpc_cupti_trace.so fsdpc train ...
 *
 * Each process appends one line per record to FSDPC_TRACE_DIR/trace.<pid>.tsv:
 *   kind  start_ns  end_ns  device  stream  corr  name
 * (kind: K kernel, C copy, S memset on the GPU; R a CUDA runtime API call, D a
 * driver API call (cuBLASLt and NCCL launch through the driver) on the host,
 * whose device field is the calling thread and whose stream is 0;
 * times on CUPTI's clock, shared by the processes of one host and by host
 * and GPU records; corr: CUPTI's correlation id, which ties a GPU record to
 * the runtime call that enqueued it). The file starts with "# rank R" taken
 * from RANK at start-up and "# fields ..." naming the columns.
 * FSDPC_TRACE_API=0 leaves the API records out.
 * bench/timeline_summary.py turns the files into the exposed-communication
 * share per step and a Chrome trace; bench/gap_summary.py into the GPU's idle
 * gaps per step and the host calls that sit in them.
 *
 * A bench tool, not part of libfsdpc: it links only CUPTI. Records are
 * written as CUPTI hands full buffers back and at exit (atexit flush). */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES (8u << 20)
#define ALIGN 8

static FILE *out_file;     /* trace.<pid>.tsv, opened at injection */
static uint64_t n_dropped; /* records CUPTI dropped (buffers full) */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  uint8_t *b = NULL;
  if (posix_memalign((void **)&b, ALIGN, BUF_BYTES) != 0)
    b = NULL;
  *buffer = b;
  *size = b ? BUF_BYTES : 0;
  *max_records = 0; /* as many as fit */
}

/* Kernel names are C++ mangled or long template spellings: keep them on one
 * tab-separated line. */
static void put_name(const char *s) {
  if (!s) {
    fputs("?", out_file);
    return;
  }
  for (; *s; s++)
    fputc((*s == '\t' || *s == '\n') ? ' ' : *s, out_file);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  while (out_file && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
      fprintf(out_file, "K\t%llu\t%llu\t%u\t%u\t%u\t", (unsigned long long)k->start,
              (unsigned long long)k->end, k->deviceId, k->streamId, k->correlationId);
      put_name(k->name);
      fputc('\n', out_file);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
      fprintf(out_file, "C\t%llu\t%llu\t%u\t%u\t%u\tmemcpy kind %u %llu bytes\n",
              (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId, m->streamId,
              m->correlationId, (unsigned)m->copyKind, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
      fprintf(out_file, "S\t%llu\t%llu\t%u\t%u\t%u\tmemset %llu bytes\n",
              (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId, m->streamId,
              m->correlationId, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
      int rt = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      const char *name = NULL;
      if (cuptiGetCallbackName(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                               a->cbid, &name) != CUPTI_SUCCESS)
        name = NULL;
      fprintf(out_file, "%c\t", rt ? 'R' : 'D');
      fprintf(out_file, "%llu\t%llu\t%u\t0\t%u\t", (unsigned long long)a->start,
              (unsigned long long)a->end, a->threadId, a->correlationId);
      put_name(name);
      fputc('\n', out_file);
      break;
    }
    default:
      break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    n_dropped += dropped;
  free(buffer);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out_file) {
    if (n_dropped)
      fprintf(out_file, "# dropped %llu\n", (unsigned long long)n_dropped);
    fclose(out_file);
    out_file = NULL;
  }
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH). Returns 1 on success. */
__attribute__((visibility("default"))) int InitializeInjection(void) {
  const char *dir = getenv("FSDPC_TRACE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/trace.%d.tsv", dir && *dir ? dir : ".", (int)getpid());
  out_file = fopen(path, "w");
  if (!out_file) {
    fprintf(stderr, "cupti_trace: cannot write %s; set FSDPC_TRACE_DIR to a writable folder\n",
            path);
    return 0;
  }
  const char *rank = getenv("RANK");
  fprintf(out_file, "# rank %s\n# fields kind start end device stream corr name\n",
          rank ? rank : "0");
  const char *api = getenv("FSDPC_TRACE_API");
  int want_api = !(api && strcmp(api, "0") == 0);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS ||
      (want_api && (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
                    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS))) {
    fprintf(stderr, "cupti_trace: CUPTI activity tracing could not start; no timeline for %s\n",
            path);
    fclose(out_file);
    out_file = NULL;
    return 0;
  }
  atexit(flush_at_exit);
  return 1;
}
