/* The launcher: spawn local ranks, forward signals, stop everything on the
 * first death and say which rank died and why. See launch.h. */
#define _GNU_SOURCE /* pipe2, execvpe, sigabbrev_np */
#include "dist/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/env.h"
#include "dist/job.h"
#include "dist/job_token.h"
#include "dist/save_notify.h"
#include "dist/store.h"
#include "dist/store_wire.h"
#include "dist/watchdog.h"
#include "util/log.h"

extern char **environ;

#define MAX_LOCAL 1024

void fsdpc__launch_opts_default(fsdpc_launch_opts *o) {
  memset(o, 0, sizeof *o);
  o->nproc_per_node = 1;
  o->nnodes = 1;
  snprintf(o->master_addr, sizeof o->master_addr, "127.0.0.1");
  o->master_port = FSDPC_DEFAULT_MASTER_PORT;
  o->grace_ms = 25000;
}

/* ---- argument parsing ---------------------------------------------------- */

static fsdpc_status parse_int(const char *flag, const char *v, int lo, int hi, int *out,
                              fsdpc_err *err) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || end == v || *end || x < lo || x > hi)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: '%s' must be an integer in %d..%d", flag,
                       v ? v : "", lo, hi);
  *out = (int)x;
  return FSDPC_OK;
}

fsdpc_status fsdpc__launch_parse_args(int *argc, char **argv, fsdpc_launch_opts *o,
                                      fsdpc_err *err) {
  static const char *flags[] = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr",
                                "--master-port"};
  int w = 1;
  for (int i = 1; i < *argc; i++) {
    const char *a = argv[i], *val = NULL;
    int which = -1;
    for (int f = 0; f < 5 && which < 0; f++) {
      size_t n = strlen(flags[f]);
      if (strncmp(a, flags[f], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
        which = f;
        if (a[n] == '=') {
          val = a + n + 1;
        } else {
          if (i + 1 >= *argc)
            return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s needs a value", flags[f]);
          val = argv[++i];
        }
      }
    }
    if (which < 0) {
      if (strcmp(a, "--") == 0) { /* everything after -- belongs to the caller */
        while (i < *argc)
          argv[w++] = argv[i++];
        break;
      }
      argv[w++] = argv[i];
      continue;
    }
    switch (which) {
    case 0:
      FSDPC_TRY(parse_int(flags[0], val, 1, MAX_LOCAL, &o->nproc_per_node, err));
      break;
    case 1:
      FSDPC_TRY(parse_int(flags[1], val, 1, 100000, &o->nnodes, err));
      break;
    case 2:
      FSDPC_TRY(parse_int(flags[2], val, 0, 99999, &o->node_rank, err));
      break;
    case 3:
      if (!*val || strlen(val) >= sizeof o->master_addr)
        return fsdpc__fail(err, FSDPC_INVALID_USAGE, "--master-addr: '%s' is not a host", val);
      snprintf(o->master_addr, sizeof o->master_addr, "%s", val);
      break;
    case 4:
      FSDPC_TRY(parse_int(flags[4], val, 0, 65535, &o->master_port, err));
      o->port_given = 1;
      break;
    }
  }
  *argc = w;
  argv[w] = NULL;
  if (o->node_rank >= o->nnodes)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "--node-rank %d must be below --nnodes %d",
                       o->node_rank, o->nnodes);
  return FSDPC_OK;
}

/* ---- spawning --------------------------------------------------------------- */

typedef struct child {
  pid_t pid;
  int rank;    /* global */
  int alive;   /* not yet reaped */
  int stopped; /* the signal that stopped it (SIGSTOP, SIGTSTP...), 0 when running */
} child;

/* A rank stopped (SIGSTOP) blocks the others until their collectives time
 * out, and they then blame each other: name it as soon as it stops. Returns
 * 1 when ws was a stop or a continue (the rank is still there). */
static int note_stopped(child *c, int ws) {
  if (WIFSTOPPED(ws)) {
    c->stopped = WSTOPSIG(ws);
    const char *n = sigabbrev_np(c->stopped);
    FSDPC_LOGW("launcher: rank %d (pid %d) was stopped by signal %d (SIG%s): the other ranks wait "
               "for it until their collectives time out (SIGCONT resumes it)",
               c->rank, (int)c->pid, c->stopped, n ? n : "?");
    return 1;
  }
  if (WIFCONTINUED(ws)) {
    if (c->stopped)
      FSDPC_LOGI("launcher: rank %d (pid %d) continues", c->rank, (int)c->pid);
    c->stopped = 0;
    return 1;
  }
  return 0;
}

