/* fsdpc plugin ABI, version 1.3.
 *
 * This header is the whole contract between libfsdpc (the host) and a
 * plugin. It is pure C11, includes nothing but <stdint.h>, <stddef.h> and
 * its statedict part (fsdpc/plugin_statedict.h), and may be vendored (the
 * two files) into a plugin's own tree.
 *
 * Rules (see docs/plugins.md):
 * - A plugin exports exactly one symbol, fsdpc_plugin_entry_v1. The major ABI
 *   version is in its name; a plugin for another major exports another name.
 * - Every struct that crosses the boundary starts with uint32_t struct_size
 *   and only ever grows at its end. A reader uses a field only when
 *   struct_size covers it (FSDPC_HAS_FIELD) and, for pointers, when it is
 *   non-NULL. Function pointers marked (optional) may be NULL.
 * - Only fixed-width integers, double, float and pointers cross; enums are
 *   stored as int32_t. Strings passed in are borrowed for the call only: copy
 *   what you keep. Strings a plugin hands out (names in descriptors) must
 *   live as long as the plugin is loaded.
 * - Every function returns an fsdpc status code (int32_t). On failure, call
 *   host->set_error() with one line that says what is wrong and what to do.
 * - The host never unloads a plugin while an object it created is alive.
 * - No globals (1.1): the host table reaches every call, so a plugin keeps
 *   no pointer to it from the entry point (one process may hold several
 *   hosts, e.g. two embedded trainers). Calls that create an object get it
 *   in their input struct (fsdpc_comm_init.host, fsdpc_optim_init.host) and
 *   the object keeps it for its later calls; supports() gets it in
 *   fsdpc_situation.host / fsdpc_attn_shape.host; the calls that had no
 *   struct get an fsdpc_call (host + options) through the *_call members
 *   appended in 1.1, which the host uses instead of the 1.0 member when they
 *   are set. A 1.0 plugin (no *_call members, a global host pointer) still
 *   loads and works: a 1.1 host fills both. A plugin reads these fields only
 *   when FSDPC_HAS_FIELD covers them and they are non-NULL (a 1.0 host does
 *   not fill them): without a host it returns its status with no message.
 *
 * Ownership: objects created by a plugin (communicators, optimizers, ...)
 * are owned by the host, which destroys them through the same vtable.
 */
#ifndef FSDPC_PLUGIN_H
#define FSDPC_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FSDPC_PLUGIN_ABI_MAJOR 1
/* 1.1: host context in every call; 1.2: attention windows; 1.3: the objective kind */
#define FSDPC_PLUGIN_ABI_MINOR 3

#if defined(__GNUC__)
#define FSDPC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define FSDPC_PLUGIN_EXPORT
#endif

/* True when the struct at p is long enough to hold field f. */
#define FSDPC_HAS_FIELD(p, type, f)                                            \
  ((p) != NULL && (p)->struct_size >= offsetof(type, f) + sizeof((p)->f))

/* ---------------------------------------------------------------------- */
/* Status codes: fixed numbers, never renumbered.                          */

#define FSDPC_STATUS_MAP(X)                                                    \
  X(OK, 0, "success")                                                          \
  X(INVALID_USAGE, 1, "invalid usage (a user or config error)")                \
  X(SYSTEM_ERROR, 2, "system error (OS, driver or network)")                   \
  X(INTERNAL_ERROR, 3, "internal error (a bug in fsdpc or a plugin)")          \
  X(UNSUPPORTED, 4, "unsupported")                                             \
  X(TIMEOUT, 5, "timeout")

typedef int32_t fsdpc_status;
enum {
#define FSDPC_STATUS_ENUM_(name, value, text) FSDPC_##name = value,
  FSDPC_STATUS_MAP(FSDPC_STATUS_ENUM_)
#undef FSDPC_STATUS_ENUM_
};

/* ---------------------------------------------------------------------- */
/* Small enums shared by all kinds.                                         */

enum { /* element types */
  FSDPC_DTYPE_F32 = 0,
  FSDPC_DTYPE_BF16 = 1,
  FSDPC_DTYPE_F16 = 2,
  FSDPC_DTYPE_I32 = 3,
  FSDPC_DTYPE_I64 = 4,
  FSDPC_DTYPE_U8 = 5,
  FSDPC_DTYPE_F64 = 6 /* scalars: loss sums, norms, counts */
};

enum { /* where memory lives and code runs */
  FSDPC_DEVICE_CPU = 0,
  FSDPC_DEVICE_CUDA = 1
};

enum { /* reductions */
  FSDPC_REDUCE_SUM = 0,
  FSDPC_REDUCE_AVG = 1,
  FSDPC_REDUCE_MAX = 2,
  FSDPC_REDUCE_MIN = 3
};

