// Corrupt and mismatched models under `mpiexec -np 3`, each made here from a valid synthetic model: every
// rank exits with the input-error code within seconds, with exactly one message naming the file and the
// key or tensor, and no crash. Weights whose activations overflow fail each prompt instead of printing junk.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "common/job_runner.h"
#include "common/process.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant_blocks.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "planning/partition.h"

namespace {

using glacier::testing::run_glacier;
namespace gguf = glacier::gguf;
namespace model = glacier::model;
using Bytes = std::vector<uint8_t>;

constexpr int kRanks = 3;
// The bound: every rank gone within 5 s of the launch. Here mpiexec alone takes about 0.4 s to
// start and stop three ranks, and refusing a model this small takes milliseconds.
constexpr double kRefusalWallLimitS = 5.0;
// run_glacier kills a job after this long: only a hang gets there, and the wall-time check then fails.
constexpr int kHangKillLimitS = 30;
// A rank still running this long after mpiexec returned has escaped it.
constexpr double kLeftoverGraceS = 1.0;
constexpr int kExitInputError = 2;  // src/app/job.h: bad model, prompts or options
constexpr int kMaxTokens = 4;
constexpr int kCtx = 64;
// The base model: llama in real shapes, tiny, and with more layers than ranks (np 3 needs at least 3).
constexpr int32_t kLayers = 4, kEmbd = 64, kHeads = 4, kHeadsKv = 2, kFf = 128;
constexpr int32_t kHeadDim = kEmbd / kHeads, kKvDim = kHeadsKv * kHeadDim;
// Far below f32's 3.4e38, yet a sum of a few such products overflows: finite weights, infinite activations.
constexpr float kOverflowingWeight = 1e37f;

// What an abnormal end prints under Open MPI and glibc; none may appear in a refusal.
const char* const kCrashTexts[] = {"core dumped", "Segmentation", "MPI_ABORT", "Aborted", "terminate called",
                                   "on signal"};

// A model as editable parts: metadata in file order and tensors with their data.
struct Draft {
  struct Tensor {
    std::string name;
    gguf::TensorType type;
    std::vector<int64_t> ne;
    Bytes data;
  };
  uint64_t alignment = 32;
  std::vector<std::pair<std::string, gguf::Value>> kv;
  std::vector<Tensor> tensors;

  static Draft of(const gguf::File& f) {
    Draft d;
    d.alignment = f.alignment();
    d.kv = f.metadata();
    for (const gguf::TensorInfo& t : f.tensors())
      d.tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), Bytes(t.data, t.data + t.n_bytes)});
    return d;
  }
  gguf::Value& value(const std::string& key) {
    for (auto& [k, v] : kv)
      if (k == key) return v;
    throw std::logic_error("test setup: no key " + key + " in the base model");
  }
  void set(const std::string& key, gguf::Value v) {
    for (auto& [k, old] : kv)
      if (k == key) {
        old = std::move(v);
        return;
      }
    kv.emplace_back(key, std::move(v));
  }
  void erase_key(const std::string& key) {
    value(key);  // must exist
    std::erase_if(kv, [&](const auto& e) { return e.first == key; });
  }
  Tensor& tensor(const std::string& name) {
    for (Tensor& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("test setup: no tensor " + name + " in the base model");
  }
  void erase_tensor(const std::string& name) {
    tensor(name);  // must exist
    std::erase_if(tensors, [&](const Tensor& t) { return t.name == name; });
  }
  Bytes bytes() const {
    gguf::Writer w(alignment);
    for (const auto& [k, v] : kv) w.set(k, v);
    for (const Tensor& t : tensors) w.add_tensor(t.name, t.type, t.ne, t.data);
    return w.serialize();
  }
};

gguf::Value u32(uint32_t v) { return {gguf::ValueType::UINT32, uint64_t{v}}; }
gguf::Value str(const std::string& s) { return {gguf::ValueType::STRING, s}; }

void set_f32(Draft::Tensor& t, int64_t i, float x) {
  if (t.type != gguf::TensorType::F32 || static_cast<size_t>(4 * i + 4) > t.data.size())
    throw std::logic_error("test setup: " + t.name + " is not an f32 tensor with element " + std::to_string(i));
  std::memcpy(t.data.data() + 4 * i, &x, 4);
}
void fill_f32(Draft::Tensor& t, float x) {
  for (int64_t i = 0; i < static_cast<int64_t>(t.data.size() / 4); ++i) set_f32(t, i, x);
}

