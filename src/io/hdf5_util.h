// Small HDF5 helpers shared by the results and trace files: owning handles, turning HDF5's error stack
// into one exception message, vlen string types and scalar attributes. Internal to src/io; it names
// HDF5's handle types by their widths so that only src/io's .cpp files include hdf5.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/attribute_value.h"

namespace glacier::io::h5 {

// hid_t and herr_t of HDF5 1.10 and later (hdf5_util.cpp checks them against hdf5.h).
using Id = int64_t;
using Status = int;
constexpr Id kInvalidId = -1;  // H5I_INVALID_HID

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = Status (*)(Id);
  Handle() = default;
  Handle(Id id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = kInvalidId; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  Id get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (for files, this is where data reaches disk).
  bool reset();

 private:
  Id id_ = kInvalidId;
  Closer closer_ = nullptr;
};

// Turns off HDF5's printing of its error stack; our exceptions carry the message instead.
void silence_errors();

// The current HDF5 error stack as " (outermost description: innermost description)", or "" when empty;
// clears the stack.
std::string error_detail();

// Throws std::runtime_error("<what>" + error_detail()) when id/status is negative.
Id check(Id id, const std::string& what);
void check_status(Status status, const std::string& what);

// Opens an existing HDF5 file read-only, HDF5's error printing silenced. Throws InputError "<kind> <path>:
// expected an existing file, found none" or "...: expected an HDF5 file (detail)", kind being e.g.
// "results file" or "trace file".
Handle open_for_reading(const std::string& path, const std::string& kind);

Handle vlen_string_type();  // variable-length UTF-8 string
bool link_exists(Id location, const std::string& name);

// Scalar attributes on an object; an existing attribute of the same name is replaced.
void write_attribute(Id object, const std::string& name, const AttributeValue& value);
void write_string_list_attribute(Id object, const std::string& name, const std::vector<std::string>& values);
// Every scalar string, integer or float attribute of the object (others are skipped).
std::map<std::string, AttributeValue> read_attributes(Id object);

}  // namespace glacier::io::h5
