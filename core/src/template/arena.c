/* The memory of a render: an arena freed in one go, growable byte buffers,
 * and the budget both draw on (jmem). A budget that refuses an allocation
 * marks itself, so the caller's "out of memory" becomes the budget's own
 * message (jx_oom). */
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

struct jblock {
  struct jblock *next;
  size_t used, cap;
  max_align_t data[];
};

/* Takes n bytes from the budget; 0 on success. */
static int mem_take(jmem *m, size_t n) {
  if (!m)
    return 0;
  if (m->limit && (n > m->limit || m->used > m->limit - n)) {
    m->over = 1;
    return -1;
  }
  m->used += n;
  return 0;
}

static void mem_give(jmem *m, size_t n) {
  if (m)
    m->used = n < m->used ? m->used - n : 0;
}

void *ja_alloc(jarena *a, size_t n) {
  if (n > ((size_t)-1) / 2)
    return NULL;
  n = (n + 15) & ~(size_t)15;
  if (n == 0)
    n = 16;
  struct jblock *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 65536 - sizeof *b ? n : 65536 - sizeof *b;
    if (mem_take(a->mem, sizeof *b + cap))
      return NULL;
    b = malloc(sizeof *b + cap);
    if (!b) {
      mem_give(a->mem, sizeof *b + cap);
      return NULL;
    }
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
  char *p = ja_alloc(a, n + 1);
  if (p) {
    if (n)
      memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

void ja_free(jarena *a) {
  struct jblock *b = a->head;
  while (b) {
    struct jblock *next = b->next;
    mem_give(a->mem, sizeof *b + b->cap);
    free(b);
    b = next;
  }
  a->head = NULL;
}

int jb_put(jbuf *b, const char *s, size_t n) {
  if (b->cap - b->n <= n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n <= n) {
      if (cap > ((size_t)-1) / 4)
        return -1;
      cap *= 2;
    }
    if (mem_take(b->mem, cap - b->cap))
      return -1;
    char *p = realloc(b->p, cap);
    if (!p) {
      mem_give(b->mem, cap - b->cap);
      return -1;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

int jb_putc(jbuf *b, char c) {
  return jb_put(b, &c, 1);
}

void jb_free(jbuf *b) {
  mem_give(b->mem, b->cap);
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}
