// .npy reader and writer (numpy format versions 1.0-3.0).
#include "knmf/io/npy.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "knmf/io/atomic_file.hpp"
#include "knmf/io/zip.hpp"
#include "knmf/core/error.hpp"

namespace knmf::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kAlign = 64;             // numpy's ARRAY_ALIGN
constexpr std::size_t kGrowthAxisDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kLittleEndianHost = false;
#else
constexpr bool kLittleEndianHost = true;
#endif

/// A parsed dtype string: byte order, type code and width (bytes; code points for 'U').
struct Dtype {
  char order = '|';
  char code = 0;
  std::size_t width = 0;
  std::size_t itemsize() const { return code == 'U' ? 4 * width : width; }
};

Dtype parse_descr(const std::string& descr, const std::string& what) {
  Dtype d;
  std::size_t k = 0;
  if (!descr.empty() && std::strchr("<>|=", descr[0]) != nullptr) d.order = descr[k++];
  if (k >= descr.size()) input_error(what, ": unsupported dtype '", descr, "'");
  d.code = descr[k++];
  std::size_t width = 0;
  bool has_width = false;
  for (; k < descr.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(descr[k])) || width > 100000000)
      input_error(what, ": unsupported dtype '", descr, "'");
    width = width * 10 + static_cast<std::size_t>(descr[k] - '0');
    has_width = true;
  }
  d.width = width;
  bool ok = false;
  switch (d.code) {
    case 'f': ok = width == 4 || width == 8; break;
    case 'i':
    case 'u': ok = width == 1 || width == 2 || width == 4 || width == 8; break;
    case 'b': ok = width == 1; break;
    case 'U': ok = has_width; break;
    case 'O': ok = !has_width || width == 8; break;
    default: ok = false;
  }
  if (!ok) input_error(what, ": unsupported dtype '", descr, "'");
  return d;
}

/// The header dict: a Python literal with string keys and str / bool / int-tuple values.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string& what) : t_(text), what_(what) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') {
        ++p_;
        break;
      }
      const std::string key = string_literal();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() == '[') fail("structured dtypes are not supported");
        h.descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = int_tuple();
        seen_shape = true;
      } else {
        fail("unexpected header key '", key, "'");
      }
      ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' in the header");
      }
    }
    ws();
    if (p_ != t_.size()) fail("trailing characters after the header dict");
    if (!seen_descr || !seen_order || !seen_shape)
      fail("header lacks ", !seen_descr ? "'descr'" : !seen_order ? "'fortran_order'" : "'shape'");
    return h;
  }

private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    input_error(what_, ": bad .npy header: ", args...);
  }
  char peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  void ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\t' || t_[p_] == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c) fail("expected '", c, "' at column ", p_);
    ++p_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a string at column ", p_);
    const std::size_t end = t_.find(q, p_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(t_.substr(p_ + 1, end - p_ - 1));
    p_ = end + 1;
    return s;
  }
  bool boolean() {
    if (t_.substr(p_, 4) == "True") {
      p_ += 4;
      return true;
    }
    if (t_.substr(p_, 5) == "False") {
      p_ += 5;
      return false;
    }
    fail("expected True or False at column ", p_);
  }
  std::vector<std::int64_t> int_tuple() {
    std::vector<std::int64_t> v;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') {
        ++p_;
        return v;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("bad shape at column ", p_);
      std::int64_t x = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (x > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("shape value too large");
        x = x * 10 + (t_[p_++] - '0');
      }
      if (peek() == 'L') ++p_;  // Python 2 longs
      v.push_back(x);
      ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() != ')') {
        fail("bad shape at column ", p_);
      }
    }
  }

  std::string_view t_;
  const std::string& what_;
  std::size_t p_ = 0;
};

std::uint64_t checked_size(const std::vector<std::int64_t>& shape, const std::string& what) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) input_error(what, ": negative dimension ", d);
    if (d != 0 && n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) /
                          static_cast<std::uint64_t>(d))
      input_error(what, ": shape overflows 64 bits");
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

