// Collectives of the gloo plugin on host memory.
//
// all_gather and broadcast move raw bytes, so they take every dtype.
// Reductions run on fp32; bf16 is staged through fp32 (round to nearest
// even on the way back). reduce_scatter is our own ring over Gloo's
// unbound-buffer transport (N-1 steps, each rank sends (N-1)/N of the data:
// bandwidth-optimal): Gloo 0.5's ReduceScatterHalvingDoubling takes `int`
// counts, pins its timeout at connect time and needs a writable input, and
// the options-style API has no reduce_scatter.
#include <cmath>
#include <cstring>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/types.h>

#include "gloo_comm.h"

namespace fsdpc_gloo {

// Slot prefix of our ring; Gloo's own collectives use 0x01..0x08.
static constexpr uint8_t kRingReduceScatterSlotPrefix = 0x40;

static size_t dtype_size(int32_t dtype) {
  switch (dtype) {
  case FSDPC_DTYPE_F32:
    return 4;
  case FSDPC_DTYPE_BF16:
    return 2;
  case FSDPC_DTYPE_F16:
    return 2;
  case FSDPC_DTYPE_I32:
    return 4;
  case FSDPC_DTYPE_I64:
    return 8;
  case FSDPC_DTYPE_U8:
    return 1;
  case FSDPC_DTYPE_F64:
    return 8;
  default:
    return 0;
  }
}

static size_t bytes_of(uint64_t count, int32_t dtype, uint64_t times = 1) {
  size_t es = dtype_size(dtype);
  if (es == 0)
    throw UsageError(FSDPC_INVALID_USAGE, "unknown dtype " + std::to_string(dtype));
  if (count > SIZE_MAX / es / times)
    throw UsageError(FSDPC_INVALID_USAGE, "count " + std::to_string(count) + " overflows size_t");
  return (size_t)count * es;
}

static void check_reduce_args(int32_t dtype, int32_t op, bool f64_ok = false) {
  if (dtype != FSDPC_DTYPE_F32 && dtype != FSDPC_DTYPE_BF16 && !(f64_ok && dtype == FSDPC_DTYPE_F64))
    throw UsageError(FSDPC_UNSUPPORTED, std::string("reductions take fp32 or bf16") +
                                            (f64_ok ? " or f64" : "") + " only (dtype " +
                                            std::to_string(dtype) + ")");
  if (op < FSDPC_REDUCE_SUM || op > FSDPC_REDUCE_MIN)
    throw UsageError(FSDPC_INVALID_USAGE, "unknown reduce op " + std::to_string(op));
}

static void check_host(void *stream) {
  if (stream)
    throw UsageError(FSDPC_INVALID_USAGE, "host-memory collectives take no stream (got one)");
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (std::isnan(f))
    return (uint16_t)((u >> 16) | 0x40); // keep NaN a NaN
  u += 0x7FFF + ((u >> 16) & 1);         // round to nearest even
  return (uint16_t)(u >> 16);
}

static void to_f32(const void *src, float *dst, size_t n, int32_t dtype) {
  if (dtype == FSDPC_DTYPE_F32) {
    memcpy(dst, src, n * 4);
    return;
  }
  const uint16_t *s = (const uint16_t *)src;
  for (size_t i = 0; i < n; i++)
    dst[i] = bf16_to_f32(s[i]);
}

static void from_f32(const float *src, void *dst, size_t n, int32_t dtype) {
  if (dtype == FSDPC_DTYPE_F32) {
    if (dst != src)
      memcpy(dst, src, n * 4);
    return;
  }
  uint16_t *d = (uint16_t *)dst;
  for (size_t i = 0; i < n; i++)
    d[i] = f32_to_bf16(src[i]);
}

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

static ReduceFn reduce_fn(int32_t op) {
  switch (op) {
  case FSDPC_REDUCE_MAX:
    return static_cast<ReduceFn>(&gloo::max<float>);
  case FSDPC_REDUCE_MIN:
    return static_cast<ReduceFn>(&gloo::min<float>);
  default:
    return static_cast<ReduceFn>(&gloo::sum<float>);
  }
}

static void scale(float *x, size_t n, float s) {
  for (size_t i = 0; i < n; i++)
    x[i] *= s;
}

void raw_allgather(fsdpc_comm *c, const void *send, void *recv, size_t bytes, int64_t t) {
  gloo::AllgatherOptions o(c->ctx);
  uint8_t *out = (uint8_t *)recv;
  if (send != out + (size_t)c->ctx->rank * bytes) // otherwise in place at out[rank]
    o.setInput(const_cast<uint8_t *>((const uint8_t *)send), bytes);
  o.setOutput(out, bytes * (size_t)c->ctx->size);
  o.setTag(c->tag++);
  o.setTimeout(std::chrono::milliseconds(t));
  gloo::allgather(o);
}

int32_t all_gather(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                   void *stream, const fsdpc_op_info *info) {
  return guarded(c, "all_gather", info, [&](int64_t t) {
    check_host(stream);
    size_t b = bytes_of(count, dtype, (uint64_t)c->ctx->size);
    if (b == 0)
      return;
    if (c->ctx->size == 1) {
      if (recv != send)
        memmove(recv, send, b);
      return;
    }
    raw_allgather(c, send, recv, b, t);
  });
}

// In-place fp32 all-reduce of x (n floats).
static void allreduce_f32(fsdpc_comm *c, float *x, size_t n, int32_t op, int64_t t) {
  if (c->ctx->size > 1) {
    gloo::AllreduceOptions o(c->ctx);
    o.setOutput(x, n);
    o.setReduceFunction(reduce_fn(op));
    o.setTag(c->tag++);
    o.setTimeout(std::chrono::milliseconds(t));
    gloo::allreduce(o);
  }
  if (op == FSDPC_REDUCE_AVG)
    scale(x, n, 1.0f / (float)c->ctx->size);
}

// In-place f64 all-reduce of x (n doubles).
static void allreduce_f64(fsdpc_comm *c, double *x, size_t n, int32_t op, int64_t t) {
  if (c->ctx->size > 1) {
    gloo::AllreduceOptions o(c->ctx);
    o.setOutput(x, n);
    ReduceFn fn = op == FSDPC_REDUCE_MAX   ? static_cast<ReduceFn>(&gloo::max<double>)
                  : op == FSDPC_REDUCE_MIN ? static_cast<ReduceFn>(&gloo::min<double>)
                                           : static_cast<ReduceFn>(&gloo::sum<double>);
    o.setReduceFunction(fn);
    o.setTag(c->tag++);
    o.setTimeout(std::chrono::milliseconds(t));
    gloo::allreduce(o);
  }
  if (op == FSDPC_REDUCE_AVG)
    for (size_t i = 0; i < n; i++)
      x[i] /= (double)c->ctx->size;
}

int32_t all_reduce(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                   int32_t op, void *stream, const fsdpc_op_info *info) {
  return guarded(c, "all_reduce", info, [&](int64_t t) {
    check_host(stream);
    check_reduce_args(dtype, op, true);
    size_t b = bytes_of(count, dtype);
    if (b == 0)
      return;
    if (dtype == FSDPC_DTYPE_F64) { // scalars: loss sums, squared norms, counts
      if (recv != send)
        memcpy(recv, send, b);
      allreduce_f64(c, (double *)recv, (size_t)count, op, t);
      return;
    }
    if (dtype == FSDPC_DTYPE_F32) {
      if (recv != send)
        memcpy(recv, send, b);
      allreduce_f32(c, (float *)recv, (size_t)count, op, t);
      return;
    }
    std::vector<float> tmp((size_t)count);
    to_f32(send, tmp.data(), tmp.size(), dtype);
    allreduce_f32(c, tmp.data(), tmp.size(), op, t);
    from_f32(tmp.data(), recv, tmp.size(), dtype);
  });
}

// Ring reduce-scatter on fp32. in: (N, n) chunks, chunk r is reduced into
// out (n) on rank r. At step s rank r sends its running partial of chunk
// (r-s-1) mod N to r+1 and receives the partial of chunk (r-s-2) mod N from
// r-1, adding its own contribution; after N-1 steps it holds chunk r.
static void ring_reduce_scatter(fsdpc_comm *c, const float *in, float *out, size_t n, int32_t op,
                                int64_t t) {
  const int N = c->ctx->size, r = c->ctx->rank;
  ReduceFn fn = reduce_fn(op);
  const auto tmo = std::chrono::milliseconds(t);
  if (N > 1) {
    std::vector<float> a(n), b(n);
    auto ua = c->ctx->createUnboundBuffer(a.data(), n * 4);
    auto ub = c->ctx->createUnboundBuffer(b.data(), n * 4);
    size_t own0 = (size_t)((r - 1 + N) % N) * n;
    auto u0 = c->ctx->createUnboundBuffer(const_cast<float *>(in + own0), n * 4);
    const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, c->tag++);
    const int left = (r - 1 + N) % N, right = (r + 1) % N;
    for (int s = 0; s < N - 1; s++) {
      auto &rbuf = (s % 2 == 0) ? ua : ub; // partial arriving this step
      auto &sbuf = s == 0 ? u0 : ((s % 2 == 0) ? ub : ua);
      rbuf->recv(left, slot);
      sbuf->send(right, slot);
      rbuf->waitRecv(tmo);
      float *x = (float *)rbuf->ptr;
      size_t chunk = (size_t)((r - s - 2 + 2 * N) % N);
      fn(x, x, in + chunk * n, n);
      sbuf->waitSend(tmo);
    }
    memcpy(out, ((N - 2) % 2 == 0) ? a.data() : b.data(), n * 4);
  } else if (out != in) {
    memmove(out, in, n * 4);
  }
  if (op == FSDPC_REDUCE_AVG)
    scale(out, n, 1.0f / (float)N);
}

