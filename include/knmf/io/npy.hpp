#pragma once
/// \file
/// numpy `.npy` files (format versions 1.0, 2.0 and 3.0): reader and writer.
///
/// Layout: magic `\x93NUMPY`, two version bytes, the header length (uint16 little-endian in
/// v1.0, uint32 in v2.0/3.0), an ASCII (v3.0: UTF-8) Python dict literal
/// `{'descr': '<f8', 'fortran_order': False, 'shape': (k, g), }` padded with spaces and a
/// newline so that the data start is 64-byte aligned, then the raw data. For object arrays
/// (`descr '|O'`) the data is a Python pickle, decoded by knmf's restricted unpickler
/// (knmf/io/pickle.hpp) without executing anything.
///
/// Whatever the file's `fortran_order`, an NpyArray holds its values in C (row-major) order.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "knmf/io/pickle.hpp"

namespace knmf::io {

/// What kind of values an NpyArray holds, i.e. which of its vectors is filled.
enum class NpyKind {
  Float,    ///< `doubles`: '<f8', '<f4' (widened), and other float widths numpy uses
  Int,      ///< `ints`: '<i8', '<i4', '<i2', '|i1', '<u4', '<u2', '|u1' (and '<u8' up to 2^63-1)
  Bool,     ///< `ints` holding 0/1: '|b1'
  Unicode,  ///< `strings`: '<U{n}' fixed-width UTF-32, as UTF-8 with trailing NULs stripped
  Object,   ///< `cells`: '|O', a pickled object array
};

/// A `.npy` array: its dtype, shape and layout as stored, and its values in C order.
struct NpyArray {
  /// numpy dtype string as in the header (e.g. "<f8", "<i4", "|b1", "<U12", "|O").
  std::string descr = "<f8";
  /// The shape; an empty vector is a 0-d array (one element).
  std::vector<std::int64_t> shape;
  /// The file's layout flag. Values below are always C (row-major) order regardless.
  bool fortran_order = false;
  /// Which vector below holds the values.
  NpyKind kind = NpyKind::Float;
  std::vector<double> doubles;        ///< NpyKind::Float
  std::vector<std::int64_t> ints;     ///< NpyKind::Int and NpyKind::Bool (0/1)
  std::vector<std::string> strings;   ///< NpyKind::Unicode (UTF-8)
  std::vector<Cell> cells;            ///< NpyKind::Object

  /// Number of elements (product of shape; 1 for a 0-d array).
  std::int64_t size() const;

  /// A float64 ('<f8') array; `values` in C order.
  static NpyArray from_doubles(std::vector<std::int64_t> shape, std::vector<double> values);
  /// A float32 ('<f4') array: `values` in C order, rounded to float32 when written.
  static NpyArray from_float32(std::vector<std::int64_t> shape, std::vector<double> values);
  /// An int64 ('<i8') array.
  static NpyArray from_int64(std::vector<std::int64_t> shape, std::vector<std::int64_t> values);
  /// An int32 ('<i4') array; values must fit in int32 (InputError otherwise, when written).
  static NpyArray from_int32(std::vector<std::int64_t> shape, std::vector<std::int64_t> values);
  /// A bool ('|b1') array.
  static NpyArray from_bools(std::vector<std::int64_t> shape, const std::vector<bool>& values);
  /// A unicode ('<U{maxlen}') array of UTF-8 strings; the width is the longest string's
  /// length in code points (at least 1), as numpy chooses it.
  static NpyArray from_strings(std::vector<std::int64_t> shape, std::vector<std::string> values);
};

/// The most bytes the header (the dict after the preamble) of an `.npz` member may take:
/// v1.0's limit (its length is a uint16). The members knmf reads (a frame's 2-D data and 1-D
/// labels) need under 200 bytes, and numpy's own reader refuses more than 10,000 by default;
/// only a shape of thousands of dimensions needs more (a `.npy` file may have one).
inline constexpr std::uint64_t max_npy_header_bytes = 65535;

/// A `.npy` file's preamble and header: what the rest of the file must hold.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;  ///< bytes of the magic, version, length and header
  bool object = false;            ///< '|O': the data is a pickle, of no declared size
  std::uint64_t data_bytes = 0;   ///< bytes of data the header declares (not for object)
  /// Elements (product of the shape; 1 for a 0-d array).
  std::uint64_t size() const;
};

/// Parse the preamble and header at the start of `bytes` (at least the first data_offset
/// bytes of a `.npy` file). InputError naming `what` when malformed, unsupported, or the
/// header announces more than `max_header` bytes.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& what,
                           std::uint64_t max_header = UINT64_MAX);

class ZipReader;

/// The header of `.npy` member `member` of an `.npz` archive (at most max_npy_header_bytes),
/// read by inflating only the member's first bytes; InputError (naming `archive:member`)
/// when it is longer, or when the archive's declared
/// size of the member is not the size its header declares (preamble + header + data; for an
/// object array, at most 64 KiB per element): a zip bomb fails here, before it is inflated.
NpyHeader read_npz_header(ZipReader& zip, const std::string& member);

/// Member `member` of an `.npz` archive: its header checked as read_npz_header does, then
/// exactly the bytes it declares inflated and parsed (never more allocated for the inflate).
NpyArray read_npz_member(ZipReader& zip, const std::string& member);

/// Parse the bytes of a `.npy` file. `what` names the source in error messages
/// (a path, or "archive.npz:data.npy"). Throws knmf::InputError on anything malformed or
/// unsupported (structured dtypes, truncated data, a rejected pickle, ...).
NpyArray parse_npy(std::string_view bytes, const std::string& what);

/// Encode an array as `.npy` bytes, exactly as numpy 1.24's `np.save` lays them out
/// (header keys sorted, growth-axis padding, data 64-byte aligned; v1.0 unless the header
/// needs v2.0). Writes float64 for Float (float32, each value rounded to nearest, when
/// `descr` is "<f4"), int64 or int32 (per `descr` "<i4") for Int,
/// bool for Bool and '<U{maxlen}' for Unicode, always C order. Object arrays are not
/// written (no pickles): InputError. Also InputError when the value count does not match
/// the shape or a value does not fit the requested dtype; `what` prefixes those messages.
std::string format_npy(const NpyArray& array, const std::string& what = "npy writer");

/// Read a `.npy` file (InputError naming the path when it cannot be read or parsed).
NpyArray read_npy(const std::string& path);

/// Write a `.npy` file in place (InputError naming the path when it cannot be written).
/// Not atomic; cNMF outputs go through write_df_npz, which is.
void write_npy(const std::string& path, const NpyArray& array);

/// Decode UTF-32LE code units (as in a '<U' array; trailing NULs stripped) to UTF-8.
/// Throws InputError (prefixed with `what`) for values that are not Unicode scalar values.
std::string utf32le_to_utf8(std::string_view bytes, const std::string& what);

/// Decode UTF-8 to code points. Throws InputError (prefixed with `what`) on malformed input.
std::vector<char32_t> utf8_to_code_points(std::string_view text, const std::string& what);

}  // namespace knmf::io
