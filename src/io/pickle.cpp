// Restricted unpickler for numpy object arrays: a tiny stack machine over plain data that
// interprets numpy's reconstruction globals by name and never executes anything.
#include "knmf/io/pickle.hpp"

#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "knmf/core/error.hpp"
#include "knmf/io/npy.hpp"

namespace knmf::io {

namespace {

/// The only callables a pickle may name.
enum class Global { Reconstruct, NdArray, Dtype, Scalar };

enum class Kind { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Dtype, Array };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Dtype: return "numpy.dtype";
    case Kind::Array: return "numpy.ndarray";
  }
  return "?";
}

/// A value on the pickle stack. Objects live in the unpickler's arena and are referred to by
/// pointer (the stack and memo share them, as Python does, so BUILD on a memoized object is
/// seen through every reference).
struct Obj {
  Kind kind = Kind::None;
  bool b = false;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;             ///< Str / Bytes payload; Dtype: type string such as "i8", "U5", "O8"
  std::vector<Obj*> items;   ///< Tuple / List elements; Dict as key, value, key, value...
  Global global = Global::Reconstruct;
  char byteorder = '=';      ///< Dtype: from its BUILD state
  // Array (after BUILD)
  bool built = false;
  std::vector<std::int64_t> shape;
  bool fortran = false;
  Obj* dtype = nullptr;
};

