// Forward declarations of the GGUF reader's types, for headers that only name them in signatures (a
// reference or a pointer) and so need not include gguf_file.h and its dependencies.
#pragma once

namespace glacier::gguf {
class File;
struct TensorInfo;
}  // namespace glacier::gguf
