// cNMF's DataFrame files: .df.npz (read/write) and the tab-separated .txt copies.
#include "knmf/io/dataframe.hpp"
#include "knmf/io/utf8.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

namespace knmf::io {

namespace {

std::vector<Label> to_labels(const NpyArray& a, const std::string& what) {
  if (a.shape.size() != 1) input_error(what, ": labels must be a 1-D array, got ", a.shape.size(), " dimensions");
  std::vector<Label> out;
  out.reserve(static_cast<std::size_t>(a.size()));
  switch (a.kind) {
    case NpyKind::Int:
      for (std::int64_t v : a.ints) out.emplace_back(v);
      break;
    case NpyKind::Unicode:
      for (const auto& s : a.strings) out.emplace_back(s);
      break;
    case NpyKind::Object:
      for (std::size_t k = 0; k < a.cells.size(); ++k) {
        const Cell& c = a.cells[k];
        if (const auto* i = std::get_if<std::int64_t>(&c)) {
          out.emplace_back(*i);
        } else if (const auto* s = std::get_if<std::string>(&c)) {
          out.emplace_back(*s);
        } else {
          input_error(what, ": label ", k, " is '", cell_to_string(c), "' (only int and str labels are supported)");
        }
      }
      break;
    default: input_error(what, ": labels of dtype '", a.descr, "' are not supported (only int and str)");
  }
  return out;
}

NpyArray from_labels(const std::vector<Label>& labels, const std::string& what) {
  const auto n = static_cast<std::int64_t>(labels.size());
  std::size_t strings = 0;
  for (const auto& l : labels) strings += std::holds_alternative<std::string>(l);
  if (strings == 0) {
    std::vector<std::int64_t> v;
    v.reserve(labels.size());
    for (const auto& l : labels) v.push_back(std::get<std::int64_t>(l));
    return NpyArray::from_int64({n}, std::move(v));
  }
  if (strings != labels.size())
    input_error(what, ": labels mix ints and strings (cannot be stored without a pickle)");
  std::vector<std::string> v;
  v.reserve(labels.size());
  for (const auto& l : labels) v.push_back(std::get<std::string>(l));
  return NpyArray::from_strings({n}, std::move(v));
}

void check_shape(const DataFrame& df, const std::string& path) {
  if (df.rows < 0 || df.cols < 0) input_error(path, ": negative DataFrame shape");
  const auto n = static_cast<std::size_t>(df.rows) * static_cast<std::size_t>(df.cols);
  const std::size_t have = df.is_object() ? df.object_data.size() : df.data.size();
  if (have != n)
    input_error(path, ": DataFrame of ", df.rows, " x ", df.cols, " holds ", have, " values");
  if (df.index.size() != static_cast<std::size_t>(df.rows))
    input_error(path, ": DataFrame has ", df.rows, " rows but ", df.index.size(), " index labels");
  if (df.columns.size() != static_cast<std::size_t>(df.cols))
    input_error(path, ": DataFrame has ", df.cols, " columns but ", df.columns.size(), " column labels");
}

/// The descr's type code: 'f', 'i', 'u', 'b', 'O', ... (after the byte-order character).
char type_code(const std::string& descr) {
  if (descr.empty()) return '?';
  return std::strchr("<>|=", descr[0]) != nullptr ? (descr.size() > 1 ? descr[1] : '?') : descr[0];
}

/// numpy's str() of a float from its shortest round-trip digits ("d.ddde±x", std::to_chars):
/// positional when 1e-4 <= |x| < 1e16 (or x == 0), with ".0" when integral; otherwise
/// scientific with at least two exponent digits. numpy decides on the value itself (so
/// float32(1e-4) = 9.99999975e-05 prints as "1e-04"); for float64 this equals Python's repr.
std::string numpy_float_str(const char* first, const char* last, bool positional) {
  std::string_view s(first, static_cast<std::size_t>(last - first));
  std::string out;
  if (!s.empty() && s[0] == '-') {
    out = "-";
    s.remove_prefix(1);
  }
  const std::size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exp = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+'), s.data() + s.size(), exp);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (positional) {
    if (exp >= 0) {
      const auto int_len = static_cast<std::size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const std::string mag = std::to_string(exp < 0 ? -exp : exp);
    if (mag.size() < 2) out += "0";
    out += mag;
  }
  return out;
}

template <class F>
std::string float_repr(F value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  const double mag = std::fabs(static_cast<double>(value));
  const bool positional = mag == 0.0 || (mag >= 1e-4 && mag < 1e16);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  return numpy_float_str(buf, r.ptr, positional);
}

/// csv.QUOTE_MINIMAL for sep '\t', quotechar '"' and lineterminator '\n'.
std::string csv_field(const std::string& s) {
  if (s.find_first_of("\t\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

// ---- formatting ------------------------------------------------------------------------------

std::string format_float_repr(double value) { return float_repr(value); }
std::string format_float32_repr(float value) { return float_repr(value); }

std::string cell_to_string(const Cell& c) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_float_repr(d); }
    std::string operator()(const std::string& s) const { return s; }
  };
  return std::visit(Visitor{}, c);
}

std::string label_to_string(const Label& label) {
  if (const auto* i = std::get_if<std::int64_t>(&label)) return std::to_string(*i);
  return std::get<std::string>(label);
}

bool DataFrame::is_float32() const {
  return data_descr == "<f4" || data_descr == ">f4" || data_descr == "=f4" || data_descr == "f4";
}

std::int64_t DataFrame::find_column(const std::string& name) const {
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const auto* s = std::get_if<std::string>(&columns[c]);
    if (s != nullptr && *s == name) return static_cast<std::int64_t>(c);
  }
  return -1;
}

// ---- .df.npz ---------------------------------------------------------------------------------

DataFrame read_df_npz(const std::string& path) {
  ZipReader zip(path);
  auto entry_of = [&](const char* name) {
    const std::string entry = std::string(name) + ".npy";
    if (zip.find(entry) == nullptr) input_error(path, ": no '", name, "' array (entry ", entry, ")");
    return entry;
  };
  // The three headers first (each member's declared size checked against its header), and
  // the data's shape against the labels: a member is inflated only when the frame needs all of it.
  const NpyHeader data_h = read_npz_header(zip, entry_of("data"));
  const NpyHeader index_h = read_npz_header(zip, entry_of("index"));
  const NpyHeader columns_h = read_npz_header(zip, entry_of("columns"));
  if (data_h.shape.size() != 2)
    input_error(path, ":data.npy: expected a 2-D array, got ", data_h.shape.size(), " dimensions");
  for (const auto* h : {&index_h, &columns_h})
    if (h->shape.size() != 1)
      input_error(path, h == &index_h ? ":index.npy" : ":columns.npy",
                  ": labels must be a 1-D array, got ", h->shape.size(), " dimensions");
  if (index_h.shape[0] != data_h.shape[0])
    input_error(path, ": ", index_h.shape[0], " index labels for ", data_h.shape[0], " rows");
  if (columns_h.shape[0] != data_h.shape[1])
    input_error(path, ": ", columns_h.shape[0], " column labels for ", data_h.shape[1], " columns");
  const NpyArray index = read_npz_member(zip, "index.npy");
  const NpyArray columns = read_npz_member(zip, "columns.npy");
  const NpyArray data = read_npz_member(zip, "data.npy");

  DataFrame df;
  df.rows = data.shape[0];
  df.cols = data.shape[1];
  df.data_descr = data.descr;
  switch (data.kind) {
    case NpyKind::Float: df.data = data.doubles; break;
    case NpyKind::Int:
    case NpyKind::Bool: df.data.assign(data.ints.begin(), data.ints.end()); break;
    case NpyKind::Object:
      df.data_descr = "|O";
      df.object_data = data.cells;
      break;
    case NpyKind::Unicode:
      input_error(path, ":data.npy: string-valued frames ('", data.descr, "') are not supported");
  }
  df.index = to_labels(index, path + ":index.npy");
  df.columns = to_labels(columns, path + ":columns.npy");
  if (df.index.size() != static_cast<std::size_t>(df.rows))
    input_error(path, ": ", df.index.size(), " index labels for ", df.rows, " rows");
  if (df.columns.size() != static_cast<std::size_t>(df.cols))
    input_error(path, ": ", df.columns.size(), " column labels for ", df.cols, " columns");
  return df;
}

/// The frame's string labels must be UTF-8 (numpy's '<U' strings, and the text files cNMF's
/// readers decode as UTF-8): InputError naming the file, the axis and the position otherwise.
static void require_utf8_labels(const DataFrame& df, const std::string& path) {
  for (const auto* axis : {&df.index, &df.columns})
    for (std::size_t i = 0; i < axis->size(); ++i)
      if (const auto* s = std::get_if<std::string>(&(*axis)[i]))
        require_utf8_name(*s, path + ": " + (axis == &df.index ? "index" : "column") + " label " +
                                  std::to_string(i));
}

void write_df_npz(const std::string& path, const DataFrame& df, DeflateMemo* memo) {
  check_shape(df, path);
  require_utf8_labels(df, path);
  if (df.is_object()) input_error(path, ": object-valued frames are not written (they need a pickle)");
  const std::vector<std::int64_t> shape{df.rows, df.cols};
  NpyArray data;
  const char code = type_code(df.data_descr);
  if (code == 'f') {
    data = df.is_float32() ? NpyArray::from_float32(shape, df.data) : NpyArray::from_doubles(shape, df.data);
  } else if (code == 'i' || code == 'u' || code == 'b') {
    std::vector<std::int64_t> v(df.data.size());
    for (std::size_t k = 0; k < v.size(); ++k) {
      const double x = df.data[k];
      if (!(std::trunc(x) == x && std::fabs(x) < 9.2233720368547758e18))
        input_error(path, ": value ", x, " at position ", k, " of an integer frame is not an int64");
      v[k] = static_cast<std::int64_t>(x);
    }
    data = NpyArray::from_int64(shape, std::move(v));
  } else {
    input_error(path, ": cannot write data of dtype '", df.data_descr, "'");
  }
  const std::string data_npy = format_npy(data, path + ":data.npy");
  const std::string index_npy = format_npy(from_labels(df.index, path + ":index"), path + ":index.npy");
  const std::string columns_npy =
      format_npy(from_labels(df.columns, path + ":columns"), path + ":columns.npy");

  AtomicFile file(path);
  ZipWriteOptions zo;
  zo.memo = memo;
  ZipWriter zip([&](const char* p, std::size_t n) { file.write(p, n); }, zo);
  zip.add("data.npy", data_npy);
  zip.add("index.npy", index_npy);
  zip.add("columns.npy", columns_npy);
  zip.finish();
  file.commit();
}

// ---- .txt ------------------------------------------------------------------------------------

void write_df_txt(const std::string& path, const DataFrame& df) {
  check_shape(df, path);
  require_utf8_labels(df, path);
  const char code = type_code(df.data_descr);
  const bool f32 = df.is_float32();
  auto value = [&](std::int64_t r, std::int64_t c) -> std::string {
    if (df.is_object()) {
      const Cell& cell = df.cell(r, c);
      if (is_none(cell)) return "";
      if (const auto* d = std::get_if<double>(&cell)) return std::isnan(*d) ? "" : format_float_repr(*d);
      return csv_field(cell_to_string(cell));
    }
    const double x = df.at(r, c);
    if (code == 'f') {
      if (std::isnan(x)) return "";
      return f32 ? format_float32_repr(static_cast<float>(x)) : format_float_repr(x);
    }
    if (code == 'b') return x != 0 ? "True" : "False";
    return std::to_string(static_cast<std::int64_t>(x));
  };

  AtomicFile file(path);
  std::string line;
  for (const auto& l : df.columns) line += "\t" + csv_field(label_to_string(l));
  line += "\n";
  file.write(line.data(), line.size());
  for (std::int64_t r = 0; r < df.rows; ++r) {
    line = csv_field(label_to_string(df.index[static_cast<std::size_t>(r)]));
    for (std::int64_t c = 0; c < df.cols; ++c) line += "\t" + value(r, c);
    line += "\n";
    file.write(line.data(), line.size());
  }
  file.commit();
}

}  // namespace knmf::io
