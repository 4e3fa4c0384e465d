// HDF5 handle ownership, opening files to read, error-stack messages and attribute helpers for the io module.
#include "io/hdf5_util.h"

#include <hdf5.h>

#include <filesystem>
#include <stdexcept>
#include <type_traits>

#include "util/error.h"

namespace glacier::io::h5 {

static_assert(std::is_same_v<Id, hid_t> && std::is_same_v<Status, herr_t> && kInvalidId == H5I_INVALID_HID,
              "hdf5_util.h names HDF5's handle types as they are in HDF5 1.10 and later");

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

bool Handle::reset() {
  bool ok = true;
  if (id_ >= 0 && closer_) ok = closer_(id_) >= 0;
  id_ = H5I_INVALID_HID;
  return ok;
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
herr_t collect_description(unsigned, const H5E_error2_t* error, void* data) {
  auto* descriptions = static_cast<std::vector<std::string>*>(data);
  if (error->desc && *error->desc) descriptions->emplace_back(error->desc);
  return 0;
}
}  // namespace

std::string error_detail() {
  std::vector<std::string> descriptions;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_description, &descriptions);
  H5Eclear2(H5E_DEFAULT);
  if (descriptions.empty()) return "";
  std::string detail = " (" + descriptions.front();
  if (descriptions.size() > 1) detail += ": " + descriptions.back();
  return detail + ")";
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error(what + error_detail());
  return id;
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error(what + error_detail());
}

Handle open_for_reading(const std::string& path, const std::string& kind) {
  silence_errors();
  if (!std::filesystem::exists(path)) throw InputError(kind + " " + path + ": expected an existing file, found none");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw InputError(kind + " " + path + ": expected an HDF5 file" + error_detail());
  return file;
}

Handle vlen_string_type() {
  Handle type(check(H5Tcopy(H5T_C_S1), "cannot copy the HDF5 string type"), H5Tclose);
  check_status(H5Tset_size(type.get(), H5T_VARIABLE), "cannot make a variable-length string type");
  check_status(H5Tset_cset(type.get(), H5T_CSET_UTF8), "cannot set the UTF-8 character set");
  return type;
}

bool link_exists(hid_t location, const std::string& name) { return H5Lexists(location, name.c_str(), H5P_DEFAULT) > 0; }

namespace {
void remove_attribute_if_present(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) > 0)
    check_status(H5Adelete(object, name.c_str()), "cannot replace attribute " + name);
}
}  // namespace

void write_attribute(hid_t object, const std::string& name, const AttributeValue& value) {
  remove_attribute_if_present(object, name);
  Handle space(check(H5Screate(H5S_SCALAR), "cannot create a scalar dataspace"), H5Sclose);
  const std::string what = "cannot write attribute " + name;
  if (const auto* text = std::get_if<std::string>(&value)) {
    Handle type = vlen_string_type();
    Handle attr(check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), what),
                H5Aclose);
    const char* data = text->c_str();
    check_status(H5Awrite(attr.get(), type.get(), &data), what);
  } else if (const auto* integer = std::get_if<int64_t>(&value)) {
    Handle attr(check(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), what),
                H5Aclose);
    check_status(H5Awrite(attr.get(), H5T_NATIVE_INT64, integer), what);
  } else {
    const double real = std::get<double>(value);
    Handle attr(check(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), what),
                H5Aclose);
    check_status(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &real), what);
  }
}

void write_string_list_attribute(hid_t object, const std::string& name, const std::vector<std::string>& values) {
  remove_attribute_if_present(object, name);
  const hsize_t n = values.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), "cannot create a dataspace"), H5Sclose);
  Handle type = vlen_string_type();
  const std::string what = "cannot write attribute " + name;
  Handle attr(check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), what),
              H5Aclose);
  std::vector<const char*> data;
  for (const auto& v : values) data.push_back(v.c_str());
  check_status(H5Awrite(attr.get(), type.get(), data.data()), what);
}

namespace {

bool read_one_attribute(hid_t object, const char* name, AttributeValue& out) {
  Handle attr(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return false;
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (!space.valid() || H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) return false;
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      int64_t v = 0;
      if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) < 0) return false;
      out = v;
      return true;
    }
    case H5T_FLOAT: {
      double v = 0;
      if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v) < 0) return false;
      out = v;
      return true;
    }
    case H5T_STRING: {
      if (H5Tis_variable_str(type.get()) > 0) {
        char* text = nullptr;
        Handle mem = vlen_string_type();
        if (H5Aread(attr.get(), mem.get(), &text) < 0) return false;
        out = std::string(text ? text : "");
        H5free_memory(text);
      } else {
        std::string text(H5Tget_size(type.get()), '\0');
        if (H5Aread(attr.get(), type.get(), text.data()) < 0) return false;
        text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
        out = text;
      }
      return true;
    }
    default: return false;
  }
}

herr_t collect_attribute(hid_t object, const char* name, const H5A_info_t*, void* data) {
  auto* attributes = static_cast<std::map<std::string, AttributeValue>*>(data);
  AttributeValue value;
  if (read_one_attribute(object, name, value)) (*attributes)[name] = std::move(value);
  return 0;
}

}  // namespace

std::map<std::string, AttributeValue> read_attributes(hid_t object) {
  std::map<std::string, AttributeValue> attributes;
  hsize_t position = 0;
  check_status(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &position, collect_attribute, &attributes),
               "cannot list attributes");
  return attributes;
}

}  // namespace glacier::io::h5
