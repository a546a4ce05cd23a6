// cNMF's job table `NAME.nmf_params.df.npz` written as cNMF's save_df_to_npz writes it: the
// DataFrame's `.values` (an object array, Fortran order, of Python ints and bools) and its
// string columns pickled as numpy 1.24 pickles object arrays (protocol 3), the RangeIndex as
// int64. Only ints, bools and short strings are ever pickled here (a fixed opcode subset).
#include <cstring>

#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/io/cnmf_files.hpp"
#include "knmf/io/npy.hpp"
#include "knmf/io/zip.hpp"

namespace knmf::io {
namespace {

void put_u32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s += char((v >> (8 * i)) & 0xff);
}

// pickle's save_long for protocol >= 2 (the values here fit in int32)
void put_int(std::string& s, std::int64_t v) {
  KNMF_ASSERT(v >= -(std::int64_t(1) << 31) && v < (std::int64_t(1) << 31), "pickled int out of range");
  if (v >= 0 && v < 256) {
    s += 'K';
    s += char(v);
  } else if (v >= 0 && v < 65536) {
    s += 'M';
    s += char(v & 0xff);
    s += char(v >> 8);
  } else {
    s += 'J';
    put_u32(s, std::uint32_t(std::int32_t(v)));
  }
}

struct Memo {
  int next = 0;
  void put(std::string& s) {
    KNMF_ASSERT(next < 256, "pickle memo overflow");
    s += 'q';
    s += char(next++);
  }
};

// An object ndarray pickle up to its list of items: numpy.core.multiarray._reconstruct(
// ndarray, (0,), b'b') then the state (1, shape, dtype('O'), fortran, [items]).
std::string object_array_prefix(const std::vector<std::int64_t>& shape, bool fortran, Memo& m) {
  std::string s = "\x80\x03";
  s += "cnumpy.core.multiarray\n_reconstruct\n";
  m.put(s);
  s += "cnumpy\nndarray\n";
  m.put(s);
  s += "K";
  s += '\0';
  s += '\x85';
  m.put(s);
  s += "C\x01" "b";
  m.put(s);
  s += '\x87';
  m.put(s);
  s += 'R';
  m.put(s);
  s += "(K\x01";
  for (auto d : shape) put_int(s, d);
  KNMF_ASSERT(shape.size() == 1 || shape.size() == 2, "object arrays of rank 1 or 2 only");
  s += shape.size() == 1 ? '\x85' : '\x86';
  m.put(s);
  s += "cnumpy\ndtype\n";
  m.put(s);
  s += "X\x02";
  s += std::string(3, '\0');
  s += "O8";
  m.put(s);
  s += "\x89\x88\x87";
  m.put(s);
  s += 'R';
  m.put(s);
  s += "(K\x03X\x01";
  s += std::string(3, '\0');
  s += '|';
  m.put(s);
  s += "NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t";
  m.put(s);
  s += 'b';
  s += fortran ? '\x88' : '\x89';
  s += ']';
  m.put(s);
  return s;
}

// The list's items in batches of 1000, as pickle's _batch_appends.
template <class SaveItem>
void append_items(std::string& s, std::size_t n, SaveItem save) {
  std::size_t i = 0;
  for (;;) {
    const std::size_t batch = std::min<std::size_t>(1000, n - i);
    if (batch > 1) {
      s += '(';
      for (std::size_t j = 0; j < batch; ++j) save(i + j);
      s += 'e';
    } else if (batch == 1) {
      save(i);
      s += 'a';
    }
    i += batch;
    if (batch < 1000) break;
  }
}

// numpy 1.24's np.save header for an object array (growth-axis padding, 64-byte alignment).
std::string npy_header(const std::vector<std::int64_t>& shape, bool fortran) {
  std::string shape_s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) shape_s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) shape_s += ",";
  shape_s += ")";
  std::string h = "{'descr': '|O', 'fortran_order': ";
  h += fortran ? "True" : "False";
  h += ", 'shape': " + shape_s + ", }";
  const std::string growth = std::to_string(shape.empty() ? 0 : (fortran ? shape.back() : shape.front()));
  h += std::string(21 - growth.size(), ' ');
  const std::size_t hlen = h.size() + 1;
  const std::size_t pad = 64 - (10 + hlen) % 64;  // numpy: 64 when already aligned
  h += std::string(pad, ' ') + "\n";
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h;
}

}  // namespace

void write_cnmf_job_table(const std::string& path, const std::vector<Job>& jobs,
                          const std::vector<bool>& completed) {
  KNMF_ASSERT(completed.size() == jobs.size(), "one completed flag per job");
  const auto n = std::int64_t(jobs.size());
  // data: (n, 4) object array in Fortran order; its items in C order (row by row)
  std::string data = npy_header({n, 4}, true);
  {
    Memo m;
    data += object_array_prefix({n, 4}, true, m);
    append_items(data, std::size_t(n) * 4, [&](std::size_t i) {
      const auto& j = jobs[i / 4];
      switch (i % 4) {
        case 0: put_int(data, j.k); break;
        case 1: put_int(data, j.iter); break;
        case 2: put_int(data, j.seed); break;
        default: data += completed[i / 4] ? '\x88' : '\x89';
      }
    });
    data += 't';
    m.put(data);
    data += "b.";
  }
  std::string columns = npy_header({4}, false);
  {
    Memo m;
    columns += object_array_prefix({4}, false, m);
    const char* names[] = {"n_components", "iter", "nmf_seed", "completed"};
    append_items(columns, 4, [&](std::size_t i) {
      columns += 'X';
      put_u32(columns, std::uint32_t(std::strlen(names[i])));
      columns += names[i];
      m.put(columns);
    });
    columns += 't';
    m.put(columns);
    columns += "b.";
  }
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[std::size_t(i)] = i;
  const std::string index = format_npy(NpyArray::from_int64({n}, idx), path + ":index.npy");

  AtomicFile file(path);
  ZipWriter zip([&](const char* p, std::size_t size) { file.write(p, size); });
  zip.add("data.npy", data);
  zip.add("index.npy", index);
  zip.add("columns.npy", columns);
  zip.finish();
  file.commit();
}

}  // namespace knmf::io
