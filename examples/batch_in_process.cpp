// A job in one process through glacier's library API, no MPI: greedy continuations of the prompts given
// on the command line, then one scored continuation. Usage: glacier_example MODEL.gguf "prompt" ...
#include <glacier/engine.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT...\n", argv[0]);
    return 2;
  }
  std::unique_ptr<glacier::Engine> engine;
  try {
    glacier::EngineOptions options;
    options.slots = 4;  // sequences computed together
    engine = glacier::Engine::open(argv[1], options);
  } catch (const glacier::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const glacier::ModelInfo info = engine->info();
  std::printf("%s: %d layers, %d tokens in the vocabulary, context %d\n", info.architecture.c_str(), info.n_layer,
              info.n_vocab, info.context);

  std::vector<glacier::Request> batch;
  for (int i = 2; i < argc; ++i) {
    glacier::Request r;
    r.prompt = argv[i];
    r.max_tokens = 24;
    batch.push_back(r);
  }
  // Scoring: the log-prob of " and" after the first prompt (it shares the prompt's KV rows).
  glacier::Request score;
  score.id = "score";
  score.context = argv[2];
  score.continuation = " and";
  batch.push_back(score);

  int failed = 0;
  engine->run(batch, [&](glacier::Result&& r) {
    if (!r.ok) {
      std::fprintf(stderr, "%s: %s\n", r.id.c_str(), r.error.c_str());
      ++failed;
    } else if (r.id == "score") {
      std::printf("[score] sum log-prob of \" and\": %.4f (greedy: %s)\n", r.sum_logprob, r.greedy ? "yes" : "no");
    } else {
      std::printf("[%zu] %s%s (%zu tokens, %s)\n", r.index, argv[2 + r.index], r.text.c_str(), r.tokens.size(),
                  r.finish_reason.c_str());
    }
  });
  return failed == 0 ? 0 : 1;
}