enum { /* log levels */
  FSDPC_LOG_ERROR = 0,
  FSDPC_LOG_WARN = 1,
  FSDPC_LOG_INFO = 2,
  FSDPC_LOG_DEBUG = 3
};

enum { /* plugin kinds */
  FSDPC_KIND_COLLECTIVES = 0,
  FSDPC_KIND_ATTENTION = 1,
  FSDPC_KIND_OPTIM = 2,
  FSDPC_KIND_WRAP = 3,
  FSDPC_KIND_STATEDICT = 4,
  FSDPC_KIND_OBJECTIVE = 5, /* 1.3 */
  FSDPC_KIND_COUNT_ = 6     /* grows with each kind: never an array size in a plugin */
};

/* ---------------------------------------------------------------------- */
/* Plugin options: each component declares the keys it accepts under its  */
/* config section's `options:` map. The host validates the user's values  */
/* against these (type, range, unknown keys with file:line:col) before it  */
/* creates anything, and fills in defaults.                                 */

enum {
  FSDPC_OPT_BOOL = 0,
  FSDPC_OPT_INT = 1,   /* int64_t */
  FSDPC_OPT_FLOAT = 2, /* double */
  FSDPC_OPT_STRING = 3
};

typedef struct fsdpc_option_desc {
  uint32_t struct_size;
  const char *key;           /* e.g. "min_num_params" */
  int32_t type;              /* FSDPC_OPT_* */
  const char *default_value; /* as YAML text, e.g. "100000000"; NULL = required */
  double min, max;           /* inclusive range for INT/FLOAT; min > max = no range */
  const char *help;          /* one line */
} fsdpc_option_desc;

/* Opaque handle to one component's validated options. Read through host. */
typedef struct fsdpc_opts fsdpc_opts;

/* ---------------------------------------------------------------------- */
/* The rendezvous key-value store (hosted by rank 0), handed to            */
/* collectives. Keys are NUL-terminated strings; values are bytes.          */

typedef struct fsdpc_store_v1 {
  uint32_t struct_size;
  void *ctx;
  int32_t (*set)(void *ctx, const char *key, const void *value, uint64_t len);
  /* Blocks until key exists or timeout_ms passes (FSDPC_TIMEOUT). On OK,
   * *len is the value's size; at most cap bytes are copied into buf. */
  int32_t (*get)(void *ctx, const char *key, void *buf, uint64_t cap,
                 uint64_t *len, int64_t timeout_ms);
  /* Atomically adds delta to an integer key (created as 0), returns the sum. */
  int32_t (*add)(void *ctx, const char *key, int64_t delta, int64_t *result);
  /* OK if key exists now, UNSUPPORTED-free: returns FSDPC_TIMEOUT if not. */
  int32_t (*check)(void *ctx, const char *key);
} fsdpc_store_v1;

/* ---------------------------------------------------------------------- */
/* Host services: passed to the entry point, valid while loaded.           */

typedef struct fsdpc_device_info {
  uint32_t struct_size;
  int32_t device;         /* FSDPC_DEVICE_* this process computes on */
  int32_t device_index;   /* CUDA ordinal, or -1 on CPU */
  int32_t cc_major, cc_minor;
  uint64_t total_memory;  /* bytes */
  int32_t num_threads;    /* CPU threads the host gives the plugin */
} fsdpc_device_info;

typedef struct fsdpc_host_api {
  uint32_t struct_size;
  uint32_t abi_major, abi_minor;
  const char *host_version; /* e.g. "0.1.0" */
  void *host_ctx;           /* pass back as the first argument below */

  void (*log)(void *host_ctx, int32_t level, const char *msg);
  /* Records a one-line error for the call that is about to fail; copied. */
  void (*set_error)(void *host_ctx, int32_t status, const char *msg);
  /* Host memory, aligned to align (a power of two, >= 16). */
  void *(*alloc)(void *host_ctx, uint64_t bytes, uint64_t align);
  void (*free)(void *host_ctx, void *ptr);
  /* Option lookup: key is one of the component's declared option keys; out
   * is int32_t (BOOL), int64_t (INT), double (FLOAT) or, for STRING, a char
   * buffer of out_cap bytes. Defaults are already applied. */
  int32_t (*opt_get)(void *host_ctx, const fsdpc_opts *opts, const char *key,
                     int32_t type, void *out, uint64_t out_cap);
  int32_t (*device_info)(void *host_ctx, fsdpc_device_info *out);
} fsdpc_host_api;

