// The batched solver for float X (detail/batched.hpp).
#include "detail/batched_impl.hpp"

namespace knmf::detail {
KNMF_BATCHED_TEMPLATES(, float)
}  // namespace knmf::detail
