#include "kv/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "io/gguf.h"

namespace kvtrim {

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <typename T>
  void Pod(const T& x) { Bytes(&x, sizeof(x)); }
  void Str(const std::string& s) {
    Pod(static_cast<uint64_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  void Value(const io::GgufValue& v) {
    Pod(static_cast<uint32_t>(v.type));
    if (auto* u = std::get_if<uint64_t>(&v.v)) Pod(*u);
    else if (auto* i = std::get_if<int64_t>(&v.v)) Pod(*i);
    else if (auto* d = std::get_if<double>(&v.v)) Pod(*d);
    else if (auto* b = std::get_if<bool>(&v.v)) Pod(static_cast<uint8_t>(*b));
    else if (auto* s = std::get_if<std::string>(&v.v)) Str(*s);
    else if (auto* a = std::get_if<io::GgufArray>(&v.v)) {
      Pod(static_cast<uint64_t>(a->size()));
      for (const auto& e : *a) Value(e);
    }
  }
};

// Ranks flat indices by score, highest first, ties to the lower index.
std::vector<int> Ranked(const std::vector<double>& s) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
  return idx;
}

int TopCount(double frac, int total) {
  return std::clamp(static_cast<int>(std::ceil(frac * total - 1e-9)), 1, total);
}

template <typename T>
Expected<T> Get(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return MakeError(std::string("profile: missing field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return MakeError(std::string("profile: field '") + key + "' has the wrong type");
  }
}

}  // namespace

}  // namespace kvtrim

namespace kvtrim::kv {

std::string ModelMetadataHash(const io::GgufFile& f) {
  Fnv h;
  h.Pod(f.version());
  for (const auto& [key, value] : f.metadata()) {
    h.Str(key);
    h.Value(value);
  }
  for (const auto& t : f.tensors()) {
    h.Str(t.name);
    h.Pod(static_cast<uint32_t>(t.type));
    for (uint64_t d : t.shape) h.Pod(d);
    const size_t n = std::min<uint64_t>(64, t.n_bytes);
    if (t.data && n > 0) {
      h.Bytes(t.data, n);
      h.Bytes(t.data + t.n_bytes - n, n);
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h.h));
  return buf;
}

}  // namespace kvtrim::kv

namespace kvtrim {

RetrievalHeads SelectRetrievalHeads(const std::vector<double>& echo, const std::vector<double>& induction, int n_layer,
                                    int n_head, int n_head_kv, double echo_frac, double induction_frac) {
  RetrievalHeads r;
  const int total = n_layer * n_head, group = n_head / std::max(1, n_head_kv);
  r.kv.assign(static_cast<size_t>(n_layer) * n_head_kv, 0);
  if (total <= 0 || static_cast<int>(echo.size()) != total || static_cast<int>(induction.size()) != total) return r;
  std::vector<char> is_ret(total, 0);
  r.n_echo = TopCount(echo_frac, total);
  r.n_induction = TopCount(induction_frac, total);
  const std::vector<int> by_echo = Ranked(echo), by_ind = Ranked(induction);
  for (int i = 0; i < r.n_echo; ++i) is_ret[by_echo[i]] = 1;
  for (int i = 0; i < r.n_induction; ++i) is_ret[by_ind[i]] = 1;
  for (int q = 0; q < total; ++q) {
    if (!is_ret[q]) continue;
    r.query.push_back(q);
    const int l = q / n_head, h = q % n_head;
    r.kv[static_cast<size_t>(l) * n_head_kv + h / group] = 1;
  }
  r.f_ret = static_cast<double>(std::count(r.kv.begin(), r.kv.end(), 1)) / static_cast<double>(r.kv.size());
  return r;
}

double MinReachableRatio(const RetrievalHeads& h, int64_t n, int sinks, int min_window) {
  if (h.kv.empty() || n <= 0) return 1.0;
  const double other = static_cast<double>(std::min<int64_t>(n, sinks + min_window + 1));
  return h.f_ret + (1.0 - h.f_ret) * other / static_cast<double>(n);
}

}  // namespace kvtrim

