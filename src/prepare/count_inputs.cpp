#include "knmf/prepare/count_inputs.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "../io/hdf5.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/utf8.hpp"
#include "knmf/io/dataframe.hpp"
#include "knmf/io/h5ad.hpp"

namespace knmf::prepare {

namespace fs = std::filesystem;
namespace h5 = io::detail::h5;

struct CountFile::State {
  std::optional<io::H5adReader> h5ad;
  io::CsrBlock<float> csr;   // mtx, tsv, npz: the whole matrix
  std::vector<float> dense;  // --densify
  // 10x h5
  std::string path, group;  // the .h5 and its matrix group
  h5::File file;
  h5::Dataset data, indices;
  std::vector<std::int64_t> indptr;
  std::vector<std::int32_t> gene_map;  // stored gene row -> output column (-1: dropped)
};

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Lines of a text file, gzip or not (zlib reads plain files as they are).
class LineReader {
public:
  explicit LineReader(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) input_error(path, ": cannot open: ", std::strerror(errno ? errno : ENOENT));
    gzbuffer(f_, 1 << 17);
  }
  ~LineReader() {
    if (f_) gzclose(f_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  /// Next line without its '\n' (and '\r'); false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    char buf[1 << 16];
    for (;;) {
      if (!gzgets(f_, buf, sizeof buf)) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        if (err != Z_OK && err != Z_STREAM_END)
          input_error(path_, ": cannot read line ", line_no_ + 1, ": ",
                      err == Z_ERRNO ? std::strerror(errno) : msg);
        if (line.empty()) return false;
        break;
      }
      line += buf;
      if (!line.empty() && line.back() == '\n') break;
    }
    ++line_no_;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return true;
  }
  std::int64_t line_no() const { return line_no_; }

private:
  std::string path_;
  gzFile f_ = nullptr;
  std::int64_t line_no_ = 0;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  double v = 0;
  auto r = std::from_chars(b, e, v);
  if (r.ec == std::errc::result_out_of_range) return std::numeric_limits<double>::infinity();
  if (r.ec != std::errc() || r.ptr != e) {
    // pandas' spellings of non-finite values (refused later, by value)
    std::string t(b, e);
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (t == "nan" || t == "na" || t == "n/a" || t == "null") return std::numeric_limits<double>::quiet_NaN();
    if (t == "inf" || t == "infinity") return std::numeric_limits<double>::infinity();
    return std::nullopt;
  }
  return v;
}

