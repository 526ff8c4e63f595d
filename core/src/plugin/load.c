/* Loading one plugin file: dlopen, find the entry point, check the ABI
 * major, call the entry and validate what it returns. Every failure becomes
 * one line that starts with the file's base name, e.g.
 * "libfsdpc-optim-lion.so: ABI 2.0, this fsdpc speaks 1.x". */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/plugin_lib.h"
#include "plugin/registry.h"

/* A plugin built for a later major exports fsdpc_plugin_entry_v<N>: probe a
 * few so that the user hears "ABI N.x" instead of "not a plugin". */
#define MAX_PROBED_MAJOR 9

static int probe_other_major(void *handle) {
  for (int major = 2; major <= MAX_PROBED_MAJOR; major++) {
    char sym[64];
    snprintf(sym, sizeof sym, "fsdpc_plugin_entry_v%d", major);
    if (dlsym(handle, sym))
      return major;
  }
  return 0;
}

/* The start of an ELF header: the identification bytes and e_machine (at
 * the same offset in 32- and 64-bit files). 0 when path is not ELF. */
static int elf_head(const char *path, unsigned char ident[EI_NIDENT], unsigned *machine) {
  unsigned char b[20];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = pread(fd, b, sizeof b, 0);
  close(fd);
  if (n != (ssize_t)sizeof b || memcmp(b, ELFMAG, SELFMAG) != 0)
    return 0;
  memcpy(ident, b, EI_NIDENT);
  /* e_machine is stored in the file's own byte order */
  *machine =
      b[EI_DATA] == ELFDATA2MSB ? (unsigned)b[18] << 8 | b[19] : (unsigned)b[19] << 8 | b[18];
  return 1;
}

static const char *machine_name(unsigned m) {
  switch (m) {
  case EM_X86_64:
    return "x86-64";
  case EM_386:
    return "i386";
  case EM_AARCH64:
    return "aarch64";
  case EM_ARM:
    return "arm";
  case EM_PPC64:
    return "ppc64";
  case EM_RISCV:
    return "riscv";
  case EM_S390:
    return "s390";
  default:
    return "another machine";
  }
}

/* glibc's dlopen skips a file built for another machine and then reports
 * "No such file or directory"; say what is wrong instead. 1 when it was
 * that (the reason is written). */
static int wrong_machine(const char *path, const char *base, char *reason, size_t cap) {
  unsigned char mine[EI_NIDENT], theirs[EI_NIDENT];
  unsigned my_m, their_m;
  if (!elf_head("/proc/self/exe", mine, &my_m) || !elf_head(path, theirs, &their_m))
    return 0;
  if (theirs[EI_CLASS] == mine[EI_CLASS] && theirs[EI_DATA] == mine[EI_DATA] && their_m == my_m)
    return 0;
  snprintf(reason, cap,
           "%s: built for %s (ELF machine %u, %d-bit%s), this fsdpc runs on %s (%d-bit); "
           "rebuild the plugin for this machine",
           base, machine_name(their_m), their_m, theirs[EI_CLASS] == ELFCLASS64 ? 64 : 32,
           theirs[EI_DATA] != mine[EI_DATA] ? ", other byte order" : "", machine_name(my_m),
           mine[EI_CLASS] == ELFCLASS64 ? 64 : 32);
  return 1;
}

fsdpc_status fsdpc__plugin_lib_load(fsdpc_plugin_lib *lib, char *reason, size_t cap) {
  const char *base = lib->basename;
  dlerror();
  /* NODELETE: a plugin stays mapped for the life of the process, even after
   * its registry is gone, so no object or thread of it can outlive its code,
   * and the next registry needs no probe child (probe.c). */
  lib->handle = dlopen(lib->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib->handle) {
    const char *e = dlerror();
    if (wrong_machine(lib->path, base, reason, cap))
      return FSDPC_UNSUPPORTED;
    snprintf(reason, cap, "%s: cannot load: %s", base, e ? e : "unknown dlopen error");
    return FSDPC_SYSTEM_ERROR;
  }
  void *sym = dlsym(lib->handle, FSDPC_PLUGIN_ENTRY_V1);
  if (!sym) {
    int major = probe_other_major(lib->handle);
    if (major) {
      snprintf(reason, cap, "%s: ABI %d.x, this fsdpc speaks %d.x", base, major,
               FSDPC_PLUGIN_ABI_MAJOR);
      return FSDPC_UNSUPPORTED;
    }
    snprintf(reason, cap,
             "%s: no %s symbol (not an fsdpc plugin, or the entry point is not exported "
             "with FSDPC_PLUGIN_EXPORT)",
             base, FSDPC_PLUGIN_ENTRY_V1);
    return FSDPC_INVALID_USAGE;
  }
  fsdpc_plugin_entry_v1_fn entry;
  /* POSIX guarantees that a dlsym result converts to a function pointer. */
  memcpy(&entry, &sym, sizeof entry);

  const fsdpc_plugin_desc *desc = NULL;
  int32_t st = entry(&lib->host, &desc);
  if (st != FSDPC_OK) {
    char msg[1024];
    if (fsdpc__plugin_lib_take_error(lib, NULL, msg, sizeof msg))
      snprintf(reason, cap, "%s: entry point failed: %s", base, msg);
    else
      snprintf(reason, cap, "%s: entry point failed: %s", base, fsdpc_status_str(st));
    return st;
  }
  /* The ABI fields come first so that they can be read before anything else
   * in a descriptor from another major. */
  if (desc && desc->struct_size >= offsetof(fsdpc_plugin_desc, abi_minor) + sizeof(uint32_t) &&
      desc->abi_major != FSDPC_PLUGIN_ABI_MAJOR) {
    snprintf(reason, cap, "%s: ABI %u.%u, this fsdpc speaks %d.x", base, desc->abi_major,
             desc->abi_minor, FSDPC_PLUGIN_ABI_MAJOR);
    return FSDPC_UNSUPPORTED;
  }
  char why[768];
  if (fsdpc__plugin_check_desc(desc, why, sizeof why) != FSDPC_OK) {
    snprintf(reason, cap, "%s: %s", base, why);
    return FSDPC_INVALID_USAGE;
  }
  lib->desc = desc;
  snprintf(lib->log_name, sizeof lib->log_name, "%s", desc->name);
  return FSDPC_OK;
}
