#pragma once
// Checks shared by the results-file tests (test_results_file.cpp, test_results_file_kill.cpp).

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "knmf/core/error.hpp"

#include "knmf/results/consensus_records.hpp"
#include "knmf/results/reader.hpp"
#include "knmf/results/run_info.hpp"
#include "knmf/results/writer.hpp"
#include "test_results_file_support.hpp"

namespace knmf::test {

/// The bytes of a file.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The message of the InputError that `f` throws (a test failure if it throws none).
inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return {};
}

/// Writer options of the tests: no fsync (durability is the kill test's subject).
inline results::ResultsWriteOptions fast() {
  results::ResultsWriteOptions o;
  o.fsync = false;
  return o;
}

/// The run options, genes and job table of two RunInfos are equal (provenance aside).
inline void expect_same_run(const results::RunInfo& a, const results::RunInfo& b) {
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.n_cells, b.n_cells);
  EXPECT_EQ(a.genes, b.genes);
  EXPECT_EQ(a.ks, b.ks);
  EXPECT_EQ(a.n_iter, b.n_iter);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.solver.solver, b.solver.solver);
  EXPECT_EQ(a.solver.tol, b.solver.tol);
  EXPECT_EQ(a.solver.max_iter, b.solver.max_iter);
  EXPECT_EQ(a.solver.check_every, b.solver.check_every);
  EXPECT_EQ(a.solver.alpha_W, b.solver.alpha_W);
  EXPECT_EQ(a.solver.alpha_H, b.solver.alpha_H);
  EXPECT_EQ(a.solver.l1_ratio, b.solver.l1_ratio);
  EXPECT_EQ(a.solver.zero_guard, b.solver.zero_guard);
  EXPECT_EQ(a.solver.eps, b.solver.eps);
  EXPECT_EQ(a.solver.init, b.solver.init);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.solver.beta_loss, b.solver.beta_loss);
  EXPECT_EQ(a.save_usages, b.save_usages);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].k, b.jobs[i].k) << "job " << i;
    EXPECT_EQ(a.jobs[i].iter, b.jobs[i].iter) << "job " << i;
    EXPECT_EQ(a.jobs[i].seed, b.jobs[i].seed) << "job " << i;
    EXPECT_EQ(a.jobs[i].index, b.jobs[i].index) << "job " << i;
  }
}

/// Every replicate flagged completed in `r` holds exactly synthetic_result's values (spectra,
/// usages, table). Returns the number of completed replicates; adds to `mismatches`.
inline std::int64_t check_committed(const results::ResultsReader& r, int* mismatches = nullptr) {
  const results::RunInfo& info = r.info();
  std::int64_t count = 0;
  int bad = 0;
  for (const Job& job : info.jobs) {
    const auto t = r.table(job.k);
    const auto i = static_cast<std::size_t>(job.iter);
    EXPECT_EQ(t.seeds[i], job.seed);
    if (!t.completed[i]) continue;
    ++count;
    const ReplicateResult want = synthetic_result(info, job);
    const std::string where = "k " + std::to_string(job.k) + " iter " + std::to_string(job.iter);
    bool ok = r.spectra(job.k, job.iter) == want.H && t.iterations[i] == want.n_iter &&
              t.error_at_init[i] == want.error_at_init && t.final_error[i] == want.final_error &&
              t.seconds[i] == want.seconds && t.status[i] == results::to_state(want.status);
    if (info.save_usages) ok = ok && r.usages(job.k, job.iter) == stored_usages(info, want);
    EXPECT_TRUE(ok) << r.path() << ": completed replicate " << where << " does not hold its data";
    bad += ok ? 0 : 1;
  }
  if (mismatches) *mismatches += bad;
  return count;
}

/// Two files hold the same run and the same values for every replicate.
inline void expect_same_content(const results::ResultsReader& a, const results::ResultsReader& b) {
  expect_same_run(a.info(), b.info());
  EXPECT_EQ(a.complete(), b.complete());
  for (int k : a.ks()) {
    const auto ta = a.table(k), tb = b.table(k);
    EXPECT_EQ(ta.seeds, tb.seeds) << "k " << k;
    EXPECT_EQ(ta.iterations, tb.iterations) << "k " << k;
    EXPECT_EQ(ta.error_at_init, tb.error_at_init) << "k " << k;
    EXPECT_EQ(ta.final_error, tb.final_error) << "k " << k;
    EXPECT_EQ(ta.seconds, tb.seconds) << "k " << k;
    EXPECT_EQ(ta.status, tb.status) << "k " << k;
    EXPECT_EQ(ta.completed, tb.completed) << "k " << k;
    EXPECT_EQ(a.spectra(k), b.spectra(k)) << "k " << k;
    if (a.has_usages()) {
      for (int it = 0; it < a.n_iter(); ++it)
        EXPECT_EQ(a.usages(k, it), b.usages(k, it)) << "k " << k << " iter " << it;
    }
  }
}