std::optional<std::int64_t> parse_int(const std::string& s) {
  std::int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

float checked_count(const std::string& file, double v, const std::string& where) {
  if (!std::isfinite(v) || v < 0)
    input_error(file, ": ", where, ": value ", v, " is not a finite non-negative count");
  const float f = float(v);
  if (!std::isfinite(f))
    input_error(file, ": ", where, ": value ", v, " does not fit in float32");
  return f;
}

// pandas' read_csv renaming of repeated column names: 'X', 'X.1', 'X.2', ...
std::vector<std::string> pandas_mangle(std::vector<std::string> names) {
  std::unordered_map<std::string, int> counts;
  std::unordered_set<std::string> seen(names.begin(), names.end());
  std::unordered_set<std::string> used;
  for (auto& n : names) {
    if (!used.count(n)) {
      used.insert(n);
      continue;
    }
    int& c = counts[n];
    std::string cand;
    do cand = n + "." + std::to_string(++c);
    while (used.count(cand) || seen.count(cand));
    used.insert(cand);
    n = cand;
  }
  return names;
}

std::string unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

// ---- 10x Matrix Market folder ----------------------------------------------------------

std::string beside(const fs::path& dir, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (fs::exists(dir / n)) return (dir / n).string();
  return {};
}

// genes.tsv / features.tsv: id, symbol[, feature type]. A feature is kept when it is
// "Gene Expression" (or of no type).
struct TenxGenes {
  std::vector<std::string> symbols;
  std::vector<bool> keep;
};

TenxGenes read_tenx_genes(const std::string& gene_file) {
  TenxGenes g;
  LineReader r(gene_file);
  std::string line;
  while (r.next(line)) {
    const auto f = split(line, '\t');
    if (f.size() < 2)
      input_error(gene_file, ": line ", r.line_no(), " has ", f.size(),
                  " tab-separated field(s); expected gene id and symbol");
    io::require_utf8_name(f[1], gene_file + ": line " + std::to_string(r.line_no()) + " (a gene name)");
    g.symbols.push_back(f[1]);
    g.keep.push_back(f.size() < 3 || f[2] == "Gene Expression");
  }
  return g;
}

// barcodes.tsv: the cells, each line's first field.
std::vector<std::string> read_tenx_barcodes(const std::string& barcodes) {
  std::vector<std::string> cells;
  LineReader r(barcodes);
  std::string line;
  while (r.next(line)) {
    cells.push_back(split(line, '\t')[0]);
    io::require_utf8_name(cells.back(), barcodes + ": line " + std::to_string(r.line_no()) + " (a cell barcode)");
  }
  return cells;
}

// The Matrix Market header (coordinate, integer or real, general) and the size line after the
// comments: genes, cells, entries.
struct MtxSize {
  std::int64_t rows = 0, cols = 0, entries = 0;
};

MtxSize read_mtx_size(LineReader& r, const std::string& path) {
  std::string line;
  if (!r.next(line) || line.rfind("%%MatrixMarket", 0) != 0)
    input_error(path, ": line 1 is not a Matrix Market header ('%%MatrixMarket matrix coordinate ...')");
  {
    auto h = split_ws(line);
    for (auto& w : h) std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (h.size() < 5 || h[1] != "matrix" || h[2] != "coordinate" ||
        (h[3] != "integer" && h[3] != "real" && h[3] != "double") || h[4] != "general")
      input_error(path, ": header '", line,
                  "' is not supported (expected '%%MatrixMarket matrix coordinate integer|real general')");
  }
  while (r.next(line))
    if (line.empty() || line[0] != '%') break;
  const auto size = split_ws(line);
  std::optional<std::int64_t> nr, nc, nz;
  if (size.size() == 3) {
    nr = parse_int(size[0]);
    nc = parse_int(size[1]);
    nz = parse_int(size[2]);
  }
  if (!nr || !nc || !nz || *nr < 0 || *nc < 0 || *nz < 0)
    input_error(path, ": line ", r.line_no(), " '", line, "' is not a size line 'genes cells entries'");
  return {*nr, *nc, *nz};
}

struct MtxEntry {
  std::int32_t gene;
  std::int32_t cell;
  float value;
};

// The entries of the kept genes (`col_of`: each gene's column, -1 when not kept), checked
// against the size line.
std::vector<MtxEntry> read_mtx_entries(LineReader& r, const std::string& path, const MtxSize& size,
                                       const std::vector<std::int32_t>& col_of) {
  std::string line;
  std::vector<MtxEntry> entries;
  entries.reserve(size_t(std::min<std::int64_t>(size.entries, std::int64_t(1) << 26)));
  std::int64_t seen = 0;
  while (r.next(line)) {
    if (line.empty() || line[0] == '%') continue;
    const auto f = split_ws(line);
    if (seen == size.entries)
      input_error(path, ": line ", r.line_no(), ": more entries than the ", size.entries, " of the size line");
    auto i = f.size() == 3 ? parse_int(f[0]) : std::nullopt;
    auto j = f.size() == 3 ? parse_int(f[1]) : std::nullopt;
    auto v = f.size() == 3 ? parse_double(f[2]) : std::nullopt;
    if (!i || !j || !v)
      input_error(path, ": line ", r.line_no(), " '", line, "' is not an entry 'gene cell value'");
    if (*i < 1 || *i > size.rows || *j < 1 || *j > size.cols)
      input_error(path, ": line ", r.line_no(), ": entry (", *i, ", ", *j, ") is outside the ", size.rows,
                  " x ", size.cols, " matrix");
    const float x = checked_count(path, *v, "line " + std::to_string(r.line_no()));
    ++seen;
    const auto c = col_of[size_t(*i - 1)];
    if (c >= 0) entries.push_back(MtxEntry{c, std::int32_t(*j - 1), x});
  }
  if (seen != size.entries)
    input_error(path, ": ", seen, " entries but the size line says ", size.entries, " (a truncated file?)");
  return entries;
}

// The entries as CSR rows of cells: a counting sort by cell, stable (entries of a cell keep
// their file order), then each cell's genes in column order.
void csr_by_cell(std::vector<MtxEntry> entries, std::int64_t cells, std::int64_t genes,
                 io::CsrBlock<float>& X) {
  X.row_begin = 0;
  X.row_end = cells;
  X.ncols = genes;
  X.row_offsets.assign(size_t(cells + 1), 0);
  for (const auto& e : entries) ++X.row_offsets[size_t(e.cell) + 1];
  for (std::int64_t c = 0; c < cells; ++c) X.row_offsets[size_t(c + 1)] += X.row_offsets[size_t(c)];
  X.cols.resize(entries.size());
  X.values.resize(entries.size());
  std::vector<std::int64_t> next(X.row_offsets.begin(), X.row_offsets.end() - 1);
  for (const auto& e : entries) {
    const auto p = size_t(next[size_t(e.cell)]++);
    X.cols[p] = e.gene;
    X.values[p] = e.value;
  }
  entries = {};
  // each cell's genes in column order (10x files list them so; others need not)
  for (std::int64_t c = 0; c < cells; ++c) {
    const auto b = size_t(X.row_offsets[size_t(c)]), e = size_t(X.row_offsets[size_t(c) + 1]);
    bool sorted = true;
    for (size_t p = b + 1; p < e; ++p) sorted = sorted && X.cols[p - 1] <= X.cols[p];
    if (sorted) continue;
    std::vector<std::pair<std::int32_t, float>> row;
    for (size_t p = b; p < e; ++p) row.emplace_back(X.cols[p], X.values[p]);
    std::stable_sort(row.begin(), row.end(), [](auto& a, auto& b2) { return a.first < b2.first; });
    for (size_t p = b; p < e; ++p) {
      X.cols[p] = row[p - b].first;
      X.values[p] = row[p - b].second;
    }
  }
}

void read_tenx_mtx(const std::string& path, CountFile::State& st, CountSource& src) {
  const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::exists(path)) input_error(path, ": no such file (-c/--counts)");
  const std::string features = beside(dir, {"features.tsv.gz", "features.tsv"});
  const std::string genes_v2 = beside(dir, {"genes.tsv", "genes.tsv.gz"});
  const std::string gene_file = !features.empty() ? features : genes_v2;
  const std::string barcodes = beside(dir, {"barcodes.tsv.gz", "barcodes.tsv"});
  if (gene_file.empty())
    input_error(path, ": no features.tsv.gz, features.tsv or genes.tsv beside it (a 10x matrix folder)");
  if (barcodes.empty()) input_error(path, ": no barcodes.tsv.gz or barcodes.tsv beside it (a 10x matrix folder)");
  const TenxGenes genes = read_tenx_genes(gene_file);
  std::vector<std::string> cells = read_tenx_barcodes(barcodes);

  LineReader r(path);
  const MtxSize size = read_mtx_size(r, path);
  if (size.rows != std::int64_t(genes.symbols.size()))
    input_error(path, ": ", size.rows, " genes (rows) but ", gene_file, " lists ", genes.symbols.size());
  if (size.cols != std::int64_t(cells.size()))
    input_error(path, ": ", size.cols, " cells (columns) but ", barcodes, " lists ", cells.size());
  if (size.rows > std::numeric_limits<std::int32_t>::max())
    input_error(path, ": ", size.rows, " genes: more than knmf's 32-bit column index holds");

  std::vector<std::int32_t> col_of(size_t(size.rows), -1);
  std::vector<std::string> names;
  for (std::int64_t g = 0; g < size.rows; ++g)
    if (genes.keep[size_t(g)]) {
      col_of[size_t(g)] = std::int32_t(names.size());
      names.push_back(genes.symbols[size_t(g)]);
    }
  csr_by_cell(read_mtx_entries(r, path, size, col_of), size.cols, std::int64_t(names.size()), st.csr);
  src = count_source(st.csr, std::move(cells), make_names_unique(std::move(names)), path);
}

