// The gloo collectives plugin: descriptor, host services, errors, and the
// communicator life cycle (init over the fsdpc store, split, destroy).
// Collectives live in gloo_ops.cc.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "gloo_comm.h"

namespace fsdpc_gloo {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

int32_t fail(const fsdpc_host_api *h, int32_t st, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++) // one line, whatever Gloo put in what()
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  if (h && FSDPC_HAS_FIELD(h, fsdpc_host_api, set_error) && h->set_error)
    h->set_error(h->host_ctx, st, msg);
  return st;
}

std::string describe(const char *op, const fsdpc_op_info *info) {
  std::string s = op;
  bool has = info && FSDPC_HAS_FIELD(info, fsdpc_op_info, seq);
  if (!has)
    return s;
  s += " (";
  if (info->unit)
    s += std::string("unit ") + info->unit + ", ";
  s += "seq " + std::to_string(info->seq) + ")";
  return s;
}

std::string broken_of(fsdpc_comm *c) {
  std::lock_guard<std::mutex> g(c->mu);
  return c->broken;
}

void set_broken(fsdpc_comm *c, const std::string &why) {
  std::lock_guard<std::mutex> g(c->mu);
  if (c->broken.empty())
    c->broken = why;
}

int64_t op_timeout_ms(const fsdpc_comm *c, const fsdpc_op_info *info) {
  if (info && FSDPC_HAS_FIELD(info, fsdpc_op_info, timeout_ms) && info->timeout_ms > 0)
    return info->timeout_ms;
  return c->timeout_ms;
}

static std::string seconds(int64_t ms) {
  char b[32];
  if (ms % 1000 == 0)
    snprintf(b, sizeof b, "%lld s", (long long)(ms / 1000));
  else
    snprintf(b, sizeof b, "%.1f s", (double)ms / 1000.0);
  return b;
}

static std::string first_line(const char *s) {
  std::string m = s;
  size_t nl = m.find('\n');
  return nl == std::string::npos ? m : m.substr(0, nl);
}

int32_t guard_exception(fsdpc_comm *c, const char *op, const fsdpc_op_info *info,
                        int64_t timeout_ms, int64_t elapsed_ms) {
  std::string what = describe(op, info);
  try {
    throw;
  } catch (const UsageError &e) {
    return fail(host_of(c), e.status, "gloo: %s: %s", what.c_str(), e.what());
  } catch (const StoreError &e) {
    if (c)
      set_broken(c, e.what());
    return fail(host_of(c), e.status, "gloo: %s: %s", what.c_str(), e.what());
  } catch (const gloo::IoException &e) {
    std::string m = first_line(e.what());
    bool timed_out = m.find("Timed out") != std::string::npos ||
                     m.find("timeout") != std::string::npos || elapsed_ms >= timeout_ms * 9 / 10;
    if (timed_out) {
      if (c)
        set_broken(c, what + " timed out");
      return fail(host_of(c), FSDPC_TIMEOUT,
                  "gloo: %s timed out after %s: a rank never reached it or died", what.c_str(),
                  seconds(timeout_ms).c_str());
    }
    if (c)
      set_broken(c, what + " lost a peer");
    return fail(host_of(c), FSDPC_SYSTEM_ERROR,
                "gloo: %s failed: a peer rank died or closed its connection (%s)", what.c_str(),
                m.c_str());
  } catch (const gloo::EnforceNotMet &e) {
    return fail(host_of(c), FSDPC_INTERNAL_ERROR, "gloo: %s: Gloo check failed: %s", what.c_str(),
                first_line(e.what()).c_str());
  } catch (const std::bad_alloc &) {
    return fail(host_of(c), FSDPC_SYSTEM_ERROR, "gloo: %s: out of host memory", what.c_str());
  } catch (const std::exception &e) {
    return fail(host_of(c), FSDPC_SYSTEM_ERROR, "gloo: %s: %s", what.c_str(),
                first_line(e.what()).c_str());
  } catch (...) {
    return fail(host_of(c), FSDPC_INTERNAL_ERROR, "gloo: %s: unknown C++ exception", what.c_str());
  }
}

