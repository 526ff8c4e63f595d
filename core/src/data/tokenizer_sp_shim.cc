// libsentencepiece behind an extern "C" face (tokenizer_sp_shim.h). The
// only C++ in the tokenizer: every entry catches every exception, and
// failures come back as -1 with a message.
#include "data/tokenizer_sp_shim.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

struct fsdpc_spm {
  sentencepiece::SentencePieceProcessor sp;
};

static void set_msg(char *msg, size_t cap, const char *what, const char *detail) {
  if (cap)
    std::snprintf(msg, cap, "%s%s%s", what, detail && *detail ? ": " : "", detail ? detail : "");
}

extern "C" int fsdpc__spm_load(const char *data, size_t len, fsdpc_spm **out, char *msg,
                               size_t cap) {
  *out = nullptr;
  fsdpc_spm *m = nullptr;
  try {
    m = new fsdpc_spm();
    auto st = m->sp.LoadFromSerializedProto(absl::string_view(data, len));
    if (!st.ok()) {
      set_msg(msg, cap, "not a SentencePiece model", st.ToString().c_str());
      delete m;
      return -1;
    }
    *out = m;
    return 0;
  } catch (const std::exception &e) {
    set_msg(msg, cap, "SentencePiece failed", e.what());
  } catch (...) {
    set_msg(msg, cap, "SentencePiece failed", "unknown exception");
  }
  delete m;
  return -1;
}

extern "C" void fsdpc__spm_free(fsdpc_spm *m) {
  try {
    delete m;
  } catch (...) {
  }
}

#define GUARD(expr, fallback)                                                                      \
  do {                                                                                             \
    try {                                                                                          \
      return (expr);                                                                               \
    } catch (...) {                                                                                \
      return (fallback);                                                                           \
    }                                                                                              \
  } while (0)

extern "C" int32_t fsdpc__spm_size(const fsdpc_spm *m) {
  GUARD(m->sp.GetPieceSize(), 0);
}
extern "C" int32_t fsdpc__spm_bos(const fsdpc_spm *m) {
  GUARD(m->sp.bos_id(), -1);
}
extern "C" int32_t fsdpc__spm_eos(const fsdpc_spm *m) {
  GUARD(m->sp.eos_id(), -1);
}
extern "C" int32_t fsdpc__spm_pad(const fsdpc_spm *m) {
  GUARD(m->sp.pad_id(), -1);
}
extern "C" int32_t fsdpc__spm_unk(const fsdpc_spm *m) {
  GUARD(m->sp.unk_id(), -1);
}

extern "C" int32_t fsdpc__spm_piece_id(const fsdpc_spm *m, const char *piece) {
  try {
    int id = m->sp.PieceToId(piece);
    // PieceToId answers unk for an unknown piece: check it round-trips.
    return id >= 0 && m->sp.IdToPiece(id) == piece ? id : -1;
  } catch (...) {
    return -1;
  }
}

extern "C" const char *fsdpc__spm_id_piece(const fsdpc_spm *m, int32_t id) {
  try {
    if (id < 0 || id >= m->sp.GetPieceSize())
      return nullptr;
    return m->sp.IdToPiece(id).c_str();
  } catch (...) {
    return nullptr;
  }
}

extern "C" int fsdpc__spm_is_control(const fsdpc_spm *m, int32_t id) {
  GUARD(id >= 0 && id < m->sp.GetPieceSize() && (m->sp.IsControl(id) || m->sp.IsUnknown(id)), 0);
}

extern "C" int fsdpc__spm_encode(const fsdpc_spm *m, const char *text, size_t len, int32_t **ids,
                                 size_t (**spans)[2], int64_t *n, char *msg, size_t cap) {
  *ids = nullptr;
  *spans = nullptr;
  *n = 0;
  try {
    sentencepiece::ImmutableSentencePieceText spt;
    auto st = m->sp.Encode(absl::string_view(text, len), spt.mutable_proto());
    if (!st.ok()) {
      set_msg(msg, cap, "SentencePiece encode failed", st.ToString().c_str());
      return -1;
    }
    size_t k = spt.pieces_size();
    int32_t *i = static_cast<int32_t *>(std::malloc((k ? k : 1) * sizeof *i));
    size_t(*s)[2] = static_cast<size_t(*)[2]>(std::malloc((k ? k : 1) * sizeof *s));
    if (!i || !s) {
      std::free(i);
      std::free(s);
      set_msg(msg, cap, "SentencePiece encode failed", "out of memory");
      return -1;
    }
    for (size_t j = 0; j < k; j++) {
      auto p = spt.pieces(static_cast<int>(j));
      i[j] = static_cast<int32_t>(p.id());
      s[j][0] = p.begin();
      s[j][1] = p.end();
    }
    *ids = i;
    *spans = s;
    *n = static_cast<int64_t>(k);
    return 0;
  } catch (const std::exception &e) {
    set_msg(msg, cap, "SentencePiece encode failed", e.what());
  } catch (...) {
    set_msg(msg, cap, "SentencePiece encode failed", "unknown exception");
  }
  return -1;
}

extern "C" int fsdpc__spm_decode(const fsdpc_spm *m, const int32_t *ids, int64_t n, char **out,
                                 size_t *len, char *msg, size_t cap) {
  *out = nullptr;
  *len = 0;
  try {
    std::vector<int> v(ids, ids + n);
    std::string text;
    auto st = m->sp.Decode(v, &text);
    if (!st.ok()) {
      set_msg(msg, cap, "SentencePiece decode failed", st.ToString().c_str());
      return -1;
    }
    char *o = static_cast<char *>(std::malloc(text.size() + 1));
    if (!o) {
      set_msg(msg, cap, "SentencePiece decode failed", "out of memory");
      return -1;
    }
    std::memcpy(o, text.data(), text.size());
    o[text.size()] = '\0';
    *out = o;
    *len = text.size();
    return 0;
  } catch (const std::exception &e) {
    set_msg(msg, cap, "SentencePiece decode failed", e.what());
  } catch (...) {
    set_msg(msg, cap, "SentencePiece decode failed", "unknown exception");
  }
  return -1;
}
