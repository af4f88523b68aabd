#include "daemon/build_id.h"

#include <elf.h>
#include <link.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shardproof::daemon {
namespace {

std::string hex(const unsigned char* data, size_t size) {
  std::string out;
  char byte[3];
  for (size_t i = 0; i < size; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", data[i]);
    out += byte;
  }
  return out;
}

// The NT_GNU_BUILD_ID note of the main program (the first object listed).
std::string gnu_build_id() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0 && desc + note->n_descsz <= end) {
              *static_cast<std::string*>(out) = hex(desc, note->n_descsz);
              return 1;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // only the main program
      },
      &found);
  return found;
}

std::string executable_hash() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string s = bytes.str();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(s.data(), s.size())));
  return buf;
}

}  // namespace

std::string build_id() {
  static const std::string id = [] {
    std::string build = gnu_build_id();
    if (build.empty()) build = executable_hash();
    return std::string(SHARDPROOF_VERSION) + "-" + build;
  }();
  return id;
}

}  // namespace shardproof::daemon
