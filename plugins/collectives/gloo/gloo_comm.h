// Internal to the gloo plugin: the communicator, error helpers and the
// guard that turns every C++ exception into an fsdpc status + one line.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include "fsdpc/plugin.h"

struct fsdpc_comm {
  const fsdpc_host_api *host = nullptr;         // of the host that created it (ABI 1.1)
  std::shared_ptr<gloo::transport::Device> dev; // shared by a comm and its splits
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  const fsdpc_store_v1 *store = nullptr; // borrowed, outlives every comm
  std::string prefix;                    // store prefix of this comm
  int64_t timeout_ms = 0;                // default per-op timeout
  uint32_t tag = 0;                      // per-op tag: a stray late message never matches
  uint64_t n_splits = 0;                 // makes each split's store keys unique
  // Why the comm is unusable, or empty. abort() sets it from the watchdog's
  // thread while an op may run, hence the lock.
  std::mutex mu;
  std::string broken;
  // An op is running (abort then leaves the connections to it). Set before
  // broken is read, and abort sets broken before reading it, so that one of
  // the two always sees the other (both sequentially consistent).
  std::atomic<int> in_op{0};
};

namespace fsdpc_gloo {

// A store failure keeps its fsdpc status (TIMEOUT vs SYSTEM_ERROR).
struct StoreError : std::runtime_error {
  int32_t status;
  StoreError(int32_t st, const std::string &m) : std::runtime_error(m), status(st) {}
};

// A usage error found by the plugin itself (bad dtype, root, count).
struct UsageError : std::runtime_error {
  int32_t status;
  UsageError(int32_t st, const std::string &m) : std::runtime_error(m), status(st) {}
};

// Records msg through h->set_error (h may be NULL: nobody) and returns st.
int32_t fail(const fsdpc_host_api *h, int32_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
inline const fsdpc_host_api *host_of(const fsdpc_comm *c) {
  return c ? c->host : nullptr;
}

// Why c is unusable ("" while it is usable); set_broken keeps the first reason.
std::string broken_of(fsdpc_comm *c);
void set_broken(fsdpc_comm *c, const std::string &why);

// "all_gather (unit layers.3, seq 57)"
std::string describe(const char *op, const fsdpc_op_info *info);
int64_t op_timeout_ms(const fsdpc_comm *c, const fsdpc_op_info *info);

// Runs fn(timeout_ms) and maps any exception to a status and message that
// name the op; a Gloo I/O failure or timeout marks the comm broken.
template <class F>
int32_t guarded(fsdpc_comm *c, const char *op, const fsdpc_op_info *info, F &&fn);

int32_t guard_exception(fsdpc_comm *c, const char *op, const fsdpc_op_info *info,
                        int64_t timeout_ms, int64_t elapsed_ms);
int64_t now_ms();

template <class F>
int32_t guarded(fsdpc_comm *c, const char *op, const fsdpc_op_info *info, F &&fn) {
  if (!c)
    return fail(nullptr, FSDPC_INVALID_USAGE, "gloo: %s on a NULL communicator", op);
  struct InOp { // in_op for the duration of the call, whatever it throws
    std::atomic<int> &f;
    explicit InOp(std::atomic<int> &x) : f(x) {
      f.store(1);
    }
    ~InOp() {
      f.store(0);
    }
  } in_op(c->in_op);
  std::string why = broken_of(c);
  if (!why.empty())
    return fail(c->host, FSDPC_SYSTEM_ERROR,
                "gloo: %s: communicator unusable after an earlier failure (%s)",
                describe(op, info).c_str(), why.c_str());
  int64_t t = op_timeout_ms(c, info), t0 = now_ms();
  try {
    fn(t);
    return FSDPC_OK;
  } catch (...) {
    return guard_exception(c, op, info, t, now_ms() - t0);
  }
}

// Collective entry points (gloo_ops.cc).
int32_t all_gather(fsdpc_comm *comm, const void *send, void *recv, uint64_t count, int32_t dtype,
                   void *stream, const fsdpc_op_info *info);
int32_t reduce_scatter(fsdpc_comm *comm, const void *send, void *recv, uint64_t count,
                       int32_t dtype, int32_t op, void *stream, const fsdpc_op_info *info);
int32_t all_reduce(fsdpc_comm *comm, const void *send, void *recv, uint64_t count, int32_t dtype,
                   int32_t op, void *stream, const fsdpc_op_info *info);
int32_t broadcast(fsdpc_comm *comm, void *buf, uint64_t count, int32_t dtype, int32_t root,
                  void *stream, const fsdpc_op_info *info);
int32_t barrier(fsdpc_comm *comm, const fsdpc_op_info *info);

// Raw all-gather of bytes over c (used by split to exchange colors).
void raw_allgather(fsdpc_comm *c, const void *send, void *recv, size_t bytes, int64_t timeout_ms);

} // namespace fsdpc_gloo
