// Shape reduction's piece maps: unmap_run (a whole dim's full positions in
// one pass) agrees with unmap position by position, on plain lines and on
// products nested several deep (a head-split reshape of a reshape ...).
#include <gtest/gtest.h>

#include "engine/stage/line_maps.h"

namespace shardproof::reduction {
namespace {

// A stage with one tensor per listed length (one dim each).
Stage lines_of(const std::vector<int64_t>& lengths) {
  Stage s;
  for (int64_t n : lengths) {
    StageTensor t;
    t.full_shape = {n};
    t.shape = {n};
    t.dtype = DType::F32;
    s.tensors.push_back(t);
  }
  return s;
}

void expect_runs_match(const LineMaps& maps, int root, int64_t reduced_length) {
  for (int64_t g0 = 0; g0 < reduced_length; g0 += 3) {
    const int64_t n = reduced_length - g0;
    const std::vector<int64_t> run = maps.unmap_run(root, g0, n);
    ASSERT_EQ(static_cast<int64_t>(run.size()), n);
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(run[k], maps.unmap(root, g0 + k)) << g0 + k;
  }
}

TEST(LineMaps, UnmapRunIsUnmapOnEveryPositionOfAPlainLine) {
  Stage s = lines_of({40, 7});
  AxisLines lines(s);
  lines.relate(1, 0, 9);  // a slice [9, 16) of the 40
  LineMaps maps(lines);
  maps.build({}, {});
  const int root = lines.find(0).first;
  expect_runs_match(maps, root, maps.reduced_length(0));
  EXPECT_TRUE(maps.unmap_run(root, 0, 0).empty());
}

TEST(LineMaps, UnmapRunIsUnmapOnNestedProducts) {
  // whole 96 = 3 x (4 x 8), each factor sliced so pieces differ; and the
  // same with a frozen layout, where the run is the long one.
  // The factors are slices of longer lines, so they sit at offsets on their roots.
  Stage s = lines_of({96, 3, 4, 8, 2, 5, 11, 16, 7});
  AxisLines lines(s);
  lines.product(0, {1, 2, 3});
  lines.relate(4, 2, 1);  // positions 1..2 of the 4
  lines.relate(5, 3, 2);  // positions 2..6 of the 8
  lines.relate(2, 6, 5);  // the 4 is positions 5..8 of an 11
  lines.relate(3, 7, 6);  // the 8 is positions 6..13 of a 16
  lines.relate(1, 8, 3);  // the 3 is positions 3..5 of a 7
  ASSERT_NE(lines.find(3).second, 0);
  lines.resolve_products();
  for (bool frozen : {false, true}) {
    LineMaps maps(lines);
    ASSERT_TRUE(maps.cut_products().empty());
    std::set<int> freeze;
    if (frozen) {
      for (int a = 0; a < lines.count(); ++a) freeze.insert(lines.find(a).first);
    }
    maps.build(freeze, {});
    const int root = lines.find(0).first;
    const int64_t n = maps.reduced_length(0);
    if (frozen) {
      EXPECT_EQ(n, 96);
    }
    expect_runs_match(maps, root, n);
  }
}

// A rank's shard [256) of a 1024 line whose relations contradict (it is
// positions 256.. by one relation and 768.. by another, as a strided QKV
// shard or a sequence half is): the sound layout can only keep the line
// whole; the periodic one (for proposals) lays it out with boundaries every
// 256, so both relations map to the same reduced shift.
TEST(LineMaps, APeriodicLayoutKeepsRelationsThatContradict) {
  Stage s = lines_of({1024, 256});
  AxisLines lines(s);
  lines.relate(1, 0, 256);
  lines.relate(1, 0, 768);  // contradicts: the same 256 at another offset
  EXPECT_EQ(lines.conflict_periods(), (std::map<int, int64_t>{{lines.find(0).first, 512}}));
  LineMaps sound(lines);
  sound.build({}, {});
  EXPECT_THROW(sound.map_axis(0, 768), std::logic_error);  // 768 is no boundary: no layout
  LineMaps periodic(lines, /*periodic=*/true);
  periodic.build({}, {});
  const int root = lines.find(0).first;
  EXPECT_EQ(periodic.reduced_length(0), 8);  // 4 pieces of 256, 2 each
  EXPECT_EQ(periodic.reduced_length(1), 2);
  // The shard's two offsets map to offsets one reduced period apart.
  EXPECT_EQ(periodic.map(root, 768) - periodic.map(root, 256), 2 * (512 / 256));
}

}  // namespace
}  // namespace shardproof::reduction