static const char *sig_name(int sig) {
  const char *n = sigabbrev_np(sig);
  return n ? n : "?";
}

/* A free TCP port on addr; the tiny race until rank 0 binds it is the same
 * one torchrun accepts. */
static fsdpc_status pick_port(int *port, fsdpc_err *err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
      getsockname(fd, (struct sockaddr *)&a, &l)) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "launcher: cannot pick a free port: %s",
                       strerror(e));
  }
  *port = ntohs(a.sin_port);
  close(fd);
  return FSDPC_OK;
}

/* Node 0 of a job whose port was given: refuses to start when the port is
 * already taken on this host (another job?), before any rank exists. */
static fsdpc_status port_free(const char *addr, int port, fsdpc_err *err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return FSDPC_OK; /* cannot tell; the store will say */
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  int r = bind(fd, (struct sockaddr *)&a, sizeof a), e = errno;
  close(fd);
  if (r != 0 && e == EADDRINUSE)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "launcher: port %d on this host is in use (another job's store?): pick "
                       "another --master-port, or leave it out on one node to get a free port "
                       "(store address %s)",
                       port, addr);
  return FSDPC_OK;
}

/* environ without the variables we set, then ours. Freed with free_env. */
static char **make_env(const fsdpc_launch_opts *o, int port, const char *token, int save_fd,
                       int local, int world) {
  static const char *ours[] = {
      "RANK=",        "WORLD_SIZE=", "LOCAL_RANK=",     "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
      "MASTER_PORT=", "GROUP_RANK=", "FSDPC_LAUNCHER=", "FSDPC_NODE_RANK=",  "FSDPC_NNODES=",
      "FSDPC_JOB_TOKEN=", FSDPC_LAUNCHER_FD_ENV "="};
  enum { NOURS = sizeof ours / sizeof ours[0] };
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + NOURS + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (int j = 0; j < NOURS && !skip; j++)
      skip = strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
    if (!skip)
      env[k++] = strdup(environ[i]);
  }
  int vals[] = {o->node_rank * o->nproc_per_node + local, world, local, o->nproc_per_node};
  for (int j = 0; j < NOURS; j++) {
    char buf[512];
    switch (j) {
    case 0:
    case 1:
    case 2:
    case 3:
      snprintf(buf, sizeof buf, "%s%d", ours[j], vals[j]);
      break;
    case 4:
      snprintf(buf, sizeof buf, "%s%s", ours[j], o->master_addr);
      break;
    case 5:
      snprintf(buf, sizeof buf, "%s%d", ours[j], port);
      break;
    case 6:
    case 8:
      snprintf(buf, sizeof buf, "%s%d", ours[j], o->node_rank);
      break;
    case 7:
      snprintf(buf, sizeof buf, "%s1", ours[j]);
      break;
    case 10:
      snprintf(buf, sizeof buf, "%s%s", ours[j], token);
      break;
    case 11:
      snprintf(buf, sizeof buf, "%s%d", ours[j], save_fd);
      break;
    default:
      snprintf(buf, sizeof buf, "%s%d", ours[j], o->nnodes);
      break;
    }
    env[k++] = strdup(buf);
  }
  for (size_t i = 0; i < k; i++)
    if (!env[i])
      return NULL; /* leaks on OOM; the launch fails anyway */
  return env;
}

static void free_env(char **env) {
  if (!env)
    return;
  for (char **p = env; *p; p++)
    free(*p);
  free(env);
}

/* Forks one rank. Exec failures come back through a close-on-exec pipe so
 * that "cannot run X" is reported as such, not as a rank exiting 127. */
