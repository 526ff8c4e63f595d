/* Escaping untrusted strings for the terminal. See escape.h. */
#include "util/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid, printable UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const uint8_t *p, size_t n) {
  size_t len;
  uint32_t cp;
  if (p[0] < 0xc2)
    return 0;
  if (p[0] < 0xe0) {
    len = 2;
    cp = p[0] & 0x1f;
  } else if (p[0] < 0xf0) {
    len = 3;
    cp = p[0] & 0x0f;
  } else if (p[0] < 0xf5) {
    len = 4;
    cp = p[0] & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  if (cp >= 0x80 && cp <= 0x9f)
    return 0; /* C1 controls: 0x9b is CSI on some terminals */
  return len;
}

char *fsdpc__escape(char *dst, size_t cap, const char *src, size_t len) {
  if (cap == 0)
    return dst;
  const uint8_t *p = (const uint8_t *)(src ? src : "");
  if (!src)
    len = 0;
  size_t o = 0, i = 0;
  while (i < len) {
    char tmp[8];
    size_t tl, adv = 1;
    uint8_t c = p[i];
    if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
      tmp[0] = '\\';
      tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
      tl = 2;
    } else if (c >= 0x20 && c < 0x7f) {
      tmp[0] = (char)c;
      tl = 1;
    } else if (c >= 0x80 && (adv = utf8_len(p + i, len - i)) > 0) {
      memcpy(tmp, p + i, adv);
      tl = adv;
    } else {
      snprintf(tmp, sizeof tmp, "\\x%02x", c);
      tl = 4;
      adv = 1;
    }
    if (o + tl + 4 > cap) { /* room for "..." and the NUL */
      if (o + 4 <= cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
      }
      break;
    }
    memcpy(dst + o, tmp, tl);
    o += tl;
    i += adv;
  }
  dst[o < cap ? o : cap - 1] = '\0';
  return dst;
}

char *fsdpc__escape_str(char *dst, size_t cap, const char *src) {
  return fsdpc__escape(dst, cap, src, src ? strlen(src) : 0);
}
