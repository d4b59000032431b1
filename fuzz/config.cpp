// Fuzz target: the config-file parser. The input is the file: it is written
// to an anonymous in-memory file (memfd) and read through /proc/self/fd, so
// the parser runs exactly as for a file on disk. Any content either parses or
// is a config error.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("rlock-fuzz-config", 0);
  if (fd < 0) std::abort();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    std::abort();
  auto layer = rlock::config::read_config_file(path);
  if (!layer && layer.error().code != rlock::Error::Code::config) std::abort();
  return 0;
}
