#pragma once
/// \file
/// cNMF's DataFrame files: `.df.npz` (what `save_df_to_npz` writes and
/// `pd.DataFrame(**np.load(path, allow_pickle=True))` reads) and the tab-separated `.txt`
/// copies (`df.to_csv(path, sep='\t')`).
///
/// A `.df.npz` is a ZIP of three `.npy` arrays: `data` (2-D values), `index` (row labels)
/// and `columns` (column labels). Labels and object-valued data written by pandas are
/// pickled object arrays; knmf decodes them with its restricted unpickler and writes
/// labels as int64 or fixed-width unicode arrays instead (no pickles), which numpy loads
/// with or without allow_pickle into the same DataFrame.
///
/// Both writers are atomic: they write a temporary file in the destination directory,
/// fsync it, and rename it into place, so a killed process never leaves a truncated file
/// under the final name.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "knmf/io/pickle.hpp"

namespace knmf::io {

class DeflateMemo;  // zip.hpp

/// A row or column label: an integer (e.g. cNMF's component numbers 1..k, a RangeIndex)
/// or a string (gene names, cell barcodes, `iter0_topic1`).
using Label = std::variant<std::int64_t, std::string>;

/// A label as pandas prints it (the integer in decimal, or the string).
std::string label_to_string(const Label& label);

/// A cNMF DataFrame: `rows` x `cols` values in row-major order plus its labels.
struct DataFrame {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  /// numpy dtype of the values as stored (or to store): "<f8" (default), "<f4", "<i8",
  /// "<i4", "|b1", ..., or "|O" for an object (mixed-type) frame such as cNMF's job table.
  /// Writers store float32 frames ("<f4", any byte order) as '<f4' (values rounded to
  /// float32), other float types as float64, and integer/bool types as int64.
  std::string data_descr = "<f8";
  /// rows*cols values, row-major, for numeric frames (integers converted to double,
  /// exact up to 2^53). Empty for object frames.
  std::vector<double> data;
  /// rows*cols cells, row-major, for object frames (data_descr "|O"). Empty otherwise.
  std::vector<Cell> object_data;
  /// Row labels (size rows) and column labels (size cols).
  std::vector<Label> index, columns;

  /// True when the values are an object array (see object_data).
  bool is_object() const { return data_descr == "|O"; }
  /// True for a float32 frame (data_descr "<f4", ">f4" or "=f4"): its values are float32
  /// numbers held as double, written as '<f4' and printed at float32 precision.
  bool is_float32() const;
  /// Value (r, c) of a numeric frame.
  double at(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
  /// Cell (r, c) of an object frame.
  const Cell& cell(std::int64_t r, std::int64_t c) const {
    return object_data[static_cast<std::size_t>(r * cols + c)];
  }
  /// Position of the column labelled `name` (string label), or -1.
  std::int64_t find_column(const std::string& name) const;
};

/// Read a cNMF `.df.npz`. Throws knmf::InputError naming the file for a missing array,
/// inconsistent shapes, labels that are neither int nor str, or any ZIP/npy/pickle problem.
DataFrame read_df_npz(const std::string& path);

/// Write a `.df.npz` atomically (deflate ZIP of data.npy, index.npy, columns.npy; data as
/// float32 for float32 frames (see DataFrame::is_float32), float64 for other float frames,
/// int64 for integer/bool frames; labels as int64 or '<U{maxlen}' arrays).
/// InputError naming the path when the destination cannot be written, or when the frame
/// cannot be stored without pickles (object data, labels mixing ints and strings) or is
/// inconsistent (vector sizes vs rows/cols).
/// `memo`: deflated entries to reuse across files (zip.hpp, DeflateMemo); the same bytes.
void write_df_npz(const std::string& path, const DataFrame& df, DeflateMemo* memo = nullptr);

/// Write the frame as tab-separated text like `df.to_csv(path, sep='\t')` with pandas 1.5:
/// a header line of an empty cell then the column labels, then one line per row: the index
/// label and the values. Floats are printed as numpy's str() does (the shortest repr that
/// round-trips; float32 frames at float32 precision), NaN as an empty field. Atomic, as
/// write_df_npz.
void write_df_txt(const std::string& path, const DataFrame& df);

/// A double as Python's repr() / numpy's str() print it: shortest round-trip digits,
/// positional for 1e-4 <= |x| < 1e16 (with ".0" when integral), scientific otherwise
/// ("1e-05", "1.5e+16"), "nan", "inf", "-inf".
std::string format_float_repr(double value);

/// A float32 as numpy's str(np.float32(x)) prints it: shortest digits at float32 precision,
/// and the positional/scientific choice made on the float32 value itself (so
/// float32(0.0001), which is just below 1e-4, prints as "1e-04").
std::string format_float32_repr(float value);

/// A cell as Python's str() prints it ("None", "True", "3", "0.5", the string itself).
std::string cell_to_string(const Cell& cell);

}  // namespace knmf::io
