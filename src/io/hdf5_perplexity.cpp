// /perplexity: 1-D per-chunk datasets (chunk, n_scored, nll_sum, mean_nll, running_ppl), a 2-D
// token_nll [chunk, token] and the summary as attributes of the group.
#include "io/hdf5_perplexity.h"

#include <hdf5.h>

#include <map>
#include <type_traits>
#include <variant>

#include "io/hdf5_util.h"
#include "util/error.h"

namespace glacier::io {
namespace {

using h5::check;
using h5::check_status;
using h5::Handle;

void write_dataset(hid_t group, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data, const std::string& what) {
  Handle space(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), what), H5Sclose);
  Handle dataset(check(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                       what + " (/perplexity/" + name + ")"),
                 H5Dclose);
  if (dims.empty() || dims[0] == 0) return;
  check_status(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what + " (/perplexity/" + name + ")");
}

// A dataset's shape; throws InputError naming the path when it is missing.
std::vector<hsize_t> dataset_shape(hid_t group, const std::string& path, const char* name, Handle& dataset) {
  if (!h5::link_exists(group, name))
    throw InputError("results file " + path + ": expected dataset /perplexity/" + name + ", found none");
  dataset = Handle(check(H5Dopen2(group, name, H5P_DEFAULT), path + ": cannot open /perplexity/" + name), H5Dclose);
  Handle space(check(H5Dget_space(dataset.get()), path), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

template <typename T>
std::vector<T> read_column(hid_t group, const std::string& path, const char* name, hid_t mem_type, size_t n_chunk) {
  Handle dataset;
  const auto dims = dataset_shape(group, path, name, dataset);
  if (dims.size() != 1 || dims[0] != n_chunk)
    throw InputError("results file " + path + ": expected /perplexity/" + name + " to hold " + std::to_string(n_chunk) +
                     " chunks, found " + (dims.size() == 1 ? std::to_string(dims[0]) : std::to_string(dims.size()) + "-D data"));
  std::vector<T> values(n_chunk);
  if (n_chunk > 0)
    check_status(H5Dread(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                 "cannot read /perplexity/" + std::string(name) + " from " + path);
  return values;
}

template <typename T>
T attribute(const std::map<std::string, AttributeValue>& attrs, const std::string& path, const char* name) {
  const auto it = attrs.find(name);
  const T* v = it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
  if (!v)
    throw InputError("results file " + path + ": expected /perplexity attribute " + name + " of type " +
                     (std::is_same_v<T, double> ? "float" : "integer") + ", found " +
                     (it == attrs.end() ? "none" : "another type"));
  return *v;
}

}  // namespace

void write_perplexity(const std::string& path, const PerplexityTable& t) {
  const size_t n_chunk = t.chunk_nll_sum.size();
  GLACIER_ASSERT(t.chunk_n_scored.size() == n_chunk && t.chunk_running_ppl.size() == n_chunk && t.token_nll.size() == n_chunk,
                 "perplexity table columns of different lengths");
  const size_t per_chunk = n_chunk ? t.token_nll[0].size() : 0;
  std::vector<float> tokens;
  tokens.reserve(n_chunk * per_chunk);
  for (size_t c = 0; c < n_chunk; ++c) {
    if (t.token_nll[c].size() != per_chunk)
      throw InputError(path + ": perplexity chunk " + std::to_string(c) + " scored " + std::to_string(t.token_nll[c].size()) +
                       " tokens, expected " + std::to_string(per_chunk) + " like chunk 0");
    tokens.insert(tokens.end(), t.token_nll[c].begin(), t.token_nll[c].end());
  }
  std::vector<int64_t> chunk(n_chunk);
  std::vector<double> mean_nll(n_chunk);
  for (size_t c = 0; c < n_chunk; ++c) {
    chunk[c] = static_cast<int64_t>(c);
    mean_nll[c] = t.chunk_n_scored[c] ? t.chunk_nll_sum[c] / static_cast<double>(t.chunk_n_scored[c]) : 0.0;
  }

  h5::silence_errors();
  const std::string what = "cannot write /perplexity to " + path;
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw std::runtime_error(what + h5::error_detail());
  if (h5::link_exists(file.get(), "perplexity")) check_status(H5Ldelete(file.get(), "perplexity", H5P_DEFAULT), what);
  Handle group(check(H5Gcreate2(file.get(), "perplexity", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), what), H5Gclose);
  const std::vector<hsize_t> dims1{n_chunk};
  write_dataset(group.get(), "chunk", H5T_STD_I64LE, H5T_NATIVE_INT64, dims1, chunk.data(), what);
  write_dataset(group.get(), "n_scored", H5T_STD_I64LE, H5T_NATIVE_INT64, dims1, t.chunk_n_scored.data(), what);
  write_dataset(group.get(), "nll_sum", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dims1, t.chunk_nll_sum.data(), what);
  write_dataset(group.get(), "mean_nll", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dims1, mean_nll.data(), what);
  write_dataset(group.get(), "running_ppl", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dims1, t.chunk_running_ppl.data(), what);
  write_dataset(group.get(), "token_nll", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n_chunk, per_chunk}, tokens.data(), what);
  h5::write_attribute(group.get(), "ppl", t.ppl);
  h5::write_attribute(group.get(), "ppl_stderr", t.ppl_stderr);
  h5::write_attribute(group.get(), "mean_nll", t.mean_nll);
  h5::write_attribute(group.get(), "nll_stderr", t.nll_stderr);
  h5::write_attribute(group.get(), "n_ctx", t.n_ctx);
  h5::write_attribute(group.get(), "n_chunk", static_cast<int64_t>(n_chunk));
  h5::write_attribute(group.get(), "n_scored", t.n_scored);
  h5::write_attribute(group.get(), "n_tokens_text", t.n_tokens_text);
  group.reset();
  if (!file.reset()) throw std::runtime_error("cannot close " + path + " after writing /perplexity" + h5::error_detail());
}

PerplexityTable read_perplexity(const std::string& path) {
  Handle file = h5::open_for_reading(path, "results file");
  if (!h5::link_exists(file.get(), "perplexity"))
    throw InputError("results file " + path + ": expected a group /perplexity (a --mode perplexity run), found none");
  Handle group(check(H5Gopen2(file.get(), "perplexity", H5P_DEFAULT), path + ": cannot open /perplexity"), H5Gclose);
  const auto attrs = h5::read_attributes(group.get());
  PerplexityTable t;
  t.ppl = attribute<double>(attrs, path, "ppl");
  t.ppl_stderr = attribute<double>(attrs, path, "ppl_stderr");
  t.mean_nll = attribute<double>(attrs, path, "mean_nll");
  t.nll_stderr = attribute<double>(attrs, path, "nll_stderr");
  t.n_ctx = attribute<int64_t>(attrs, path, "n_ctx");
  t.n_scored = attribute<int64_t>(attrs, path, "n_scored");
  t.n_tokens_text = attribute<int64_t>(attrs, path, "n_tokens_text");
  const auto n_chunk = static_cast<size_t>(attribute<int64_t>(attrs, path, "n_chunk"));
  t.chunk_n_scored = read_column<int64_t>(group.get(), path, "n_scored", H5T_NATIVE_INT64, n_chunk);
  t.chunk_nll_sum = read_column<double>(group.get(), path, "nll_sum", H5T_NATIVE_DOUBLE, n_chunk);
  t.chunk_running_ppl = read_column<double>(group.get(), path, "running_ppl", H5T_NATIVE_DOUBLE, n_chunk);
  Handle tokens;
  const auto dims = dataset_shape(group.get(), path, "token_nll", tokens);
  if (dims.size() != 2 || dims[0] != n_chunk)
    throw InputError("results file " + path + ": expected /perplexity/token_nll to be [" + std::to_string(n_chunk) +
                     ", tokens per chunk], found " + std::to_string(dims.size()) + "-D data");
  std::vector<float> flat(dims[0] * dims[1]);
  if (!flat.empty())
    check_status(H5Dread(tokens.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()),
                 "cannot read /perplexity/token_nll from " + path);
  for (size_t c = 0; c < n_chunk; ++c)
    t.token_nll.emplace_back(flat.begin() + static_cast<int64_t>(c * dims[1]), flat.begin() + static_cast<int64_t>((c + 1) * dims[1]));
  return t;
}

}  // namespace glacier::io