/* 1.1: the context of one call that has no struct of its own to carry it
 * (wrap plan, statedict probe/save/load, attention create): the host table
 * of the host making the call and the component's options. Valid for the
 * call only. */
typedef struct fsdpc_call {
  uint32_t struct_size;
  const fsdpc_host_api *host; /* never NULL from a 1.1 host */
  const fsdpc_opts *opts;     /* the component's validated options, or NULL */
} fsdpc_call;

/* What `auto` selection and supports() look at. */
typedef struct fsdpc_situation {
  uint32_t struct_size;
  int32_t device;        /* FSDPC_DEVICE_* */
  int32_t dtype;         /* compute dtype */
  int32_t world_size;
  int32_t num_heads, num_kv_heads, head_dim;
  int32_t max_seq_len;
  /* Appended in 1.1: the host asking (set_error for a veto's reason). */
  const fsdpc_host_api *host;
} fsdpc_situation;

/* ====================================================================== */
/* Kind: collectives. Moves shards between ranks.                           */
/* ====================================================================== */

typedef struct fsdpc_comm fsdpc_comm; /* plugin-defined communicator */

enum { /* memory the collectives operate on (bit mask) */
  FSDPC_COMM_MEM_HOST = 1,
  FSDPC_COMM_MEM_DEVICE = 2
};

typedef struct fsdpc_comm_init {
  uint32_t struct_size;
  const fsdpc_opts *opts;
  const fsdpc_store_v1 *store; /* valid until destroy of every comm */
  const char *store_prefix;    /* unique per job and comm, e.g. "fsdpc/0/" */
  int32_t rank, world_size;
  int32_t device_index;        /* CUDA ordinal or -1 */
  int64_t timeout_ms;          /* default per-op timeout */
  /* Appended in 1.1: the host creating the comm; the comm keeps it for its
   * later calls (and gives it to the comms split from it). */
  const fsdpc_host_api *host;
} fsdpc_comm_init;

/* Says which op is running, so that timeouts and errors name it. */
typedef struct fsdpc_op_info {
  uint32_t struct_size;
  const char *op;       /* "all_gather", ... ; may be NULL */
  const char *unit;     /* FSDP unit name, e.g. "layers.3"; may be NULL */
  uint64_t seq;         /* collective sequence number on this comm */
  int64_t timeout_ms;   /* 0 = the comm's default */
} fsdpc_op_info;

typedef struct fsdpc_collectives_v1 {
  uint32_t struct_size;
  uint32_t memory; /* FSDPC_COMM_MEM_* bits */

  /* (optional) OK or UNSUPPORTED for this situation. */
  int32_t (*supports)(const fsdpc_situation *s);
  /* Creates the world communicator. Collective over all ranks. */
  int32_t (*init)(const fsdpc_comm_init *init, fsdpc_comm **out);
  /* Creates a sub-communicator from ranks of parent with the same color,
   * ordered by key (ncclCommSplit semantics). Collective over parent. */
  int32_t (*split)(fsdpc_comm *parent, int32_t color, int32_t key,
                   fsdpc_comm **out);
  void (*destroy)(fsdpc_comm *comm);
  int32_t (*rank)(const fsdpc_comm *comm);
  int32_t (*size)(const fsdpc_comm *comm);

  /* Collectives. stream is a cudaStream_t for device memory, NULL for host
   * memory. count is in elements. In-place is allowed where noted. Host
   * memory ops complete before returning; device ops are stream-ordered. */
  /* recv[r*count ..] = send of rank r. In place if send == recv + rank*count. */
  int32_t (*all_gather)(fsdpc_comm *comm, const void *send, void *recv,
                        uint64_t count, int32_t dtype, void *stream,
                        const fsdpc_op_info *info);
  /* recv = op over ranks of send[rank*count ..]; send holds size*count. */
  int32_t (*reduce_scatter)(fsdpc_comm *comm, const void *send, void *recv,
                            uint64_t count, int32_t dtype, int32_t op,
                            void *stream, const fsdpc_op_info *info);
  /* In place if send == recv. */
  int32_t (*all_reduce)(fsdpc_comm *comm, const void *send, void *recv,
                        uint64_t count, int32_t dtype, int32_t op,
                        void *stream, const fsdpc_op_info *info);
  int32_t (*broadcast)(fsdpc_comm *comm, void *buf, uint64_t count,
                       int32_t dtype, int32_t root, void *stream,
                       const fsdpc_op_info *info);
  int32_t (*barrier)(fsdpc_comm *comm, const fsdpc_op_info *info);

  /* (optional) Batch several device collectives into one launch. */
  int32_t (*group_start)(fsdpc_comm *comm);
  int32_t (*group_end)(fsdpc_comm *comm);
  /* (optional) Abort in-flight work; the comm is then unusable and every
   * later call on it fails at once (destroy stays valid and must not wait
   * on a peer). The host's watchdog calls it from its own thread when the
   * job has failed, while a call on this comm may be in progress on
   * another: it must be safe to call so and must not wait on a peer.
   * Without it the host ends the process instead (docs/dist.md). */
  int32_t (*abort)(fsdpc_comm *comm, const char *reason);
  /* (optional) Non-blocking health check of device collectives: OK, or an
   * error with set_error naming what failed. */
  int32_t (*poll_error)(fsdpc_comm *comm);
} fsdpc_collectives_v1;

