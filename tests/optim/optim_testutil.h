/* Shared by the optimizer plugin tests (tests/optim, tests/cuda): the
 * structs a host hands to a plugin, filled the way the stub host
 * (host_stub.h) does, and create with the stub's error cleared first. */
#ifndef FSDPC_TESTS_OPTIM_TESTUTIL_H
#define FSDPC_TESTS_OPTIM_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "host_stub.h"

/* A whole fsdpc_optim_init from the stub host (ABI 1.1: the host comes with
 * the call) with AdamW's hyper-parameters, on the CPU, without options. */
static inline fsdpc_optim_init optim_test_init(double wd, double b1, double b2, double eps) {
  fsdpc_optim_init in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  in.host = stub_host();
  in.weight_decay = wd;
  in.beta1 = b1;
  in.beta2 = b2;
  in.eps = eps;
  in.device = FSDPC_DEVICE_CPU;
  return in;
}

/* Options holding the one plugin option key = value, for in.opts. The table
 * is static: the next call overwrites it. */
static inline const fsdpc_opts *optim_test_opt(const char *key, double value) {
  static stub_opts opts;
  opts.n = 1;
  opts.keys[0] = key;
  opts.values[0] = value;
  return (const fsdpc_opts *)&opts;
}

/* vt->create(in, out) after clearing the stub's last error. */
static inline int32_t optim_test_create(const fsdpc_optim_v1 *vt, const fsdpc_optim_init *in,
                                        fsdpc_optimizer **out) {
  stub_clear_error();
  return vt->create(in, out);
}

/* The same, failing the running test unless it gives an optimizer. */
static inline fsdpc_optimizer *optim_test_create_ok(const fsdpc_optim_v1 *vt,
                                                    const fsdpc_optim_init *in) {
  fsdpc_optimizer *opt = NULL;
  ck_assert_msg(optim_test_create(vt, in, &opt) == FSDPC_OK, "create: %s", stub_last_error());
  ck_assert_ptr_nonnull(opt);
  return opt;
}

/* A whole fsdpc_optim_step_info; threads = 0 leaves the count to OpenMP. */
static inline fsdpc_optim_step_info optim_test_info(int64_t step, double lr, double grad_scale,
                                                    int threads) {
  fsdpc_optim_step_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  info.step = step;
  info.lr = lr;
  info.grad_scale = grad_scale;
  info.num_threads = threads;
  return info;
}

/* An fp32-state tensor as a v1 host passes it: the struct ends at `decay`
 * (the fields after it came later). */
static inline fsdpc_optim_tensor optim_test_tensor(float *p, const float *g, float *state,
                                                   uint64_t numel, uint64_t stride, int decay) {
  fsdpc_optim_tensor t = {.struct_size = offsetof(fsdpc_optim_tensor, param_bf16),
                          .param = p,
                          .grad = g,
                          .state = state,
                          .numel = numel,
                          .stride = stride,
                          .decay = decay};
  return t;
}

#endif