static fsdpc_status spawn(const fsdpc_launch_opts *o, char **env, const sigset_t *old_mask,
                          child *c, fsdpc_err *err) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "launcher: pipe: %s", strerror(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(pfd[0]);
    close(pfd[1]);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "launcher: fork for rank %d: %s", c->rank,
                       strerror(e));
  }
  if (pid == 0) {
    /* Only async-signal-safe calls from here to exec. */
    close(pfd[0]);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(1); /* the launcher died before prctl */
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execvpe(o->argv[0], o->argv, env);
    int e = errno;
    ssize_t w = write(pfd[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* also here, so that a signal sent right away reaches the group */
  close(pfd[1]);
  int e = 0;
  ssize_t r;
  do {
    r = read(pfd[0], &e, sizeof e);
  } while (r < 0 && errno == EINTR);
  close(pfd[0]);
  c->pid = pid;
  c->alive = 1;
  if (r == (ssize_t)sizeof e)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "launcher: cannot run '%s' for rank %d: %s",
                       o->argv[0], c->rank, strerror(e));
  return FSDPC_OK;
}

static void signal_all(child *cs, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (cs[i].alive)
      kill(-cs[i].pid, sig);
}

/* Tells ranks on other nodes through the store; best effort, bounded. */
static void post_death(const fsdpc_launch_opts *o, int port, const char *token, int rank,
                       const char *msg, char *root, size_t cap) {
  fsdpc_store *s = NULL;
  fsdpc_err e;
  root[0] = '\0';
  if (fsdpc__store_connect(o->master_addr, port, token, 1000, &s, &e)) {
    /* The store lives in rank 0: on another node, its silence names node 0. */
    if (o->nnodes > 1 && o->node_rank != 0)
      snprintf(root, cap,
               "the store %s:%d (rank 0, node 0 of %d) does not answer: node 0 is lost "
               "or its rank 0 died",
               o->master_addr, port, o->nnodes);
    return;
  }
  int found = 0, culprit = -1;
  char first[1024];
  if (fsdpc__dist_read_failure(s, first, sizeof first, &culprit, &found, 0, &e) == FSDPC_OK &&
      found)
    snprintf(root, cap, "%.500s", first); /* a rank or another node was first */
  else
    fsdpc__dist_post_failure(s, rank, msg, NULL, &e);
  fsdpc__store_close(s);
}

/* How strongly an exit status names the job's culprit: killed by a signal,
 * then an exit code of its own failure, then FSDPC_EXIT_PEER (3: the rank
 * stopped because another failed first). 0: not a failure. */
static int blame_rank(int ws) {
  if (WIFSIGNALED(ws))
    return 3;
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) == 0)
    return 0;
  return WEXITSTATUS(ws) == FSDPC_EXIT_PEER ? 1 : 2;
}

/* How long a failed exit waits for a better culprit before it is acted on:
 * a rank's own error 300 ms (a peer killed by a signal may not be reaped
 * yet); a rank that says another failed first (exit 3) 1 s, or, when the
 * job's first failure is known to blame a local rank that is still running
 * (not stopped), 3 s for it to exit with its own code. */
static int64_t decide_wait_ms(const child *cs, int n, int ws, const fsdpc_launcher_inbox *in) {
  if (blame_rank(ws) != 1)
    return 300;
  if (!in->first[0])
    return 1000;
  for (int i = 0; i < n; i++)
    if (cs[i].rank == in->first_rank && cs[i].alive && !cs[i].stopped)
      return 3000;
  return 300;
}

/* The launcher's line for the failure of local rank c (status ws), with the
 * job's first failure when a rank reported one (or another node posted
 * one: root) that says more than this rank's exit. */
static int describe_failure(const child *cs, int n, const child *c, int ws,
                            const fsdpc_launcher_inbox *in, char *why, size_t cap) {
  char stopped[256] = "";
  for (int i = 0; i < n; i++)
    if (cs[i].alive && cs[i].stopped && &cs[i] != c)
      snprintf(stopped, sizeof stopped, "rank %d (pid %d) is stopped (SIG%s) and never answered; ",
               cs[i].rank, (int)cs[i].pid, sig_name(cs[i].stopped));
  int code;
  if (WIFSIGNALED(ws)) {
    code = 128 + WTERMSIG(ws);
    snprintf(why, cap, "%srank %d (pid %d) died: killed by signal %d (SIG%s)", stopped, c->rank,
             (int)c->pid, WTERMSIG(ws), sig_name(WTERMSIG(ws)));
  } else {
    code = WEXITSTATUS(ws);
    snprintf(why, cap, "%srank %d (pid %d) died: exited with code %d", stopped, c->rank,
             (int)c->pid, code);
  }
  if (in->first[0]) {
    size_t l = strlen(why);
    snprintf(why + l, cap - l, "; first failure: %.700s", in->first);
  } else if (in->own[0] && in->own_rank == c->rank) { /* it failed before the protocol ran */
    size_t l = strlen(why);
    snprintf(why + l, cap - l, "; its error: %.700s", in->own);
  }
  return code;
}