/* ====================================================================== */
/* Kind: attention. softmax(Q K^T * scale + mask) V, forward and backward.  */
/* Layouts (row-major): q, out, dq, dout: (B, T, NH, HD);                   */
/* k, v, dk, dv: (B, T, KVH, HD); NH % KVH == 0 (GQA: head h uses kv head   */
/* h / (NH / KVH)). Gradients dq, dk, dv are written (=), not accumulated.  */
/* ====================================================================== */

typedef struct fsdpc_attn_ctx fsdpc_attn_ctx; /* plugin-defined, per device */

typedef struct fsdpc_attn_shape {
  uint32_t struct_size;
  int32_t B, T, NH, KVH, HD;
  int32_t causal;      /* 1 = causal mask */
  float scale;         /* usually 1/sqrt(HD) */
  int32_t dtype;       /* FSDPC_DTYPE_F32 (CPU) or FSDPC_DTYPE_BF16 (CUDA) */
  int32_t device;      /* FSDPC_DEVICE_* */
  /* (optional) document ids, (B, T) int32 in device memory: when non-NULL a
   * query attends only to keys with the same id (packed sequences). */
  const int32_t *doc_ids;
  /* Appended in 1.1: the host making the call (supports, sizes, forward,
   * backward), for a plugin without a per-device context. */
  const fsdpc_host_api *host;
  /* Appended in 1.1: CPU threads to use (train.threads); 0 = the plugin's
   * choice (e.g. omp_get_max_threads()). */
  int32_t num_threads;
  /* Appended in 1.2: sliding window; when > 0 query i attends only to keys
   * j with i - j < window (with causal: the last window keys, itself
   * included). The host sets it only for a component whose vtable has
   * FSDPC_ATTN_FEATURE_WINDOW in features, and may change it between calls
   * (one window per decoder layer); sizes() does not depend on it. */
  int32_t window;
  /* Appended in 1.3: attention logit soft-capping; when > 0 each score s =
   * scale * q . k becomes softcap * tanh(s / softcap) before the mask and
   * the softmax (Gemma 2). Set only for a component with
   * FSDPC_ATTN_FEATURE_SOFTCAP; sizes() does not depend on it. */
  float softcap;
} fsdpc_attn_shape;

/* fsdpc_attention_v1.features */
#define FSDPC_ATTN_FEATURE_WINDOW 1u  /* honours fsdpc_attn_shape.window */
#define FSDPC_ATTN_FEATURE_SOFTCAP 2u /* honours fsdpc_attn_shape.softcap */

typedef struct fsdpc_attn_sizes {
  uint32_t struct_size;
  uint64_t saved_bytes;     /* kept from forward to backward per call */
  uint64_t fwd_workspace;   /* scratch during forward */
  uint64_t bwd_workspace;   /* scratch during backward */
} fsdpc_attn_sizes;

typedef struct fsdpc_attention_v1 {
  uint32_t struct_size;
  /* (optional) OK or UNSUPPORTED (with set_error saying why). */
  int32_t (*supports)(const fsdpc_attn_shape *shape);
  /* (optional) per-device context (handles, streams). */
  int32_t (*create)(const fsdpc_opts *opts, int32_t device, int32_t device_index,
                    fsdpc_attn_ctx **out);
  void (*destroy)(fsdpc_attn_ctx *ctx);
  int32_t (*sizes)(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *shape,
                   fsdpc_attn_sizes *out);
  int32_t (*forward)(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *shape,
                     const void *q, const void *k, const void *v, void *out,
                     void *saved, void *workspace, void *stream);
  int32_t (*backward)(fsdpc_attn_ctx *ctx, const fsdpc_attn_shape *shape,
                      const void *q, const void *k, const void *v,
                      const void *out, const void *dout, const void *saved,
                      void *dq, void *dk, void *dv, void *workspace,
                      void *stream);

  /* Appended in 1.1. (optional) create with the call context (host and
   * options); a 1.1 host calls it instead of create when set. */
  int32_t (*create_call)(const fsdpc_call *call, int32_t device, int32_t device_index,
                         fsdpc_attn_ctx **out);
  /* Appended in 1.2: FSDPC_ATTN_FEATURE_* bits; a component without the
   * member is treated as having none (a 1.1 plugin ignores shape fields it
   * does not know, so a window it cannot see is never handed to it). */
  uint32_t features;
} fsdpc_attention_v1;

