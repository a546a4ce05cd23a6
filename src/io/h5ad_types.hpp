#pragma once
/// \file
/// Internal: mapping between knmf::io::ValueType, HDF5 datatypes and C++ types, and the
/// convert-and-check loops of the .h5ad reader (each value is checked as it is converted).

#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "knmf/io/h5ad.hpp"

namespace knmf::io::detail {

/// The ValueType of an HDF5 datatype (integers of 1/2/4/8 bytes, IEEE floats of 4/8 bytes);
/// empty for anything else (strings, enums, float16, compounds...).
inline std::optional<ValueType> value_type_of(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) {
    if (size == 4) return ValueType::Float32;
    if (size == 8) return ValueType::Float64;
    return std::nullopt;
  }
  if (cls != H5T_INTEGER) return std::nullopt;
  const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
  switch (size) {
    case 1: return is_signed ? ValueType::Int8 : ValueType::UInt8;
    case 2: return is_signed ? ValueType::Int16 : ValueType::UInt16;
    case 4: return is_signed ? ValueType::Int32 : ValueType::UInt32;
    case 8: return is_signed ? ValueType::Int64 : ValueType::UInt64;
    default: return std::nullopt;
  }
}

/// A numpy-style name of an HDF5 datatype, for messages: float16, int8, uint64, complex64,
/// string, enum (h5py's bool), ...
inline std::string type_name(hid_t type) {
  const std::size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return "float" + std::to_string(bits);
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_2 ? "int" : "uint") + std::to_string(bits);
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum (h5py's bool is one)";
    case H5T_COMPOUND:
      // h5py stores numpy's complex as a compound {r, i} of two floats
      if (H5Tget_nmembers(type) == 2) {
        const hid_t r = H5Tget_member_type(type, 0);
        const bool complex = H5Tget_class(r) == H5T_FLOAT;
        H5Tclose(r);
        if (complex) return "complex" + std::to_string(bits);
      }
      return "compound (a structured dtype)";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_ARRAY: return "array";
    default: return "of HDF5 class " + std::to_string(int(H5Tget_class(type)));
  }
}

inline bool is_integer(ValueType t) { return t != ValueType::Float32 && t != ValueType::Float64; }

/// Call f(S{}) with S the C++ type of t.
template <class F>
decltype(auto) visit_type(ValueType t, F&& f) {
  switch (t) {
    case ValueType::Int8: return f(std::int8_t{});
    case ValueType::Int16: return f(std::int16_t{});
    case ValueType::Int32: return f(std::int32_t{});
    case ValueType::Int64: return f(std::int64_t{});
    case ValueType::UInt8: return f(std::uint8_t{});
    case ValueType::UInt16: return f(std::uint16_t{});
    case ValueType::UInt32: return f(std::uint32_t{});
    case ValueType::UInt64: return f(std::uint64_t{});
    case ValueType::Float32: return f(float{});
    case ValueType::Float64: break;
  }
  return f(double{});
}

/// The native HDF5 memory type matching t (HDF5 handles the file's byte order).
inline hid_t native_type(ValueType t) {
  switch (t) {
    case ValueType::Int8: return H5T_NATIVE_INT8;
    case ValueType::Int16: return H5T_NATIVE_INT16;
    case ValueType::Int32: return H5T_NATIVE_INT32;
    case ValueType::Int64: return H5T_NATIVE_INT64;
    case ValueType::UInt8: return H5T_NATIVE_UINT8;
    case ValueType::UInt16: return H5T_NATIVE_UINT16;
    case ValueType::UInt32: return H5T_NATIVE_UINT32;
    case ValueType::UInt64: return H5T_NATIVE_UINT64;
    case ValueType::Float32: return H5T_NATIVE_FLOAT;
    case ValueType::Float64: break;
  }
  return H5T_NATIVE_DOUBLE;
}

inline std::size_t size_of(ValueType t) {
  return visit_type(t, [](auto tag) { return sizeof(tag); });
}

/// A value in a form that prints as a number (int8_t would print as a character).
template <class S>
auto printable(S v) {
  if constexpr (std::is_floating_point_v<S>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_signed_v<S>) {
    return static_cast<std::int64_t>(v);
  } else {
    return static_cast<std::uint64_t>(v);
  }
}

/// True when the integer v lies in [0, bound).
template <class S>
bool index_in_range(S v, std::int64_t bound) {
  if constexpr (std::is_signed_v<S>) {
    return v >= 0 && static_cast<std::int64_t>(v) < bound;
  } else {
    return static_cast<std::uint64_t>(v) < static_cast<std::uint64_t>(bound);
  }
}

/// Convert n integer indices of on-disk type t at src, each required to lie in [0, bound),
/// to int32: sink(k, index) for each k in order, or on_bad(k, printable value) (which must
/// throw) for the first out-of-range one.
template <class Sink, class OnBad>
void convert_indices(ValueType t, const void* src, std::int64_t n, std::int64_t bound,
                     Sink&& sink, OnBad&& on_bad) {
  visit_type(t, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_integral_v<S>) {
      const S* s = static_cast<const S*>(src);
      for (std::int64_t k = 0; k < n; ++k) {
        if (!index_in_range(s[k], bound)) on_bad(k, printable(s[k]));
        sink(k, static_cast<std::int32_t>(s[k]));
      }
    }
  });
}

/// Why a value is not acceptable as NMF input, or nullptr when it is.
template <class S, class T>
const char* bad_value_reason(S v, T converted) {
  if constexpr (std::is_floating_point_v<S>) {
    if (std::isnan(v) || std::isinf(v)) return "is not finite";
    if (v < 0) return "is negative";
    if (!std::isfinite(converted)) return "does not fit in the destination type";
    return nullptr;
  } else if constexpr (std::is_signed_v<S>) {
    return v < 0 ? "is negative" : nullptr;
  } else {
    (void)v;
    (void)converted;
    return nullptr;
  }
}

/// Convert n values of on-disk type t at src to T, checking each (finite, non-negative):
/// sink(k, value) for each k in order, or on_bad(k, printable value, reason) (which must
/// throw) for the first bad one.
template <class T, class Sink, class OnBad>
void convert_values(ValueType t, const void* src, std::int64_t n, Sink&& sink, OnBad&& on_bad) {
  visit_type(t, [&](auto tag) {
    using S = decltype(tag);
    const S* s = static_cast<const S*>(src);
    for (std::int64_t k = 0; k < n; ++k) {
      const S v = s[k];
      const T d = static_cast<T>(v);
      if constexpr (std::is_floating_point_v<S>) {
        // One well-predicted branch on the fast path; details only for a bad value.
        if (!(v >= 0 && d <= std::numeric_limits<T>::max())) on_bad(k, printable(v), bad_value_reason(v, d));
      } else if constexpr (std::is_signed_v<S>) {
        if (v < 0) on_bad(k, printable(v), "is negative");
      }
      sink(k, d);
    }
  });
}

}  // namespace knmf::io::detail