/// For element `c` (C order) of an array of `shape`, its position in the stored data.
/// Identity for C order; for Fortran order the first index varies fastest.
class SourceIndex {
public:
  SourceIndex(const std::vector<std::int64_t>& shape, bool fortran)
      : shape_(shape), fortran_(fortran && shape.size() > 1), idx_(shape.size(), 0) {
    if (fortran_) {
      stride_.assign(shape.size(), 1);
      for (std::size_t d = 1; d < shape.size(); ++d) stride_[d] = stride_[d - 1] * shape[d - 1];
    }
  }
  /// Source position of the current element, then advance to the next one in C order.
  std::int64_t next() {
    if (!fortran_) return linear_++;
    const std::int64_t at = offset_;
    for (std::size_t d = shape_.size(); d-- > 0;) {
      offset_ += stride_[d];
      if (++idx_[d] < shape_[d]) break;
      offset_ -= stride_[d] * shape_[d];
      idx_[d] = 0;
    }
    return at;
  }

private:
  const std::vector<std::int64_t>& shape_;
  bool fortran_;
  std::vector<std::int64_t> idx_, stride_;
  std::int64_t offset_ = 0, linear_ = 0;
};

std::uint64_t load_uint(const unsigned char* p, std::size_t width, bool big) {
  std::uint64_t u = 0;
  if (big) {
    for (std::size_t k = 0; k < width; ++k) u = (u << 8) | p[k];
  } else {
    for (std::size_t k = width; k-- > 0;) u = (u << 8) | p[k];
  }
  return u;
}

void put_uint(std::string& out, std::uint64_t u, std::size_t width) {
  for (std::size_t k = 0; k < width; ++k) out.push_back(static_cast<char>((u >> (8 * k)) & 0xff));
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(shape[d]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

NpyArray make(std::string descr, NpyKind kind, std::vector<std::int64_t> shape) {
  NpyArray a;
  a.descr = std::move(descr);
  a.kind = kind;
  a.shape = std::move(shape);
  return a;
}

}  // namespace

// ---- UTF helpers ---------------------------------------------------------------------------

std::string utf32le_to_utf8(std::string_view bytes, const std::string& what) {
  std::size_t n = bytes.size() / 4;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  while (n > 0 && load_uint(p + 4 * (n - 1), 4, false) == 0) --n;  // numpy strips trailing NULs
  std::string out;
  out.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto cp = static_cast<char32_t>(load_uint(p + 4 * k, 4, false));
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      input_error(what, ": invalid code point ", static_cast<std::uint32_t>(cp), " in a unicode string");
    append_utf8(out, cp);
  }
  return out;
}

std::vector<char32_t> utf8_to_code_points(std::string_view text, const std::string& what) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  std::size_t k = 0;
  while (k < text.size()) {
    const auto c = static_cast<unsigned char>(text[k]);
    int extra = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      input_error(what, ": invalid UTF-8 byte at offset ", k);
    }
    if (static_cast<std::size_t>(extra) > text.size() - k - 1)
      input_error(what, ": truncated UTF-8 sequence at offset ", k);
    for (int e = 1; e <= extra; ++e) {
      const auto cc = static_cast<unsigned char>(text[k + static_cast<std::size_t>(e)]);
      if ((cc & 0xC0) != 0x80) input_error(what, ": invalid UTF-8 sequence at offset ", k);
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      input_error(what, ": invalid UTF-8 sequence at offset ", k);
    out.push_back(cp);
    k += static_cast<std::size_t>(extra) + 1;
  }
  return out;
}

// ---- NpyArray --------------------------------------------------------------------------------

std::int64_t NpyArray::size() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

NpyArray NpyArray::from_doubles(std::vector<std::int64_t> shape, std::vector<double> values) {
  NpyArray a = make("<f8", NpyKind::Float, std::move(shape));
  a.doubles = std::move(values);
  return a;
}

NpyArray NpyArray::from_float32(std::vector<std::int64_t> shape, std::vector<double> values) {
  NpyArray a = make("<f4", NpyKind::Float, std::move(shape));
  a.doubles = std::move(values);
  return a;
}