template <typename T>
void poke(Bytes& b, size_t at, T v) {
  if (at + sizeof(T) > b.size()) throw std::logic_error("test setup: poke past the end");
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Offset in the serialized file of a tensor info's data-offset field. An info starts with the name's
// 8-byte length and text, so searching for both cannot hit a vocabulary string by accident.
size_t data_offset_field(const Bytes& b, const gguf::TensorInfo& t) {
  Bytes needle(8 + t.name.size());
  const uint64_t len = t.name.size();
  std::memcpy(needle.data(), &len, 8);
  std::memcpy(needle.data() + 8, t.name.data(), t.name.size());
  const auto at = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  if (at == b.end()) throw std::logic_error("test setup: no tensor info for " + t.name);
  return static_cast<size_t>(at - b.begin()) + needle.size() + 4 + 8 * static_cast<size_t>(t.n_dims) + 4;
}

// The valid models every case starts from, and the layers whose tensors a given rank alone loads.
struct Base {
  std::string dir, prompts;
  std::string f32_path, q8_path;
  Bytes f32_bytes;
  std::unique_ptr<gguf::File> f32, q8;
  int32_t n_vocab = 0;
  int32_t rank1_layer = -1;      // owned by rank 1 (neither the embedding's rank nor the head's)
  int32_t last_rank_layer = -1;  // owned by the last rank

  const gguf::TensorInfo& info(const std::string& name) const {
    const gguf::TensorInfo* t = f32->find_tensor(name);
    if (!t) throw std::logic_error("test setup: no tensor " + name + " in the base model");
    return *t;
  }
  uint64_t data_start(const std::string& name) const { return f32->data_offset() + info(name).offset; }
};

const Base* g_base = nullptr;

std::string blk(int32_t layer, const std::string& what) { return "blk." + std::to_string(layer) + "." + what; }

// "{r1}" and "{rN}" stand for the layers of rank 1 and of the last rank, "{vocab}" for the token count:
// known once the base model exists.
std::string expand(std::string s, const Base& b) {
  const std::pair<std::string, int32_t> values[] = {{"{r1}", b.rank1_layer}, {"{rN}", b.last_rank_layer}, {"{vocab}", b.n_vocab}};
  for (const auto& [token, value] : values)
    for (size_t at = s.find(token); at != std::string::npos; at = s.find(token))
      s.replace(at, token.size(), std::to_string(value));
  return s;
}

struct CorruptCase {
  std::string name;
  std::function<Bytes(const Base&)> make;
  // The message after "<model path>: "; the first fragment must appear exactly once in the job's output,
  // the others on the same line. "{r1}"/"{rN}" as in expand().
  std::vector<std::string> fragments;
};

// gtest prints failing parameters: the name says which case without dumping bytes.
void PrintTo(const CorruptCase& c, std::ostream* os) { *os << c.name; }

Bytes cut(const Bytes& b, uint64_t n) {
  if (n >= b.size()) throw std::logic_error("test setup: cut at or past the end");
  return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
}

std::function<Bytes(const Base&)> edited(std::function<void(Draft&, const Base&)> edit) {
  return [edit](const Base& b) {
    Draft d = Draft::of(*b.f32);
    edit(d, b);
    return d.bytes();
  };
}

std::function<Bytes(const Base&)> patched(std::function<void(Bytes&, const Base&)> patch) {
  return [patch](const Base& b) {
    Bytes bytes = b.f32_bytes;
    patch(bytes, b);
    return bytes;
  };
}

std::vector<CorruptCase> cases() {
  std::vector<CorruptCase> c;
  // Truncations, from the header to the last byte of the data.
  c.push_back({"cut_in_header", [](const Base& b) { return cut(b.f32_bytes, 16); },
               {"header: file is 16 bytes, too short for a GGUF header (24 bytes)"}});
  c.push_back({"cut_after_header", [](const Base& b) { return cut(b.f32_bytes, 64); },
               {"header: metadata key/value count ", "is impossible for a file of 64 bytes: truncated or corrupt"}});
  c.push_back({"cut_in_token_types",
               [](const Base& b) {
                 const std::string key = "tokenizer.ggml.token_type";
                 const auto at = std::search(b.f32_bytes.begin(), b.f32_bytes.end(), key.begin(), key.end());
                 if (at == b.f32_bytes.end()) throw std::logic_error("test setup: no key " + key);
                 // key text, value type, element type, count, then the first 25 of the int32 types
                 return cut(b.f32_bytes, static_cast<uint64_t>(at - b.f32_bytes.begin()) + key.size() + 4 + 4 + 8 + 100);
               },
               {"key 'tokenizer.ggml.token_type': array count {vocab} of int32 at offset ", "cannot fit in the 100 bytes left"}});
  c.push_back({"cut_in_tensor_infos",
               [](const Base& b) { return cut(b.f32_bytes, data_offset_field(b.f32_bytes, b.info(blk(2, "ffn_up.weight"))) - 2); },
               {"tensor 'blk.2.ffn_up.weight': tensor type at offset ", "runs past the end of the file"}});
  c.push_back({"cut_at_data_start", [](const Base& b) { return cut(b.f32_bytes, b.f32->data_offset()); },
               {"tensor 'token_embd.weight': data [offset ", "ends past the end of the file"}});
  c.push_back({"cut_in_middle_of_data",
               [](const Base& b) {
                 const std::string name = blk(2, "attn_v.weight");
                 return cut(b.f32_bytes, b.data_start(name) + b.info(name).n_bytes / 2);
               },
               {"tensor 'blk.2.attn_v.weight': data [offset ", "ends past the end of the file"}});
  c.push_back({"cut_last_byte", [](const Base& b) { return cut(b.f32_bytes, b.f32_bytes.size() - 1); },
               {"tensor 'output.weight': data [offset ", "ends past the end of the file"}});
  // Tensor data offsets.
  c.push_back({"data_offset_past_end",
               patched([](Bytes& bytes, const Base& b) {
                 poke<uint64_t>(bytes, data_offset_field(bytes, b.info(blk(1, "attn_q.weight"))), bytes.size() / 32 * 32);
               }),
               {"tensor 'blk.1.attn_q.weight': data [offset ", "ends past the end of the file"}});
  c.push_back({"data_offset_misaligned",
               patched([](Bytes& bytes, const Base& b) {
                 const auto& t = b.info(blk(1, "attn_q.weight"));
                 poke<uint64_t>(bytes, data_offset_field(bytes, t), t.offset + 4);
               }),
               {"tensor 'blk.1.attn_q.weight': data offset ", "is not a multiple of the alignment 32"}});
  c.push_back({"data_offset_onto_another_tensor",
               patched([](Bytes& bytes, const Base& b) {
                 poke<uint64_t>(bytes, data_offset_field(bytes, b.info(blk(3, "ffn_down.weight"))),
                                b.info(blk(3, "ffn_up.weight")).offset);
               }),
               {"tensor 'blk.3.ffn_down.weight': data [", "overlaps the data of tensor 'blk.3.ffn_up.weight'"}});
  c.push_back({"not_a_gguf_file", [](const Base&) { const std::string s(100, '#'); return Bytes(s.begin(), s.end()); },
               {"header: bad magic: expected 'GGUF' (47 47 55 46), found bytes 23 23 23 23"}});
  // Metadata the architecture cannot use.
  c.push_back({"unknown_architecture", edited([](Draft& d, const Base&) { d.set("general.architecture", str("mamba")); }),
               {"key 'general.architecture': expected one of the supported architectures (llama, ", "found 'mamba'"}});
  c.push_back({"missing_embedding_length", edited([](Draft& d, const Base&) { d.erase_key("llama.embedding_length"); }),
               {"key 'llama.embedding_length' is missing (expected unsigned integer)"}});
  c.push_back({"block_count_is_a_string", edited([](Draft& d, const Base&) { d.set("llama.block_count", str("4")); }),
               {"key 'llama.block_count': expected unsigned integer, found string"}});
  c.push_back({"head_count_not_dividing_embedding",
               edited([](Draft& d, const Base&) { d.set("llama.attention.head_count", u32(5)); }),
               {"key 'llama.embedding_length': expected a multiple of head_count (5), found 64"}});
  c.push_back({"kv_head_count_not_dividing_head_count",
               edited([](Draft& d, const Base&) { d.set("llama.attention.head_count_kv", u32(3)); }),
               {"key 'llama.attention.head_count_kv': expected a divisor of head_count (4), found 3"}});
  c.push_back({"rope_dims_beyond_head_dim",
               edited([](Draft& d, const Base&) { d.set("llama.rope.dimension_count", u32(2 * kHeadDim)); }),
               {"key 'llama.rope.dimension_count': expected an even number <= head dim 16, found 32"}});
  c.push_back({"context_length_zero", edited([](Draft& d, const Base&) { d.set("llama.context_length", u32(0)); }),
               {"key 'llama.context_length': expected an integer in 1..", "found 0"}});
  c.push_back({"bos_id_beyond_vocabulary",
               edited([](Draft& d, const Base&) { d.set("tokenizer.ggml.bos_token_id", u32(100000)); }),
               {"key 'tokenizer.ggml.bos_token_id': expected a token id below the vocabulary size ", "found 100000"}});
  // Tensors that do not fit the metadata: each one is loaded by one rank only, and every rank must
  // still end with that rank's message.
  c.push_back({"block_count_beyond_tensors", edited([](Draft& d, const Base&) { d.set("llama.block_count", u32(kLayers + 1)); }),
               {"tensor 'blk.4.", "required by the model but missing from the file"}});
  c.push_back({"missing_ffn_down", edited([](Draft& d, const Base& b) { d.erase_tensor(blk(b.rank1_layer, "ffn_down.weight")); }),
               {"tensor 'blk.{r1}.ffn_down.weight': required by the model but missing from the file"}});
  c.push_back({"attn_k_shaped_for_other_head_counts",
               edited([](Draft& d, const Base& b) {
                 Draft::Tensor& t = d.tensor(blk(b.rank1_layer, "attn_k.weight"));
                 t.ne = {kEmbd, kEmbd};  // one kv head per query head: as if head_count_kv were 4
                 t.data.resize(4 * kEmbd * kEmbd);
               }),
               {"tensor 'blk.{r1}.attn_k.weight': expected shape [64, 32], found [64, 64]"}});
  c.push_back({"vocabulary_one_token_short_of_embedding",
               edited([](Draft& d, const Base&) {
                 for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"})
                   std::get<gguf::Array>(d.value(key).data).items.pop_back();
               }),
               {"tensor 'token_embd.weight': expected ", "rows, one per token of tokenizer.ggml.tokens, found {vocab} "}});
  c.push_back({"ffn_gate_in_unsupported_type",
               edited([](Draft& d, const Base& b) {
                 Draft::Tensor& t = d.tensor(blk(b.last_rank_layer, "ffn_gate.weight"));
                 // Q8_1: a valid GGUF type that is only ever an activation format, never a weight type.
                 constexpr int kQ8_1BlockElems = 32, kQ8_1BlockBytes = 36;  // fp16 d and s, 32 int8
                 t.type = gguf::TensorType::Q8_1;
                 t.data.assign(static_cast<size_t>(kEmbd * kFf / kQ8_1BlockElems * kQ8_1BlockBytes), 0);
               }),
               {"tensor 'blk.{rN}.ffn_gate.weight': expected a supported weight type (", "found q8_1"}});
  c.push_back({"norm_stored_quantized",
               edited([](Draft& d, const Base& b) {
                 Draft::Tensor& t = d.tensor(blk(b.last_rank_layer, "attn_norm.weight"));
                 t.type = gguf::TensorType::Q8_0;
                 t.data.assign(kEmbd / glacier::kernels::kQK8_0 * sizeof(glacier::kernels::BlockQ8_0), 0);
               }),
               {"tensor 'blk.{rN}.attn_norm.weight': expected type f32, f16 or bf16 for a norm vector, found q8_0"}});
  // Non-finite weights.
  c.push_back({"inf_in_norm", edited([](Draft& d, const Base& b) {
                 set_f32(d.tensor(blk(b.last_rank_layer, "ffn_norm.weight")), 7, std::numeric_limits<float>::infinity());
               }),
               {"tensor 'blk.{rN}.ffn_norm.weight': expected finite weights, found 1 non-finite values (first at element 7: inf)"}});
  c.push_back({"nan_filled_ffn_up", edited([](Draft& d, const Base& b) {
                 fill_f32(d.tensor(blk(b.rank1_layer, "ffn_up.weight")), std::numeric_limits<float>::quiet_NaN());
               }),
               {"tensor 'blk.{r1}.ffn_up.weight': expected finite weights, found 8192 non-finite values (first at element 0: nan)"}});
  c.push_back({"nan_in_output_head", edited([](Draft& d, const Base&) {
                 set_f32(d.tensor("output.weight"), 1000, std::numeric_limits<float>::quiet_NaN());
                 set_f32(d.tensor("output.weight"), 2000, -std::numeric_limits<float>::infinity());
               }),
               {"tensor 'output.weight': expected finite weights, found 2 non-finite values (first at element 1000: nan)"}});
  c.push_back({"nan_scale_in_q8_0_block",
               [](const Base& b) {
                 Draft d = Draft::of(*b.q8);
                 Draft::Tensor& t = d.tensor(blk(b.rank1_layer, "attn_v.weight"));
                 constexpr size_t kBadBlock = 3;
                 constexpr uint16_t kF16QuietNaN = 0x7e00;
                 poke<uint16_t>(t.data, kBadBlock * sizeof(glacier::kernels::BlockQ8_0), kF16QuietNaN);
                 return d.bytes();
               },
               {"tensor 'blk.{r1}.attn_v.weight': expected finite weights, found 1 q8_0 blocks with a non-finite scale "
                "(first at element 96)"}});
  return c;
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

std::string line_containing(const std::string& text, size_t at) {
  const size_t begin = text.rfind('\n', at);
  const size_t end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end == std::string::npos ? std::string::npos : end - (begin == std::string::npos ? 0 : begin + 1));
}

// Live processes whose command line mentions `needle` (each case's files have their own path).
std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::stol(e->d_name));
    if (pid == ::getpid()) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(needle) != std::string::npos && glacier::testing::is_alive(pid)) found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

