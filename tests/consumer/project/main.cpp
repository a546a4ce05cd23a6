// A downstream project using an installed knmf.
#include <knmf/knmf.hpp>

#include <iostream>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::cout << knmf::build_report();
  knmf::RandomState rs(14);
  const auto first = rs.randint(1, (std::int64_t(1) << 31) - 1);
  if (first != 59886188) {
    std::cout << "unexpected first seed " << first << "\n";
    return 1;
  }
  std::cout << "consumer ok\n";
  return 0;
}