// ---- 10x HDF5 ---------------------------------------------------------------------------

std::vector<std::string> h5_strings(const std::string& file, hid_t loc, const std::string& name) {
  h5::ErrorSilencer quiet;
  if (!h5::exists(loc, name)) input_error(file, ": no dataset '", name, "' (a 10x Cell Ranger .h5)");
  h5::Dataset d(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  if (!d) h5::fail(file, "cannot open dataset " + name);
  return h5::read_string_dataset(file, d.get(), name);
}

template <class T>
void h5_read_1d(const std::string& file, hid_t dset, const std::string& name, std::int64_t off,
                std::int64_t count, hid_t mem_type, T* out) {
  if (count == 0) return;
  h5::ErrorSilencer quiet;
  h5::Dataspace fspace(H5Dget_space(dset));
  const hsize_t start = hsize_t(off), cnt = hsize_t(count);
  if (!fspace || H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &cnt, nullptr) < 0)
    h5::fail(file, "cannot select " + name);
  h5::Dataspace mspace(H5Screate_simple(1, &cnt, nullptr));
  if (H5Dread(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0)
    h5::fail(file, "cannot read " + name + "[" + std::to_string(off) + ":" + std::to_string(off + count) + "]");
}

// The group of a 10x .h5 holding the matrix: Cell Ranger >= 3's `matrix`, or Cell Ranger 2's
// one group per genome (scanpy's read_10x_h5 needs the genome named when there are several).
std::string tenx_matrix_group(const std::string& path, hid_t f) {
  std::string grp = "matrix";
  if (!h5::exists(f, grp)) {
    H5G_info_t info{};
    std::vector<std::string> groups;
    if (H5Gget_info(f, &info) >= 0)
      for (hsize_t i = 0; i < info.nlinks; ++i) {
        char name[512] = {0};
        if (H5Lget_name_by_idx(f, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) > 0 &&
            h5::object_type(f, name) == H5I_GROUP)
          groups.push_back(name);
      }
    if (groups.size() != 1)
      input_error(path, ": no group 'matrix' and ", groups.size(),
                  " top-level groups (a 10x Cell Ranger .h5: 'matrix', or one genome group of Cell Ranger 2)");
    grp = groups[0];
  }
  return grp;
}

// The matrix of a 10x .h5 (cells as columns of a CSC matrix: the cells' rows of X), its
// datasets opened and indptr read and checked.
void open_tenx_entries(const std::string& path, hid_t f, const std::string& grp, std::int64_t n_cells,
                       CountFile::State* st) {
  h5::Dataset indptr_d(H5Dopen2(f, (grp + "/indptr").c_str(), H5P_DEFAULT));
  st->data = h5::Dataset(H5Dopen2(f, (grp + "/data").c_str(), H5P_DEFAULT));
  st->indices = h5::Dataset(H5Dopen2(f, (grp + "/indices").c_str(), H5P_DEFAULT));
  if (!indptr_d || !st->data || !st->indices) h5::fail(path, "cannot open the matrix datasets");
  const auto pd = h5::dims(indptr_d.get());
  if (pd.size() != 1 || std::int64_t(pd[0]) != n_cells + 1)
    input_error(path, ": matrix/indptr has ", pd.empty() ? 0 : pd[0], " entries; expected ", n_cells + 1,
                " (cells + 1)");
  st->indptr.resize(size_t(n_cells + 1));
  h5_read_1d(path, indptr_d.get(), grp + "/indptr", 0, n_cells + 1, H5T_NATIVE_INT64, st->indptr.data());
  const auto dd = h5::dims(st->data.get()), id = h5::dims(st->indices.get());
  if (dd.size() != 1 || id.size() != 1 || dd[0] != id[0])
    input_error(path, ": matrix/data and matrix/indices differ in length");
  const auto nnz = std::int64_t(dd[0]);
  if (st->indptr.front() != 0 || st->indptr.back() != nnz)
    input_error(path, ": matrix/indptr runs from ", st->indptr.front(), " to ", st->indptr.back(),
                "; expected 0 to ", nnz, " (the entries of matrix/data)");
  for (std::int64_t c = 0; c < n_cells; ++c)
    if (st->indptr[size_t(c + 1)] < st->indptr[size_t(c)])
      input_error(path, ": matrix/indptr decreases at cell ", c);
}

// Rows [r0, r1) of a 10x .h5's X (its cells), the kept genes' entries checked as read.
/// `out` emptied to hold rows [r0, r1) of `ncols` columns.
void start_block(io::CsrBlock<float>& out, std::int64_t r0, std::int64_t r1, std::int64_t ncols) {
  out.row_begin = r0;
  out.row_end = r1;
  out.ncols = ncols;
  out.row_offsets.assign(1, 0);
  out.cols.clear();
  out.values.clear();
}

void read_tenx_h5_rows(const CountFile::State* s, std::int64_t n_genes, std::int64_t n_kept,
                       std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
  const std::int64_t e0 = s->indptr[size_t(r0)], e1 = s->indptr[size_t(r1)];
  std::vector<std::int64_t> idx(size_t(e1 - e0));
  std::vector<double> val(size_t(e1 - e0));
  h5_read_1d(s->path, s->indices.get(), s->group + "/indices", e0, e1 - e0, H5T_NATIVE_INT64, idx.data());
  h5_read_1d(s->path, s->data.get(), s->group + "/data", e0, e1 - e0, H5T_NATIVE_DOUBLE, val.data());
  start_block(out, r0, r1, n_kept);
  for (std::int64_t c = r0; c < r1; ++c) {
    for (std::int64_t e = s->indptr[size_t(c)]; e < s->indptr[size_t(c + 1)]; ++e) {
      const auto g = idx[size_t(e - e0)];
      if (g < 0 || g >= n_genes)
        input_error(s->path, ": ", s->group, "/indices[", e, "] = ", g, " is outside [0, ", n_genes,
                    ") at cell ", c);
      const double v = val[size_t(e - e0)];
      const float x = checked_count(s->path, v, s->group + "/data[" + std::to_string(e) + "]");
      const auto col = s->gene_map[size_t(g)];
      if (col < 0) continue;
      out.cols.push_back(col);
      out.values.push_back(x);
    }
    out.row_offsets.push_back(std::int64_t(out.cols.size()));
  }
}

void open_tenx_h5(const std::string& path, std::shared_ptr<CountFile::State>& st, CountSource& src) {
  h5::ErrorSilencer quiet;
  if (!fs::exists(path)) input_error(path, ": no such file (-c/--counts)");
  st->path = path;
  st->file = h5::File(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!st->file) h5::fail(path, "cannot open as HDF5 (a 10x Cell Ranger .h5)");
  const hid_t f = st->file.get();
  const std::string grp = tenx_matrix_group(path, f);
  st->group = grp;
  for (const char* d : {"data", "indices", "indptr", "shape", "barcodes"})
    if (!h5::exists(f, grp + "/" + d)) input_error(path, ": no dataset '", grp, "/", d, "' (a 10x Cell Ranger .h5)");
  h5::Dataset shape_d(H5Dopen2(f, (grp + "/shape").c_str(), H5P_DEFAULT));
  if (!shape_d || h5::dims(shape_d.get()) != std::vector<hsize_t>{2})
    input_error(path, ": ", grp, "/shape is not 2 numbers");
  std::int64_t shape[2] = {0, 0};
  h5_read_1d(path, shape_d.get(), grp + "/shape", 0, 2, H5T_NATIVE_INT64, shape);
  const std::int64_t n_genes = shape[0], n_cells = shape[1];
  if (n_genes < 0 || n_cells < 0) input_error(path, ": matrix/shape = [", n_genes, ", ", n_cells, "]");
  if (n_genes > std::numeric_limits<std::int32_t>::max())
    input_error(path, ": ", n_genes, " genes: more than knmf's 32-bit column index holds");

  std::vector<std::string> names, types;
  if (h5::exists(f, grp + "/features")) {
    names = h5_strings(path, f, grp + "/features/name");
    if (h5::exists(f, grp + "/features/feature_type"))
      types = h5_strings(path, f, grp + "/features/feature_type");
  } else if (h5::exists(f, grp + "/gene_names")) {
    names = h5_strings(path, f, grp + "/gene_names");
  } else {
    input_error(path, ": no ", grp, "/features/name or ", grp, "/gene_names (a 10x Cell Ranger .h5)");
  }
  if (std::int64_t(names.size()) != n_genes)
    input_error(path, ": ", names.size(), " feature names for the ", n_genes, " genes of matrix/shape");
  if (!types.empty() && types.size() != names.size())
    input_error(path, ": ", types.size(), " feature types for ", names.size(), " features");
  auto cells = h5_strings(path, f, grp + "/barcodes");
  for (std::size_t i = 0; i < cells.size(); ++i)
    io::require_utf8_name(cells[i], path + ": " + grp + "/barcodes[" + std::to_string(i) + "] (a cell barcode)");
  for (std::size_t i = 0; i < names.size(); ++i)
    io::require_utf8_name(names[i], path + ": gene name " + std::to_string(i) + " (" + grp +
                                        (h5::exists(f, grp + "/features") ? "/features/name[" : "/gene_names[") +
                                        std::to_string(i) + "])");
  if (std::int64_t(cells.size()) != n_cells)
    input_error(path, ": ", cells.size(), " barcodes for the ", n_cells, " cells of matrix/shape");

  st->gene_map.assign(size_t(n_genes), -1);
  std::vector<std::string> kept;
  for (std::int64_t g = 0; g < n_genes; ++g)
    if (types.empty() || types[size_t(g)] == "Gene Expression") {
      st->gene_map[size_t(g)] = std::int32_t(kept.size());
      kept.push_back(names[size_t(g)]);
    }

  open_tenx_entries(path, f, grp, n_cells, st.get());
  src = CountSource{};
  src.n_obs = n_cells;
  src.n_vars = std::int64_t(kept.size());
  src.obs_names = std::move(cells);
  src.var_names = make_names_unique(std::move(kept));
  src.name = path;
  CountFile::State* s = st.get();
  const auto n_kept = src.n_vars;
  src.read_rows = [s, n_genes, n_kept](std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
    read_tenx_h5_rows(s, n_genes, n_kept, r0, r1, out);
  };
}

// ---- tab-separated table and DataFrame npz ------------------------------------------------

void read_tsv(const std::string& path, CountFile::State& st, CountSource& src) {
  if (!fs::exists(path)) input_error(path, ": no such file (-c/--counts)");
  LineReader r(path);
  std::string line;
  if (!r.next(line)) input_error(path, ": empty file (expected a header line of gene names)");
  auto header = split(line, '\t');
  if (header.size() < 2) input_error(path, ": line 1 has no gene names (a tab-separated table: cell index, then genes)");
  std::vector<std::string> genes;
  for (size_t i = 1; i < header.size(); ++i) {
    genes.push_back(unquote(header[i]));
    io::require_utf8_name(genes.back(), path + ": line 1, field " + std::to_string(i + 1) + " (a gene name)");
  }
  genes = pandas_mangle(std::move(genes));
  const auto g = std::int64_t(genes.size());
  if (g > std::numeric_limits<std::int32_t>::max()) input_error(path, ": too many genes (", g, ")");
  auto& X = st.csr;
  X = io::CsrBlock<float>{};
  X.ncols = g;
  std::vector<std::string> cells;
  while (r.next(line)) {
    if (line.empty()) continue;  // pandas skips blank lines
    const auto f = split(line, '\t');
    if (std::int64_t(f.size()) != g + 1)
      input_error(path, ": line ", r.line_no(), " has ", f.size(), " fields; the header has ", g + 1,
                  " (cell index and ", g, " genes)");
    cells.push_back(unquote(f[0]));
    io::require_utf8_name(cells.back(), path + ": line " + std::to_string(r.line_no()) + ", field 1 (a cell name)");
    for (std::int64_t j = 0; j < g; ++j) {
      const auto v = parse_double(f[size_t(j + 1)]);
      if (!v)
        input_error(path, ": line ", r.line_no(), ", gene '", genes[size_t(j)], "': '", f[size_t(j + 1)],
                    "' is not a number");
      const float x = checked_count(path, *v, "line " + std::to_string(r.line_no()) + ", gene '" + genes[size_t(j)] + "'");
      if (x != 0) {
        X.cols.push_back(std::int32_t(j));
        X.values.push_back(x);
      }
    }
    X.row_offsets.push_back(X.nnz());
  }
  X.row_begin = 0;
  X.row_end = std::int64_t(cells.size());
  src = count_source(st.csr, std::move(cells), std::move(genes), path);
}

void read_npz(const std::string& path, CountFile::State& st, CountSource& src) {
  if (!fs::exists(path)) input_error(path, ": no such file (-c/--counts)");
  const auto df = io::read_df_npz(path);
  if (df.is_object()) input_error(path, ": the DataFrame holds objects, not counts");
  auto& X = st.csr;
  X = io::CsrBlock<float>{};
  X.ncols = df.cols;
  X.row_end = df.rows;
  for (std::int64_t i = 0; i < df.rows; ++i) {
    for (std::int64_t j = 0; j < df.cols; ++j) {
      const double v = df.at(i, j);
      const float x = checked_count(path, v, "row " + std::to_string(i) + ", column " + std::to_string(j));
      if (x != 0) {
        X.cols.push_back(std::int32_t(j));
        X.values.push_back(x);
      }
    }
    X.row_offsets.push_back(X.nnz());
  }
  std::vector<std::string> cells, genes;
  for (const auto& l : df.index) cells.push_back(io::label_to_string(l));
  for (const auto& l : df.columns) genes.push_back(io::label_to_string(l));
  for (std::size_t i = 0; i < cells.size(); ++i)
    io::require_utf8_name(cells[i], path + ": index label " + std::to_string(i) + " (a cell name)");
  for (std::size_t i = 0; i < genes.size(); ++i)
    io::require_utf8_name(genes[i], path + ": column label " + std::to_string(i) + " (a gene name)");
  src = count_source(st.csr, std::move(cells), std::move(genes), path);
}

}  // namespace

