// glacier_tokenize: prints the token ids a GGUF model's vocabulary gives for one text, to check
// prompts and compare with other tools (same ids as llama-tokenize --ids).
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace {

const char* const kUsage =
    "usage: glacier_tokenize --model MODEL.gguf [--no-bos] [--parse-special] [--] TEXT\n"
    "\n"
    "Prints the token ids of TEXT, space-separated on one line.\n"
    "  --model PATH       GGUF file whose tokenizer.ggml.* vocabulary is used\n"
    "  --no-bos           do not add BOS/EOS (add_special = false)\n"
    "  --parse-special    special-token texts such as \"<s>\" in TEXT become their ids\n"
    "  --help             print this help\n";

struct Options {
  std::string model;
  std::string text;
  bool add_special = true;
  bool parse_special = false;
  bool help = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  bool have_text = false;
  bool options_ended = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!options_ended && arg == "--") {
      options_ended = true;
    } else if (!options_ended && arg == "--help") {
      o.help = true;
    } else if (!options_ended && arg == "--no-bos") {
      o.add_special = false;
    } else if (!options_ended && arg == "--parse-special") {
      o.parse_special = true;
    } else if (!options_ended && arg == "--model") {
      if (i + 1 >= argc) throw glacier::InputError("option --model: expected a file path after it, found nothing");
      o.model = argv[++i];
    } else if (!options_ended && arg.size() > 1 && arg.substr(0, 2) == "--") {
      throw glacier::InputError("unknown option '" + std::string(arg) + "' (see --help)");
    } else if (have_text) {
      throw glacier::InputError("expected one TEXT argument, found a second one: '" + std::string(arg) +
                                "' (quote the text)");
    } else {
      o.text = arg;
      have_text = true;
    }
  }
  if (o.help) return o;
  if (o.model.empty()) throw glacier::InputError("option --model is required (see --help)");
  if (!have_text) throw glacier::InputError("expected a TEXT argument, found none (see --help)");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse_options(argc, argv);
    if (opt.help) {
      std::cout << kUsage;
      return 0;
    }
    const auto file = glacier::gguf::File::open(opt.model);
    const auto tokenizer = glacier::model::Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = tokenizer->encode(opt.text, opt.add_special, opt.parse_special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::cout << line << '\n';
    return std::cout.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "glacier_tokenize: error: " << e.what() << '\n';
    return 1;
  }
}
