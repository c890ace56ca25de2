// Session::SaveContext / LoadContext and InspectContextFile: a session's
// compressed context to and from the context file (io/context_file.h,
// docs/context-file.md). This file decides what the header holds and what a
// loaded file must match: the model (ModelMetadataHash), the tokenizer (XXH3
// of every piece), the RoPE the keys were rotated with, the head layout.
#include <xxhash.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <type_traits>
#include <variant>

#include "engine/engine_impl.h"
#include "io/context_file.h"
#include "io/gguf.h"
#include "io/mmap_file.h"
#include "io/tokenizer.h"
#include "kernels/quant.h"
#include "kv/cache.h"
#include "kv/compressor.h"
#include "kvtrim/option_table.h"
#include "kv/check.h"
#include "kv/profile.h"
#include "kvtrim/engine.h"
#include "model/config.h"

namespace kvtrim {

namespace {

using nlohmann::json;

// The header's name of the rotation the rows are stored in (kernels/hadamard.h).
constexpr const char* kRotationName = "hadamard-signs-v1";

std::string Hex(uint64_t x) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(x));
  return b;
}

std::string TokenizerHash(const io::Tokenizer& t) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (int id = 0; id < t.vocab_size(); ++id) {
    const std::string& p = t.piece_text(id);
    XXH3_64bits_update(st, p.data(), p.size() + 1);  // the terminating NUL separates pieces
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return Hex(h);
}

// What the keys' rotation depends on: a context made under other RoPE settings is another context.
json RopeJson(const model::ModelConfig& c) {
  return {{"base", c.rope_base}, {"dims", c.rope_dims}, {"scaling", c.rope_scaling}, {"freq_scale", c.rope_freq_scale},
          {"attn_factor", c.rope_attn_factor}, {"orig_ctx", c.rope_orig_ctx}};
}

json IdentityJson(const Engine& e) {
  const auto& id = e.model_id();
  const auto& c = e.impl().config();
  return {{"model", {{"file", id.file}, {"metadata_hash", id.metadata_hash}}},
          {"tokenizer_hash", TokenizerHash(e.impl().tokenizer())},
          {"rope", RopeJson(c)},
          {"n_layer", c.n_layer}, {"n_head_kv", c.n_head_kv}, {"head_dim", c.head_dim}, {"vocab", c.vocab}};
}

json KvJson(const KvOptions& kv) {
  json o = json::object();
  for (const KvOptionSpec& s : KvOptionTable()) o[s.name] = KvOptionValue(s, kv);
  o["params"] = kv.params;
  o["ratio_explicit"] = kv.ratio_explicit;
  o["head_budgets"] = kv.head_budgets;
  return o;
}

Expected<KvOptions> KvFromJson(const json& o) {
  KvOptions kv;
  try {
    for (const KvOptionSpec& s : KvOptionTable()) {
      if (!o.contains(s.name)) continue;
      const std::string v = o.at(s.name).get<std::string>();
      std::visit([&](auto field) {
        using T = std::remove_reference_t<decltype(kv.*field)>;
        if constexpr (std::is_same_v<T, std::string>) kv.*field = v;
        else if constexpr (std::is_same_v<T, double>) kv.*field = std::stod(v);
        else if constexpr (std::is_same_v<T, int>) kv.*field = std::stoi(v);
        else kv.*field = v == "1";
      }, s.field);
    }
    kv.params = o.value("params", std::map<std::string, double>{});
    kv.ratio_explicit = o.value("ratio_explicit", false);
    kv.head_budgets = o.value("head_budgets", -1);
  } catch (const std::exception& ex) {
    return MakeError(std::string("bad KV options in the header: ") + ex.what());
  }
  return kv;
}

// The header's identity against the engine's: the first difference, named.
Status CheckIdentity(const json& have, const json& want) {
  for (const char* key : {"model", "tokenizer_hash", "rope", "n_layer", "n_head_kv", "head_dim", "vocab"})
    if (!have.contains(key) || have.at(key) != want.at(key))
      return MakeError(std::string("it was made with another ") + key + " (" +
                       (have.contains(key) ? have.at(key).dump() : "none") + ", this model's: " + want.at(key).dump() + ")");
  return {};
}