NpyArray NpyArray::from_int64(std::vector<std::int64_t> shape, std::vector<std::int64_t> values) {
  NpyArray a = make("<i8", NpyKind::Int, std::move(shape));
  a.ints = std::move(values);
  return a;
}

NpyArray NpyArray::from_int32(std::vector<std::int64_t> shape, std::vector<std::int64_t> values) {
  NpyArray a = make("<i4", NpyKind::Int, std::move(shape));
  a.ints = std::move(values);
  return a;
}

NpyArray NpyArray::from_bools(std::vector<std::int64_t> shape, const std::vector<bool>& values) {
  NpyArray a = make("|b1", NpyKind::Bool, std::move(shape));
  a.ints.assign(values.begin(), values.end());
  return a;
}

NpyArray NpyArray::from_strings(std::vector<std::int64_t> shape, std::vector<std::string> values) {
  NpyArray a = make("", NpyKind::Unicode, std::move(shape));
  std::size_t width = 1;
  for (const auto& s : values) width = std::max(width, utf8_to_code_points(s, "npy writer").size());
  a.descr = "<U" + std::to_string(width);
  a.strings = std::move(values);
  return a;
}

// ---- reading ---------------------------------------------------------------------------------

std::uint64_t NpyHeader::size() const {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

NpyHeader parse_npy_header(std::string_view bytes, const std::string& what,
                           std::uint64_t max_header) {
  if (bytes.size() < kMagicLen + 2 || bytes.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    input_error(what, ": not a .npy file (bad magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t len_bytes = 0;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    input_error(what, ": unsupported .npy format version ", int(major), ".", int(u[7]));
  }
  if (bytes.size() < kMagicLen + 2 + len_bytes) input_error(what, ": truncated .npy header");
  const std::uint64_t header_len = load_uint(u + kMagicLen + 2, len_bytes, false);
  const std::size_t data_start = kMagicLen + 2 + len_bytes;
  if (header_len > max_header)
    input_error(what, ": .npy header of ", header_len, " bytes announced, more than the ",
                max_header, " an .npz member's header may take");
  if (header_len > bytes.size() - data_start)
    input_error(what, ": truncated .npy header (", header_len, " bytes announced, ",
                bytes.size() - data_start, " present)");
  const Header h = HeaderParser(bytes.substr(data_start, header_len), what).parse();
  const Dtype dt = parse_descr(h.descr, what);
  NpyHeader out;
  out.descr = h.descr;
  out.fortran_order = h.fortran_order;
  out.shape = h.shape;
  out.data_offset = data_start + header_len;
  out.object = dt.code == 'O';
  const std::uint64_t n = checked_size(h.shape, what);
  if (!out.object) {
    const std::size_t item = dt.itemsize();
    if (item != 0 && n > (std::numeric_limits<std::uint64_t>::max() - out.data_offset) / item)
      input_error(what, ": array too large");
    out.data_bytes = n * item;
  }
  return out;
}

namespace {
/// The most bytes an object array's pickle may take per element: a cell is a str, int, float,
/// bool or None (knmf's unpickler takes no other), and a label or gene name needs far less.
constexpr std::uint64_t kMaxPickleBytesPerCell = 65536;
}  // namespace

NpyHeader read_npz_header(ZipReader& zip, const std::string& member) {
  const std::string what = zip.path() + ":" + member;
  const ZipEntry* e = zip.find(member);
  if (e == nullptr) input_error(zip.path(), ": archive has no entry '", member, "'");
  const NpyHeader h =
      parse_npy_header(zip.read_prefix(*e, kMagicLen + 2 + 4 + max_npy_header_bytes), what,
                       max_npy_header_bytes);
  if (h.object) {
    const std::uint64_t cells = std::max<std::uint64_t>(1, h.size());
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t bound = cells >= kMax / kMaxPickleBytesPerCell - 2
                                    ? kMax
                                    : h.data_offset + (cells + 1) * kMaxPickleBytesPerCell;
    if (e->uncompressed_size > bound)
      input_error(what, ": the archive declares ", e->uncompressed_size,
                  " bytes for an object array of shape ", shape_repr(h.shape), ", more than the ",
                  bound, " its .npy header allows (", kMaxPickleBytesPerCell, " per element)");
    return h;
  }
  const std::uint64_t need = h.data_offset + h.data_bytes;
  if (e->uncompressed_size != need)
    input_error(what, ": the archive declares ", e->uncompressed_size,
                " bytes but the .npy header declares ", need, " (shape ", shape_repr(h.shape),
                " of ", h.descr, ")");
  return h;
}

NpyArray read_npz_member(ZipReader& zip, const std::string& member) {
  read_npz_header(zip, member);
  return parse_npy(zip.read(member), zip.path() + ":" + member);
}

NpyArray parse_npy(std::string_view bytes, const std::string& what) {
  const NpyHeader h = parse_npy_header(bytes, what);
  const std::string_view data = bytes.substr(h.data_offset);
  const Dtype dt = parse_descr(h.descr, what);

  NpyArray a;
  a.descr = h.descr;
  a.shape = h.shape;
  a.fortran_order = h.fortran_order;
  const std::uint64_t n = h.size();

  if (dt.code == 'O') {
    a.kind = NpyKind::Object;
    PickledArray p = unpickle_object_array(data, what);
    if (p.shape != h.shape)
      input_error(what, ": pickled array has shape ", shape_repr(p.shape), ", header says ",
                  shape_repr(h.shape));
    a.cells = std::move(p.cells);
    return a;
  }

  const std::size_t item = dt.itemsize();
  if (data.size() != n * item)
    input_error(what, ": ", data.size(), " bytes of data, expected ", n * item, " for shape ",
                shape_repr(h.shape), " of ", h.descr);
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const bool big = dt.order == '>';
  SourceIndex src(a.shape, a.fortran_order);
  const auto count = static_cast<std::size_t>(n);

  switch (dt.code) {
    case 'f': {
      a.kind = NpyKind::Float;
      a.doubles.resize(count);
      if (item == 8 && !big && !a.fortran_order && kLittleEndianHost) {  // the common case: one copy
        if (count > 0) std::memcpy(a.doubles.data(), p, 8 * count);
        break;
      }
      for (std::size_t k = 0; k < count; ++k) {
        const std::uint64_t bits = load_uint(p + item * static_cast<std::size_t>(src.next()), item, big);
        if (item == 8) {
          std::memcpy(&a.doubles[k], &bits, 8);
        } else {
          const auto b32 = static_cast<std::uint32_t>(bits);
          float f;
          std::memcpy(&f, &b32, 4);
          a.doubles[k] = f;
        }
      }
      break;
    }
    case 'i':
    case 'u':
    case 'b': {
      a.kind = dt.code == 'b' ? NpyKind::Bool : NpyKind::Int;
      a.ints.resize(count);
      const int shift = 64 - 8 * static_cast<int>(item);
      for (std::size_t k = 0; k < count; ++k) {
        const std::uint64_t bits = load_uint(p + item * static_cast<std::size_t>(src.next()), item, big);
        if (dt.code == 'i') {
          a.ints[k] = static_cast<std::int64_t>(bits << shift) >> shift;
        } else if (dt.code == 'b') {
          a.ints[k] = bits != 0;
        } else {
          if (bits > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            input_error(what, ": uint64 value ", bits, " at element ", k, " does not fit in int64");
          a.ints[k] = static_cast<std::int64_t>(bits);
        }
      }
      break;
    }
    case 'U': {
      a.kind = NpyKind::Unicode;
      a.strings.resize(count);
      std::string le(item, '\0');
      for (std::size_t k = 0; k < count; ++k) {
        const unsigned char* e = p + item * static_cast<std::size_t>(src.next());
        for (std::size_t c = 0; c < item; c += 4)
          for (std::size_t b = 0; b < 4; ++b) le[c + b] = static_cast<char>(e[c + (big ? 3 - b : b)]);
        a.strings[k] = utf32le_to_utf8(le, what);
      }
      break;
    }
    default: input_error(what, ": unsupported dtype '", h.descr, "'");
  }
  return a;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) input_error(path, ": cannot open for reading");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) input_error(path, ": read error");
  return parse_npy(buf.str(), path);
}

// ---- writing ---------------------------------------------------------------------------------

std::string format_npy(const NpyArray& a, const std::string& what) {
  const std::uint64_t n = checked_size(a.shape, what);
  std::string descr;
  std::size_t width = 0;
  std::vector<std::vector<char32_t>> code_points;
  switch (a.kind) {
    case NpyKind::Float:
      descr = a.descr == "<f4" ? "<f4" : "<f8";
      if (a.doubles.size() != n) input_error(what, ": shape ", shape_repr(a.shape), " needs ", n, " values, got ", a.doubles.size());
      break;
    case NpyKind::Int:
      descr = a.descr == "<i4" ? "<i4" : "<i8";
      [[fallthrough]];
    case NpyKind::Bool:
      if (a.kind == NpyKind::Bool) descr = "|b1";
      if (a.ints.size() != n) input_error(what, ": shape ", shape_repr(a.shape), " needs ", n, " values, got ", a.ints.size());
      break;
    case NpyKind::Unicode:
      if (a.strings.size() != n) input_error(what, ": shape ", shape_repr(a.shape), " needs ", n, " values, got ", a.strings.size());
      width = 1;
      code_points.reserve(a.strings.size());
      for (const auto& s : a.strings) {
        code_points.push_back(utf8_to_code_points(s, what));
        width = std::max(width, code_points.back().size());
      }
      descr = "<U" + std::to_string(width);
      break;
    case NpyKind::Object:
      input_error(what, ": object arrays are not written (knmf writes no pickles)");
  }

  // The header exactly as numpy 1.24's _write_array_header builds it.
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                       shape_repr(a.shape) + ", }";
  if (!a.shape.empty()) {
    const std::size_t digits = std::to_string(a.shape[0]).size();
    if (digits < kGrowthAxisDigits) header.append(kGrowthAxisDigits - digits, ' ');
  }
  const std::size_t hlen = header.size() + 1;
  std::size_t len_bytes = 2;
  std::size_t pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
  char major = 1;
  if (hlen + pad > 0xFFFF) {
    len_bytes = 4;
    major = 2;
    pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
  }
  std::string out(kMagic, kMagicLen);
  out.push_back(major);
  out.push_back(0);
  put_uint(out, hlen + pad, len_bytes);
  out += header;
  out.append(pad, ' ');
  out.push_back('\n');

  switch (a.kind) {
    case NpyKind::Float: {
      if (descr == "<f4") {
        out.reserve(out.size() + 4 * a.doubles.size());
        for (double v : a.doubles) {
          const float f = static_cast<float>(v);
          std::uint32_t bits;
          std::memcpy(&bits, &f, 4);
          put_uint(out, bits, 4);
        }
        break;
      }
      out.reserve(out.size() + 8 * a.doubles.size());
      for (double v : a.doubles) {
        std::uint64_t bits;
        std::memcpy(&bits, &v, 8);
        put_uint(out, bits, 8);
      }
      break;
    }
    case NpyKind::Int: {
      const bool i32 = descr == "<i4";
      for (std::size_t k = 0; k < a.ints.size(); ++k) {
        const std::int64_t v = a.ints[k];
        if (i32 && (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()))
          input_error(what, ": value ", v, " at element ", k, " does not fit in int32");
        put_uint(out, static_cast<std::uint64_t>(v), i32 ? 4 : 8);
      }
      break;
    }
    case NpyKind::Bool:
      for (std::int64_t v : a.ints) out.push_back(v != 0 ? 1 : 0);
      break;
    case NpyKind::Unicode:
      for (const auto& cps : code_points) {
        for (char32_t cp : cps) put_uint(out, cp, 4);
        out.append(4 * (width - cps.size()), '\0');
      }
      break;
    case NpyKind::Object: break;
  }
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const std::string bytes = format_npy(array, path);
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace knmf::io