const char* opcode_name(std::uint8_t op) {
  switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case '.': return "STOP";
    case '(': return "MARK";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'G': return "BINFLOAT";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case ')': return "EMPTY_TUPLE";
    case ']': return "EMPTY_LIST";
    case 'l': return "LIST";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '}': return "EMPTY_DICT";
    case 'd': return "DICT";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x81: return "NEWOBJ";
    // Known pickle opcodes that numpy arrays never need: rejected by name.
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

std::string describe_opcode(std::uint8_t op) {
  std::ostringstream os;
  os << "0x" << std::hex << int(op);
  if (const char* name = opcode_name(op)) os << " (" << name << ")";
  return os.str();
}

class Unpickler {
public:
  Unpickler(std::string_view data, const std::string& what) : data_(data), what_(what) {}

  PickledArray run() {
    const Obj* result = execute();
    return to_array(result);
  }

private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    input_error(what_, ": pickle: ", args..., " at pickle byte ", op_pos_);
  }

  // ---- reading ---------------------------------------------------------------------------
  std::string_view take(std::uint64_t n) {
    if (n > data_.size() - pos_) {
      fail("truncated (", describe_opcode(op_), " needs ", n, " bytes, ", data_.size() - pos_,
           " left)");
    }
    std::string_view v = data_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return v;
  }
  std::uint64_t uint_le(int nbytes) {
    const std::string_view b = take(static_cast<std::uint64_t>(nbytes));
    std::uint64_t v = 0;
    for (int k = nbytes - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[k]);
    return v;
  }
  std::string_view line() {
    const std::size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > 256) fail("malformed GLOBAL name");
    std::string_view v = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return v;
  }

  // ---- objects and the stack -------------------------------------------------------------
  Obj* make(Kind kind) {
    arena_.push_back(std::make_unique<Obj>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }
  void push(Obj* o) { stack_.push_back(o); }
  Obj* pop() {
    if (stack_.size() <= stack_floor()) fail(describe_opcode(op_), " on an empty stack");
    Obj* o = stack_.back();
    stack_.pop_back();
    return o;
  }
  Obj* top() {
    if (stack_.size() <= stack_floor()) fail(describe_opcode(op_), " on an empty stack");
    return stack_.back();
  }
  std::size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<Obj*> pop_mark() {
    if (marks_.empty()) fail(describe_opcode(op_), " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Obj*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Obj* tuple(std::vector<Obj*> items) {
    Obj* t = make(Kind::Tuple);
    t->items = std::move(items);
    return t;
  }
  Obj* expect(Obj* o, Kind kind, const char* role) {
    if (o->kind != kind) fail(role, " is a ", kind_name(o->kind), ", expected ", kind_name(kind));
    return o;
  }

  // ---- the allowed globals ---------------------------------------------------------------
  Obj* global(std::string_view module, std::string_view name) {
    const bool multiarray = module == "numpy.core.multiarray" || module == "numpy._core.multiarray";
    Obj* g = make(Kind::Global);
    if (multiarray && name == "_reconstruct") {
      g->global = Global::Reconstruct;
    } else if (multiarray && name == "scalar") {
      g->global = Global::Scalar;
    } else if (module == "numpy" && name == "ndarray") {
      g->global = Global::NdArray;
    } else if (module == "numpy" && name == "dtype") {
      g->global = Global::Dtype;
    } else {
      fail("forbidden global '", module, ".", name, "'");
    }
    return g;
  }

  Obj* call(Obj* callable, Obj* args) {
    expect(callable, Kind::Global, "the REDUCE callable");
    expect(args, Kind::Tuple, "the REDUCE arguments");
    const auto& a = args->items;
    switch (callable->global) {
      case Global::Reconstruct: {
        // _reconstruct(ndarray, (0,), b'b'): an empty array that BUILD then fills.
        if (a.size() != 3 || a[0]->kind != Kind::Global || a[0]->global != Global::NdArray)
          fail("_reconstruct called with unexpected arguments");
        return make(Kind::Array);
      }
      case Global::Dtype: {
        // dtype('i8', False, True): the type string; BUILD adds the byte order.
        if (a.empty() || a[0]->kind != Kind::Str) fail("numpy.dtype called without a type string");
        Obj* d = make(Kind::Dtype);
        d->s = a[0]->s;
        return d;
      }
      case Global::Scalar: {
        // scalar(dtype, raw bytes): a numpy scalar such as np.int64(5).
        if (a.size() != 2 || a[0]->kind != Kind::Dtype || a[1]->kind != Kind::Bytes)
          fail("numpy scalar with unexpected arguments");
        return decode_scalar(*a[0], a[1]->s);
      }
      case Global::NdArray: break;
    }
    fail("numpy.ndarray cannot be called with REDUCE");
  }

  Obj* decode_scalar(const Obj& dtype, std::string_view raw) {
    const std::string& t = dtype.s;
    if (t.empty()) fail("empty dtype string");
    const char code = t[0];
    std::size_t width = 0;
    for (std::size_t k = 1; k < t.size(); ++k) {
      if (t[k] < '0' || t[k] > '9' || width > 1000000) fail("unsupported dtype '", t, "'");
      width = width * 10 + static_cast<std::size_t>(t[k] - '0');
    }
    const bool big = dtype.byteorder == '>';
    if (code == 'U') {
      if (raw.size() % 4 != 0) fail("numpy str_ scalar of ", raw.size(), " bytes");
      std::string le(raw);
      if (big)
        for (std::size_t k = 0; k < le.size(); k += 4) std::swap(le[k], le[k + 3]), std::swap(le[k + 1], le[k + 2]);
      Obj* o = make(Kind::Str);
      o->s = utf32le_to_utf8(le, what_);
      return o;
    }
    const bool numeric = (code == 'b' && width == 1) ||
                         ((code == 'i' || code == 'u') && (width == 1 || width == 2 || width == 4 || width == 8)) ||
                         (code == 'f' && (width == 4 || width == 8));
    if (!numeric) fail("numpy scalar of unsupported dtype '", t, "'");
    if (raw.size() != width) fail("numpy scalar '", t, "' with ", raw.size(), " bytes");
    unsigned char bytes[8] = {};
    for (std::size_t k = 0; k < width; ++k)
      bytes[k] = static_cast<unsigned char>(raw[big ? width - 1 - k : k]);
    std::uint64_t u = 0;
    for (std::size_t k = width; k-- > 0;) u = (u << 8) | bytes[k];
    if (code == 'b') {
      Obj* o = make(Kind::Bool);
      o->b = u != 0;
      return o;
    }
    if (code == 'f') {
      Obj* o = make(Kind::Float);
      if (width == 4) {
        float v;
        const auto u32 = static_cast<std::uint32_t>(u);
        std::memcpy(&v, &u32, 4);
        o->f = v;
      } else {
        std::memcpy(&o->f, &u, 8);
      }
      return o;
    }
    Obj* o = make(Kind::Int);
    if (code == 'u') {
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail("numpy uint64 scalar ", u, " does not fit in int64");
      o->i = static_cast<std::int64_t>(u);
    } else {
      const int shift = 64 - 8 * static_cast<int>(width);
      o->i = static_cast<std::int64_t>(u << shift) >> shift;  // sign-extend
    }
    return o;
  }

  void build(Obj* obj, Obj* state) {
    if (obj->kind == Kind::Dtype) {
      // (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
      expect(state, Kind::Tuple, "the dtype state");
      const auto& s = state->items;
      if (s.size() < 8 || s[1]->kind != Kind::Str || s[1]->s.size() != 1)
        fail("unexpected numpy.dtype state");
      if (s[2]->kind != Kind::None || s[3]->kind != Kind::None || s[4]->kind != Kind::None)
        fail("structured or subarray dtype '", obj->s, "' is not supported");
      obj->byteorder = s[1]->s[0];
      return;
    }
    if (obj->kind == Kind::Array) {
      // (version, shape, dtype, is_fortran, data); the oldest form omits the version.
      expect(state, Kind::Tuple, "the ndarray state");
      auto s = state->items;
      if (s.size() == 5) s.erase(s.begin());
      if (s.size() != 4 || obj->built) fail("unexpected numpy.ndarray state");
      expect(s[0], Kind::Tuple, "the ndarray shape");
      expect(s[1], Kind::Dtype, "the ndarray dtype");
      expect(s[2], Kind::Bool, "the ndarray fortran flag");
      if (s[1]->s.empty() || s[1]->s[0] != 'O')
        fail("pickled ndarray of dtype '", s[1]->s, "' is not supported (only object arrays)");
      expect(s[3], Kind::List, "the object array's elements");
      for (const Obj* d : s[0]->items) {
        if (d->kind != Kind::Int || d->i < 0) fail("invalid ndarray shape");
        obj->shape.push_back(d->i);
      }
      obj->dtype = s[1];
      obj->fortran = s[2]->b;
      obj->items = s[3]->items;
      obj->built = true;
      return;
    }
    fail("BUILD on a ", kind_name(obj->kind), " is not supported");
  }

  // ---- the interpreter -------------------------------------------------------------------
  const Obj* execute() {
    while (true) {
      op_pos_ = pos_;
      if (pos_ >= data_.size()) fail("truncated (no STOP)");
      op_ = static_cast<std::uint8_t>(data_[pos_++]);
      switch (op_) {
        case 0x80: {  // PROTO
          const auto proto = uint_le(1);
          if (proto < 2 || proto > 5) fail("unsupported pickle protocol ", proto);
          break;
        }
        case 0x95: uint_le(8); break;  // FRAME: framing only, the opcodes follow inline
        case '.': {                   // STOP
          const Obj* result = pop();
          if (pos_ != data_.size()) fail(data_.size() - pos_, " bytes after STOP");
          return result;
        }
        case '(': marks_.push_back(stack_.size()); break;
        case 'c': {
          const std::string module(line());
          const std::string name(line());
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Obj* name = expect(pop(), Kind::Str, "the STACK_GLOBAL name");
          Obj* module = expect(pop(), Kind::Str, "the STACK_GLOBAL module");
          push(global(module->s, name->s));
          break;
        }
        case 'X': push_text(Kind::Str, uint_le(4)); break;
        case 0x8c: push_text(Kind::Str, uint_le(1)); break;
        case 0x8d: push_text(Kind::Str, uint_le(8)); break;
        case 'B': push_text(Kind::Bytes, uint_le(4)); break;
        case 'C': push_text(Kind::Bytes, uint_le(1)); break;
        case 0x8e: push_text(Kind::Bytes, uint_le(8)); break;
        case 'J': push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(uint_le(4)))); break;
        case 'K': push_int(static_cast<std::int64_t>(uint_le(1))); break;
        case 'M': push_int(static_cast<std::int64_t>(uint_le(2))); break;
        case 0x8a: push_long(uint_le(1)); break;
        case 0x8b: push_long(uint_le(4)); break;
        case 'G': {
          const std::string_view b = take(8);
          std::uint64_t u = 0;
          for (char c : b) u = (u << 8) | static_cast<unsigned char>(c);  // big-endian
          Obj* o = make(Kind::Float);
          std::memcpy(&o->f, &u, 8);
          push(o);
          break;
        }
        case 'N': push(make(Kind::None)); break;
        case 0x88:
        case 0x89: {
          Obj* o = make(Kind::Bool);
          o->b = op_ == 0x88;
          push(o);
          break;
        }
        case 'q': memo_[uint_le(1)] = top(); break;
        case 'r': memo_[uint_le(4)] = top(); break;
        case 0x94: {  // MEMOIZE
          const std::uint64_t key = memo_.size();
          memo_[key] = top();
          break;
        }
        case 'h': push(memo_get(uint_le(1))); break;
        case 'j': push(memo_get(uint_le(4))); break;
        case 'R': {
          Obj* args = pop();
          Obj* callable = pop();
          push(call(callable, args));
          break;
        }
        case 0x81: {  // NEWOBJ: cls.__new__(cls, *args); only ndarray, as _reconstruct
          pop();
          Obj* cls = expect(pop(), Kind::Global, "the NEWOBJ class");
          if (cls->global != Global::NdArray) fail("NEWOBJ of a non-class global");
          push(make(Kind::Array));
          break;
        }
        case 'b': {
          Obj* state = pop();
          build(top(), state);
          break;
        }
        default:
          if (!container_op()) fail("unsupported opcode ", describe_opcode(op_));
      }
    }
  }

  /// The opcodes that build tuples, lists and dicts: false for any other opcode.
  bool container_op() {
    switch (op_) {
      case 't': push(tuple(pop_mark())); break;
      case ')': push(tuple({})); break;
      case 0x85:
      case 0x86:
      case 0x87: {
        const int n = op_ - 0x84;
        std::vector<Obj*> items(static_cast<std::size_t>(n));
        for (int k = n - 1; k >= 0; --k) items[static_cast<std::size_t>(k)] = pop();
        push(tuple(std::move(items)));
        break;
      }
      case ']': push(make(Kind::List)); break;
      case 'l': {
        Obj* l = make(Kind::List);
        l->items = pop_mark();
        push(l);
        break;
      }
      case 'a': {
        Obj* v = pop();
        expect(top(), Kind::List, "the APPEND target")->items.push_back(v);
        break;
      }
      case 'e': {
        auto items = pop_mark();
        auto& dst = expect(top(), Kind::List, "the APPENDS target")->items;
        dst.insert(dst.end(), items.begin(), items.end());
        break;
      }
      case '}': push(make(Kind::Dict)); break;
      case 'd': {
        Obj* d = make(Kind::Dict);
        d->items = pop_mark();
        if (d->items.size() % 2) fail("DICT with an odd number of items");
        push(d);
        break;
      }
      case 's': {
        Obj* v = pop();
        Obj* k = pop();
        auto& dst = expect(top(), Kind::Dict, "the SETITEM target")->items;
        dst.push_back(k);
        dst.push_back(v);
        break;
      }
      case 'u': {
        auto items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        auto& dst = expect(top(), Kind::Dict, "the SETITEMS target")->items;
        dst.insert(dst.end(), items.begin(), items.end());
        break;
      }
      default: return false;
    }
    return true;
  }

  void push_text(Kind kind, std::uint64_t n) {
    Obj* o = make(kind);
    o->s = std::string(take(n));
    push(o);
  }
  void push_int(std::int64_t v) {
    Obj* o = make(Kind::Int);
    o->i = v;
    push(o);
  }
  void push_long(std::uint64_t nbytes) {
    if (nbytes > 8) fail("integer wider than 64 bits");
    const std::string_view b = take(nbytes);
    std::uint64_t u = 0;
    for (std::size_t k = b.size(); k-- > 0;) u = (u << 8) | static_cast<unsigned char>(b[k]);
    const int shift = 64 - 8 * static_cast<int>(nbytes);
    push_int(nbytes == 0 ? 0 : static_cast<std::int64_t>(u << shift) >> shift);
  }
  Obj* memo_get(std::uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key ", key, " is not defined");
    return it->second;
  }

  PickledArray to_array(const Obj* result) {
    if (result->kind != Kind::Array || !result->built)
      fail("the pickle holds a ", kind_name(result->kind), ", not a numpy object array");
    PickledArray out;
    out.shape = result->shape;
    out.fortran_order = result->fortran;
    std::uint64_t count = 1;
    for (std::int64_t d : out.shape) {
      if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d))
        fail("ndarray shape overflows");
      count *= static_cast<std::uint64_t>(d);
    }
    if (count != result->items.size())
      fail("ndarray of ", count, " elements holds ", result->items.size());
    out.cells.reserve(result->items.size());
    for (std::size_t k = 0; k < result->items.size(); ++k) {
      const Obj* e = result->items[k];
      switch (e->kind) {
        case Kind::None: out.cells.emplace_back(std::monostate{}); break;
        case Kind::Bool: out.cells.emplace_back(e->b); break;
        case Kind::Int: out.cells.emplace_back(e->i); break;
        case Kind::Float: out.cells.emplace_back(e->f); break;
        case Kind::Str: out.cells.emplace_back(e->s); break;
        default:
          fail("element ", k, " is a ", kind_name(e->kind), " (only None, bool, int, float, str)");
      }
    }
    return out;
  }

  std::string_view data_;
  std::string what_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::uint8_t op_ = 0;
  std::vector<std::unique_ptr<Obj>> arena_;
  std::vector<Obj*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Obj*> memo_;
};

}  // namespace

PickledArray unpickle_object_array(std::string_view bytes, const std::string& what) {
  return Unpickler(bytes, what).run();
}

}  // namespace knmf::io
