#pragma once
/// \file
/// Umbrella header: the whole public API of knmf.

#include "knmf/core/error.hpp"
#include "knmf/core/options.hpp"
#include "knmf/core/runtime.hpp"
#include "knmf/core/types.hpp"
#include "knmf/random/random_state.hpp"
#include "knmf/version.hpp"