// Fails for any process of the job still alive after the grace period, and kills it so later cases and
// tests do not inherit it.
void expect_no_leftover(const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kLeftoverGraceS);
  std::vector<pid_t> left = processes_mentioning(needle);
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = processes_mentioning(needle);
  }
  for (pid_t pid : left) {
    ADD_FAILURE() << "process " << pid << " of the job mentioning " << needle << " outlived mpiexec";
    ::kill(pid, SIGKILL);
  }
}

void expect_no_crash_text(const std::string& output) {
  for (const char* text : kCrashTexts)
    EXPECT_EQ(output.find(text), std::string::npos) << "'" << text << "' in the output:\n" << output;
}

std::string job_args(const std::string& model, const std::string& jsonl) {
  return "--model " + model + " --prompts " + g_base->prompts + " --jsonl " + jsonl + " --max-tokens " +
         std::to_string(kMaxTokens) + " --ctx " + std::to_string(kCtx);
}

// Writes the base models once per test process (milliseconds) and removes them after.
class BaseModelSuite : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    auto* b = new Base;
    b->dir = glacier::testing::scratch_dir("corrupt-model");
    b->prompts = b->dir + "/prompts.txt";
    std::ofstream(b->prompts) << "Once upon a time\nThe cat sat on\nTom and Lily\n";
    model::SyntheticModelSpec spec;
    spec.n_layer = kLayers, spec.n_embd = kEmbd, spec.n_head = kHeads, spec.n_head_kv = kHeadsKv, spec.n_ff = kFf;
    spec.n_ctx = 256;
    spec.threads = 1;
    b->f32_path = b->dir + "/base-f32.gguf";
    b->n_vocab = model::write_synthetic_model(spec, b->f32_path).n_vocab;
    spec.weight_type = glacier::kernels::WeightType::Q8_0;
    b->q8_path = b->dir + "/base-q8_0.gguf";
    model::write_synthetic_model(spec, b->q8_path);
    b->f32 = gguf::File::open(b->f32_path);
    b->q8 = gguf::File::open(b->q8_path);
    const std::string text = glacier::testing::read_text(b->f32_path);
    b->f32_bytes.assign(text.begin(), text.end());
    // The job's own default split (no --layers), so a case can aim at the rank that loads a layer.
    const model::ModelConfig cfg = model::read_model_config(*b->f32);
    const auto split = glacier::planning::partition_by_bytes(model::weight_bytes(*b->f32, cfg), kRanks);
    b->rank1_layer = split[1].first;
    b->last_rank_layer = split[kRanks - 1].first;
    g_base = b;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(g_base->dir);
    delete g_base;
    g_base = nullptr;
  }
};

