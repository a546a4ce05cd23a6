// The batched solver for double X (detail/batched.hpp).
#include "detail/batched_impl.hpp"

namespace knmf::detail {
KNMF_BATCHED_TEMPLATES(, double)
}  // namespace knmf::detail
