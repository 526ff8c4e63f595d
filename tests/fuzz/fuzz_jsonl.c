/* libFuzzer harness for whole dataset files: the JSONL / JSON-array reader
 * (data/jsonl.c), the parse as Python does it (data/jsonl_parse.c) and the
 * conversion of each value (data/prepare_example.c) as text and as chat
 * (ChatML, byte tokenizer). The input is a file's bytes (plain or gzip).
 *
 * Whatever the file holds, reading it ends with a one-line error that names
 * the file, or with values whose conversion either fails with one line that
 * names the file, or gives ids inside the vocabulary, a 0/1 mask and byte
 * offsets inside the rendered text. One input in three runs with a 1 KiB
 * line limit, so that the limit's paths are fuzzed too. ASan / UBSan catch
 * the rest; -rss_limit_mb bounds memory. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/jsonl.h"
#include "data/prepare_internal.h"

#include "fuzz_check.h"

/* configs/templates/chatml.jinja */
static const char CHATML[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

static void check_one_line(const fsdpc_err *err, fsdpc_status st, const char *path) {
  CHECK(st != FSDPC_OK && err->status == st);
  CHECK(strchr(err->msg, '\n') == NULL);
  CHECK(strncmp(err->msg, path, strlen(path)) == 0 || strstr(err->msg, "out of memory"));
}

static void convert(const fsdpc_prep_ctx *c, const char *path, const fsdpc_jsonl_line *l) {
  fsdpc_prep_example ex;
  fsdpc__prep_example(c, path, l, 1, &ex);
  if (ex.st != FSDPC_OK) {
    check_one_line(&ex.err, ex.st, path);
    CHECK(ex.ids == NULL);
  } else {
    CHECK(ex.copies >= 0 && ex.copies <= 1000);
    for (int64_t i = 0; i < ex.n; i++) {
      CHECK(ex.ids[i] >= 0 && ex.ids[i] < FSDPC_BYTE_VOCAB && ex.mask[i] <= 1);
      CHECK(ex.offsets[i][0] <= ex.offsets[i][1] && ex.offsets[i][1] <= ex.text_len);
    }
  }
  fsdpc__prep_example_free(&ex);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fsdpc_tokenizer *tok;
  static fsdpc_chat_template *tmpl;
  fsdpc_err err = {0};
  if (!tok) {
    CHECK(fsdpc__tokenizer_byte_create(&tok, &err) == FSDPC_OK);
    CHECK(fsdpc__chat_template_from_string(CHATML, strlen(CHATML), "chatml", NULL, "<|im_end|>",
                                           &tmpl, &err) == FSDPC_OK);
    fsdpc__chat_template_set_time(tmpl, 1700000000);
  }
  int fd = memfd_create("fuzz.jsonl", MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  fsdpc_prepare_opts o;
  fsdpc__prepare_opts_default(&o);
  fsdpc_jsonl_opts jo = {.max_line_bytes = size % 3 == 0 ? 1024 : 0, .max_input_bytes = 1 << 24};
  fsdpc_prep_ctx text = {.o = &o,
                         .format = FSDPC_FORMAT_TEXT,
                         .tok = tok,
                         .add_bos = 1,
                         .bos = FSDPC_BYTE_BOS,
                         .eos = FSDPC_BYTE_EOS};
  fsdpc_prep_ctx chat = text;
  chat.format = FSDPC_FORMAT_CHAT;
  chat.tmpl = tmpl;
  fsdpc_jsonl *r = NULL;
  fsdpc_status st = fsdpc__jsonl_open(path, &jo, &r, &err);
  fsdpc_jsonl_line lines[64];
  int64_t last_line = 0;
  for (int n = 1; st == FSDPC_OK && n > 0;) {
    st = fsdpc__jsonl_next(r, lines, 64, &n, &err);
    for (int i = 0; st == FSDPC_OK && i < n; i++) {
      CHECK(lines[i].text[lines[i].len] == '\0' && lines[i].line_no > last_line - 1);
      CHECK(lines[i].line_no >= 1 && lines[i].col >= 1);
      CHECK(jo.max_line_bytes == 0 || lines[i].len <= jo.max_line_bytes);
      last_line = lines[i].line_no;
      convert(&text, path, &lines[i]);
      convert(&chat, path, &lines[i]);
    }
  }
  if (st != FSDPC_OK)
    check_one_line(&err, st, path);
  fsdpc__jsonl_close(r);
  close(fd);
  return 0;
}