int32_t reduce_scatter(fsdpc_comm *c, const void *send, void *recv, uint64_t count, int32_t dtype,
                       int32_t op, void *stream, const fsdpc_op_info *info) {
  return guarded(c, "reduce_scatter", info, [&](int64_t t) {
    check_host(stream);
    check_reduce_args(dtype, op);
    const size_t N = (size_t)c->ctx->size;
    bytes_of(count, dtype, N);
    const size_t n = (size_t)count;
    if (n == 0)
      return;
    if (dtype == FSDPC_DTYPE_F32) {
      ring_reduce_scatter(c, (const float *)send, (float *)recv, n, op, t);
      return;
    }
    std::vector<float> in(N * n), out(n);
    to_f32(send, in.data(), in.size(), dtype);
    ring_reduce_scatter(c, in.data(), out.data(), n, op, t);
    from_f32(out.data(), recv, n, dtype);
  });
}

int32_t broadcast(fsdpc_comm *c, void *buf, uint64_t count, int32_t dtype, int32_t root,
                  void *stream, const fsdpc_op_info *info) {
  return guarded(c, "broadcast", info, [&](int64_t t) {
    check_host(stream);
    if (root < 0 || root >= c->ctx->size)
      throw UsageError(FSDPC_INVALID_USAGE, "root " + std::to_string(root) +
                                                " is outside the communicator of size " +
                                                std::to_string(c->ctx->size));
    size_t b = bytes_of(count, dtype);
    if (b == 0 || c->ctx->size == 1)
      return;
    gloo::BroadcastOptions o(c->ctx);
    o.setOutput((uint8_t *)buf, b);
    o.setRoot(root);
    o.setTag(c->tag++);
    o.setTimeout(std::chrono::milliseconds(t));
    gloo::broadcast(o);
  });
}

int32_t barrier(fsdpc_comm *c, const fsdpc_op_info *info) {
  return guarded(c, "barrier", info, [&](int64_t t) {
    if (c->ctx->size == 1)
      return;
    gloo::BarrierOptions o(c->ctx);
    o.setTag(c->tag++);
    o.setTimeout(std::chrono::milliseconds(t));
    gloo::barrier(o);
  });
}

} // namespace fsdpc_gloo