// ---- the fsdpc store seen as a Gloo store --------------------------------

class StoreAdapter : public gloo::rendezvous::Store {
public:
  StoreAdapter(const fsdpc_store_v1 *s, std::string prefix, int64_t timeout_ms)
      : s_(s), prefix_(std::move(prefix)), timeout_ms_(timeout_ms) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    std::string k = prefix_ + key;
    int32_t st = s_->set(s_->ctx, k.c_str(), data.data(), data.size());
    if (st != FSDPC_OK)
      throw StoreError(st, "store set of '" + k + "' failed (store gone?)");
  }

  std::vector<char> get(const std::string &key) override {
    std::string k = prefix_ + key;
    std::vector<char> buf(4096);
    for (;;) {
      uint64_t len = 0;
      check(s_->get(s_->ctx, k.c_str(), buf.data(), buf.size(), &len, timeout_ms_), k, timeout_ms_);
      if (len <= buf.size()) {
        buf.resize(len);
        return buf;
      }
      buf.resize(len);
    }
  }

  void wait(const std::vector<std::string> &keys) override {
    wait(keys, std::chrono::milliseconds(timeout_ms_));
  }

  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override {
    int64_t deadline = now_ms() + t.count();
    for (const auto &key : keys) {
      std::string k = prefix_ + key;
      int64_t left = std::max<int64_t>(1, deadline - now_ms());
      uint64_t len = 0;
      check(s_->get(s_->ctx, k.c_str(), nullptr, 0, &len, left), k, t.count());
    }
  }

private:
  static void check(int32_t st, const std::string &k, int64_t t) {
    if (st == FSDPC_OK)
      return;
    if (st == FSDPC_TIMEOUT)
      throw StoreError(st, "rendezvous key '" + k + "' did not appear within " + seconds(t) +
                               ": a rank did not start or died");
    throw StoreError(st, "store get of '" + k + "' failed (store gone?)");
  }

  const fsdpc_store_v1 *s_;
  std::string prefix_;
  int64_t timeout_ms_;
};

// Connects ctx over store keys under prefix.
static void connect(fsdpc_comm *c, const std::string &prefix) {
  c->ctx->setTimeout(std::chrono::milliseconds(c->timeout_ms));
  StoreAdapter store(c->store, prefix, c->timeout_ms);
  c->ctx->connectFullMesh(store, c->dev);
  // A rank may finish connecting before its peers have; without this
  // barrier it could return, destroy the comm and close sockets that a
  // slower peer is still handshaking on.
  if (c->ctx->size > 1) {
    gloo::BarrierOptions o(c->ctx);
    o.setTag(c->tag++);
    o.setTimeout(std::chrono::milliseconds(c->timeout_ms));
    gloo::barrier(o);
  }
}

// ---- options -----------------------------------------------------------------

static const fsdpc_option_desc opt_iface = {
    sizeof(fsdpc_option_desc),
    "iface",
    FSDPC_OPT_STRING,
    "",
    1,
    0,
    "network interface for Gloo's TCP transport, e.g. eth0 (default: the one that reaches "
    "MASTER_ADDR)"};
static const fsdpc_option_desc opt_hostname = {
    sizeof(fsdpc_option_desc),
    "hostname",
    FSDPC_OPT_STRING,
    "",
    1,
    0,
    "address or host name to bind Gloo's TCP transport to (overrides iface)"};
static const fsdpc_option_desc *const g_options[] = {&opt_iface, &opt_hostname};

static std::string opt_string(const fsdpc_host_api *h, const fsdpc_opts *opts, const char *key) {
  char buf[256] = "";
  if (opts && h && FSDPC_HAS_FIELD(h, fsdpc_host_api, opt_get) && h->opt_get &&
      h->opt_get(h->host_ctx, opts, key, FSDPC_OPT_STRING, buf, sizeof buf) == FSDPC_OK)
    return buf;
  return "";
}

