#pragma once
/// \file
/// A deterministic simulator of single-cell UMI counts with planted gene-expression programs,
/// after scsim, the splatter-like simulator of the cNMF paper (Kotliar et al., eLife 2019).
///
/// Model (scsim's, with its parameter names in brackets):
///  1. Gene base means b_j ~ Gamma(shape [mean_shape], rate [mean_rate]); with probability
///     [expoutprob] a gene is an outlier and its mean becomes median(b) * LogNormal(
///     [expoutloc], [expoutscale]). Call the result m_j.
///  2. Identity programs p = 1..P (cell types): each gene is differentially expressed with
///     probability [diffexpprob], with ratio r ~ LogNormal([diffexploc], [diffexpscale])
///     (inverted when below 1, so DE genes go up). Activity programs a = 1..A: the same with
///     their own gene probability and LogNormal([progdeloc], [progdescale]). A program's
///     profile is m_j times its ratios, normalized to sum 1 over genes: the ground-truth
///     `programs` ((P + A) x g).
///  3. Each cell c: an identity t ~ Uniform{1..P}; with probability [progcellfrac] an activity
///     program a ~ Uniform{1..A} with usage u ~ Uniform([minprogusage], [maxprogusage]);
///     library size L ~ LogNormal([libloc], [libscale]). Its mean is
///     lambda_cj = L ((1 - u) program_t[j] + u program_a[j]) (u = 0 without activity): the
///     ground-truth `usages` (n x (P + A)) hold 1 - u and u (each row sums to 1).
///  4. Biological noise (splatter's BCV): per gene chi_j ~ ChiSquare([bcv_dof]),
///     bcv_cj = ([bcv_dispersion] + 1 / sqrt(lambda_cj)) sqrt(bcv_dof / chi_j),
///     mu_cj ~ Gamma(shape 1 / bcv^2, scale lambda_cj bcv^2); count_cj ~ Poisson(mu_cj).
///     (A gamma-Poisson, i.e. negative binomial, overdispersed count.) No dropout, no doublets.
///
/// Reproducibility: the same options give the same counts bit for bit on any machine and for
/// any row-block split or thread count. Random numbers come from knmf's own generator and
/// samplers (src/prepare/sim_random.hpp), never from std:: distributions; each cell
/// draws from its own stream, keyed by (seed, cell index).

#include <cstdint>
#include <string>
#include <vector>

#include "knmf/io/h5ad.hpp"

namespace knmf::prepare {

/// What to simulate. Defaults are knmf's demo: small enough to simulate, prepare (with
/// `demo_num_highvar_genes`) and factorize in seconds on a laptop, with every planted program
/// recovered at correlation >= 0.95 (see evaluate.hpp; tests/prepare checks >= 0.9).
/// Gene-mean, library-size and noise parameters are the ones the cNMF paper fitted to real
/// data (scsim's run_scsim.py); the DE probabilities are raised from its 0.025 because the
/// demo has 2,000 genes instead of 10,000.
struct SimulationOptions {
  std::int64_t n_cells = 5000;          ///< --cells
  std::int64_t n_genes = 2000;          ///< --genes
  int n_programs = 5;                   ///< --programs: identity programs (cell types), >= 1
  int n_activity = 1;                   ///< --activity: activity programs shared across types
  double activity_fraction = 0.3;       ///< --activity-fraction: cells with an activity program
  double min_activity_usage = 0.1;      ///< --min-usage
  double max_activity_usage = 0.7;      ///< --max-usage
  double library_log_mean = 7.64;       ///< --library-log-mean: log library size, mean (~2,100 UMIs)
  double library_log_sd = 0.78;         ///< --library-log-sd
  double gene_mean_shape = 0.34;        ///< gamma shape of base gene means
  double gene_mean_rate = 7.68;         ///< gamma rate of base gene means
  double outlier_probability = 0.00286; ///< high-expression outlier genes
  double outlier_log_mean = 6.15;
  double outlier_log_sd = 0.49;
  double de_probability = 0.1;          ///< --de-probability: DE genes per identity program
  double activity_gene_probability = 0.1;  ///< --activity-gene-probability: genes per activity program
  double de_log_mean = 1.0;             ///< --de-log-mean: log DE ratio, mean (identity and activity)
  double de_log_sd = 1.0;               ///< --de-log-sd
  double bcv_dispersion = 0.448;        ///< --bcv: common biological coefficient of variation
  double bcv_dof = 22.087;              ///< degrees of freedom of the per-gene BCV spread
  std::uint64_t seed = 0;               ///< --seed