class CorruptModel : public BaseModelSuite, public ::testing::WithParamInterface<CorruptCase> {};
class CorruptModelJob : public BaseModelSuite {};

TEST_F(CorruptModelJob, BaseModelsRunCleanly) {
  // The control: without the damage, both base models generate on three ranks.
  ASSERT_NE(g_base->rank1_layer, 0) << "rank 1 should not own layer 0, or its cases would hit rank 0 instead";
  ASSERT_NE(g_base->rank1_layer, g_base->last_rank_layer);
  for (const std::string& model : {g_base->f32_path, g_base->q8_path}) {
    const std::string jsonl = model + ".jsonl";
    const auto run = run_glacier(kRanks, job_args(model, jsonl), kHangKillLimitS);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const auto rows = glacier::testing::read_jsonl(jsonl);
    ASSERT_EQ(rows.size(), 3u) << run.output;
    for (const auto& row : rows) EXPECT_EQ(row["status"], "ok") << row.dump();
    expect_no_crash_text(run.output);
  }
}

TEST_P(CorruptModel, EveryRankExitsSoonWithOneMessage) {
  const CorruptCase& cc = GetParam();
  const std::string path = g_base->dir + "/" + cc.name + ".gguf";
  write_bytes(path, cc.make(*g_base));
  const auto run = run_glacier(kRanks, job_args(path, path + ".jsonl"), kHangKillLimitS);
  SCOPED_TRACE(cc.name + " output:\n" + run.output);

  EXPECT_EQ(run.exit_code, kExitInputError);
  EXPECT_LT(run.seconds, kRefusalWallLimitS);
  const std::string primary = path + ": " + expand(cc.fragments.at(0), *g_base);
  EXPECT_EQ(count_of(run.output, primary), 1u) << "expected once: " << primary;
  const size_t at = run.output.find(primary);
  if (at != std::string::npos) {
    const std::string line = line_containing(run.output, at);
    for (size_t i = 1; i < cc.fragments.size(); ++i)
      EXPECT_NE(line.find(expand(cc.fragments[i], *g_base)), std::string::npos)
          << "'" << cc.fragments[i] << "' not in: " << line;
  }
  // One message in all: no rank adds its own version of the failure.
  EXPECT_EQ(count_of(run.output, path + ": "), 1u) << "the model path should appear in one message only";
  expect_no_crash_text(run.output);
  expect_no_leftover(path);
}