// The local address the kernel would use to reach MASTER_ADDR (a UDP
// connect sends nothing), so that peers on other nodes can reach us.
static std::string local_addr_towards_master() {
  const char *m = getenv("MASTER_ADDR");
  std::string fallback = "127.0.0.1";
  if (!m || !*m)
    return fallback;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *ai = nullptr;
  if (getaddrinfo(m, "9", &hints, &ai) != 0 || !ai)
    return fallback;
  std::string out = fallback;
  int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in me{};
  socklen_t l = sizeof me;
  if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
      getsockname(fd, (sockaddr *)&me, &l) == 0) {
    char b[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &me.sin_addr, b, sizeof b))
      out = b;
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(ai);
  return out;
}

// ---- life cycle ------------------------------------------------------------------

static int32_t comm_init(const fsdpc_comm_init *in, fsdpc_comm **out) {
  const fsdpc_host_api *h = in && FSDPC_HAS_FIELD(in, fsdpc_comm_init, host) ? in->host : nullptr;
  if (!out)
    return fail(h, FSDPC_INVALID_USAGE, "gloo: init: out is NULL");
  *out = nullptr;
  if (!in || !FSDPC_HAS_FIELD(in, fsdpc_comm_init, timeout_ms) || !in->store || !in->store->set ||
      !in->store->get)
    return fail(h, FSDPC_INVALID_USAGE, "gloo: init needs a store (fsdpc_comm_init too short?)");
  if (in->world_size < 1 || in->rank < 0 || in->rank >= in->world_size)
    return fail(h, FSDPC_INVALID_USAGE, "gloo: init: rank %d is outside world size %d", in->rank,
                in->world_size);
  auto *c = new (std::nothrow) fsdpc_comm();
  if (!c)
    return fail(h, FSDPC_SYSTEM_ERROR, "gloo: init: out of memory");
  c->host = h;
  c->store = in->store;
  c->prefix = std::string(in->store_prefix ? in->store_prefix : "fsdpc/") + "gloo/";
  c->timeout_ms = in->timeout_ms > 0 ? in->timeout_ms : 300000;
  std::string iface = opt_string(h, in->opts, "iface"),
              hostname = opt_string(h, in->opts, "hostname");
  int32_t st = guarded(c, "init", nullptr, [&](int64_t) {
    gloo::transport::tcp::attr attr;
    if (!hostname.empty())
      attr.hostname = hostname;
    else if (!iface.empty())
      attr.iface = iface;
    else
      attr.hostname = local_addr_towards_master();
    c->dev = gloo::transport::tcp::CreateDevice(attr);
    c->ctx = std::make_shared<gloo::rendezvous::Context>(in->rank, in->world_size);
    connect(c, c->prefix + "world/");
  });
  if (st != FSDPC_OK) {
    delete c;
    return st;
  }
  *out = c;
  return FSDPC_OK;
}

static int32_t comm_split(fsdpc_comm *parent, int32_t color, int32_t key, fsdpc_comm **out) {
  if (!out)
    return fail(host_of(parent), FSDPC_INVALID_USAGE, "gloo: split: out is NULL");
  *out = nullptr;
  fsdpc_comm *child = nullptr;
  int32_t st = guarded(parent, "split", nullptr, [&](int64_t t) {
    int n = parent->ctx->size;
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * (size_t)n);
    raw_allgather(parent, mine, all.data(), sizeof mine, t);
    uint64_t id = parent->n_splits++;
    if (color < 0)
      return; // no color: this rank joins no sub-communicator
    std::vector<int> members;
    for (int r = 0; r < n; r++)
      if (all[2 * r] == color)
        members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    int me = (int)(std::find(members.begin(), members.end(), parent->ctx->rank) - members.begin());
    child = new fsdpc_comm();
    child->host = parent->host;
    child->dev = parent->dev;
    child->store = parent->store;
    child->timeout_ms = parent->timeout_ms;
    child->prefix =
        parent->prefix + "split" + std::to_string(id) + "/c" + std::to_string(color) + "/";
    child->ctx = std::make_shared<gloo::rendezvous::Context>(me, (int)members.size());
    connect(child, child->prefix);
  });
  if (st != FSDPC_OK) {
    delete child;
    return st;
  }
  *out = child;
  return FSDPC_OK;
}

