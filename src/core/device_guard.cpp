// The device memory guard of the device-kernels build (knmf/core/host_access.hpp).
//
// On a host backend "device" Views live in host memory, so host code that reads one directly
// (instead of through host_mirror / host_copy and deep_copy) works on the CPU and fails on a
// GPU. In the device-kernels build the guard makes such code fail on the CPU too: it learns
// every device allocation from Kokkos Tools' allocation events and maps the whole pages inside
// it PROT_NONE. While a Kokkos kernel, a deep_copy or a Kokkos Kernels call runs (their
// begin/end events: a "window"), the allocations it touches are open (PROT_READ | PROT_WRITE):
// those the last window of the same name touched are opened when it begins, and the first
// touch of any other faults and the handler opens that allocation. When the window ends, every
// allocation opened in it is closed again. A fault outside a window names the allocation and
// ends the program.
//
// Opening what a window touches, not every allocation at every window: a window costs two
// mprotect calls per allocation it touches (a kernel touches a few) instead of two per live
// allocation (a batch holds dozens), and closing is what costs (each one flushes the TLB of
// every thread): test_solver_accel alone 62 -> 17 s (.ci/README.md). The check is the same:
// host code outside a window still finds every guarded page closed.
//
// What it catches: any host-code read or write of a device allocation's interior pages outside
// those windows. What it cannot see: bytes of an allocation's first and last partial page
// (small Views are often entirely such bytes), and kernels on the host execution space that
// touch device memory (on this backend they are the same kernels as the device's).

#include "knmf/core/host_access.hpp"
#include "knmf/core/kernel_set.hpp"

#include <Kokkos_Core.hpp>

#include <execinfo.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "knmf/core/types.hpp"