/// Two consensus settings are equal (the provenance, filled in by the writer, aside).
inline void expect_same_settings(const results::ConsensusSettings& a, const results::ConsensusSettings& b) {
  EXPECT_EQ(a.local_density_threshold, b.local_density_threshold);
  EXPECT_EQ(a.local_neighborhood_size, b.local_neighborhood_size);
  EXPECT_EQ(a.kmeans_n_init, b.kmeans_n_init);
  EXPECT_EQ(a.kmeans_seed, b.kmeans_seed);
  EXPECT_EQ(a.kmeans_max_iter, b.kmeans_max_iter);
  EXPECT_EQ(a.kmeans_tol, b.kmeans_tol);
  EXPECT_EQ(a.refit.solver, b.refit.solver);
  EXPECT_EQ(a.refit.tol, b.refit.tol);
  EXPECT_EQ(a.refit.max_iter, b.refit.max_iter);
  EXPECT_EQ(a.refit.alpha_W, b.refit.alpha_W);
  EXPECT_EQ(a.refit.alpha_H, b.refit.alpha_H);
  EXPECT_EQ(a.refit.l1_ratio, b.refit.l1_ratio);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.tpm, b.tpm);
}

/// True when two consensus records hold the same values (EXPECTs name what differs).
inline bool same_record(const results::ConsensusRecord& a, const results::ConsensusRecord& b) {
  const bool same = a.k == b.k && a.n_neighbors == b.n_neighbors &&
                    (a.silhouette == b.silhouette || (a.silhouette != a.silhouette && b.silhouette != b.silhouette)) &&
                    a.prediction_error == b.prediction_error && a.refit_n_iter == b.refit_n_iter &&
                    a.refit_status == b.refit_status && a.replicate_rows == b.replicate_rows &&
                    a.local_density == b.local_density && a.cluster == b.cluster && a.spectra == b.spectra &&
                    a.usages == b.usages && a.float32 == b.float32 && a.has_tpm == b.has_tpm &&
                    a.tpm_genes == b.tpm_genes && a.spectra_tpm == b.spectra_tpm &&
                    a.spectra_score == b.spectra_score && a.starcat == b.starcat &&
                    a.settings.local_density_threshold == b.settings.local_density_threshold &&
                    a.settings.local_neighborhood_size == b.settings.local_neighborhood_size &&
                    a.settings.kmeans_seed == b.settings.kmeans_seed &&
                    a.settings.kmeans_n_init == b.settings.kmeans_n_init && a.settings.tpm == b.settings.tpm;
  return same;
}

inline void expect_same_record(const results::ConsensusRecord& a, const results::ConsensusRecord& b) {
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.n_neighbors, b.n_neighbors);
  EXPECT_EQ(a.prediction_error, b.prediction_error);
  EXPECT_EQ(a.refit_n_iter, b.refit_n_iter);
  EXPECT_EQ(a.refit_status, b.refit_status);
  EXPECT_EQ(a.replicate_rows, b.replicate_rows);
  EXPECT_EQ(a.local_density, b.local_density);
  EXPECT_EQ(a.cluster, b.cluster);
  EXPECT_EQ(a.spectra, b.spectra);
  EXPECT_EQ(a.usages, b.usages);
  EXPECT_EQ(a.float32, b.float32);
  EXPECT_EQ(a.has_tpm, b.has_tpm);
  EXPECT_EQ(a.tpm_genes, b.tpm_genes);
  EXPECT_EQ(a.spectra_tpm, b.spectra_tpm);
  EXPECT_EQ(a.spectra_score, b.spectra_score);
  EXPECT_EQ(a.starcat, b.starcat);
  expect_same_settings(a.settings, b.settings);
  EXPECT_TRUE(same_record(a, b));
}

inline bool same_k_selection(const results::KSelectionTable& a, const results::KSelectionTable& b) {
  return a.k == b.k && a.local_density_threshold == b.local_density_threshold &&
         a.silhouette == b.silhouette && a.prediction_error == b.prediction_error &&
         a.settings.local_density_threshold == b.settings.local_density_threshold;
}

}  // namespace knmf::test