/* ====================================================================== */
/* Kind: optim. Updates one rank's fp32 master shard in place.              */
/* State is n_slots planes of fp32 (plane s of a tensor starts at           */
/* state + s * stride), element-aligned with the parameter, so checkpoints  */
/* can be resharded element-wise. Appended: an optimizer may keep 8-bit    */
/* codes with per-block scales instead (qformat, q_export, q_import).       */
/* ====================================================================== */

typedef struct fsdpc_optimizer fsdpc_optimizer; /* plugin-defined */

typedef struct fsdpc_optim_init {
  uint32_t struct_size;
  const fsdpc_opts *opts;  /* the plugin's own options */
  double weight_decay;     /* from optim.weight_decay */
  double beta1, beta2, eps;
  double momentum;
  int32_t nesterov;
  int32_t device;          /* FSDPC_DEVICE_* the step runs on */
  /* Appended in 1.1: the host creating the optimizer; the optimizer keeps
   * it for its later calls. */
  const fsdpc_host_api *host;
} fsdpc_optim_init;

typedef struct fsdpc_optim_tensor {
  uint32_t struct_size;
  float *param;        /* (numel) fp32 master values, updated in place */
  const float *grad;   /* (numel) fp32 gradient */
  float *state;        /* (n_slots, stride) slot s at state + s * stride */
  uint64_t numel;
  uint64_t stride;     /* elements between state slots */
  int32_t decay;       /* 1 = apply weight decay to this tensor */
  /* (appended; read only when struct_size covers it) NULL, or (numel) bf16
   * bits that a plugin with param_bf16 set in its vtable fills with the
   * updated param rounded to nearest even: the engine's compute-dtype copy,
   * written in the same pass instead of a separate cast. */
  uint16_t *param_bf16;
  /* Appended: quantized state (see fsdpc_optim_qformat). The host sets these
   * only for an optimizer whose qformat has block > 0 and a parameter of at
   * least min_numel elements; then `state` is NULL. Otherwise qstate and
   * qscale are NULL and `state` holds fp32 slots as above. */
  uint8_t *qstate;       /* (n_slots, stride) one code per element per slot */
  float *qscale;         /* (n_slots, scale_stride) fp32 scale of each block */
  uint64_t scale_stride; /* floats between the scale planes of two slots */
  uint64_t block_phase;  /* element 0's index inside its block: element i
                            belongs to block (block_phase + i) / block */
} fsdpc_optim_tensor;

/* Appended: how an optimizer with quantized state stores it. Blocks are
 * counted from each parameter's first element (element j of a parameter is
 * in block j / block), so a block never holds two parameters. */
typedef struct fsdpc_optim_qformat {
  uint32_t struct_size;
  uint32_t block;     /* elements per fp32 scale, e.g. 256; 0 = fp32 slots */
  uint64_t min_numel; /* parameters with fewer elements keep fp32 slots */
} fsdpc_optim_qformat;

typedef struct fsdpc_optim_step_info {
  uint32_t struct_size;
  int64_t step;        /* 1-based step count for bias correction */
  double lr;
  double grad_scale;   /* multiply gradients by this first (clipping) */
  void *stream;        /* cudaStream_t on CUDA, NULL on CPU */
  int32_t num_threads; /* CPU threads to use */
} fsdpc_optim_step_info;

