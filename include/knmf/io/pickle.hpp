#pragma once
/// \file
/// A restricted unpickler for numpy object arrays (`descr '|O'` in a `.npy` file).
///
/// numpy stores an object array as a Python pickle of the array. Unpickling in general means
/// running arbitrary code, so this reader is not a pickle VM: it knows only the opcodes that
/// numpy's `pickle.dump(array, protocol=2..5)` emits for 1-D/2-D arrays of None, bool, int,
/// float and str, and only the reconstruction globals numpy names
/// (`numpy.core.multiarray._reconstruct` / `scalar`, `numpy.ndarray`, `numpy.dtype`, and their
/// `numpy._core` spellings from numpy 2). It never calls or imports anything: the globals are
/// matched by name and interpreted by hand. Everything else (another global such as
/// `os.system`, an unknown opcode, a truncated stream, a shape that does not match the
/// elements) is rejected with a knmf::InputError naming the source, the offending opcode or
/// global, and the byte offset in the pickle.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace knmf::io {

/// One element of a numpy object array: None (std::monostate), bool, int (64-bit), float, or
/// str (UTF-8). numpy scalars inside the array (np.int64, np.float32, np.bool_, np.str_, ...)
/// decode to the matching alternative.
using Cell = std::variant<std::monostate, bool, std::int64_t, double, std::string>;

/// True when the cell holds None.
inline bool is_none(const Cell& c) { return std::holds_alternative<std::monostate>(c); }

/// A numpy object array decoded from its pickle.
struct PickledArray {
  /// The array's shape as pickled.
  std::vector<std::int64_t> shape;
  /// The array's memory-layout flag as pickled. numpy pickles the elements in C (row-major)
  /// order whatever this flag says, so `cells` is C order either way.
  bool fortran_order = false;
  /// All elements, C (row-major) order.
  std::vector<Cell> cells;
};

/// Decode a pickled numpy object array without executing anything.
/// `what` names the source in error messages (e.g. "run.df.npz:data.npy").
/// Throws knmf::InputError for anything outside the accepted subset.
PickledArray unpickle_object_array(std::string_view bytes, const std::string& what);

}  // namespace knmf::io