// The header's `rope_map` (absent: never re-based).
Expected<kv::RopeMap> RopeMapFromJson(const json& m, int64_t length) {
  if (!m.contains("rope_map")) return kv::RopeMap();
  const json& a = m.at("rope_map");
  std::vector<kv::RopeMap::Point> pts;
  if (!a.is_array()) return MakeError("its rope_map is not an array");
  for (const json& p : a) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      return MakeError("its rope_map holds a point that is not [token index, position]");
    pts.push_back({p[0].get<double>(), p[1].get<double>()});
  }
  return kv::RopeMap::FromPoints(std::move(pts), length);
}

}  // namespace

std::string Session::ContextBytes() const {
  const auto& c = engine_->impl().config();
  io::ContextImage img;
  img.meta = IdentityJson(*engine_);
  img.meta["format"] = "kvtrim context";
  img.meta["kv"] = KvJson(opts_.kv);
  img.meta["kv_type"] = TypeName(impl_->cache_->type());
  img.meta["kv_rotation"] = impl_->cache_->rotated() ? kRotationName : "none";
  img.meta["logical_length"] = impl_->cache_->logical_length();
  if (!impl_->cache_->rope_map().identity()) {  // re-based (kv/rope_map.h): [token index, RoPE position] points
    json pts = json::array();
    for (const kv::RopeMap::Point& p : impl_->cache_->rope_map().points()) pts.push_back({p.x, p.y});
    img.meta["rope_map"] = pts;
  }
  img.meta["chosen_ratio"] = chosen_ratio_;
  if (!note_.empty()) img.meta["note"] = note_;
  img.tokens.assign(tokens_.begin(), tokens_.end());
  img.logits = logits_;
  img.row_bytes = impl_->cache_->head(0, 0).row_bytes();
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const kv::HeadStore& hs = impl_->cache_->head(l, h);
      io::ContextImage::Head out;
      out.k.assign(hs.key_row(0), hs.key_row(0) + hs.row_bytes() * hs.size());
      out.v.assign(hs.value_row(0), hs.value_row(0) + hs.row_bytes() * hs.size());
      out.pos = hs.positions();
      for (int i = 0; i < hs.size(); ++i) out.logw.push_back(hs.logw(i));
      img.heads.push_back(std::move(out));
    }
  return io::SerializeContext(img);
}

Status Session::SaveContext(const std::string& path) const {
  Status st = io::WriteFileAtomically(path, ContextBytes());
  if (!st.ok()) return MakeError("context file '" + path + "': " + st.message());
  return {};
}

Expected<std::unique_ptr<Session>> Session::LoadContext(const Engine& engine, const std::string& path,
                                                        const SessionOptions& opts) {
  auto f = io::MappedFile::Open(path);
  if (!f.ok()) return MakeError("context file '" + path + "': " + f.error().message);
  return LoadContextBytes(engine, f.value()->data(), f.value()->size(), "context file '" + path + "'", opts);
}

