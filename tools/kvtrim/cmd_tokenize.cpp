// `kvtrim tokenize`: text to token ids and pieces with a model's tokenizer.
// Reads only the GGUF metadata, so vocabulary-only files work too.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "kvtrim/clock.h"
#include "kvtrim/model_file.h"

namespace kvtrim::cli {
namespace {

// tokens / CPU second; std::clock() steps by ~1 us, but a tiny input may
// still read 0: never an inf.
std::string CpuRate(size_t n, double cpu_ms) {
  if (!(cpu_ms > 0)) return "below the CPU clock's resolution";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f tokens/s", n / (cpu_ms * 1e-3));
  return buf;
}

struct TokenizeFlags {
  std::string model = DefaultModelPath();
  std::string text, file;
  bool ids = false, special = false, no_bos = false, json = false, timing = false;
};

// Length of the valid UTF-8 sequence at s[i], 0 when s[i] starts none.
size_t Utf8Seq(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return len;
}

// The bytes of a piece as a quoted-string body: control characters, quote,
// backslash and bytes that are no complete UTF-8 character (a piece may end
// inside one) escaped; everything else as it is.
std::string Escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = Utf8Seq(s, i);
    if (len > 1) {
      out.append(s, i, len);
      i += len;
      continue;
    }
    ++i;
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      default:
        if (len == 0 || c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

int Run(const TokenizeFlags& o) {
  std::string text = o.text;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "kvtrim tokenize: cannot read '%s'\n", o.file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto r = TokenizeFile(o.model, text, !o.no_bos, o.special);
  if (!r.ok()) {
    std::fprintf(stderr, "kvtrim tokenize: %s\n", r.error().message.c_str());
    return 1;
  }
  const std::vector<int>& ids = r.value().ids;
  const std::vector<std::string>& pieces = r.value().pieces;
  if (o.timing) {
    const Tokenized& t = r.value();
    std::fprintf(stderr,
                 "tokenizer: %s\nload %.1f ms wall (GGUF open %.1f, tokenizer build %.1f), %.1f ms cpu; %zu bytes -> "
                 "%zu tokens in %.1f ms wall, %.1f ms cpu (wall: %s; cpu: %s)\n",
                 t.tokenizer.c_str(), t.open_ms + t.build_ms, t.open_ms, t.build_ms, t.load_cpu_ms, text.size(),
                 ids.size(), t.encode_s * 1e3, t.encode_cpu_ms, FormatRate(ids.size(), t.encode_s, "tokens/s").c_str(),
                 CpuRate(ids.size(), t.encode_cpu_ms).c_str());
  }
  if (o.json) {
    nlohmann::json j = {{"ids", ids}, {"pieces", nlohmann::json::array()}};
    // Pieces may end inside a UTF-8 character: replace invalid bytes rather than fail.
    for (const auto& p : pieces) j["pieces"].push_back(p);
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (o.ids) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%d\t'%s'\n", ids[i], Escape(pieces[i]).c_str());
  }
  return 0;
}

}  // namespace

Command AddTokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeFlags>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Tokenize text with a model's tokenizer (vocabulary-only GGUF files work): one line per token, "
                  "id<TAB>'piece', or the ids alone");
  sub->add_option("-m,--model", o->model, "GGUF file (a model or a vocabulary-only file)")->capture_default_str();
  sub->add_option("text", o->text, "Text to tokenize");
  sub->add_option("-f,--file", o->file, "Read the text from this file instead");
  sub->add_flag("--ids", o->ids, "Print only the ids, space-separated on one line");
  sub->add_flag("--json", o->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  sub->add_flag("--special", o->special, "Match control-token texts (<|im_start|>, ...) in the text");
  sub->add_flag("--no-bos", o->no_bos, "Do not prepend BOS (by default it is, where the model asks for one)");
  sub->add_flag("--timing", o->timing, "Print load and tokenize times to stderr");
  sub->callback([sub, o] {
    if (o->text.empty() && o->file.empty() && sub->count("text") == 0)
      throw CLI::ValidationError("tokenize", "give TEXT or -f FILE");
  });
  return {sub, [o] { return Run(*o); }};
}

}  // namespace kvtrim::cli
