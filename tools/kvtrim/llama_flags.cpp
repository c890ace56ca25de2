#include "llama_flags.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace kvtrim::cli {

namespace {

// Flags of llama.cpp with no meaning on a CPU engine that runs the whole
// batch its own way: name -> its value's kind.
enum class Takes { kNothing, kValue, kOnOff };
struct Ignored {
  const char* name;
  Takes takes;
};
constexpr Ignored kIgnored[] = {
    {"-ngl", Takes::kValue},       {"--n-gpu-layers", Takes::kValue}, {"--gpu-layers", Takes::kValue},
    {"-fa", Takes::kOnOff},        {"--flash-attn", Takes::kOnOff},   {"-b", Takes::kValue},
    {"--batch-size", Takes::kValue}, {"-ub", Takes::kValue},          {"--ubatch-size", Takes::kValue},
    {"--mlock", Takes::kNothing},  {"--no-mmap", Takes::kNothing},
};

// The subcommand the arguments choose (the first that is not an option).
const CLI::App* Chosen(const CLI::App& app, const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i)
    if (!argv[i].empty() && argv[i][0] != '-') {
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        if (sub->get_name() == argv[i]) return sub;
      return nullptr;
    }
  return nullptr;
}

// Whether `tok` is an option of `sub` that takes a value (so the next token is that value).
bool TakesValue(const CLI::App* sub, const std::string& tok) {
  if (!sub || tok.size() < 2 || tok[0] != '-' || tok.find('=') != std::string::npos) return false;
  const CLI::Option* o = sub->get_option_no_throw(tok);
  return o && o->get_items_expected_min() > 0;
}

size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

LlamaArgs RewriteLlamaFlags(const CLI::App& app, const std::vector<std::string>& argv) {
  LlamaArgs out;
  const CLI::App* sub = Chosen(app, argv);
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& t = argv[i];
    if (i == 0 || TakesValue(sub, argv[i - 1])) {  // the program, or a value: as it is
      out.args.push_back(t);
      continue;
    }
    const std::string name = t.substr(0, t.find('='));
    if (name == "-ctk" || name == "-ctv") {
      out.args.push_back((name == "-ctk" ? "--cache-type-k" : "--cache-type-v") + t.substr(name.size()));
      continue;
    }
    auto ig = std::find_if(std::begin(kIgnored), std::end(kIgnored), [&](const Ignored& x) { return name == x.name; });
    if (ig == std::end(kIgnored)) {
      out.args.push_back(t);
      continue;
    }
    std::string said = t;
    const bool inline_value = name.size() < t.size();
    const bool next = i + 1 < argv.size();
    if (!inline_value && ig->takes == Takes::kValue && next) said += " " + argv[++i];
    if (!inline_value && ig->takes == Takes::kOnOff && next &&
        (argv[i + 1] == "on" || argv[i + 1] == "off" || argv[i + 1] == "auto"))
      said += " " + argv[++i];
    out.ignored.push_back(said);
  }
  return out;
}

std::string SuggestFlags(CLI::App& app, const std::vector<std::string>& args, const std::string& error) {
  if (error.find("not expected") == std::string::npos) return {};
  const CLI::App* sub = Chosen(app, args);
  if (!sub) return {};
  std::vector<std::string> known;
  for (const CLI::Option* o : sub->get_options()) {
    for (const std::string& s : o->get_snames()) known.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) known.push_back("--" + l);
  }
  std::ostringstream out;
  std::set<std::string> seen;
  std::istringstream words(error.substr(error.find(':') + 1));
  for (std::string w; words >> w;) {
    if (w.size() < 2 || w[0] != '-' || !seen.insert(w).second) continue;
    const std::string name = w.substr(0, w.find('='));
    std::string best;
    size_t best_d = name.size();
    for (const std::string& k : known)
      if (size_t d = Distance(name, k); d < best_d) best_d = d, best = k;
    out << "kvtrim " << sub->get_name() << ": unknown flag " << name;
    if (!best.empty() && best_d <= std::max<size_t>(2, name.size() / 3)) out << "; did you mean " << best << "?";
    out << "\n";
  }
  return out.str();
}

}  // namespace kvtrim::cli
