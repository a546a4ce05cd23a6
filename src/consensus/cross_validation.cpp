// Bi-cross-validation of the NMF (knmf/consensus/cross_validation.hpp).
#include "knmf/consensus/cross_validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <system_error>

#include "knmf/core/error.hpp"
#include "knmf/io/atomic_file.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/solver/nmf.hpp"
#include "consensus/detail/refit.hpp"

namespace knmf::consensus {
namespace bcv {  // (named: the consensus sources compile as one unity batch)

/// The positions of the items of fold `f` (in == true) or of every other fold (in == false),
/// and each item's position in that selection (-1 outside it).
struct Selection {
  std::vector<std::int64_t> items;
  std::vector<std::int64_t> position;
};
Selection select(const std::vector<int>& folds, int f, bool in) {
  Selection s;
  s.position.assign(folds.size(), -1);
  for (size_t i = 0; i < folds.size(); ++i)
    if ((folds[i] == f) == in) {
      s.position[i] = std::int64_t(s.items.size());
      s.items.push_back(std::int64_t(i));
    }
  return s;
}

/// X[rows, cols] as CSR (columns renumbered in their order in X).
detail::HostCsr submatrix(const io::CsrBlock<double>& X, const Selection& rows, const Selection& cols) {
  detail::HostCsr m;
  m.rows = size_type(rows.items.size());
  m.cols = size_type(cols.items.size());
  for (std::int64_t i : rows.items) {
    for (auto p = X.row_offsets[size_t(i)]; p < X.row_offsets[size_t(i) + 1]; ++p) {
      const std::int64_t c = cols.position[size_t(X.cols[size_t(p)])];
      if (c < 0) continue;
      m.index.push_back(ordinal_type(c));
      m.values.push_back(X.values[size_t(p)]);
    }
    m.offsets.push_back(size_type(m.values.size()));
  }
  return m;
}

/// splitmix64: the replicates' seeds from the run's seed, k, the block and the replicate.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
std::int64_t replicate_seed(std::uint64_t seed, int k, int block, int replicate) {
  std::uint64_t h = mix(seed);
  h = mix(h ^ std::uint64_t(k));
  h = mix(h ^ std::uint64_t(block));
  h = mix(h ^ std::uint64_t(replicate));
  return std::int64_t(h & 0xffffffffULL);  // a RandomState seed: [0, 2^32)
}

/// The beta divergence of one value x from its prediction y (scikit-learn's
/// _beta_divergence, element by element; y clipped at float32's epsilon as it clips W H).
double divergence(double x, double y, double beta) {
  const double eps = double(std::numeric_limits<float>::epsilon());
  if (beta == 2.0) return 0.5 * (x - y) * (x - y);
  y = std::max(y, eps);
  if (beta == 1.0) return (x > 0.0 ? x * std::log(x / y) : 0.0) - x + y;
  if (beta == 0.0) return x / y - std::log(x / y) - 1.0;
  return (std::pow(x, beta) + (beta - 1.0) * std::pow(y, beta) - beta * x * std::pow(y, beta - 1.0)) /
         (beta * (beta - 1.0));
}

/// The relative prediction error of C (|I| x |J|, CSR) by W_I (|I| x k) H_J (k x |J|, given as
/// its transpose Ht: |J| x k), both row-major.
double prediction_error(const detail::HostCsr& C, const std::vector<double>& W, const std::vector<double>& Ht,
                        int k, double beta) {
  const size_type ni = C.rows, nj = C.cols;
  if (beta == 2.0) {
    double norm2 = 0.0;
    for (double v : C.values) norm2 += v * v;
    // ||C - M||^2 = ||C||^2 - 2 <C, M> + <W^T W, H H^T> (the error identity)
    double cross = 0.0;
    for (size_type i = 0; i < ni; ++i)
      for (auto p = C.offsets[size_t(i)]; p < C.offsets[size_t(i) + 1]; ++p) {
        double m = 0.0;
        const size_type j = C.index[size_t(p)];
        for (int t = 0; t < k; ++t) m += W[size_t(i * k + t)] * Ht[size_t(j * k + t)];
        cross += C.values[size_t(p)] * m;
      }
    std::vector<double> gw(size_t(k * k), 0.0), gh(size_t(k * k), 0.0);
    for (size_type i = 0; i < ni; ++i)
      for (int s = 0; s < k; ++s)
        for (int t = 0; t < k; ++t) gw[size_t(s * k + t)] += W[size_t(i * k + s)] * W[size_t(i * k + t)];
    for (size_type j = 0; j < nj; ++j)
      for (int s = 0; s < k; ++s)
        for (int t = 0; t < k; ++t) gh[size_t(s * k + t)] += Ht[size_t(j * k + s)] * Ht[size_t(j * k + t)];
    double wh = 0.0;
    for (size_t e = 0; e < gw.size(); ++e) wh += gw[e] * gh[e];
    const double sq = std::max(0.0, norm2 - 2.0 * cross + wh);
    return norm2 > 0.0 ? sq / norm2 : 0.0;
  }
  // another loss: every entry of the block, against the block's mean as the baseline
  double sum = 0.0;
  for (double v : C.values) sum += v;
  const double mean = sum / (double(ni) * double(nj));
  double d = 0.0, d0 = 0.0;
  std::vector<double> row(static_cast<size_t>(nj));
  for (size_type i = 0; i < ni; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (auto p = C.offsets[size_t(i)]; p < C.offsets[size_t(i) + 1]; ++p)
      row[size_t(C.index[size_t(p)])] = C.values[size_t(p)];
    for (size_type j = 0; j < nj; ++j) {
      double m = 0.0;
      for (int t = 0; t < k; ++t) m += W[size_t(i * k + t)] * Ht[size_t(j * k + t)];
      d += divergence(row[size_t(j)], m, beta);
      d0 += divergence(row[size_t(j)], mean, beta);
    }
  }
  return d0 > 0.0 ? d / d0 : 0.0;
}

/// The spectra of a factorization of D (k x |-J|, row-major) and its usages transposed
/// (k x |-I|): the fixed factors of the two refits.
std::vector<double> transpose(const std::vector<double>& a, size_type rows, int k) {
  std::vector<double> t(a.size());
  for (size_type i = 0; i < rows; ++i)
    for (int s = 0; s < k; ++s) t[size_t(s * rows + i)] = a[size_t(i * k + s)];
  return t;
}

}  // namespace bcv

void CrossValidationOptions::validate() const {
  if (cell_folds < 2)
    input_error("--cv-cell-folds ", cell_folds, " is invalid: it must be >= 2");
  if (gene_folds < 2)
    input_error("--cv-gene-folds ", gene_folds, " is invalid: it must be >= 2");
  if (replicates < 1)
    input_error("--cv-replicates ", replicates, " is invalid: it must be >= 1");
  if (seed >= (std::uint64_t(1) << 32))
    input_error("--cv-seed ", seed, " is invalid: it must be in [0, 2^32)");
  if (batch < 0) input_error("--batch ", batch, " is invalid: it must be >= 1 (or 0: automatic)");
}

std::vector<int> fold_assignment(std::int64_t count, int groups, std::uint64_t seed) {
  if (groups < 1) input_error("fold_assignment: ", groups, " groups");
  std::vector<std::int64_t> perm(size_t(std::max<std::int64_t>(count, 0)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = std::int64_t(i);
  std::mt19937_64 rng(seed);
  for (std::int64_t i = count - 1; i > 0; --i) {
    // j uniform in [0, i]: rejection of the top of the 64-bit range (no modulo bias)
    const std::uint64_t range = std::uint64_t(i) + 1;
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                                std::numeric_limits<std::uint64_t>::max() % range;
    std::uint64_t r;
    do r = rng();
    while (r >= limit);
    std::swap(perm[size_t(i)], perm[size_t(r % range)]);
  }
  std::vector<int> fold(perm.size());
  for (size_t p = 0; p < perm.size(); ++p)
    fold[size_t(perm[p])] = int((std::int64_t(p) * groups) / count);
  return fold;
}

namespace bcv {  // (named: the consensus sources compile as one unity batch)

/// One held-out block's matrices: D = X[-I,-J], A = X[I,-J] and B^T = X[-I,J]^T on the
/// device, C = X[I,J] on the host (only the prediction error reads it).
struct Block {
  int index = 0;  ///< a * gene_folds + b
  detail::HostCsr C;
  CsrMatrix<double> D, A, Bt;
  size_type d_rows = 0;
};

Block make_block(const ExecSpace& space, const io::CsrBlock<double>& X,
                 const std::vector<int>& cell_fold, const std::vector<int>& gene_fold, int a,
                 int b, int gene_folds) {
  const Selection I = select(cell_fold, a, true), notI = select(cell_fold, a, false);
  const Selection J = select(gene_fold, b, true), notJ = select(gene_fold, b, false);
  Block blk;
  blk.index = a * gene_folds + b;
  const detail::HostCsr D = submatrix(X, notI, notJ);  // |-I| x |-J|
  blk.d_rows = D.rows;
  blk.D = D.to_device(space, "X[-I,-J]");
  blk.A = submatrix(X, I, notJ).to_device(space, "X[I,-J]");                    // |I| x |-J|
  blk.Bt = submatrix(X, notI, J).transposed().to_device(space, "X[-I,J]^T");     // |J| x |-I|
  blk.C = submatrix(X, I, J);                                                     // |I| x |J|
  return blk;
}

/// The predictions of block `blk` at rank k, one per replicate: D factorized, then the two
/// refits.
BlockPrediction predict(const ExecSpace& space, const Block& blk, int k, const SolverOptions& o,
                        const CrossValidationOptions& cv) {
  std::vector<Job> jobs;
  for (int r = 0; r < cv.replicates; ++r)
    jobs.push_back(Job{k, r, replicate_seed(cv.seed, k, blk.index, r), r});
  const int batch = cv.batch > 0 ? cv.batch : cv.replicates;
  const auto fits = factorize(space, blk.D, jobs, batch, o);
  std::vector<std::vector<double>> spectra, usages_t;
  for (const auto& f : fits) {
    if (f.status == ReplicateStatus::non_finite)
      input_error("cross-validation: the factorization of held-out block ", blk.index,
                  " at k = ", k, " became non-finite: check X and the solver options");
    spectra.push_back(f.H);                               // k x |-J|
    usages_t.push_back(transpose(f.W, blk.d_rows, k));    // k x |-I|
  }
  BlockPrediction out;
  for (auto& r : refit_usages(space, blk.A, spectra, k, batch, o)) out.usages.push_back(std::move(r.W));
  for (auto& r : refit_usages(space, blk.Bt, usages_t, k, batch, o))
    out.spectra_t.push_back(std::move(r.W));
  return out;
}

struct Prepared {
  SolverOptions o;
  std::vector<int> cell_fold, gene_fold;
};
Prepared prepare(const io::CsrBlock<double>& X, const std::vector<int>& ks,
                 const SolverOptions& opts, const CrossValidationOptions& cv) {
  cv.validate();
  Prepared p;
  p.o = opts;
  p.o.return_W = true;
  p.o.validate();
  const std::int64_t n = X.rows(), g = X.ncols;
  if (X.row_begin != 0 || std::int64_t(X.row_offsets.size()) != n + 1)
    input_error("cross-validation: X must be one CSR matrix of all its rows");
  if (n < cv.cell_folds || g < cv.gene_folds)
    input_error("cross-validation: ", n, " cells x ", g, " genes cannot be split into ",
                cv.cell_folds, " x ", cv.gene_folds, " folds");
  for (int k : ks)
    if (k < 1) input_error("k = ", k, " is invalid: the number of components must be >= 1");
  auto folds = cross_validation_folds(n, g, cv);
  p.cell_fold = std::move(folds.cells);
  p.gene_fold = std::move(folds.genes);
  return p;
}

}  // namespace bcv

Folds cross_validation_folds(std::int64_t n, std::int64_t g, const CrossValidationOptions& cv) {
  return Folds{fold_assignment(n, cv.cell_folds, cv.seed),
               fold_assignment(g, cv.gene_folds, bcv::mix(cv.seed))};
}

BlockPrediction predict_block(const ExecSpace& space, const io::CsrBlock<double>& X, int a, int b,
                              int k, const SolverOptions& opts, const CrossValidationOptions& cv) {
  const bcv::Prepared p = bcv::prepare(X, {k}, opts, cv);
  if (a < 0 || a >= cv.cell_folds || b < 0 || b >= cv.gene_folds)
    input_error("cross-validation: no block (", a, ", ", b, ") in a ", cv.cell_folds, " x ",
                cv.gene_folds, " grid");
  const bcv::Block blk = bcv::make_block(space, X, p.cell_fold, p.gene_fold, a, b, cv.gene_folds);
  return bcv::predict(space, blk, k, p.o, cv);
}

// ---- resume --------------------------------------------------------------------------------

namespace bcv {
constexpr const char* checkpoint_header = "knmf cross-validation checkpoint 1";

/// 64-bit FNV-1a over raw bytes.
struct Fnv {
  std::uint64_t h = 14695981039346656037ull;
  void add(const void* data, size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
};
}  // namespace bcv

std::string cross_validation_key(const io::CsrBlock<double>& X, const SolverOptions& opts,
                                 const CrossValidationOptions& cv) {
  bcv::Fnv f;
  f.add(X.row_offsets.data(), X.row_offsets.size() * sizeof(X.row_offsets[0]));
  f.add(X.cols.data(), X.cols.size() * sizeof(X.cols[0]));
  f.add(X.values.data(), X.values.size() * sizeof(X.values[0]));
  std::ostringstream key;
  key << "n=" << X.rows() << " g=" << X.ncols << " nnz=" << X.values.size() << " x=" << std::hex
      << f.h << std::dec << " cell_folds=" << cv.cell_folds << " gene_folds=" << cv.gene_folds
      << " replicates=" << cv.replicates << " seed=" << cv.seed << " batch=" << cv.batch;
  for (const auto& field : solver_option_fields()) key << ' ' << field.name << '=' << field.get(opts);
  return key.str();
}

void CrossValidationCheckpoint::begin(const std::string& key) {
  key_ = key;
  units_.clear();
  resumed_ = 0;
  std::ifstream in(path_);
  std::string line;
  if (!in || !std::getline(in, line) || line != bcv::checkpoint_header) return;
  if (!std::getline(in, line) || line != "key " + key) return;  // another run's
  std::map<std::pair<int, int>, std::vector<double>> units;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    int block = 0, k = 0;
    size_t count = 0;
    if (!(fields >> block >> k >> count) || count > (size_t(1) << 20)) return;  // unreadable
    std::vector<double> errors;
    std::string text;
    for (size_t i = 0; i < count; ++i) {
      if (!(fields >> text)) return;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return;
      errors.push_back(v);
    }
    units[{block, k}] = std::move(errors);
  }
  units_ = std::move(units);
  resumed_ = units_.size();
}

bool CrossValidationCheckpoint::find(int block, int k, std::vector<double>& errors) const {
  const auto it = units_.find({block, k});
  if (it == units_.end()) return false;
  errors = it->second;
  return true;
}

void CrossValidationCheckpoint::save(int block, int k, const std::vector<double>& errors) {
  units_[{block, k}] = errors;
  std::string text = std::string(bcv::checkpoint_header) + "\nkey " + key_ + "\n";
  char buf[40];
  for (const auto& [unit, e] : units_) {
    text += std::to_string(unit.first) + ' ' + std::to_string(unit.second) + ' ' +
            std::to_string(e.size());
    for (double v : e) {
      std::snprintf(buf, sizeof buf, " %.17g", v);  // round-trips exactly
      text += buf;
    }
    text += '\n';
  }
  io::AtomicFile f(path_, path_.string() + " (the cross-validation's checkpoint)");
  f.write(text);
  f.commit();
}

void CrossValidationCheckpoint::remove() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  units_.clear();
}

// ---- the cross-validation --------------------------------------------------------------------

std::vector<CrossValidationK> cross_validate(const ExecSpace& space, const io::CsrBlock<double>& X,
                                             const std::vector<int>& ks, const SolverOptions& opts,
                                             const CrossValidationOptions& cv,
                                             CrossValidationStore* store) {
  const bcv::Prepared p = bcv::prepare(X, ks, opts, cv);
  if (store) store->begin(cross_validation_key(X, p.o, cv));
  std::vector<CrossValidationK> out;
  for (int k : ks) out.push_back(CrossValidationK{k, 0.0, 0.0, 0.0, {}});
  for (int a = 0; a < cv.cell_folds; ++a)
    for (int b = 0; b < cv.gene_folds; ++b) {
      // the units of this block a store holds, then the block built for the others
      const int index = a * cv.gene_folds + b;
      std::vector<std::vector<double>> errors(ks.size());
      std::vector<size_t> todo;
      for (size_t ki = 0; ki < ks.size(); ++ki)
        if (!store || !store->find(index, ks[ki], errors[ki]) ||
            errors[ki].size() != size_t(cv.replicates)) {
          errors[ki].clear();
          todo.push_back(ki);
        }
      if (!todo.empty()) {
        const bcv::Block blk = bcv::make_block(space, X, p.cell_fold, p.gene_fold, a, b, cv.gene_folds);
        for (const size_t ki : todo) {
          const auto pred = bcv::predict(space, blk, ks[ki], p.o, cv);
          for (int r = 0; r < cv.replicates; ++r)
            errors[ki].push_back(bcv::prediction_error(blk.C, pred.usages[size_t(r)],
                                                       pred.spectra_t[size_t(r)], ks[ki],
                                                       p.o.beta_loss));
          if (store) store->save(index, ks[ki], errors[ki]);
        }
      }
      for (size_t ki = 0; ki < ks.size(); ++ki)
        out[ki].errors.insert(out[ki].errors.end(), errors[ki].begin(), errors[ki].end());
    }
  for (auto& row : out) {
    row.replicates = cv.replicates;
    const double m = double(row.errors.size());
    double s = 0.0;
    for (double e : row.errors) s += e;
    row.mean = s / m;
    double v = 0.0;
    for (double e : row.errors) v += (e - row.mean) * (e - row.mean);
    row.sd = m > 1 ? std::sqrt(v / (m - 1)) : 0.0;
    row.std_error = row.sd / std::sqrt(m);
  }
  return out;
}

std::vector<CrossValidationK> cross_validate(const ExecSpace& space, const RowSource& X,
                                             const std::vector<int>& ks, const SolverOptions& opts,
                                             const CrossValidationOptions& cv,
                                             CrossValidationStore* store) {
  io::CsrBlock<double> whole;
  whole.ncols = X.cols();
  X.for_each_block(std::numeric_limits<size_type>::max() / 2, [&](const io::CsrBlock<double>& b) {
    const std::int64_t base = whole.row_offsets.back();
    for (std::int64_t r = 1; r <= b.rows(); ++r) whole.row_offsets.push_back(base + b.row_offsets[size_t(r)] - b.row_offsets[0]);
    whole.cols.insert(whole.cols.end(), b.cols.begin(), b.cols.end());
    whole.values.insert(whole.values.end(), b.values.begin(), b.values.end());
    whole.row_end = b.row_end;
  });
  return cross_validate(space, whole, ks, opts, cv, store);
}

namespace {
/// The row's errors as one value per block: the mean of each block's replicates.
std::vector<double> block_means(const CrossValidationK& row) {
  const size_t r = size_t(std::max(row.replicates, 1));
  if (r == 1 || row.errors.size() % r != 0) return row.errors;
  std::vector<double> out(row.errors.size() / r, 0.0);
  for (size_t i = 0; i < row.errors.size(); ++i) out[i / r] += row.errors[i] / double(r);
  return out;
}

/// Mean and variance (ddof 1) of the paired differences a - b of two rows' block means; false
/// when they cannot be paired (different counts, or fewer than two blocks).
bool paired_difference(const std::vector<double>& a, const std::vector<double>& b, double& mean,
                       double& variance) {
  if (a.size() != b.size() || a.size() < 2) return false;
  const double m = double(a.size());
  mean = 0.0;
  for (size_t i = 0; i < a.size(); ++i) mean += a[i] - b[i];
  mean /= m;
  variance = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i] - mean;
    variance += d * d;
  }
  variance /= m - 1;
  return true;
}
}  // namespace