namespace kvtrim::kv {

nlohmann::json ProfileToJson(const ModelProfile& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, text] : p.extra) j[key] = nlohmann::json::parse(text, nullptr, false);
  j["format"] = "kvtrim-profile";
  j["version"] = p.version;
  j["model"] = {{"file", p.model.file}, {"size", p.model.size}, {"metadata_hash", p.model.metadata_hash}};
  j["n_layer"] = p.n_layer;
  j["n_head"] = p.n_head;
  j["n_head_kv"] = p.n_head_kv;
  j["ctx"] = p.ctx;
  j["probe"] = {{"len", p.probe_len}, {"repeats", p.repeats}, {"seed", p.seed}, {"seconds", p.seconds}};
  j["echo"] = p.echo;
  j["induction"] = p.induction;
  j["echo_frac"] = p.echo_frac;
  j["induction_frac"] = p.induction_frac;
  nlohmann::json q = nlohmann::json::array(), kvh = nlohmann::json::array();
  for (int f : p.heads.query) q.push_back({f / p.n_head, f % p.n_head});
  for (size_t i = 0; i < p.heads.kv.size(); ++i)
    if (p.heads.kv[i]) kvh.push_back({static_cast<int>(i) / p.n_head_kv, static_cast<int>(i) % p.n_head_kv});
  j["retrieval_query_heads"] = q;  // [layer, head]
  j["retrieval_kv_heads"] = kvh;   // [layer, kv head]
  j["f_ret"] = p.heads.f_ret;
  return j;
}

Expected<ModelProfile> ProfileFromJson(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "kvtrim-profile") return MakeError("profile: not a kvtrim profile");
  auto ver = Get<int>(j, "version");
  if (!ver.ok()) return ver.error();
  if (ver.value() != kProfileVersion)
    return MakeError("profile: format version " + std::to_string(ver.value()) + " (this build reads version " +
                     std::to_string(kProfileVersion) + ")");
  ModelProfile p;
  try {
    const auto& m = j.at("model");
    p.model = {m.at("file").get<std::string>(), m.at("size").get<uint64_t>(), m.at("metadata_hash").get<std::string>()};
    p.n_layer = j.at("n_layer").get<int>();
    p.n_head = j.at("n_head").get<int>();
    p.n_head_kv = j.at("n_head_kv").get<int>();
    p.ctx = j.at("ctx").get<int>();
    const auto& pr = j.at("probe");
    p.probe_len = pr.at("len").get<int>();
    p.repeats = pr.at("repeats").get<int>();
    p.seed = pr.at("seed").get<uint64_t>();
    p.seconds = pr.value("seconds", 0.0);
    p.echo = j.at("echo").get<std::vector<double>>();
    p.induction = j.at("induction").get<std::vector<double>>();
    p.echo_frac = j.at("echo_frac").get<double>();
    p.induction_frac = j.at("induction_frac").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return MakeError(std::string("profile: missing or mistyped field (") + e.what() + ")");
  }
  if (p.n_layer <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_layer > 100000 ||
      p.n_head > 100000)
    return MakeError("profile: bad head layout (n_layer " + std::to_string(p.n_layer) + ", n_head " +
                     std::to_string(p.n_head) + ", n_head_kv " + std::to_string(p.n_head_kv) + ")");
  const size_t total = static_cast<size_t>(p.n_layer) * p.n_head;
  if (p.echo.size() != total || p.induction.size() != total)
    return MakeError("profile: " + std::to_string(p.echo.size()) + " echo and " + std::to_string(p.induction.size()) +
                     " induction scores for " + std::to_string(total) + " query heads");
  for (size_t i = 0; i < total; ++i)
    if (!(p.echo[i] >= 0 && p.echo[i] <= 1) || !(p.induction[i] >= 0 && p.induction[i] <= 1))
      return MakeError("profile: score of query head " + std::to_string(i) + " is outside [0, 1]");
  if (!(p.echo_frac > 0 && p.echo_frac <= 1) || !(p.induction_frac > 0 && p.induction_frac <= 1))
    return MakeError("profile: retrieval fractions must be in (0, 1]");
  p.heads = SelectRetrievalHeads(p.echo, p.induction, p.n_layer, p.n_head, p.n_head_kv, p.echo_frac, p.induction_frac);
  static const char* known[] = {"format", "version", "model", "n_layer", "n_head", "n_head_kv", "ctx", "probe",
                                "echo", "induction", "echo_frac", "induction_frac", "retrieval_query_heads",
                                "retrieval_kv_heads", "f_ret"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known)) p.extra[it.key()] = it.value().dump();
  return p;
}

}  // namespace kvtrim::kv

