// Which GGUF tensor types the kernels compute with, and the refusal of every other type (naming the
// tensor and listing what is supported).
#include "gguf/gguf_file.h"
#include "model/model_weights.h"
#include "util/error.h"

namespace glacier::model {

kernels::WeightType weight_type_of(const gguf::File& f, const gguf::TensorInfo& t) {
  switch (t.type) {
    case gguf::TensorType::F32: return kernels::WeightType::F32;
    case gguf::TensorType::F16: return kernels::WeightType::F16;
    case gguf::TensorType::BF16: return kernels::WeightType::BF16;
    case gguf::TensorType::Q8_0: return kernels::WeightType::Q8_0;
    case gguf::TensorType::Q4_0: return kernels::WeightType::Q4_0;
    case gguf::TensorType::Q4_K: return kernels::WeightType::Q4_K;
    case gguf::TensorType::Q5_K: return kernels::WeightType::Q5_K;
    case gguf::TensorType::Q6_K: return kernels::WeightType::Q6_K;
    case gguf::TensorType::Q4_1: return kernels::WeightType::Q4_1;
    case gguf::TensorType::Q5_0: return kernels::WeightType::Q5_0;
    case gguf::TensorType::Q5_1: return kernels::WeightType::Q5_1;
    case gguf::TensorType::IQ4_NL: return kernels::WeightType::IQ4_NL;
    case gguf::TensorType::IQ4_XS: return kernels::WeightType::IQ4_XS;
    case gguf::TensorType::Q2_K: return kernels::WeightType::Q2_K;
    case gguf::TensorType::Q3_K: return kernels::WeightType::Q3_K;
    default:
      throw InputError(f.path() + ": tensor '" + t.name +
                       "': expected a supported weight type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k), found " +
                       gguf::type_name(t.type));
  }
}

}  // namespace glacier::model
