// The `zoo` executable: see runner/run.h.
#include <malloc.h>

#include <csignal>
#include <string>
#include <vector>

#include "runner/run.h"

int main(int argc, char** argv) {
  // Each training step frees and reallocates the same activation buffers.
  // By default glibc hands blocks over 128 KiB back to the kernel and faults
  // their pages in again on the next step, a large part of a small model's step;
  // keep blocks up to 32 MiB (glibc's ceiling) and freed memory in the heap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  // Past a file size limit (ulimit -f) the kernel's default for SIGXFSZ
  // kills the process without a word; ignored, the write fails with EFBIG
  // and is reported as a full disk is, naming the file.
  std::signal(SIGXFSZ, SIG_IGN);
  return zoo::run(std::vector<std::string>(argv + 1, argv + argc));
}