INSTANTIATE_TEST_SUITE_P(Cases, CorruptModel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) { return info.param.name; });

// Finite weights so large that the activations overflow: the load accepts them, and every prompt must
// end as an error row naming the non-finite logits instead of decoding garbage, and the job must fail.
TEST_F(CorruptModelJob, OverflowingActivationsFailEachPrompt) {
  const std::string path = g_base->dir + "/overflowing_ffn_down.gguf";
  Draft d = Draft::of(*g_base->f32);
  fill_f32(d.tensor(blk(g_base->rank1_layer, "ffn_down.weight")), kOverflowingWeight);
  write_bytes(path, d.bytes());
  const std::string jsonl = path + ".jsonl";
  const auto run = run_glacier(kRanks, job_args(path, jsonl), kHangKillLimitS);
  SCOPED_TRACE("output:\n" + run.output);

  EXPECT_NE(run.exit_code, 0) << "a job in which every prompt failed must not report success";
  EXPECT_LT(run.seconds, kRefusalWallLimitS);
  expect_no_crash_text(run.output);
  expect_no_leftover(path);
  const auto rows = glacier::testing::read_jsonl(jsonl);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["status"], "error") << rows[i].dump();
    EXPECT_TRUE(rows[i]["tokens"].empty()) << rows[i].dump();
    const std::string error = rows[i].value("error", "");
    EXPECT_EQ(error.rfind(g_base->prompts + ":" + std::to_string(i + 1) + ": ", 0), 0u) << error;
    EXPECT_NE(error.find("non-finite logits (NaN or Inf)"), std::string::npos) << error;
  }
}

}  // namespace