  /// InputError naming the option (by its command-line flag) and its value when out of range.
  void validate() const;
};

/// Highly variable genes the demo selects from the default simulation (cNMF's --numgenes).
inline constexpr int demo_num_highvar_genes = 500;

/// One cell's drawn parameters.
struct CellParameters {
  int identity = 0;            ///< identity program, 0..P-1
  int activity = -1;           ///< activity program 0..A-1, or -1 for none
  double activity_usage = 0.0; ///< u (0 without activity)
  double library_size = 0.0;   ///< L
};

/// The simulator: gene-level parameters and the ground-truth programs are drawn at
/// construction (O((P + A) g) memory); cells are drawn on demand, in any row blocks.
class Simulator {
public:
  /// Validates the options (InputError) and draws the programs.
  explicit Simulator(const SimulationOptions& opts);

  const SimulationOptions& options() const { return opts_; }
  std::int64_t n_cells() const { return opts_.n_cells; }
  std::int64_t n_genes() const { return opts_.n_genes; }
  /// P + A: identity programs first, then activity programs.
  int n_programs_total() const { return opts_.n_programs + opts_.n_activity; }

  /// Ground-truth programs, (P + A) x g row-major; each row sums to 1.
  const std::vector<double>& programs() const { return programs_; }
  /// "identity1".."identityP", "activity1".."activityA".
  std::vector<std::string> program_names() const;
  /// Gene means m_j after outliers (before DE), g values.
  const std::vector<double>& gene_means() const { return gene_means_; }

  /// Cell c's identity, activity, usage and library size.
  CellParameters cell(std::int64_t c) const;
  /// Ground-truth usages of cells [r0, r1): (r1 - r0) x (P + A) row-major, rows sum to 1.
  std::vector<double> usages(std::int64_t r0, std::int64_t r1) const;
  /// Counts of cells [r0, r1) as a CSR block (float32 integers, columns sorted, no zeros),
  /// replacing `out`. Rows are simulated in parallel on the host execution space.
  void counts(std::int64_t r0, std::int64_t r1, io::CsrBlock<float>& out) const;

private:
  SimulationOptions opts_;
  std::vector<double> programs_;
  std::vector<double> gene_means_;
  std::vector<double> bcv_gene_factor_;  // sqrt(bcv_dof / chi_j)
};

/// "cell0", "cell1", ... (n names).
std::vector<std::string> simulated_cell_names(std::int64_t n);
/// "gene0", "gene1", ... (g names).
std::vector<std::string> simulated_gene_names(std::int64_t g);

/// A whole simulation in memory.
struct Simulation {
  io::CsrBlock<float> counts;        ///< n x g
  std::vector<double> programs;      ///< (P + A) x g, rows sum to 1
  std::vector<double> usages;        ///< n x (P + A), rows sum to 1
  std::vector<int> identity;         ///< n identity labels 0..P-1
  std::vector<std::string> program_names;
  int n_programs_total = 0;
};
/// Simulate everything at once (for demos and tests; large runs stream with Simulator).
Simulation simulate(const SimulationOptions& opts);

/// Where write_simulation puts its files.
struct SimulationFiles {
  std::string counts;    ///< the .h5ad
  std::string programs;  ///< STEM.truth_programs.df.npz: (P + A) x g, index program names, columns gene names
  std::string usages;    ///< STEM.truth_usages.df.npz: n x (P + A), index cell names, columns program names
  std::int64_t nnz = 0;  ///< stored (non-zero) counts written
};
/// The file names for a counts path: STEM is the path without a trailing ".h5ad".
SimulationFiles simulation_files(const std::string& h5ad_path);

/// Write the counts as an AnnData .h5ad (CSR, float32, obs names cell0..., var names
/// gene0...), streamed in blocks of `block_rows` cells, and the ground truth as cNMF-style
/// DataFrames (`pd.DataFrame(**np.load(path, allow_pickle=True))` loads them). Every file
/// is written atomically (temporary name, then rename).
SimulationFiles write_simulation(const Simulator& sim, const std::string& h5ad_path,
                                 std::int64_t block_rows = 4096);

}  // namespace knmf::prepare
