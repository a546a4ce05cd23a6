#pragma once
/// \file
/// The solver engine for the rest of knmf (internal): everything consensus/ and mpi/ use of
/// the solver comes through this header; nothing outside src/solver/ includes
/// src/solver/detail/. It offers
///  * the layout of a batch of slots and its per-slot kernels (slot_gram, slot_dot,
///    mu_update, cd_update, sum_slot_partials, ...: detail/kernels.hpp) and the products with
///    X of each storage format (detail/products.hpp);
///  * the update rules (MuRule, CdRule: their updates and per-slot convergence decisions;
///    with_rule picks one) and run_fixed_h, the fixed-H iterations of one slot from products
///    (detail/rules.hpp; what a rule is: detail/rule.hpp);
///  * RowPartition, which a row-partitioned X specializes (its products on its rows and the
///    reductions over the row blocks: detail/partition.hpp), and KNMF_INSTANTIATE_SOLVER(M),
///    which instantiates the public solver templates for a matrix type M (detail/nmf_impl.hpp):
///    they wrap X in an XOperandOf<M> (detail/x_operand.hpp) and call the batched solver, which
///    is compiled once per value type (detail/batched.hpp, src/solver/batched_float.cpp and
///    batched_double.cpp);
///  * check_spectra_values, the one check of the values of refit spectra.

#include "detail/nmf_impl.hpp"
#include "detail/rules.hpp"
#include "detail/slot_batch.hpp"
