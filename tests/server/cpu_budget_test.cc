#include "server/cpu_budget.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace streamstats::server {
namespace {

namespace fs = std::filesystem;

TEST(CpuBudget, ReadsCgroupV2CpuMax) {
  EXPECT_EQ(QuotaFromCpuMax("400000 100000\n"), 4.0);
  EXPECT_EQ(QuotaFromCpuMax("150000 100000"), 1.5);
  EXPECT_EQ(QuotaFromCpuMax("50000"), 0.5);  // the default period
  EXPECT_EQ(QuotaFromCpuMax("max 100000\n"), 0);
  EXPECT_EQ(QuotaFromCpuMax(""), 0);
  EXPECT_EQ(QuotaFromCpuMax("abc 100000"), 0);
  EXPECT_EQ(QuotaFromCpuMax("100000 0"), 0);
  EXPECT_EQ(QuotaFromCpuMax("100000 100000 7"), 0);
}

TEST(CpuBudget, ReadsCgroupV1CfsQuota) {
  EXPECT_EQ(QuotaFromCfs("200000\n", "100000\n"), 2.0);
  EXPECT_EQ(QuotaFromCfs("50000", "100000"), 0.5);
  EXPECT_EQ(QuotaFromCfs("-1\n", "100000\n"), 0);
  EXPECT_EQ(QuotaFromCfs("0", "100000"), 0);
  EXPECT_EQ(QuotaFromCfs("x", "100000"), 0);
  EXPECT_EQ(QuotaFromCfs("100000", "0"), 0);
}

// A fake file system root holding only the files a test writes.
class CpuBudgetFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("streamstats_cpu_budget_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    const fs::path p = root_ / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }
  // A cgroup v1 cpu quota of quota_us per period_us in `dir` (under the root).
  void WriteCfs(const std::string& dir, const std::string& quota_us, const std::string& period_us) {
    Write(dir + "/cpu.cfs_quota_us", quota_us + "\n");
    Write(dir + "/cpu.cfs_period_us", period_us + "\n");
  }

  fs::path root_;
};

TEST_F(CpuBudgetFiles, TheTightestQuotaOfTheCgroupAndItsAncestorsRoundedUp) {
  // A Kubernetes pod on cgroup v2 without a cgroup namespace: the limit is on the pod's cgroup.
  Write("proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  Write("sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
  Write("sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");
  Write("sys/fs/cgroup/kubepods/cpu.max", "3000000 100000\n");
  const CpuBudget b = CpuBudgetUnder(root(), 16);
  EXPECT_EQ(b.affinity, 16);
  EXPECT_EQ(b.quota, 2.5);
  EXPECT_EQ(b.cpus, 3);
  EXPECT_EQ(b.quota_file, root() + "/sys/fs/cgroup/kubepods/pod1/cpu.max");
}

TEST_F(CpuBudgetFiles, CgroupV2InItsOwnNamespace) {
  Write("proc/self/cgroup", "0::/\n");
  Write("sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_EQ(CpuBudgetUnder(root(), 8).cpus, 1);
}

TEST_F(CpuBudgetFiles, CgroupV1UnderEitherMountName) {
  // A container with a cgroup namespace: its cgroup is the mount's root.
  Write("proc/self/cgroup", "5:cpuacct,cpu:/\n4:memory:/\n");
  WriteCfs("sys/fs/cgroup/cpu,cpuacct", "200000", "100000");
  EXPECT_EQ(CpuBudgetUnder(root(), 32).cpus, 2);
}

TEST_F(CpuBudgetFiles, CgroupV1WithoutANamespaceFindsTheBindMountedCgroupAsAnAncestor) {
  // Docker without a cgroup namespace: /proc/self/cgroup names the host's path, and the mount
  // shows the container's own cgroup at its root.
  Write("proc/self/cgroup", "3:cpu:/docker/abc123\n");
  WriteCfs("sys/fs/cgroup/cpu", "150000", "100000");
  const CpuBudget b = CpuBudgetUnder(root(), 64);
  EXPECT_EQ(b.quota, 1.5);
  EXPECT_EQ(b.cpus, 2);
}

TEST_F(CpuBudgetFiles, NoQuotaOrAQuotaAboveTheAffinityLeavesTheAffinity) {
  Write("proc/self/cgroup", "1:cpu:/\n0::/\n");
  WriteCfs("sys/fs/cgroup/cpu", "-1", "100000");
  Write("sys/fs/cgroup/cpu.max", "max 100000\n");
  CpuBudget b = CpuBudgetUnder(root(), 6);
  EXPECT_EQ(b.cpus, 6);
  EXPECT_EQ(b.quota, 0);
  Write("sys/fs/cgroup/cpu.max", "800000 100000\n");
  b = CpuBudgetUnder(root(), 6);
  EXPECT_EQ(b.cpus, 6);
  EXPECT_EQ(b.quota, 8.0);
}

TEST_F(CpuBudgetFiles, NothingReadableLeavesTheAffinity) {
  EXPECT_EQ(CpuBudgetUnder(root(), 4).cpus, 4);
  Write("proc/self/cgroup", "garbage\n\n1:cpu:relative\n0::/gone\n");
  EXPECT_EQ(CpuBudgetUnder(root(), 4).cpus, 4);
  EXPECT_EQ(CpuBudgetUnder(root(), 0).cpus, 1);  // at least one
}

TEST(CpuBudget, ThisProcessHasAtLeastOneCpuAndNoMoreThanItsAffinity) {
  const CpuBudget b = DetectCpuBudget();
  EXPECT_GE(b.cpus, 1);
  EXPECT_LE(b.cpus, b.affinity);
}

}  // namespace
}  // namespace streamstats::server
