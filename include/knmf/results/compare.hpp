#pragma once
/// \file
/// `knmf compare A B` as a library call: do two factorization runs of the same job table agree?
///
/// A and B are each a knmf results file (`knmf factorize ... -o RESULTS.h5`) or a cNMF run
/// folder `OUTPUT_DIR/NAME` (its `cnmf_tmp/NAME.spectra.k_K.iter_R.df.npz` replicate files, or
/// `cnmf combine`'s `cnmf_tmp/NAME.spectra.k_K.merged.df.npz` for a k without replicate files).
/// The (k, iter) jobs present in both are paired; a job present on one side only fails the
/// comparison unless CompareOptions::allow_unpaired. In each pair the k programs (spectra rows)
/// of A are matched one-to-one to those of B by the Hungarian assignment that maximizes the
/// sum of cosine similarities, and the matched rows are compared:
///
///   cos_i  = <a_i, b_m(i)> / (|a_i|_2 |b_m(i)|_2)          (1 when both rows are zero, 0 when one is)
///   d_i    = max_j |a_ij - b_m(i)j| / max(max_j |a_ij|, max_j |b_m(i)j|)   (0 when both are zero)
///
/// Per job: max_rel_diff = max_i d_i, median_rel_diff = median_i d_i, min_cos = min_i cos_i,
/// iteration difference iters_A - iters_B and final-error relative difference
/// |e_A - e_B| / max(|e_A|, |e_B|) when both sides record them (results files do, cNMF's
/// spectra files do not). A job fails when max_rel_diff > rtol or min_cos < min_cos (or either
/// is NaN). docs/compare.md is the long form.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace knmf::results {

/// What `knmf compare` is asked to do.
struct CompareOptions {
  std::string a, b;            ///< results file or cNMF run folder OUTPUT_DIR/NAME
  std::string a_name, b_name;  ///< cNMF run name (default: the run folder's own name)
  double rtol = 1e-6;          ///< a job fails when its max_rel_diff > rtol
  double min_cos = 0.999999;   ///< a job fails when its min_cos < min_cos
  /// Jobs of one side without a partner on the other (only_in_a, only_in_b) do not fail the
  /// comparison (--allow-unpaired); by default they do.
  bool allow_unpaired = false;
  /// Throws InputError naming the option when a value is unusable (rtol < 0, min_cos > 1, ...).
  void validate() const;
};

/// One side as opened: what it is and what it holds.
struct CompareSide {
  std::string path;         ///< as given
  std::string kind;         ///< "knmf-results" or "cnmf"
  std::string name;         ///< cNMF run name (empty for results files)
  std::string description;  ///< one line, e.g. "cNMF run folder 'pbmcA' (merged spectra of k = 5 6)"
  std::int64_t n_genes = 0;
  std::int64_t n_jobs = 0;  ///< (k, iter) jobs with spectra (results files: committed ones)
  std::vector<int> ks;      ///< ranks present
};

/// The comparison of one (k, iter) job present in both A and B.
struct JobComparison {
  int k = 0, iter = 0;
  std::vector<int> match;            ///< program of B matched to program i of A (size k)
  std::vector<double> cosines;       ///< cos_i of each matched pair
  std::vector<double> rel_diffs;     ///< d_i of each matched pair
  double max_rel_diff = 0.0;         ///< max_i d_i (NaN when any d_i is NaN)
  double median_rel_diff = 0.0;      ///< median_i d_i
  double min_cos = 1.0;              ///< min_i cos_i (NaN when any cos_i is NaN)
  std::optional<std::int64_t> iterations_a, iterations_b;  ///< when the side records them
  std::optional<double> final_error_a, final_error_b;      ///< when the side records them
  std::optional<std::int64_t> seed_a, seed_b;              ///< when the side records them
  bool passed = true;
  std::vector<std::string> reasons;  ///< why it failed, e.g. "max rel diff 1e-3 > rtol 1e-6"

  std::optional<std::int64_t> iteration_diff() const;    ///< iterations_a - iterations_b
  std::optional<double> final_error_rel_diff() const;   ///< |eA - eB| / max(|eA|, |eB|)
};

/// Figures over a set of compared jobs (one k, or all of them).
struct CompareSummary {
  int k = 0;                           ///< 0 for the overall summary
  std::int64_t jobs = 0;               ///< jobs compared
  std::int64_t failed = 0;             ///< jobs that fail a threshold
  double max_rel_diff = 0.0;           ///< max over jobs of max_rel_diff
  double median_rel_diff = 0.0;        ///< median of d_i over every matched pair of every job
  double min_cos = 1.0;                ///< min over jobs of min_cos
  std::int64_t iterations_compared = 0;   ///< jobs whose iteration counts both sides record
  std::int64_t iterations_different = 0;  ///< of those, jobs with different counts
  std::int64_t max_abs_iteration_diff = 0;
  std::int64_t final_errors_compared = 0; ///< jobs whose final errors both sides record
  double max_final_error_rel_diff = 0.0;    ///< over those (0 when none)
  double median_final_error_rel_diff = 0.0; ///< over those (0 when none)
};

/// The whole comparison.
struct CompareReport {
  CompareOptions options;
  CompareSide a, b;
  bool genes_reordered = false;  ///< B's genes are A's in another order (B was reordered)
  std::vector<std::pair<int, int>> only_in_a, only_in_b;  ///< (k, iter) jobs not paired
  std::int64_t seed_mismatches = 0;  ///< paired jobs whose recorded seeds differ
  std::vector<JobComparison> jobs;   ///< by k, then iter
  std::vector<CompareSummary> per_k;
  CompareSummary overall;

  /// Jobs without a partner that fail the comparison (none with allow_unpaired).
  bool unpaired_fail() const {
    return !options.allow_unpaired && (!only_in_a.empty() || !only_in_b.empty());
  }
  /// Every compared job within the thresholds, and every job paired (unless allowed).
  bool passed() const { return overall.failed == 0 && !unpaired_fail(); }
};

/// Exit status of `knmf compare` when some job fails a threshold or has no partner (0: all
/// pass; 1: input error).
inline constexpr int compare_failed_exit_code = 3;

/// Compare the spectra of two runs. InputError (one line) when an input cannot be read or is
/// neither a results file nor a cNMF run folder, when the two runs share no (k, iter) job, or
/// when their gene lists differ (compared by name; the same genes in another order are fine).
CompareReport compare_runs(const CompareOptions& options);

/// Compare one job's spectra (k x g, row-major, the same gene order): match A's programs to B's
/// (Hungarian, maximum total cosine), then cos_i, d_i, their max/median/min and the verdict
/// against the thresholds. Leaves `iter` and the iteration/error/seed fields empty.
JobComparison compare_spectra(int k, std::int64_t g, const std::vector<double>& a,
                              const std::vector<double>& b, const CompareOptions& options);

/// The human-readable report (what the driver prints on stdout).
std::string format_compare_report(const CompareReport& report);
/// The report as JSON (what `--json` writes): all figures, per k and overall, every job and the
/// list of failures. NaN and infinities are written as null.
std::string compare_report_json(const CompareReport& report);

}  // namespace knmf::results
