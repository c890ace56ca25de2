// MappedFile::Release: whole pages inside the range leave resident memory and
// read back unchanged (faulted in again from the file); a caller-owned buffer
// and ranges outside the file are left alone. And the engine releases the
// stored rows of the matrices it repacked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "io/gguf.h"
#include "io/mmap_file.h"
#include "model/weights.h"
#include "model/config.h"
#include "test_util.h"

namespace kvtrim::io {
namespace {
namespace KVTRIM_TEST_UNIQUE {  // unique per file (tests/CMakeLists.txt)

TEST(MappedFileRelease, WholePagesReleasedAndReadBackUnchanged) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::string bytes(5 * page + 123, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131 + 7) % 251);
  const std::string path = ::testing::TempDir() + "kvtrim_release_test.bin";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const MappedFile& m = *f.value();
  uint64_t sum = 0;
  for (size_t i = 0; i < m.size(); ++i) sum += m.data()[i];  // make every page resident
  // From byte 10 to page 4 + 10: the whole pages 1..3 inside it.
  EXPECT_EQ(m.Release(m.data() + 10, 4 * page), 3 * page);
  EXPECT_EQ(m.Release(m.data() + 10, page - 20), 0u);            // no whole page inside
  EXPECT_EQ(m.Release(m.data() + 10, m.size()), 0u);              // past the end
  EXPECT_EQ(m.Release(m.data() - page, page), 0u);                // before the start
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), m.size()), bytes);
  uint64_t again = 0;
  for (size_t i = 0; i < m.size(); ++i) again += m.data()[i];
  EXPECT_EQ(again, sum);
  std::remove(path.c_str());
}

TEST(MappedFileRelease, CallerOwnedBufferIsNeverReleased) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::string bytes(4 * page, 'x');
  auto m = MappedFile::FromBuffer(bytes);
  EXPECT_EQ(m->Release(m->data(), m->size()), 0u);  // anonymous memory would be zeroed
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data()), m->size()), bytes);
}

TEST(MappedFileRelease, RepackedMatricesReleasedEmbeddingKept) {
  auto f = GgufFile::Open(test::ModelPath("needle-v1-3.7M-q8_0.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto c = model::ReadConfig(*f.value());
  ASSERT_TRUE(c.ok());
  auto w = model::LoadWeights(*f.value(), c.value());
  ASSERT_TRUE(w.ok()) << w.error().message;
  if (w.value().packed_bytes == 0) GTEST_SKIP() << "KVTRIM_REPACK=0";
  // Every layer matrix is repacked and released (page-aligned interiors);
  // the tied embedding / output table is not.
  size_t layer_bytes = 0;
  for (const auto& L : w.value().layers)
    for (const auto* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) layer_bytes += v->bytes();
  EXPECT_GT(w.value().released_bytes, layer_bytes / 2);
  EXPECT_LE(w.value().released_bytes, layer_bytes);
}

}  // namespace KVTRIM_TEST_UNIQUE
}  // namespace
}  // namespace kvtrim::io