typedef struct fsdpc_optim_v1 {
  uint32_t struct_size;
  int32_t (*supports)(const fsdpc_situation *s); /* (optional) */
  int32_t (*create)(const fsdpc_optim_init *init, fsdpc_optimizer **out);
  void (*destroy)(fsdpc_optimizer *opt);
  /* Number of fp32 state slots per element (AdamW 2, SGD+momentum 1). */
  uint32_t (*n_slots)(const fsdpc_optimizer *opt);
  /* Name of slot i, e.g. "exp_avg"; used in checkpoints. */
  const char *(*slot_name)(const fsdpc_optimizer *opt, uint32_t i);
  /* Initial value of every state slot (zeros for AdamW and SGD). */
  int32_t (*init_state)(fsdpc_optimizer *opt, float *state, uint64_t n_floats,
                        int32_t device, void *stream);
  /* One update over a list of tensors (multi-tensor apply). */
  int32_t (*step)(fsdpc_optimizer *opt, const fsdpc_optim_tensor *tensors,
                  uint32_t n_tensors, const fsdpc_optim_step_info *info);
  /* (appended) 1 = step() on FSDPC_DEVICE_CUDA writes
   * fsdpc_optim_tensor.param_bf16 where it is non-NULL; 0 (or a shorter
   * struct) = never: the host casts the params itself. */
  int32_t param_bf16;
  /* Appended (optional): quantized state, one byte per element per slot
   * plus one fp32 scale per block per slot. Fills *out; NULL (or block 0)
   * means fp32 slots. The host zero-fills codes and scales at the start. */
  int32_t (*qformat)(const fsdpc_optimizer *opt, fsdpc_optim_qformat *out);
  /* (optional; required with qformat) Checkpoints, on host memory. For one
   * quantized tensor t, q_export writes slot's values (numel floats, as the
   * step would read them) and each element's block scale; q_import sets the
   * codes and scales back from them, taking as each block's scale the max
   * over its elements of max(scale, |value|). q_import(q_export(x)) gives
   * x's codes and scales bit for bit when the blocks are the same. */
  int32_t (*q_export)(fsdpc_optimizer *opt, const fsdpc_optim_tensor *t, uint32_t slot,
                      float *values, float *scales);
  int32_t (*q_import)(fsdpc_optimizer *opt, const fsdpc_optim_tensor *t, uint32_t slot,
                      const float *values, const float *scales);
} fsdpc_optim_v1;

/* ====================================================================== */
/* Kind: wrap. Decides FSDP unit boundaries over the module tree.           */
/* ====================================================================== */

typedef struct fsdpc_wrap_param {
  uint32_t struct_size;
  const char *name;         /* HF name, e.g. "model.layers.3.mlp.up_proj.weight" */
  const char *module;       /* owning block, e.g. "model.layers.3" */
  const char *module_type;  /* "embedding", "decoder_layer", "norm", "lm_head" */
  uint64_t numel;
  int32_t layer;            /* decoder layer index, or -1 */
  int32_t tie_group;        /* params with the same id >= 0 share storage */
} fsdpc_wrap_param;

typedef struct fsdpc_wrap_v1 {
  uint32_t struct_size;
  /* Given the parameters in module order, writes unit_of_param[i] for each
   * and *n_units. Units are numbered 0.. in order of first appearance; the
   * host builds one flat buffer per unit. Tied parameters must share a unit
   * (the host refuses a plan that splits them). */
  int32_t (*plan)(const fsdpc_opts *opts, const fsdpc_wrap_param *params,
                  uint32_t n_params, uint32_t *unit_of_param,
                  uint32_t *n_units);

  /* Appended in 1.1: plan with the call context (call->opts replaces opts).
   * A 1.1 host calls it instead of plan when set; either may then be NULL,
   * not both. */
  int32_t (*plan_call)(const fsdpc_call *call, const fsdpc_wrap_param *params, uint32_t n_params,
                       uint32_t *unit_of_param, uint32_t *n_units);
} fsdpc_wrap_v1;

/* Kind: statedict: in fsdpc/plugin_statedict.h (part of this header). */
#include "plugin_statedict.h"

/* ====================================================================== */
/* Kind: objective (1.3). What a training step minimises, from the model's  */
/* outputs, and its gradient with respect to them (docs/objectives.md).     */
/* The host runs the model and the lm_head; an objective sees what its      */
/* input mode asks for and answers with a loss, the gradient the host seeds */
/* the backward with, and named metrics.                                    */
/* ====================================================================== */

typedef struct fsdpc_objective fsdpc_objective; /* plugin-defined */

enum { /* fsdpc_objective_v1.input: what the host hands to compute() */
  /* Token cross-entropy sums over a whole optimizer step (every rank and
   * micro-batch): the host runs its fused lm_head + cross-entropy and seeds
   * each target token's gradient with token_weight * (softmax - onehot). */
  FSDPC_OBJ_INPUT_TOKENS = 0,
  /* Sequence log-probabilities: per sequence of a micro-batch, the sum over
   * its completion (unmasked) tokens of log p(label), under the policy and,
   * with needs_ref, under the reference model. The host seeds each token's
   * gradient with dlogps[sequence] * (onehot - softmax). */
  FSDPC_OBJ_INPUT_SEQ_LOGPS = 1
};

enum { /* fsdpc_obj_batch.want (bit mask) */
  FSDPC_OBJ_WANT_SEED = 1, /* the gradient seed: token_weight or dlogps */
  FSDPC_OBJ_WANT_LOSS = 2  /* loss and metrics */
};