const char* k_choice_rule_name(KChoiceRule rule) {
  switch (rule) {
    case KChoiceRule::three_pooled_se: return "3se";
    case KChoiceRule::one_se: return "1se";
    case KChoiceRule::smallest_mean: return "min";
  }
  throw LogicError("k_choice_rule_name: unknown rule");
}

KChoiceRule parse_k_choice_rule(const std::string& name, const std::string& option) {
  for (const auto r : k_choice_rules)
    if (name == k_choice_rule_name(r)) return r;
  input_error(option, " '", name, "' is not a rule: use 3se, 1se or min");
}

const char* k_choice_rule_description(KChoiceRule rule) {
  switch (rule) {
    case KChoiceRule::three_pooled_se:
      return "the smallest k within three pooled standard errors of the smallest mean";
    case KChoiceRule::one_se: return "the smallest k within one standard error of the smallest mean";
    case KChoiceRule::smallest_mean: return "the smallest mean prediction error";
  }
  throw LogicError("k_choice_rule_description: unknown rule");
}

int choose_k(const std::vector<CrossValidationK>& rows, KChoiceRule rule) {
  if (rows.empty()) return 0;
  std::vector<CrossValidationK> table = rows;
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.k < b.k; });
  size_t best = 0;
  for (size_t i = 1; i < table.size(); ++i)
    if (table[i].mean < table[best].mean) best = i;
  const auto& b = table[best];
  if (rule == KChoiceRule::smallest_mean) return b.k;
  // the rows paired block by block (the same blocks, so what they share cancels)
  std::vector<std::vector<double>> blocks;
  for (const auto& row : table) blocks.push_back(block_means(row));
  double mean = 0.0, variance = 0.0;
  if (rule == KChoiceRule::three_pooled_se) {
    // the noise of a difference between two k, from every pair of neighbouring rows
    double pooled = 0.0;
    size_t pairs = 0;
    for (size_t i = 0; i + 1 < table.size(); ++i)
      if (paired_difference(blocks[i], blocks[i + 1], mean, variance)) {
        pooled += variance;
        ++pairs;
      }
    const double se = pairs > 0 && pairs + 1 == table.size()
                          ? std::sqrt(pooled / double(pairs) / double(blocks[best].size()))
                          : b.std_error;
    for (const auto& row : table)
      if (row.mean <= b.mean + 3.0 * se) return row.k;  // b itself at the latest
    return b.k;
  }
  int k = b.k;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& row = table[i];
    if (row.k >= k) continue;
    const bool within = paired_difference(blocks[i], blocks[best], mean, variance)
                            ? mean <= std::sqrt(variance / double(blocks[best].size()))
                            : row.mean <= b.mean + b.std_error;
    if (within) k = row.k;
  }
  return k;
}

}  // namespace knmf::consensus