namespace kvtrim {

Status WriteProfile(const std::string& path, const ModelProfile& p) {
  std::ofstream f(path);
  if (!f) return MakeError("cannot write profile '" + path + "'");
  f << kv::ProfileToJson(p).dump(1) << "\n";
  if (!f) return MakeError("error writing profile '" + path + "'");
  return {};
}

Expected<ModelProfile> ReadProfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return MakeError("cannot read profile '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return MakeError("profile '" + path + "' is not valid JSON");
  auto p = kv::ProfileFromJson(j);
  if (!p.ok()) return MakeError("'" + path + "': " + p.error().message);
  return p;
}

Status CheckProfileFor(const ModelProfile& p, const ModelId& id, int n_layer, int n_head, int n_head_kv) {
  if (p.model.size != id.size || p.model.metadata_hash != id.metadata_hash)
    return MakeError("profile is for another model: made from '" + p.model.file + "' (" + std::to_string(p.model.size) +
                     " bytes, hash " + p.model.metadata_hash + "), this is '" + id.file + "' (" +
                     std::to_string(id.size) + " bytes, hash " + id.metadata_hash + ")");
  if (p.n_layer != n_layer || p.n_head != n_head || p.n_head_kv != n_head_kv)
    return MakeError("profile has another head layout than the model");
  return {};
}

}  // namespace kvtrim

namespace kvtrim::kv {

ProbeScorer::ProbeScorer(int n_layer, int n_head_kv, int group, int probe_len)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), group_(group), K_(probe_len) {
  const size_t n = static_cast<size_t>(n_layer) * n_head_kv * group;
  echo_.assign(n, 0.0);
  ind_.assign(n, 0.0);
  count_.assign(n, 0);
}

void ProbeScorer::OnProbs(int layer, int kv_head, int t, int g, const float* p, int n) {
  if (const ProbTile* tile = rows_.Add(t, g, group_, p, n)) OnProbTile(layer, kv_head, *tile);
}

void ProbeScorer::OnProbTile(int layer, int kv_head, const ProbTile& tile) {
  if (K_ <= 0 || layer < 0 || layer >= n_layer_) return;
  for (int t = tile.t0; t < tile.t1; ++t) {
    const int i = pos0_ + t;
    if (i < 1 + K_) continue;  // repeats 2.. only
    const int j = i - K_;
    if (j + 1 >= tile.Visible(t)) continue;
    const bool echo_here = j >= tile.j0 && j < tile.j1, ind_here = j + 1 >= tile.j0 && j + 1 < tile.j1;
    if (!echo_here && !ind_here) continue;
    for (int g = 0; g < tile.G; ++g) {
      const size_t q = (static_cast<size_t>(layer) * n_head_kv_ + kv_head) * group_ + g;
      const float* p = tile.Row(t, g);
      if (echo_here) {
        echo_[q] += p[j - tile.j0];
        ++count_[q];
      }
      if (ind_here) ind_[q] += p[j + 1 - tile.j0];
    }
  }
}

std::vector<double> ProbeScorer::echo() const {
  std::vector<double> r(echo_.size());
  for (size_t q = 0; q < r.size(); ++q) r[q] = count_[q] ? echo_[q] / static_cast<double>(count_[q]) : 0.0;
  return r;
}

std::vector<double> ProbeScorer::induction() const {
  std::vector<double> r(ind_.size());
  for (size_t q = 0; q < r.size(); ++q) r[q] = count_[q] ? ind_[q] / static_cast<double>(count_[q]) : 0.0;
  return r;
}

}  // namespace kvtrim::kv