Expected<std::unique_ptr<Session>> Session::LoadContextBytes(const Engine& engine, const uint8_t* data, size_t size,
                                                             const std::string& name, const SessionOptions& opts) {
  auto img = io::ParseContextBytes(data, size);
  auto fail = [&](const std::string& why) { return MakeError(name + ": " + why); };
  if (!img.ok()) return fail(img.error().message);
  const json& m = img->meta;
  const auto& c = engine.impl().config();
  if (Status st = CheckIdentity(m, IdentityJson(engine)); !st.ok()) return fail(st.message());
  auto kv = KvFromJson(m.value("kv", json::object()));
  if (!kv.ok()) return fail(kv.error().message);
  SessionOptions so = opts;
  so.kv = kv.value();
  so.fork_targets.clear();
  auto s = Session::Create(engine, so);
  if (!s.ok()) return fail(s.error().message);
  Session& ses = *s.value();
  const int64_t n = m.value("logical_length", int64_t{-1});
  auto rope_map = RopeMapFromJson(m, n);
  if (!rope_map.ok()) return fail(rope_map.error().message);
  if (n < 0 || n - rope_map->shift() > ses.ctx_ || static_cast<int64_t>(img->tokens.size()) != n)
    return fail("its " + std::to_string(img->tokens.size()) + " tokens (logical length " + std::to_string(n) +
                ", RoPE length " + std::to_string(n - rope_map->shift()) + ") do not fit the context length " +
                std::to_string(ses.ctx_));
  // An empty context (a conversation stored before its first turn) has no logits yet.
  if (static_cast<int>(img->logits.size()) != (n > 0 ? c.vocab : 0) && !(n == 0 && img->logits.empty()))
    return fail("its logits are not of the vocabulary's size");
  if (img->heads.size() != static_cast<size_t>(c.n_layer) * c.n_head_kv) return fail("its head count differs");
  // The entries' type as stored (with --kv-quant-at kept: the kept type, after compression).
  std::string type = m.value("kv_type", std::string("?"));
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto t = kv::ParseKvQuant(type);
  if (!t.ok()) return fail("its entries are of type '" + type + "'");
  // How its rows are rotated (kernels/hadamard.h); files written before the
  // rotation existed have none.
  const std::string rotation = m.value("kv_rotation", std::string("none"));
  if (rotation != "none" && rotation != kRotationName)
    return fail("its entries are rotated by '" + rotation + "', which this build does not know (" + kRotationName + ")");
  const bool bf16 = ses.impl_->cache_->bf16_tiles();  // as Create set it from the options
  ses.impl_->cache_ =
      std::make_unique<kv::KvCache>(c.n_layer, c.n_head_kv, c.head_dim, t.value(), rotation == kRotationName);
  ses.impl_->cache_->set_bf16_tiles(bf16);
  ses.impl_->cache_->set_rope_map(std::move(rope_map.value()));
  if (img->row_bytes != ses.impl_->cache_->head(0, 0).row_bytes()) return fail("its rows are not of the head's size");
  KVTRIM_RETURN_IF_ERROR(ses.CheckTokens(img->tokens.data(), img->tokens.size()));
  for (size_t i = 0; i < img->heads.size(); ++i) {
    const io::ContextImage::Head& h = img->heads[i];
    kv::HeadStore& hs = ses.impl_->cache_->head(static_cast<int>(i) / c.n_head_kv, static_cast<int>(i) % c.n_head_kv);
    hs.Reserve(static_cast<int>(h.pos.size()));
    for (size_t e = 0; e < h.pos.size(); ++e) {
      if (h.pos[e] < 0 || h.pos[e] >= n || !kv::ValidLogw(h.logw[e]))
        return fail("head " + std::to_string(i) + " entry " + std::to_string(e) + " has position " +
                    std::to_string(h.pos[e]) + " or log-weight " + std::to_string(h.logw[e]) + " out of range");
      hs.AppendStored(h.k.data() + e * img->row_bytes, h.v.data() + e * img->row_bytes, h.pos[e], h.logw[e]);
    }
  }
  ses.impl_->cache_->AdvanceLogical(static_cast<int>(n));
  ses.tokens_.assign(img->tokens.begin(), img->tokens.end());
  ses.logits_ = std::move(img->logits);
  ses.chosen_ratio_ = m.value("chosen_ratio", so.kv.ratio);
  if (auto it = m.find("note"); it != m.end()) {
    if (!it->is_string()) return fail("its note is not a string");
    ses.note_ = it->get<std::string>();
  }
  ses.NotePeak();
  return s;
}

std::string ContextIdentity(const Engine& engine, const KvOptions& kv) {
  json j = IdentityJson(engine);
  j["kv"] = KvJson(kv);
  return j.dump();
}

Expected<ContextFileInfo> InspectContextFile(const std::string& path) {
  auto img = io::ReadContextFile(path);
  if (!img.ok()) return img.error();
  ContextFileInfo info;
  info.header = img->meta.dump(2);
  info.tokens = static_cast<int64_t>(img->tokens.size());
  info.row_bytes = img->row_bytes;
  for (const auto& h : img->heads) info.head_entries.push_back(static_cast<int>(h.pos.size()));
  std::error_code ec;
  info.file_bytes = static_cast<size_t>(std::filesystem::file_size(path, ec));
  return info;
}

}  // namespace kvtrim
