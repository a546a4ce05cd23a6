/* A test-only LD_PRELOAD library that fills the disk: writes to regular files succeed until
 * KNMF_TEST_WRITE_BUDGET bytes have been written in all (write, pwrite, writev, pwritev and
 * fallocate all count), then fail with ENOSPC (a write across the limit is cut short first, as
 * a real file system does). Without the variable nothing is limited. KNMF_TEST_WRITE_COUNT
 * names a file that receives the bytes written, at exit (how the tests size their budgets).
 * Pipes, terminals and sockets are never limited: the driver's messages still get out.
 * KNMF_TEST_WRITE_ONLY=SUFFIX limits (and counts) only the files whose path ends with SUFFIX:
 * a disk that fills while one output is written, the others untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_llong budget = -1; /* bytes left; -1: unlimited */
static atomic_llong written = 0;

__attribute__((constructor)) static void shim_init(void) {
  const char* b = getenv("KNMF_TEST_WRITE_BUDGET");
  if (b && *b) atomic_store(&budget, atoll(b));
}

__attribute__((destructor)) static void shim_report(void) {
  const char* path = getenv("KNMF_TEST_WRITE_COUNT");
  if (!path || !*path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "%lld\n", (long long)atomic_load(&written));
  fclose(f);
}

/* A regular file on a file system: not a pipe, and not a memfd (memory, not disk). */
static int limited(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  char link[64], target[4096] = {0};
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n >= 7 && memcmp(target, "/memfd:", 7) == 0) return 0;
  const char* only = getenv("KNMF_TEST_WRITE_ONLY");
  if (only && *only) {
    const size_t m = strlen(only);
    return n >= 0 && (size_t)n >= m && memcmp(target + n - (ssize_t)m, only, m) == 0;
  }
  return 1;
}

/* How many of `want` bytes may go to `fd` now: `want` when unlimited, 0 (errno ENOSPC) once the
 * budget is spent. */
static long long grant(int fd, long long want) {
  if (want <= 0 || !limited(fd)) return want;
  long long left = atomic_load(&budget);
  for (;;) {
    if (left < 0) return want;
    const long long take = left < want ? left : want;
    if (atomic_compare_exchange_weak(&budget, &left, left - take)) {
      if (take == 0) errno = ENOSPC;
      return take;
    }
  }
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static ssize_t counted_fd(int fd, ssize_t n) {
  if (n > 0 && limited(fd)) atomic_fetch_add(&written, n);
  return n;
}

ssize_t write(int fd, const void* buf, size_t n) {
  const long long g = grant(fd, (long long)n);
  if (n > 0 && g == 0) return -1;
  return counted_fd(fd, REAL(write)(fd, buf, (size_t)g));
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  const long long g = grant(fd, (long long)n);
  if (n > 0 && g == 0) return -1;
  return counted_fd(fd, REAL(pwrite)(fd, buf, (size_t)g, off));
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  const long long g = grant(fd, (long long)n);
  if (n > 0 && g == 0) return -1;
  return counted_fd(fd, REAL(pwrite64)(fd, buf, (size_t)g, off));
}

static long long iov_bytes(const struct iovec* iov, int cnt) {
  long long s = 0;
  for (int i = 0; i < cnt; ++i) s += (long long)iov[i].iov_len;
  return s;
}

/* Vectored writes: all or nothing (simpler than cutting an iovec short; still a failure). */
ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  const long long want = iov_bytes(iov, cnt);
  if (want > 0 && grant(fd, want) < want) {
    errno = ENOSPC;
    return -1;
  }
  return counted_fd(fd, REAL(writev)(fd, iov, cnt));
}

ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  const long long want = iov_bytes(iov, cnt);
  if (want > 0 && grant(fd, want) < want) {
    errno = ENOSPC;
    return -1;
  }
  return counted_fd(fd, REAL(pwritev)(fd, iov, cnt, off));
}

int fallocate(int fd, int mode, off_t off, off_t len) {
  if (len > 0 && grant(fd, (long long)len) < (long long)len) {
    errno = ENOSPC;
    return -1;
  }
  return REAL(fallocate)(fd, mode, off, len);
}

int posix_fallocate(int fd, off_t off, off_t len) {
  if (len > 0 && grant(fd, (long long)len) < (long long)len) return ENOSPC;
  return REAL(posix_fallocate)(fd, off, len);
}