typedef struct fsdpc_objective_init {
  uint32_t struct_size;
  const fsdpc_opts *opts;     /* the plugin's own options (objective.options) */
  const fsdpc_host_api *host; /* the object keeps it for its later calls */
  /* objective.* keys, TRL's names and meanings; a plugin ignores those it
   * has no use for. */
  double beta;            /* temperature of the implicit reward (ORPO: lambda) */
  double label_smoothing; /* conservative DPO: assumed label-noise rate */
  double gamma;           /* SimPO: target reward margin (TRL's simpo_gamma) */
  int32_t device;         /* FSDPC_DEVICE_* the step runs on (compute() is always on host data) */
} fsdpc_objective_init;

/* One call's input. Sequences come in groups of group_size (a preference
 * pair is a group of 2: sequence 2i chosen, 2i+1 rejected); a group is
 * never split across calls, ranks or micro-batches. Arrays are host memory,
 * valid for the call. */
typedef struct fsdpc_obj_batch {
  uint32_t struct_size;
  int32_t want; /* FSDPC_OBJ_WANT_* bits */
  /* FSDPC_OBJ_INPUT_TOKENS */
  double token_loss_sum; /* sum of -log p(label) over the step's target tokens (WANT_LOSS) */
  /* TOKENS: target tokens of the whole step, every rank (> 0). SEQ_LOGPS:
   * completion tokens of the groups' first sequences (the chosen) in the
   * whole step, for an SFT term averaged over tokens. */
  int64_t n_tokens;
  /* FSDPC_OBJ_INPUT_SEQ_LOGPS */
  uint32_t n_seqs, group_size;
  const double *logps;     /* (n_seqs) policy: sum of log p(label) over completion tokens */
  const double *ref_logps; /* (n_seqs) the same under the reference model, or NULL */
  const int64_t *lengths;  /* (n_seqs) completion tokens of each sequence (> 0) */
  int64_t n_groups;        /* groups in the whole optimizer step, every rank: the mean's divisor */
} fsdpc_obj_batch;

/* One call's output; the host zero-fills it and sizes the arrays. */
typedef struct fsdpc_obj_result {
  uint32_t struct_size;
  /* TOKENS: the step's loss. SEQ_LOGPS: this call's share of it (the host
   * adds the calls of every micro-batch and rank). */
  double loss;
  double token_weight; /* TOKENS, WANT_SEED: d loss / d(-log p) of each target token */
  double *dlogps;      /* SEQ_LOGPS, WANT_SEED: (n_seqs) d loss / d logps[i] */
  /* (n_metrics) WANT_LOSS. TOKENS: the step's values (one call per step,
   * after the all-reduce). SEQ_LOGPS: each metric's sum over this call's
   * groups; the host adds every call and rank and divides by the step's
   * n_groups (so a metric is a mean over the step's groups). The host logs
   * them under metric_name in the log line and metrics.jsonl. */
  double *metrics;
} fsdpc_obj_result;

typedef struct fsdpc_objective_v1 {
  uint32_t struct_size;
  int32_t input;     /* FSDPC_OBJ_INPUT_* */
  int32_t needs_ref; /* SEQ_LOGPS: 1 = ref_logps must be given */
  int32_t (*create)(const fsdpc_objective_init *init, fsdpc_objective **out);
  void (*destroy)(fsdpc_objective *obj);
  /* Metrics, named as they appear in logs and metrics.jsonl, e.g.
   * "rewards/chosen"; n_metrics may be 0 (metric_name then unused). */
  uint32_t (*n_metrics)(const fsdpc_objective *obj);
  const char *(*metric_name)(const fsdpc_objective *obj, uint32_t i);
  int32_t (*compute)(fsdpc_objective *obj, const fsdpc_obj_batch *in, fsdpc_obj_result *out);
} fsdpc_objective_v1;

/* ====================================================================== */
/* Descriptors and the entry point.                                          */
/* ====================================================================== */

typedef struct fsdpc_component_desc {
  uint32_t struct_size;
  int32_t kind;              /* FSDPC_KIND_* */
  const char *name;          /* e.g. "gloo"; unique within its kind */
  const char *version;       /* the component's own version, e.g. "1.0.0" */
  uint32_t iface_version;    /* version of the kind's vtable: 1 */
  int32_t default_score;     /* `auto` picks the highest that supports */
  const char *description;   /* one line */
  const char *capabilities;  /* one line, e.g. "host memory; fp32, bf16" */
  const fsdpc_option_desc *const *options; /* (optional) */
  uint32_t n_options;
  const void *vtable;        /* fsdpc_<kind>_v1 */
} fsdpc_component_desc;

