#include "util/err.h"

#include <stdio.h>
#include <string.h>

#define NAME_CASE_(name, value, text)                                          \
  case value:                                                                  \
    return #name;
#define TEXT_CASE_(name, value, text)                                          \
  case value:                                                                  \
    return text;

const char *fsdpc_status_name(fsdpc_status s) {
  switch (s) { FSDPC_STATUS_MAP(NAME_CASE_) }
  return "UNKNOWN_STATUS";
}

const char *fsdpc_status_str(fsdpc_status s) {
  switch (s) { FSDPC_STATUS_MAP(TEXT_CASE_) }
  return "unknown status";
}

const char *fsdpc_version(void) { return FSDPC_VERSION_STRING; }

fsdpc_status fsdpc__vfail(fsdpc_err *err, fsdpc_status status, const char *fmt,
                          va_list ap) {
  if (err) {
    err->status = status;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  return status;
}

fsdpc_status fsdpc__fail(fsdpc_err *err, fsdpc_status status, const char *fmt,
                         ...) {
  va_list ap;
  va_start(ap, fmt);
  fsdpc__vfail(err, status, fmt, ap);
  va_end(ap);
  return status;
}

fsdpc_status fsdpc__err_prefix(fsdpc_err *err, const char *fmt, ...) {
  if (!err) return FSDPC_INTERNAL_ERROR;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* msg = prefix ": " msg, truncated to the buffer. */
  size_t np = strlen(prefix), nm = strnlen(err->msg, sizeof err->msg - 1), cap = sizeof err->msg;
  if (np + 2 >= cap) np = cap - 3;
  if (np + 2 + nm >= cap) nm = cap - 1 - np - 2;
  memmove(err->msg + np + 2, err->msg, nm);
  memcpy(err->msg, prefix, np);
  err->msg[np] = ':';
  err->msg[np + 1] = ' ';
  err->msg[np + 2 + nm] = '\0';
  return err->status;
}

void fsdpc__err_clear(fsdpc_err *err) {
  if (err) {
    err->status = FSDPC_OK;
    err->msg[0] = '\0';
  }
}
