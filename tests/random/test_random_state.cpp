// numpy legacy RandomState, bit for bit against golden values from Debian's numpy 1.24.
#include <gtest/gtest.h>

#include <cstdlib>

#include "knmf/core/error.hpp"
#include "knmf/random/random_state.hpp"
#include "test_support.hpp"

namespace {

double hex_to_double(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

TEST(RandomState, CheckValuesFromTheContract) {
  knmf::RandomState a(0);
  EXPECT_NEAR(a.standard_normal(), 1.76405235, 1e-8);
  EXPECT_NEAR(a.standard_normal(), 0.40015721, 1e-8);
  EXPECT_NEAR(a.standard_normal(), 0.97873798, 1e-8);
  knmf::RandomState b(0);
  EXPECT_EQ(b.random_sample(), 0.5488135039273248);
  knmf::RandomState c(14);
  const std::int64_t expect[] = {59886188, 1812018521, 1173234957, 683264407, 1590974792};
  for (auto e : expect) EXPECT_EQ(c.randint(1, (std::int64_t(1) << 31) - 1), e);
}

TEST(RandomState, SequencesEqualNumpyBitForBit) {
  const auto golden = knmf::test::load_json("rng_golden.json");
  ASSERT_GE(golden["seeds"].size(), 5u);
  for (const auto& g : golden["seeds"]) {
    const std::int64_t seed = g["seed"];
    SCOPED_TRACE("seed " + std::to_string(seed));
    knmf::RandomState rs(seed);
    for (const auto& v : g["standard_normal"]) EXPECT_EQ(rs.standard_normal(), hex_to_double(v));
    for (const auto& v : g["random_sample"]) EXPECT_EQ(rs.random_sample(), hex_to_double(v));
    // The gauss cache carries over across other draws, as in numpy.
    for (const auto& v : g["standard_normal_after"])
      EXPECT_EQ(rs.standard_normal(), hex_to_double(v));

    knmf::RandomState rs2(seed);
    for (const auto& v : g["randint_1_2p31m1"])
      EXPECT_EQ(rs2.randint(1, (std::int64_t(1) << 31) - 1), v.get<std::int64_t>());
    for (const auto& v : g["randint_3_10"]) EXPECT_EQ(rs2.randint(3, 10), v.get<std::int64_t>());

    knmf::RandomState rs3(seed);
    for (const auto& v : g["uint32_raw"])
      EXPECT_EQ(rs3.randint(0, std::int64_t(1) << 32), v.get<std::int64_t>());
  }
}

TEST(RandomState, CnmfJobTableEqualsCnmfPrepare) {
  const auto golden = knmf::test::load_json("rng_golden.json");
  for (const auto& t : golden["cnmf_jobs"]) {
    const auto ks = t["ks"].get<std::vector<int>>();
    const auto jobs = knmf::cnmf_job_table(ks, t["n_iter"].get<int>(), t["seed"].get<int>());
    ASSERT_EQ(jobs.size(), t["jobs"].size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(jobs[i].k, t["jobs"][i][0].get<int>());
      EXPECT_EQ(jobs[i].iter, t["jobs"][i][1].get<int>());
      EXPECT_EQ(jobs[i].seed, t["jobs"][i][2].get<std::int64_t>());
      EXPECT_EQ(jobs[i].index, std::int64_t(i));
    }
  }
}

TEST(RandomState, WorkerSplitIsCnmfModulo) {
  const auto jobs = knmf::cnmf_job_table({5, 6}, 5, 3);
  const auto w0 = knmf::worker_jobs(jobs, 0, 3);
  const auto w1 = knmf::worker_jobs(jobs, 1, 3);
  const auto w2 = knmf::worker_jobs(jobs, 2, 3);
  EXPECT_EQ(w0.size() + w1.size() + w2.size(), jobs.size());
  for (const auto& j : w1) EXPECT_EQ(j.index % 3, 1);
  EXPECT_THROW(knmf::worker_jobs(jobs, 3, 3), knmf::InputError);
  EXPECT_THROW(knmf::worker_jobs(jobs, 0, 0), knmf::InputError);
}

TEST(RandomState, SeedOutsideUint32IsAnError) {
  EXPECT_THROW(knmf::RandomState(-1), knmf::InputError);
  EXPECT_THROW(knmf::RandomState(std::int64_t(1) << 32), knmf::InputError);
  EXPECT_NO_THROW(knmf::RandomState((std::int64_t(1) << 32) - 1));
  try {
    knmf::RandomState bad(-5);
  } catch (const knmf::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("-5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(knmf::cnmf_job_table({0}, 2, 1), knmf::InputError);
}

}  // namespace
