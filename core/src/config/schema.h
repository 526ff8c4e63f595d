/* The config schema: one row per key. Private to core/src/config.
 *
 * Everything about a key lives in its row (schema.c): where it is stored,
 * its type, default, range, allowed values, whether it is required, which
 * Hugging Face config.json field can supply it, whether non-default values
 * are implemented yet, and its help line. The loader, the validator, the dump
 * and the docs generator only walk this table. */
#ifndef FSDPC_CONFIG_SCHEMA_H
#define FSDPC_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

typedef enum fsdpc_cfg_type {
  FSDPC_CFG_BOOL,
  FSDPC_CFG_INT,      /* int64_t */
  FSDPC_CFG_FLOAT,    /* double */
  FSDPC_CFG_STRING,   /* char *, owned */
  FSDPC_CFG_PATH,     /* char *, owned; a file or folder name */
  FSDPC_CFG_ENUM,     /* int, one of the row's enum values */
  FSDPC_CFG_FLOATS,   /* double[list_len], exactly list_len items */
  FSDPC_CFG_STRINGS,  /* fsdpc_strlist */
  FSDPC_CFG_OPTS,     /* fsdpc_opts *: a plugin's free-form options map */
  FSDPC_CFG_OPTS_LIST /* fsdpc_opts_list: a list of such maps (data.datasets) */
} fsdpc_cfg_type;

typedef struct fsdpc_cfg_enum_item {
  const char *name;
  int value;
} fsdpc_cfg_enum_item;

enum {                         /* fsdpc_cfg_key.flags */
       FSDPC_CFG_REQUIRED = 1, /* must be set (model shape keys: unless model.config supplies it) */
       FSDPC_CFG_DERIVED = 2,  /* default computed from other keys; `def` is prose for the docs */
       FSDPC_CFG_HAS_MIN = 4,
       FSDPC_CFG_HAS_MAX = 8,
       FSDPC_CFG_MIN_EXCL = 16, /* value must be > min */
       FSDPC_CFG_MAX_EXCL = 32  /* value must be < max */
};

typedef struct fsdpc_cfg_key {
  const char *path; /* "fsdp.sharding_strategy" */
  fsdpc_cfg_type type;
  size_t offset;   /* of the field in fsdpc_config */
  const char *def; /* default as YAML text (NULL for required keys) */
  double min, max; /* range for INT/FLOAT/FLOATS items, per FSDPC_CFG_HAS_MIN/MAX */
  unsigned flags;  /* FSDPC_CFG_* */
  const fsdpc_cfg_enum_item *enums; /* ENUM: allowed values, NULL-terminated */
  int list_len;                     /* FLOATS: number of items */
  const char *hf;                   /* config.json field that supplies this key, or NULL */
  /* Non-default values this build refuses: NULL = all implemented; "*" = any
   * non-default value; otherwise values separated by '|'. */
  const char *unimpl;
  const char *help; /* one line */
} fsdpc_cfg_key;

const fsdpc_cfg_key *fsdpc__cfg_keys(int *n);
/* Row for an exact path, or NULL. */
const fsdpc_cfg_key *fsdpc__cfg_find(const char *path, int *index);
/* True when some row lives under "path." (a section such as "fsdp.wrap"). */
bool fsdpc__cfg_is_section(const char *path);
/* Fills names with the distinct child names directly under section prefix
 * ("" = top level), for did-you-mean. Returns the count (at most cap). */
int fsdpc__cfg_children(const char *section, const char **names, char (*buf)[64], int cap);

/* Pointer to the field of row k inside c. */
static inline void *fsdpc__cfg_field(const fsdpc_config *c, const fsdpc_cfg_key *k) {
  return (char *)c + k->offset;
}

const char *fsdpc__cfg_type_name(fsdpc_cfg_type t);
const char *fsdpc__cfg_enum_name(const fsdpc_cfg_key *k, int value);

#endif