namespace knmf {

#if KNMF_DEVICE_KERNELS_ON_HOST

namespace {

// Kokkos places this header before a View's data in the same allocation.
constexpr std::uintptr_t kokkos_header = sizeof(Kokkos::Impl::SharedAllocationHeader);

struct Range {
  std::uintptr_t lo = 0, hi = 0;  // whole pages inside the allocation's data
  std::string label;
  bool open = false;  // opened in the current window (up front or by a fault)
};

// The fault handler takes this lock too (on a kernel's worker threads), so it is a spin lock,
// never held while guarded memory is touched. A waiter yields its core: with more threads than
// cores (ctest -j, OpenMP), the holder may be waiting for one.
struct SpinLock {
  std::atomic_flag flag = ATOMIC_FLAG_INIT;
  void lock() {
    while (flag.test_and_set(std::memory_order_acquire)) ::sched_yield();
  }
  void unlock() { flag.clear(std::memory_order_release); }
};

struct Guard {
  SpinLock mu;
  std::map<std::uintptr_t, Range> ranges;  // by allocation pointer
  int open_depth = 0;                      // kernels, copies and library calls running
  std::vector<bool> region_opens;          // per pushed region: did it open a window?
  std::uintptr_t page = 4096;
  // The allocations windows of each name (the kernel, copy or call that opened them) touched:
  // opened up front, so a kernel's threads rarely fault. Pages opened up front cannot tell
  // whether they were touched, so every 16th window of a name opens none and learns again.
  struct Learned {
    std::vector<std::uintptr_t> allocations;
    unsigned windows = 0;
  };
  std::unordered_map<std::string, Learned> learned;
  Learned* window = nullptr;  // the one open now
};

Guard& guard() {
  static Guard* g = new Guard;  // never destroyed: events may come during static destruction
  return *g;
}

void set_access(std::uintptr_t lo, std::uintptr_t hi, bool open) {
  if (hi > lo) ::mprotect(reinterpret_cast<void*>(lo), hi - lo, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}
void set_access(const Range& r, bool open) { set_access(r.lo, r.hi, open); }

// A window, named after what opened it: the allocations it touched last time are opened now;
// any other guarded page is opened by its first touch (on_segv) until the window ends.
void open_pages(const std::string& name) {
  auto& g = guard();
  std::lock_guard<SpinLock> lock(g.mu);
  if (g.open_depth++ > 0) return;
  g.window = &g.learned[name];
  if (g.window->windows++ % 16 == 0) {
    g.window->allocations.clear();
    return;
  }
  for (const std::uintptr_t p : g.window->allocations)
    if (auto r = g.ranges.find(p); r != g.ranges.end() && !r->second.open) {
      set_access(r->second, true);
      r->second.open = true;
    }
}

void close_pages() {
  auto& g = guard();
  std::lock_guard<SpinLock> lock(g.mu);
  if (g.open_depth == 0 || --g.open_depth > 0) return;
  auto& allocations = g.window->allocations;
  allocations.clear();
  for (auto& [p, r] : g.ranges)
    if (r.open) {
      set_access(r, false);
      r.open = false;
      allocations.push_back(p);
    }
}

// The guarded allocation holding addr, or ranges.end() (lock held).
std::map<std::uintptr_t, Range>::iterator find_range(Guard& g, std::uintptr_t addr) {
  auto it = g.ranges.upper_bound(addr);  // the first allocation after addr
  if (it == g.ranges.begin()) return g.ranges.end();
  --it;
  return addr >= it->second.lo && addr < it->second.hi ? it : g.ranges.end();
}

bool starts_with(const char* s, const char* prefix) {
  return s && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Device allocations: knmf's labels in the execution space's memory, except host buffers
// ("knmf::host::...") and the host mirrors of device Views ("..._mirror").
bool is_device_allocation(const Kokkos::Tools::SpaceHandle& space, const char* label) {
  if (std::strcmp(space.name, MemSpace::name()) != 0) return false;
  if (!starts_with(label, "knmf::") || starts_with(label, "knmf::host::")) return false;
  return !ends_with(label, "_mirror");
}

void on_allocate(Kokkos::Tools::SpaceHandle space, const char* label, const void* ptr, std::uint64_t size) {
  if (!is_device_allocation(space, label)) return;
  auto& g = guard();
  // Kokkos reads the header from the host: guard only whole pages of the data.
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  Range r{(p + kokkos_header + g.page - 1) / g.page * g.page, (p + kokkos_header + size) / g.page * g.page, label};
  if (r.hi <= r.lo) return;
  set_access(r, false);  // closed until touched in a window (no other thread knows it yet)
  std::lock_guard<SpinLock> lock(g.mu);
  g.ranges[reinterpret_cast<std::uintptr_t>(ptr)] = std::move(r);
}

void on_deallocate(Kokkos::Tools::SpaceHandle, const char*, const void* ptr, std::uint64_t) {
  auto& g = guard();
  std::uintptr_t lo = 0, hi = 0;
  {
    std::lock_guard<SpinLock> lock(g.mu);
    auto it = g.ranges.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == g.ranges.end()) return;
    lo = it->second.lo;
    hi = it->second.hi;
    g.ranges.erase(it);
  }
  set_access(lo, hi, true);  // before free() writes into the chunk
}

void on_begin_kernel(const char* name, std::uint32_t, std::uint64_t*) { open_pages(name); }
void on_end_kernel(std::uint64_t) { close_pages(); }
void on_begin_copy(Kokkos::Tools::SpaceHandle, const char* dst, const void*, Kokkos::Tools::SpaceHandle,
                   const char* src, const void*, std::uint64_t) {
  open_pages(std::string("deep_copy ") + dst + " <- " + src);
}
void on_end_copy() { close_pages(); }

// Kokkos Kernels' calls into the vendor libraries (OpenBLAS here) run inside a region named
// after the call; the library reads the device Views from host code, as cuBLAS does on a GPU.
void on_push_region(const char* name) {
  const bool opens = starts_with(name, "KokkosBlas::") || starts_with(name, "KokkosSparse::") ||
                     starts_with(name, "KokkosKernels::");
  {
    auto& g = guard();
    std::lock_guard<SpinLock> lock(g.mu);
    g.region_opens.push_back(opens);
  }
  if (opens) open_pages(name);
}

void on_pop_region() {
  bool opened = false;
  {
    auto& g = guard();
    std::lock_guard<SpinLock> lock(g.mu);
    if (g.region_opens.empty()) return;
    opened = g.region_opens.back();
    g.region_opens.pop_back();
  }
  if (opened) close_pages();
}

struct sigaction previous_segv;

void on_segv(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const Range* hit = nullptr;
  std::uintptr_t base = 0;
  bool in_window = false;
  std::uintptr_t open_lo = 0, open_hi = 0;  // to open, once the lock is released
  {
    auto& g = guard();
    std::lock_guard<SpinLock> lock(g.mu);
    auto it = find_range(g, addr);
    if (it != g.ranges.end()) {
      if (g.open_depth > 0) {  // a kernel's (or copy's) first touch: open, run it again
        in_window = true;
        if (!it->second.open) {
          it->second.open = true;
          open_lo = it->second.lo;
          open_hi = it->second.hi;
        }
      } else {
        hit = &it->second;
        base = it->first + kokkos_header;
      }
    }
  }
  if (in_window) {
    // The system call outside the lock: its return may switch threads, and a thread switched
    // out holding a spin lock stalls every other one. A thread that finds the range being
    // opened by another faults again until it is.
    set_access(open_lo, open_hi, true);
    return;
  }
  if (hit) {  // host code outside a window
    char msg[512];
    const int n = std::snprintf(msg, sizeof msg,
                                "knmf device memory guard: host code accessed device memory '%s' "
                                "(byte %llu of the View's data) outside a kernel or deep_copy; read "
                                "it through knmf::host_copy / host_mirror (knmf/core/host_access.hpp)\n",
                                hit->label.c_str(), static_cast<unsigned long long>(addr - base));
    if (n > 0) (void)!::write(STDERR_FILENO, msg, std::size_t(n) < sizeof msg ? std::size_t(n) : sizeof msg - 1);
    void* frames[64];
    const int depth = ::backtrace(frames, 64);
    ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
    ::signal(SIGABRT, SIG_DFL);
    std::abort();
  }
  // Not ours: let the previous handler (or the default action) deal with it.
  if (previous_segv.sa_flags & SA_SIGINFO) {
    if (previous_segv.sa_sigaction) return previous_segv.sa_sigaction(sig, info, ctx);
  } else if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
    return previous_segv.sa_handler(sig);
  }
  ::signal(SIGSEGV, SIG_DFL);  // the faulting instruction runs again and ends the program
}

}  // namespace

bool install_device_memory_guard() {
  if constexpr (!host_backend) return false;
  if (const char* env = std::getenv("KNMF_DEVICE_GUARD"); env && std::strcmp(env, "0") == 0) return false;
  static bool installed = false;
  if (installed) return true;
  installed = true;
  guard().page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, &previous_segv);
  namespace T = Kokkos::Tools::Experimental;
  T::set_allocate_data_callback(on_allocate);
  T::set_deallocate_data_callback(on_deallocate);
  T::set_begin_parallel_for_callback(on_begin_kernel);
  T::set_end_parallel_for_callback(on_end_kernel);
  T::set_begin_parallel_reduce_callback(on_begin_kernel);
  T::set_end_parallel_reduce_callback(on_end_kernel);
  T::set_begin_parallel_scan_callback(on_begin_kernel);
  T::set_end_parallel_scan_callback(on_end_kernel);
  T::set_begin_deep_copy_callback(on_begin_copy);
  T::set_end_deep_copy_callback(on_end_copy);
  T::set_push_region_callback(on_push_region);
  T::set_pop_region_callback(on_pop_region);
  return true;
}

#else

bool install_device_memory_guard() { return false; }

#endif

}  // namespace knmf
