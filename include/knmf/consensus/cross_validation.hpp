#pragma once
/// \file
/// Choosing k by prediction: bi-cross-validation of the NMF (Owen, A. B. and Perry, P. O.,
/// "Bi-cross-validation of the SVD and the nonnegative matrix factorization", Annals of
/// Applied Statistics 3(2), 2009).
///
/// The cells are split into `cell_folds` groups and the genes into `gene_folds` groups (seeded
/// random partitions into groups whose sizes differ by at most one). For each held-out block
/// (I, J) and each k:
///   D = X[-I, -J]  is factorized at rank k:        D ~ W_D H_D   (the run's solver and options)
///   W_I            is refit to X[I, -J], H_D fixed  (scikit-learn's update_H=False)
///   H_J^T          is refit to X[-I, J]^T, W_D^T fixed
///   X[I, J]        is predicted by W_I H_J,
/// so X[I, J] never enters a fit. The prediction error of a block is relative: for the
/// Frobenius loss ||X[I,J] - W_I H_J||^2 / ||X[I,J]||^2; for another beta loss the divergence
/// D_beta(X[I,J] | W_I H_J) over D_beta(X[I,J] | its mean), the same ratio for a predictor that
/// knows nothing but the block's mean. Its mean over blocks and replicates has a minimum in k
/// where the error of the fit to X itself, which falls as k grows, has none.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "knmf/core/types.hpp"
#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/row_source.hpp"
#include "knmf/solver/options.hpp"

namespace knmf::consensus {

/// The fold grid and its seeds.
struct CrossValidationOptions {
  int cell_folds = 2;     ///< p: groups of cells (>= 2)
  int gene_folds = 2;     ///< q: groups of genes (>= 2)
  int replicates = 1;     ///< factorizations of each block's D per k (different seeds)
  std::uint64_t seed = 14;  ///< the partitions' and the replicates' seeds (< 2^32)
  int batch = 0;          ///< replicates per batch of the solver (0: all of a block's)

