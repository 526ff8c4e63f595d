/* Plugin probing in a child process (see probe.h). */
#define _GNU_SOURCE /* sigabbrev_np */
#include "plugin/probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsdpc/plugin.h"
#include "plugin/plugin_lib.h"
#include "util/escape.h"

#define PROBE_DONE 0x5a

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The child: load and run the entry as the host would, then say so. */
static void child_main(const char *path, int wfd) {
  fsdpc_host_device dev = {.device = FSDPC_DEVICE_CPU, .device_index = -1};
  fsdpc_plugin_lib *lib = fsdpc__plugin_lib_new(path, &dev);
  if (lib) {
    char reason[1024];
    (void)fsdpc__plugin_lib_load(lib, reason, sizeof reason);
  }
  unsigned char done = PROBE_DONE;
  ssize_t w = write(wfd, &done, 1);
  (void)w;
  _exit(0);
}

fsdpc_status fsdpc__plugin_probe(const char *path, char *reason, size_t cap) {
  /* Already mapped in this process: an earlier registry loaded it (plugins
   * stay mapped, RTLD_NODELETE in load.c), so its constructors have run
   * here and its entry point returned; a child would learn nothing more.
   * This keeps a process that makes many registries (fsdpc plan over
   * strategies and world sizes, the planner's tests) at one child per file
   * instead of one per registry. dlopen matches the file itself (device and
   * inode), so a file replaced since is probed again. */
  void *loaded = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (loaded) {
    dlclose(loaded);
    return FSDPC_OK;
  }
  const char *slash = strrchr(path, '/');
  char base[300];
  fsdpc__escape_str(base, sizeof base, slash ? slash + 1 : path);
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC))
    return FSDPC_OK; /* cannot probe: the real load decides */
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return FSDPC_OK;
  }
  if (pid == 0) {
    close(pfd[0]);
    /* The plugin's output must not reach the host's stdout (plugins list). */
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0)
      dup2(devnull, STDOUT_FILENO);
    child_main(path, pfd[1]);
  }
  close(pfd[1]);
  unsigned char got = 0;
  int64_t deadline = now_ms() + FSDPC_PLUGIN_PROBE_TIMEOUT_MS;
  int timed_out = 0;
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    int r = poll(&p, 1, (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r > 0) {
      ssize_t n;
      do {
        n = read(pfd[0], &got, 1);
      } while (n < 0 && errno == EINTR);
      break; /* one byte, or EOF: the child ended */
    }
    if (r == 0) {
      timed_out = 1;
      break;
    }
    break;
  }
  close(pfd[0]);
  if (timed_out)
    kill(pid, SIGKILL);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    snprintf(reason, cap, "%s: loading it or its entry point did not finish within %d s (hangs?)",
             base, FSDPC_PLUGIN_PROBE_TIMEOUT_MS / 1000);
    return FSDPC_SYSTEM_ERROR;
  }
  if (got == PROBE_DONE && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
    return FSDPC_OK;
  if (WIFSIGNALED(ws)) {
    int s = WTERMSIG(ws);
    const char *n = sigabbrev_np(s);
    snprintf(reason, cap,
             "%s: crashed while loading or in its entry point (signal %d, SIG%s): a truncated or "
             "broken file",
             base, s, n ? n : "?");
  } else {
    snprintf(reason, cap,
             "%s: its entry point ended the process (exit code %d) instead of returning", base,
             WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
  }
  return FSDPC_SYSTEM_ERROR;
}