CountFormat count_format(const std::string& path) {
  if (ends_with(path, ".h5ad")) return CountFormat::H5ad;
  if (ends_with(path, ".mtx") || ends_with(path, ".mtx.gz")) return CountFormat::TenxMtx;
  if (ends_with(path, ".h5")) return CountFormat::TenxH5;
  if (ends_with(path, ".npz")) return CountFormat::DfNpz;
  return CountFormat::Tsv;
}

const char* to_string(CountFormat f) {
  switch (f) {
    case CountFormat::H5ad: return "h5ad";
    case CountFormat::TenxMtx: return "10x mtx";
    case CountFormat::TenxH5: return "10x h5";
    case CountFormat::DfNpz: return "df.npz";
    case CountFormat::Tsv: return "tsv";
  }
  return "?";
}

std::vector<std::string> make_names_unique(std::vector<std::string> names) {
  std::unordered_set<std::string> all(names.begin(), names.end());
  if (all.size() == names.size()) return names;
  std::unordered_set<std::string> first;
  std::unordered_map<std::string, int> counter;
  for (auto& n : names) {
    if (first.insert(n).second) continue;
    const std::string base = n;
    for (;;) {
      const std::string cand = base + "-" + std::to_string(++counter[base]);
      if (all.insert(cand).second) {
        n = cand;
        break;
      }
    }
  }
  return names;
}