  /// Throws InputError naming the option when a value is out of range.
  void validate() const;
};

/// The prediction errors of one k.
struct CrossValidationK {
  int k = 0;
  double mean = 0.0;        ///< over every block and replicate
  double sd = 0.0;          ///< their standard deviation (ddof 1; 0 for one value)
  double std_error = 0.0;   ///< sd / sqrt(count)
  std::vector<double> errors;  ///< block by block (cells' fold major), replicates inner
  /// Values per block in `errors`. The rules of choose_k pair the blocks' means: a block's
  /// replicates share its held-out data, so they are not independent values.
  int replicates = 1;
};

/// The fold of each of `count` items: a permutation of [0, count) from `seed` (Fisher-Yates
/// over a 64-bit Mersenne Twister, written out so that every platform draws the same), its
/// position p put in group p * groups / count. Groups differ in size by at most one.
std::vector<int> fold_assignment(std::int64_t count, int groups, std::uint64_t seed);

/// The folds of the cells (fold_assignment(n, cell_folds, seed)) and of the genes (from a
/// seed derived from `seed`) that cross_validate and predict_block use.
struct Folds {
  std::vector<int> cells, genes;
};
Folds cross_validation_folds(std::int64_t n, std::int64_t g, const CrossValidationOptions& cv);

/// Where cross_validate keeps each finished unit (one held-out block at one k: its
/// replicates' prediction errors), so that a run stopped part way resumes without redoing
/// the units it finished.
class CrossValidationStore {
public:
  virtual ~CrossValidationStore() = default;
  /// Called once, before any find(): `key` identifies the run (cross_validation_key); units
  /// recorded under another key are not this run's.
  virtual void begin(const std::string& key) = 0;
  /// The errors of unit (block, k) recorded before: true and `errors` filled, or false.
  virtual bool find(int block, int k, std::vector<double>& errors) const = 0;
  /// Records a finished unit.
  virtual void save(int block, int k, const std::vector<double>& errors) = 0;
};

/// A store kept in a text file (what `knmf k-selection --cross-validate` uses): its key, then
/// one line per finished unit, the errors printed to round-trip exactly; every save rewrites
/// the file through io::AtomicFile, so a run killed at any point leaves the units it finished
/// and a later run with the same key takes them up. A file that does not parse, or of another
/// key, is ignored (and replaced at the first save). remove() deletes it: a finished run.
class CrossValidationCheckpoint final : public CrossValidationStore {
public:
  explicit CrossValidationCheckpoint(std::filesystem::path path) : path_(std::move(path)) {}
  void begin(const std::string& key) override;
  bool find(int block, int k, std::vector<double>& errors) const override;
  void save(int block, int k, const std::vector<double>& errors) override;
  void remove();
  /// Units taken up from the file by begin().
  std::size_t resumed() const { return resumed_; }
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
  std::string key_;
  std::map<std::pair<int, int>, std::vector<double>> units_;
  std::size_t resumed_ = 0;
};

/// The identity of a cross-validation run: X's shape and a checksum of its stored entries,
/// the grid's options and every solver option's canonical text.
std::string cross_validation_key(const io::CsrBlock<double>& X, const SolverOptions& opts,
                                 const CrossValidationOptions& cv);

/// The bi-cross-validation of X (cells x genes, host CSR covering rows [0, n)) at each k of
/// `ks`, with the solver options of the run (opts.return_W is set internally). Sparse X is
/// never densified: each block's matrices are CSR sub-matrices of X. With a `store`, the units
/// it holds for this run are taken from it (a block whose units are all there is not even
/// built) and every unit computed is saved to it as it finishes: the same table as a run in
/// one go, bit for bit.
std::vector<CrossValidationK> cross_validate(const ExecSpace& space, const io::CsrBlock<double>& X,
                                             const std::vector<int>& ks, const SolverOptions& opts,
                                             const CrossValidationOptions& cv,
                                             CrossValidationStore* store = nullptr);

/// What one held-out block (a, b) predicts at rank k, one entry per replicate: the usages
/// W_I (|I| x k, row-major) refit to X[I,-J] and the spectra H_J as their transpose
/// (|J| x k, row-major) refit to X[-I,J]^T. X[I,J] is never read. The cells and genes of the
/// block are those of cross_validation_folds' cells == a and genes == b, in their order in X.
struct BlockPrediction {
  std::vector<std::vector<double>> usages;
  std::vector<std::vector<double>> spectra_t;
};
BlockPrediction predict_block(const ExecSpace& space, const io::CsrBlock<double>& X, int a, int b,
                              int k, const SolverOptions& opts, const CrossValidationOptions& cv);

/// The same for X read from a row source (once, into host memory as one CSR matrix).
std::vector<CrossValidationK> cross_validate(const ExecSpace& space, const RowSource& X,
                                             const std::vector<int>& ks, const SolverOptions& opts,
                                             const CrossValidationOptions& cv,
                                             CrossValidationStore* store = nullptr);

/// How choose_k picks k from the table.
enum class KChoiceRule {
  /// The default: the smallest k whose mean is within three standard errors of the smallest
  /// mean. The standard error is that of the mean of a paired difference between two k: the
  /// variance of the blocks' differences e_k - e_k' (each block's mean over its replicates) for
  /// each pair of neighbouring rows, averaged over all those pairs (pooled: one pair of a 2 x 2
  /// grid has 3 degrees of freedom, too few to trust alone), over the number of blocks. Chosen
  /// with one replicate per block: more make the means more precise, and the rule moves
  /// toward the smallest mean (perf/studies/cross-validation.md). Three, not one: beyond the planted k
  /// the error keeps falling by small, consistent amounts (perf/studies/cross-validation.md gives
  /// how often each rule finds the planted k). Rows that cannot be paired (without `errors`,
  /// different counts, one value each): the smallest mean's std_error instead.
  three_pooled_se,
  /// The smallest k within one standard error of the smallest mean: of the paired differences
  /// to it (the blocks' means) when both rows have their `errors`, else of the minimum's own
  /// mean (std_error).
  one_se,
  /// The k with the smallest mean.
  smallest_mean,
};

/// Every rule, the default first.
inline constexpr KChoiceRule k_choice_rules[] = {KChoiceRule::three_pooled_se, KChoiceRule::one_se,
                                                 KChoiceRule::smallest_mean};

/// The rule's name as the driver's --cv-rule and Python's cv_rule spell it ("3se", "1se",
/// "min"), and back (InputError naming `option` for another value).
const char* k_choice_rule_name(KChoiceRule rule);
KChoiceRule parse_k_choice_rule(const std::string& name, const std::string& option);
/// A phrase for the printed choice ("within three pooled standard errors of the smallest mean").
const char* k_choice_rule_description(KChoiceRule rule);

/// The k that `rule` chooses from the table (rows in any order of k); 0 for an empty table.
int choose_k(const std::vector<CrossValidationK>& table,
             KChoiceRule rule = KChoiceRule::three_pooled_se);

}  // namespace knmf::consensus
