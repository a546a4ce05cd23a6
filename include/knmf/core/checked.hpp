#pragma once
/// \file
/// Size arithmetic that cannot wrap: products and sums of counts and byte sizes in 64 bits,
/// with an InputError naming what was being sized when the result does not fit in int64
/// (a problem too large for this machine, never a silently wrong size).

#include <cstdint>
#include <initializer_list>

#include "knmf/core/error.hpp"

namespace knmf {

/// The product of `factors` (each >= 0), or InputError("<what>: <a> x <b> x ... does not fit
/// in 64 bits").
inline std::int64_t checked_mul(std::initializer_list<std::int64_t> factors, const char* what) {
  std::int64_t p = 1;
  for (const std::int64_t f : factors) {
    if (f < 0) throw LogicError(detail::concat("internal error: ", what, ": negative size ", f));
    if (__builtin_mul_overflow(p, f, &p)) {
      std::ostringstream os;
      const char* sep = "";
      for (const std::int64_t g : factors) os << sep << g, sep = " x ";
      input_error(what, ": ", os.str(), " does not fit in 64 bits (the problem is too large)");
    }
  }
  return p;
}

/// The sum of `terms` (each >= 0), or InputError naming `what`.
inline std::int64_t checked_add(std::initializer_list<std::int64_t> terms, const char* what) {
  std::int64_t s = 0;
  for (const std::int64_t t : terms) {
    if (t < 0) throw LogicError(detail::concat("internal error: ", what, ": negative size ", t));
    if (__builtin_add_overflow(s, t, &s))
      input_error(what, ": a sum of sizes does not fit in 64 bits (the problem is too large)");
  }
  return s;
}

}  // namespace knmf