typedef struct fsdpc_plugin_desc {
  uint32_t struct_size;
  uint32_t abi_major, abi_minor; /* FSDPC_PLUGIN_ABI_* the plugin was built with */
  const char *name;
  const fsdpc_component_desc *const *components;
  uint32_t n_components;
} fsdpc_plugin_desc;

/* The one exported symbol. Called once after dlopen (and again by each
 * further host in the process that loads the same file). Return OK and a
 * descriptor that lives as long as the plugin is loaded. The host table is
 * valid for this call; from 1.1 the host hands it to every later call, so
 * the plugin need not keep it. */
typedef int32_t (*fsdpc_plugin_entry_v1_fn)(const fsdpc_host_api *host,
                                            const fsdpc_plugin_desc **out);
#define FSDPC_PLUGIN_ENTRY_V1 "fsdpc_plugin_entry_v1"

FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,
                                                  const fsdpc_plugin_desc **out);

/* Helpers of fsdpc_plugin_entry_check (no <stdio.h> here): append s, or
 * the decimal digits of v, at p; return the new end. */
static inline char *fsdpc_plugin_put_(char *p, const char *s) {
  while (*s)
    *p++ = *s++;
  return p;
}
static inline char *fsdpc_plugin_put_u_(char *p, uint32_t v) {
  char d[10];
  int n = 0;
  do
    d[n++] = (char)('0' + v % 10);
  while (v /= 10);
  while (n)
    *p++ = d[--n];
  return p;
}

/* The host check of every entry point, one policy for every plugin kind:
 * a host table and an out pointer are given, the table is long enough for
 * the 1.0 services, and the host speaks this header's ABI major and at
 * least ABI 1.min_minor (1 for a plugin that takes the host from each call,
 * as the 1.1 rules ask; 0 for one that also works with a 1.0 host).
 * Otherwise the plugin refuses to load: FSDPC_UNSUPPORTED with one line
 * through set_error ("plugin ABI 1.1 or later needed, this fsdpc speaks
 * 1.0: update fsdpc"), or FSDPC_INVALID_USAGE without a table or out.
 * Then *out = desc. Nothing of host is kept. */
static inline int32_t fsdpc_plugin_entry_check(const fsdpc_host_api *host, uint32_t min_minor,
                                               const fsdpc_plugin_desc *desc,
                                               const fsdpc_plugin_desc **out) {
  if (!host || !out || !desc || !FSDPC_HAS_FIELD(host, fsdpc_host_api, device_info))
    return FSDPC_INVALID_USAGE;
  if (host->abi_major == FSDPC_PLUGIN_ABI_MAJOR && host->abi_minor >= min_minor) {
    *out = desc;
    return FSDPC_OK;
  }
  char msg[160], *p = msg;
  p = fsdpc_plugin_put_(p, "plugin ABI ");
  p = fsdpc_plugin_put_u_(p, FSDPC_PLUGIN_ABI_MAJOR);
  p = fsdpc_plugin_put_(p, ".");
  p = fsdpc_plugin_put_u_(p, min_minor);
  p = fsdpc_plugin_put_(p, " or later needed, this fsdpc speaks ");
  p = fsdpc_plugin_put_u_(p, host->abi_major);
  p = fsdpc_plugin_put_(p, ".");
  p = fsdpc_plugin_put_u_(p, host->abi_minor);
  p = fsdpc_plugin_put_(p, host->abi_major == FSDPC_PLUGIN_ABI_MAJOR
                               ? ": update fsdpc"
                               : ": rebuild the plugin against this fsdpc's <fsdpc/plugin.h>");
  *p = '\0';
  if (host->set_error)
    host->set_error(host->host_ctx, FSDPC_UNSUPPORTED, msg);
  return FSDPC_UNSUPPORTED;
}

/* Defines fsdpc_plugin_entry_v1, the plugin's one exported symbol: the
 * host check above, then the descriptor desc (an fsdpc_plugin_desc that
 * lives as long as the plugin). Use once per plugin, after desc:
 *   static const fsdpc_plugin_desc plugin = {...};
 *   FSDPC_PLUGIN_DEFINE(plugin, 1)
 * min_minor: the oldest ABI 1.x host the plugin works with. */
#define FSDPC_PLUGIN_DEFINE(desc, min_minor)                                                       \
  FSDPC_PLUGIN_EXPORT int32_t fsdpc_plugin_entry_v1(const fsdpc_host_api *host,                    \
                                                    const fsdpc_plugin_desc **out) {               \
    return fsdpc_plugin_entry_check(host, (min_minor), &(desc), out);                              \
  }

#ifdef __cplusplus
}
#endif
#endif /* FSDPC_PLUGIN_H */