CountFile CountFile::open(const std::string& path, bool densify, std::int64_t block_rows) {
  CountFile cf;
  cf.format_ = count_format(path);
  cf.state_ = std::make_shared<State>();
  auto& st = *cf.state_;
  switch (cf.format_) {
    case CountFormat::H5ad:
      if (!fs::exists(path)) input_error(path, ": no such file (-c/--counts)");
      st.h5ad.emplace(io::H5adReader::open(path));
      cf.source_ = count_source(*st.h5ad, block_rows);
      break;
    case CountFormat::TenxMtx: read_tenx_mtx(path, st, cf.source_); break;
    case CountFormat::TenxH5: open_tenx_h5(path, cf.state_, cf.source_); break;
    case CountFormat::DfNpz: read_npz(path, st, cf.source_); break;
    case CountFormat::Tsv: read_tsv(path, st, cf.source_); break;
  }
  cf.source_.block_rows = std::max<std::int64_t>(1, block_rows);
  if (densify) {
    // one dense cells x genes copy (cNMF's --densify); rows are served from it
    const std::int64_t n = cf.source_.n_obs, g = cf.source_.n_vars;
    st.dense.assign(size_t(n) * size_t(g), 0.0f);
    io::CsrBlock<float> b;
    for (std::int64_t r0 = 0; r0 < n; r0 += cf.source_.block_rows) {
      const std::int64_t r1 = std::min(n, r0 + cf.source_.block_rows);
      cf.source_.read_rows(r0, r1, b);
      for (std::int64_t i = 0; i < b.rows(); ++i)
        for (auto e = b.row_offsets[size_t(i)]; e < b.row_offsets[size_t(i) + 1]; ++e) {
          const auto c = b.cols[size_t(e)];
          if (c < 0 || c >= g)
            input_error(path, ": column index ", c, " at row ", r0 + i, " is out of range [0, ", g, ")");
          st.dense[size_t(r0 + i) * size_t(g) + size_t(c)] += b.values[size_t(e)];
        }
    }
    st.h5ad.reset();
    st.csr = io::CsrBlock<float>{};
    const float* d = st.dense.data();
    cf.source_.read_rows = [d, g](std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) {
      start_block(out, r0, r1, g);
      for (std::int64_t i = r0; i < r1; ++i) {
        for (std::int64_t j = 0; j < g; ++j) {
          const float x = d[size_t(i) * size_t(g) + size_t(j)];
          if (x != 0) {
            out.cols.push_back(std::int32_t(j));
            out.values.push_back(x);
          }
        }
        out.row_offsets.push_back(std::int64_t(out.cols.size()));
      }
    };
  }
  return cf;
}

}  // namespace knmf::prepare