fsdpc_status fsdpc__launch(const fsdpc_launch_opts *o, int *exit_code, fsdpc_err *err) {
  *exit_code = 1;
  if (!o->argv || !o->argv[0])
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "launcher: no command to run for each rank");
  if (o->nproc_per_node < 1 || o->nproc_per_node > MAX_LOCAL || o->nnodes < 1 || o->node_rank < 0 ||
      o->node_rank >= o->nnodes)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "launcher: bad layout: --nproc-per-node %d (1..%d), --nnodes %d, "
                       "--node-rank %d (must be below --nnodes)",
                       o->nproc_per_node, MAX_LOCAL, o->nnodes, o->node_rank);
  int port = o->master_port;
  if (!o->port_given && o->nnodes == 1)
    port = 0; /* two single-node jobs never meet on a default port */
  if (port == 0) {
    if (o->nnodes > 1)
      return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                         "launcher: --nnodes %d needs an explicit --master-port shared by every "
                         "node",
                         o->nnodes);
    FSDPC_TRY(pick_port(&port, err));
  }
  if (o->node_rank == 0 && o->master_port != 0 && (o->port_given || o->nnodes > 1))
    FSDPC_TRY(port_free(o->master_addr, port, err));
  char token[FSDPC_JOB_TOKEN_CAP];
  FSDPC_TRY(fsdpc__job_token_resolve(o->nnodes == 1, o->master_addr, port, token, err));
  int n = o->nproc_per_node, world = n * o->nnodes;
  int grace = o->grace_ms > 0 ? o->grace_ms : 25000;
  /* Ranks say when they write a checkpoint: the grace then waits for it. */
  int save_ch[2] = {-1, -1};
  if (fsdpc__save_channel_open(save_ch) != 0)
    save_ch[0] = save_ch[1] = -1;
  int saving[MAX_LOCAL] = {0}, said_waiting = 0, exit_after_save = 0;
  /* After a rank died the others cannot save (a save is collective): they
   * get a short grace whatever dist.term_grace_s says, a little longer than
   * their watchdogs give themselves to end after a failure (5 s), so that
   * each writes its own last line. */
  int fail_grace = grace < 6000 ? grace : 6000;
  int64_t hard_kill_at = 0;
  child *cs = calloc((size_t)n, sizeof *cs);
  if (!cs)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "launcher: out of memory");

  sigset_t set, old;
  sigemptyset(&set);
  int fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  for (int i = 0; i < 4; i++)
    sigaddset(&set, fwd[i]);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &old);

  fsdpc_status st = FSDPC_OK;
  char why[1024] = "";
  int fail_code = 0, stopping = 0, stop_sig = 0;
  int64_t kill_at = 0;
  FSDPC_LOGI("launcher: node %d/%d starting ranks %d..%d of %d (store %s:%d)", o->node_rank,
             o->nnodes, o->node_rank * n, o->node_rank * n + n - 1, world, o->master_addr, port);
  for (int i = 0; i < n; i++) {
    cs[i].rank = o->node_rank * n + i;
    char **env = make_env(o, port, token, save_ch[1], i, world);
    if (!env) {
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "launcher: out of memory");
    } else {
      st = spawn(o, env, &old, &cs[i], err);
    }
    free_env(env);
    if (st) {
      snprintf(why, sizeof why, "%.900s", err->msg);
      fail_code = 127;
      stopping = 1;
      kill_at = fsdpc__now_ms() + fail_grace;
      signal_all(cs, i + 1, SIGTERM);
      break;
    }
  }

  int alive = 0;
  for (int i = 0; i < n; i++)
    alive += cs[i].alive;
  /* The first failure and when to act on it. A rank that exits with an
   * error may only be reacting to a peer killed by a signal whose exit we
   * have not reaped yet, so a plain exit code waits a moment for a better
   * culprit (a rank that says another failed first, exit 3, longer); a
   * signal death is acted on at once. */
  int cause = -1, cause_status = 0;
  int64_t first_bad = 0;
  fsdpc_launcher_inbox inbox;
  memset(&inbox, 0, sizeof inbox);
  while (alive > 0 || (cause >= 0 && !stopping)) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    siginfo_t si;
    int sig = sigtimedwait(&set, &si, &ts);
    if (sig > 0 && sig != SIGCHLD) {
      signal_all(cs, n, sig);
      if (sig != SIGUSR1 && !stopping) {
        /* The ranks decide: 0 if they saved a checkpoint, else 128 + sig. */
        stopping = 1;
        stop_sig = sig;
        snprintf(why, sizeof why, "launcher: stopped by signal %d (SIG%s)", sig, sig_name(sig));
        kill_at = fsdpc__now_ms() + grace;
      }
    }
    for (int i = 0; i < n; i++) {
      if (!cs[i].alive)
        continue;
      int ws;
      if (waitpid(cs[i].pid, &ws, WNOHANG | WUNTRACED | WCONTINUED) != cs[i].pid)
        continue;
      if (note_stopped(&cs[i], ws))
        continue; /* stopped or continued, not gone */
      cs[i].alive = 0;
      alive--;
      int bad = blame_rank(ws);
      if (bad && WIFSIGNALED(ws))
        FSDPC_LOGI("launcher: rank %d (pid %d) was killed by signal %d (SIG%s)", cs[i].rank,
                   (int)cs[i].pid, WTERMSIG(ws), sig_name(WTERMSIG(ws)));
      else if (bad)
        FSDPC_LOGI("launcher: rank %d (pid %d) exited with code %d", cs[i].rank, (int)cs[i].pid,
                   WEXITSTATUS(ws));
      if (bad && stop_sig && !fail_code)
        fail_code = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
      if (bad && !stopping && (cause < 0 || bad > blame_rank(cause_status))) {
        if (cause < 0)
          first_bad = fsdpc__now_ms();
        cause = i;
        cause_status = ws;
      }
    }
    if (save_ch[0] >= 0)
      fsdpc__save_channel_read(save_ch[0], &inbox, o->node_rank * n, n, saving);
    if (cause >= 0 && !stopping &&
        (WIFSIGNALED(cause_status) || alive == 0 ||
         fsdpc__now_ms() >= first_bad + decide_wait_ms(cs, n, cause_status, &inbox))) {
      fail_code = describe_failure(cs, n, &cs[cause], cause_status, &inbox, why, sizeof why);
      stopping = 1;
      kill_at = fsdpc__now_ms() + fail_grace;
      FSDPC_LOGE("launcher: %s; stopping the other ranks", why);
      char root[512];
      post_death(o, port, token, cs[cause].rank, why, root, sizeof root);
      if (root[0] && !inbox.first[0] && strcmp(root, why) != 0) {
        size_t l = strlen(why);
        snprintf(why + l, sizeof why - l, "; first failure: %s", root);
      }
      signal_all(cs, n, SIGTERM);
      /* a stopped rank cannot act on SIGTERM, and can save nothing */
      for (int i = 0; i < n; i++)
        if (cs[i].alive && cs[i].stopped)
          kill(-cs[i].pid, SIGKILL);
    }
    if (stopping && alive > 0 && fsdpc__now_ms() >= kill_at) {
      /* A save under way gets up to another ten graces, not a SIGKILL. */
      int busy = -1;
      for (int i = 0; i < n && busy < 0; i++)
        if (cs[i].alive && saving[i])
          busy = i;
      if (!hard_kill_at)
        hard_kill_at = kill_at + 10 * (int64_t)grace;
      if (busy >= 0 && fsdpc__now_ms() < hard_kill_at) {
        if (!said_waiting++)
          FSDPC_LOGW("launcher: rank %d is writing a checkpoint: waiting for it beyond the %.1f s "
                     "grace (dist.term_grace_s)",
                     cs[busy].rank, grace / 1000.0);
        kill_at = fsdpc__now_ms() + 100;
      } else if (said_waiting > 0 && !exit_after_save++) {
        /* the save we waited for is done: the ranks now stop and exit */
        kill_at = fsdpc__now_ms() + 3000;
      } else {
        signal_all(cs, n, SIGKILL);
        kill_at = fsdpc__now_ms() + 1000000;
      }
    }
  }
  /* Sweep grandchildren left in the ranks' groups. */
  for (int i = 0; i < n; i++)
    if (cs[i].pid > 0)
      kill(-cs[i].pid, SIGKILL);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  struct timespec zero = {0, 0};
  while (sigtimedwait(&chld, NULL, &zero) > 0) {
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  free(cs);
  if (save_ch[0] >= 0) {
    close(save_ch[0]);
    close(save_ch[1]);
  }

  if (fail_code == 0 && (!stopping || stop_sig)) {
    if (stop_sig)
      FSDPC_LOGI("launcher: stopped by SIG%s; every rank saved and exited 0", sig_name(stop_sig));
    *exit_code = 0;
    return FSDPC_OK;
  }
  *exit_code = fail_code ? fail_code : 1;
  if (st)
    return st; /* err already says why the spawn failed */
  return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "%s", why);
}
