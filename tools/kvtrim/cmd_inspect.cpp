// `kvtrim inspect`: architecture, hyperparameters, tokenizer, tensor table.
#include <cstdio>

#include "commands.h"
#include "kvtrim/model_file.h"

namespace kvtrim::cli {

Command AddInspect(CLI::App& app) {
  auto model = std::make_shared<std::string>(DefaultModelPath());
  auto show_meta = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("inspect", "Show a GGUF model's architecture, tokenizer and tensors");
  sub->add_option("model", *model, "GGUF model file")->capture_default_str();
  sub->add_flag("--metadata", *show_meta, "Also list every metadata key");
  auto action = [model, show_meta]() -> int {
    auto text = DescribeModelFile(*model, *show_meta);
    if (!text.ok()) {
      std::fprintf(stderr, "kvtrim inspect: %s\n", text.error().message.c_str());
      return 1;
    }
    std::fputs(text.value().c_str(), stdout);
    return 0;
  };
  return {sub, action};
}

}  // namespace kvtrim::cli