static void comm_destroy(fsdpc_comm *c) {
  try {
    delete c;
  } catch (...) {
    // Destructors of Gloo pairs may throw on a broken connection; the comm
    // is gone either way.
  }
}

// The watchdog's abort, from its own thread while an op may be running:
// every later call fails at once. When no op is running the connections
// are closed now, so that peers waiting on this rank fail at once. An op
// that is running keeps them: Gloo's Pair::close() takes a socket out of
// its event loop, and the op would then miss the end of stream that a
// failed peer's exit sends and wait for its timeout instead. This rank's
// own exit closes them soon after.
static int32_t comm_abort(fsdpc_comm *c, const char *reason) {
  if (!c)
    return fail(nullptr, FSDPC_INVALID_USAGE, "gloo: abort of a NULL communicator");
  set_broken(c, std::string("aborted: ") + (reason ? reason : "(no reason given)"));
  if (c->in_op.load() || !c->ctx)
    return FSDPC_OK;
  try {
    c->ctx->closeConnections();
  } catch (...) {
    // a pair that is already broken may throw; it is closed either way
  }
  return FSDPC_OK;
}

static int32_t comm_rank(const fsdpc_comm *c) { return c && c->ctx ? c->ctx->rank : -1; }
static int32_t comm_size(const fsdpc_comm *c) { return c && c->ctx ? c->ctx->size : -1; }

static int32_t supports(const fsdpc_situation *s) {
  if (s && FSDPC_HAS_FIELD(s, fsdpc_situation, device) && s->device != FSDPC_DEVICE_CPU)
    return fail(FSDPC_HAS_FIELD(s, fsdpc_situation, host) ? s->host : nullptr, FSDPC_UNSUPPORTED,
                "gloo: works on host memory only (device is not CPU)");
  return FSDPC_OK;
}

} // namespace fsdpc_gloo

using namespace fsdpc_gloo;

static const fsdpc_collectives_v1 g_vtable = {
    /* .struct_size    = */ sizeof(fsdpc_collectives_v1),
    /* .memory         = */ FSDPC_COMM_MEM_HOST,
    /* .supports       = */ supports,
    /* .init           = */ comm_init,
    /* .split          = */ comm_split,
    /* .destroy        = */ comm_destroy,
    /* .rank           = */ comm_rank,
    /* .size           = */ comm_size,
    /* .all_gather     = */ all_gather,
    /* .reduce_scatter = */ reduce_scatter,
    /* .all_reduce     = */ all_reduce,
    /* .broadcast      = */ broadcast,
    /* .barrier        = */ barrier,
    /* .group_start    = */ nullptr,
    /* .group_end      = */ nullptr,
    /* .abort          = */ comm_abort,
    /* .poll_error     = */ nullptr,
};

static const fsdpc_component_desc g_component = {
    /* .struct_size    = */ sizeof(fsdpc_component_desc),
    /* .kind           = */ FSDPC_KIND_COLLECTIVES,
    /* .name           = */ "gloo",
    /* .version        = */ "1.0.0",
    /* .iface_version  = */ 1,
    /* .default_score  = */ 10,
    /* .description    = */ "CPU collectives over Gloo's TCP transport",
    /* .capabilities   = */
    "host memory; fp32, bf16 (gather/broadcast raw, reductions via fp32 "
    "staging), f64 all-reduce; sub-groups; timeouts; abort",
    /* .options        = */ g_options,
    /* .n_options      = */ sizeof g_options / sizeof g_options[0],
    /* .vtable         = */ &g_vtable,
};

static const fsdpc_component_desc *const g_components[] = {&g_component};

static const fsdpc_plugin_desc g_plugin = {
    /* .struct_size  = */ sizeof(fsdpc_plugin_desc),
    /* .abi_major    = */ FSDPC_PLUGIN_ABI_MAJOR,
    /* .abi_minor    = */ FSDPC_PLUGIN_ABI_MINOR,
    /* .name         = */ "gloo",
    /* .components   = */ g_components,
    /* .n_components = */ 1,
};

FSDPC_PLUGIN_DEFINE(g_plugin, 1)
